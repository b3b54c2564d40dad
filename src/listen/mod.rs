//! The one way this process serves HTTP: the metrics/health port, the debug socket
//! (and its optional TCP address) and the admission and conversion webhooks all
//! run on [`Server`]. Binding is separate from serving, so the operator binds every
//! listener before anything runs. A server's accept thread keeps new connections
//! (polled, outside the pool) until their first bytes arrive, then hands them to a
//! fixed pool of handler threads over a bounded channel; when every handler is busy
//! and the backlog is full, the connection is closed at once instead of piling up.
//! Every connection has a deadline for reading a whole request (slow or silent
//! clients are cut off), a write timeout and a body size limit: one [`Limits`].
//! The stream is plain TCP, a unix socket, or TLS over TCP (the webhooks).
//!
//! Threads: `<server>` accepts (spawned by `operator.rs` from [`Server::serve`]);
//! `<server>-N` handle requests (spawned by the accept thread when it starts).

pub mod http1;

use crate::threads;
use crossbeam_channel::{Receiver, bounded};
use http1::ReadError;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One request, read whole.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// Without the query string.
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub body: Vec<u8>,
}

/// What a service answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Reply {
    /// A JSON reply with status 200.
    pub fn json(body: Vec<u8>) -> Reply {
        Reply {
            status: 200,
            content_type: "application/json",
            body,
        }
    }

    /// A plain-text reply.
    pub fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

/// Answers requests; called on handler threads.
pub trait Service: Send + Sync + 'static {
    fn serve(&self, request: &Request) -> Reply;
}

/// Resource bounds of one server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Handler threads (requests served at once).
    pub workers: usize,
    /// Accepted connections waiting for a handler thread.
    pub backlog: usize,
    pub max_body: usize,
    /// Time to read a whole request (and idle keep-alive time); write timeout.
    pub io_timeout: Duration,
    /// Whether a connection may carry more than one request. Without, a handler
    /// is free again as soon as it answered.
    pub keep_alive: bool,
}

impl Default for Limits {
    /// The webhooks' bounds: the API server calls them concurrently.
    fn default() -> Self {
        Limits {
            workers: 16,
            backlog: 64,
            max_body: 16 * 1024 * 1024,
            io_timeout: Duration::from_secs(10),
            keep_alive: true,
        }
    }
}

impl Limits {
    /// The metrics and debug ports' bounds: scrapers, probes and a person; small
    /// bodies; one request per connection (Prometheus and kubelet probes are fine
    /// with `Connection: close`), so no idle connection holds a handler.
    pub fn small() -> Limits {
        Limits {
            workers: 8,
            backlog: 32,
            max_body: 64 * 1024,
            io_timeout: Duration::from_secs(10),
            keep_alive: false,
        }
    }
}

/// Where a server listens.
enum Socket {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

/// A bound server, ready to run on its own thread.
pub struct Server {
    name: String,
    socket: Socket,
    tls: Option<Arc<ServerConfig>>,
    service: Arc<dyn Service>,
    limits: Limits,
    stop: Arc<AtomicBool>,
}

/// Stops a running [`Server`] from another thread.
#[derive(Clone)]
pub struct Stopper {
    flag: Arc<AtomicBool>,
    wake: Wake,
}

#[derive(Clone)]
enum Wake {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Stopper {
    /// Stops accepting (a connection of our own wakes the accept call); handler
    /// threads finish their current request.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        match &self.wake {
            Wake::Tcp(addr) => {
                let mut addr = *addr;
                if addr.ip().is_unspecified() {
                    addr.set_ip(match addr.ip() {
                        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                    });
                }
                let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(500));
            }
            Wake::Unix(path) => drop(UnixStream::connect(path)),
        }
    }
}

impl Server {
    /// Binds `address:port` (TLS when `tls` is given); `name` names threads and
    /// logs, and the error.
    pub fn bind_tcp(
        name: &str,
        address: &str,
        port: u16,
        tls: Option<Arc<ServerConfig>>,
        service: Arc<dyn Service>,
        limits: Limits,
    ) -> Result<Server, String> {
        let host = address.trim_start_matches('[').trim_end_matches(']');
        let listener = TcpListener::bind((host, port))
            .map_err(|e| format!("{name}: cannot listen on {address}:{port}: {e}"))?;
        Ok(Server::new(
            name,
            Socket::Tcp(listener),
            tls,
            service,
            limits,
        ))
    }

    /// Serves on a unix socket the caller bound at `path` (it owns the path's
    /// preparation and permissions).
    pub fn on_unix(
        name: &str,
        listener: UnixListener,
        path: PathBuf,
        service: Arc<dyn Service>,
        limits: Limits,
    ) -> Server {
        Server::new(name, Socket::Unix(listener, path), None, service, limits)
    }

