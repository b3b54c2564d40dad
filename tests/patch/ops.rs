//! Every object-patcher operation against kube-sim: what lands in the store
//! after a patch file (JSON stream or YAML) is parsed and applied.

use crate::patch_common;

use patch_common::{cm, pod, rv, world};
use serde_json::json;

/// Create makes the object; a second Create of the same name is an error
/// prefixed with the operation's description; CreateIfNotExists is then a no-op.
#[test]
fn create_and_create_if_not_exists() {
    let w = world();
    let doc =
        json!({"operation": "Create", "object": cm("ns1", "a", json!({"k": "1"}))}).to_string();
    assert_eq!(w.run(&doc, false), Ok(1));
    assert_eq!(
        w.cm("ns1", "a").expect("created")["data"],
        json!({"k": "1"})
    );
    let err = w.run(&doc, false).unwrap_err();
    assert!(
        err.starts_with(
            "Create object v1/ConfigMap/ns1/a: POST /api/v1/namespaces/ns1/configmaps: 409"
        ) && err.ends_with("(use CreateOrUpdate or CreateIfNotExists if the object may exist)"),
        "{err}"
    );
    // The caller sees an AlreadyExists of a Create, not a lost race.
    let ops = shell_operator::patch::parse(doc.as_bytes()).expect("parses");
    let err = shell_operator::patch::apply(&w.client, &ops, false, None).unwrap_err();
    let cause = err.apply_error().expect("an apply error");
    assert!(
        !err.is_invalid_file()
            && !cause.is_conflict()
            && cause
                .kube_error()
                .is_some_and(|e| e.status_code() == Some(409)),
        "{err:?}"
    );
    let before = rv(&w.cm("ns1", "a").expect("a"));
    let doc =
        json!({"operation": "CreateIfNotExists", "object": cm("ns1", "a", json!({"k": "2"}))})
            .to_string();
    assert_eq!(w.run(&doc, false), Ok(1));
    let after = w.cm("ns1", "a").expect("a");
    assert_eq!(
        (after["data"].clone(), rv(&after)),
        (json!({"k": "1"}), before)
    );
}

/// An object given as a YAML string, with the namespace from the top level.
#[test]
fn create_from_string_object_and_top_level_namespace() {
    let w = world();
    let text = "operation: Create\nnamespace: ns1\nobject: |\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: s\n  data:\n    from: string\n";
    assert_eq!(w.run(text, false), Ok(1));
    assert_eq!(w.cm("ns1", "s").expect("created")["data"]["from"], "string");
}

/// CreateOrUpdate creates, then replaces the spec (fields not given are gone)
/// and keeps the status, which only the status subresource changes.
#[test]
fn create_or_update_replaces_and_keeps_status() {
    let w = world();
    let doc = |data: serde_json::Value| {
        json!({"operation": "CreateOrUpdate", "object": cm("ns1", "c", data)}).to_string()
    };
    assert_eq!(w.run(&doc(json!({"a": "1", "b": "2"})), false), Ok(1));
    assert_eq!(w.run(&doc(json!({"a": "9"})), false), Ok(1));
    assert_eq!(w.cm("ns1", "c").expect("c")["data"], json!({"a": "9"}));

    w.seed(pod("ns1", "p"));
    let mut p = pod("ns1", "p");
    p["metadata"]["labels"] = json!({"v": "2"});
    p.as_object_mut().expect("pod").remove("status");
    let doc = json!({"operation": "CreateOrUpdate", "object": p}).to_string();
    assert_eq!(w.run(&doc, false), Ok(1));
    let got = w.sim.get("v1", "Pod", "ns1", "p").expect("pod");
    assert_eq!(
        (
            got["metadata"]["labels"].clone(),
            got["status"]["phase"].clone()
        ),
        (json!({"v": "2"}), json!("Pending"))
    );
}

/// The three deletes remove the object; deleting a missing object succeeds.
#[test]
fn deletes_and_missing_objects() {
    let w = world();
    for (i, op) in ["Delete", "DeleteInBackground", "DeleteNonCascading"]
        .iter()
        .enumerate()
    {
        let name = format!("d{i}");
        w.seed(cm("ns1", &name, json!({})));
        let doc = json!({"operation": op, "kind": "ConfigMap", "namespace": "ns1", "name": name})
            .to_string();
        assert_eq!(w.run(&doc, false), Ok(1), "{op}");
        assert_eq!(w.cm("ns1", &name), None, "{op}");
        assert_eq!(w.run(&doc, false), Ok(1), "{op} of a missing object");
    }
    let log = w.sim.requests();
    assert!(
        log.iter()
            .any(|l| l.starts_with("DELETE /api/v1/namespaces/ns1/configmaps/d0")),
        "{log:?}"
    );
}

