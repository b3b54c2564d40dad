//! `make bench` (issue 14): admission latency as a client sees it. kube-sim runs
//! in process; the operator binary (`--operator PATH`, default
//! target/release/shell-operator) serves one validating hook (allow) whose
//! objectSelector is `hooked=yes`; kube-sim reaches it through a Service and
//! Endpoints object over TLS. ConfigMap creates with and without the label are
//! alternated one by one, so both see the same machine:
//!
//! 1. a Rust client (ureq, keep-alive) POSTing to kube-sim: p50/p99 of each,
//!    their ratio, and the added latency (paired differences);
//! 2. `kubectl create configmap` (when .tools/bin/kubectl exists): the same,
//!    as a user at a terminal sees it (process start included).
//!
//! Needs `openssl` for the certificates.

mod common;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUST_PAIRS: usize = 300;
const KUBECTL_PAIRS: usize = 40;
const SVC: &str = "shell-operator-validating-svc";
const HOOK: &str = "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then cat <<'EOF'\nconfigVersion: v1\nkubernetesValidating:\n- name: bench.example.com\n  labelSelector:\n    matchLabels: {hooked: \"yes\"}\n  rules:\n  - {apiGroups: [\"\"], apiVersions: [\"v1\"], operations: [\"CREATE\"], resources: [\"configmaps\"], scope: Namespaced}\nEOF\nexit 0; fi\necho '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"\n";

fn main() {
    let work = std::env::temp_dir().join(format!("so-bench-admission-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("mkdir");
    let bin = common::arg_value("--operator")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/release/shell-operator"));
    assert!(
        bin.is_file(),
        "{} missing: build it or pass --operator PATH",
        bin.display()
    );
    common::make_cert(&work, &format!("DNS:{SVC}.webhooks.svc"));
    let sim = kube_sim::Sim::start();
    sim.write_kubeconfig(&work.join("kubeconfig"))
        .expect("kubeconfig");
    common::write_exec(&work.join("hooks/allow.sh"), HOOK);
    let (mut child, port) = start(&bin, &work);
    route(&sim, port);
    wait_registered(&sim);

    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let url = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    let mut n = 0;
    let mut create = |hooked: bool| {
        n += 1;
        let labels = if hooked {
            json!({"hooked": "yes"})
        } else {
            json!({})
        };
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{n}"), "labels": labels}});
        let t = Instant::now();
        let r = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .expect("create");
        assert_eq!(r.status().as_u16(), 201, "create through kube-sim");
        t.elapsed()
    };
    for i in 0..20 {
        create(i % 2 == 0);
    }
    let (hooked, plain) = pairs(RUST_PAIRS, &mut create);
    report(
        &format!("Rust client (ureq, keep-alive), {RUST_PAIRS} pairs"),
        hooked,
        plain,
    );

    let kubectl = Path::new(".tools/bin/kubectl");
    if kubectl.is_file() {
        let mut m = 0;
        let mut kc = |hooked: bool| {
            m += 1;
            let labels = if hooked {
                json!({"hooked": "yes"})
            } else {
                json!({})
            };
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("kc-{m}"), "labels": labels}});
            let file = work.join(format!("kc-{m}.json"));
            std::fs::write(&file, obj.to_string()).expect("manifest");
            let args = [
                "create".to_string(),
                "-f".into(),
                file.display().to_string(),
            ];
            let t = Instant::now();
            let ok = Command::new(kubectl)
                .args(&args)
                .arg(format!("--cache-dir={}", work.join("cache").display()))
                .env("KUBECONFIG", work.join("kubeconfig"))
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kubectl {args:?}");
            t.elapsed()
        };
        kc(true);
        kc(false);
        let (hooked, plain) = pairs(KUBECTL_PAIRS, &mut kc);
        report(
            &format!("kubectl create -f, {KUBECTL_PAIRS} pairs"),
            hooked,
            plain,
        );
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&work);
}

/// Alternates hooked and plain creates: (hooked, plain) latencies in pair order.
fn pairs(n: usize, create: &mut impl FnMut(bool) -> Duration) -> (Vec<Duration>, Vec<Duration>) {
    let (mut hooked, mut plain) = (Vec::new(), Vec::new());
    for _ in 0..n {
        hooked.push(create(true));
        plain.push(create(false));
    }
    (hooked, plain)
}

fn ms(d: f64) -> f64 {
    d * 1e3
}

fn pct(v: &[f64], q: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn report(what: &str, hooked: Vec<Duration>, plain: Vec<Duration>) {
    let h: Vec<f64> = hooked.iter().map(Duration::as_secs_f64).collect();
    let p: Vec<f64> = plain.iter().map(Duration::as_secs_f64).collect();
    let d: Vec<f64> = h.iter().zip(&p).map(|(a, b)| a - b).collect();
    println!("admission latency, {what}:");
    println!(
        "  create, no webhook      : p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(pct(&p, 0.5)),
        ms(pct(&p, 0.99))
    );
    println!(
        "  create through webhook  : p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(pct(&h, 0.5)),
        ms(pct(&h, 0.99))
    );
    println!(
        "  added (paired)          : p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(pct(&d, 0.5)),
        ms(pct(&d, 0.99))
    );
    println!(
        "  ratio of p50            : {:.1}x",
        pct(&h, 0.5) / pct(&p, 0.5)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// The operator with its admission server on a known port; (child, that port).
fn start(bin: &Path, work: &Path) -> (std::process::Child, u16) {
    let port = free_port();
    let p = |f: &str| work.join(f).display().to_string();
    let port_s = port.to_string();
    let extra = [
        "--log-level",
        "error",
        "--kube-config",
        &p("kubeconfig"),
        "--namespace",
        "webhooks",
        "--validating-webhook-server-cert",
        &p("tls.crt"),
        "--validating-webhook-server-key",
        &p("tls.key"),
        "--validating-webhook-ca",
        &p("ca.crt"),
        "--validating-webhook-listen-address",
        "127.0.0.1",
        "--validating-webhook-listen-port",
        &port_s,
    ];
    let (child, http) = common::start_operator(bin, work, &extra, &[]).expect("operator");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !common::ready(http) {
        assert!(Instant::now() < deadline, "operator not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

fn route(sim: &kube_sim::Sim, port: u16) {
    sim.create(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SVC, "namespace": "webhooks"},
        "spec": {"ports": [{"port": 443, "targetPort": port}]}}))
        .expect("service");
    sim.create(json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": SVC, "namespace": "webhooks"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port}]}]}))
        .expect("endpoints");
}

fn wait_registered(sim: &kube_sim::Sim) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while sim
        .list(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "",
        )
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "webhook configuration not registered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
