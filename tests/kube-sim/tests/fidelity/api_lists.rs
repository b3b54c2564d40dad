//! kube-sim lists over real HTTP: label and field selectors of every operator,
//! paging with consistent continue tokens, and 410 for expired tokens.

use crate::common;

use common::{Client, cm, names};
use kube_sim::Sim;
use serde_json::json;

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
        sel("fieldSelector=metadata.namespace%3Da,metadata.name!%3Dtwo"),
        ["one"]
    );
    // ConfigMaps can only be selected on metadata.name and metadata.namespace (as on
    // kube-apiserver 1.35)
    let refused = c.get("/api/v1/configmaps?fieldSelector=data.k%3Dv");
    assert_eq!(
        (refused.code, refused.body["message"].clone()),
        (
            400,
            json!(
                "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            )
        )
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
