//! What the addon-operator suites (`addon.rs`, the generated corpus of
//! `gen_addon.rs`) write and compare: the recording hook every corpus uses, the runs
//! it recorded grouped by tag, each release's revision/status/values/objects, the
//! operator's ConfigMap, and the metric names flant's exports and ours does not, all
//! with the differences `addon::ALLOWED` names taken out of both sides.

use crate::addon_oracle::{AddonOp, release_content, releases};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// A recording hook: prints `config` for `--config`; otherwise appends
/// `<tag> {"ctx":…,"values":…,"config":…}` to `$OUT_DIR/runs.log`, then runs `body`.
pub(crate) fn rec(tag: &str, config: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\ncat <<'CONFIG'\n{config}\nCONFIG\nexit 0\nfi\n\
         v=$(tr -d '\\n' < \"$VALUES_PATH\"); c=$(tr -d '\\n' < \"$CONFIG_VALUES_PATH\")\n\
         printf '%s {{\"ctx\":%s,\"values\":%s,\"config\":%s}}\\n' '{tag}' \"$(tr -d '\\n' < \"$BINDING_CONTEXT_PATH\")\" \"${{v:-null}}\" \"${{c:-null}}\" >> \"$OUT_DIR/runs.log\"\n{body}\n"
    )
}

/// A values patch adding `value` at `path`.
pub(crate) fn patch(path: &str, value: &str) -> String {
    format!(
        "echo '[{{\"op\":\"add\",\"path\":\"{path}\",\"value\":\"{value}\"}}]' > \"$VALUES_JSON_PATCH_PATH\""
    )
}

/// Runs recorded from index `from` on, grouped by tag (in order within a tag), with
/// the differences [`crate::addon::ALLOWED`] names taken out of both sides.
pub(crate) fn runs_since(op: &AddonOp, from: usize) -> BTreeMap<String, Vec<Value>> {
    let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (tag, mut rec) in op.records().into_iter().skip(from) {
        if tag.ends_with("-enabled") {
            continue; // "enabled scripts' runs"
        }
        if !tag.starts_with("g-") {
            if let Some(g) = rec
                .pointer_mut("/values/global")
                .and_then(Value::as_object_mut)
            {
                g.remove("enabledModules");
            }
        }
        if let Some(cfg) = rec.get_mut("config").and_then(Value::as_object_mut) {
            for v in cfg.values_mut().filter(|v| v.is_null()) {
                *v = json!({});
            }
        }
        strip_server_fields(&mut rec);
        map.entry(tag).or_default().push(rec);
    }
    map
}

/// Each release of `ns`: revision, status, values (with the checksum value
/// `_addonOperatorModuleChecksum`, which ours writes as flant's v1.5.0 does) and the
/// manifest's objects, without what [`crate::addon::ALLOWED`] names (`global.enabledModules`, the
/// `heritage` label).
pub(crate) fn release_state(ns: &str) -> BTreeMap<String, Value> {
    releases(ns)
        .into_iter()
        .map(|(name, (revision, status))| {
            let (mut values, manifest) = release_content(ns, &name);
            if let Some(g) = values.get_mut("global").and_then(Value::as_object_mut) {
                g.remove("enabledModules");
            }
            let objects: Vec<Value> = manifest_docs(&manifest)
                .into_iter()
                .map(|mut o| {
                    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                        if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
                            labels.remove("heritage");
                            if labels.is_empty() {
                                meta.remove("labels");
                            }
                        }
                    }
                    o
                })
                .collect();
            let state = json!({"revision": revision, "status": status, "values": values, "objects": objects});
            (name, state)
        })
        .collect()
}

/// The documents of a manifest stream, parsed (YAML or JSON).
pub(crate) fn manifest_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{e}: {text}")))
        .filter(|v| !v.is_null())
        .collect()
}

/// Removes what the API server makes up per object (uid, resourceVersion, times).
pub(crate) fn strip_server_fields(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
            ] {
                map.remove(k);
            }
            map.values_mut().for_each(strip_server_fields);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_server_fields),
        _ => {}
    }
}

/// The differences between two maps, one line per key that differs.
pub(crate) fn diff_maps<T: PartialEq + std::fmt::Debug>(
    what: &str,
    flant: &BTreeMap<String, T>,
    ours: &BTreeMap<String, T>,
) -> Vec<String> {
    let keys: BTreeSet<&String> = flant.keys().chain(ours.keys()).collect();
    keys.into_iter()
        .filter(|k| flant.get(*k) != ours.get(*k))
        .map(|k| {
            format!(
                "{what} {k}:\n  flant: {:?}\n  ours:  {:?}",
                flant.get(k),
                ours.get(k)
            )
        })
        .collect()
}

/// The operator's ConfigMap `addon-operator` in `ns`: its data.
pub(crate) fn config_data(ns: &str) -> Value {
    control_plane::shared()
        .get("configmap", ns, "addon-operator")
        .map(|cm| cm["data"].clone())
        .unwrap_or(Value::Null)
}

/// The `addon_operator_*` metric names and label sets flant's exports and ours does
/// not (the `kubernetes_client_*` ones are allowed to differ: `addon::ALLOWED`).
pub(crate) fn metric_gaps(flant: &AddonOp, ours: &AddonOp) -> Vec<String> {
    let shapes = |op: &AddonOp| {
        op.metric_shapes("addon_operator_")
            .into_iter()
            .filter(|s| !s.starts_with("addon_operator_kubernetes_client_"))
            .collect::<BTreeSet<_>>()
    };
    let (fm, om) = (shapes(flant), shapes(ours));
    let missing: Vec<&String> = fm.difference(&om).collect();
    if missing.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "metrics flant exports and ours does not: {missing:?}"
        )]
    }
}