    fn new(
        name: &str,
        socket: Socket,
        tls: Option<Arc<ServerConfig>>,
        service: Arc<dyn Service>,
        limits: Limits,
    ) -> Server {
        Server {
            name: name.to_string(),
            socket,
            tls,
            service,
            limits,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The server's name (threads are named after it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same server under another thread name (errors keep the bind-time one).
    pub fn renamed(mut self, name: &str) -> Server {
        self.name = name.to_string();
        self
    }

    /// The bound TCP address (the real port when 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match &self.socket {
            Socket::Tcp(l) => l.local_addr().ok(),
            Socket::Unix(..) => None,
        }
    }

    /// A handle that stops [`Server::serve`].
    pub fn stopper(&self) -> Option<Stopper> {
        let wake = match &self.socket {
            Socket::Tcp(_) => Wake::Tcp(self.local_addr()?),
            Socket::Unix(_, path) => Wake::Unix(path.clone()),
        };
        Some(Stopper {
            flag: Arc::clone(&self.stop),
            wake,
        })
    }

    /// The accept thread's body: starts the handler threads, then hands them
    /// connections until stopped. A connection waits here, outside the handler
    /// pool, until its first bytes arrive (or its deadline passes, and it is
    /// closed), so clients that connect and say nothing never hold a handler.
    pub fn serve(self) {
        let (tx, rx) = bounded::<Conn>(self.limits.backlog);
        for i in 0..self.limits.workers.max(1) {
            let worker = Worker {
                rx: rx.clone(),
                tls: self.tls.clone(),
                service: Arc::clone(&self.service),
                limits: self.limits,
            };
            let name = format!("{}-{i}", self.name);
            if let Err(e) = threads::spawn(&name, move || worker.run()) {
                crate::log::error("cannot start a handler thread", &[("error", &e)]);
            }
        }
        if let Err(e) = self.set_listener_nonblocking() {
            crate::log::error(
                "cannot serve",
                &[("server", &self.name), ("error", &e.to_string())],
            );
            return;
        }
        let mut waiting: Vec<Waiting> = Vec::new();
        while !self.stop.load(Ordering::SeqCst) {
            let listener_ready = wait_readable(self.listener_fd(), &mut waiting, self.limits);
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            for conn in take_ready(&mut waiting, self.limits.io_timeout) {
                if tx.try_send(conn).is_err() {
                    crate::log::warn("server busy: connection closed", &[("server", &self.name)]);
                }
            }
            if listener_ready {
                self.accept_all(&mut waiting);
            }
        }
    }

    fn set_listener_nonblocking(&self) -> io::Result<()> {
        match &self.socket {
            Socket::Tcp(l) => l.set_nonblocking(true),
            Socket::Unix(l, _) => l.set_nonblocking(true),
        }
    }

    fn listener_fd(&self) -> RawFd {
        match &self.socket {
            Socket::Tcp(l) => l.as_raw_fd(),
            Socket::Unix(l, _) => l.as_raw_fd(),
        }
    }

