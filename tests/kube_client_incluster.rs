//! In-cluster configuration against a TLS kube-sim: KUBERNETES_SERVICE_HOST/PORT and a
//! service-account directory (token, ca.crt, namespace) in a temp dir, pointed to by
//! KUBE_SERVICE_ACCOUNT_DIR. One test per binary because it sets process env vars.

mod kube_client_common;

use kube_client_common::*;
use kube_sim::{Sim, SimOptions, TlsFiles};
use shell_operator::kube::{Client, KubeSettings};

#[test]
fn in_cluster_service_account_with_token_rotation() {
    let pki = pki::make("incluster");
    let tls = TlsFiles {
        cert: pki.path("server.crt"),
        key: pki.path("server.key"),
        client_ca: None,
    };
    let sim = Sim::start_with(SimOptions {
        tls: Some(tls),
        require_token: Some("rotated-token".into()),
        ..Default::default()
    })
    .unwrap();
    sim.create(cm("ops", "hello", "1", &[])).unwrap();
    let sa = tempdir("sa");
    std::fs::write(sa.join("token"), "first-token\n").unwrap();
    std::fs::copy(pki.path("ca.crt"), sa.join("ca.crt")).unwrap();
    std::fs::write(sa.join("namespace"), "ops").unwrap();
    // SAFETY: this test binary has a single test, so no other thread reads the env.
    unsafe {
        std::env::set_var("KUBERNETES_SERVICE_HOST", "127.0.0.1");
        std::env::set_var("KUBERNETES_SERVICE_PORT", sim.port().to_string());
        std::env::set_var("KUBE_SERVICE_ACCOUNT_DIR", &sa);
        std::env::remove_var("KUBECONFIG");
        std::env::set_var("HOME", &sa);
    }
    let c = Client::from_config(&KubeSettings {
        qps: -1.0,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(c.default_namespace(), "ops");
    assert!(c.origin().contains("in-cluster"), "{}", c.origin());
    assert_eq!(
        configmap_names(&c, "ops").unwrap_err().status_code(),
        Some(401)
    );
    // The kubelet rotates the token: the next request uses the new one.
    std::fs::write(sa.join("token"), "rotated-token\n").unwrap();
    assert_eq!(configmap_names(&c, "ops").unwrap(), ["hello"]);
}
