//! The object patcher and hook metrics through both operators: the same hook writes
//! the same operations to `$KUBERNETES_PATCH_PATH` and `$METRICS_PATH`; each operator
//! acts in a namespace of its own (`$TARGET_NS`). The objects left in the two
//! namespaces and the hook metrics each exports must be the same.

use crate::common::http_get;
use crate::oracle::{Pair, recorder};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const PATCH_HOOK_CONFIG: &str = "configVersion: v1\nonStartup: 1";

/// The operations: every kind of create, patch and delete the README lists.
const PATCH_BODY: &str = r#"
cat > "$KUBERNETES_PATCH_PATH" <<PATCH
{"operation": "Create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "created", "namespace": "$TARGET_NS", "labels": {"by": "hook"}}, "data": {"a": "1"}}}
{"operation": "CreateIfNotExists", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "namespace": "$TARGET_NS"}, "data": {"a": "not-applied"}}}
{"operation": "CreateOrUpdate", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "existing", "namespace": "$TARGET_NS"}, "data": {"a": "replaced"}}}
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "created", "mergePatch": {"data": {"b": "2"}, "metadata": {"annotations": {"m": "x"}}}}
{"operation": "JSONPatch", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "created", "jsonPatch": [{"op": "add", "path": "/data/c", "value": "3"}, {"op": "remove", "path": "/data/a"}]}
{"operation": "JQPatch", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "existing", "jqFilter": ".data.jq = \"yes\""}
{"operation": "Delete", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "doomed"}
{"operation": "DeleteInBackground", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "doomed-bg"}
{"operation": "MergePatch", "kind": "ConfigMap", "namespace": "$TARGET_NS", "name": "absent", "mergePatch": {"data": {"x": "y"}}, "ignoreMissingObject": true}
PATCH
cat > "$METRICS_PATH" <<'METRICS'
{"name": "compat_gauge", "action": "set", "value": 5, "labels": {"a": "b"}}
{"name": "compat_counter", "action": "add", "value": 2}
{"name": "compat_counter", "action": "add", "value": 3}
{"name": "compat_grouped", "group": "g1", "action": "set", "value": 1, "labels": {"k": "v"}}
METRICS
"#;

/// The ConfigMaps of `ns`, by name, without what only the server decides.
fn objects(ns: &str) -> BTreeMap<String, Value> {
    let text = control_plane::shared()
        .kubectl(&["-n", ns, "get", "configmaps", "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let list: Value = serde_json::from_str(&text).expect("list json");
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o["metadata"]["name"] != "kube-root-ca.crt")
        .map(|mut o| {
            let meta = o["metadata"].as_object_mut().expect("metadata");
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "namespace",
                "managedFields",
            ] {
                meta.remove(k);
            }
            (o["metadata"]["name"].as_str().unwrap_or("").to_string(), o)
        })
        .collect()
}

/// The `compat_*` series of a metrics page, as sorted lines.
fn hook_metrics(page: &str) -> Vec<String> {
    let mut lines: Vec<String> = page
        .lines()
        .filter(|l| l.starts_with("compat_"))
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn patch_operations_and_hook_metrics_have_the_same_effect_in_both() {
    let cp = control_plane::shared();
    let ns_flant = cp.namespace("compat-patch-flant");
    let ns_ours = cp.namespace("compat-patch-ours");
    for ns in [&ns_flant, &ns_ours] {
        for name in ["existing", "doomed", "doomed-bg"] {
            cp.kubectl(&["-n", ns, "create", "configmap", name, "--from-literal=a=0"])
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let hook = recorder("patch", PATCH_HOOK_CONFIG) + PATCH_BODY;
    let kubeconfig = cp.admin_kubeconfig();
    let pair = Pair::start_with_env(
        &[("patch.sh", hook)],
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
        &[("TARGET_NS", &ns_flant)],
        &[("TARGET_NS", &ns_ours)],
    );
    pair.wait_both("onStartup");
    // The deletes end the run's effects. The foreground Delete waits until the
    // object is gone, which takes the garbage collector (a controller-manager this
    // cluster does not run): the test removes the finalizer as the collector would.
    for ns in [&ns_flant, &ns_ours] {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while objects(ns).contains_key("doomed") || objects(ns).contains_key("doomed-bg") {
            if objects(ns)
                .get("doomed")
                .is_some_and(|o| o["metadata"]["deletionTimestamp"].is_string())
            {
                let _ = cp.kubectl(&[
                    "-n",
                    ns,
                    "patch",
                    "configmap",
                    "doomed",
                    "--type=merge",
                    "-p",
                    r#"{"metadata":{"finalizers":null}}"#,
                ]);
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the deletes in {ns} never took effect; flant: {}\nours: {}",
                pair.flant.logs(),
                pair.ours.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    pair.settle(Duration::from_secs(1));
    let (flant_objects, our_objects) = (objects(&ns_flant), objects(&ns_ours));
    assert!(
        flant_objects.contains_key("created"),
        "flant applied the patch: {flant_objects:?}"
    );
    assert_eq!(
        flant_objects, our_objects,
        "objects after the same patch operations"
    );

    // flant serves hook metrics at /metrics/hooks only; we serve them there too.
    let flant_page = http_get(pair.flant_port, "/metrics/hooks").1;
    let our_page = http_get(pair.ours.port(), "/metrics/hooks").1;
    let flant_metrics = hook_metrics(&flant_page);
    assert!(
        !flant_metrics.is_empty(),
        "flant exported the hook metrics: {flant_page}"
    );
    assert_eq!(flant_metrics, hook_metrics(&our_page), "hook metrics");
}
