//! The plain HTTP server on `--listen-address:--listen-port`: `/metrics` (Prometheus
//! text: self metrics and hook metrics), `/metrics/hooks` (hook metrics only),
//! `/healthz` and `/ready`. It runs on its own thread (tiny_http) and reads
//! only shared state: the metrics registry and a readiness flag.

use crate::metrics::Metrics;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tiny_http::{Header, Response, Server};

/// A bound HTTP server, ready to be run on its own thread.
pub struct HttpServer {
    server: Arc<Server>,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
}

impl HttpServer {
    /// Binds `address:port`; an error names the address.
    pub fn bind(
        address: &str,
        port: u16,
        metrics: Arc<Metrics>,
        ready: Arc<AtomicBool>,
    ) -> Result<HttpServer, String> {
        let addr = format!("{address}:{port}");
        let server = Server::http(&addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
        Ok(HttpServer {
            server: Arc::new(server),
            metrics,
            ready,
        })
    }

    /// The bound port (useful with port 0).
    pub fn port(&self) -> u16 {
        self.server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .unwrap_or(0)
    }

    /// A handle that stops `serve` from another thread.
    pub fn stopper(&self) -> Arc<Server> {
        Arc::clone(&self.server)
    }

    /// The thread body: answers requests until unblocked.
    pub fn serve(self) {
        for request in self.server.incoming_requests() {
            let path = request.url().split('?').next().unwrap_or("").to_string();
            let (code, content_type, body) = match path.as_str() {
                "/metrics" => (200, "text/plain; version=0.0.4", self.metrics.render()),
                "/metrics/hooks" => (
                    200,
                    "text/plain; version=0.0.4",
                    self.metrics.render_hooks(),
                ),
                "/healthz" => (200, "text/plain", b"ok\n".to_vec()),
                "/ready" if self.ready.load(Ordering::Relaxed) => {
                    (200, "text/plain", b"ready\n".to_vec())
                }
                "/ready" => (
                    503,
                    "text/plain",
                    b"not ready: startup is not finished\n".to_vec(),
                ),
                "/" => (200, "text/html", INDEX.as_bytes().to_vec()),
                _ => (404, "text/plain", b"not found\n".to_vec()),
            };
            let mut response = Response::from_data(body).with_status_code(code);
            if let Ok(h) = Header::from_bytes("Content-Type", content_type) {
                response.add_header(h);
            }
            let _ = request.respond(response);
        }
    }
}

const INDEX: &str = "<html><body><h1>shell-operator</h1><ul>\
<li><a href=\"/metrics\">/metrics</a></li><li><a href=\"/metrics/hooks\">/metrics/hooks</a></li><li><a href=\"/healthz\">/healthz</a></li>\
<li><a href=\"/ready\">/ready</a></li></ul></body></html>\n";