/// A foreground Delete waits until a finalizer is removed and the object is gone.
#[test]
fn foreground_delete_waits_for_finalizers() {
    let w = world();
    let mut obj = cm("ns1", "f", json!({}));
    obj["metadata"]["finalizers"] = json!(["example.com/hold"]);
    w.seed(obj);
    let sim_url = w.sim.url();
    let releaser = {
        let client = w.client.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let res = client.resolve("v1", "ConfigMap", "t").expect("resolve");
            let api = client.api(&res, Some("ns1"));
            let patch =
                shell_operator::kube::Patch::Merge(json!({"metadata": {"finalizers": null}}));
            api.patch("f", &patch, &Default::default())
                .expect("release");
        })
    };
    let start = std::time::Instant::now();
    let doc = r#"{"operation": "Delete", "kind": "ConfigMap", "namespace": "ns1", "name": "f"}"#;
    assert_eq!(w.run(doc, false), Ok(1), "{sim_url}");
    assert!(start.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(w.cm("ns1", "f"), None);
    releaser.join().expect("releaser");
}

/// MergePatch merges labels; JSONPatch applies every op in order.
#[test]
fn merge_and_json_patch() {
    let w = world();
    let mut obj = cm("ns1", "m", json!({"a": "1"}));
    obj["metadata"]["labels"] = json!({"keep": "yes"});
    w.seed(obj);
    let text = r#"
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "ns1", "name": "m",
 "mergePatch": {"metadata": {"labels": {"added": "1"}}}}
{"operation": "JSONPatch", "kind": "ConfigMap", "namespace": "ns1", "name": "m",
 "jsonPatch": [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}]}
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "ns1", "name": "m",
 "mergePatch": "data:\n  c: '3'\n"}
"#;
    assert_eq!(w.run(text, false), Ok(3));
    let got = w.cm("ns1", "m").expect("m");
    assert_eq!(
        got["metadata"]["labels"],
        json!({"keep": "yes", "added": "1"})
    );
    assert_eq!(got["data"], json!({"b": "2", "c": "3"}));
}

/// Patches with `subresource: status` change the status only.
#[test]
fn status_subresource_patches() {
    let w = world();
    w.seed(pod("ns1", "p"));
    let text = r#"---
operation: MergePatch
kind: Pod
namespace: ns1
name: p
subresource: status
mergePatch:
  status: {phase: Running}
  metadata: {labels: {ignored: "yes"}}
---
operation: JQPatch
kind: Pod
namespace: ns1
name: p
subresource: status
jqFilter: '.status.message = "from jq"'
"#;
    assert_eq!(w.run(text, false), Ok(2));
    let got = w.sim.get("v1", "Pod", "ns1", "p").expect("pod");
    assert_eq!(
        got["status"],
        json!({"phase": "Running", "message": "from jq"})
    );
    assert_eq!(got["metadata"]["labels"], serde_json::Value::Null);
}

/// JQPatch changes the object; a filter that changes nothing sends no write
/// and does not bump the resourceVersion.
#[test]
fn jq_patch_and_no_op() {
    let w = world();
    w.seed(cm("ns1", "j", json!({"n": "1"})));
    let doc = r#"{"operation": "JQPatch", "kind": "ConfigMap", "namespace": "ns1", "name": "j", "jqFilter": ".data.n = \"2\" | .metadata.labels += {\"x\": \"y\"}"}"#;
    assert_eq!(w.run(doc, false), Ok(1));
    let got = w.cm("ns1", "j").expect("j");
    assert_eq!(
        (
            got["data"]["n"].clone(),
            got["metadata"]["labels"]["x"].clone()
        ),
        (json!("2"), json!("y"))
    );
    let before = rv(&got);
    let puts = |w: &patch_common::World| {
        w.sim
            .requests()
            .iter()
            .filter(|l| l.starts_with("PUT"))
            .count()
    };
    let n = puts(&w);
    assert_eq!(w.run(doc, false), Ok(1));
    assert_eq!(rv(&w.cm("ns1", "j").expect("j")), before);
    assert_eq!(puts(&w), n, "no PUT for an unchanged object");
}

/// `ignoreMissingObject` turns NotFound into success for every patch kind;
/// without it, a missing object is an error.
#[test]
fn ignore_missing_object() {
    let w = world();
    let ops = [
        r#""operation": "JQPatch", "jqFilter": ".""#,
        r#""operation": "MergePatch", "mergePatch": {"data": {"a": "1"}}"#,
        r#""operation": "JSONPatch", "jsonPatch": [{"op": "add", "path": "/data", "value": {}}]"#,
    ];
    for op in ops {
        let doc = format!(
            r#"{{{op}, "kind": "ConfigMap", "namespace": "ns1", "name": "nope", "ignoreMissingObject": true}}"#
        );
        assert_eq!(w.run(&doc, false), Ok(1), "{op}");
        let doc = doc.replace("true", "false");
        let err = w.run(&doc, false).unwrap_err();
        assert!(
            err.contains("/ConfigMap/ns1/nope: ")
                && err.contains(": 404")
                && err.ends_with("(set ignoreMissingObject: true if the object may be absent)"),
            "{err}"
        );
    }
}

