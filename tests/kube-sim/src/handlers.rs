//! Handlers for resource requests: list (selectors, paging, consistent
//! continue tokens), get, create, update (PUT), patch (merge, JSON patch,
//! approximate strategic merge, server-side apply), delete and
//! deletecollection, on the main resource and the `status` / `scale`
//! subresources. The router has already resolved the resource; each handler
//! takes the store lock once so read-modify-write is atomic.

use crate::admission;
use crate::admitted;
use crate::http::{Request, Response};
use crate::registry::ResourceType;
use crate::scale::{from_scale, to_scale};
use crate::selector::{FieldSelector, Filter, LabelSelector};
use crate::server::Shared;
use crate::status::{self, ApiError};
use crate::store::{Deleted, WriteMode, parse_rv};
use crate::table;
use crate::watch::{Start, WatchPlan, present};
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

/// A resolved resource URL.
#[derive(Debug, Clone)]
pub struct Target {
    pub rt: ResourceType,
    pub version: String,
    pub ns: String,
    pub name: Option<String>,
    pub sub: Option<String>,
}

type Reply = Result<Response, ApiError>;

fn ok(code: u16, v: &Value) -> Reply {
    Ok(Response::json(code, v))
}

pub fn dry_run(req: &Request) -> bool {
    req.param("dryRun").is_some_and(|v| v == "All")
}

