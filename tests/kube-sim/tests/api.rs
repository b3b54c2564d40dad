//! kube-sim over real HTTP: discovery, CRUD and its error Statuses, the status
//! and scale subresources, list selectors and paging, fault injection, token
//! auth, TLS and protobuf request bodies.

mod common;

use common::{Client, cm};
use kube_sim::{Sim, SimOptions};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// /version, /api, /apis and per-group-version lists describe the core kinds.
#[test]
fn discovery_lists_core_kinds() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    assert_eq!(c.get("/version").body["major"], "1");
    assert_eq!(c.get("/api").body["versions"], json!(["v1"]));
    let groups = c.get("/apis").body;
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "batch",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
        "coordination.k8s.io",
    ] {
        assert!(
            group_names.contains(&g),
            "group {g} missing from {group_names:?}"
        );
    }
    let core = c.get("/api/v1").body;
    let find = |list: &Value, name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap()
    };
    let pods = find(&core, "pods");
    assert_eq!(
        (
            pods["kind"].clone(),
            pods["singularName"].clone(),
            pods["namespaced"].clone()
        ),
        (json!("Pod"), json!("pod"), json!(true))
    );
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
    assert_eq!(find(&core, "namespaces")["namespaced"], false);
    assert_eq!(
        find(&core, "pods/status")["verbs"],
        json!(["get", "patch", "update"])
    );
    let apps = c.get("/apis/apps/v1").body;
    assert_eq!(find(&apps, "deployments")["shortNames"], json!(["deploy"]));
    assert_eq!(find(&apps, "deployments/scale")["kind"], "Scale");
    assert_eq!(
        c.get("/apis/apps").body["preferredVersion"]["groupVersion"],
        "apps/v1"
    );
    assert_eq!(c.get("/apis/nope/v1").code, 404);
    assert_eq!(c.get("/openapi/v2").code, 404);
    let root = c.get("/openapi/v3").body;
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = c.get(&url).body;
    let op = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
    assert!(
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
}

/// A CRD registers its resource for every served version and becomes Established.
#[test]
fn crd_registers_served_versions() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": ["gd"]},
            "versions": [{"name": "v1beta1", "served": true, "storage": false},
                         {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                         {"name": "v1alpha1", "served": false, "storage": false}]}});
    let r = c.post(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    );
    assert_eq!(r.code, 201, "{:?}", r.body);
    let conds = r.body["status"]["conditions"].as_array().unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    let g = c.get("/apis/example.com").body;
    assert_eq!(g["preferredVersion"]["version"], "v1");
    assert_eq!(g["versions"].as_array().unwrap().len(), 2);
    let v1 = c.get("/apis/example.com/v1").body;
    assert_eq!(v1["resources"][0]["name"], "gadgets");
    assert_eq!(v1["resources"][0]["namespaced"], false);
    assert_eq!(v1["resources"][1]["name"], "gadgets/status");
    assert_eq!(c.get("/apis/example.com/v1alpha1").code, 404);
    let obj = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"a": 1}});
    assert_eq!(c.post("/apis/example.com/v1/gadgets", &obj).code, 201);
    let via_beta = c.get("/apis/example.com/v1beta1/gadgets/g1").body;
    assert_eq!(via_beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(
        c.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.com")
            .code,
        200
    );
    assert_eq!(c.get("/apis/example.com/v1/gadgets").code, 404);
}

