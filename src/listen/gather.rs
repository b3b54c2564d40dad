//! The accept thread's poll loop: where connections wait while they cost nothing
//! but a file descriptor.
//!
//! A connection stays here, non-blocking and polled, from `accept` until a whole
//! request has arrived (the head, and a `Content-Length` body up to
//! [`IN_LOOP_BODY`]), and again between the requests of a keep-alive connection.
//! TLS handshakes happen here too. Only a complete request goes to a handler
//! thread, so idle clients, slowloris clients trickling a head byte by byte, and
//! idle keep-alive connections never hold a handler; each is cut off at its
//! deadline (first byte + `io_timeout` for a request in progress, `io_timeout` of
//! silence otherwise). Requests the loop does not gather whole (chunked bodies,
//! `Expect: 100-continue`, large bodies, or everything once [`BUFFER_BUDGET`] bytes
//! are held) go to a handler early, which reads the rest within the same deadline.
//! Handlers give keep-alive connections back through a channel and a wake-up
//! socket.

use super::Conn;
use super::http1;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest body gathered in the loop; a bigger one is read by its handler.
const IN_LOOP_BODY: usize = 1 << 20;
/// Longest head gathered in the loop; a longer one goes to a handler (which
/// answers 431 past its own limits).
const IN_LOOP_HEAD: usize = 64 * 1024;
/// Bytes held by all waiting connections together before requests are handed
/// over early instead of gathered whole.
const BUFFER_BUDGET: usize = 64 << 20;

/// A connection between requests, or in the middle of receiving one.
pub(super) struct Pending {
    pub(crate) conn: Conn,
    pub(crate) tls: Option<ServerConnection>,
    /// Plaintext received and not yet handled.
    pub(crate) buf: Vec<u8>,
    pub(crate) deadline: Instant,
    /// Some bytes of the current request have arrived.
    started: bool,
    /// TLS bytes wait for the socket to accept them.
    pub(crate) want_write: bool,
}

/// What happened when a connection was read.
#[derive(Debug, PartialEq)]
pub(super) enum Progress {
    Waiting,
    /// A handler takes it now.
    Complete,
    Closed,
}

impl Pending {
    /// A new or returned connection; `buf` holds bytes already received.
    pub(crate) fn new(
        conn: Conn,
        tls: Option<ServerConnection>,
        buf: Vec<u8>,
        io: Duration,
    ) -> Pending {
        Pending {
            conn,
            tls,
            started: !buf.is_empty(),
            buf,
            deadline: Instant::now() + io,
            want_write: false,
        }
    }

    /// Reads what the socket has (without blocking), drives a TLS handshake, and
    /// says whether the request is complete. `held` is what all waiting
    /// connections hold in all.
    pub(crate) fn pull(
        &mut self,
        tls_config: Option<&Arc<ServerConfig>>,
        io: Duration,
        held: usize,
    ) -> Progress {
        if let (None, Some(config)) = (&self.tls, tls_config) {
            match ServerConnection::new(Arc::clone(config)) {
                Ok(c) => self.tls = Some(c),
                Err(_) => return Progress::Closed,
            }
        }
        let had = self.buf.len();
        let closed = match self.tls.take() {
            None => read_plain(&mut self.conn, &mut self.buf),
            Some(mut tls) => {
                let closed = read_tls(&mut self.conn, &mut tls, &mut self.buf)
                    || self.flush_tls(&mut tls).is_err();
                self.tls = Some(tls);
                closed
            }
        };
        if closed {
            return Progress::Closed;
        }
        if !self.started && !self.buf.is_empty() {
            self.started = true;
            self.deadline = Instant::now() + io;
        }
        let over_budget = held + self.buf.len() - had > BUFFER_BUDGET;
        if !self.buf.is_empty() && (over_budget || complete(&self.buf)) {
            return Progress::Complete;
        }
        Progress::Waiting
    }

    /// Sends the TLS records rustls has ready; what the socket cannot take now
    /// waits for POLLOUT.
    fn flush_tls(&mut self, tls: &mut ServerConnection) -> io::Result<()> {
        self.want_write = false;
        while tls.wants_write() {
            match tls.write_tls(&mut self.conn) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.want_write = true;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Appends what a plain socket has; true if the peer closed or it failed.
fn read_plain(conn: &mut Conn, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match conn.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > IN_LOOP_HEAD + IN_LOOP_BODY {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Feeds rustls what the socket has and appends the plaintext it yields; true if
/// the peer closed or the TLS session failed.
fn read_tls(conn: &mut Conn, tls: &mut ServerConnection, buf: &mut Vec<u8>) -> bool {
    loop {
        match tls.read_tls(conn) {
            Ok(0) => return true,
            Ok(_) => {
                if tls.process_new_packets().is_err() {
                    // Send the alert rustls prepared, then give up.
                    let _ = tls.write_tls(conn);
                    return true;
                }
                if drain_plaintext(tls, buf) {
                    return true;
                }
                if buf.len() > IN_LOOP_HEAD + IN_LOOP_BODY {
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Plaintext may already be buffered (a connection given back).
                return drain_plaintext(tls, buf);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Moves decrypted bytes into `buf`; true on the peer's close_notify.
fn drain_plaintext(tls: &mut ServerConnection, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match tls.reader().read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Whether `buf` holds a request a handler can answer without reading more (or
/// one the loop will not gather: malformed, chunked, `Expect`, too large).
pub(super) fn complete(buf: &[u8]) -> bool {
    let Some(end) = head_end(buf) else {
        return buf.len() > IN_LOOP_HEAD;
    };
    let mut head = &buf[..end];
    match http1::read_head(&mut head) {
        Err(_) => true,
        Ok(h) if h.chunked || h.expect_continue => true,
        Ok(h) => {
            let body = h.content_length.unwrap_or(0);
            body > IN_LOOP_BODY || buf.len() - end >= body
        }
    }
}

/// The length of the head (through its empty line), once it is all there.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Makes a connection non-blocking (for the loop) or blocking (for a handler).
pub(super) fn set_nonblocking(conn: &Conn, on: bool) -> io::Result<()> {
    match conn {
        Conn::Tcp(s) => s.set_nonblocking(on),
        Conn::Unix(s) => s.set_nonblocking(on),
    }
}

/// Reads and discards the wake-up bytes handlers sent.
pub(super) fn drain(wake: &mut std::os::unix::net::UnixStream) {
    let mut sink = [0u8; 256];
    while matches!(wake.read(&mut sink), Ok(n) if n > 0) {}
}

/// Wakes the loop (a full wake-up socket already means "wake").
pub(super) fn wake(wake: &std::os::unix::net::UnixStream) {
    let _ = (&*wake).write(&[1]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_complete_with_its_head_and_body() {
        assert!(!complete(b"GET / HTTP/1.1\r\nHost: x\r\n"));
        assert!(complete(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(complete(b"GET / HTTP/1.0\n\n"));
        let post = b"POST /h HTTP/1.1\r\nContent-Length: 4\r\n\r\nab";
        assert!(!complete(post));
        assert!(complete(
            b"POST /h HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd"
        ));
    }

    #[test]
    fn what_the_loop_does_not_gather_goes_to_a_handler_early() {
        assert!(complete(
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        ));
        assert!(complete(
            b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n"
        ));
        let big = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            IN_LOOP_BODY + 1
        );
        assert!(complete(big.as_bytes()));
        assert!(complete(b"NONSENSE\r\n\r\n"), "the handler answers 400");
        assert!(
            complete(&vec![b'a'; IN_LOOP_HEAD + 1]),
            "the handler answers 431"
        );
    }
}
