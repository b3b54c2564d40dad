//! The helm client against kube-sim with the real helm binaries: render, install
//! and upgrade (revision, status and stored checksum), the upgrade decision before
//! and after a rendered object is deleted, list, uninstall, and helm's stderr in
//! render errors. Each scenario runs with helm 4 (`.tools/bin/helm` or `$HELM`)
//! and helm 3 (`.tools/bin/helm3` or `$HELM3`); a missing binary fails the test.

use crate::common::TempDir;
use crate::harness::{helm_bin, repo_root};
use kube_sim::Sim;
use shell_operator::addon::release::helm::{
    Helm, ObjectRef, Release, UpgradeFacts, manifest_objects, object_exists_in, upgrade_reason,
};
use shell_operator::kube::{Client, KubeSettings};
use std::path::{Path, PathBuf};
use std::time::Duration;

const NS: &str = "addons";

/// A kube-sim, a kubeconfig for it, a helm client and a kube client.
struct World {
    sim: Sim,
    dir: TempDir,
    helm: Helm,
    client: Client,
}

impl World {
    fn new(bin: PathBuf, tag: &str) -> World {
        let sim = Sim::start();
        let dir = TempDir::new(tag);
        let kubeconfig = dir.0.join("kubeconfig");
        sim.write_kubeconfig(&kubeconfig).expect("write kubeconfig");
        let mut helm = Helm::new(bin, NS);
        helm.kubeconfig = Some(kubeconfig.clone());
        helm.timeout = Duration::from_secs(60);
        helm.work_dir = Some(dir.0.to_path_buf());
        let settings = KubeSettings {
            kubeconfig: kubeconfig.display().to_string(),
            qps: -1.0,
            ..Default::default()
        };
        let client = Client::from_config(&settings).expect("kube client");
        World {
            sim,
            dir,
            helm,
            client,
        }
    }

    /// Writes a values file and returns its path.
    fn values(&self, name: &str, yaml: &str) -> PathBuf {
        let p = self.dir.0.join(name);
        std::fs::write(&p, yaml).expect("write values");
        p
    }

    /// The production decision for release `greeter`: why it upgrades, if it does.
    fn reason(&self, last: Option<&Release>, sum: &str) -> Option<String> {
        let facts = UpgradeFacts {
            released: Box::new(|| Ok(self.helm.manifest("greeter")?)),
            exists: Box::new(|o| object_exists_in(&self.client, o, NS)),
        };
        let decision = upgrade_reason(last, sum, &facts).expect("upgrade_reason");
        decision.map(|u| u.reason)
    }
}

fn chart(name: &str) -> PathBuf {
    repo_root().join("tests/addon/charts").join(name)
}

fn helm4() -> PathBuf {
    helm_bin(4)
}

fn helm3() -> PathBuf {
    helm_bin(3)
}