/// Create, get, update with conflicts, generateName, delete, with real Status errors.
#[test]
fn crud_and_conflicts() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let path = "/api/v1/namespaces/ns1/configmaps";
    let mut body = cm("", "a", json!({}));
    body["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let created = c.post(path, &body);
    assert_eq!(created.code, 201);
    assert_eq!(created.body["metadata"]["namespace"], "ns1");
    assert!(created.body["metadata"]["uid"].as_str().unwrap().len() >= 32);
    assert!(
        created.body["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    let dup = c.post(path, &body);
    assert_eq!(
        (
            dup.code,
            dup.body["reason"].clone(),
            dup.body["kind"].clone()
        ),
        (409, json!("AlreadyExists"), json!("Status"))
    );
    assert_eq!(dup.body["details"]["name"], "a");

    let rv1 = created.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut upd = created.body.clone();
    upd["data"] = json!({"k": "v2"});
    let ok = c.put(&format!("{path}/a"), &upd);
    assert_eq!(ok.code, 200);
    assert_ne!(ok.body["metadata"]["resourceVersion"], json!(rv1));
    assert_eq!(ok.body["metadata"]["uid"], created.body["metadata"]["uid"]);
    let stale = c.put(&format!("{path}/a"), &upd);
    assert_eq!(
        (stale.code, stale.body["reason"].clone()),
        (409, json!("Conflict"))
    );
    assert!(
        stale.body["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified")
    );

    let generated = c.post(
        path,
        &json!({"metadata": {"generateName": "pre-"}, "data": {}}),
    );
    assert_eq!(generated.code, 201);
    let gname = generated.body["metadata"]["name"].as_str().unwrap();
    assert!(gname.starts_with("pre-") && gname.len() == 9, "{gname}");
    let missing = c.get(&format!("{path}/nope"));
    assert_eq!(
        (missing.code, missing.body["reason"].clone()),
        (404, json!("NotFound"))
    );
    assert_eq!(missing.body["message"], "configmaps \"nope\" not found");
    let noname = c.post(path, &json!({"data": {}}));
    assert_eq!(
        (noname.code, noname.body["reason"].clone()),
        (422, json!("Invalid"))
    );
    let wrong_ns = c.post(path, &cm("other", "b", json!({})));
    assert_eq!(wrong_ns.code, 400);
    let bad_name = c.post(path, &json!({"metadata": {"name": "Not_Valid"}}));
    assert_eq!(
        (bad_name.code, bad_name.body["reason"].clone()),
        (422, json!("Invalid"))
    );
    assert!(
        bad_name.body["message"]
            .as_str()
            .unwrap()
            .contains("metadata.name")
    );
    let bad_labels = c.post(
        path,
        &json!({"metadata": {"name": "ok", "labels": {"a": 1}}}),
    );
    assert_eq!(bad_labels.code, 422);

    let del = c.send(
        "DELETE",
        &format!("{path}/a"),
        "application/json",
        br#"{"propagationPolicy":"Foreground"}"#,
    );
    assert_eq!(
        (del.code, del.body["status"].clone()),
        (200, json!("Success"))
    );
    assert!(sim.get("v1", "ConfigMap", "ns1", "a").is_none());
    assert_eq!(c.delete(&format!("{path}/a")).code, 404);
}

/// Patch with merge, JSON patch, strategic merge and server-side apply (create + merge).
#[test]
fn patch_content_types() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "p", json!({"a": "1"}))).unwrap();
    let p = "/api/v1/namespaces/default/configmaps/p";
    let r = c.patch(
        p,
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"b":"2","a":null}}}"#,
    );
    assert_eq!(r.body["metadata"]["labels"], json!({"b": "2"}));
    let r = c.patch(
        p,
        "application/json-patch+json",
        r#"[{"op":"add","path":"/data/x","value":"y"}]"#,
    );
    assert_eq!(r.body["data"], json!({"k": "v", "x": "y"}));
    let r = c.patch(
        p,
        "application/strategic-merge-patch+json",
        r#"{"data":{"x":"z"}}"#,
    );
    assert_eq!(r.body["data"]["x"], "z");
    let bad = c.patch(
        p,
        "application/json-patch+json",
        r#"[{"op":"test","path":"/data/x","value":"no"}]"#,
    );
    assert_eq!(bad.code, 422);
    let stale = c.patch(
        p,
        "application/merge-patch+json",
        r#"{"metadata":{"resourceVersion":"1"},"data":{"q":"1"}}"#,
    );
    assert_eq!(stale.code, 409);
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  one: \"1\"\n";
    let ap = "/api/v1/namespaces/default/configmaps/applied?fieldManager=test&force=true";
    let created = c.patch(ap, "application/apply-patch+yaml", yaml);
    assert_eq!(
        (created.code, created.body["data"]["one"].clone()),
        (201, json!("1"))
    );
    let merged = c.patch(
        ap,
        "application/apply-patch+yaml",
        &yaml.replace("one: \"1\"", "two: \"2\""),
    );
    assert_eq!(merged.code, 200);
    assert_eq!(merged.body["data"]["two"], "2");
    assert_eq!(
        c.patch(
            "/api/v1/namespaces/default/configmaps/none",
            "application/merge-patch+json",
            "{}"
        )
        .code,
        404
    );
    assert_eq!(c.patch(p, "text/plain", "{}").code, 415);
}

