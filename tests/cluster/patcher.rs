//! The object patcher (`$KUBERNETES_PATCH_PATH`) against the real API server: every
//! operation the README documents, each read back with kubectl; the status
//! subresource on a CRD with `subresources.status`; and the server's refusals (409,
//! 422, 404) surfaced in its own words in the operator's log, with nothing after the
//! failing operation applied.
//!
//! Each test starts an operator whose onStartup hook writes one patch file; a run
//! whose patch applied ends with "startup finished", a failed one is logged as
//! "Hook failed, will retry" and retried every few seconds. This control plane has no
//! garbage collector (no controller-manager), so the delete test plays it: it removes
//! the `foregroundDeletion` finalizer the server put on the object, as the GC would.

use crate::common::{Operator, hook};
use crate::harness::*;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Deadline for a failure with the server's message: a run retried after an API
/// restart by another test (5 s backoff, then 6-7 s) still makes it.
const FAILURE_WAIT: Duration = Duration::from_secs(60);

/// Starts an operator (cluster-admin) whose onStartup hook writes `patch`.
fn patching(patch: &str) -> Operator {
    let body = format!("cat > \"$KUBERNETES_PATCH_PATH\" <<'PATCH'\n{patch}\nPATCH");
    admin_operator(&[(
        "patch.sh",
        hook("patch", "configVersion: v1\nonStartup: 1", &body),
    )])
}

/// Starts the operator on `patch` and waits until the run (hook and patch) succeeded.
fn patched(patch: &str) -> Operator {
    let op = patching(patch);
    op.wait_log("startup finished", FAILURE_WAIT);
    op
}

/// The `error` of the first "Hook failed, will retry" line whose error contains
/// `needle` (an earlier failure may be a short API outage caused by another test).
fn failure(op: &Operator, needle: &str) -> String {
    let deadline = Instant::now() + FAILURE_WAIT;
    loop {
        let found = op.stdout.lock().expect("lock").iter().find_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            let error = v["error"].as_str()?;
            (v["msg"] == "Hook failed, will retry" && error.contains(needle))
                .then(|| error.to_string())
        });
        if let Some(error) = found {
            return error;
        }
        assert!(
            Instant::now() < deadline,
            "no failure with {needle:?}; logs:\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The object as stored; panics when it is missing.
fn get(kind: &str, ns: &str, name: &str) -> Value {
    get_retry(kind, ns, name).unwrap_or_else(|| panic!("{kind} {ns}/{name} does not exist"))
}

/// One JSON line: a ConfigMap manifest in `ns`.
fn cm(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns}, "data": data})
}

