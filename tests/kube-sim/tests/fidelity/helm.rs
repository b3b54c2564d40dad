//! Fidelity: the real helm 4.1 and helm 3.17 (installed by
//! scripts/install-k8s-clients.sh as .tools/bin/helm and .tools/bin/helm3, or
//! given as $HELM and $HELM3) against kube-sim:
//! - helm 4 installs, upgrades and uninstalls the one-ConfigMap chart in
//!   testdata/: release Secrets arrive as protobuf, the ConfigMap as
//!   server-side apply, and `--wait` uses the watcher;
//! - both helms run the whole lifecycle of testdata/rbac-app-chart
//!   (ServiceAccount, Role, RoleBinding, ConfigMap, Service, Deployment, and a
//!   `lookup`) with default validation: upgrade --install twice, template with
//!   --dry-run=server, history, list, get values, uninstall;
//! - kubectl applies the rendered chart, through /openapi/v3 and through the
//!   /openapi/v2 fallback.
//!
//! The tests fail — never skip — when a binary is missing.

use crate::common;

use common::{run, temp_dir, tool};
use kube_sim::Sim;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

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

/// Which real helm a test drives.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Major {
    /// helm 4.1: `.tools/bin/helm` or $HELM.
    V4,
    /// helm 3.17: `.tools/bin/helm3` or $HELM3.
    V3,
}

/// A Sim with a kubeconfig, private helm/kubectl homes, and one helm binary.
struct Cluster {
    sim: Sim,
    dir: common::TempDir,
    helm: PathBuf,
    major: Major,
}

impl Cluster {
    fn new(major: Major, name: &str) -> Cluster {
        let helm = match major {
            Major::V4 => tool("helm", "HELM"),
            Major::V3 => tool("helm3", "HELM3"),
        };
        let sim = Sim::start();
        let dir = temp_dir(name);
        sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
        Cluster {
            sim,
            dir,
            helm,
            major,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        vec![
            ("KUBECONFIG", d("kubeconfig")),
            ("HOME", d("")),
            ("HELM_CACHE_HOME", d("cache")),
            ("HELM_CONFIG_HOME", d("config")),
            ("HELM_DATA_HOME", d("data")),
        ]
    }

    fn check(&self, what: &str, args: &[&str], r: common::Run) -> String {
        let all = self.sim.requests();
        let tail = &all[all.len().saturating_sub(15)..];
        assert!(
            r.ok,
            "{what} {args:?} failed:\nstdout: {}\nstderr: {}\nlast requests: {tail:#?}",
            r.stdout, r.stderr
        );
        r.stdout
    }

    /// Runs helm and asserts success, returning stdout.
    fn helm(&self, args: &[&str]) -> String {
        let r = run(&self.helm, args, &self.env(), 90);
        self.check(&format!("{:?} helm", self.major), args, r)
    }

    /// Runs helm with `-o json` appended and parses stdout.
    fn helm_json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.helm(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("helm {all:?}: {e}: {out}"))
    }

    /// Runs the real kubectl and asserts success, returning stdout.
    fn kubectl(&self, args: &[&str]) -> String {
        let kubectl = tool("kubectl", "KUBECTL");
        let cache = format!("--cache-dir={}", self.dir.join("kcache").display());
        let mut all = vec![cache.as_str()];
        all.extend_from_slice(args);
        let r = run(&kubectl, &all, &self.env(), 60);
        self.check("kubectl", args, r)
    }

    /// The object or a panic naming it.
    fn must(&self, api_version: &str, kind: &str, ns: &str, name: &str) -> Value {
        self.sim
            .get(api_version, kind, ns, name)
            .unwrap_or_else(|| panic!("{kind} {ns}/{name} missing"))
    }
}

fn rbac_chart() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/rbac-app-chart")
        .display()
        .to_string()
}

