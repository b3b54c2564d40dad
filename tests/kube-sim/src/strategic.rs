//! Strategic merge patch, closer to the real thing than a plain merge patch:
//! maps merge recursively; lists that Kubernetes merges by key (containers by
//! `name`, container ports by `containerPort`, conditions by `type`, ...) are
//! merged item by item, and `finalizers` as a set; other lists are replaced.
//! Directives understood: `$patch: delete|replace` (maps and list items),
//! `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>` and
//! `$retainKeys`. The merge keys come from a table keyed by field name, not
//! from per-type schemas, so unusual types may merge differently.

use serde_json::{Map, Value};

/// The merge key of a list field, or None when the list is replaced whole.
/// `ports` depends on its items: container ports vs service ports.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "webhooks"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => "containerPort",
        "ports" => "port",
        _ => return None,
    })
}

/// Primitive lists merged as sets.
fn is_set_list(field: &str) -> bool {
    field == "finalizers"
}

/// Applies a strategic merge patch to `target`.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => {
            *target = Value::Null;
            return;
        }
        Some("replace") => {
            *target = Value::Object(strip(p));
            return;
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else { return };
    for (k, v) in p.iter().filter(|(k, _)| !k.starts_with('$')) {
        merge_field(t, k, v, p);
    }
    for (k, v) in p.iter() {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Value::Array(del)) = (t.get_mut(field), v) {
                cur.retain(|x| !del.contains(x));
            }
        }
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            // a keyed list the patch also carries was ordered while merging
            let keyed = p
                .get(field)
                .and_then(Value::as_array)
                .is_some_and(|items| merge_key(field, items).is_some());
            if !keyed {
                reorder(t, field, v);
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        t.retain(|k, _| keep.iter().any(|x| x == k));
    }
}

/// Merges one field of a map.
fn merge_field(t: &mut Map<String, Value>, k: &str, v: &Value, order: &Map<String, Value>) {
    match v {
        Value::Null => {
            t.remove(k);
        }
        Value::Object(_) => {
            let entry = t.entry(k.to_string()).or_insert(Value::Null);
            merge(entry, v);
            if entry.is_null() {
                t.remove(k);
            }
        }
        Value::Array(items) => {
            let merged = match (t.get(k), merge_key(k, items)) {
                (Some(Value::Array(cur)), Some(key)) => {
                    merge_keyed(cur, items, key, order.get(&format!("$setElementOrder/{k}")))
                }
                (Some(Value::Array(cur)), None) if is_set_list(k) => {
                    let mut out = cur.clone();
                    out.extend(items.iter().filter(|i| !cur.contains(i)).cloned());
                    out
                }
                _ => items
                    .iter()
                    .filter(|i| i.get("$patch").is_none())
                    .map(clean)
                    .collect(),
            };
            t.insert(k.to_string(), Value::Array(merged));
        }
        other => {
            t.insert(k.to_string(), other.clone());
        }
    }
}

/// Merges a keyed list: patch items update, add to or (`$patch: delete`) remove
/// items. The result is ordered as kube-apiserver orders it: the patch's items in
/// patch order (or `$setElementOrder`'s, which may also name untouched originals),
/// merged with the originals nobody named; an original goes first only when the
/// named item it meets is an original placed after it, so new items go first.
fn merge_keyed(cur: &[Value], items: &[Value], key: &str, order: Option<&Value>) -> Vec<Value> {
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return items
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(clean)
            .collect();
    }
    let index_in = |list: &[Value], x: &Value| {
        let id = x.get(key);
        list.iter().position(|o| id.is_some() && o.get(key) == id)
    };
    let mut named: Vec<(Option<usize>, Value)> = Vec::new();
    let mut deleted = Vec::new();
    for item in items {
        match (
            item.get("$patch").and_then(Value::as_str),
            index_in(cur, item),
        ) {
            (Some("delete"), i) => deleted.extend(i),
            (_, Some(i)) => {
                let mut merged = cur[i].clone();
                merge(&mut merged, item);
                named.push((Some(i), merged));
            }
            (_, None) => named.push((None, clean(item))),
        }
    }
    if let Some(Value::Array(order)) = order {
        let mut ordered = Vec::new();
        for o in order {
            if let Some(p) = named.iter().position(|(_, x)| x.get(key) == o.get(key)) {
                ordered.push(named.remove(p));
            } else if let Some(i) = index_in(cur, o).filter(|i| !deleted.contains(i)) {
                ordered.push((Some(i), cur[i].clone()));
            }
        }
        ordered.append(&mut named);
        named = ordered;
    }
    let taken: Vec<usize> = named
        .iter()
        .filter_map(|(i, _)| *i)
        .chain(deleted)
        .collect();
    let server_only = (0..cur.len()).filter(|i| !taken.contains(i));
    let mut out = Vec::with_capacity(cur.len() + named.len());
    let mut named = named.into_iter().peekable();
    for i in server_only {
        while let Some((_, item)) = named.next_if(|(p, _)| p.is_none_or(|p| p < i)) {
            out.push(item);
        }
        out.push(cur[i].clone());
    }
    out.extend(named.map(|(_, item)| item));
    out
}

