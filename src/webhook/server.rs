//! The webhooks' HTTPS side on the shared listener core (`listen/`): `GET /healthz`
//! answers here; every other request must be a JSON `POST` and goes to the
//! webhook's [`Handler`]. [`TlsServer`] is a [`Server`] bound with TLS and this
//! routing; its limits are [`Limits::default`].

pub(crate) use crate::listen::Stopper;
pub use crate::listen::{Limits, Reply};
use crate::listen::{Request, Server, Service};
use rustls::ServerConfig;
use std::net::SocketAddr;
use std::sync::Arc;

/// Answers one webhook request: a JSON POST to `path`. Called on handler threads.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, path: &str, body: &[u8]) -> Reply;
}

/// A bound webhook server, ready to run on its own thread.
pub struct TlsServer(Server);

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
        let service = Arc::new(Webhook(handler));
        let label = format!("{name} webhook server");
        let server = Server::bind_tcp(&label, address, port, Some(tls), service, limits)?;
        Ok(TlsServer(server.renamed(&format!("webhook-{name}"))))
    }

    /// `webhook-admission` or `webhook-conversion`.
    pub(crate) fn name(&self) -> &str {
        self.0.name()
    }

    /// The bound address (the real port when 0 was asked for).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.0.local_addr()
    }

    /// A handle that stops [`TlsServer::serve`].
    pub(crate) fn stopper(&self) -> Option<Stopper> {
        self.0.stopper()
    }

    /// The accept thread's body.
    pub fn serve(self) {
        self.0.serve()
    }
}

/// `/healthz`, method and content-type checks, then the handler.
struct Webhook(Arc<dyn Handler>);

impl Service for Webhook {
    fn serve(&self, req: &Request) -> Reply {
        match (req.method.as_str(), req.path.as_str()) {
            ("GET", "/healthz") => Reply::text(200, "ok\n"),
            (_, "/healthz") => Reply::text(405, "method not allowed\n"),
            ("POST", path) => {
                let media = req
                    .content_type
                    .split(';')
                    .next()
                    .unwrap_or_default()
                    .trim();
                if media != "application/json" {
                    return Reply::text(415, "Content-Type must be application/json\n");
                }
                self.0.handle(path, &req.body)
            }
            _ => Reply::text(405, "only POST is accepted\n"),
        }
    }
}