/// The status subresource changes only .status; the main resource ignores status.
#[test]
fn status_and_scale_subresources() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let dep = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
        "spec": {"replicas": 1}, "status": {"replicas": 7}});
    let created = c.post("/apis/apps/v1/namespaces/default/deployments", &dep);
    assert_eq!(created.code, 201);
    assert!(
        created.body.get("status").is_none(),
        "status dropped on create"
    );
    let base = "/apis/apps/v1/namespaces/default/deployments/d";
    let s = c.patch(
        &format!("{base}/status"),
        "application/merge-patch+json",
        r#"{"status":{"replicas":3},"spec":{"replicas":9}}"#,
    );
    assert_eq!(
        (
            s.body["status"]["replicas"].clone(),
            s.body["spec"]["replicas"].clone()
        ),
        (json!(3), json!(1))
    );
    let m = c.patch(
        base,
        "application/merge-patch+json",
        r#"{"status":{"replicas":0},"spec":{"replicas":2}}"#,
    );
    assert_eq!(
        (
            m.body["status"]["replicas"].clone(),
            m.body["spec"]["replicas"].clone()
        ),
        (json!(3), json!(2))
    );
    assert_eq!(m.body["metadata"]["generation"], 2);
    let scale = c.get(&format!("{base}/scale")).body;
    assert_eq!(
        (
            scale["kind"].clone(),
            scale["spec"]["replicas"].clone(),
            scale["status"]["replicas"].clone()
        ),
        (json!("Scale"), json!(2), json!(3))
    );
    let r = c.patch(
        &format!("{base}/scale"),
        "application/merge-patch+json",
        r#"{"spec":{"replicas":5}}"#,
    );
    assert_eq!(r.body["spec"]["replicas"], 5);
    assert_eq!(
        sim.get("apps/v1", "Deployment", "default", "d").unwrap()["spec"]["replicas"],
        5
    );
    assert_eq!(
        c.get("/api/v1/namespaces/default/configmaps/x/status").code,
        404
    );
}

