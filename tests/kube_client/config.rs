//! Every configuration source against kube-sim: kubeconfig with client
//! certificates over TLS (files and -data), CA checks, bearer token, tokenFile,
//! exec credential plugins (v1 and v1beta1), `--kube-server` override, and bad
//! client cert/key pairs rejected before any connection.

use crate::kube_client_common;

use base64::Engine;
use kube_client_common::*;
use kube_sim::{Sim, SimOptions, TlsFiles};
use shell_operator::kube::{Client, KubeError, KubeSettings};
use std::os::unix::fs::PermissionsExt;

const TOKEN: &str = "s3cret-token-value";

fn tls_sim(pki: &pki::Pki, token: Option<&str>) -> Sim {
    let tls = TlsFiles {
        cert: pki.path("server.crt"),
        key: pki.path("server.key"),
        client_ca: Some(pki.path("ca.crt")),
    };
    let sim = Sim::start_with(SimOptions {
        tls: Some(tls),
        require_token: token.map(String::from),
        ..Default::default()
    })
    .unwrap();
    sim.create(cm("default", "hello", "1", &[])).unwrap();
    sim
}

fn kubeconfig(
    dir: &std::path::Path,
    server: &str,
    cluster_extra: &str,
    user: &str,
) -> std::path::PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}\
         contexts:\n- name: test\n  context: {{cluster: c, user: u, namespace: default}}\nusers:\n- name: u\n  user:\n{user}"
    );
    let p = dir.join("config");
    std::fs::write(&p, text).unwrap();
    p
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// Client certificate from files (relative to the kubeconfig) and from -data fields;
/// the server requires authentication, which only the certificate provides.
#[test]
fn kubeconfig_client_certificate_over_tls() {
    let pki = pki::make("cert");
    let sim = tls_sim(&pki, Some(TOKEN));
    // Relative file paths resolve against the kubeconfig's directory.
    let kc = kubeconfig(
        &pki.dir,
        &sim.url(),
        "    certificate-authority: ca.crt\n",
        "    client-certificate: client.crt\n    client-key: client.key\n",
    );
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
    assert_eq!(c.default_namespace(), "default");

    let d = tempdir("cert-data");
    let kc = kubeconfig(
        &d,
        &sim.url(),
        &format!(
            "    certificate-authority-data: {}\n",
            b64(&pki.read("ca.crt"))
        ),
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(&pki.read("client.crt")),
            b64(&pki.read("client.key"))
        ),
    );
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);

    // Same CA but no credentials: the server's 401 Status comes back as an API error.
    let ca = format!(
        "    certificate-authority: {}\n",
        pki.path("ca.crt").display()
    );
    let kc = kubeconfig(&d, &sim.url(), &ca, "    {}\n");
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    let e = configmap_names(&c, "default").unwrap_err();
    assert_eq!(e.status_code(), Some(401), "{e}");
}

/// A server certificate from another CA is refused; insecure-skip-tls-verify accepts it.
#[test]
fn server_certificate_is_verified_against_the_cluster_ca() {
    let pki = pki::make("ca");
    let sim = tls_sim(&pki, None);
    let d = tempdir("ca");
    let kc = kubeconfig(
        &d,
        &sim.url(),
        &format!(
            "    certificate-authority: {}\n",
            pki.path("wrong-ca.crt").display()
        ),
        "    {}\n",
    );
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    let e = configmap_names(&c, "default").unwrap_err();
    assert!(matches!(e, KubeError::Transport { .. }), "{e}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");

    let kc = kubeconfig(
        &d,
        &sim.url(),
        "    insecure-skip-tls-verify: true\n",
        "    {}\n",
    );
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
}

/// A key that does not belong to the certificate fails at construction with a clear
/// error (ureq would otherwise panic in the handshake).
#[test]
fn mismatched_client_key_is_rejected_up_front() {
    let pki = pki::make("mismatch");
    let kc = kubeconfig(
        &pki.dir,
        "https://127.0.0.1:1",
        "    certificate-authority: ca.crt\n",
        "    client-certificate: client.crt\n    client-key: other.key\n",
    );
    let e = Client::from_config(&settings_for(&kc))
        .err()
        .expect("must fail");
    assert!(matches!(e, KubeError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("does not belong"), "{e}");
    // A missing certificate file names the file, context and field.
    let kc = kubeconfig(
        &pki.dir,
        "https://127.0.0.1:1",
        "",
        "    client-certificate: nope.crt\n    client-key: client.key\n",
    );
    let e = Client::from_config(&settings_for(&kc))
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("config")
            && e.contains("context 'test'")
            && e.contains("users[u].client-certificate")
            && e.contains("nope.crt"),
        "{e}"
    );
}