/// The six kinds the rbac-app chart renders for release `rel`: (apiVersion, kind, name).
fn chart_objects(rel: &str) -> Vec<(&'static str, &'static str, String)> {
    let app = format!("{rel}-app");
    vec![
        ("v1", "ServiceAccount", app.clone()),
        ("rbac.authorization.k8s.io/v1", "Role", app.clone()),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", app.clone()),
        ("v1", "ConfigMap", format!("{app}-config")),
        ("v1", "Service", app.clone()),
        ("apps/v1", "Deployment", app),
    ]
}

/// A namespace `team` (strict namespaces on) holding the ConfigMap the chart looks up.
fn seed_team(sim: &Sim) {
    sim.set_strict_namespaces(true);
    sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}))
        .unwrap();
    sim.create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "team"}, "data": {"token": "s3cret"}}))
        .unwrap();
}

/// `version=status` of each release Secret of `rel` in `team`, sorted.
fn release_states(sim: &Sim, rel: &str) -> Vec<String> {
    let mut out: Vec<String> = sim
        .list("v1", "Secret", "team")
        .iter()
        .filter(|s| s["metadata"]["labels"]["owner"] == "helm")
        .map(|s| {
            let name = s["metadata"]["name"].as_str().unwrap_or("?");
            let version = s["metadata"]["labels"]["version"].as_str().unwrap_or("?");
            assert_eq!(name, format!("sh.helm.release.v1.{rel}.v{version}"));
            assert_eq!(s["type"], "helm.sh/release.v1");
            assert_eq!(s["metadata"]["labels"]["name"], rel);
            format!(
                "{version}={}",
                s["metadata"]["labels"]["status"].as_str().unwrap_or("?")
            )
        })
        .collect();
    out.sort();
    out
}

