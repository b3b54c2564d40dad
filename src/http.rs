//! The plain HTTP server on `--listen-address:--listen-port`: `/metrics` (Prometheus
//! text: self metrics and hook metrics), `/metrics/hooks` (hook metrics only),
//! `/healthz` and `/ready`. It runs on the shared listener core (`listen/`, thread
//! `http` and its handlers `http-N`) and reads only shared state: the metrics
//! registry and a readiness flag. addon-operator adds its own routes (`/ready` and
//! `/readyz` with flant's texts, `/status/converge`) through [`ExtraRoutes`].

use crate::listen::{Limits, Reply, Request, Server, Service};
use crate::metrics::Metrics;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Routes served before the built-in ones: path and query → status and text body,
/// `None` for a path it does not serve.
pub(crate) type ExtraRoutes = Arc<dyn Fn(&str, &str) -> Option<(u16, String)> + Send + Sync>;

/// Binds the metrics server on `address:port`; an error names the address.
pub(crate) fn bind(
    address: &str,
    port: u16,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    extra: Option<ExtraRoutes>,
) -> Result<Server, String> {
    let service = Arc::new(MetricsService {
        metrics,
        ready,
        extra,
    });
    Server::bind_tcp("http", address, port, None, service, Limits::small())
}

struct MetricsService {
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    extra: Option<ExtraRoutes>,
}

impl Service for MetricsService {
    fn serve(&self, req: &Request) -> Reply {
        const PROMETHEUS: &str = "text/plain; version=0.0.4";
        let reply = |status, content_type, body| Reply {
            status,
            content_type,
            body,
        };
        if let Some((status, text)) = self.extra.as_ref().and_then(|f| f(&req.path, &req.query)) {
            return reply(status, "text/plain", text.into_bytes());
        }
        match req.path.as_str() {
            "/metrics" => reply(200, PROMETHEUS, self.metrics.render()),
            "/metrics/hooks" => reply(200, PROMETHEUS, self.metrics.render_hooks()),
            "/healthz" => reply(200, "text/plain", b"ok\n".to_vec()),
            "/ready" if self.ready.load(Ordering::Relaxed) => {
                reply(200, "text/plain", b"ready\n".to_vec())
            }
            "/ready" => reply(
                503,
                "text/plain",
                b"not ready: startup is not finished\n".to_vec(),
            ),
            "/" => reply(200, "text/html", INDEX.as_bytes().to_vec()),
            _ => reply(404, "text/plain", b"not found\n".to_vec()),
        }
    }
}

const INDEX: &str = "<html><body><h1>shell-operator</h1><ul>\
<li><a href=\"/metrics\">/metrics</a></li><li><a href=\"/metrics/hooks\">/metrics/hooks</a></li><li><a href=\"/healthz\">/healthz</a></li>\
<li><a href=\"/ready\">/ready</a></li></ul></body></html>\n";