/// Bearer token over TLS; a wrong token gives 401 and never shows up in the error.
#[test]
fn kubeconfig_token_and_token_file() {
    let pki = pki::make("token");
    let sim = tls_sim(&pki, Some(TOKEN));
    let ca = format!(
        "    certificate-authority: {}\n",
        pki.path("ca.crt").display()
    );
    let d = tempdir("token");
    let kc = kubeconfig(&d, &sim.url(), &ca, &format!("    token: {TOKEN}\n"));
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);

    let kc = kubeconfig(&d, &sim.url(), &ca, "    token: wrong-token-xyz\n");
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    let e = configmap_names(&c, "default").unwrap_err();
    assert_eq!(e.status_code(), Some(401));
    assert!(!e.to_string().contains("wrong-token-xyz"), "{e}");

    // tokenFile, re-read after rotation.
    std::fs::write(d.join("tok"), "stale-token\n").unwrap();
    let kc = kubeconfig(&d, &sim.url(), &ca, "    tokenFile: tok\n");
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(
        configmap_names(&c, "default").unwrap_err().status_code(),
        Some(401)
    );
    std::fs::write(d.join("tok"), format!("{TOKEN}\n")).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
}

/// An exec plugin supplies the token (v1 and v1beta1); it runs once while the token
/// is valid, and again after the server refuses it.
#[test]
fn exec_plugin_credentials() {
    let sim = Sim::start_with(SimOptions {
        require_token: Some(TOKEN.into()),
        ..Default::default()
    })
    .unwrap();
    sim.create(cm("default", "hello", "1", &[])).unwrap();
    for api in ["v1", "v1beta1"] {
        let d = tempdir(&format!("exec-{api}"));
        let script = d.join("get-token.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho run >> \"$1\"\n\
                 echo '{{\"apiVersion\":\"client.authentication.k8s.io/{api}\",\"kind\":\"ExecCredential\",\
                 \"status\":{{\"token\":\"'\"$PLUGIN_TOKEN\"'\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}}}'\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let runs = d.join("runs");
        let user = format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/{api}\n      command: ./get-token.sh\n      args: [{}]\n      env:\n      - name: PLUGIN_TOKEN\n        value: {TOKEN}\n",
            runs.display()
        );
        let kc = kubeconfig(&d, &sim.url(), "", &user);
        let c = Client::from_config(&settings_for(&kc)).unwrap();
        for _ in 0..3 {
            assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
        }
        assert_eq!(
            std::fs::read_to_string(&runs).unwrap().lines().count(),
            1,
            "token is cached"
        );
    }
}

/// `--kube-server` replaces the kubeconfig's server; KUBE_CONTEXT picks a context.
#[test]
fn server_override_and_context_choice() {
    let sim = Sim::start();
    sim.create(cm("default", "hello", "1", &[])).unwrap();
    let d = tempdir("override");
    let kc = kubeconfig(&d, "http://127.0.0.1:1", "", "    {}\n");
    let s = KubeSettings {
        server: sim.url(),
        ..settings_for(&kc)
    };
    let c = Client::from_config(&s).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
    let s = KubeSettings {
        context: "missing".into(),
        ..settings_for(&kc)
    };
    let e = Client::from_config(&s)
        .err()
        .expect("must fail")
        .to_string();
    assert!(
        e.contains("context 'missing'") && e.contains("no such context"),
        "{e}"
    );
    // kube-sim's own kubeconfig works as is.
    sim.write_kubeconfig(&d.join("sim.yaml")).unwrap();
    let c = Client::from_config(&settings_for(&d.join("sim.yaml"))).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
}

/// `tls-server-name` is the name TLS sends and verifies, while the connection goes to
/// the server URL's address: the server's certificate names `localhost`, not the
/// other name.
#[test]
fn tls_server_name_is_the_verified_name() {
    let pki = pki::make("server-name");
    let sim = tls_sim(&pki, Some(TOKEN));
    let d = tempdir("server-name");
    let user = format!("    token: {TOKEN}\n");
    let ca = |name: &str| {
        format!(
            "    certificate-authority: {}\n    tls-server-name: {name}\n",
            pki.path("ca.crt").display()
        )
    };
    let kc = kubeconfig(&d, &sim.url(), &ca("localhost"), &user);
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    assert_eq!(configmap_names(&c, "default").unwrap(), ["hello"]);
    let kc = kubeconfig(&d, &sim.url(), &ca("not-in-the-certificate.example"), &user);
    let c = Client::from_config(&settings_for(&kc)).unwrap();
    let e = configmap_names(&c, "default").unwrap_err().to_string();
    assert!(
        e.to_lowercase().contains("certificate") || e.contains("NotValidForName"),
        "{e}"
    );
}
