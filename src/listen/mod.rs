//! The one way this process serves HTTP: the metrics/health port, the debug socket
//! (and its optional TCP address) and the admission and conversion webhooks all
//! run on [`Server`]. Binding is separate from serving, so the operator binds every
//! listener before anything runs. A server's accept thread polls every connection
//! that is idle or still sending its request (`gather.rs`: TLS handshakes happen
//! there too) and hands only complete requests to a fixed pool of handler threads
//! over a bounded channel; handlers give keep-alive connections back. So an idle,
//! slow or keep-alive client costs a file descriptor, never a thread. When every
//! handler is busy and the backlog is full, the connection is closed at once
//! instead of piling up. Every request has a deadline (first byte + `io_timeout`;
//! slow or silent clients are cut off), a write timeout and a body size limit: one
//! [`Limits`]. The stream is plain TCP, a unix socket, or TLS over TCP (the
//! webhooks).
//!
//! Threads: `<server>` accepts (spawned by `operator.rs` from [`Server::serve`]);
//! `<server>-N` handle requests (spawned by the accept thread when it starts).
// Needs unsafe for poll(2); each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

mod gather;
pub(crate) mod http1;

use crate::threads;
use crossbeam_channel::{Receiver, bounded, unbounded};
use gather::{Pending, Progress};
use http1::ReadError;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{self, BufReader, Cursor, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One request, read whole.
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// Without the query string.
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) content_type: String,
    pub(crate) body: Vec<u8>,
}

/// What a service answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
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
    pub(crate) fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

