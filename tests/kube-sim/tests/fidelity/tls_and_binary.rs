//! The `kube-sim` binary (flags, first stdout line, seeding, kubeconfig-out)
//! and HTTPS mode (server cert, client-cert and bearer-token authentication),
//! with certificates made by the `openssl` CLI in a temp dir.

use crate::common;

use common::{Client, temp_dir};
use kube_sim::{Sim, SimOptions, TlsFiles};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

/// CA, server and client certificates via kube_sim::certs (openssl CLI).
fn make_certs(dir: &Path) {
    kube_sim::certs::make_test_certs(dir).expect("openssl certificate generation");
}

fn tls_agent(dir: &Path, client_cert: bool) -> ureq::Agent {
    use ureq::tls::{ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig, parse_pem};
    let certs = |f: &str| -> Vec<ureq::tls::Certificate<'static>> {
        let pem = std::fs::read(dir.join(f)).unwrap();
        parse_pem(&pem)
            .filter_map(|i| match i {
                Ok(PemItem::Certificate(c)) => Some(c.to_owned()),
                _ => None,
            })
            .collect()
    };
    let mut tls = TlsConfig::builder()
        .root_certs(RootCerts::new_with_certs(&certs("ca.crt")))
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()));
    if client_cert {
        let key = PrivateKey::from_pem(&std::fs::read(dir.join("client.key")).unwrap())
            .unwrap()
            .to_owned();
        tls = tls.client_cert(Some(ClientCert::new_with_certs(&certs("client.crt"), key)));
    }
    ureq::Agent::config_builder()
        .tls_config(tls.build())
        .http_status_as_error(false)
        .proxy(None)
        .build()
        .new_agent()
}

fn code(agent: &ureq::Agent, url: &str, token: Option<&str>) -> u16 {
    let mut req = agent.get(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    req.call().expect("https request").status().as_u16()
}

/// HTTPS with a client CA: a verified client cert or the token authenticates; nothing else does.
#[test]
fn tls_with_client_certs_and_token() {
    let dir = temp_dir("tls");
    make_certs(&dir);
    let tls = TlsFiles {
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
        client_ca: Some(dir.join("ca.crt")),
    };
    let sim = Sim::start_with(SimOptions {
        tls: Some(tls),
        require_token: Some("tok".into()),
        ..Default::default()
    })
    .unwrap();
    assert!(sim.url().starts_with("https://127.0.0.1:"));
    let url = format!("{}/api/v1/namespaces", sim.url());
    assert_eq!(code(&tls_agent(&dir, false), &url, None), 401);
    assert_eq!(code(&tls_agent(&dir, false), &url, Some("tok")), 200);
    assert_eq!(code(&tls_agent(&dir, true), &url, None), 200);
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).unwrap();
    let text = std::fs::read_to_string(&kc).unwrap();
    assert!(
        text.contains(&sim.url())
            && text.contains("token: tok")
            && text.contains("insecure-skip-tls-verify: true")
    );
}

/// Bad TLS files give an error naming the file, not a panic.
#[test]
fn tls_bad_files_error() {
    let dir = temp_dir("badtls");
    std::fs::write(dir.join("x.pem"), "not a pem").unwrap();
    let tls = TlsFiles {
        cert: dir.join("x.pem"),
        key: dir.join("x.pem"),
        client_ca: None,
    };
    let err = Sim::start_with(SimOptions {
        tls: Some(tls),
        ..Default::default()
    })
    .err()
    .expect("must fail");
    assert!(err.to_string().contains("x.pem"), "{err}");
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_binary(args: &[&str]) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kube-sim");
    let out = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).unwrap();
    (Killed(child), line.trim().to_string())
}

/// The binary prints its URL first, seeds manifests (CRDs first) and writes a kubeconfig.
#[test]
fn binary_seeds_and_writes_kubeconfig() {
    let dir = temp_dir("bin");
    let kc = dir.join("kubeconfig");
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/seed");
    let (_child, line) = spawn_binary(&[
        "--port",
        "0",
        "--seed",
        seed.to_str().unwrap(),
        "--kubeconfig-out",
        kc.to_str().unwrap(),
    ]);
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line was {line:?}"));
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let c = Client::new(url);
    assert_eq!(
        c.get("/api/v1/namespaces/demo/configmaps/settings").body["data"]["mode"],
        "fast"
    );
    assert_eq!(
        c.get("/apis/example.com/v1/namespaces/demo/widgets/seeded-widget")
            .body["spec"]["size"],
        1
    );
    assert!(
        std::fs::read_to_string(&kc)
            .unwrap()
            .contains(&format!("server: {url}"))
    );
}

/// With --tls-cert/--tls-key the first line says https.
#[test]
fn binary_tls_flags() {
    let dir = temp_dir("bintls");
    make_certs(&dir);
    let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
    let (_child, line) = spawn_binary(&[
        "--port",
        "0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let url = line.strip_prefix("listening on ").unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{line}");
    assert_eq!(
        code(&tls_agent(&dir, false), &format!("{url}/version"), None),
        200
    );
}

/// Unknown flags exit with status 2 and the usage text.
#[test]
fn binary_rejects_unknown_flag() {
    let out = Command::new(env!("CARGO_BIN_EXE_kube-sim"))
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: kube-sim"));
}

/// A TLS watch whose client goes away is noticed and its subscription released.
#[test]
fn tls_watch_ends_when_client_leaves() {
    let dir = temp_dir("tlswatch");
    let certs = kube_sim::certs::make_test_certs(&dir).unwrap();
    let tls = TlsFiles {
        client_ca: None,
        ..certs.tls_files()
    };
    let sim = Sim::start_with(SimOptions {
        tls: Some(tls),
        ..Default::default()
    })
    .unwrap();
    {
        let agent = tls_agent(&dir, false);
        let resp = agent
            .get(format!("{}/api/v1/configmaps?watch=1", sim.url()))
            .call()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while sim.watch_count() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(sim.watch_count(), 1);
        drop(resp);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sim.watch_count() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        sim.watch_count(),
        0,
        "watch thread did not notice the client leaving"
    );
}
