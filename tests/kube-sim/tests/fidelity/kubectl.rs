//! Fidelity: the real kubectl (1.35, installed by
//! scripts/install-k8s-clients.sh or given as $KUBECTL) against kube-sim, with
//! default client-side settings (protobuf bodies, server-side field validation
//! via /openapi/v3, Table output, watch-list). The tests fail — never skip —
//! when kubectl is missing.

use crate::common;

use common::{Run, cm, run, temp_dir, tool};
use kube_sim::Sim;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A Sim plus a kubeconfig and private cache dir for kubectl.
struct Env {
    sim: Sim,
    dir: common::TempDir,
    kubectl: PathBuf,
}

impl Env {
    fn new(name: &str) -> Env {
        let kubectl = tool("kubectl", "KUBECTL");
        let sim = Sim::start();
        let dir = temp_dir(name);
        sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
        Env { sim, dir, kubectl }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "KUBECONFIG",
                self.dir.join("kubeconfig").display().to_string(),
            ),
            ("HOME", self.dir.display().to_string()),
        ]
    }

    fn kubectl(&self, args: &[&str]) -> Run {
        let cache = format!("--cache-dir={}", self.dir.join("cache").display());
        let mut all = vec![cache.as_str()];
        all.extend_from_slice(args);
        run(&self.kubectl, &all, &self.env(), 60)
    }

    /// Runs kubectl and asserts success, returning stdout.
    fn ok(&self, args: &[&str]) -> String {
        let r = self.kubectl(args);
        assert!(
            r.ok,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}\nrequests: {:#?}",
            r.stdout,
            r.stderr,
            self.tail()
        );
        r.stdout
    }

    fn tail(&self) -> Vec<String> {
        let all = self.sim.requests();
        all[all.len().saturating_sub(15)..].to_vec()
    }

    fn write(&self, file: &str, text: &str) -> String {
        let p = self.dir.join(file);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

/// `kubectl api-resources` lists the core kinds with short names and groups.
#[test]
fn kubectl_api_resources() {
    let e = Env::new("kc-apires");
    let out = e.ok(&["api-resources"]);
    for needle in [
        "configmaps",
        "deployments",
        "customresourcedefinitions",
        "leases",
        "cronjobs",
    ] {
        assert!(out.contains(needle), "{needle} missing from:\n{out}");
    }
    let line = out.lines().find(|l| l.starts_with("deployments")).unwrap();
    assert!(
        line.contains("deploy") && line.contains("apps/v1") && line.contains("Deployment"),
        "{line}"
    );
    let line = out
        .lines()
        .find(|l| l.starts_with("poddisruptionbudgets"))
        .unwrap();
    assert!(line.contains("pdb") && line.contains("policy/v1"), "{line}");
    let line = out
        .lines()
        .find(|l| l.starts_with("horizontalpodautoscalers"))
        .unwrap();
    assert!(line.contains("autoscaling/v2"), "preferred version: {line}");
    let rbac = e.ok(&[
        "api-resources",
        "--api-group=rbac.authorization.k8s.io",
        "-o",
        "name",
    ]);
    let mut rbac: Vec<&str> = rbac.lines().collect();
    rbac.sort();
    assert_eq!(
        rbac,
        [
            "clusterrolebindings.rbac.authorization.k8s.io",
            "clusterroles.rbac.authorization.k8s.io",
            "rolebindings.rbac.authorization.k8s.io",
            "roles.rbac.authorization.k8s.io"
        ]
    );
    let ns = e.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(
        ns.lines().any(|l| l == "namespaces") && !ns.lines().any(|l| l == "configmaps"),
        "{ns}"
    );
}

/// create namespace/configmap/secret/serviceaccount (protobuf bodies), get, label, patch, delete.
#[test]
fn kubectl_create_label_patch_delete() {
    let e = Env::new("kc-crud");
    e.ok(&["create", "namespace", "team"]);
    assert!(e.sim.get("v1", "Namespace", "", "team").is_some());
    e.ok(&[
        "create",
        "configmap",
        "conf",
        "-n",
        "team",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    e.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "team",
        "--from-literal=password=hunter2",
    ]);
    e.ok(&["create", "serviceaccount", "bot", "-n", "team"]);
    let conf = e.sim.get("v1", "ConfigMap", "team", "conf").unwrap();
    assert_eq!(conf["data"], json!({"a": "1", "b": "2"}));
    assert!(
        conf["metadata"].get("selfLink").is_none(),
        "empty protobuf fields are omitted"
    );
    let secret = e.sim.get("v1", "Secret", "team", "creds").unwrap();
    assert_eq!(
        (secret["data"]["password"].clone(), secret["type"].clone()),
        (json!("aHVudGVyMg=="), json!("Opaque"))
    );
    assert!(e.sim.get("v1", "ServiceAccount", "team", "bot").is_some());

    let table = e.ok(&["get", "configmaps", "-n", "team"]);
    assert!(table.lines().any(|l| l.starts_with("conf ")), "{table}");
    let got: Value =
        serde_json::from_str(&e.ok(&["get", "cm", "conf", "-n", "team", "-o", "json"])).unwrap();
    assert_eq!(got["data"]["b"], "2");

    e.ok(&["label", "cm", "conf", "-n", "team", "tier=gold"]);
    e.ok(&[
        "patch",
        "configmap",
        "conf",
        "-n",
        "team",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"c":"3"}}"#,
    ]);
    e.ok(&[
        "patch",
        "configmap",
        "conf",
        "-n",
        "team",
        "--type",
        "json",
        "-p",
        r#"[{"op":"remove","path":"/data/a"}]"#,
    ]);
    let conf = e.sim.get("v1", "ConfigMap", "team", "conf").unwrap();
    assert_eq!(conf["metadata"]["labels"]["tier"], "gold");
    assert_eq!(conf["data"], json!({"b": "2", "c": "3"}));
    let names = e.ok(&["get", "cm", "-n", "team", "-l", "tier=gold", "-o", "name"]);
    assert_eq!(names.trim(), "configmap/conf");

    e.ok(&["delete", "configmap", "conf", "-n", "team"]);
    assert!(e.sim.get("v1", "ConfigMap", "team", "conf").is_none());
    let missing = e.kubectl(&["get", "cm", "conf", "-n", "team"]);
    assert!(
        !missing.ok && missing.stderr.contains("NotFound"),
        "{}",
        missing.stderr
    );
    e.ok(&["delete", "namespace", "team"]);
    assert!(
        e.sim.get("v1", "Secret", "team", "creds").is_none(),
        "namespace deletion removes its contents"
    );
}

