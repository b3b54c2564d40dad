//! Server-side printing: when a client (kubectl get) asks for
//! `application/json;as=Table;g=meta.k8s.io;v=v1`, lists, single objects and
//! watch event objects are answered as `meta.k8s.io/v1 Table` with a Name and
//! an Age column (plus Data for ConfigMaps and Secrets).

use crate::http::Request;
use crate::registry::ResourceType;
use crate::util::{fmt_age, now_secs, parse_time};
use serde_json::{Value, json};

/// Whether the Accept header asks for a Table.
pub fn wants_table(req: &Request) -> bool {
    req.header("accept").is_some_and(|a| a.contains("as=Table"))
}

fn column(name: &str, format: &str, desc: &str) -> Value {
    json!({"name": name, "type": "string", "format": format, "description": desc, "priority": 0})
}

fn has_data_column(rt: &ResourceType) -> bool {
    rt.group.is_empty() && (rt.plural == "configmaps" || rt.plural == "secrets")
}

fn cells(rt: &ResourceType, obj: &Value) -> Vec<Value> {
    let meta = &obj["metadata"];
    let mut out = vec![meta["name"].clone()];
    if has_data_column(rt) {
        let count = |f: &str| obj[f].as_object().map(|m| m.len()).unwrap_or(0);
        out.push(json!(count("data") + count("binaryData")));
    }
    let age = meta["creationTimestamp"]
        .as_str()
        .and_then(parse_time)
        .map(|t| fmt_age(now_secs() - t))
        .unwrap_or_else(|| "<unknown>".into());
    out.push(json!(age));
    out
}

fn row_object(obj: &Value, include: &str) -> Option<Value> {
    match include {
        "None" => None,
        "Object" => Some(obj.clone()),
        _ => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"].clone(),
        })),
    }
}

/// A Table for `objs`; `include` is the includeObject parameter.
pub fn table(rt: &ResourceType, objs: &[Value], list_meta: Value, include: &str) -> Value {
    let mut columns = vec![column(
        "Name",
        "name",
        "Name must be unique within a namespace.",
    )];
    if has_data_column(rt) {
        columns.push(column("Data", "", "Number of data entries."));
    }
    columns.push(column("Age", "", "Time since the object was created."));
    let rows: Vec<Value> = objs
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(rt, o)});
            if let Some(obj) = row_object(o, include) {
                row["object"] = obj;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}