/// Answers requests; called on handler threads.
pub(crate) trait Service: Send + Sync + 'static {
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
    pub(crate) fn small() -> Limits {
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
pub(crate) struct Server {
    name: String,
    socket: Socket,
    tls: Option<Arc<ServerConfig>>,
    service: Arc<dyn Service>,
    limits: Limits,
    stop: Arc<AtomicBool>,
}

/// Stops a running [`Server`] from another thread.
#[derive(Clone)]
pub(crate) struct Stopper {
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
    pub(crate) fn stop(&self) {
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
    pub(crate) fn bind_tcp(
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
    pub(crate) fn on_unix(
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
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The same server under another thread name (errors keep the bind-time one).
    pub(crate) fn renamed(mut self, name: &str) -> Server {
        self.name = name.to_string();
        self
    }

    /// The bound TCP address (the real port when 0 was asked for).
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        match &self.socket {
            Socket::Tcp(l) => l.local_addr().ok(),
            Socket::Unix(..) => None,
        }
    }

    /// A handle that stops [`Server::serve`].
    pub(crate) fn stopper(&self) -> Option<Stopper> {
        let wake = match &self.socket {
            Socket::Tcp(_) => Wake::Tcp(self.local_addr()?),
            Socket::Unix(_, path) => Wake::Unix(path.clone()),
        };
        Some(Stopper {
            flag: Arc::clone(&self.stop),
            wake,
        })
    }

    /// The accept thread's body: starts the handler threads, then runs the poll
    /// loop (`gather.rs`) until stopped: connections wait there, costing a file
    /// descriptor, until a whole request has arrived; only then does a handler
    /// take one. Handlers give keep-alive connections back between requests.
    pub(crate) fn serve(self) {
        let (tx, rx) = bounded::<Pending>(self.limits.backlog);
        let (back_tx, back_rx) = unbounded::<Pending>();
        let (mut wake_rx, wake_tx) = match UnixStream::pair() {
            Ok(pair) => pair,
            Err(e) => return self.cannot_serve(&e),
        };
        for i in 0..self.limits.workers.max(1) {
            let worker = Worker {
                rx: rx.clone(),
                back: back_tx.clone(),
                wake: wake_tx.try_clone(),
                service: Arc::clone(&self.service),
                limits: self.limits,
            };
            let name = format!("{}-{i}", self.name);
            if let Err(e) = threads::spawn(&name, move || worker.run()) {
                crate::log::error("cannot start a handler thread", &[("error", &e)]);
            }
        }
        let nonblocking = self
            .set_listener_nonblocking()
            .and_then(|()| wake_rx.set_nonblocking(true))
            .and_then(|()| wake_tx.set_nonblocking(true));
        if let Err(e) = nonblocking {
            return self.cannot_serve(&e);
        }
        let mut waiting: Vec<Pending> = Vec::new();
        while !self.stop.load(Ordering::SeqCst) {
            let ready = poll_ready(self.listener_fd(), wake_rx.as_raw_fd(), &waiting);
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let mut fresh = Vec::new();
            if ready.wake {
                gather::drain(&mut wake_rx);
                fresh.extend(back_rx.try_iter());
            }
            if ready.listener {
                fresh.extend(self.accept_all());
            }
            self.advance(&mut waiting, &ready.conns, fresh, &tx);
        }
    }

    fn cannot_serve(&self, e: &io::Error) {
        let error = e.to_string();
        crate::log::error("cannot serve", &[("server", &self.name), ("error", &error)]);
    }

    /// Reads the connections poll marked (and the new or returned ones), hands
    /// complete requests to the handlers, closes the closed and the expired.
    fn advance(
        &self,
        waiting: &mut Vec<Pending>,
        marked: &[bool],
        fresh: Vec<Pending>,
        tx: &crossbeam_channel::Sender<Pending>,
    ) {
        let io = self.limits.io_timeout;
        let tls = self.tls.as_ref();
        // Bytes held by every waiting connection, kept up to date as each is read
        // (growth added) and as it leaves (its bytes taken off).
        let mut held: usize = waiting.iter().chain(&fresh).map(|p| p.buf.len()).sum();
        let now = Instant::now();
        let mut kept = Vec::with_capacity(waiting.len() + fresh.len());
        let polled = waiting.drain(..).zip(marked.iter().copied());
        for (mut p, readable) in polled.chain(fresh.into_iter().map(|p| (p, true))) {
            let before = p.buf.len();
            let progress = match readable {
                true => p.pull(tls, io, held),
                false if now >= p.deadline => Progress::Closed,
                false => Progress::Waiting,
            };
            held = held - before + p.buf.len();
            if progress == Progress::Waiting && now < p.deadline {
                kept.push(p);
                continue;
            }
            held -= p.buf.len();
            if progress == Progress::Complete && tx.try_send(p).is_err() {
                crate::log::warn("server busy: connection closed", &[("server", &self.name)]);
            }
        }
        if kept.len() > MAX_WAITING {
            // Too many waiting: the oldest go first.
            kept.sort_by_key(|p| p.deadline);
            kept.drain(..kept.len() - MAX_WAITING);
        }
        *waiting = kept;
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

    /// Accepts every pending connection, non-blocking, as new waiting ones.
    fn accept_all(&self) -> Vec<Pending> {
        let mut accepted = Vec::new();
        loop {
            let conn = match &self.socket {
                Socket::Tcp(l) => l.accept().map(|(s, _)| Conn::Tcp(s)),
                Socket::Unix(l, _) => l.accept().map(|(s, _)| Conn::Unix(s)),
            };
            match conn {
                Ok(conn) => {
                    if gather::set_nonblocking(&conn, true).is_ok() {
                        let p = Pending::new(conn, None, Vec::new(), self.limits.io_timeout);
                        accepted.push(p);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return accepted,
                Err(_) => {
                    // E.g. out of file descriptors: do not spin.
                    std::thread::sleep(Duration::from_millis(50));
                    return accepted;
                }
            }
        }
    }
}

/// Connections waiting in the poll loop, at most.
const MAX_WAITING: usize = 4096;

/// What one poll found ready.
struct PollReady {
    listener: bool,
    wake: bool,
    /// Per waiting connection: readable, writable (TLS), closed, or failed.
    conns: Vec<bool>,
}

/// Polls the listener, the wake-up socket and every waiting connection until one
/// is ready or the nearest deadline passes.
fn poll_ready(listener: RawFd, wake: RawFd, waiting: &[Pending]) -> PollReady {
    let entry = |fd, events| libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let mut fds = vec![entry(listener, libc::POLLIN), entry(wake, libc::POLLIN)];
    fds.extend(waiting.iter().map(|p| {
        let out = if p.want_write { libc::POLLOUT } else { 0 };
        entry(p.conn.fd(), libc::POLLIN | out)
    }));
    let now = Instant::now();
    let timeout_ms = waiting
        .iter()
        .map(|p| {
            let left = p.deadline.saturating_duration_since(now);
            i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1)
        })
        .min()
        .unwrap_or(-1);
    // SAFETY: `fds` is a valid, initialised array of `fds.len()` pollfd entries.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    let ready = |fd: &libc::pollfd| n > 0 && fd.revents != 0;
    PollReady {
        listener: ready(&fds[0]),
        wake: ready(&fds[1]),
        conns: fds[2..].iter().map(ready).collect(),
    }
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

    fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => {
                let _ = s.set_nodelay(true);
                s.set_write_timeout(t)
            }
            Conn::Unix(s) => s.set_write_timeout(t),
        }
    }
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.read(buf),
            Conn::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Conn::Tcp(s) => s.write(buf),
            Conn::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.flush(),
            Conn::Unix(s) => s.flush(),
        }
    }
}

impl ReadTimeout for Conn {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Conn::Tcp(s) => s.set_read_timeout(t),
            Conn::Unix(s) => s.set_read_timeout(t),
        }
    }
}

