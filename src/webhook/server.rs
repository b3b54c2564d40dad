//! The HTTPS server under each webhook (admission and conversion): one accept
//! thread hands connections to a small fixed pool of handler threads over a
//! bounded channel; when every handler is busy and the backlog is full, new
//! connections are closed at once instead of piling up. Each connection has a
//! deadline for reading a whole request (slow or silent clients are cut off), a
//! write timeout, and a body size limit. `GET /healthz` answers here; every other
//! request must be a JSON `POST` and goes to the [`Handler`].

use super::http1::{self, ReadError};
use crossbeam_channel::{Receiver, bounded};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{self, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a handler answers.
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

/// Answers one webhook request: a JSON POST to `path`. Called on handler threads.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, path: &str, body: &[u8]) -> Reply;
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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            workers: 16,
            backlog: 64,
            max_body: 16 * 1024 * 1024,
            io_timeout: Duration::from_secs(10),
        }
    }
}

/// A bound server, ready to run on its own thread.
pub struct TlsServer {
    name: &'static str,
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    handler: Arc<dyn Handler>,
    limits: Limits,
    stop: Arc<AtomicBool>,
}

/// Stops a running [`TlsServer`] from another thread.
#[derive(Clone)]
pub struct Stopper {
    flag: Arc<AtomicBool>,
    addr: SocketAddr,
}

impl Stopper {
    /// Stops accepting; handler threads finish their current request.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            });
        }
        let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(500));
    }
}

impl TlsServer {
    /// Binds `address:port`; `name` (`admission`, `conversion`) names threads and logs.
    pub fn bind(
        name: &'static str,
        address: &str,
        port: u16,
        tls: Arc<ServerConfig>,
        handler: Arc<dyn Handler>,
        limits: Limits,
    ) -> Result<TlsServer, String> {
        let host = address.trim_start_matches('[').trim_end_matches(']');
        let listener = TcpListener::bind((host, port)).map_err(|e| {
            format!("{name} webhook server: cannot listen on {address}:{port}: {e}")
        })?;
        Ok(TlsServer {
            name,
            listener,
            tls,
            handler,
            limits,
            stop: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The bound address (the real port when 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// `admission` or `conversion`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// A handle that stops [`TlsServer::serve`].
    pub fn stopper(&self) -> Option<Stopper> {
        Some(Stopper {
            flag: Arc::clone(&self.stop),
            addr: self.local_addr()?,
        })
    }

    /// The accept thread's body: starts the handler threads, then hands them
    /// connections until stopped.
    pub fn serve(self) {
        let (tx, rx) = bounded::<TcpStream>(self.limits.backlog);
        for i in 0..self.limits.workers.max(1) {
            let worker = Worker {
                rx: rx.clone(),
                tls: Arc::clone(&self.tls),
                handler: Arc::clone(&self.handler),
                limits: self.limits,
            };
            let name = format!("webhook-{}-{i}", self.name);
            if let Err(e) = crate::threads::spawn(&name, move || worker.run()) {
                crate::log::error("cannot start webhook handler thread", &[("error", &e)]);
            }
        }
        for conn in self.listener.incoming() {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(tcp) = conn else {
                // E.g. out of file descriptors: do not spin.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            };
            if tx.try_send(tcp).is_err() {
                crate::log::warn(
                    "webhook server busy: connection closed",
                    &[("server", self.name)],
                );
            }
        }
    }
}

/// One handler thread.
struct Worker {
    rx: Receiver<TcpStream>,
    tls: Arc<ServerConfig>,
    handler: Arc<dyn Handler>,
    limits: Limits,
}

impl Worker {
    fn run(self) {
        for tcp in self.rx.iter() {
            let _ = self.connection(tcp);
        }
    }

    /// Serves one connection: requests in a row while the client keeps it alive.
    fn connection(&self, tcp: TcpStream) -> io::Result<()> {
        tcp.set_write_timeout(Some(self.limits.io_timeout))?;
        let _ = tcp.set_nodelay(true);
        let conn = ServerConnection::new(Arc::clone(&self.tls)).map_err(io::Error::other)?;
        let timed = Timed {
            tcp,
            deadline: Instant::now() + self.limits.io_timeout,
        };
        let mut stream = BufReader::new(StreamOwned::new(conn, timed));
        loop {
            stream.get_mut().sock.deadline = Instant::now() + self.limits.io_timeout;
            let keep_alive = match self.exchange(&mut stream) {
                Ok(keep_alive) => keep_alive,
                Err(ReadError::Reject(status, msg)) => {
                    let reply = Reply::text(status, msg);
                    let _ = send(stream.get_mut(), &reply, false);
                    false
                }
                Err(ReadError::Closed | ReadError::Io(_)) => false,
            };
            if !keep_alive {
                let s = stream.get_mut();
                s.conn.send_close_notify();
                return s.flush();
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
        let reply = route(&*self.handler, &head, &body);
        send(stream.get_mut(), &reply, head.keep_alive)?;
        Ok(head.keep_alive)
    }
}

fn send(w: &mut impl Write, reply: &Reply, keep_alive: bool) -> io::Result<()> {
    http1::write_response(w, reply.status, reply.content_type, &reply.body, keep_alive)
}

/// `/healthz`, method and content-type checks, then the handler.
fn route(handler: &dyn Handler, head: &http1::Head, body: &[u8]) -> Reply {
    match (head.method.as_str(), head.path.as_str()) {
        ("GET", "/healthz") => Reply::text(200, "ok\n"),
        (_, "/healthz") => Reply::text(405, "method not allowed\n"),
        ("POST", path) => {
            let media = head
                .content_type
                .split(';')
                .next()
                .unwrap_or_default()
                .trim();
            if media != "application/json" {
                return Reply::text(415, "Content-Type must be application/json\n");
            }
            handler.handle(path, body)
        }
        _ => Reply::text(405, "only POST is accepted\n"),
    }
}

/// A TCP stream whose reads fail once `deadline` passes.
struct Timed {
    tcp: TcpStream,
    deadline: Instant,
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "request deadline"));
        }
        self.tcp.set_read_timeout(Some(left))?;
        self.tcp.read(buf)
    }
}

impl Write for Timed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tcp.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}