/// With a failed hook, only `ignoreHookError: true` operations run, whatever
/// their subresource (flant only honoured the never-used "/status").
#[test]
fn hook_failed_runs_only_ignore_hook_error_ops() {
    let w = world();
    w.seed(pod("ns1", "p"));
    w.seed(cm("ns1", "x", json!({})));
    let text = r#"
{"operation": "MergePatch", "kind": "Pod", "namespace": "ns1", "name": "p", "subresource": "status", "ignoreHookError": true, "mergePatch": {"status": {"phase": "Failed"}}}
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "ns1", "name": "x", "ignoreHookError": true, "mergePatch": {"data": {"failed": "yes"}}}
{"operation": "Delete", "kind": "ConfigMap", "namespace": "ns1", "name": "x"}
"#;
    assert_eq!(w.run(text, true), Ok(2));
    assert_eq!(
        w.sim.get("v1", "Pod", "ns1", "p").expect("p")["status"]["phase"],
        "Failed"
    );
    assert_eq!(
        w.cm("ns1", "x").expect("x still there")["data"]["failed"],
        "yes"
    );
}

/// The first failing operation stops the rest: the op before it applied, the
/// ones after it did not.
#[test]
fn first_failure_stops_the_rest() {
    let w = world();
    let text = r#"
{"operation": "Create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "namespace": "ns1"}}}
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "ns1", "name": "missing", "mergePatch": {"data": {"a": "1"}}}
{"operation": "Create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "three", "namespace": "ns1"}}}
"#;
    let err = w.run(text, false).unwrap_err();
    assert!(err.starts_with("Patch object /ConfigMap/ns1/missing: PATCH /api/v1/namespaces/ns1/configmaps/missing: 404"), "{err}");
    assert!(w.cm("ns1", "one").is_some());
    assert!(w.cm("ns1", "three").is_none());
}

/// An unknown kind fails with the operation's description and discovery's message.
#[test]
fn unknown_kind_is_an_error() {
    let w = world();
    let err = w.run(r#"{"operation": "Delete", "apiVersion": "example.com/v1", "kind": "Widget", "name": "w"}"#, false).unwrap_err();
    assert!(err.starts_with("Delete object example.com/v1/Widget//w: object patcher: cannot get GroupVersionResource info"), "{err}");
}

/// Empty and whitespace-only files are no operations.
#[test]
fn empty_file_is_nothing() {
    let w = world();
    assert_eq!(w.run("", false), Ok(0));
    assert_eq!(w.run("\n  \n", false), Ok(0));
    assert_eq!(w.run("---\n", false), Ok(0));
}

/// A JQPatch filter may import modules from the jq library path given to
/// `apply`; without that path the import fails when applied, naming the op.
#[test]
fn jq_patch_with_library_modules() {
    let w = world();
    w.seed(cm("ns1", "l", json!({"a": "1"})));
    let lib = std::env::temp_dir().join(format!("patch-jq-lib-{}", std::process::id()));
    std::fs::create_dir_all(&lib).expect("lib dir");
    std::fs::write(lib.join("marks.jq"), "def mark: .data.marked = \"yes\";\n").expect("module");
    let doc = r#"{"operation": "JQPatch", "kind": "ConfigMap", "namespace": "ns1", "name": "l", "jqFilter": "include \"marks\"; mark"}"#;
    let ops = shell_operator::patch::parse(doc.as_bytes()).expect("parses without the library");
    let err = shell_operator::patch::apply(&w.client, &ops, false, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(
            "Filter object /ConfigMap/ns1/l: cannot parse jq filter: cannot load module"
        ),
        "{err}"
    );
    assert_eq!(
        shell_operator::patch::apply(&w.client, &ops, false, Some(&lib)).map_err(|e| e.to_string()),
        Ok(1)
    );
    assert_eq!(
        w.cm("ns1", "l").expect("l")["data"],
        json!({"a": "1", "marked": "yes"})
    );
    let _ = std::fs::remove_dir_all(&lib);
}

/// For a kind without a status subresource, CreateOrUpdate keeps the current
/// `.status` when the given object has none (flant's PUT would clear it).
#[test]
fn create_or_update_keeps_status_without_subresource() {
    let w = world();
    let mut obj = cm("ns1", "s", json!({"a": "1"}));
    obj["status"] = json!({"observed": "yes"});
    w.seed(obj);
    let doc = json!({"operation": "CreateOrUpdate", "object": cm("ns1", "s", json!({"a": "2"}))});
    assert_eq!(w.run(&doc.to_string(), false), Ok(1));
    let got = w.cm("ns1", "s").expect("s");
    assert_eq!(
        (got["data"].clone(), got["status"].clone()),
        (json!({"a": "2"}), json!({"observed": "yes"}))
    );
}
