//! The network side: an accept thread, one thread per connection (a watch keeps
//! its connection's thread for the life of the stream), plain TCP or rustls, and
//! the per-request steps every API call goes through before routing — counting,
//! logging, injected delay and failures, per-client pauses and cuts (`clients`),
//! and bearer-token checks.

use crate::clients::{Admission, ClientFaults, client_of};
use crate::http::{self, Request, Response};
use crate::router::{self, Reply};
use crate::status::ApiError;
use crate::store::Store;
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::collections::HashMap;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

/// The request log keeps at most this many lines (the oldest half is dropped).
const LOG_CAP: usize = 200_000;

/// Pending fault injection.
#[derive(Debug, Default)]
pub struct Faults {
    /// Requests of any kind still to fail, and with which code.
    pub fail_left: usize,
    pub fail_code: u16,
    /// Failures for requests whose `VERB /path?query` contains a pattern.
    pub rules: Vec<FailRule>,
    pub delay: Duration,
}

/// `fail_matching`: fail `left` more requests containing `pattern` with `code`.
#[derive(Debug)]
pub struct FailRule {
    pub pattern: String,
    pub left: usize,
    pub code: u16,
}

/// State shared by the accept thread, connection threads and the `Sim` handle.
pub struct Shared {
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    pub log: Mutex<Vec<String>>,
    pub count: AtomicUsize,
    /// Set when the `Sim` is dropped; every thread checks it.
    pub shutdown: AtomicBool,
    /// Clones of live sockets, shut down on drop so threads unblock.
    pub conns: Mutex<HashMap<u64, TcpStream>>,
    pub next_conn: AtomicU64,
    pub require_token: Option<String>,
    /// Paused and cut clients (`Sim::pause_client`, `Sim::cut_client`).
    pub clients: ClientFaults,
    /// Interval between BOOKMARKs on idle watches, in milliseconds.
    pub bookmark_ms: AtomicU64,
    /// Refuse `sendInitialEvents` (a server without watch-list streaming).
    pub no_watch_list: AtomicBool,
    /// Log every request to stderr (env `KUBE_SIM_TRACE`).
    pub trace: bool,
    /// Base URL, e.g. `http://127.0.0.1:4321`.
    pub url: String,
}

/// Locks a mutex, recovering from poisoning (a panicked thread must not wedge the server).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Current bookmark interval.
    pub fn bookmark_interval(&self) -> Duration {
        Duration::from_millis(self.bookmark_ms.load(Ordering::SeqCst))
    }

    /// The store, locked.
    pub fn store(&self) -> MutexGuard<'_, Store> {
        lock(&self.store)
    }
}

/// A client connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Stream {
    /// Whether the peer presented a client certificate the CA verified.
    fn client_verified(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(s) => s.conn.peer_certificates().is_some_and(|c| !c.is_empty()),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Runs the accept loop on its own thread until `shared.shutdown` is set.
pub fn spawn_acceptor(listener: TcpListener, shared: Arc<Shared>, tls: Option<Arc<ServerConfig>>) {
    thread::spawn(move || {
        for tcp in listener.incoming() {
            if shared.shutdown.load(Ordering::SeqCst) {
                break;
            }
            let Ok(tcp) = tcp else { continue };
            let (shared, tls) = (shared.clone(), tls.clone());
            thread::spawn(move || serve_connection(shared, tcp, tls));
        }
    });
}

/// Serves one connection until it closes, errors, or the server shuts down.
fn serve_connection(shared: Arc<Shared>, tcp: TcpStream, tls: Option<Arc<ServerConfig>>) {
    let id = shared.next_conn.fetch_add(1, Ordering::SeqCst);
    let Ok(probe) = tcp.try_clone() else { return };
    if let Ok(c) = tcp.try_clone() {
        lock(&shared.conns).insert(id, c);
    }
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_write_timeout(Some(Duration::from_secs(30)));
    let stream = match tls {
        Some(cfg) => match ServerConnection::new(cfg) {
            Ok(conn) => Stream::Tls(Box::new(StreamOwned::new(conn, tcp))),
            Err(_) => return,
        },
        None => Stream::Plain(tcp),
    };
    let _ = request_loop(&shared, BufReader::new(stream), &probe, id);
    lock(&shared.conns).remove(&id);
    shared.clients.closed(id);
    let _ = probe.shutdown(Shutdown::Both);
}

fn request_loop(
    shared: &Arc<Shared>,
    mut reader: BufReader<Stream>,
    probe: &TcpStream,
    conn: u64,
) -> io::Result<()> {
    loop {
        if reader.buffer().is_empty() && !wait_readable(shared, probe) {
            return Ok(());
        }
        probe.set_read_timeout(Some(Duration::from_secs(30)))?;
        let req = match read_full_request(&mut reader) {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let resp = Response::json(400, &ApiError::bad_request(e.to_string()).to_status());
                return http::write_response(reader.get_mut(), &resp);
            }
            Err(e) => return Err(e),
        };
        let client = client_of(req.header("authorization"));
        let down = || shared.shutdown.load(Ordering::SeqCst);
        if shared.clients.admit(conn, client, probe, &down) == Admission::Drop {
            return Ok(());
        }
        let verified = reader.get_ref().client_verified();
        let reply = handle(shared, &req, verified);
        if shared.trace {
            trace(&req, &reply);
        }
        match reply {
            Reply::Full(resp) => http::write_response(reader.get_mut(), &resp)?,
            Reply::Watch(plan) => {
                if !crate::watch::stream(shared, *plan, reader.get_mut(), probe)? {
                    return Ok(());
                }
            }
        }
        if req.wants_close() {
            return Ok(());
        }
    }
}

