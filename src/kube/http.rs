//! The HTTP layer: one pooled ureq agent per client, the QPS limiter, credentials,
//! retries and metrics around every request. Plain calls return the whole body;
//! watches return a line reader over the chunked stream. Retries: 429 for any verb
//! (the server did not act on it) and 5xx or connection failures for idempotent
//! verbs, with jittered exponential backoff or the server's `Retry-After`; one retry
//! after a 401 when credentials can be refreshed. Shared by every thread of the
//! operator that talks to the API (the agent and all state are thread-safe).

use super::auth::Auth;
use super::backoff::Backoff;
use super::config::ClusterConfig;
use super::error::KubeError;
use super::interrupt::InterruptibleConnector;
use super::metrics::ClientMetrics;
use super::ratelimit::TokenBucket;
use std::io::BufReader;
use std::time::{Duration, Instant};
use ureq::http;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{Connector, NextTimeout, RustlsConnector, TcpConnector};

/// Largest non-watch body accepted (big LISTs go well past ureq's 10 MB default).
const BODY_LIMIT: u64 = 512 << 20;

/// How retries behave; tests shorten the delays.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
        }
    }
}

/// One request: verb label, method, path with query, optional body and content type.
pub(crate) struct Request<'a> {
    /// The metrics/error verb: GET, LIST, WATCH, POST, PUT, PATCH, DELETE.
    pub(crate) verb: &'static str,
    pub(crate) method: http::Method,
    pub(crate) path: &'a str,
    pub(crate) body: Option<(&'static str, Vec<u8>)>,
}

/// A complete answer.
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

/// An open watch stream, read line by line.
pub(crate) type Stream = BufReader<ureq::BodyReader<'static>>;

/// Agent + auth + limiter + metrics + retry policy for one cluster.
pub(crate) struct Transport {
    agent: ureq::Agent,
    base: String,
    auth: Auth,
    limiter: TokenBucket,
    pub(crate) metrics: ClientMetrics,
    timeout: Duration,
    pub(crate) retry: RetryPolicy,
}