/// render → install → dedup → auto-heal → upgrade → list → uninstall.
fn release_lifecycle(bin: PathBuf, major: u32) {
    let w = World::new(bin, &format!("helm{major}-life"));
    assert_eq!(w.helm.major_version().unwrap(), major);
    let chart = chart("greeter");
    let values = w.values("v1.yaml", "greeting: hi\n");

    let manifest = w.helm.render("greeter", &chart, &values).unwrap();
    assert!(manifest.contains("greeting: \"hi\""), "{manifest}");
    assert!(
        manifest.contains(&format!("namespace: \"{NS}\"")),
        "{manifest}"
    );
    let objects = manifest_objects(&manifest).unwrap();
    let cm = ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: None,
        name: "greeter-cm".into(),
    };
    assert_eq!(objects, vec![cm.clone()]);
    let sum1 = sum_of(&manifest);

    assert_eq!(w.helm.last_release("greeter").unwrap(), None);
    assert_eq!(w.helm.list().unwrap(), Vec::<String>::new());
    assert_eq!(w.reason(None, &sum1).as_deref(), Some("release absent"));

    // The value `_addonOperatorModuleChecksum` holds flant's checksum (the MD5 of
    // the plain render), never ours: read through helm's commands (not the storage
    // Secret's label) a release has no checksum of ours, so helm must render it
    // (an upgrade the post-renderer stops when nothing changed).
    w.helm
        .upgrade("greeter", &chart, &values, &sum1, "flant-1")
        .unwrap();
    let last = w.helm.last_release("greeter").unwrap();
    let expected = Release {
        revision: 1,
        status: "deployed".into(),
        ..Release::default()
    };
    assert_eq!(last.as_ref(), Some(&expected));
    let obj = w
        .sim
        .get("v1", "ConfigMap", NS, "greeter-cm")
        .expect("ConfigMap installed");
    assert_eq!(obj["data"]["greeting"], "hi");

    assert_eq!(
        w.reason(last.as_ref(), &sum1).as_deref(),
        Some("values or chart changed")
    );
    // Nothing changed (the checksum as the storage Secret's label gives it): skip.
    // Rendered object deleted behind helm's back: upgrade.
    let last = last.map(|r| Release {
        checksum: Some(sum1.clone()),
        ..r
    });
    assert_eq!(w.reason(last.as_ref(), &sum1), None);
    w.sim.delete("v1", "ConfigMap", NS, "greeter-cm").unwrap();
    assert_eq!(
        w.reason(last.as_ref(), &sum1).as_deref(),
        Some("resource /ConfigMap/greeter-cm absent")
    );

    // New values: a new checksum, revision 2, and the object is back.
    let values2 = w.values("v2.yaml", "greeting: bye\n");
    let manifest2 = w.helm.render("greeter", &chart, &values2).unwrap();
    let sum2 = sum_of(&manifest2);
    assert_ne!(sum1, sum2);
    assert_eq!(
        w.reason(last.as_ref(), &sum2).as_deref(),
        Some("values or chart changed")
    );
    w.helm
        .upgrade("greeter", &chart, &values2, &sum2, "flant-2")
        .unwrap();
    let last = w.helm.last_release("greeter").unwrap().expect("release");
    assert_eq!((last.revision, last.status.as_str()), (2, "deployed"));
    assert_eq!(last.checksum, None);
    let obj = w
        .sim
        .get("v1", "ConfigMap", NS, "greeter-cm")
        .expect("ConfigMap back");
    assert_eq!(obj["data"]["greeting"], "bye");
    let last = Release {
        checksum: Some(sum2.clone()),
        ..last
    };
    assert_eq!(w.reason(Some(&last), &sum2), None);

    assert_eq!(w.helm.list().unwrap(), ["greeter"]);
    assert!(w.helm.uninstall("greeter").unwrap());
    assert!(!w.helm.uninstall("greeter").unwrap(), "second uninstall");
    assert_eq!(w.helm.last_release("greeter").unwrap(), None);
    assert_eq!(w.helm.list().unwrap(), Vec::<String>::new());
    assert!(w.sim.get("v1", "ConfigMap", NS, "greeter-cm").is_none());
}

/// A template error reaches the caller with helm's own message; so does a failed upgrade.
fn render_error_carries_stderr(bin: PathBuf, major: u32) {
    let w = World::new(bin, &format!("helm{major}-broken"));
    let chart = chart("broken");
    let values = w.values("v.yaml", "other: 1\n");
    let e = w.helm.render("broken", &chart, &values).unwrap_err();
    assert!(!e.is_release_not_found(), "{e}");
    let e = e.to_string();
    assert!(e.contains("broken-chart needs .Values.mustSet"), "{e}");
    assert!(e.contains("helm template broken"), "{e}");
    let e = w
        .helm
        .upgrade("broken", &chart, &values, "x", "y")
        .unwrap_err()
        .to_string();
    assert!(e.contains("broken-chart needs .Values.mustSet"), "{e}");
    assert_eq!(w.helm.last_release("broken").unwrap(), None);

    let missing = w.values("absent-chart-values.yaml", "");
    let e = w
        .helm
        .render("x", Path::new("/nonexistent/chart"), &missing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/chart"), "{e}");
}

/// An install whose object the API rejects leaves a `failed` release: it is listed
/// (helm 3 only with `--all`), has no checksum, and must be upgraded; the retry
/// once the API accepts again deploys revision 2.
fn failed_release_is_listed_and_retried(bin: PathBuf, major: u32) {
    let w = World::new(bin, &format!("helm{major}-failed"));
    let chart = chart("greeter");
    let values = w.values("v.yaml", "greeting: hi\n");
    let manifest = w.helm.render("greeter", &chart, &values).unwrap();
    let sum = sum_of(&manifest);

    // Only the write of the object fails (helm 4 applies server-side, helm 3 creates).
    let collection = format!("/api/v1/namespaces/{NS}/configmaps");
    w.sim
        .fail_matching(&format!("PATCH {collection}/greeter-cm"), 1, 422);
    w.sim.fail_matching(&format!("POST {collection}"), 1, 422);
    let e = w
        .helm
        .upgrade("greeter", &chart, &values, &sum, "f")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("helm upgrade greeter") && e.contains("exit status 1"),
        "{e}\nrequests: {:#?}",
        w.sim.requests()
    );
    let last = w
        .helm
        .last_release("greeter")
        .unwrap()
        .expect("failed release");
    assert_eq!(
        (
            last.revision,
            last.status.as_str(),
            last.checksum.as_deref()
        ),
        (1, "failed", None)
    );
    assert_eq!(w.helm.list().unwrap(), ["greeter"]);
    assert_eq!(
        w.reason(Some(&last), &sum).as_deref(),
        Some("status failed")
    );

    w.helm
        .upgrade("greeter", &chart, &values, &sum, "f")
        .unwrap();
    let last = w.helm.last_release("greeter").unwrap().expect("release");
    assert_eq!((last.revision, last.status.as_str()), (2, "deployed"));
    let last = Release {
        checksum: Some(sum.clone()),
        ..last
    };
    assert_eq!(w.reason(Some(&last), &sum), None);
}