/// Label and field selectors of every operator, and paging with continue tokens.
#[test]
fn list_selectors_and_paging() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("a", "one", json!({"app": "web", "tier": "fe"})))
        .unwrap();
    sim.create(cm("a", "two", json!({"app": "db"}))).unwrap();
    sim.create(cm("b", "three", json!({"app": "web"}))).unwrap();
    sim.create(cm("b", "four", json!({}))).unwrap();
    let sel = |q: &str| names(&c.get(&format!("/api/v1/configmaps?{q}")).body);
    assert_eq!(sel("labelSelector=app%3Dweb"), ["one", "three"]);
    assert_eq!(sel("labelSelector=app%3D%3Dweb"), ["one", "three"]);
    assert_eq!(sel("labelSelector=app!%3Dweb"), ["two", "four"]);
    assert_eq!(sel("labelSelector=app+in+(db,web),tier"), ["one"]);
    assert_eq!(sel("labelSelector=app+notin+(web)"), ["two", "four"]);
    assert_eq!(sel("labelSelector=!app"), ["four"]);
    assert_eq!(sel("fieldSelector=metadata.name%3Dtwo"), ["two"]);
    assert_eq!(
        sel("fieldSelector=metadata.namespace!%3Da"),
        ["four", "three"]
    );
    assert_eq!(
        sel("fieldSelector=data.k%3Dv,metadata.name!%3Dfour"),
        ["one", "two", "three"]
    );
    assert_eq!(
        names(&c.get("/api/v1/namespaces/b/configmaps").body),
        ["four", "three"]
    );
    assert_eq!(c.get("/api/v1/configmaps?labelSelector=a+in+b").code, 400);

    let first = c.get("/api/v1/configmaps?limit=3").body;
    assert_eq!(names(&first), ["one", "two", "four"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let rv = first["metadata"]["resourceVersion"].clone();
    sim.create(cm("z", "late", json!({}))).unwrap();
    sim.delete("v1", "ConfigMap", "b", "three").unwrap();
    let tok = first["metadata"]["continue"].as_str().unwrap();
    let second = c
        .get(&format!("/api/v1/configmaps?limit=3&continue={tok}"))
        .body;
    assert_eq!(
        names(&second),
        ["three"],
        "continue pages come from the first page's snapshot"
    );
    assert_eq!(second["metadata"]["resourceVersion"], rv);
    assert!(second["metadata"].get("continue").is_none());
    sim.compact();
    let gone = c.get(&format!("/api/v1/configmaps?limit=3&continue={tok}"));
    assert_eq!(
        (gone.code, gone.body["reason"].clone()),
        (410, json!("Expired"))
    );
}

/// fail_next answers N requests with a Status (429 with Retry-After), then recovers.
#[test]
fn fail_next_delay_and_request_log() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.fail_next(2, 429);
    let a = c.get("/api/v1/configmaps");
    assert_eq!(
        (a.code, a.retry_after.as_deref(), a.body["reason"].clone()),
        (429, Some("1"), json!("TooManyRequests"))
    );
    assert_eq!(c.get("/api/v1/configmaps").code, 429);
    assert_eq!(c.get("/api/v1/configmaps").code, 200);
    sim.fail_next(1, 500);
    let e = c.get("/api/v1/pods");
    assert_eq!(
        (e.code, e.body["reason"].clone(), e.retry_after),
        (500, json!("InternalError"), None)
    );
    assert_eq!(sim.request_count(), 4);
    assert_eq!(sim.requests()[3], "GET /api/v1/pods");
    sim.set_delay(Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(c.get("/api/v1/configmaps?labelSelector=x").code, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.set_delay(Duration::ZERO);
    assert_eq!(
        sim.requests().last().unwrap(),
        "GET /api/v1/configmaps?labelSelector=x"
    );
}

/// With require_token, requests need the bearer token.
#[test]
fn bearer_token_required() {
    let sim = Sim::start_with(SimOptions {
        require_token: Some("s3cret".into()),
        ..Default::default()
    })
    .unwrap();
    let c = Client::new(&sim.url());
    let r = c.get("/api/v1/namespaces");
    assert_eq!(
        (r.code, r.body["reason"].clone()),
        (401, json!("Unauthorized"))
    );
    assert_eq!(
        c.get_with("/api/v1/namespaces", ("Authorization", "Bearer wrong"))
            .code,
        401
    );
    let ok = c.get_with("/api/v1/namespaces", ("Authorization", "Bearer s3cret"));
    assert_eq!(ok.code, 200);
    assert!(names(&ok.body).contains(&"default".to_string()));
}

/// A ConfigMap sent as a Kubernetes protobuf body is decoded and stored.
#[test]
fn protobuf_configmap_body() {
    use kube_sim::protobuf::encode::*;
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let mut meta = Vec::new();
    bytes_field(1, b"pb", &mut meta);
    bytes_field(3, b"default", &mut meta);
    map_entry(11, "from", b"proto", &mut meta);
    map_entry(12, "note", b"hi", &mut meta);
    let mut msg = Vec::new();
    bytes_field(1, &meta, &mut msg);
    map_entry(2, "key", b"value", &mut msg);
    map_entry(3, "bin", b"\x01\x02", &mut msg);
    varint_field(4, 1, &mut msg);
    let body = envelope("v1", "ConfigMap", &msg);
    let r = c.send(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        &body,
    );
    assert_eq!(r.code, 201, "{:?}", r.body);
    let got = sim.get("v1", "ConfigMap", "default", "pb").unwrap();
    assert_eq!(got["data"], json!({"key": "value"}));
    assert_eq!(got["binaryData"], json!({"bin": "AQI="}));
    assert_eq!(got["immutable"], true);
    assert_eq!(got["metadata"]["labels"], json!({"from": "proto"}));
    assert_eq!(got["metadata"]["annotations"], json!({"note": "hi"}));
    let bad = c.send(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        b"k8s\x00\x0a\xff",
    );
    assert!(bad.code == 415 || bad.code == 400, "{}", bad.code);
}

/// Malformed requests get a 400 Status and never take the server down.
#[test]
fn garbage_input_is_rejected() {
    use std::io::{Read, Write};
    let sim = Sim::start();
    let addr = sim.url().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GARBAGE\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let c = Client::new(&sim.url());
    assert_eq!(
        c.send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            b"{not json"
        )
        .code,
        400
    );
    assert_eq!(c.get("/api/v1/configmaps").code, 200);
}

/// `Expect: 100-continue` (curl's habit for large bodies) gets an interim 100 before the body is sent.
#[test]
fn expect_continue_is_answered() {
    use std::io::{BufRead, BufReader, Read, Write};
    let sim = Sim::start();
    let addr = sim.url().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let body = cm("default", "big", json!({})).to_string();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    s.write_all(body.as_bytes()).unwrap();
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("HTTP/1.1 201 Created"), "{rest}");
    assert!(sim.get("v1", "ConfigMap", "default", "big").is_some());
}

