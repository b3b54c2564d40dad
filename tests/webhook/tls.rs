//! TLS of the admission server with the real binary and curl: client
//! certificates when a client CA is configured, and a rotated server
//! certificate picked up without a restart.

use crate::webhook_common;

use std::time::{Duration, Instant};
use webhook_common::{Pki, admission_hook, curl, review, start};

/// With a client CA configured, only clients with a certificate it signed get in.
#[test]
fn client_certificate_is_required_when_a_client_ca_is_set() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let client_ca = pki.arg("client-ca.crt");
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &["--validating-webhook-client-ca", &client_ca],
    );
    let port = op.port_from_log("admission webhook server listening");
    let ca = pki.path("ca.crt");
    let without = curl(port, "/hooks/allow-example-com", &review("a"), &ca, &[]);
    assert_eq!(
        without.status, 0,
        "refused without a client certificate: {}",
        without.body
    );
    let (cert, key) = (pki.arg("client.crt"), pki.arg("client.key"));
    let with = curl(
        port,
        "/hooks/allow-example-com",
        &review("a"),
        &ca,
        &["--cert", &cert, "--key", &key],
    );
    assert_eq!(with.status, 200, "{}", with.stderr);
    assert_eq!(with.json()["response"]["allowed"], true);
    // A certificate from another CA is refused too.
    pki.issue("stranger", "ca", "extendedKeyUsage=clientAuth");
    let (cert, key) = (pki.arg("stranger.crt"), pki.arg("stranger.key"));
    let stranger = curl(
        port,
        "/hooks/allow-example-com",
        &review("a"),
        &ca,
        &["--cert", &cert, "--key", &key],
    );
    assert_eq!(stranger.status, 0);
}

/// cert-manager rewrites the files: new handshakes use the new certificate
/// without a restart.
#[test]
fn rotated_certificate_is_picked_up_without_restart() {
    let pki = Pki::make();
    let sim = kube_sim::Sim::start();
    let op = start(
        &[("validate.sh", admission_hook(&["allow.example.com"], &[]))],
        &sim,
        &pki,
        &[],
    );
    let port = op.port_from_log("admission webhook server listening");
    pki.ca("ca2");
    pki.issue(
        "server2",
        "ca2",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
    );
    let ca2 = pki.path("ca2.crt");
    assert_eq!(
        curl(port, "/healthz", "", &ca2, &["-X", "GET"]).status,
        0,
        "old cert is not trusted by ca2"
    );
    std::fs::copy(pki.path("server2.key"), pki.path("server.key")).expect("key");
    std::fs::copy(pki.path("server2.crt"), pki.path("server.crt")).expect("cert");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let a = curl(port, "/hooks/allow-example-com", &review("r"), &ca2, &[]);
        if a.status == 200 {
            assert_eq!(a.json()["response"]["allowed"], true);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "new certificate never served: {}",
            a.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        curl(port, "/healthz", "", &pki.path("ca.crt"), &["-X", "GET"]).status,
        0
    );
    op.wait_log("webhook certificate reloaded", Duration::from_secs(2));
}
