//! End to end with real clients (issue 14): the operator runs flant's webhook
//! examples (`examples/webhooks`), registers them in kube-sim itself, and kube-sim
//! calls them over TLS the way kube-apiserver does — routed through the Service
//! and Endpoints objects the test creates (pointing at the operator's ports) and
//! verified against `<service>.webhooks.svc`. Everything after start-up is
//! driven by kubectl: a denial prints the hook's message, the mutating hook's
//! label is stored, a CronTab is converted by the hook on write and on read,
//! and with the operator stopped failurePolicy Fail denies and Ignore admits.

use crate::common::{Operator, TempDir};
use crate::webhook_common::{Pki, start};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const VALIDATING_SVC: &str = "shell-operator-validating-svc";
const CONVERSION_SVC: &str = "shell-operator-conversion-svc";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn example(rel: &str) -> String {
    let p = repo("examples/webhooks").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// kubectl with a private kubeconfig and cache; (ok, stdout, stderr).
struct Kubectl {
    dir: TempDir,
}

impl Kubectl {
    fn new(sim: &kube_sim::Sim) -> Kubectl {
        let dir = TempDir::new("kubectl");
        sim.write_kubeconfig(&dir.0.join("kubeconfig"))
            .expect("kubeconfig");
        Kubectl { dir }
    }

    fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(repo(".tools/bin/kubectl"))
            .arg(format!(
                "--cache-dir={}",
                self.dir.0.join("cache").display()
            ))
            .args(args)
            .env("KUBECONFIG", self.dir.0.join("kubeconfig"))
            .env("HOME", &self.dir.0)
            .output()
            .expect("run .tools/bin/kubectl (scripts/install-k8s-clients.sh)");
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args);
        assert!(ok, "kubectl {args:?}:\n{out}\n{err}");
        out
    }

    fn apply(&self, name: &str, yaml: &str) -> (bool, String, String) {
        let p = self.dir.0.join(name);
        std::fs::write(&p, yaml).expect("manifest");
        self.run(&["apply", "-f", &p.display().to_string()])
    }
}

/// Service (port 443 → the operator's port) and Endpoints at 127.0.0.1:port.
fn route(sim: &kube_sim::Sim, name: &str, port: u16) {
    sim.create(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "webhooks"},
        "spec": {"ports": [{"port": 443, "targetPort": port}]}}))
        .expect("service");
    sim.create(json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": name, "namespace": "webhooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port}]}]}))
        .expect("endpoints");
}

fn registered(sim: &kube_sim::Sim) -> bool {
    let crd = sim.get(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "",
        "crontabs.stable.example.com",
    );
    let cfg = |kind| {
        sim.get(
            "admissionregistration.k8s.io/v1",
            kind,
            "",
            "shell-operator-hooks-hooks",
        )
    };
    crd.is_some_and(|c| c["spec"]["conversion"]["strategy"] == "Webhook")
        && cfg("ValidatingWebhookConfiguration").is_some()
        && cfg("MutatingWebhookConfiguration").is_some()
}

