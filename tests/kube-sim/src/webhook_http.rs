//! HTTPS POST for webhook calls, with keep-alive as kube-apiserver's client
//! has: idle TLS connections are pooled per (address, certificate name, CA)
//! and reused; a pooled connection the server has closed meanwhile is
//! replaced by a fresh one once. rustls client configs are cached per CA.
//! Every call is bounded by the webhook's timeout (connect, write and read).

use crate::webhook_client::{CallError, Endpoint};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

type Tls = StreamOwned<ClientConnection, TcpStream>;
/// Pooled connections are boxed: a rustls connection is over 1 KiB.
type Pooled = Box<Tls>;

/// Idle connections kept per key.
const MAX_IDLE: usize = 8;

#[derive(Hash, PartialEq, Eq, Clone)]
struct Key {
    addr: SocketAddr,
    name: String,
    ca: Vec<u8>,
}

#[derive(Default)]
struct Pool {
    idle: HashMap<Key, Vec<Pooled>>,
    configs: HashMap<Vec<u8>, Arc<ClientConfig>>,
}

fn pool() -> MutexGuard<'static, Pool> {
    static POOL: OnceLock<Mutex<Pool>> = OnceLock::new();
    POOL.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn transport(url: &str, m: impl std::fmt::Display) -> CallError {
    CallError::Transport(format!("Post {url:?}: {m}"))
}

fn io_err(url: &str, e: io::Error) -> CallError {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => CallError::Timeout,
        _ => transport(url, e),
    }
}

fn tls_config(ca_pem: &[u8]) -> Result<Arc<ClientConfig>, String> {
    if let Some(c) = pool().configs.get(ca_pem) {
        return Ok(c.clone());
    }
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem) {
        let c = c.map_err(|e| format!("caBundle: {e}"))?;
        roots.add(c).map_err(|e| format!("caBundle: {e}"))?;
    }
    if roots.is_empty() {
        return Err("caBundle holds no certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let cfg = Arc::new(cfg);
    pool().configs.insert(ca_pem.to_vec(), cfg.clone());
    Ok(cfg)
}

fn connect(ep: &Endpoint, deadline: Instant) -> Result<Pooled, CallError> {
    let url = ep.url.as_str();
    let cfg = tls_config(&ep.ca_pem).map_err(|m| transport(url, m))?;
    let name = ServerName::try_from(ep.server_name.clone()).map_err(|e| transport(url, e))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let tcp =
        TcpStream::connect_timeout(&ep.addr, left.max(Duration::from_millis(1))).map_err(|e| {
            let e = io::Error::new(e.kind(), format!("dial tcp {}: connect: {e}", ep.addr));
            io_err(url, e)
        })?;
    let _ = tcp.set_nodelay(true);
    let conn = ClientConnection::new(cfg, name).map_err(|e| transport(url, e))?;
    Ok(Box::new(StreamOwned::new(conn, tcp)))
}

/// POSTs `body` as JSON and returns the response body; `timeout` bounds the whole call.
pub fn post_json(ep: &Endpoint, body: &[u8], timeout: Duration) -> Result<Vec<u8>, CallError> {
    let deadline = Instant::now() + timeout;
    let key = Key {
        addr: ep.addr,
        name: ep.server_name.clone(),
        ca: ep.ca_pem.clone(),
    };
    let idle = pool().idle.get_mut(&key).and_then(Vec::pop);
    if let Some(conn) = idle {
        match exchange(conn, ep, body, deadline) {
            Attempt::Stale(_) => {}
            other => return finish(other, &ep.url, key),
        }
    }
    let conn = connect(ep, deadline)?;
    finish(exchange(conn, ep, body, deadline), &ep.url, key)
}

/// How one exchange on one connection ended.
enum Attempt {
    /// (status, body, the connection if it may be reused)
    Done(u16, Vec<u8>, Option<Pooled>),
    /// The connection was closed or reset: a pooled one is retried fresh once.
    Stale(io::Error),
    Failed(io::Error),
}

fn finish(a: Attempt, url: &str, key: Key) -> Result<Vec<u8>, CallError> {
    let (code, body, reuse) = match a {
        Attempt::Done(code, body, reuse) => (code, body, reuse),
        Attempt::Stale(e) | Attempt::Failed(e) => return Err(io_err(url, e)),
    };
    if let Some(conn) = reuse {
        let mut p = pool();
        let list = p.idle.entry(key).or_default();
        if list.len() < MAX_IDLE {
            list.push(conn);
        }
    }
    if !(200..300).contains(&code) {
        return Err(CallError::Status(
            code,
            String::from_utf8_lossy(&body).into_owned(),
        ));
    }
    Ok(body)
}

fn exchange(tls: Pooled, ep: &Endpoint, body: &[u8], deadline: Instant) -> Attempt {
    match try_exchange(tls, ep, body, deadline) {
        Ok(done) => done,
        Err(e) => match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Attempt::Stale(e),
            _ => Attempt::Failed(e),
        },
    }
}

fn try_exchange(
    mut tls: Pooled,
    ep: &Endpoint,
    body: &[u8],
    deadline: Instant,
) -> io::Result<Attempt> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    let set = tls
        .sock
        .set_read_timeout(Some(left))
        .and_then(|_| tls.sock.set_write_timeout(Some(left)));
    set?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nAccept: application/json, */*\r\nUser-Agent: kube-apiserver-admission (kube-sim)\r\nContent-Length: {}\r\n\r\n",
        ep.path,
        ep.server_name,
        ep.addr.port(),
        body.len()
    );
    let sent = tls
        .write_all(head.as_bytes())
        .and_then(|_| tls.write_all(body))
        .and_then(|_| tls.flush());
    sent?;
    let mut r = BufReader::new(tls);
    let (code, out, keep) = read_response(&mut r)?;
    let reuse = (keep && r.buffer().is_empty()).then(|| r.into_inner());
    Ok(Attempt::Done(code, out, reuse))
}

/// Reads status, headers and body (Content-Length, chunked, or to EOF); the
/// flag says whether the connection may carry another request.
fn read_response<R: Read>(r: &mut BufReader<R>) -> io::Result<(u16, Vec<u8>, bool)> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "EOF"));
    }
    let code = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("malformed HTTP response {line:?}"),
            )
        })?;
    let (mut length, mut chunked, mut close) = (None, false, false);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                "connection" => close = v.eq_ignore_ascii_case("close"),
                _ => {}
            }
        }
    }
    let mut body = Vec::new();
    if chunked {
        read_chunked(r, &mut body)?;
    } else if let Some(n) = length {
        body.resize(n, 0);
        r.read_exact(&mut body).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => io::Error::other("response body cut short"),
            _ => e,
        })?;
    } else {
        let _ = r.read_to_end(&mut body);
        close = true;
    }
    Ok((code, body, !close))
}

fn read_chunked<R: BufRead>(r: &mut R, body: &mut Vec<u8>) -> io::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            line.clear();
            r.read_line(&mut line)?;
            return Ok(());
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        line.clear();
        r.read_line(&mut line)?;
    }
}