/// One handler thread.
struct Worker {
    rx: Receiver<Pending>,
    /// Keep-alive connections go back to the poll loop, which `wake` wakes.
    back: crossbeam_channel::Sender<Pending>,
    wake: io::Result<UnixStream>,
    service: Arc<dyn Service>,
    limits: Limits,
}

/// The stream a handler reads a request from: what the poll loop gathered, then
/// the socket (for the rest of a request the loop handed over early).
type Reader<S> = BufReader<io::Chain<Cursor<Vec<u8>>, S>>;

impl Worker {
    fn run(self) {
        for pending in self.rx.iter() {
            let _ = self.connection(pending);
        }
    }

    /// Answers the request the poll loop gathered; a keep-alive connection goes
    /// back to the loop, anything else is closed.
    fn connection(&self, p: Pending) -> io::Result<()> {
        gather::set_nonblocking(&p.conn, false)?;
        p.conn.set_write_timeout(Some(self.limits.io_timeout))?;
        let timed = Timed {
            sock: p.conn,
            deadline: p.deadline,
        };
        match p.tls {
            Some(tls) => {
                let (mut stream, kept) = self.request(StreamOwned::new(tls, timed), p.buf);
                match kept {
                    Some(buf) => self.give_back(stream.sock.sock, Some(stream.conn), buf),
                    None => {
                        stream.conn.send_close_notify();
                        stream.flush()
                    }
                }
            }
            None => match self.request(timed, p.buf) {
                (timed, Some(buf)) => self.give_back(timed.sock, None, buf),
                (mut timed, None) => timed.flush(),
            },
        }
    }

    /// Answers one request; the stream, and the bytes already read past the
    /// request when the connection is kept alive.
    fn request<S: Read + Write>(&self, stream: S, gathered: Vec<u8>) -> (S, Option<Vec<u8>>) {
        let mut reader: Reader<S> = BufReader::new(Cursor::new(gathered).chain(stream));
        let keep_alive = match self.exchange(&mut reader) {
            Ok(keep_alive) => keep_alive,
            Err(ReadError::Reject(status, msg)) => {
                let _ = send(
                    reader.get_mut().get_mut().1,
                    &Reply::text(status, msg),
                    false,
                );
                false
            }
            Err(ReadError::Closed | ReadError::Io) => false,
        };
        let mut left = reader.buffer().to_vec();
        let (cursor, stream) = reader.into_inner().into_inner();
        let unread = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
        left.extend_from_slice(cursor.get_ref().get(unread..).unwrap_or_default());
        (stream, keep_alive.then_some(left))
    }