impl Transport {
    /// Builds the agent for `cfg`.
    pub(crate) fn new(
        cfg: &ClusterConfig,
        qps: f32,
        burst: u32,
        timeout: Duration,
        metrics: ClientMetrics,
    ) -> Result<Transport, KubeError> {
        let tls = super::tls::tls_config(&cfg.tls)?;
        let config = ureq::Agent::config_builder()
            .tls_config(tls)
            .http_status_as_error(false)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(10)))
            .max_idle_connections_per_host(8)
            .user_agent(user_agent_for(&std::env::args().next().unwrap_or_default()))
            .build();
        let server_name = cfg
            .tls
            .server_name
            .as_deref()
            .filter(|n| *n != host_of(&cfg.server));
        // Reads a reflector's stop can interrupt, between TCP and TLS.
        let connector = || {
            ().chain(TcpConnector::default())
                .chain(InterruptibleConnector)
                .chain(RustlsConnector::default())
        };
        let (agent, base) = match server_name {
            None => {
                let resolver = ureq::unversioned::resolver::DefaultResolver::default();
                let agent = ureq::Agent::with_parts(config, connector(), resolver);
                (agent, cfg.server.clone())
            }
            Some(name) => {
                let resolver = ServerNameResolver::new(name, &cfg.server)
                    .map_err(|e| KubeError::config(&cfg.origin, "", "tls-server-name", e))?;
                let connector = connector();
                let base = with_host(&cfg.server, name);
                (ureq::Agent::with_parts(config, connector, resolver), base)
            }
        };
        let (qps, burst) = match (qps, burst) {
            (0.0, b) => (5.0, if b == 0 { 10 } else { b }),
            (q, 0) => (q, 10),
            qb => qb,
        };
        Ok(Transport {
            agent,
            base,
            auth: Auth::new(&cfg.auth),
            limiter: TokenBucket::new(f64::from(qps), burst),
            metrics,
            timeout,
            retry: RetryPolicy::default(),
        })
    }

    /// Sends `req`, retrying per the module rules; returns any final status.
    pub(crate) fn send(&self, req: &Request<'_>) -> Result<Response, KubeError> {
        let idempotent = matches!(
            req.method,
            http::Method::GET | http::Method::PUT | http::Method::DELETE | http::Method::HEAD
        );
        let mut backoff = Backoff::new(self.retry.base_delay, self.retry.max_delay);
        let mut refreshed = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt > self.retry.max_retries;
            match self.send_once(req) {
                Ok((resp, retry_after)) => {
                    let s = resp.status;
                    if s == 401 && !refreshed && self.auth.refreshable() {
                        refreshed = true;
                        self.auth.invalidate();
                        continue;
                    }
                    let retryable = s == 429 || (s >= 500 && idempotent);
                    if !retryable || last {
                        return Ok(resp);
                    }
                    let wait = retry_after
                        .map(|d| d.min(self.retry.max_delay * 3))
                        .unwrap_or_else(|| backoff.next_delay());
                    std::thread::sleep(wait);
                }
                Err(e) if idempotent && !last && matches!(e, KubeError::Transport { .. }) => {
                    std::thread::sleep(backoff.next_delay());
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt: limiter, auth header, call, metrics. Returns Retry-After too.
    fn send_once(&self, req: &Request<'_>) -> Result<(Response, Option<Duration>), KubeError> {
        let waited = self.limiter.acquire();
        self.metrics.rate_limiter.observe(waited.as_secs_f64());
        let start = Instant::now();
        let result = self.call(req, Some(self.timeout), None);
        let mut resp = match result {
            Ok(r) => r,
            Err(e) => {
                self.metrics
                    .observe(req.verb, "<error>", start.elapsed().as_secs_f64());
                return Err(e);
            }
        };
        let status = resp.status().as_u16();
        let retry_after = retry_after(&resp);
        let body = resp
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_vec();
        self.metrics
            .observe(req.verb, &status.to_string(), start.elapsed().as_secs_f64());
        let body = body.map_err(|e| self.transport_err(req, &e))?;
        Ok((Response { status, body }, retry_after))
    }

    /// Opens a watch (or any long stream); the read timeout bounds silence between
    /// bytes. Non-200 answers are returned as API errors.
    pub(crate) fn stream(&self, path: &str, read_timeout: Duration) -> Result<Stream, KubeError> {
        let req = Request {
            verb: "WATCH",
            method: http::Method::GET,
            path,
            body: None,
        };
        let waited = self.limiter.acquire();
        self.metrics.rate_limiter.observe(waited.as_secs_f64());
        let start = Instant::now();
        let mut resp = match self.call(&req, None, Some(read_timeout)) {
            Ok(r) => r,
            Err(e) => {
                self.metrics
                    .observe("WATCH", "<error>", start.elapsed().as_secs_f64());
                return Err(e);
            }
        };
        let status = resp.status().as_u16();
        self.metrics
            .observe("WATCH", &status.to_string(), start.elapsed().as_secs_f64());
        if status == 401 && self.auth.refreshable() {
            self.auth.invalidate();
        }
        if status != 200 {
            let wait = retry_after(&resp);
            let body = resp
                .body_mut()
                .with_config()
                .limit(1 << 20)
                .read_to_vec()
                .unwrap_or_default();
            let mut err = api_error("WATCH", path, status, &body);
            if let KubeError::Api { retry_after, .. } = &mut err {
                *retry_after = wait;
            }
            return Err(err);
        }
        Ok(BufReader::with_capacity(
            64 << 10,
            resp.into_body().into_reader(),
        ))
    }

    /// Builds and runs the ureq request.
    fn call(
        &self,
        req: &Request<'_>,
        total: Option<Duration>,
        per_read: Option<Duration>,
    ) -> Result<http::Response<ureq::Body>, KubeError> {
        let url = format!("{}{}", self.base, req.path);
        let mut b = http::Request::builder()
            .method(req.method.clone())
            .uri(&url)
            .header("Accept", "application/json");
        if let Some(h) = self.auth.header()? {
            b = b.header("Authorization", h);
        }
        let result = match &req.body {
            Some((ct, bytes)) => {
                let r = b
                    .header("Content-Type", *ct)
                    .body(bytes.as_slice())
                    .map_err(|e| self.transport_err(req, &e))?;
                let r = self
                    .agent
                    .configure_request(r)
                    .timeout_global(total)
                    .timeout_per_read(per_read)
                    .build();
                self.agent.run(r)
            }
            None => {
                let r = b.body(()).map_err(|e| self.transport_err(req, &e))?;
                let r = self
                    .agent
                    .configure_request(r)
                    .timeout_global(total)
                    .timeout_per_read(per_read)
                    .build();
                self.agent.run(r)
            }
        };
        result.map_err(|e| self.transport_err(req, &e))
    }

    fn transport_err(&self, req: &Request<'_>, e: &dyn std::fmt::Display) -> KubeError {
        KubeError::Transport {
            verb: req.verb,
            path: strip_query(req.path).to_string(),
            message: e.to_string(),
        }
    }
}

/// The host part of `https://host:port/...` (brackets kept off IPv6 literals).
/// `tls-server-name` support. Requests go to `https://<tls-server-name>:<port>`, so
/// TLS sends that name and verifies the certificate against it; this resolver answers
/// that name with the configured server's own addresses, so the connection still goes
/// to the server (whose Host header does not matter to the API server).
#[derive(Debug)]
struct ServerNameResolver {
    name: String,
    /// `host:port` of the configured server.
    target: String,
}

impl ServerNameResolver {
    fn new(name: &str, server: &str) -> Result<ServerNameResolver, String> {
        let host = host_of(server);
        let port =
            port_of(server).ok_or_else(|| format!("server '{server}' has no usable port"))?;
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        Ok(ServerNameResolver {
            name: name.to_string(),
            target: format!("{host}:{port}"),
        })
    }
}

impl Resolver for ServerNameResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if uri.host() != Some(self.name.as_str()) {
            return DefaultResolver::default().resolve(uri, config, timeout);
        }
        let mut out = self.empty();
        for addr in std::net::ToSocketAddrs::to_socket_addrs(&self.target)?.take(16) {
            out.push(addr);
        }
        if out.is_empty() {
            Err(ureq::Error::HostNotFound)
        } else {
            Ok(out)
        }
    }
}

