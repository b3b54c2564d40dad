//! A minimal HTTP/1.1 layer over any byte stream (plain TCP or rustls): reads
//! one request (Content-Length or chunked body), writes complete responses, and
//! writes chunked streams for watches. Keep-alive is the default, as in Go's
//! client. kube-sim uses its own layer so one code path serves HTTP and HTTPS
//! and a watch can hold its connection for as long as it likes.

use crate::util::{parse_query, url_decode};
use std::io::{self, BufRead, Read, Write};

/// Largest request body accepted (a generous bound against garbage input).
const MAX_BODY: usize = 64 << 20;
/// Largest header section accepted.
const MAX_HEADERS: usize = 256 << 10;

/// One parsed request.
#[derive(Debug, Clone, Default)]
pub struct Request {
    pub method: String,
    /// Decoded path without the query.
    pub path: String,
    /// Raw query string (without `?`).
    pub raw_query: String,
    pub query: Vec<(String, String)>,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// First query parameter with this name.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean query parameter (`1`, `true`).
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.param(name), Some("1" | "true" | "True"))
    }

    /// `VERB /path?query`, as logged for tests.
    pub fn log_line(&self) -> String {
        if self.raw_query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, self.raw_query)
        }
    }

    /// Whether the client asked to close after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
    }
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Reads one line (CRLF or LF), bounded by `budget`.
fn read_line<R: BufRead>(r: &mut R, budget: &mut usize) -> io::Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if n > *budget {
        return Err(bad("header section too large"));
    }
    *budget -= n;
    while buf.last().is_some_and(|c| *c == b'\n' || *c == b'\r') {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

/// Reads the next request; `Ok(None)` on a clean end of stream (tests use this;
/// the server reads head and body separately to honour `Expect`).
#[cfg(test)]
pub fn read_request<R: BufRead>(r: &mut R) -> io::Result<Option<Request>> {
    match read_head(r)? {
        Some(mut req) => {
            req.body = read_body(r, &req)?;
            Ok(Some(req))
        }
        None => Ok(None),
    }
}

/// Reads the request line and headers (body left unread).
pub fn read_head<R: BufRead>(r: &mut R) -> io::Result<Option<Request>> {
    let mut budget = MAX_HEADERS;
    let line = loop {
        match read_line(r, &mut budget)? {
            None => return Ok(None),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split_whitespace();
    let (method, target) = match (parts.next(), parts.next()) {
        (Some(m), Some(t)) => (m.to_string(), t.to_string()),
        _ => return Err(bad("malformed request line")),
    };
    let mut headers = Vec::new();
    loop {
        match read_line(r, &mut budget)? {
            None => return Err(bad("connection closed inside headers")),
            Some(l) if l.is_empty() => break,
            Some(l) => {
                let (k, v) = l.split_once(':').ok_or_else(|| bad("malformed header"))?;
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    let (path, raw_query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.clone(), String::new()),
    };
    Ok(Some(Request {
        method,
        path: url_decode(&path),
        query: parse_query(&raw_query),
        raw_query,
        headers,
        body: Vec::new(),
    }))
}

/// Whether the client waits for `100 Continue` before sending the body (curl does).
pub fn expects_continue(req: &Request) -> bool {
    req.header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
}

/// Reads the body announced by the headers (Content-Length or chunked).
pub fn read_body<R: BufRead>(r: &mut R, req: &Request) -> io::Result<Vec<u8>> {
    if req
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        return read_chunked(r);
    }
    let len = match req.header("content-length") {
        Some(v) => v.parse::<usize>().map_err(|_| bad("bad content-length"))?,
        None => 0,
    };
    if len > MAX_BODY {
        return Err(bad("body too large"));
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

fn read_chunked<R: BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut budget = 4096;
        let line = read_line(r, &mut budget)?.ok_or_else(|| bad("eof in chunk size"))?;
        let size_hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).map_err(|_| bad("bad chunk size"))?;
        if size == 0 {
            while read_line(r, &mut budget)?.is_some_and(|l| !l.is_empty()) {}
            return Ok(body);
        }
        if size > MAX_BODY.saturating_sub(body.len()) {
            return Err(bad("body too large"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        read_line(r, &mut budget)?;
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub code: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A JSON response.
    pub fn json(code: u16, v: &serde_json::Value) -> Response {
        Response {
            code,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, k: &str, v: &str) -> Response {
        self.headers.push((k.to_string(), v.to_string()));
        self
    }
}

/// Standard reason phrase for the status line.
fn phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

fn write_head<W: Write>(w: &mut W, code: u16, headers: &[(String, String)]) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {code} {}\r\n", phrase(code));
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("Cache-Control: no-cache, private\r\n");
    w.write_all(head.as_bytes())
}

/// Writes a whole response with Content-Length.
pub fn write_response<W: Write>(w: &mut W, resp: &Response) -> io::Result<()> {
    write_head(w, resp.code, &resp.headers)?;
    w.write_all(format!("Content-Length: {}\r\n\r\n", resp.body.len()).as_bytes())?;
    w.write_all(&resp.body)?;
    w.flush()
}

/// Starts a chunked 200 response of the given content type.
pub fn start_chunked<W: Write>(w: &mut W, content_type: &str) -> io::Result<()> {
    let h = vec![("Content-Type".to_string(), content_type.to_string())];
    write_head(w, 200, &h)?;
    w.write_all(b"Transfer-Encoding: chunked\r\n\r\n")?;
    w.flush()
}

/// Writes one chunk and flushes it.
pub fn write_chunk<W: Write>(w: &mut W, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    w.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
    w.write_all(data)?;
    w.write_all(b"\r\n")?;
    w.flush()
}

/// Ends a chunked response.
pub fn end_chunked<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_request() {
        let raw = b"POST /api/v1/namespaces/a/configmaps?x=1&y=a%20b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let mut r = io::BufReader::new(&raw[..]);
        let req = read_request(&mut r).unwrap().unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/api/v1/namespaces/a/configmaps");
        assert_eq!(req.param("y"), Some("a b"));
        assert_eq!(req.body, b"abcde");
        assert!(read_request(&mut r).unwrap().is_none());
    }

    #[test]
    fn rejects_garbage() {
        let mut r = io::BufReader::new(&b"NONSENSE\r\n\r\n"[..]);
        assert!(read_request(&mut r).is_err());
        let mut r = io::BufReader::new(&b"GET / HTTP/1.1\r\nContent-Length: zz\r\n\r\n"[..]);
        assert!(read_request(&mut r).is_err());
    }
}