    /// Accepts every pending connection into `waiting` (the oldest waiting one is
    /// closed when there are too many).
    fn accept_all(&self, waiting: &mut Vec<Waiting>) {
        loop {
            let conn = match &self.socket {
                Socket::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
                Socket::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
            };
            match conn {
                Ok(conn) => {
                    if waiting.len() >= MAX_WAITING {
                        waiting.remove(0);
                    }
                    waiting.push(Waiting {
                        conn,
                        since: Instant::now(),
                        ready: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    // E.g. out of file descriptors: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    return;
                }
            }
        }
    }
}

/// Connections accepted and waiting for their first bytes, at most.
const MAX_WAITING: usize = 1024;

/// An accepted connection that has not sent anything yet.
struct Waiting {
    conn: Conn,
    since: Instant,
    /// Readable (or closed): a handler takes it now.
    ready: bool,
}

/// Polls the listener and the waiting connections until one of them is readable
/// or the oldest waiting connection's deadline passes. Marks the readable waiting
/// ones; true if the listener is readable.
fn wait_readable(listener: RawFd, waiting: &mut [Waiting], limits: Limits) -> bool {
    let mut fds: Vec<libc::pollfd> = std::iter::once(listener)
        .chain(waiting.iter().map(|w| w.conn.fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms = waiting
        .iter()
        .map(|w| {
            let left = (w.since + limits.io_timeout).saturating_duration_since(Instant::now());
            i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1)
        })
        .min()
        .unwrap_or(-1);
    // SAFETY: `fds` is a valid, initialised array of `fds.len()` pollfd entries.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n <= 0 {
        return false;
    }
    for (w, fd) in waiting.iter_mut().zip(&fds[1..]) {
        w.ready = fd.revents != 0;
    }
    fds[0].revents != 0
}

/// Removes the ready connections (returned, for the handlers) and the ones whose
/// deadline passed (closed).
fn take_ready(waiting: &mut Vec<Waiting>, deadline: Duration) -> Vec<Conn> {
    let now = Instant::now();
    let mut ready = Vec::new();
    let mut kept = Vec::with_capacity(waiting.len());
    for w in waiting.drain(..) {
        if w.ready {
            ready.push(w.conn);
        } else if now.duration_since(w.since) < deadline {
            kept.push(w);
        }
    }
    *waiting = kept;
    ready
}

/// An accepted connection.
enum Conn {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Conn {
    fn fd(&self) -> RawFd {
        match self {
            Conn::Tcp(s) => s.as_raw_fd(),
            Conn::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// One handler thread.
struct Worker {
    rx: Receiver<Conn>,
    tls: Option<Arc<ServerConfig>>,
    service: Arc<dyn Service>,
    limits: Limits,
}

impl Worker {
    fn run(self) {
        for conn in self.rx.iter() {
            let _ = self.connection(conn);
        }
    }

    /// Serves one connection: requests in a row while the client keeps it alive.
    fn connection(&self, conn: Conn) -> io::Result<()> {
        let deadline = Instant::now() + self.limits.io_timeout;
        match (conn, &self.tls) {
            (Conn::Tcp(tcp), Some(tls)) => {
                tcp.set_write_timeout(Some(self.limits.io_timeout))?;
                let _ = tcp.set_nodelay(true);
                let tls = ServerConnection::new(Arc::clone(tls)).map_err(io::Error::other)?;
                let stream = StreamOwned::new(
                    tls,
                    Timed {
                        sock: tcp,
                        deadline,
                    },
                );
                let mut stream = self.requests(BufReader::new(stream));
                let s = stream.get_mut();
                s.conn.send_close_notify();
                s.flush()
            }
            (Conn::Tcp(tcp), None) => {
                tcp.set_write_timeout(Some(self.limits.io_timeout))?;
                let _ = tcp.set_nodelay(true);
                let stream = Timed {
                    sock: tcp,
                    deadline,
                };
                self.requests(BufReader::new(stream)).get_mut().flush()
            }
            (Conn::Unix(unix), _) => {
                unix.set_write_timeout(Some(self.limits.io_timeout))?;
                let stream = Timed {
                    sock: unix,
                    deadline,
                };
                self.requests(BufReader::new(stream)).get_mut().flush()
            }
        }
    }

    /// Answers requests until the client stops keeping the connection alive.
    fn requests<S: Read + Write + Deadline>(&self, mut stream: BufReader<S>) -> BufReader<S> {
        loop {
            stream
                .get_mut()
                .set_deadline(Instant::now() + self.limits.io_timeout);
            let keep_alive = match self.exchange(&mut stream) {
                Ok(keep_alive) => keep_alive,
                Err(ReadError::Reject(status, msg)) => {
                    let _ = send(stream.get_mut(), &Reply::text(status, msg), false);
                    false
                }
                Err(ReadError::Closed | ReadError::Io) => false,
            };
            if !keep_alive {
                return stream;
            }
        }
    }

    /// Reads one request, answers it; returns whether to keep the connection.
    fn exchange<S: Read + Write>(&self, stream: &mut BufReader<S>) -> Result<bool, ReadError> {
        let head = http1::read_head(stream)?;
        if head.expect_continue {
            stream
                .get_mut()
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            stream.get_mut().flush()?;
        }
        let body = http1::read_body(stream, &head, self.limits.max_body)?;
        let request = Request {
            method: head.method,
            path: head.path,
            query: head.query,
            content_type: head.content_type,
            body,
        };
        let reply = self.service.serve(&request);
        let keep_alive = head.keep_alive && self.limits.keep_alive;
        send(stream.get_mut(), &reply, keep_alive)?;
        Ok(keep_alive)
    }
}

fn send(w: &mut impl Write, reply: &Reply, keep_alive: bool) -> io::Result<()> {
    http1::write_response(w, reply.status, reply.content_type, &reply.body, keep_alive)
}

/// A stream whose request deadline can be moved (the TLS wrapper passes it on).
trait Deadline {
    fn set_deadline(&mut self, deadline: Instant);
}

impl<S: Deadline + Read + Write> Deadline for StreamOwned<ServerConnection, S> {
    fn set_deadline(&mut self, deadline: Instant) {
        self.sock.set_deadline(deadline);
    }
}

/// A socket that can time out reads.
trait ReadTimeout: Read + Write {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

impl ReadTimeout for TcpStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
}

impl ReadTimeout for UnixStream {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, t)
    }
}

/// A socket whose reads fail once `deadline` passes.
struct Timed<S> {
    sock: S,
    deadline: Instant,
}

impl<S: ReadTimeout> Deadline for Timed<S> {
    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }
}

impl<S: ReadTimeout> Read for Timed<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request deadline"));
        }
        self.sock.set_read_timeout(Some(left))?;
        self.sock.read(buf)
    }
}