/// The server URL with its host replaced by `name`.
fn with_host(server: &str, name: &str) -> String {
    let (scheme, rest) = server.split_once("://").unwrap_or(("https", server));
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    match port_of(server) {
        Some(port) => format!("{scheme}://{name}:{port}{path}"),
        None => format!("{scheme}://{name}{path}"),
    }
}

/// The URL's port, or the scheme's default.
fn port_of(server: &str) -> Option<u16> {
    let (scheme, rest) = server.split_once("://").unwrap_or(("https", server));
    let authority = rest.split('/').next().unwrap_or(rest);
    let port = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once("]:").map(|(_, p)| p),
        None => authority.rsplit_once(':').map(|(_, p)| p),
    };
    match port {
        Some(p) => p.parse().ok(),
        None => Some(if scheme == "http" { 80 } else { 443 }),
    }
}

/// The User-Agent client-go sends by default for a program started as `argv0`:
/// `<base name>/v<version> (<os>/<arch>)`. The API server names the field manager
/// of a write without `fieldManager` after the part before the first `/`, and
/// flant's operators set none, so the objects our hooks' patches write show the same
/// manager as under flant's (`shell-operator`, or `addon-operator`).
pub(crate) fn user_agent_for(argv0: &str) -> String {
    let base = argv0.rsplit('/').next().filter(|b| !b.is_empty());
    format!(
        "{}/v{} ({}/{})",
        base.unwrap_or("unknown"),
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

fn host_of(server: &str) -> &str {
    let rest = server.split_once("://").map_or(server, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// The path without its query (selectors and tokens of `continue` stay out of errors).
pub(crate) fn strip_query(path: &str) -> &str {
    path.split('?').next().unwrap_or(path)
}

/// Turns an error answer into [`KubeError::Api`], using the Status body when there is one.
/// The `Retry-After` header in seconds (the form the API server sends).
fn retry_after(resp: &http::Response<ureq::Body>) -> Option<Duration> {
    resp.headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

pub(crate) fn api_error(verb: &'static str, path: &str, status: u16, body: &[u8]) -> KubeError {
    let st: vendor_k8s_types::Status = serde_json::from_slice(body).unwrap_or_default();
    let message = if st.message.is_empty() {
        String::from_utf8_lossy(body)
            .chars()
            .take(300)
            .collect::<String>()
            .trim()
            .to_string()
    } else {
        st.message
    };
    KubeError::Api {
        verb,
        path: strip_query(path).to_string(),
        code: status,
        reason: st.reason,
        message,
        retry_after: None,
    }
}

impl Response {
    /// The body when the status is 2xx, else the Status error.
    pub(crate) fn ok(self, verb: &'static str, path: &str) -> Result<Vec<u8>, KubeError> {
        if !(200..300).contains(&self.status) {
            return Err(api_error(verb, path, self.status, &self.body));
        }
        Ok(self.body)
    }

    /// The body decoded as `T` when the status is 2xx, else the Status error.
    pub(crate) fn json<T: serde::de::DeserializeOwned>(
        self,
        verb: &'static str,
        path: &str,
    ) -> Result<T, KubeError> {
        let body = self.ok(verb, path)?;
        serde_json::from_slice(&body).map_err(|e| KubeError::Decode {
            what: format!("{verb} {}", strip_query(path)),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {

    /// The field manager the API server derives (the part before `/`) is the
    /// program's name, as for flant's client-go (the generated corpus in tests/compat
    /// found ours was `shell-operator-rs`).
    #[test]
    fn the_user_agent_names_the_program_as_client_go_does() {
        for (argv0, manager) in [
            ("/usr/local/bin/shell-operator", "shell-operator"),
            ("addon-operator", "addon-operator"),
            ("", "unknown"),
        ] {
            let ua = super::user_agent_for(argv0);
            assert_eq!(ua.split('/').next(), Some(manager), "{ua}");
            assert!(ua.contains(env!("CARGO_PKG_VERSION")), "{ua}");
        }
    }

    #[test]
    fn tls_server_name_urls() {
        assert_eq!(
            with_host("https://10.0.0.1:6443", "kubernetes.default.svc"),
            "https://kubernetes.default.svc:6443"
        );
        assert_eq!(
            with_host("https://10.0.0.1", "api.example"),
            "https://api.example:443"
        );
        assert_eq!(
            with_host("https://[::1]:8443/prefix", "api.example"),
            "https://api.example:8443/prefix"
        );
        assert_eq!(port_of("http://localhost"), Some(80));
        assert_eq!(port_of("https://h:x"), None);
    }

    use super::*;

    #[test]
    fn hosts_and_errors() {
        assert_eq!(host_of("https://api.example.com:6443"), "api.example.com");
        assert_eq!(host_of("https://[fd00::1]:443/x"), "fd00::1");
        assert_eq!(host_of("http://127.0.0.1"), "127.0.0.1");
        let e = api_error(
            "GET",
            "/api/v1/x?token=abc",
            404,
            br#"{"kind":"Status","reason":"NotFound","message":"x not found","code":404}"#,
        );
        assert_eq!(e.to_string(), "GET /api/v1/x: 404 NotFound: x not found");
        let e = api_error("GET", "/p", 502, b"bad gateway");
        assert_eq!(e.to_string(), "GET /p: 502: bad gateway");
    }
}