fn start_operator(sim: &kube_sim::Sim, pki: &Pki) -> Operator {
    let hooks = [
        ("configmap-policy.sh", example("hooks/configmap-policy.sh")),
        (
            "crontab-conversion.sh",
            example("hooks/crontab-conversion.sh"),
        ),
    ];
    let op = start(&hooks, sim, pki, &[]);
    route(
        sim,
        VALIDATING_SVC,
        op.port_from_log("admission webhook server listening"),
    );
    route(
        sim,
        CONVERSION_SVC,
        op.port_from_log("conversion webhook server listening"),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !registered(sim) {
        assert!(Instant::now() < deadline, "not registered:\n{}", op.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    op
}

/// A PKI whose server certificate names both Services as kube-apiserver dials them.
fn service_pki() -> Pki {
    let pki = Pki::make();
    pki.issue(
        "server",
        "ca",
        &format!(
            "subjectAltName=DNS:{VALIDATING_SVC}.webhooks.svc,DNS:{CONVERSION_SVC}.webhooks.svc,IP:127.0.0.1\nextendedKeyUsage=serverAuth"
        ),
    );
    pki
}

const PASSWORD_CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {password: hunter2}\n";
const PLAIN_CM: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {color: blue}\n";
const CRONTAB_V1BETA1: &str = "apiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata: {name: nightly}\nspec: {cron: ['0', '3', '*', '*', '*'], image: backup}\n";

#[test]
fn example_webhooks_driven_by_kubectl_through_kube_sim() {
    let pki = service_pki();
    let sim = kube_sim::Sim::start_with(kube_sim::SimOptions {
        seed_dir: Some(repo("examples/webhooks/seed")),
        ..Default::default()
    })
    .expect("kube-sim");
    let mut op = start_operator(&sim, &pki);
    let k = Kubectl::new(&sim);

    let (ok, _, err) = k.apply("db.yaml", PASSWORD_CM);
    assert!(!ok);
    assert!(
        err.contains("admission webhook \"configmap-policy.example.com\" denied the request: ConfigMap db holds a password: use a Secret"),
        "{err}"
    );
    assert!(sim.get("v1", "ConfigMap", "default", "db").is_none());

    let (ok, _, err) = k.apply("settings.yaml", PLAIN_CM);
    assert!(ok, "{err}");
    let stored = sim
        .get("v1", "ConfigMap", "default", "settings")
        .expect("created");
    assert_eq!(
        stored["metadata"]["labels"]["checked-by"], "shell-operator",
        "the mutating hook's patch is stored"
    );

    // Written as v1beta1: the hook converts it to the storage version v1. The
    // example only converts upwards, so the answer (v1 back to v1beta1) fails
    // after the write, as it would on kube-apiserver.
    let (ok, _, err) = k.apply("nightly.yaml", CRONTAB_V1BETA1);
    assert!(!ok);
    assert!(
        err.contains("conversion webhook for stable.example.com/v1, Kind=CronTab failed: no conversion path from stable.example.com/v1 to stable.example.com/v1beta1"),
        "{err}\n{}",
        op.logs()
    );
    let stored = sim.list("stable.example.com/v1", "CronTab", "default");
    assert_eq!(stored[0]["apiVersion"], "stable.example.com/v1");
    assert_eq!(stored[0]["spec"]["cronSpec"], "0 3 * * *");

    // Stored as v1beta1 (written before conversion existed), read as v1 through the hook.
    sim.create(json!({"apiVersion": "stable.example.com/v1beta1", "kind": "CronTab",
        "metadata": {"name": "legacy", "namespace": "default"}, "spec": {"cron": ["*", "*", "*", "*", "*/5"]}}))
        .expect("legacy crontab");
    let got: Value = serde_json::from_str(&k.ok(&[
        "get",
        "crontabs.v1.stable.example.com",
        "legacy",
        "-o",
        "json",
    ]))
    .expect("json");
    assert_eq!(got["apiVersion"], "stable.example.com/v1");
    assert_eq!(got["spec"], json!({"cronSpec": "* * * * */5"}));

    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(Duration::from_secs(10)), Some(0));
    let (ok, _, err) = k.run(&["create", "configmap", "while-down"]);
    assert!(!ok);
    assert!(
        err.contains("failed calling webhook \"configmap-label.example.com\""),
        "{err}"
    );
    for kind in [
        "mutatingwebhookconfiguration",
        "validatingwebhookconfiguration",
    ] {
        k.ok(&[
            "patch",
            kind,
            "shell-operator-hooks-hooks",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]"#,
        ]);
    }
    k.ok(&["create", "configmap", "while-down"]);
    assert!(
        sim.get("v1", "ConfigMap", "default", "while-down")
            .is_some()
    );
}