/// One stderr line per request (`KUBE_SIM_TRACE=1`), for debugging clients.
fn trace(req: &Request, reply: &Reply) {
    let code = match reply {
        Reply::Full(r) => r.code,
        Reply::Watch(_) => 200,
    };
    let ct = req.header("content-type").unwrap_or("-");
    eprintln!(
        "kube-sim: {code} {} [{ct}] accept={}",
        req.log_line(),
        req.header("accept").unwrap_or("-")
    );
}

/// Reads one request, answering `Expect: 100-continue` before the body.
fn read_full_request(reader: &mut BufReader<Stream>) -> io::Result<Option<Request>> {
    let Some(mut req) = http::read_head(reader)? else {
        return Ok(None);
    };
    if http::expects_continue(&req) {
        reader
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        reader.get_mut().flush()?;
    }
    req.body = http::read_body(reader, &req)?;
    Ok(Some(req))
}

/// Waits for the next request's first byte, checking for shutdown meanwhile.
fn wait_readable(shared: &Shared, probe: &TcpStream) -> bool {
    if probe
        .set_read_timeout(Some(Duration::from_millis(250)))
        .is_err()
    {
        return false;
    }
    let mut b = [0u8; 1];
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return false;
        }
        match probe.peek(&mut b) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return false,
        }
    }
}

/// Whether a watch's peer has gone, checked without blocking: end of stream,
/// a socket error, or any bytes at all. A client never sends anything while a
/// watch response streams (HTTP/1.1 clients do not pipeline), so bytes mean a
/// TLS close_notify or a confused peer; either way the stream should end.
pub fn peer_closed(probe: &TcpStream) -> bool {
    if probe.set_nonblocking(true).is_err() {
        return false;
    }
    let mut b = [0u8; 1];
    let gone = match probe.peek(&mut b) {
        Ok(_) => true,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    };
    let _ = probe.set_nonblocking(false);
    gone
}

/// Steps every request takes: count, log, delay, injected failure, auth, route.
fn handle(shared: &Arc<Shared>, req: &Request, verified: bool) -> Reply {
    shared.count.fetch_add(1, Ordering::SeqCst);
    {
        let mut log = lock(&shared.log);
        if log.len() >= LOG_CAP {
            log.drain(..LOG_CAP / 2);
        }
        log.push(req.log_line());
    }
    let (delay, fail) = take_faults(shared, &req.log_line());
    if !delay.is_zero() {
        thread::sleep(delay);
    }
    if let Some(code) = fail {
        let mut resp = Response::json(code, &ApiError::for_code(code).to_status());
        if code == 429 {
            resp = resp.with_header("Retry-After", "1");
        }
        return Reply::Full(resp);
    }
    if let Some(token) = &shared.require_token {
        let bearer = req
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "));
        if !verified && bearer.map(str::trim) != Some(token.as_str()) {
            let err = ApiError::new(401, "Unauthorized", "Unauthorized");
            return Reply::Full(Response::json(401, &err.to_status()));
        }
    }
    router::route(shared, req)
}

/// The delay to apply and the failure code (if any) for this request; consumes
/// one unit of the global `fail_next` or else of the first matching rule.
fn take_faults(shared: &Shared, line: &str) -> (Duration, Option<u16>) {
    let mut f = lock(&shared.faults);
    if f.fail_left > 0 {
        f.fail_left -= 1;
        return (f.delay, Some(f.fail_code));
    }
    let rule = f
        .rules
        .iter_mut()
        .find(|r| r.left > 0 && line.contains(&r.pattern));
    let fail = rule.map(|r| {
        r.left -= 1;
        r.code
    });
    f.rules.retain(|r| r.left > 0);
    (f.delay, fail)
}