/// Create, CreateIfNotExists and CreateOrUpdate, on new and existing ConfigMaps.
#[test]
fn creates_land_as_written() {
    let _api = api_shared();
    let ns = namespace_retry("patch-create");
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "kept",
        "--from-literal=k=old",
    ]);
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "upd",
        "--from-literal=k=old",
    ]);
    kubectl_retry(&["-n", &ns, "label", "configmap", "upd", "old=yes"]);
    let upd_before = get("configmap", &ns, "upd");
    let kept_before = get("configmap", &ns, "kept");
    let mut toplevel_ns = cm(&ns, "toplevel", json!({"k": "t"}));
    toplevel_ns["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("namespace");
    let ops = [
        json!({"operation": "Create", "object": cm(&ns, "new", json!({"k": "1"}))}),
        // `object` as a string holding YAML.
        json!({"operation": "CreateIfNotExists",
               "object": format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n  namespace: {ns}\ndata:\n  k: ignored\n")}),
        json!({"operation": "CreateIfNotExists", "object": cm(&ns, "fresh", json!({"k": "f"}))}),
        json!({"operation": "CreateOrUpdate", "object": cm(&ns, "upd", json!({"k": "new"}))}),
        json!({"operation": "CreateOrUpdate", "object": cm(&ns, "made", json!({"k": "m"}))}),
        json!({"operation": "Create", "namespace": ns, "object": toplevel_ns}),
    ];
    let text: Vec<String> = ops.iter().map(Value::to_string).collect();
    let _op = patched(&text.join("\n"));

    assert_eq!(get("configmap", &ns, "new")["data"], json!({"k": "1"}));
    let kept = get("configmap", &ns, "kept");
    assert_eq!(kept["data"], json!({"k": "old"}), "left alone");
    assert_eq!(
        kept["metadata"]["resourceVersion"], kept_before["metadata"]["resourceVersion"],
        "not written at all"
    );
    assert_eq!(get("configmap", &ns, "fresh")["data"], json!({"k": "f"}));
    let upd = get("configmap", &ns, "upd");
    assert_eq!(upd["data"], json!({"k": "new"}));
    assert_eq!(
        upd["metadata"]["uid"], upd_before["metadata"]["uid"],
        "updated, not recreated"
    );
    assert!(
        upd["metadata"]["labels"].get("old").is_none(),
        "replaced as a whole (PUT): {upd:#}"
    );
    assert_eq!(get("configmap", &ns, "made")["data"], json!({"k": "m"}));
    assert_eq!(get("configmap", &ns, "toplevel")["data"], json!({"k": "t"}));
}

/// shell-operator#346: an object taken from a snapshot (as the API server returned
/// it: `resourceVersion`, `uid`, `creationTimestamp`, `managedFields`) is created
/// again by Create (in another namespace, under a new name) and by CreateOrUpdate
/// (over an object recreated since, whose uid and resourceVersion differ).
#[test]
fn objects_taken_from_snapshots_are_created_and_updated() {
    let _api = api_shared();
    let ns = namespace_retry("patch-snapshot");
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "src",
        "--from-literal=k=v",
    ]);
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "twin",
        "--from-literal=k=v",
    ]);
    let src = get("configmap", &ns, "src");
    for field in [
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "managedFields",
    ] {
        assert!(!src["metadata"][field].is_null(), "{field} in {src:#}");
    }
    let mut copy = src.clone();
    copy["metadata"]["name"] = json!("copy");
    // The twin as an old snapshot: another object's uid and an old resourceVersion.
    let mut twin = src.clone();
    twin["metadata"]["name"] = json!("twin");
    twin["data"] = json!({"k": "from-snapshot"});
    let ops = [
        json!({"operation": "Create", "object": copy}),
        json!({"operation": "CreateOrUpdate", "object": twin}),
    ];
    let text: Vec<String> = ops.iter().map(Value::to_string).collect();
    let _op = patched(&text.join("\n"));
    let copy = get("configmap", &ns, "copy");
    assert_eq!(copy["data"], json!({"k": "v"}));
    assert_ne!(copy["metadata"]["uid"], src["metadata"]["uid"]);
    let twin = get("configmap", &ns, "twin");
    assert_eq!(twin["data"], json!({"k": "from-snapshot"}));
    assert_ne!(twin["metadata"]["uid"], src["metadata"]["uid"]);
}