impl<S: ReadTimeout> Write for Timed<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.sock.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    struct Echo;
    impl Service for Echo {
        fn serve(&self, req: &Request) -> Reply {
            Reply::text(200, &format!("{} {} {}", req.method, req.path, req.query))
        }
    }

    fn start(name: &str, limits: Limits) -> (SocketAddr, Stopper) {
        let server =
            Server::bind_tcp(name, "127.0.0.1", 0, None, Arc::new(Echo), limits).expect("bind");
        let (addr, stop) = (
            server.local_addr().expect("addr"),
            server.stopper().expect("stop"),
        );
        threads::spawn(name, move || server.serve()).expect("spawn");
        (addr, stop)
    }

    fn get(addr: SocketAddr, target: &str) -> String {
        let mut s = TcpStream::connect(addr).expect("connect");
        write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read");
        text
    }

    /// Threads named after the server (its accept and handler threads).
    fn threads_named(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                    .filter(|c| c.trim_end().starts_with(prefix))
                    .count()
            })
            .unwrap_or(0)
    }

    #[test]
    fn many_connections_use_a_fixed_pool_of_threads() {
        let limits = Limits {
            workers: 3,
            ..Limits::small()
        };
        let (addr, stop) = start("lt-pool", limits);
        assert!(get(addr, "/a?b=1").ends_with("GET /a b=1"));
        let before = threads_named("lt-pool");
        assert_eq!(before, 4, "accept thread and 3 handlers");
        for i in 0..200 {
            assert!(get(addr, &format!("/{i}")).contains(&format!("GET /{i} ")));
        }
        assert_eq!(threads_named("lt-pool"), before);
        stop.stop();
    }

    #[test]
    fn a_silent_client_is_cut_at_the_deadline_and_others_are_served() {
        let limits = Limits {
            workers: 2,
            io_timeout: Duration::from_millis(300),
            ..Limits::small()
        };
        let (addr, stop) = start("lt-slow", limits);
        let mut slow = TcpStream::connect(addr).expect("connect");
        slow.write_all(b"GET /slow HTTP/1.1\r\n")
            .expect("half a head");
        let started = Instant::now();
        assert!(
            get(addr, "/other").ends_with("GET /other "),
            "served meanwhile"
        );
        slow.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut rest = Vec::new();
        let _ = slow.read_to_end(&mut rest);
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "cut after {took:?}"
        );
        assert!(
            !String::from_utf8_lossy(&rest).contains("GET /slow"),
            "never answered"
        );
        stop.stop();
    }

    /// Connections that send nothing wait outside the handler pool, so they cannot
    /// hold every handler: a real request is answered at once.
    #[test]
    fn silent_connections_do_not_hold_the_handlers() {
        let limits = Limits {
            workers: 2,
            io_timeout: Duration::from_secs(3),
            ..Limits::small()
        };
        let (addr, stop) = start("lt-idle", limits);
        let silent: Vec<TcpStream> = (0..10)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        std::thread::sleep(Duration::from_millis(100)); // let them be accepted
        let started = Instant::now();
        assert!(get(addr, "/real").ends_with("GET /real "));
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "answered after {took:?}");
        drop(silent);
        stop.stop();
    }

    #[test]
    fn small_servers_answer_one_request_per_connection() {
        let (addr, stop) = start("lt-close", Limits::small());
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("two requests");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut text = String::new();
        s.read_to_string(&mut text)
            .expect("read until the server closes");
        assert!(
            text.contains("GET /a ") && !text.contains("GET /b"),
            "{text}"
        );
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
        stop.stop();
    }

    #[test]
    fn a_unix_socket_server_answers_and_stops() {
        let dir = std::env::temp_dir().join(format!("listen-test-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).expect("bind");
        let server = Server::on_unix(
            "lt-unix",
            listener,
            path.clone(),
            Arc::new(Echo),
            Limits::small(),
        );
        let stop = server.stopper().expect("stopper");
        let thread = threads::spawn("lt-unix", move || server.serve()).expect("spawn");
        let mut s = UnixStream::connect(&path).expect("connect");
        s.write_all(b"POST /x HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi")
            .expect("send");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("read");
        assert!(
            text.starts_with("HTTP/1.1 200") && text.ends_with("POST /x "),
            "{text}"
        );
        stop.stop();
        thread.join().expect("accept thread ends");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