/// Dropping the Sim stops the server: the port no longer answers.
#[test]
fn drop_stops_server() {
    let sim = Sim::start();
    let url = sim.url();
    let c = Client::new(&url);
    assert_eq!(c.get("/version").code, 200);
    drop(sim);
    std::thread::sleep(Duration::from_millis(100));
    let addr = url.trim_start_matches("http://").to_string();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "port still accepting after drop"
    );
}

/// Paging order follows (namespace, name), even when a namespace is a prefix of another.
#[test]
fn paging_order_with_prefix_namespaces() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    for (ns, name) in [("a", "x"), ("a-b", "y"), ("a", "z"), ("ab", "w")] {
        sim.create(cm(ns, name, json!({}))).unwrap();
    }
    let mut seen = Vec::new();
    let mut tok = String::new();
    loop {
        let page = c
            .get(&format!("/api/v1/configmaps?limit=1&continue={tok}"))
            .body;
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) => tok = t.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["x", "z", "y", "w"]);
}

/// An object with finalizers is only marked on delete and goes away when they are removed.
#[test]
fn finalizers_delay_deletion() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let mut o = cm("default", "f", json!({}));
    o["metadata"]["finalizers"] = json!(["example.com/hold"]);
    sim.create(o).unwrap();
    let p = "/api/v1/namespaces/default/configmaps/f";
    let marked = c.delete(p);
    assert_eq!(marked.code, 202);
    assert!(marked.body["metadata"]["deletionTimestamp"].is_string());
    assert!(sim.get("v1", "ConfigMap", "default", "f").is_some());
    let r = c.patch(
        p,
        "application/merge-patch+json",
        r#"{"metadata":{"finalizers":null}}"#,
    );
    assert_eq!(r.code, 200);
    assert!(sim.get("v1", "ConfigMap", "default", "f").is_none());
}

/// Odd bodies on every write path get 4xx Statuses; the server keeps serving.
#[test]
fn odd_bodies_never_crash() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "x", json!({}))).unwrap();
    sim.create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}, "spec": {"replicas": 1}})).unwrap();
    let bodies: [&[u8]; 9] = [
        b"[]",
        b"\"str\"",
        b"null",
        b"{\"metadata\":\"oops\"}",
        b"{\"metadata\":{\"name\":7}}",
        b"{\"spec\":\"x\"}",
        b"k8s\x00",
        b"\xff\xfe",
        b"{\"metadata\":{\"labels\":[1]}}",
    ];
    let targets = [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/strategic-merge-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/new",
            "application/apply-patch+yaml",
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/json",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/d/status",
            "application/merge-patch+json",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/nothere",
            "application/json",
        ),
        (
            "POST",
            "/api/v1/namespaces",
            "application/vnd.kubernetes.protobuf",
        ),
    ];
    for (method, path, ct) in targets {
        for body in bodies {
            let r = c.send(method, path, ct, body);
            assert!(
                r.code < 500,
                "{method} {path} [{ct}] {body:?} -> {} {:?}",
                r.code,
                r.body
            );
            if r.code >= 400 {
                assert_eq!(r.body["kind"], "Status", "{method} {path} {body:?}");
            }
        }
    }
    assert_eq!(c.get("/version").code, 200);
    assert_eq!(c.get("/api/v1/namespaces/default/configmaps").code, 200);
}