/// JQPatch, MergePatch and JSONPatch on a ConfigMap (a YAML patch file); a JQPatch
/// that changes nothing writes nothing; ignoreMissingObject makes a missing object
/// no error.
#[test]
fn jq_merge_and_json_patches_change_the_object() {
    let _api = api_shared();
    let ns = namespace_retry("patch-patches");
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "t",
        "--from-literal=a=1",
        "--from-literal=b=2",
        "--from-literal=c=3",
    ]);
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "same",
        "--from-literal=a=10",
    ]);
    let same_before = get("configmap", &ns, "same");
    let patch = format!(
        r#"operation: JQPatch
kind: ConfigMap
namespace: {ns}
name: t
jqFilter: '.data.a = "10"'
---
operation: MergePatch
kind: ConfigMap
namespace: {ns}
name: t
mergePatch:
  data: {{b: null, d: "4"}}
  metadata: {{labels: {{merged: "yes"}}}}
---
operation: JSONPatch
apiVersion: v1
kind: ConfigMap
namespace: {ns}
name: t
jsonPatch:
- {{op: replace, path: /data/c, value: "30"}}
- {{op: add, path: /metadata/annotations, value: {{x: y}}}}
---
operation: JQPatch
kind: ConfigMap
namespace: {ns}
name: same
jqFilter: '.data.a = "10"'
---
operation: MergePatch
kind: ConfigMap
namespace: {ns}
name: missing
ignoreMissingObject: true
mergePatch: {{data: {{a: b}}}}
---
operation: JQPatch
kind: ConfigMap
namespace: {ns}
name: missing
ignoreMissingObject: true
jqFilter: '.data.a = "b"'
---
operation: JSONPatch
kind: ConfigMap
namespace: {ns}
name: missing
ignoreMissingObject: true
jsonPatch: [{{op: add, path: /data/a, value: b}}]
"#
    );
    let _op = patched(&patch);
    let t = get("configmap", &ns, "t");
    assert_eq!(t["data"], json!({"a": "10", "c": "30", "d": "4"}), "{t:#}");
    assert_eq!(t["metadata"]["labels"]["merged"], "yes");
    assert_eq!(t["metadata"]["annotations"], json!({"x": "y"}));
    let same = get("configmap", &ns, "same");
    assert_eq!(
        same["metadata"]["resourceVersion"], same_before["metadata"]["resourceVersion"],
        "an unchanged JQPatch result is not written"
    );
    assert!(get_retry("configmap", &ns, "missing").is_none());
}

/// A CRD of this test alone, with the status subresource.
const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pwidgets.patcher.cluster.test
spec:
  group: patcher.cluster.test
  scope: Namespaced
  names: {plural: pwidgets, singular: pwidget, kind: PWidget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

/// `subresource: status` for MergePatch, JSONPatch and JQPatch on a CRD with the
/// status subresource; CreateOrUpdate keeps `.status`. The real server ignores
/// `.spec` in a status write and `.status` in a write of the object itself: each
/// operation below changes a field of its own, so each one's effect is visible.
#[test]
fn status_subresource_patches_and_create_or_update_keeps_status() {
    let _api = api_shared();
    apply_retry(CRD);
    kubectl_retry(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/pwidgets.patcher.cluster.test",
    ]);
    let ns = namespace_retry("patch-status");
    apply_retry(&format!(
        "apiVersion: patcher.cluster.test/v1\nkind: PWidget\nmetadata:\n  name: w1\n  namespace: {ns}\nspec:\n  size: 1\n"
    ));
    kubectl_retry(&[
        "-n",
        &ns,
        "patch",
        "pwidget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Old"}}"#,
    ]);
    assert_eq!(get("pwidget", &ns, "w1")["status"], json!({"phase": "Old"}));
    let w = |op: Value| {
        let mut op = op;
        let fields = op.as_object_mut().expect("op");
        fields.insert("apiVersion".into(), json!("patcher.cluster.test/v1"));
        fields.insert("kind".into(), json!("PWidget"));
        fields.insert("namespace".into(), json!(ns));
        fields.insert("name".into(), json!("w1"));
        op.to_string()
    };
    let ops = [
        json!({"operation": "CreateOrUpdate", "object": {
            "apiVersion": "patcher.cluster.test/v1", "kind": "PWidget",
            "metadata": {"name": "w1", "namespace": ns}, "spec": {"size": 2}}})
        .to_string(),
        w(json!({"operation": "MergePatch", "subresource": "status",
                 "mergePatch": {"status": {"phase": "Merged"}, "spec": {"size": 99}}})),
        w(json!({"operation": "JSONPatch", "subresource": "status",
                 "jsonPatch": [{"op": "add", "path": "/status/count", "value": 2}]})),
        w(json!({"operation": "JQPatch", "subresource": "status",
                 "jqFilter": ".status.ready = true | .spec.size = 77"})),
        w(json!({"operation": "MergePatch",
                 "mergePatch": {"spec": {"color": "red"}, "status": {"phase": "Ignored"}}})),
    ];
    let _op = patched(&ops.join("\n"));
    let w1 = get("pwidget", &ns, "w1");
    assert_eq!(w1["spec"], json!({"size": 2, "color": "red"}), "{w1:#}");
    assert_eq!(
        w1["status"],
        json!({"phase": "Merged", "count": 2, "ready": true}),
        "{w1:#}"
    );
}