/// After the first install: every object with the default values and the looked-up token.
fn assert_first_revision(c: &Cluster) {
    let sa = c.must("v1", "ServiceAccount", "team", "rel-app");
    assert_eq!(
        sa["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "Helm"
    );
    assert_eq!(
        sa["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "rel"
    );
    let role = c.must("rbac.authorization.k8s.io/v1", "Role", "team", "rel-app");
    assert_eq!(role["rules"][0]["resources"], json!(["configmaps"]));
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list", "watch"]));
    let rb = c.must(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "team",
        "rel-app",
    );
    assert_eq!(
        rb["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "rel-app"})
    );
    assert_eq!(rb["subjects"][0]["namespace"], "team");
    let cm = c.must("v1", "ConfigMap", "team", "rel-app-config");
    assert_eq!(cm["data"]["greeting"], "hello");
    assert_eq!(cm["data"]["looked-up-token"], "s3cret");
    assert_eq!(cm["data"]["roles-in-namespace"], "0");
    let svc = c.must("v1", "Service", "team", "rel-app");
    assert_eq!(svc["spec"]["ports"][0]["port"], 8080);
    let dep = c.must("apps/v1", "Deployment", "team", "rel-app");
    assert_eq!(dep["spec"]["replicas"], 1);
    let pod = &dep["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "rel-app");
    assert_eq!(pod["containers"][0]["image"], "nginx:1.27");
    assert_eq!(release_states(&c.sim, "rel"), ["1=deployed"]);
}

/// After the upgrade with changed values: every changed value landed.
fn assert_second_revision(c: &Cluster) {
    let cm = c.must("v1", "ConfigMap", "team", "rel-app-config");
    assert_eq!(cm["data"]["greeting"], "bye");
    assert_eq!(cm["data"]["port"], "9090");
    assert_eq!(
        cm["data"]["roles-in-namespace"], "1",
        "lookup lists the Role of revision 1"
    );
    let role = c.must("rbac.authorization.k8s.io/v1", "Role", "team", "rel-app");
    assert_eq!(role["rules"][0]["verbs"], json!(["get"]));
    assert_eq!(
        c.must("v1", "Service", "team", "rel-app")["spec"]["ports"][0]["port"],
        9090
    );
    let dep = c.must("apps/v1", "Deployment", "team", "rel-app");
    assert_eq!(dep["spec"]["replicas"], 3);
    assert_eq!(
        dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        9090
    );
    assert_eq!(
        release_states(&c.sim, "rel"),
        ["1=superseded", "2=deployed"]
    );
}

/// The values the upgrade sets.
const UPGRADE_SETS: &str = "greeting=bye,replicas=3,port=9090,rules[0].verbs={get}";

/// The whole release lifecycle of the rbac-app chart with one helm version,
/// all with helm's default (server-side) validation.
fn chart_lifecycle(major: Major) {
    let c = Cluster::new(major, &format!("helm-rbac-{major:?}"));
    seed_team(&c.sim);
    let chart = rbac_chart();
    let base = ["upgrade", "--install", "rel", chart.as_str(), "-n", "team"];
    let out = c.helm(&base);
    assert!(
        out.contains("STATUS: deployed") && out.contains("REVISION: 1"),
        "{out}"
    );
    assert_first_revision(&c);

    let mut up = base.to_vec();
    up.extend(["--set", UPGRADE_SETS]);
    let out = c.helm(&up);
    assert!(out.contains("REVISION: 2"), "{out}");
    assert_second_revision(&c);

    let offline = c.helm(&["template", "rel", chart.as_str(), "-n", "team"]);
    assert!(offline.contains("looked-up-token: \"none\""), "{offline}");
    let online = c.helm(&[
        "template",
        "rel",
        chart.as_str(),
        "-n",
        "team",
        "--dry-run=server",
    ]);
    assert!(online.contains("looked-up-token: \"s3cret\""), "{online}");
    assert!(online.contains("roles-in-namespace: \"1\""), "{online}");
    assert!(online.contains("kind: RoleBinding"), "{online}");

    let history = c.helm_json(&["history", "rel", "-n", "team"]);
    let revs: Vec<(i64, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["revision"].as_i64().unwrap(),
                h["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(revs, [(1, "superseded".into()), (2, "deployed".into())]);

    // helm 4 lists releases in every state by default and has no --all.
    let list_args: &[&str] = match major {
        Major::V4 => &["list", "-n", "team"],
        Major::V3 => &["list", "--all", "-n", "team"],
    };
    let list = c.helm_json(list_args);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(list[0]["name"], "rel");
    assert_eq!(list[0]["revision"], "2");
    assert_eq!(list[0]["status"], "deployed");
    assert_eq!(list[0]["chart"], "rbac-app-0.1.0");

    let values = c.helm_json(&["get", "values", "rel", "-n", "team"]);
    assert_eq!(
        values,
        json!({"greeting": "bye", "replicas": 3, "port": 9090, "rules": [{"verbs": ["get"]}]})
    );

    let out = c.helm(&["uninstall", "rel", "-n", "team"]);
    assert!(out.contains("uninstalled"), "{out}");
    for (av, kind, name) in chart_objects("rel") {
        assert!(
            c.sim.get(av, kind, "team", &name).is_none(),
            "{kind} {name} left after uninstall"
        );
    }
    assert!(release_states(&c.sim, "rel").is_empty());
    assert!(
        c.sim
            .get("v1", "ConfigMap", "team", "cluster-info")
            .is_some()
    );
}

/// helm 4.1 installs, upgrades, renders (with lookup), reports and uninstalls
/// a chart with a ServiceAccount, Role, RoleBinding, ConfigMap, Service and Deployment.
#[test]
fn helm4_rbac_chart_lifecycle() {
    chart_lifecycle(Major::V4);
}

/// The same lifecycle with helm 3.17 (client-side create and three-way merge patches).
#[test]
fn helm3_rbac_chart_lifecycle() {
    chart_lifecycle(Major::V3);
}

/// kubectl applies the rendered chart (validating through /openapi/v3), and
/// re-applies a change as a patch.
#[test]
fn kubectl_applies_rendered_chart() {
    let c = Cluster::new(Major::V4, "helm-rbac-kubectl");
    seed_team(&c.sim);
    let chart = rbac_chart();
    let manifest = c.helm(&["template", "kc", chart.as_str(), "-n", "team"]);
    let file = c.dir.join("manifest.yaml");
    std::fs::write(&file, &manifest).unwrap();
    let file = file.display().to_string();
    let out = c.kubectl(&["apply", "-n", "team", "-f", &file]);
    assert!(
        out.contains("role.rbac.authorization.k8s.io/kc-app created"),
        "{out}"
    );
    for (av, kind, name) in chart_objects("kc") {
        c.must(av, kind, "team", &name);
    }
    std::fs::write(&file, manifest.replace("\"hello\"", "\"again\"")).unwrap();
    let out = c.kubectl(&["apply", "-n", "team", "-f", &file]);
    assert!(out.contains("configmap/kc-app-config configured"), "{out}");
    let cm = c.must("v1", "ConfigMap", "team", "kc-app-config");
    assert_eq!(cm["data"]["greeting"], "again");
    assert!(
        c.sim
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /openapi/v3/apis/rbac.authorization.k8s.io/v1"))
    );
}

/// With /openapi/v3 failing, kubectl's validation falls back to /openapi/v2,
/// fetched as the gnostic protobuf: the document must come with a content type
/// Go can parse and must decode, or the apply fails ("failed to download openapi").
#[test]
fn kubectl_validation_falls_back_to_openapi_v2() {
    let c = Cluster::new(Major::V4, "helm-rbac-v2");
    seed_team(&c.sim);
    c.sim.fail_matching("GET /openapi/v3", 1000, 404);
    let manifest = c.helm(&["template", "v2", &rbac_chart(), "-n", "team"]);
    let file = c.dir.join("manifest.yaml");
    std::fs::write(&file, &manifest).unwrap();
    let out = c.kubectl(&["apply", "-n", "team", "-f", &file.display().to_string()]);
    assert!(
        out.contains("rolebinding.rbac.authorization.k8s.io/v2-app created"),
        "{out}"
    );
    c.must(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "team",
        "v2-app",
    );
    assert!(
        c.sim
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /openapi/v2"))
    );
}

/// `--wait` with auto-ready: install and an upgrade that changes the pod template
/// finish (helm 3 waits for the Service's clusterIP and the Deployment's new
/// ReplicaSet; helm 4 for kstatus), and uninstall takes the ReplicaSets along.
fn wait_with_auto_ready(major: Major) {
    let c = Cluster::new(major, &format!("helm-rbac-wait-{major:?}"));
    seed_team(&c.sim);
    c.sim.set_auto_ready(true);
    let chart = rbac_chart();
    let base = [
        "upgrade",
        "--install",
        "rel",
        chart.as_str(),
        "-n",
        "team",
        "--wait",
        "--timeout",
        "30s",
    ];
    c.helm(&base);
    let svc = c.must("v1", "Service", "team", "rel-app");
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .is_some_and(|ip| ip.starts_with("10.96.")),
        "{svc}"
    );
    let mut up = base.to_vec();
    up.extend(["--set", "image=nginx:1.28,replicas=2"]);
    let out = c.helm(&up);
    assert!(out.contains("REVISION: 2"), "{out}");
    let dep = c.must("apps/v1", "Deployment", "team", "rel-app");
    let mut sets: Vec<(i64, i64)> = c
        .sim
        .list("apps/v1", "ReplicaSet", "team")
        .iter()
        .map(|rs| {
            assert_eq!(
                rs["metadata"]["ownerReferences"][0]["uid"],
                dep["metadata"]["uid"]
            );
            (
                rs["spec"]["replicas"].as_i64().unwrap(),
                rs["status"]["readyReplicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    sets.sort();
    assert_eq!(
        sets,
        [(0, 0), (2, 2)],
        "old ReplicaSet scaled down, new one ready"
    );
    c.helm(&[
        "uninstall",
        "rel",
        "-n",
        "team",
        "--wait",
        "--timeout",
        "30s",
    ]);
    assert!(
        c.sim
            .get("apps/v1", "Deployment", "team", "rel-app")
            .is_none()
    );
    assert!(c.sim.list("apps/v1", "ReplicaSet", "team").is_empty());
}

#[test]
fn helm4_wait_with_auto_ready() {
    wait_with_auto_ready(Major::V4);
}

#[test]
fn helm3_wait_with_auto_ready() {
    wait_with_auto_ready(Major::V3);
}