/// Namespace + selectors of a list/watch request.
pub fn filter(req: &Request, t: &Target) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(req.param("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(req.param("fieldSelector").unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    fields
        .check_supported(&t.rt)
        .map_err(ApiError::bad_request)?;
    let namespace = (!t.ns.is_empty()).then(|| t.ns.clone());
    Ok(Filter {
        namespace,
        labels,
        fields,
    })
}

/// Decodes a create/update body: JSON, YAML or Kubernetes protobuf.
pub fn decode_body(req: &Request) -> Result<Value, ApiError> {
    if req.body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    let ct = req
        .header("content-type")
        .unwrap_or("application/json")
        .to_ascii_lowercase();
    if crate::protobuf::is_protobuf(&req.body) || ct.contains("protobuf") {
        return crate::protobuf::decode(&req.body)
            .map_err(|e| ApiError::new(415, "UnsupportedMediaType", e));
    }
    if ct.contains("yaml") {
        return serde_yaml::from_slice(&req.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")));
    }
    serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding JSON body: {e}")))
}

/// What a continue token carries: the snapshot RV and the last (namespace, name) sent.
#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

fn encode_continue(rv: u64, after: &Value) -> String {
    let (ns, name) = obj_key(after);
    let raw = serde_json::to_vec(&ContinueToken { rv, ns, name }).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(tok: &str) -> Result<ContinueToken, ApiError> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .map_err(|_| ApiError::bad_request("continue key is not valid: illegal base64 data"))?;
    serde_json::from_slice(&raw).map_err(|_| ApiError::bad_request("continue key is not valid"))
}

/// (namespace, name): the order the store keeps objects in.
fn obj_key(o: &Value) -> (String, String) {
    let m = &o["metadata"];
    let s = |f: &str| m[f].as_str().unwrap_or("").to_string();
    (s("namespace"), s("name"))
}

/// GET on a collection.
pub fn list(shared: &Shared, req: &Request, t: &Target) -> Reply {
    crate::listopts::validate(req, false)?;
    if let Some(rv) = req.param("resourceVersion").filter(|rv| !rv.is_empty()) {
        parse_rv(rv)?;
    }
    let f = filter(req, t)?;
    let limit = req
        .param("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(0);
    let (rv, items, remaining) = {
        let st = shared.store();
        let exact = match (
            req.param("resourceVersionMatch"),
            req.param("resourceVersion"),
        ) {
            (Some("Exact"), Some(rv)) => Some(parse_rv(rv)?),
            _ => None,
        };
        match (req.param("continue").filter(|c| !c.is_empty()), exact) {
            (Some(tok), _) => {
                let c = decode_continue(tok)?;
                let after = Some((c.ns.as_str(), c.name.as_str()));
                let (items, more) = st.list_page(&t.rt, c.rv, after, |o| f.matches(o), limit)?;
                (c.rv, items, more)
            }
            (None, Some(rv)) => {
                let (items, more) = st.list_page(&t.rt, rv, None, |o| f.matches(o), limit)?;
                (rv, items, more)
            }
            (None, None) => {
                let (items, more) = st.list_page(&t.rt, st.rv(), None, |o| f.matches(o), limit)?;
                (st.rv(), items, more)
            }
        }
    };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if remaining > 0 {
        if let Some(last) = items.last() {
            meta["continue"] = json!(encode_continue(rv, last));
        }
        // As from kube-apiserver: the count is only known without selectors.
        if f.labels.is_empty() && f.fields.is_empty() {
            meta["remainingItemCount"] = json!(remaining);
        }
    }
    let items = crate::conversion::list_to_version(shared, &t.rt, &t.version, items)?;
    if table::wants_table(req) {
        return ok(
            200,
            &table::table(
                &t.rt,
                &items,
                meta,
                req.param("includeObject").unwrap_or("Metadata"),
            ),
        );
    }
    // Like kube-apiserver, items of a built-in kind's list carry no apiVersion and
    // kind (the list says them once); custom resources' items keep theirs.
    let items: Vec<Value> = if t.rt.crd {
        items
    } else {
        items.into_iter().map(without_type_meta).collect()
    };
    ok(
        200,
        &json!({
            "kind": t.rt.list_kind,
            "apiVersion": t.rt.api_version(&t.version),
            "metadata": meta,
            "items": items,
        }),
    )
}

fn without_type_meta(mut obj: Value) -> Value {
    if let Some(map) = obj.as_object_mut() {
        map.remove("apiVersion");
        map.remove("kind");
    }
    obj
}

/// The watch request's plan (validated before streaming starts).
pub fn watch_plan(req: &Request, t: &Target) -> Result<WatchPlan, ApiError> {
    crate::listopts::validate(req, true)?;
    let rv = match req.param("resourceVersion") {
        None | Some("") | Some("0") => None,
        // a watch words a bad resourceVersion as a 500 with no reason (measured)
        Some(rv) => Some(parse_rv(rv).map_err(|e| {
            let msg = e.message.trim_start_matches("invalid resource version: ");
            ApiError::new(500, "", msg.to_string())
        })?),
    };
    let start = match (req.param("sendInitialEvents"), rv) {
        (Some(_), _) if req.flag("sendInitialEvents") => Start::InitialEvents,
        (_, Some(rv)) => Start::After(rv),
        (Some(_), None) => Start::Now,
        (None, None) => Start::State,
    };
    let secs = req
        .param("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(1800);
    Ok(WatchPlan {
        rt: t.rt.clone(),
        version: t.version.clone(),
        filter: filter(req, t)?,
        start,
        bookmarks: req.flag("allowWatchBookmarks"),
        timeout: Duration::from_secs(secs.max(1)),
        table: table::wants_table(req)
            .then(|| req.param("includeObject").unwrap_or("Metadata").to_string()),
    })
}

/// GET on one object (or its status / scale).
pub fn get(shared: &Shared, req: &Request, t: &Target, name: &str) -> Reply {
    let obj = shared.store().get(&t.rt, &t.ns, name)?;
    if t.sub.as_deref() == Some("scale") {
        return ok(200, &to_scale(&t.rt, &obj)?);
    }
    let obj = crate::conversion::to_version(shared, &t.rt, &t.version, obj)?;
    if table::wants_table(req) {
        let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"].clone()});
        return ok(
            200,
            &table::table(
                &t.rt,
                &[obj],
                meta,
                req.param("includeObject").unwrap_or("Metadata"),
            ),
        );
    }
    ok(200, &obj)
}

/// POST on a collection.
pub fn create(shared: &Shared, req: &Request, t: &Target) -> Reply {
    let body = decode_body(req)?;
    crate::typing::check_body(&t.rt, &t.version, &body)?;
    if admission::any_configured(shared, &t.rt) {
        return admitted::save(shared, req, t, None, body);
    }
    let body = crate::conversion::for_storage(shared, &t.rt, body)?;
    let created = shared
        .store()
        .create(&t.rt, &t.ns, body, WriteMode::Main, dry_run(req))?;
    ok(201, &presented(shared, t, created)?)
}

/// The object in the client's version (through the conversion webhook if needed).
fn presented(shared: &Shared, t: &Target, obj: Value) -> Result<Value, ApiError> {
    crate::conversion::to_version(shared, &t.rt, &t.version, obj)
}

pub fn mode(t: &Target) -> WriteMode {
    if t.sub.as_deref() == Some("status") {
        WriteMode::Status
    } else {
        WriteMode::Main
    }
}

/// PUT on an object (or its status / scale).
pub fn update(shared: &Shared, req: &Request, t: &Target, name: &str) -> Reply {
    let body = decode_body(req)?;
    if t.sub.as_deref() != Some("scale") {
        crate::typing::check_body(&t.rt, &t.version, &body)?;
    }
    if admission::any_configured(shared, &t.rt) {
        let old = shared.store().get(&t.rt, &t.ns, name)?;
        if t.sub.as_deref() == Some("scale") {
            return admitted::scale(shared, req, t, old, body);
        }
        return admitted::save(shared, req, t, Some(old), body);
    }
    let body = if t.sub.is_none() {
        crate::conversion::for_storage(shared, &t.rt, body)?
    } else {
        body
    };
    let mut st = shared.store();
    let new = if t.sub.as_deref() == Some("scale") {
        let cur = st.get(&t.rt, &t.ns, name)?;
        let rv = body["metadata"]["resourceVersion"].as_str().unwrap_or("");
        if !rv.is_empty() && Some(rv) != cur["metadata"]["resourceVersion"].as_str() {
            return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, name));
        }
        let updated = from_scale(&t.rt, cur, &body)?;
        let saved = st.update(&t.rt, &t.ns, name, updated, WriteMode::Whole, dry_run(req))?;
        return ok(200, &to_scale(&t.rt, &saved)?);
    } else {
        st.update(&t.rt, &t.ns, name, body, mode(t), dry_run(req))?
    };
    drop(st);
    ok(200, &presented(shared, t, new)?)
}

/// Whether a patch goes the admitted way: webhooks are configured, or the
/// object converts through a webhook (the patch applies to the client's version).
fn admitted_path(shared: &Shared, t: &Target) -> bool {
    admission::any_configured(shared, &t.rt) || crate::conversion::uses_webhook(shared, &t.rt)
}

/// PATCH on an object (or its status / scale).
pub fn patch(shared: &Shared, req: &Request, t: &Target, name: &str) -> Reply {
    let ct = req
        .header("content-type")
        .unwrap_or("")
        .to_ascii_lowercase();
    if ct.starts_with("application/apply-patch") && t.sub.is_none() {
        return server_side_apply(shared, req, t, name);
    }
    if t.sub.as_deref() != Some("scale") && admitted_path(shared, t) {
        let current = shared.store().get(&t.rt, &t.ns, name)?;
        let at = presented(shared, t, current.clone())?;
        let patched = crate::patch::apply(&ct, &at, &req.body)?;
        crate::typing::check_patched(&t.rt, &patched)?;
        return admitted::save(shared, req, t, Some(current), patched);
    }
    if t.sub.as_deref() == Some("scale") && admission::any_configured(shared, &t.rt) {
        let current = shared.store().get(&t.rt, &t.ns, name)?;
        let scale = crate::patch::apply(&ct, &to_scale(&t.rt, &current)?, &req.body)?;
        return admitted::scale(shared, req, t, current, scale);
    }
    let mut st = shared.store();
    let current = st.get(&t.rt, &t.ns, name)?;
    if t.sub.as_deref() == Some("scale") {
        let scale = crate::patch::apply(&ct, &to_scale(&t.rt, &current)?, &req.body)?;
        let updated = from_scale(&t.rt, current, &scale)?;
        let saved = st.update(&t.rt, &t.ns, name, updated, WriteMode::Whole, dry_run(req))?;
        return ok(200, &to_scale(&t.rt, &saved)?);
    }
    let patched = crate::patch::apply(&ct, &current, &req.body)?;
    crate::typing::check_patched(&t.rt, &patched)?;
    let saved = st.update(&t.rt, &t.ns, name, patched, mode(t), dry_run(req))?;
    drop(st);
    ok(200, &presented(shared, t, saved)?)
}

/// `application/apply-patch+yaml`: create when absent, else merge, removing
/// what this field manager applied before and no longer applies.
fn server_side_apply(shared: &Shared, req: &Request, t: &Target, name: &str) -> Reply {
    let manager = req.param("fieldManager").unwrap_or("");
    if manager.is_empty() {
        let mut e = ApiError::invalid(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        );
        e.details = Some(json!({"group": "meta.k8s.io", "kind": "PatchOptions"}));
        return Err(e.with_causes(&[(
            "FieldValueRequired",
            "Required value: is required for apply patch".into(),
            "fieldManager",
        )]));
    }
    let mut body = crate::patch::parse_apply(&req.body)?;
    body["metadata"]["name"] = json!(name);
    crate::typing::check_applied(&t.rt, &t.version, &body)?;
    if admitted_path(shared, t) {
        return admitted::apply(shared, req, t, name, manager, body);
    }
    let dry = dry_run(req);
    let mut st = shared.store();
    let (code, saved) = match st.get(&t.rt, &t.ns, name) {
        Ok(current) => {
            let prev = st.last_applied(&t.rt, &t.ns, name, manager);
            let merged = crate::patch::apply_config(&current, prev.as_ref(), &body);
            (
                200,
                st.update(&t.rt, &t.ns, name, merged, WriteMode::Main, dry)?,
            )
        }
        Err(e) if e.code == 404 => (
            201,
            st.create(&t.rt, &t.ns, body.clone(), WriteMode::Main, dry)?,
        ),
        Err(e) => return Err(e),
    };
    if !dry {
        st.record_applied(&t.rt, &saved, manager, body);
    }
    drop(st);
    ok(code, &presented(shared, t, saved)?)
}

/// DeleteOptions from the body (JSON or protobuf) and query.
pub fn delete_options(req: &Request) -> Result<Value, ApiError> {
    if req.body.is_empty() {
        return Ok(json!({}));
    }
    decode_body(req)
}

/// DELETE on an object.
pub fn delete(shared: &Shared, req: &Request, t: &Target, name: &str) -> Reply {
    let opts = delete_options(req)?;
    let pre = &opts["preconditions"];
    let dry = dry_run(req)
        || opts["dryRun"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    let mut warnings = Vec::new();
    if admission::any_configured(shared, &t.rt) {
        admitted::before_delete(shared, req, t, name, &opts, &mut warnings)?;
    }
    let res = shared.store().delete(
        &t.rt,
        &t.ns,
        name,
        pre["uid"].as_str(),
        pre["resourceVersion"].as_str(),
        dry,
    )?;
    let resp = match res {
        Deleted::Marked(obj) => ok(202, &present(&t.rt, &t.version, obj)),
        Deleted::Gone(obj) if t.rt.plural == "pods" => ok(200, &present(&t.rt, &t.version, obj)),
        Deleted::Gone(obj) => ok(
            200,
            &status::success(&t.rt.group, &t.rt.plural, name, &obj["metadata"]["uid"]),
        ),
    }?;
    Ok(admitted::with_warnings(resp, &warnings))
}

/// DELETE on a collection: deletes every object the selectors match.
pub fn delete_collection(shared: &Shared, req: &Request, t: &Target) -> Reply {
    let f = filter(req, t)?;
    if admission::any_configured(shared, &t.rt) {
        return admitted::delete_each(shared, req, t, &f);
    }
    let mut st = shared.store();
    let names: Vec<(String, String)> = st
        .list(&t.rt)
        .into_iter()
        .filter(|o| f.matches(o))
        .map(|o| {
            (
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                o["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (ns, name) in names {
        st.delete(&t.rt, &ns, &name, None, None, dry_run(req))?;
    }
    ok(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}),
    )
}
