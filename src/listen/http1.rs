//! A small, strict HTTP/1.1 server side for every listener (`listen/mod.rs`):
//! reads one request (request line, headers, a `Content-Length` or chunked body)
//! with hard limits on every part, and writes one response. Keep-alive is
//! supported; the caller loops. Runs on the listeners' handler threads.

use std::io::{self, BufRead, Read, Write};

/// Longest request line or header line.
const MAX_LINE: u64 = 16 * 1024;
/// Most header lines in one request.
const MAX_HEADERS: usize = 100;

/// The parts of a request the servers use.
#[derive(Debug, Default)]
pub(crate) struct Head {
    pub(crate) method: String,
    /// Path without the query string.
    pub(crate) path: String,
    /// The query string (after `?`), empty without one.
    pub(crate) query: String,
    pub(crate) content_type: String,
    pub(crate) content_length: Option<usize>,
    pub(crate) chunked: bool,
    pub(crate) expect_continue: bool,
    /// False for `Connection: close` and for HTTP/1.0 without keep-alive.
    pub(crate) keep_alive: bool,
}

/// Why a request could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The client closed the connection between requests.
    Closed,
    /// The connection failed or timed out (nothing more can be sent on it).
    Io,
    /// Malformed or too large: answer with this status and message, then close.
    Reject(u16, &'static str),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

/// Reads one line (without CR LF), at most `MAX_LINE` bytes.
fn read_line(r: &mut impl BufRead) -> Result<Option<String>, ReadError> {
    let mut buf = Vec::new();
    let n = r.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(ReadError::Reject(431, "request line or header too long"));
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| ReadError::Reject(400, "request head is not UTF-8"))
}

/// Reads the request line and the headers.
pub(crate) fn read_head(r: &mut impl BufRead) -> Result<Head, ReadError> {
    let line = read_line(r)?.ok_or(ReadError::Closed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Reject(400, "malformed request line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Reject(505, "only HTTP/1.x is supported"));
    }
    let mut head = Head {
        method: method.to_string(),
        path: target.split('?').next().unwrap_or_default().to_string(),
        query: target
            .split_once('?')
            .map(|(_, q)| q.to_string())
            .unwrap_or_default(),
        keep_alive: version == "HTTP/1.1",
        ..Head::default()
    };
    for _ in 0..=MAX_HEADERS {
        let line = read_line(r)?.ok_or(ReadError::Reject(400, "truncated request head"))?;
        if line.is_empty() {
            return Ok(head);
        }
        let (name, value) = line
            .split_once(':')
            .ok_or(ReadError::Reject(400, "malformed header line"))?;
        header(&mut head, name.trim(), value.trim())?;
    }
    Err(ReadError::Reject(431, "too many header lines"))
}

fn header(head: &mut Head, name: &str, value: &str) -> Result<(), ReadError> {
    let lower = value.to_ascii_lowercase();
    match name.to_ascii_lowercase().as_str() {
        "content-type" => head.content_type = lower,
        "content-length" => {
            let n = value
                .parse()
                .map_err(|_| ReadError::Reject(400, "bad Content-Length"))?;
            head.content_length = Some(n);
        }
        "transfer-encoding" => head.chunked = lower.contains("chunked"),
        "expect" => head.expect_continue = lower == "100-continue",
        "connection" if lower.contains("close") => head.keep_alive = false,
        "connection" if lower.contains("keep-alive") => head.keep_alive = true,
        _ => {}
    }
    Ok(())
}

/// Reads the body announced by `head`, refusing more than `max` bytes.
pub(crate) fn read_body(
    r: &mut impl BufRead,
    head: &Head,
    max: usize,
) -> Result<Vec<u8>, ReadError> {
    const TOO_LARGE: ReadError = ReadError::Reject(413, "request body too large");
    if head.chunked {
        return read_chunked(r, max);
    }
    let len = head.content_length.unwrap_or(0);
    if len > max {
        return Err(TOO_LARGE);
    }
    // Grown as bytes arrive: a client announcing 16 MiB and sending nothing holds
    // no 16 MiB buffer.
    let mut body = Vec::with_capacity(len.min(64 * 1024));
    r.take(len as u64).read_to_end(&mut body)?;
    if body.len() < len {
        return Err(ReadError::Io);
    }
    Ok(body)
}

fn read_chunked(r: &mut impl BufRead, max: usize) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let line = read_line(r)?.ok_or(ReadError::Reject(400, "truncated chunk"))?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| ReadError::Reject(400, "bad chunk size"))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while !read_line(r)?.unwrap_or_default().is_empty() {}
            return Ok(body);
        }
        if body.len().saturating_add(size) > max {
            return Err(ReadError::Reject(413, "request body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        read_line(r)?; // the CR LF after the chunk
    }
}

/// The reason phrase of the statuses the webhook servers use.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// Writes one response with a `Content-Length` body.
pub(crate) fn write_response(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n",
        reason(status),
        body.len()
    );
    // Head and body written apart: a large body (a `/metrics` scrape of megabytes)
    // is not copied once more.
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str, max: usize) -> Result<(Head, Vec<u8>), ReadError> {
        let mut r = io::BufReader::new(raw.as_bytes());
        let head = read_head(&mut r)?;
        let body = read_body(&mut r, &head, max)?;
        Ok((head, body))
    }

    #[test]
    fn content_length_body_and_headers() {
        let (h, body) = parse(
            "POST /hooks/a?timeout=10s HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
            10,
        )
        .expect("request");
        assert_eq!((h.method.as_str(), h.path.as_str()), ("POST", "/hooks/a"));
        assert_eq!(h.content_type, "application/json");
        assert!(h.keep_alive);
        assert_eq!(body, b"{}");
    }

    #[test]
    fn chunked_body() {
        let (_, body) = parse(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
            10,
        )
        .expect("request");
        assert_eq!(body, b"abcde");
    }

    #[test]
    fn limits_and_malformed_input_are_rejected() {
        let too_big = parse("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 10);
        assert!(matches!(too_big, Err(ReadError::Reject(413, _))));
        let chunks = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n";
        assert!(matches!(parse(chunks, 10), Err(ReadError::Reject(413, _))));
        assert!(matches!(
            parse("GARBAGE\r\n\r\n", 10),
            Err(ReadError::Reject(400, _))
        ));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(20_000));
        assert!(matches!(parse(&long, 10), Err(ReadError::Reject(431, _))));
        assert!(matches!(parse("", 10), Err(ReadError::Closed)));
    }

    #[test]
    fn connection_close_and_http10() {
        let (h, _) = parse("GET /healthz HTTP/1.0\r\n\r\n", 0).expect("request");
        assert!(!h.keep_alive);
        let (h, _) = parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 0).expect("request");
        assert!(!h.keep_alive);
    }
}