/// `kubectl get -w` prints objects created after it started watching.
#[test]
fn kubectl_get_watch() {
    let e = Env::new("kc-watch");
    e.sim.create(cm("default", "before", json!({}))).unwrap();
    let env = e.env();
    let cache = format!("--cache-dir={}", e.dir.join("cache").display());
    let kubectl = e.kubectl.clone();
    let watcher = std::thread::spawn(move || {
        run(
            &kubectl,
            &[
                &cache,
                "get",
                "configmaps",
                "-n",
                "default",
                "-w",
                "--request-timeout=0",
                "--output-watch-events",
            ],
            &env,
            8,
        )
    });
    let deadline = Instant::now() + Duration::from_secs(6);
    while e.sim.watch_count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        e.sim.watch_count(),
        1,
        "kubectl never opened a watch: {:?}",
        e.tail()
    );
    e.sim.create(cm("default", "after", json!({}))).unwrap();
    e.sim
        .delete("v1", "ConfigMap", "default", "before")
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    e.sim.drop_watches();
    let out = watcher.join().unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ADDED") && l.contains("before")),
        "{out:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("ADDED") && l.contains("after")),
        "{out:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("DELETED") && l.contains("before")),
        "{out:?}"
    );
}

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources: {status: {}}
"#;

/// apply a CRD, wait for Established, apply custom resources (create, unchanged, configure).
#[test]
fn kubectl_apply_crd_then_custom_resources() {
    let e = Env::new("kc-crd");
    let crd = e.write("crd.yaml", CRD);
    assert!(e.ok(&["apply", "-f", &crd]).contains("created"));
    let waited = e.ok(&[
        "wait",
        "--for=condition=established",
        "crd/widgets.example.com",
        "--timeout=20s",
    ]);
    assert!(waited.contains("condition met"), "{waited}");
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n";
    let f = e.write("cr.yaml", cr);
    assert!(
        e.ok(&["apply", "-f", &f])
            .contains("widget.example.com/w1 created")
    );
    assert!(e.ok(&["apply", "-f", &f]).contains("unchanged"));
    e.write("cr.yaml", &cr.replace("size: 3", "size: 5"));
    assert!(e.ok(&["apply", "-f", &f]).contains("configured"));
    let w = e
        .sim
        .get("example.com/v1", "Widget", "default", "w1")
        .unwrap();
    assert_eq!(w["spec"]["size"], 5);
    assert!(
        w["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );
    let listed = e.ok(&["get", "wd"]);
    assert!(listed.lines().any(|l| l.starts_with("w1 ")), "{listed}");
    e.ok(&["delete", "-f", &f]);
    assert!(
        e.sim
            .get("example.com/v1", "Widget", "default", "w1")
            .is_none()
    );
}

/// `kubectl wait` also sees a condition that appears later (watch-driven).
#[test]
fn kubectl_wait_for_later_condition() {
    let e = Env::new("kc-wait");
    e.sim.create(common::deployment("default", "d", 1)).unwrap();
    let env = e.env();
    let cache = format!("--cache-dir={}", e.dir.join("cache").display());
    let kubectl = e.kubectl.clone();
    let waiter = std::thread::spawn(move || {
        run(
            &kubectl,
            &[
                &cache,
                "wait",
                "--for=condition=Available",
                "deployment/d",
                "-n",
                "default",
                "--timeout=20s",
            ],
            &env,
            25,
        )
    });
    std::thread::sleep(Duration::from_millis(1500));
    let mut d = e.sim.get("apps/v1", "Deployment", "default", "d").unwrap();
    d["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
    e.sim.update(d).unwrap();
    let r = waiter.join().unwrap();
    assert!(r.ok && r.stdout.contains("condition met"), "{r:?}");
}

/// kubectl over HTTPS, verifying the server against the CA and authenticating with a client cert.
#[test]
fn kubectl_over_tls_with_client_cert() {
    let kubectl = tool("kubectl", "KUBECTL");
    let dir = temp_dir("kc-tls");
    let certs = kube_sim::certs::make_test_certs(&dir).unwrap();
    let opts = kube_sim::SimOptions {
        tls: Some(certs.tls_files()),
        require_token: Some("unused-token".into()),
        ..Default::default()
    };
    let sim = Sim::start_with(opts).unwrap();
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
         users:\n- name: u\n  user:\n    client-certificate: {}\n    client-key: {}\n\
         contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        sim.url(),
        certs.ca_cert.display(),
        certs.client_cert.display(),
        certs.client_key.display()
    );
    std::fs::write(dir.join("kubeconfig"), kc).unwrap();
    let env = vec![
        ("KUBECONFIG", dir.join("kubeconfig").display().to_string()),
        ("HOME", dir.display().to_string()),
    ];
    let r = run(&kubectl, &["get", "namespaces", "-o", "name"], &env, 60);
    assert!(r.ok, "{r:?}");
    assert!(
        r.stdout.lines().any(|l| l == "namespace/default"),
        "{}",
        r.stdout
    );
    let r = run(
        &kubectl,
        &[
            "create",
            "configmap",
            "tls-cm",
            "--from-literal=a=b",
            "-n",
            "default",
        ],
        &env,
        60,
    );
    assert!(r.ok, "{r:?}");
    assert!(sim.get("v1", "ConfigMap", "default", "tls-cm").is_some());
}

const DEPLOYMENT: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: a
        image: a:1
        ports: [{containerPort: 80}]
      - name: b
        image: b:1
        env: [{name: X, value: "1"}]
"#;

/// Re-applying a Deployment (kubectl's 3-way strategic merge patch) and a strategic
/// `kubectl patch` merge containers by name instead of replacing the list.
#[test]
fn kubectl_strategic_merge_on_containers() {
    let e = Env::new("kc-smp");
    let f = e.write("dep.yaml", DEPLOYMENT);
    e.ok(&["apply", "-f", &f]);
    e.write("dep.yaml", &DEPLOYMENT.replace("image: a:1", "image: a:2"));
    assert!(e.ok(&["apply", "-f", &f]).contains("configured"));
    e.ok(&[
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"b","image":"b:3"}]}}}}"#,
    ]);
    let d = e
        .sim
        .get("apps/v1", "Deployment", "default", "web")
        .unwrap();
    let cs = d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(cs.len(), 2, "{cs:?}");
    assert_eq!(
        (
            cs[0]["image"].clone(),
            cs[0]["ports"][0]["containerPort"].clone()
        ),
        (json!("a:2"), json!(80))
    );
    assert_eq!(
        (cs[1]["image"].clone(), cs[1]["env"][0]["name"].clone()),
        (json!("b:3"), json!("X"))
    );
}

/// With auto-ready, `kubectl rollout status` and `kubectl wait --for=condition=complete` finish.
#[test]
fn kubectl_rollout_status_with_auto_ready() {
    let e = Env::new("kc-rollout");
    e.sim.set_auto_ready(true);
    let f = e.write("dep.yaml", DEPLOYMENT);
    e.ok(&["apply", "-f", &f]);
    let out = e.ok(&["rollout", "status", "deployment/web", "--timeout=20s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    // `kubectl create job` would send a protobuf Job, which kube-sim does not decode; apply sends JSON.
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\n  namespace: default\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n";
    let jf = e.write("job.yaml", job);
    e.ok(&["apply", "-f", &jf]);
    let out = e.ok(&[
        "wait",
        "--for=condition=complete",
        "job/once",
        "--timeout=20s",
    ]);
    assert!(out.contains("condition met"), "{out}");
}