#[test]
fn helm4_failed_release_is_listed_and_retried() {
    failed_release_is_listed_and_retried(helm4(), 4);
}

#[test]
fn helm3_failed_release_is_listed_and_retried() {
    failed_release_is_listed_and_retried(helm3(), 3);
}

#[test]
fn helm4_release_lifecycle() {
    release_lifecycle(helm4(), 4);
}

#[test]
fn helm4_render_error_carries_stderr() {
    render_error_carries_stderr(helm4(), 4);
}

#[test]
fn helm3_release_lifecycle() {
    release_lifecycle(helm3(), 3);
}

#[test]
fn helm3_render_error_carries_stderr() {
    render_error_carries_stderr(helm3(), 3);
}

/// A binary that is not helm: the error names it.
#[test]
fn missing_binary_is_named() {
    let helm = Helm::new("/nonexistent/helm-bin", NS);
    let e = helm.major_version().unwrap_err().to_string();
    assert!(e.contains("/nonexistent/helm-bin"), "{e}");
}

/// Stores a release record the way helm's Secret driver does (base64 of the
/// release JSON; helm accepts it without gzip), here stuck in `status`.
fn store_release(sim: &Sim, name: &str, status: &str) {
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let release = serde_json::json!({
        "name": name,
        "namespace": NS,
        "version": 1,
        "info": {"status": status, "description": "stored by the test"},
        "chart": {"metadata": {"apiVersion": "v2", "name": "greeter", "version": "0.0.1"}},
        "config": {},
        "manifest": "",
    });
    let helm_encoded = b64(release.to_string().as_bytes());
    let secret = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {
            "name": format!("sh.helm.release.v1.{name}.v1"),
            "namespace": NS,
            "labels": {"owner": "helm", "name": name, "status": status, "version": "1"},
        },
        "data": {"release": b64(helm_encoded.as_bytes())},
    });
    sim.create(secret).expect("store release Secret");
}

/// A release stuck in pending-install (an operator killed mid-upgrade) is listed —
/// helm 3 needs `--all` for that, helm 4 lists every status — and must be upgraded.
fn pending_release_is_listed(bin: PathBuf, major: u32) {
    let w = World::new(bin, &format!("helm{major}-pending"));
    store_release(&w.sim, "stuck", "pending-install");
    let last = w
        .helm
        .last_release("stuck")
        .unwrap()
        .expect("stored release");
    assert_eq!(
        (
            last.revision,
            last.status.as_str(),
            last.checksum.as_deref()
        ),
        (1, "pending-install", None)
    );
    assert_eq!(w.helm.list().unwrap(), ["stuck"]);
    assert_eq!(
        w.reason(Some(&last), "sum").as_deref(),
        Some("status pending-install")
    );
}

#[test]
fn helm4_pending_release_is_listed() {
    pending_release_is_listed(helm4(), 4);
}

#[test]
fn helm3_pending_release_is_listed() {
    pending_release_is_listed(helm3(), 3);
}

/// A checksum stand-in for the decision (any text distinct for distinct manifests).
fn sum_of(manifest: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    manifest.hash(&mut h);
    format!("{:016x}", h.finish())
}
