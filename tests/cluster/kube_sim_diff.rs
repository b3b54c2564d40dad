//! kube-sim measured against the real kube-apiserver: the same requests (what our
//! operator, kubectl and helm send) go to a fresh kube-sim and to the control plane,
//! and the answers are compared: status codes, Status bodies (reason, code, message,
//! details) and objects with server-chosen fields (uid, resourceVersion, timestamps,
//! managedFields) dropped. Each test fails when kube-sim drifts where our faster
//! tests rely on it; the differences kube-sim keeps on purpose are asserted as such
//! and listed in docs/kube-sim.md ("Measured against a real kube-apiserver").

use crate::common::TempDir;
use crate::harness::*;
use kube_sim::Sim;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One API server reached with curl (raw HTTP) and with kubectl/helm (kubeconfig).
struct Server {
    name: &'static str,
    base: String,
    auth: Vec<String>,
    kubeconfig: PathBuf,
}

/// An HTTP answer: code and JSON body (`Null` when the body is not JSON).
#[derive(Debug, Clone)]
struct Answer {
    code: u16,
    body: Value,
}

/// Asserts that the real server's answer `r` and kube-sim's `s` have the same code
/// and Status reason.
fn same_code_and_reason(r: &Answer, s: &Answer) {
    assert_eq!(
        (r.code, &r.body["reason"]),
        (s.code, &s.body["reason"]),
        "{:?} vs {:?}",
        r.body,
        s.body
    );
}

impl Server {
    fn real() -> Server {
        let dir = cp().dir();
        let s = |p: PathBuf| p.display().to_string();
        Server {
            name: "kube-apiserver",
            base: cp().url(),
            auth: vec![
                "--cacert".into(),
                s(cp().ca_file()),
                "--cert".into(),
                s(dir.join("admin.crt")),
                "--key".into(),
                s(dir.join("admin.key")),
            ],
            kubeconfig: cp().admin_kubeconfig(),
        }
    }

    fn sim(sim: &Sim, dir: &Path) -> Server {
        let kubeconfig = dir.join("sim.kubeconfig");
        sim.write_kubeconfig(&kubeconfig)
            .expect("write kube-sim kubeconfig");
        Server {
            name: "kube-sim",
            base: sim.url(),
            auth: Vec::new(),
            kubeconfig,
        }
    }

    fn curl(&self) -> Command {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "30"]).args(&self.auth);
        c
    }

    /// One request; `body` goes as is with `content_type`.
    fn req(&self, method: &str, path: &str, content_type: &str, body: Option<&str>) -> Answer {
        let mut c = self.curl();
        c.args(["-w", "\n%{http_code}", "-X", method])
            .arg(format!("{}{path}", self.base));
        if body.is_some() {
            c.args([
                "-H",
                &format!("Content-Type: {content_type}"),
                "--data-binary",
                "@-",
            ]);
        }
        let text =
            run(&mut c, body).unwrap_or_else(|e| panic!("{} {method} {path}: {e}", self.name));
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        Answer {
            code: code.trim().parse().unwrap_or(0),
            body: serde_json::from_str(body).unwrap_or(Value::Null),
        }
    }

    /// A watch read until the server ends it (`timeoutSeconds` in `path`).
    fn watch(&self, path: &str) -> Vec<Value> {
        let mut c = self.curl();
        c.arg("-N").arg(format!("{}{path}", self.base));
        let text = run(&mut c, None).unwrap_or_else(|e| panic!("{} watch {path}: {e}", self.name));
        BufReader::new(text.as_bytes())
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    }

    /// A client binary with this server's kubeconfig: (success, stdout, stderr).
    fn tool(
        &self,
        bin: &Path,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &Path)],
    ) -> (bool, String, String) {
        let mut c = Command::new(bin);
        c.env("KUBECONFIG", &self.kubeconfig).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.unwrap_or("").as_bytes())
                .expect("write stdin");
        }
        let out = child.wait_with_output().expect("wait for client");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
        let mut all = vec!["--request-timeout=30s"];
        all.extend_from_slice(args);
        self.tool(&control_plane::kubectl_path(), &all, stdin, &[])
    }
}

/// Runs `cmd` feeding `stdin`; its stdout, or an error with stderr.
fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String, String> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or("").as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A kube-sim beside the real server, with a namespace of the same name on both.
struct Pair {
    real: Server,
    sim: Server,
    ns: String,
    _kube_sim: Sim,
    dir: TempDir,
}

impl Pair {
    fn new(prefix: &str) -> Pair {
        let dir = TempDir::new(prefix);
        let kube_sim = Sim::start();
        kube_sim.set_strict_namespaces(true);
        let ns = cp().namespace(prefix);
        let sim = Server::sim(&kube_sim, &dir.0);
        let made = sim.req(
            "POST",
            "/api/v1/namespaces",
            "application/json",
            Some(&json!({"metadata": {"name": ns}}).to_string()),
        );
        assert_eq!(made.code, 201, "kube-sim namespace: {:?}", made.body);
        Pair {
            real: Server::real(),
            sim,
            ns,
            _kube_sim: kube_sim,
            dir,
        }
    }

