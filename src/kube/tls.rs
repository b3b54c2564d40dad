//! TLS for the API connection: rustls with the ring provider, roots taken only from
//! the cluster CA (never a bundled or system store), optional client certificate.
//! A client certificate and key are checked to match here, at startup, because a
//! mismatch would otherwise surface as a panic inside the TLS handshake. Startup
//! only, main thread.

use super::config::TlsSettings;
use super::error::KubeError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};

/// Builds ureq's TLS config from resolved settings.
pub(crate) fn tls_config(s: &TlsSettings) -> Result<TlsConfig, KubeError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut b = TlsConfig::builder().unversioned_rustls_crypto_provider(provider);
    b = if s.insecure_skip_verify {
        b.disable_verification(true)
    } else {
        let ca = match &s.ca_pem {
            Some(pem) => certs(pem, "certificate-authority")?,
            None => Vec::new(),
        };
        // No CA means "trust nothing but ... nothing": a TLS server then fails with
        // UnknownIssuer, which is the honest answer (we never guess a root store).
        b.root_certs(RootCerts::new_with_certs(&ca))
    };
    if let (Some(cert), Some(key_pem)) = (&s.client_cert_pem, &s.client_key_pem) {
        let chain = certs(cert, "client-certificate")?;
        let key = PrivateKey::from_pem(key_pem).map_err(|e| KubeError::Tls {
            what: "client-key".into(),
            message: e.to_string(),
        })?;
        check_pair(&chain, key_pem)?;
        b = b.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(b.build())
}

/// All certificates in a PEM blob; at least one is required.
fn certs(pem: &[u8], what: &str) -> Result<Vec<Certificate<'static>>, KubeError> {
    let mut out = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        match item {
            Ok(PemItem::Certificate(c)) => out.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(KubeError::Tls {
                    what: what.into(),
                    message: e.to_string(),
                });
            }
        }
    }
    if out.is_empty() {
        return Err(KubeError::Tls {
            what: what.into(),
            message: "no PEM certificate found".into(),
        });
    }
    Ok(out)
}

/// Fails unless the key in `key_pem` is the private key of the first certificate of
/// `chain`.
fn check_pair(chain: &[Certificate<'static>], key_pem: &[u8]) -> Result<(), KubeError> {
    let err = |m: String| KubeError::Tls {
        what: "client-certificate/client-key".into(),
        message: m,
    };
    let key_der = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| err(format!("unreadable private key: {e}")))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&key_der)
        .map_err(|e| err(format!("unsupported private key: {e}")))?;
    let ders: Vec<CertificateDer<'static>> = chain
        .iter()
        .map(|c| CertificateDer::from(c.der().to_vec()))
        .collect();
    rustls::sign::CertifiedKey::new(ders, signer)
        .keys_match()
        .map_err(|e| err(format!("the key does not belong to the certificate: {e}")))
}
