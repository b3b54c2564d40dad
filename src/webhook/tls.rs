//! TLS for the webhook servers: rustls 0.23 (ring provider, TLS 1.2 and 1.3),
//! the server certificate and key from the flag paths, re-read when the files
//! change (cert-manager rotates them in place) without a restart, and optional
//! client-certificate verification against the `*-client-ca` files.
//!
//! The [`ServerConfig`] is built once at startup; its certificate resolver is
//! called on every handshake (handler threads) and checks the files at most once
//! a second.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How often the certificate files are checked for changes.
const RECHECK: Duration = Duration::from_secs(1);

/// Builds the server config: certificate from `cert`/`key` (read now, so a bad
/// file fails startup), client CAs from `client_cas` (none: no client auth).
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_cas: &[PathBuf],
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = Arc::new(ReloadingCert::load(cert, key)?);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::from(format!("TLS setup: {e}")))?;
    let builder = if client_cas.is_empty() {
        builder.with_no_client_auth()
    } else {
        let roots = Arc::new(client_roots(client_cas)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| TlsError::from(format!("client CA: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut cfg = builder.with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Every certificate of every client CA file; a file without one is an error.
fn client_roots(files: &[PathBuf]) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for f in files {
        for c in read_certs(f)? {
            roots
                .add(c)
                .map_err(|e| TlsError::from(format!("client CA '{}': {e}", f.display())))?;
        }
    }
    Ok(roots)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = crate::bounded_read::read(path, crate::bounded_read::MAX_CONFIG_FILE)
        .map_err(|e| TlsError::from(format!("'{}': {e}", path.display())))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::from(format!("'{}': {e}", path.display())))?;
    if certs.is_empty() {
        return Err(format!("'{}': no PEM certificate found", path.display()).into());
    }
    Ok(certs)
}

/// Reads a certificate chain and its key and checks that they belong together.
fn load_pair(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>, TlsError> {
    let chain = read_certs(cert)?;
    let key_pem = crate::bounded_read::read(key, crate::bounded_read::MAX_CONFIG_FILE)
        .map_err(|e| TlsError::from(format!("'{}': {e}", key.display())))?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| TlsError::from(format!("'{}': unreadable private key: {e}", key.display())))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key_der).map_err(|e| {
        TlsError::from(format!("'{}': unsupported private key: {e}", key.display()))
    })?;
    let ck = CertifiedKey::new(chain, signer);
    ck.keys_match().map_err(|e| {
        format!(
            "'{}' is not the key of '{}': {e}",
            key.display(),
            cert.display()
        )
    })?;
    Ok(Arc::new(ck))
}

/// What identifies a file's content cheaply: modification time, size, inode.
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}

/// The current certificate, reloaded when either file changes.
#[derive(Debug)]
pub(crate) struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: Arc<CertifiedKey>,
    stamps: (Stamp, Stamp),
    checked: Instant,
}

impl ReloadingCert {
    /// Loads the pair now; an error names the file.
    pub(crate) fn load(cert: &Path, key: &Path) -> Result<ReloadingCert, TlsError> {
        let stamps = (stamp(cert), stamp(key));
        let current = load_pair(cert, key)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            state: Mutex::new(State {
                current,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to present, re-read first if the files changed. A rotated
    /// pair that does not load (e.g. the key written before the certificate)
    /// keeps the previous one until the next check.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.checked.elapsed() >= RECHECK {
            st.checked = Instant::now();
            let stamps = (stamp(&self.cert), stamp(&self.key));
            if stamps != st.stamps {
                match load_pair(&self.cert, &self.key) {
                    Ok(ck) => {
                        st.current = ck;
                        st.stamps = stamps;
                        crate::log::info(
                            "webhook certificate reloaded",
                            &[("cert", &self.cert.display().to_string())],
                        );
                    }
                    Err(e) => crate::log::warn(
                        "webhook certificate changed but cannot be loaded; keeping the old one",
                        &[("error", &e.to_string())],
                    ),
                }
            }
        }
        Arc::clone(&st.current)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// Why a webhook certificate or key could not be loaded: the file and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    problem: String,
}

impl From<String> for TlsError {
    fn from(problem: String) -> TlsError {
        TlsError { problem }
    }
}

impl From<&str> for TlsError {
    fn from(problem: &str) -> TlsError {
        TlsError::from(problem.to_string())
    }
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for TlsError {}
