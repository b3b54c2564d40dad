//! Fidelity: the real helm 4 (installed by scripts/install-k8s-clients.sh or
//! given as $HELM) installs, upgrades and uninstalls the one-ConfigMap chart in
//! testdata/ against kube-sim: release Secrets arrive as protobuf, the
//! ConfigMap as server-side apply, and `--wait` uses the watcher. The test
//! fails — never skips — when helm is missing.

use crate::common;

use common::{run, temp_dir, tool};
use kube_sim::Sim;
use serde_json::Value;
use std::path::Path;

fn release_secrets(sim: &Sim) -> Vec<Value> {
    sim.list("v1", "Secret", "default")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["owner"] == "helm")
        .collect()
}

/// install → upgrade → uninstall, checking the ConfigMap and release Secrets each time.
#[test]
fn helm_install_upgrade_uninstall() {
    let helm = tool("helm", "HELM");
    let sim = Sim::start();
    let dir = temp_dir("helm");
    sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    let d = |sub: &str| dir.join(sub).display().to_string();
    let env = vec![
        ("KUBECONFIG", d("kubeconfig")),
        ("HOME", d("")),
        ("HELM_CACHE_HOME", d("cache")),
        ("HELM_CONFIG_HOME", d("config")),
        ("HELM_DATA_HOME", d("data")),
    ];
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/onecm-chart");
    let chart = chart.to_str().unwrap();
    let helm_ok = |args: &[&str]| {
        let r = run(&helm, args, &env, 90);
        let tail: Vec<String> = sim.requests().into_iter().rev().take(15).collect();
        assert!(
            r.ok,
            "helm {args:?} failed:\nstdout: {}\nstderr: {}\nlast requests: {tail:#?}",
            r.stdout, r.stderr
        );
        r.stdout
    };

    let out = helm_ok(&[
        "install",
        "demo",
        chart,
        "-n",
        "default",
        "--set",
        "extra=yes",
        "--wait",
        "--timeout",
        "30s",
    ]);
    assert!(out.contains("STATUS: deployed"), "{out}");
    let cm = sim
        .get("v1", "ConfigMap", "default", "demo-cm")
        .expect("chart ConfigMap created");
    assert_eq!(cm["data"]["greeting"], "hello");
    assert_eq!(cm["data"]["extra"], "yes");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/instance"],
        "demo"
    );
    let secrets = release_secrets(&sim);
    assert_eq!(secrets.len(), 1);
    assert_eq!(secrets[0]["type"], "helm.sh/release.v1");
    assert_eq!(secrets[0]["metadata"]["labels"]["status"], "deployed");

    let out = helm_ok(&[
        "upgrade",
        "demo",
        chart,
        "-n",
        "default",
        "--set",
        "greeting=bye",
        "--wait",
        "--timeout",
        "30s",
    ]);
    assert!(out.contains("REVISION: 2"), "{out}");
    let cm = sim.get("v1", "ConfigMap", "default", "demo-cm").unwrap();
    assert_eq!(cm["data"]["greeting"], "bye");
    assert!(
        cm["data"].get("extra").is_none(),
        "server-side apply removes what the chart no longer renders: {cm}"
    );
    let mut statuses: Vec<String> = release_secrets(&sim)
        .iter()
        .map(|s| {
            format!(
                "{}={}",
                s["metadata"]["labels"]["version"].as_str().unwrap_or("?"),
                s["metadata"]["labels"]["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    statuses.sort();
    assert_eq!(statuses, ["1=superseded", "2=deployed"]);
    assert!(helm_ok(&["list", "-n", "default"]).contains("demo"));

    let out = helm_ok(&[
        "uninstall",
        "demo",
        "-n",
        "default",
        "--wait",
        "--timeout",
        "30s",
    ]);
    assert!(out.contains("uninstalled"), "{out}");
    assert!(sim.get("v1", "ConfigMap", "default", "demo-cm").is_none());
    assert!(release_secrets(&sim).is_empty());
}

/// With auto-ready, `helm install --wait` of a Deployment finishes (helm's watcher sees it become ready),
/// and `helm upgrade --wait` with more replicas waits for the new generation.
#[test]
fn helm_wait_for_deployment_with_auto_ready() {
    let helm = tool("helm", "HELM");
    let sim = Sim::start();
    sim.set_auto_ready(true);
    let dir = temp_dir("helm-deploy");
    sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
    let d = |sub: &str| dir.join(sub).display().to_string();
    let env = vec![
        ("KUBECONFIG", d("kubeconfig")),
        ("HOME", d("")),
        ("HELM_CACHE_HOME", d("cache")),
        ("HELM_CONFIG_HOME", d("config")),
        ("HELM_DATA_HOME", d("data")),
    ];
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/deploy-chart");
    let chart = chart.to_str().unwrap();
    for (verb, replicas) in [("install", "2"), ("upgrade", "4")] {
        let set = format!("replicas={replicas}");
        let args = [
            verb,
            "site",
            chart,
            "-n",
            "default",
            "--set",
            &set,
            "--wait",
            "--timeout",
            "30s",
        ];
        let r = run(&helm, &args, &env, 60);
        assert!(r.ok, "helm {verb}: {r:?}");
        let dep = sim
            .get("apps/v1", "Deployment", "default", "site-web")
            .unwrap();
        assert_eq!(dep["status"]["availableReplicas"].to_string(), replicas);
    }
}
