//! kube-sim over real HTTP: discovery, CRD registration, CRUD and its error
//! Statuses, validation, patch content types and server-side apply, the status
//! and scale subresources, and finalizers.

use crate::common;

use common::{Client, cm};
use kube_sim::Sim;
use serde_json::{Value, json};

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
    let v2 = c.get("/openapi/v2");
    assert_eq!(v2.code, 200);
    let v2op =
        &v2.body["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        v2op["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
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

/// The built-in groups of a 1.35 server are discoverable with their kinds, scope,
/// short names and preferred versions, and usable over HTTP.
#[test]
fn discovery_lists_builtin_groups() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let groups = c.get("/apis").body;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["name"].as_str())
        .collect();
    for g in [
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "networking.k8s.io",
        "policy",
        "autoscaling",
        "coordination.k8s.io",
        "events.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
    ] {
        assert!(names.contains(&g), "{g} missing from /apis: {names:?}");
    }
    let auto = c.get("/apis/autoscaling").body;
    assert_eq!(auto["preferredVersion"]["version"], "v2");
    assert_eq!(auto["versions"].as_array().unwrap().len(), 2);
    let kinds = |gv: &str| -> Vec<(String, bool)> {
        c.get(gv).body["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| !r["name"].as_str().unwrap().contains('/'))
            .map(|r| {
                (
                    r["kind"].as_str().unwrap().to_string(),
                    r["namespaced"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let rbac = kinds("/apis/rbac.authorization.k8s.io/v1");
    for want in [
        ("Role", true),
        ("RoleBinding", true),
        ("ClusterRole", false),
        ("ClusterRoleBinding", false),
    ] {
        assert!(
            rbac.contains(&(want.0.to_string(), want.1)),
            "{want:?} in {rbac:?}"
        );
    }
    let net = kinds("/apis/networking.k8s.io/v1");
    for want in [
        ("Ingress", true),
        ("NetworkPolicy", true),
        ("IngressClass", false),
    ] {
        assert!(
            net.contains(&(want.0.to_string(), want.1)),
            "{want:?} in {net:?}"
        );
    }
    let pdb = c.get("/apis/policy/v1").body;
    assert_eq!(pdb["resources"][0]["shortNames"], json!(["pdb"]));
    assert!(kinds("/api/v1").contains(&("PersistentVolumeClaim".to_string(), true)));
    let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web"}, "spec": {"maxReplicas": 3}});
    let r = c.post(
        "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers",
        &hpa,
    );
    assert_eq!(r.code, 201, "{:?}", r.body);
    let v1 = c.get("/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web");
    assert_eq!(v1.code, 200);
    assert_eq!(v1.body["apiVersion"], "autoscaling/v1");
    let cr = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "reader"}, "rules": []});
    let r = c.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", &cr);
    assert_eq!(r.code, 201, "{:?}", r.body);
    assert_eq!(r.body["metadata"].get("namespace"), None);
    let doc = c.get("/openapi/v3/apis/rbac.authorization.k8s.io/v1").body;
    let op = &doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "ClusterRole");
    let pb = c.get_with(
        "/openapi/v2",
        (
            "Accept",
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        ),
    );
    assert_eq!(pb.code, 200);
    assert_eq!(pb.body, serde_json::Value::Null, "protobuf, not JSON");
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
    // a label value that is not a string does not decode: 400, as on kube-apiserver
    assert_eq!(
        (bad_labels.code, bad_labels.body["message"].clone()),
        (
            400,
            json!(
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot \
                 unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
            )
        )
    );

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
    let mut dep = common::deployment("default", "d", 1);
    dep["status"] = json!({"replicas": 7});
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

/// With strict namespaces, creating in a missing namespace is 404, as on a real server.
#[test]
fn strict_namespaces_require_the_namespace() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    assert_eq!(
        c.post(
            "/api/v1/namespaces/loose/configmaps",
            &cm("", "a", json!({}))
        )
        .code,
        201
    );
    sim.set_strict_namespaces(true);
    let r = c.post(
        "/api/v1/namespaces/missing/configmaps",
        &cm("", "a", json!({})),
    );
    assert_eq!((r.code, r.body["reason"].clone()), (404, json!("NotFound")));
    assert_eq!(r.body["message"], "namespaces \"missing\" not found");
    sim.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "missing"}}))
        .unwrap();
    assert_eq!(
        c.post(
            "/api/v1/namespaces/missing/configmaps",
            &cm("", "a", json!({}))
        )
        .code,
        201
    );
    assert!(sim.create(cm("nowhere", "b", json!({}))).is_err());
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

/// Methods a resource does not support (per discovery's verbs) get 405 MethodNotAllowed.
#[test]
fn unsupported_verbs_are_405() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let r = c.delete("/api/v1/namespaces");
    assert_eq!(
        (r.code, r.body["reason"].clone()),
        (405, json!("MethodNotAllowed"))
    );
    assert_eq!(
        c.post("/api/v1/namespaces/default/configmaps/x", &json!({}))
            .code,
        405
    );
    sim.create(common::deployment("default", "d", 1)).unwrap();
    assert_eq!(
        c.delete("/apis/apps/v1/namespaces/default/deployments/d/status")
            .code,
        405
    );
    assert_eq!(
        c.get("/apis/apps/v1/namespaces/default/deployments/d/status")
            .code,
        200
    );
}