/// Delete (foreground, waits until the object is gone), DeleteInBackground and
/// DeleteNonCascading (no wait), and a Delete of a missing object (success). The
/// server shows each one's propagation policy: foreground and orphan leave the
/// object with a `foregroundDeletion` / `orphan` finalizer for the GC, background
/// removes it at once.
#[test]
fn deletes_use_their_propagation_policy_and_foreground_waits() {
    let _api = api_shared();
    let ns = namespace_retry("patch-delete");
    for name in ["fg", "bg", "orph"] {
        kubectl_retry(&["-n", &ns, "create", "configmap", name]);
    }
    let del = |operation: &str, name: &str| {
        json!({"operation": operation, "kind": "ConfigMap", "namespace": ns, "name": name})
            .to_string()
    };
    let ops = [
        del("Delete", "missing"),
        del("DeleteInBackground", "bg"),
        del("DeleteNonCascading", "orph"),
        json!({"operation": "Create", "object": cm(&ns, "marker-a", json!({}))}).to_string(),
        del("Delete", "fg"),
        json!({"operation": "Create", "object": cm(&ns, "marker-b", json!({}))}).to_string(),
    ];
    let op = patching(&ops.join("\n"));
    let fg = wait_for("fg marked for foreground deletion", || {
        let fg = get_retry("configmap", &ns, "fg")?;
        fg["metadata"]["deletionTimestamp"]
            .is_string()
            .then_some(fg)
    });
    // The operator is now waiting for fg to go: the next operation has not run.
    assert!(
        get_retry("configmap", &ns, "marker-b").is_none(),
        "Delete did not wait for the object to be gone"
    );
    assert_eq!(fg["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    assert!(
        get_retry("configmap", &ns, "bg").is_none(),
        "background: gone at once"
    );
    let orph = get("configmap", &ns, "orph");
    assert_eq!(
        orph["metadata"]["finalizers"],
        json!(["orphan"]),
        "{orph:#}"
    );
    assert!(
        get_retry("configmap", &ns, "marker-a").is_some(),
        "no wait after DeleteNonCascading"
    );

    // Play the garbage collector: no dependents, so it drops the finalizer.
    kubectl_retry(&[
        "-n",
        &ns,
        "patch",
        "configmap",
        "fg",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    op.wait_log("startup finished", FAILURE_WAIT);
    assert!(get_retry("configmap", &ns, "fg").is_none());
    assert!(get_retry("configmap", &ns, "marker-b").is_some());
}

/// Create of an existing object: the server's 409 AlreadyExists, the object as it
/// was, and nothing after the failing operation applied.
#[test]
fn create_of_an_existing_object_fails_with_the_servers_409() {
    let _api = api_shared();
    let ns = namespace_retry("patch-409");
    kubectl_retry(&[
        "-n",
        &ns,
        "create",
        "configmap",
        "a",
        "--from-literal=k=old",
    ]);
    let ops = [
        json!({"operation": "Create", "object": cm(&ns, "a", json!({"k": "new"}))}).to_string(),
        json!({"operation": "Create", "object": cm(&ns, "after", json!({}))}).to_string(),
    ];
    let op = patching(&ops.join("\n"));
    let error = failure(&op, "409");
    assert!(
        error.contains(&format!(
            "Create object v1/ConfigMap/{ns}/a: POST /api/v1/namespaces/{ns}/configmaps: \
             409 AlreadyExists: configmaps \"a\" already exists"
        )),
        "{error}"
    );
    assert!(
        error.ends_with("(use CreateOrUpdate or CreateIfNotExists if the object may exist)"),
        "{error}"
    );
    assert_eq!(get("configmap", &ns, "a")["data"], json!({"k": "old"}));
    assert!(
        get_retry("configmap", &ns, "after").is_none(),
        "applied after a failure"
    );
}

/// A JSONPatch whose `test` operation fails: the server's 422 (its message is
/// generic: "the server rejected our request due to an error in our request"), and
/// the patch's other operations are not applied.
#[test]
fn a_failing_json_patch_test_is_the_servers_422() {
    let _api = api_shared();
    let ns = namespace_retry("patch-test");
    kubectl_retry(&["-n", &ns, "create", "configmap", "a", "--from-literal=k=v"]);
    let patch = json!({"operation": "JSONPatch", "apiVersion": "v1", "kind": "ConfigMap",
        "namespace": ns, "name": "a", "jsonPatch": [
            {"op": "test", "path": "/data/k", "value": "other"},
            {"op": "replace", "path": "/data/k", "value": "changed"}]});
    let op = patching(&patch.to_string());
    let error = failure(&op, "422");
    assert!(
        error.contains(&format!(
            "Patch object v1/ConfigMap/{ns}/a: PATCH /api/v1/namespaces/{ns}/configmaps/a: \
             422 Invalid: the server rejected our request due to an error in our request"
        )),
        "{error}"
    );
    assert!(
        error
            .ends_with("(the API server rejected the object as invalid; fix it in the patch file)"),
        "{error}"
    );
    assert_eq!(get("configmap", &ns, "a")["data"], json!({"k": "v"}));
}

/// A MergePatch that makes a ConfigMap invalid (a `data` value that is a boolean, or
/// a number): the real server answers 422 Invalid, naming the Go type it could not
/// decode into; the object is unchanged.
#[test]
fn a_merge_patch_with_non_string_data_is_the_servers_422() {
    let _api = api_shared();
    let ns = namespace_retry("patch-type");
    kubectl_retry(&["-n", &ns, "create", "configmap", "a", "--from-literal=k=v"]);
    for (value, json_type) in [(json!(true), "bool"), (json!(5), "number")] {
        let patch = json!({"operation": "MergePatch", "apiVersion": "v1", "kind": "ConfigMap",
            "namespace": ns, "name": "a", "mergePatch": {"data": {"k": value}}});
        let op = patching(&patch.to_string());
        let error = failure(&op, "422");
        let prefix = format!(
            "Patch object v1/ConfigMap/{ns}/a: PATCH /api/v1/namespaces/{ns}/configmaps/a: 422 Invalid: "
        );
        assert!(error.contains(&prefix), "{error}");
        assert!(
            error.contains(&format!(
                "json: cannot unmarshal {json_type} into Go struct field ConfigMap.data of type string"
            )),
            "{error}"
        );
        assert!(
            error.ends_with(
                "(the API server rejected the object as invalid; fix it in the patch file)"
            ),
            "{error}"
        );
        assert_eq!(get("configmap", &ns, "a")["data"], json!({"k": "v"}));
    }
}

/// Create in a namespace that does not exist: the server's 404 naming the namespace.
#[test]
fn create_in_a_missing_namespace_is_the_servers_404() {
    let _api = api_shared();
    let missing = format!("patch-missing-{}", std::process::id());
    let patch = json!({"operation": "Create", "object": cm(&missing, "a", json!({}))});
    let op = patching(&patch.to_string());
    let error = failure(&op, "404");
    assert!(
        error.contains(&format!(
            "Create object v1/ConfigMap/{missing}/a: POST /api/v1/namespaces/{missing}/configmaps: \
             404 NotFound: namespaces \"{missing}\" not found"
        )),
        "{error}"
    );
    assert!(
        error.ends_with("(set ignoreMissingObject: true if the object may be absent)"),
        "{error}"
    );
}

/// Create of an object whose name is not a DNS subdomain: the server's 422 with its
/// field path and rule.
#[test]
fn create_with_an_invalid_name_is_the_servers_422() {
    let _api = api_shared();
    let ns = namespace_retry("patch-name");
    let patch = json!({"operation": "Create", "object": cm(&ns, "Bad_Name", json!({}))});
    let op = patching(&patch.to_string());
    let error = failure(&op, "422");
    assert!(
        error.contains(&format!(
            "Create object v1/ConfigMap/{ns}/Bad_Name: POST /api/v1/namespaces/{ns}/configmaps: \
             422 Invalid: ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \
             \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of"
        )),
        "{error}"
    );
}
