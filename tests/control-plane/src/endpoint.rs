//! A place on this machine where the API server can reach a webhook server under
//! test. The operator registers `clientConfig.service` without a port, so the API
//! server dials port 443 of what the Service resolves to, and a Service of
//! `type: ExternalName` resolves to `https://<externalName>:443`. So an endpoint is a
//! loopback address of its own (`127.0.<from the pid>.<counter>`), a Service
//! `externalName: <that address>` and a serving certificate for
//! `<service>.<namespace>.svc` (the name the API server checks) signed by the
//! cluster CA.

use crate::ControlPlane;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// A loopback address no other endpoint of this process (or, by the pid, of
/// another test process) listens on.
fn loopback() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(20);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    assert!(n < 255, "out of loopback addresses");
    format!("127.0.{}.{n}", std::process::id() % 250 + 1)
}

/// Where one webhook server listens and how the API server finds it.
pub struct WebhookEndpoint {
    pub service: String,
    pub ip: String,
    /// Holds `tls.crt`, `tls.key` (and a copy of the CA, so parallel signings do not
    /// share openssl's serial file).
    pub dir: PathBuf,
    ca: PathBuf,
}

impl ControlPlane {
    /// Creates Service `service` in `ns` (ExternalName → a fresh loopback address)
    /// and a serving certificate for it.
    pub fn webhook_endpoint(&self, ns: &str, service: &str) -> Result<WebhookEndpoint, String> {
        let ip = loopback();
        self.apply(&format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {service}, namespace: {ns}}}\n\
             spec: {{type: ExternalName, externalName: \"{ip}\"}}\n"
        ))?;
        let dir = self.dir().join("endpoints").join(format!("{ns}-{service}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for f in ["ca.crt", "ca.key"] {
            std::fs::copy(self.dir().join(f), dir.join(f)).map_err(|e| e.to_string())?;
        }
        let dns = format!("{service}.{ns}.svc");
        crate::pki::server_cert(&dir, "tls", &[&dns], &[&ip])?;
        Ok(WebhookEndpoint {
            service: service.to_string(),
            ip,
            dir,
            ca: self.ca_file(),
        })
    }
}

impl WebhookEndpoint {
    /// The shell-operator flags (flant's and ours) for its `kind` server
    /// ("validating" or "conversion").
    pub fn flags(&self, kind: &str) -> Vec<String> {
        let file = |f: &str| self.dir.join(f).display().to_string();
        let mut out = Vec::new();
        for (flag, value) in [
            ("service-name", self.service.clone()),
            ("server-cert", file("tls.crt")),
            ("server-key", file("tls.key")),
            ("ca", self.ca.display().to_string()),
            ("listen-address", self.ip.clone()),
            ("listen-port", "443".into()),
        ] {
            out.push(format!("--{kind}-webhook-{flag}"));
            out.push(value);
        }
        out
    }
}