/// Orders a list field as `$setElementOrder` says; unlisted items keep their place at the end.
fn reorder(t: &mut Map<String, Value>, field: &str, order: &Value) {
    let (Some(Value::Array(cur)), Value::Array(order)) = (t.get(field), order) else {
        return;
    };
    let key = merge_key(field, cur);
    let ident = |x: &Value| match key {
        Some(k) => x.get(k).cloned().unwrap_or(Value::Null),
        None => x.clone(),
    };
    let mut rest = cur.clone();
    let mut out = Vec::with_capacity(cur.len());
    for o in order {
        let want = match key {
            Some(k) => o.get(k).cloned().unwrap_or(Value::Null),
            None => o.clone(),
        };
        if let Some(i) = rest.iter().position(|x| ident(x) == want) {
            out.push(rest.remove(i));
        }
    }
    out.extend(rest);
    t.insert(field.to_string(), Value::Array(out));
}

/// A patch value with directives removed, for inserting as-is.
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip(m)),
        Value::Array(a) => Value::Array(a.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn strip(m: &Map<String, Value>) -> Map<String, Value> {
    m.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), clean(v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(cur: Value, patch: Value) -> Value {
        let mut c = cur;
        merge(&mut c, &patch);
        c
    }

    #[test]
    fn containers_merge_by_name() {
        let cur = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}], "ports": [{"containerPort": 80}]},
            {"name": "b", "image": "b:1"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}, {"name": "c"}],
            "containers": [
                {"name": "a", "image": "a:2", "env": [{"name": "Y", "value": "2"}]},
                {"name": "c", "image": "c:1"}]}});
        let out = apply(cur, patch);
        let cs = out["spec"]["containers"].as_array().unwrap();
        let names: Vec<&str> = cs.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        assert_eq!(cs[1]["image"], "a:2");
        assert_eq!(cs[1]["ports"], json!([{"containerPort": 80}]));
        // a new item goes before the original it meets (measured on kube-apiserver)
        assert_eq!(
            cs[1]["env"],
            json!([{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}])
        );
        assert_eq!(cs[0]["image"], "b:1");
    }

    #[test]
    fn keyed_items_are_ordered_as_kube_apiserver_orders_them() {
        // measured on kube-apiserver 1.35: new items go before the originals they meet
        let names = |v: &Value| -> Vec<String> {
            v["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        };
        let cur = json!({"containers": [{"name": "c1"}, {"name": "c2"}, {"name": "c3"}]});
        let out = apply(
            cur,
            json!({"containers": [{"name": "n1"}, {"name": "c2", "x": 1}, {"name": "n2"}]}),
        );
        assert_eq!(names(&out), ["n1", "c1", "c2", "n2", "c3"]);
        assert_eq!(out["containers"][2]["x"], 1);
        let out = apply(out, json!({"containers": [{"name": "c3"}]}));
        assert_eq!(names(&out), ["n1", "c1", "c2", "n2", "c3"]);
        let order = json!([{"name": "c2"}, {"name": "n1"}]);
        let out = apply(
            out,
            json!({"$setElementOrder/containers": order, "containers": [{"name": "n1", "x": 2}]}),
        );
        assert_eq!(names(&out), ["c1", "c2", "n1", "n2", "c3"]);
        let out = apply(
            out,
            json!({"containers": [{"name": "n3"}, {"name": "c1", "$patch": "delete"}]}),
        );
        assert_eq!(names(&out), ["n3", "c2", "n1", "n2", "c3"]);
    }

    #[test]
    fn directives() {
        let cur = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
                         "spec": {"containers": [{"name": "a"}, {"name": "b"}], "args": ["1", "2"]}});
        let patch = json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"],
                                        "labels": {"$patch": "replace", "z": "3"}},
                           "spec": {"containers": [{"name": "a", "$patch": "delete"}], "args": ["9"]}});
        let out = apply(cur, patch);
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "c"]));
        assert_eq!(out["metadata"]["labels"], json!({"z": "3"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "b"}]));
        assert_eq!(
            out["spec"]["args"],
            json!(["9"]),
            "unkeyed lists are replaced"
        );
        let kept = apply(
            json!({"s": {"a": 1, "b": 2}}),
            json!({"s": {"$retainKeys": ["a", "c"], "c": 3}}),
        );
        assert_eq!(kept, json!({"s": {"a": 1, "c": 3}}));
        assert_eq!(apply(json!({"a": {"b": 1}}), json!({"a": null})), json!({}));
    }
}