    /// The same request to both; `{ns}` in `path` and `body` is this pair's namespace.
    fn both(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&str>,
    ) -> (Answer, Answer) {
        let path = path.replace("{ns}", &self.ns);
        let body = body.map(|b| b.replace("{ns}", &self.ns));
        (
            self.real.req(method, &path, content_type, body.as_deref()),
            self.sim.req(method, &path, content_type, body.as_deref()),
        )
    }

    /// Sends to both and asserts the same code and the same normalised body.
    fn same(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<&str>,
    ) -> (Answer, Answer) {
        let (r, s) = self.both(method, path, content_type, body);
        assert_eq!(
            (r.code, norm(&r.body)),
            (s.code, norm(&s.body)),
            "{method} {path} {body:?}: real (left) vs kube-sim (right)"
        );
        (r, s)
    }

    fn kubectl(
        &self,
        args: &[&str],
        stdin: Option<&str>,
    ) -> ((bool, String, String), (bool, String, String)) {
        let stdin = stdin.map(|s| s.replace("{ns}", &self.ns));
        let mut all = vec!["-n", self.ns.as_str()];
        all.extend_from_slice(args);
        (
            self.real.kubectl(&all, stdin.as_deref()),
            self.sim.kubectl(&all, stdin.as_deref()),
        )
    }
}

/// Drops what only the server chooses: uid, resourceVersion, timestamps, managedFields,
/// a list's continue token, a Status's uid; recursively (lists, watch events).
fn norm(v: &Value) -> Value {
    let mut v = v.clone();
    strip(&mut v);
    v
}

fn strip(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Object(meta)) = m.get_mut("metadata") {
                for f in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "managedFields",
                    "continue",
                    "selfLink",
                ] {
                    meta.remove(f);
                }
            }
            if let Some(Value::Object(d)) = m.get_mut("details") {
                d.remove("uid");
            }
            for (_, x) in m.iter_mut() {
                strip(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip),
        _ => {}
    }
}

/// The parts of a Status the comparison uses: code, reason, message, details. The
/// real server lists the causes of a 422 in Go map order (random) and may repeat
/// one, so causes are sorted and deduplicated and, when the message is exactly their
/// list, it is rebuilt in that order.
fn status(a: &Answer) -> Value {
    let b = &a.body;
    let mut st = json!({"http": a.code, "code": b["code"], "reason": b["reason"], "message": b["message"],
           "details": norm(&b["details"])});
    let Some(mut causes) = st["details"]["causes"].as_array().cloned() else {
        return st;
    };
    causes.sort_by_key(Value::to_string);
    causes.dedup();
    let msg = st["message"].as_str().unwrap_or("").to_string();
    if let (true, Some((head, _))) = (causes.len() > 1, msg.split_once(" is invalid: [")) {
        let text = |c: &Value| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        };
        let mut parts: Vec<String> = causes.iter().map(text).collect();
        parts.sort();
        if parts.iter().all(|p| msg.contains(p.as_str())) {
            st["message"] = json!(format!("{head} is invalid: [{}]", parts.join(", ")));
        }
    }
    st["details"]["causes"] = Value::Array(causes);
    st
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSONPATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn deployment(name: &str, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": image}]}}}})
}