    /// Returns a keep-alive connection to the poll loop.
    fn give_back(&self, conn: Conn, tls: Option<ServerConnection>, buf: Vec<u8>) -> io::Result<()> {
        gather::set_nonblocking(&conn, true)?;
        let pending = Pending::new(conn, tls, buf, self.limits.io_timeout);
        if self.back.send(pending).is_ok() {
            if let Ok(wake) = &self.wake {
                gather::wake(wake);
            }
        }
        Ok(())
    }

    /// Reads one request, answers it; returns whether to keep the connection.
    fn exchange<S: Read + Write>(&self, reader: &mut Reader<S>) -> Result<bool, ReadError> {
        let head = http1::read_head(reader)?;
        if head.expect_continue {
            let stream = reader.get_mut().get_mut().1;
            stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            stream.flush()?;
        }
        let body = http1::read_body(reader, &head, self.limits.max_body)?;
        let request = Request {
            method: head.method,
            path: head.path,
            query: head.query,
            content_type: head.content_type,
            body,
        };
        let reply = self.service.serve(&request);
        let keep_alive = head.keep_alive && self.limits.keep_alive;
        send(reader.get_mut().get_mut().1, &reply, keep_alive)?;
        Ok(keep_alive)
    }
}

fn send(w: &mut impl Write, reply: &Reply, keep_alive: bool) -> io::Result<()> {
    http1::write_response(w, reply.status, reply.content_type, &reply.body, keep_alive)
}

/// A socket that can time out reads.
trait ReadTimeout: Read + Write {
    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

/// A socket whose reads fail once `deadline` passes.
struct Timed<S> {
    sock: S,
    deadline: Instant,
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

    /// Slowloris clients (a head trickled byte by byte) and idle keep-alive
    /// connections wait in the accept thread's poll loop, not on handlers: with
    /// two handlers and sixty such connections, a real request is answered at
    /// once, and the server still has its fixed threads.
    #[test]
    fn slow_and_idle_keep_alive_connections_hold_no_handler() {
        let limits = Limits {
            workers: 2,
            io_timeout: Duration::from_secs(5),
            ..Limits::default()
        };
        let (addr, stop) = start("lt-loris", limits);
        let mut idle = Vec::new();
        for i in 0..30 {
            let mut s = TcpStream::connect(addr).expect("connect");
            write!(s, "GET /idle{i} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
            let mut answer = [0u8; 64];
            let n = s.read(&mut answer).expect("answer");
            assert!(
                answer[..n].starts_with(b"HTTP/1.1 200"),
                "keep-alive answer"
            );
            idle.push(s);
        }
        let mut loris: Vec<TcpStream> = (0..30)
            .map(|_| TcpStream::connect(addr).expect("connect"))
            .collect();
        for byte in b"GET /slow HTTP/1.1\r\n".iter().take(4) {
            for s in &mut loris {
                s.write_all(&[*byte]).expect("trickle");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let started = Instant::now();
        assert!(get(addr, "/real").ends_with("GET /real "));
        let took = started.elapsed();
        assert!(took < Duration::from_millis(500), "answered after {took:?}");
        assert_eq!(threads_named("lt-loris"), 3, "accept thread and 2 handlers");
        // The idle keep-alive connections still work.
        write!(
            idle[0],
            "GET /again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .expect("send");
        let mut text = String::new();
        idle[0].read_to_string(&mut text).expect("read");
        assert!(text.ends_with("GET /again "), "{text}");
        drop((idle, loris));
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
