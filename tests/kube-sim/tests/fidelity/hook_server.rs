//! A tiny independent HTTPS webhook server for the admission and conversion
//! fidelity tests: its own CA and certificate (made with `openssl`, valid for
//! `hooks.test.svc` and 127.0.0.1), rustls, one request per connection. It
//! records every request body it receives (path, JSON) and answers with what
//! the test's closure returns — written from the Kubernetes docs, not from
//! kube-sim's code, so it checks kube-sim rather than mirrors it.

use crate::common::{TempDir, temp_dir};
use base64::Engine;
use kube_sim::certs::openssl;
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

type Answer = dyn Fn(&str, &Value) -> Value + Send + Sync;

/// A running webhook server (stops accepting when the test process ends).
pub struct HookServer {
    pub port: u16,
    /// base64 of the CA certificate, for `caBundle`.
    pub ca_bundle: String,
    received: Arc<Mutex<Vec<(String, Value)>>>,
    _dir: TempDir,
}

fn tls_config(dir: &std::path::Path) -> Arc<ServerConfig> {
    openssl(
        dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key",
    );
    openssl(
        dir,
        "req -x509 -new -key ca.key -subj /CN=hook-ca -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out ca.crt",
    );
    openssl(
        dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out tls.key",
    );
    openssl(dir, "req -new -key tls.key -subj /CN=hooks -out tls.csr");
    std::fs::write(
        dir.join("tls.ext"),
        "basicConstraints=CA:FALSE\nsubjectAltName=DNS:hooks.test.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        "x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile tls.ext -out tls.crt",
    );
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(dir.join("tls.crt"))
        .unwrap()
        .map(|c| c.unwrap())
        .collect();
    let key = PrivateKeyDer::from_pem_file(dir.join("tls.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    Arc::new(cfg)
}

impl HookServer {
    /// Starts on a random loopback port; `answer(path, request body)` gives the reply body.
    pub fn start(
        name: &str,
        answer: impl Fn(&str, &Value) -> Value + Send + Sync + 'static,
    ) -> HookServer {
        let dir = temp_dir(&format!("hooks-{name}"));
        let cfg = tls_config(&dir);
        let ca = std::fs::read(dir.join("ca.crt")).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let (rec, answer): (_, Arc<Answer>) = (received.clone(), Arc::new(answer));
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (cfg, rec, answer) = (cfg.clone(), rec.clone(), answer.clone());
                std::thread::spawn(move || {
                    let conn = rustls::ServerConnection::new(cfg).unwrap();
                    let tls = rustls::StreamOwned::new(conn, tcp);
                    let _ = serve_one(tls, &rec, &*answer);
                });
            }
        });
        HookServer {
            port,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca),
            received,
            _dir: dir,
        }
    }

    /// Every (path, body) received so far.
    pub fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }
}

fn serve_one<S: Read + Write>(
    s: S,
    rec: &Mutex<Vec<(String, Value)>>,
    answer: &Answer,
) -> std::io::Result<()> {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut len = 0;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    rec.lock().unwrap().push((path.clone(), review.clone()));
    let out = serde_json::to_vec(&answer(&path, &review)).unwrap();
    let s = r.get_mut();
    write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        out.len()
    )?;
    s.write_all(&out)?;
    s.flush()
}

/// An AdmissionReview answer for `review` with `fields` merged into `response`.
pub fn admission_answer(review: &Value, fields: Value) -> Value {
    let mut resp = json!({"uid": review["request"]["uid"], "allowed": true});
    if let (Some(r), Some(f)) = (resp.as_object_mut(), fields.as_object()) {
        r.extend(f.clone());
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}