/// Creates that the decoder or validation refuses: the same code, reason, message
/// and details (causes included) from both servers.
#[test]
fn typing_and_validation_errors_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-typing");
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let cases: Vec<(&str, Value)> = vec![
        (
            cms,
            json!({"metadata": {"name": "t1"}, "data": {"a": false}}),
        ),
        (cms, json!({"metadata": {"name": "t2"}, "data": {"a": 1}})),
        (cms, json!({"metadata": {"name": "t3"}, "data": "str"})),
        (
            cms,
            json!({"metadata": {"name": "t4"}, "binaryData": {"a": "not base64!"}}),
        ),
        (cms, json!({"metadata": {"name": "t5"}, "immutable": "yes"})),
        (cms, json!({"metadata": {"name": "t6", "labels": {"a": 1}}})),
        (cms, json!({"metadata": {"name": "t7", "labels": "x"}})),
        (cms, json!({"metadata": "x"})),
        (cms, json!({"metadata": {"name": 5}})),
        (cms, json!({"metadata": {"name": "t8", "finalizers": "x"}})),
        (
            cms,
            json!({"metadata": {"name": "t9", "annotations": {"a": true}}}),
        ),
        (cms, json!({"metadata": {"name": "Bad_Name"}})),
        (
            cms,
            json!({"metadata": {"name": "v1", "labels": {"a b": "x"}}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v2", "labels": {"a": "x y"}}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v3", "labels": {"example.com/a/b": "x"}}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v4", "annotations": {"a b": "x"}}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v5", "finalizers": ["myfinalizer"]}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v6"}, "data": {"a b": "x"}}),
        ),
        (
            cms,
            json!({"metadata": {"name": "v7"}, "data": {".": "x", "a": "1"}, "binaryData": {"a": "YQ=="}}),
        ),
        (cms, json!({"metadata": {}, "data": {}})),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s1"}, "data": {"a": "not base64!"}}),
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s2"}, "data": {"a": "YQ="}}),
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s3"}, "data": {"a": "YQ==YQ=="}}),
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s4"}, "data": {"a": 1}}),
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s5"}, "data": "x"}),
        ),
        (
            "/api/v1/namespaces/{ns}/secrets",
            json!({"metadata": {"name": "s6"}, "stringData": {"a": true}}),
        ),
        (
            "/api/v1/namespaces/{ns}/pods",
            json!({"metadata": {"name": "p1"}, "spec": {}}),
        ),
        (
            "/api/v1/namespaces/{ns}/pods",
            json!({"metadata": {"name": "p2"}, "spec": {"containers": [{"name": "c"}]}}),
        ),
        (
            "/api/v1/namespaces/{ns}/pods",
            json!({"metadata": {"name": "p3"}, "spec": {"containers": [{"image": "x"}]}}),
        ),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            json!({"metadata": {"name": "d1"}, "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}),
        ),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            json!({"metadata": {"name": "d2"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"containers": [{"image": "x"}]}}}}),
        ),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            json!({"metadata": {"name": "d3"}, "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}}),
        ),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            json!({"metadata": {"name": "d4"}, "spec": {"replicas": "3"}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            json!({"metadata": {"name": "l1"}, "spec": {"leaseDurationSeconds": "15"}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            json!({"metadata": {"name": "l2"}, "spec": {"renewTime": "2024-01-01T00:00:00Z"}}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            json!({"metadata": {"name": "l3"}, "spec": {"holderIdentity": "", "acquireTime": ""}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"metadata": {"name": "ksd.dots"}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"metadata": {"name": "KSD-upper"}}),
        ),
        (
            "/api/v1/namespaces/{ns}/services",
            json!({"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}),
        ),
        (
            "/api/v1/namespaces/ksd-missing-namespace/configmaps",
            json!({"metadata": {"name": "n1"}}),
        ),
        (
            "/api/v1/namespaces/ksd-missing-namespace/configmaps",
            json!({"metadata": {"name": "Bad_"}}),
        ),
    ];
    let mut differences = Vec::new();
    for (path, body) in &cases {
        let (r, s) = p.both("POST", path, JSON, Some(&body.to_string()));
        assert!(
            r.code >= 400,
            "the real server accepted {body}: {:?}",
            r.body
        );
        let (rs, ss) = (status(&r), status(&s));
        if rs != ss {
            differences.push(format!(
                "POST {path} {body}\n  real:     {rs}\n  kube-sim: {ss}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Ordering of checks on create and update: namespace (404) before validation (422)
/// before uniqueness (409); a stale resourceVersion is 409 Conflict with the real text.
#[test]
fn conflicts_and_check_order_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-order");
    let cm = json!({"metadata": {"name": "c1"}, "data": {"a": "1"}}).to_string();
    let (r, _) = p.same(
        "POST",
        "/api/v1/namespaces/{ns}/configmaps",
        JSON,
        Some(&cm),
    );
    assert_eq!(r.code, 201);
    let (r, _) = p.same(
        "POST",
        "/api/v1/namespaces/{ns}/configmaps",
        JSON,
        Some(&cm),
    );
    assert_eq!(r.body["reason"], "AlreadyExists");
    // invalid and already there: validation answers first
    let bad = json!({"metadata": {"name": "c1", "labels": {"a": "x y"}}}).to_string();
    let (r, _) = p.both(
        "POST",
        "/api/v1/namespaces/{ns}/configmaps",
        JSON,
        Some(&bad),
    );
    assert_eq!(r.code, 422);
    let (r, s) = p.both(
        "POST",
        "/api/v1/namespaces/{ns}/configmaps",
        JSON,
        Some(&bad),
    );
    assert_eq!(status(&r), status(&s));
    let stale =
        json!({"metadata": {"name": "c1", "resourceVersion": "1"}, "data": {"a": "2"}}).to_string();
    let (r, s) = p.both(
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/c1",
        JSON,
        Some(&stale),
    );
    assert_eq!(r.code, 409);
    assert_eq!(status(&r), status(&s));
    let typed = json!({"metadata": {"name": "c1"}, "data": {"a": 2}}).to_string();
    let (r, s) = p.both(
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/c1",
        JSON,
        Some(&typed),
    );
    assert_eq!(r.code, 400);
    assert_eq!(status(&r), status(&s));
    let (r, s) = p.both("GET", "/api/v1/namespaces/{ns}/configmaps/nope", JSON, None);
    assert_eq!(status(&r), status(&s));
    let (r, s) = p.both(
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/nope",
        JSON,
        Some(&json!({"metadata": {"name": "nope"}}).to_string()),
    );
    assert_eq!(status(&r), status(&s));
    // a mismatched name in the body
    let (r, s) = p.both(
        "PUT",
        "/api/v1/namespaces/{ns}/configmaps/c1",
        JSON,
        Some(&json!({"metadata": {"name": "other"}}).to_string()),
    );
    assert_eq!(
        (r.code, r.body["reason"].clone()),
        (s.code, s.body["reason"].clone())
    );
}

/// What our operator's writes look like: get/create/update/patch (merge, JSON patch,
/// strategic merge, apply with fieldManager and force), status subresource, delete.
#[test]
fn writes_the_operator_sends_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-writes");
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    let cm = "/api/v1/namespaces/{ns}/configmaps/w";
    p.same(
        "POST",
        cms,
        JSON,
        Some(
            &json!({"metadata": {"name": "w", "labels": {"a": "1"}}, "data": {"k": "v"}})
                .to_string(),
        ),
    );
    p.same("GET", cm, JSON, None);
    p.same(
        "PUT",
        cm,
        JSON,
        Some(
            &json!({"metadata": {"name": "w", "labels": {"a": "2"}}, "data": {"k": "v2"}})
                .to_string(),
        ),
    );
    p.same(
        "PATCH",
        cm,
        MERGE,
        Some(r#"{"metadata":{"labels":{"b":"x","a":null}},"data":{"n":"1"}}"#),
    );
    p.same(
        "PATCH",
        cm,
        JSONPATCH,
        Some(r#"[{"op":"add","path":"/data/j","value":"2"},{"op":"remove","path":"/data/n"}]"#),
    );
    p.same("PATCH", cm, STRATEGIC, Some(r#"{"data":{"s":"3"}}"#));
    // a failing JSON patch test operation
    let (r, s) = p.both(
        "PATCH",
        cm,
        JSONPATCH,
        Some(r#"[{"op":"test","path":"/data/k","value":"no"}]"#),
    );
    same_code_and_reason(&r, &s);
    // patches whose result does not decode: 422 on both (the real text quotes its own
    // rendering of the object, so only the start and the decoder's error are compared)
    for (ct, body) in [
        (MERGE, r#"{"data":{"b":1}}"#),
        (JSONPATCH, r#"[{"op":"add","path":"/data/b","value":true}]"#),
    ] {
        let (r, s) = p.both("PATCH", cm, ct, Some(body));
        assert_eq!(
            (r.code, &r.body["reason"]),
            (422, &json!("Invalid")),
            "{:?}",
            r.body
        );
        assert_eq!(
            (s.code, &s.body["reason"]),
            (422, &json!("Invalid")),
            "{:?}",
            s.body
        );
        for a in [&r, &s] {
            let m = a.body["message"].as_str().unwrap_or("");
            assert!(
                m.starts_with(" \"\" is invalid: patch: Invalid value: \"{"),
                "{m}"
            );
            assert!(m.contains("json: cannot unmarshal"), "{m}");
        }
        assert_eq!(
            r.body["details"]["causes"][0]["field"],
            s.body["details"]["causes"][0]["field"]
        );
    }
    let (r, s) = p.both("PATCH", cm, STRATEGIC, Some(r#"{"data":{"b":1}}"#));
    assert_eq!((r.code, &r.body["reason"]), (s.code, &s.body["reason"]));

    // server-side apply as helm 4 and our operator send it
    let applied =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n  b: \"2\"\n";
    let ssa = "/api/v1/namespaces/{ns}/configmaps/ssa?fieldManager=helm&force=true";
    let (r, _) = p.same("PATCH", ssa, APPLY, Some(applied));
    assert_eq!(r.code, 201);
    let (r, _) = p.same(
        "PATCH",
        ssa,
        APPLY,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"1\"\n"),
    );
    assert_eq!(
        r.body["data"],
        json!({"a": "1"}),
        "a key the manager stops applying is removed"
    );
    let (r, s) = p.both(
        "PATCH",
        "/api/v1/namespaces/{ns}/configmaps/ssa",
        APPLY,
        Some(applied),
    );
    assert_eq!(status(&r), status(&s), "apply without fieldManager");
    let (r, s) = p.both(
        "PATCH",
        ssa,
        APPLY,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: 1\n"),
    );
    same_code_and_reason(&r, &s);
    // Kept difference: a second manager changing a field without force conflicts on
    // the real server; kube-sim does not track field ownership.
    let (r, s) = p.both(
        "PATCH",
        "/api/v1/namespaces/{ns}/configmaps/ssa?fieldManager=other",
        APPLY,
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  a: \"9\"\n"),
    );
    assert_eq!(
        (r.code, r.body["reason"].as_str()),
        (409, Some("Conflict")),
        "{:?}",
        r.body
    );
    assert_eq!(
        s.code, 200,
        "kube-sim has no apply conflicts (docs/kube-sim.md)"
    );

    // status subresource of a Deployment: status writes only status, main writes keep it
    let deps = "/apis/apps/v1/namespaces/{ns}/deployments";
    let dep = "/apis/apps/v1/namespaces/{ns}/deployments/web";
    let (r, s) = p.both(
        "POST",
        deps,
        JSON,
        Some(&deployment("web", "nginx:1").to_string()),
    );
    assert_eq!((r.code, s.code), (201, 201), "{:?} {:?}", r.body, s.body);
    let (r, s) = p.both(
        "PATCH",
        &format!("{dep}/status"),
        MERGE,
        Some(r#"{"status":{"replicas":1,"readyReplicas":1},"spec":{"replicas":5}}"#),
    );
    assert_eq!((r.code, s.code), (200, 200));
    for a in [&r, &s] {
        assert_eq!(a.body["status"]["readyReplicas"], 1);
        assert_eq!(
            a.body["spec"]["replicas"], 1,
            "a status write leaves spec alone"
        );
    }
    let (r, s) = p.both("PATCH", dep, STRATEGIC,
        Some(r#"{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}},"status":{"readyReplicas":0}}"#));
    assert_eq!((r.code, s.code), (200, 200));
    for a in [&r, &s] {
        let names: Vec<&str> = a.body["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["side", "main"],
            "strategic merge by container name: a new item goes first"
        );
        assert_eq!(
            a.body["status"]["readyReplicas"], 1,
            "a main write keeps status"
        );
        assert_eq!(a.body["metadata"]["generation"], 2);
    }

    // the order strategic merge leaves keyed lists in (kubectl sends $setElementOrder)
    for patch in [
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"n1","image":"y"},{"name":"main","image":"z"},{"name":"n2","image":"y"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"main"},{"name":"n1"}],"containers":[{"name":"n1","image":"q"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"n3","image":"q"},{"name":"side","$patch":"delete"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","env":[{"name":"X","value":"1"}]}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","env":[{"name":"Y","value":"2"}]}]}}}}"#,
    ] {
        let (r, s) = p.both("PATCH", dep, STRATEGIC, Some(patch));
        // kube-sim does not default pod templates (imagePullPolicy, ...): compare what was sent
        let spec = |a: &Answer| -> Vec<Value> {
            a.body["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|c| json!([c["name"], c["image"], c["env"]]))
                .collect()
        };
        assert_eq!((r.code, spec(&r)), (s.code, spec(&s)), "{patch}");
    }

    // delete with propagationPolicy (as the patcher's Delete/DeleteInBackground/DeleteNonCascading)
    let (name, policy) = ("del-bg", "Background");
    p.same(
        "POST",
        cms,
        JSON,
        Some(&json!({"metadata": {"name": name}}).to_string()),
    );
    let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
        .to_string();
    p.same("DELETE", &format!("{cms}/{name}"), JSON, Some(&body));
    p.same("GET", &format!("{cms}/{name}"), JSON, None);
    // Kept difference: Foreground and Orphan leave the object with the
    // foregroundDeletion / orphan finalizer until the garbage collector removes it (this
    // control plane has none); kube-sim deletes at once, as a cluster with a running
    // garbage collector ends up.
    for (name, policy, finalizer) in [
        ("del-fg", "Foreground", "foregroundDeletion"),
        ("del-orphan", "Orphan", "orphan"),
    ] {
        p.same(
            "POST",
            cms,
            JSON,
            Some(&json!({"metadata": {"name": name}}).to_string()),
        );
        let body =
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
                .to_string();
        let (r, s) = p.both("DELETE", &format!("{cms}/{name}"), JSON, Some(&body));
        assert_eq!(r.code, 200);
        assert_eq!(r.body["metadata"]["finalizers"], json!([finalizer]));
        assert_eq!((s.code, &s.body["status"]), (200, &json!("Success")));
    }
    // a delete precondition that fails
    let body =
        json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}).to_string();
    let (r, s) = p.both("DELETE", cm, JSON, Some(&body));
    same_code_and_reason(&r, &s);
}

/// Leases as the leader elector writes them: create, replace with the resourceVersion
/// read (a stale one is 409), MicroTime timestamps.
#[test]
fn leases_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-lease");
    let now = "2026-01-02T03:04:05.123456Z";
    let spec = |holder: &str, t: i64| {
        json!({"holderIdentity": holder, "leaseDurationSeconds": 15,
        "acquireTime": now, "renewTime": now, "leaseTransitions": t})
    };
    let leases = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases";
    let lease = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/leader";
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"}, "spec": spec("a", 0)});
    let (r, s) = p.same("POST", leases, JSON, Some(&body.to_string()));
    assert_eq!(r.code, 201);
    let (r_rv, s_rv) = (
        r.body["metadata"]["resourceVersion"].clone(),
        s.body["metadata"]["resourceVersion"].clone(),
    );
    let mut next = body.clone();
    next["spec"] = spec("b", 1);
    let put = |server: &Server, rv: &Value| {
        let mut o = next.clone();
        o["metadata"]["resourceVersion"] = rv.clone();
        server.req(
            "PUT",
            &lease.replace("{ns}", &p.ns),
            JSON,
            Some(&o.to_string()),
        )
    };
    let (r, s) = (put(&p.real, &r_rv), put(&p.sim, &s_rv));
    assert_eq!((r.code, norm(&r.body)), (s.code, norm(&s.body)));
    // the second writer with the same (now stale) resourceVersion loses
    let (r, s) = (put(&p.real, &r_rv), put(&p.sim, &s_rv));
    assert_eq!(r.code, 409);
    assert_eq!(status(&r), status(&s));
    p.same("GET", lease, JSON, None);
}

/// Lists as the reflector sends them: label and field selectors, limit + continue
/// (pages, tokens, remainingItemCount), a bad selector.
#[test]
fn lists_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-list");
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    for (i, tier) in ["a", "b", "a", "c", "a"].iter().enumerate() {
        let body = json!({"metadata": {"name": format!("cm{i}"), "labels": {"tier": tier, "n": i.to_string()}}});
        p.same("POST", cms, JSON, Some(&body.to_string()));
    }
    let names = |a: &Answer| -> Vec<String> {
        a.body["items"]
            .as_array()
            .map(|i| {
                i.iter()
                    .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for q in [
        "",
        "?labelSelector=tier%3Da",
        "?labelSelector=tier%21%3Da",
        "?labelSelector=tier+in+(b,c)",
        "?labelSelector=tier,n+notin+(0)",
        "?labelSelector=%21missing",
        "?fieldSelector=metadata.name%3Dcm3",
        "?fieldSelector=metadata.name%21%3Dcm3",
        &format!("?fieldSelector=metadata.namespace%3D{}", p.ns),
    ] {
        let (r, s) = p.same("GET", &format!("{cms}{q}"), JSON, None);
        assert_eq!(r.code, 200);
        assert_eq!(names(&r), names(&s), "{q}");
    }
    // paging: the same pages; remainingItemCount only without selectors
    for q in ["?limit=2", "?limit=2&labelSelector=tier%3Da"] {
        let mut tokens = (String::new(), String::new());
        let mut pages = 0;
        loop {
            let cont = |t: &str| {
                if t.is_empty() {
                    String::new()
                } else {
                    format!("&continue={t}")
                }
            };
            let (r, s) = (
                p.real.req(
                    "GET",
                    &format!("{}{q}{}", cms.replace("{ns}", &p.ns), cont(&tokens.0)),
                    JSON,
                    None,
                ),
                p.sim.req(
                    "GET",
                    &format!("{}{q}{}", cms.replace("{ns}", &p.ns), cont(&tokens.1)),
                    JSON,
                    None,
                ),
            );
            assert_eq!((r.code, names(&r)), (s.code, names(&s)), "{q} page {pages}");
            let (rm, sm) = (&r.body["metadata"], &s.body["metadata"]);
            assert_eq!(
                rm["remainingItemCount"], sm["remainingItemCount"],
                "{q} page {pages}: {rm} vs {sm}"
            );
            assert_eq!(
                rm["continue"].is_string(),
                sm["continue"].is_string(),
                "{q} page {pages}"
            );
            pages += 1;
            match (rm["continue"].as_str(), sm["continue"].as_str()) {
                (Some(a), Some(b)) => tokens = (a.to_string(), b.to_string()),
                _ => break,
            }
        }
        assert!(pages >= 2, "{q}");
    }
    for q in [
        "?labelSelector=a%3D%3D%3Db",
        "?fieldSelector=metadata.nosuch%3Dx",
        "?fieldSelector=data.a%3Dx",
        "?resourceVersion=abc",
        "?continue=garbage",
    ] {
        let (r, s) = p.both("GET", &format!("{cms}{q}"), JSON, None);
        assert_eq!(
            (r.code, &r.body["reason"]),
            (s.code, &s.body["reason"]),
            "{q}: {:?} vs {:?}",
            r.body,
            s.body
        );
        if !q.starts_with("?continue") {
            assert_eq!(r.body["message"], s.body["message"], "{q}");
        }
    }
    // the fields other kinds can be selected on
    for (path, q) in [
        ("/api/v1/namespaces/{ns}/pods", "status.phase%3DRunning"),
        ("/api/v1/namespaces/{ns}/pods", "spec.nodeName%3Dn1"),
        ("/api/v1/namespaces/{ns}/pods", "status.hostIP%3Dx"),
        ("/api/v1/namespaces/{ns}/secrets", "type%3DOpaque"),
        ("/api/v1/namespaces/{ns}/secrets", "data.a%3Dx"),
        ("/apis/batch/v1/namespaces/{ns}/jobs", "status.active%3D1"),
        (
            "/apis/apps/v1/namespaces/{ns}/deployments",
            "spec.replicas%3D1",
        ),
    ] {
        let (r, s) = p.both("GET", &format!("{path}?fieldSelector={q}"), JSON, None);
        assert_eq!(
            (r.code, &r.body["message"]),
            (s.code, &s.body["message"]),
            "{path} {q}"
        );
    }
}

/// Watches as the reflector opens them: from a resourceVersion with bookmarks allowed,
/// the events of a create, update and delete; and from "" (the current state first).
#[test]
fn watches_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-watch");
    let cms = "/api/v1/namespaces/{ns}/configmaps";
    p.same("POST", cms, JSON, Some(r#"{"metadata":{"name":"before"}}"#));
    let (r, s) = p.both("GET", cms, JSON, None);
    let (rrv, srv) = (
        r.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string(),
        s.body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string(),
    );
    p.same(
        "POST",
        cms,
        JSON,
        Some(r#"{"metadata":{"name":"w1","labels":{"x":"1"}},"data":{"a":"1"}}"#),
    );
    p.same(
        "PATCH",
        &format!("{cms}/w1"),
        MERGE,
        Some(r#"{"data":{"a":"2"}}"#),
    );
    p.same(
        "PATCH",
        &format!("{cms}/w1"),
        MERGE,
        Some(r#"{"metadata":{"labels":{"x":null}}}"#),
    );
    p.same("DELETE", &format!("{cms}/w1"), JSON, None);
    let events = |server: &Server, q: &str| -> Vec<(String, Value)> {
        server
            .watch(&format!(
                "{}?watch=1&timeoutSeconds=2{q}",
                cms.replace("{ns}", &p.ns)
            ))
            .into_iter()
            .filter(|e| e["type"] != "BOOKMARK")
            .map(|e| {
                (
                    e["type"].as_str().unwrap_or("").to_string(),
                    norm(&e["object"]),
                )
            })
            .collect()
    };
    let q = |rv: &str| format!("&resourceVersion={rv}&allowWatchBookmarks=true");
    let (r, s) = (events(&p.real, &q(&rrv)), events(&p.sim, &q(&srv)));
    assert_eq!(
        r.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    );
    assert_eq!(r, s, "events after a resourceVersion");
    // label-selected: the object leaves the selection with a DELETED (kube-sim) —
    // the real server also sends it as DELETED? compare both
    let sel = |rv: &str| format!("{}&labelSelector=x%3D1", q(rv));
    let (r, s) = (events(&p.real, &sel(&rrv)), events(&p.sim, &sel(&srv)));
    assert_eq!(r, s, "events with a label selector");
    let (r, s) = (
        events(&p.real, "&resourceVersion="),
        events(&p.sim, "&resourceVersion="),
    );
    assert_eq!(
        r, s,
        "a watch without resourceVersion starts with the current objects"
    );
    let (r, s) = (
        p.real.req(
            "GET",
            &format!("{}?watch=1&resourceVersion=abc", cms.replace("{ns}", &p.ns)),
            JSON,
            None,
        ),
        p.sim.req(
            "GET",
            &format!("{}?watch=1&resourceVersion=abc", cms.replace("{ns}", &p.ns)),
            JSON,
            None,
        ),
    );
    same_code_and_reason(&r, &s);
}

/// kubectl create/apply/get/patch/delete: the same output and the same errors.
#[test]
fn kubectl_matches() {
    let _api = api_shared();
    let p = Pair::new("ksd-kubectl");
    let same = |args: &[&str], stdin: Option<&str>| {
        let (r, s) = p.kubectl(args, stdin);
        assert_eq!(r, s, "kubectl {args:?}: real (left) vs kube-sim (right)");
        r
    };
    same(
        &[
            "create",
            "configmap",
            "k1",
            "--from-literal=a=1",
            "-o",
            "name",
        ],
        None,
    );
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: k2\n  labels: {tier: a}\ndata:\n  a: \"1\"\n";
    assert_eq!(
        same(&["apply", "-f", "-"], Some(cm)).1,
        "configmap/k2 created\n"
    );
    assert_eq!(
        same(&["apply", "-f", "-"], Some(cm)).1,
        "configmap/k2 unchanged\n"
    );
    same(
        &["apply", "-f", "-"],
        Some(&cm.replace("a: \"1\"", "a: \"2\"")),
    );
    same(
        &["apply", "--server-side", "-f", "-"],
        Some(&cm.replace("k2", "k3")),
    );
    same(&["get", "configmap", "k2", "-o", "jsonpath={.data}"], None);
    same(&["get", "configmaps", "-l", "tier=a", "-o", "name"], None);
    same(
        &["patch", "configmap", "k1", "-p", r#"{"data":{"b":"2"}}"#],
        None,
    );
    same(
        &[
            "patch",
            "configmap",
            "k1",
            "--type=merge",
            "-p",
            r#"{"data":{"c":"3"}}"#,
        ],
        None,
    );
    same(
        &[
            "patch",
            "configmap",
            "k1",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/data/c"}]"#,
        ],
        None,
    );
    same(&["get", "configmap", "k1", "-o", "jsonpath={.data}"], None);
    same(&["label", "configmap", "k1", "x=y"], None);
    same(&["annotate", "configmap", "k1", "note=hi"], None);
    same(&["get", "configmap", "nope"], None);
    same(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  a: false\n"),
    );
    same(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\ndata:\n  a: \"not base64!\"\n"),
    );
    same(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad\n"),
    );
    same(&["create", "configmap", "k1"], None);
    same(
        &["apply", "-f", "-"],
        Some(&serde_yaml::to_string(&deployment("web", "nginx:1")).unwrap()),
    );
    same(
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].name}",
        ],
        None,
    );
    same(&["set", "image", "deployment/web", "main=nginx:2"], None);
    same(
        &[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image} {.metadata.generation}",
        ],
        None,
    );
    same(&["delete", "configmap", "k1", "k2"], None);
    same(&["delete", "configmap", "k1"], None);
    same(&["delete", "configmap", "k1", "--ignore-not-found"], None);
    same(&["get", "configmaps", "-o", "name"], None);
    let (r, s) = (
        p.real.kubectl(
            &["-n", "ksd-missing-namespace", "create", "configmap", "x"],
            None,
        ),
        p.sim.kubectl(
            &["-n", "ksd-missing-namespace", "create", "configmap", "x"],
            None,
        ),
    );
    assert_eq!(r, s, "create in a missing namespace");
}

fn write_chart(dir: &Path) -> PathBuf {
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("templates")).expect("chart dir");
    let files = [
        ("Chart.yaml", "apiVersion: v2\nname: ksd\nversion: 0.1.0\n"),
        (
            "values.yaml",
            "greeting: hello\nextra: true\nimage: nginx:1\n",
        ),
        (
            "templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n  labels:\n    app: ksd\ndata:\n  greeting: {{ .Values.greeting | quote }}\n{{- if .Values.extra }}\n  extra: \"yes\"\n{{- end }}\n",
        ),
        (
            "templates/secret.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-secret\nstringData:\n  token: {{ .Values.greeting | quote }}\n",
        ),
        (
            "templates/deploy.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: main\n        image: {{ .Values.image }}\n",
        ),
    ];
    for (f, text) in files {
        std::fs::write(chart.join(f), text).expect("write chart file");
    }
    chart
}

/// The objects a release leaves, in a comparable form: ConfigMap and Secret as
/// stored (normalised), the Deployment's template and helm's release records.
fn release_state(server: &Server, ns: &str, rel: &str) -> Value {
    let get = |path: String| {
        let a = server.req("GET", &path, JSON, None);
        if a.code == 404 {
            Value::Null
        } else {
            norm(&a.body)
        }
    };
    let dep = get(format!(
        "/apis/apps/v1/namespaces/{ns}/deployments/{rel}-web"
    ));
    let records = server.req(
        "GET",
        &format!("/api/v1/namespaces/{ns}/secrets?labelSelector=owner%3Dhelm,name%3D{rel}"),
        JSON,
        None,
    );
    let records: Vec<Value> = records.body["items"].as_array().map(|a| a.iter().map(|s| json!({
        "name": s["metadata"]["name"], "labels": without_modified_at(&s["metadata"]["labels"]), "type": s["type"]})).collect()).unwrap_or_default();
    json!({
        "cm": get(format!("/api/v1/namespaces/{ns}/configmaps/{rel}-cm")),
        "secret": get(format!("/api/v1/namespaces/{ns}/secrets/{rel}-secret")),
        "deployment": if dep.is_null() { Value::Null } else { json!({
            "metadata": {"labels": dep["metadata"]["labels"], "annotations": dep["metadata"]["annotations"], "generation": dep["metadata"]["generation"]},
            "selector": dep["spec"]["selector"], "template": dep["spec"]["template"]["metadata"],
            "containers": dep["spec"]["template"]["spec"]["containers"].as_array().map(|c| c.iter().map(|c| json!([c["name"], c["image"]])).collect::<Vec<_>>())}) },
        "records": records,
    })
}

/// helm's release labels without `modifiedAt` (a clock reading).
fn without_modified_at(labels: &Value) -> Value {
    let mut l = labels.clone();
    if let Some(m) = l.as_object_mut() {
        m.remove("modifiedAt");
    }
    l
}

/// helm 3 and helm 4 install, upgrade (a value changed, a key dropped) and uninstall a
/// small chart: the objects left behind are the same on both servers.
#[test]
fn helm_releases_match() {
    let _api = api_shared();
    let p = Pair::new("ksd-helm");
    let chart = write_chart(&p.dir.0);
    let chart = chart.to_str().expect("utf8 path");
    let bins = control_plane::repo_root().join(".tools/bin");
    for (helm, rel) in [("helm3", "h3"), ("helm", "h4")] {
        let bin = bins.join(helm);
        let home = p.dir.0.join(format!("{helm}-home"));
        let (cache, config, data) = (home.join("cache"), home.join("config"), home.join("data"));
        let env = [
            ("HELM_CACHE_HOME", cache.as_path()),
            ("HELM_CONFIG_HOME", config.as_path()),
            ("HELM_DATA_HOME", data.as_path()),
        ];
        let steps: [Vec<&str>; 3] = [
            vec!["install", rel, chart, "-n", &p.ns],
            vec![
                "upgrade",
                rel,
                chart,
                "-n",
                &p.ns,
                "--set",
                "greeting=bye,extra=false,image=nginx:2",
            ],
            vec!["uninstall", rel, "-n", &p.ns],
        ];
        for args in steps {
            let r = p.real.tool(&bin, &args, None, &env);
            let s = p.sim.tool(&bin, &args, None, &env);
            assert!(r.0, "{helm} {args:?} on the real server: {}", r.2);
            assert!(s.0, "{helm} {args:?} on kube-sim: {}", s.2);
            let (rs, ss) = (
                release_state(&p.real, &p.ns, rel),
                release_state(&p.sim, &p.ns, rel),
            );
            assert_eq!(
                rs, ss,
                "{helm} {args:?}: state on the real server (left) vs kube-sim (right)"
            );
            if args[0] == "upgrade" {
                assert_eq!(
                    rs["cm"]["data"],
                    json!({"greeting": "bye"}),
                    "{helm}: the upgrade dropped the key"
                );
            }
            if args[0] == "uninstall" {
                assert!(
                    rs["cm"].is_null() && rs["records"] == json!([]),
                    "{helm}: uninstalled"
                );
            }
        }
    }
}
