//! The write path when webhook configurations are stored: the handlers hand
//! the candidate object (in the client's version) here, which runs the
//! mutating webhooks, converts to the storage version, prepares the write
//! as a dry run to get the object as it would be stored, runs the validating
//! webhooks on that, and only then writes. No store lock is held while a
//! webhook is called; an update is written with the resourceVersion it was
//! admitted against, so a concurrent change is a 409 rather than lost.

use crate::admission::{self, Attrs, Warnings};
use crate::conversion;
use crate::handlers::{Target, delete_options, dry_run, mode};
use crate::http::{Request, Response};
use crate::scale::{from_scale, to_scale};
use crate::selector::Filter;
use crate::server::Shared;
use crate::status::ApiError;
use serde_json::{Value, json};

type Reply = Result<Response, ApiError>;

fn options(req: &Request, kind: &str) -> Value {
    let mut o = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    for k in ["fieldManager", "fieldValidation"] {
        if let Some(v) = req.param(k) {
            o[k] = json!(v);
        }
    }
    if req.param("force").is_some() {
        o["force"] = json!(req.flag("force"));
    }
    if dry_run(req) {
        o["dryRun"] = json!(["All"]);
    }
    o
}

fn attrs(req: &Request, t: &Target, operation: &'static str, name: &str, options: Value) -> Attrs {
    Attrs {
        operation,
        rt: t.rt.clone(),
        version: t.version.clone(),
        sub: t.sub.clone(),
        ns: t.ns.clone(),
        name: name.to_string(),
        dry_run: dry_run(req),
        options,
    }
}

/// Adds `Warning` headers.
pub fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    resp.headers.extend(admission::warning_headers(warnings));
    resp
}

/// Create (`old` None) or update of `new` through admission.
pub fn save(shared: &Shared, req: &Request, t: &Target, old: Option<Value>, new: Value) -> Reply {
    let (operation, opts) = match (&old, req.method.as_str()) {
        (None, _) => ("CREATE", options(req, "CreateOptions")),
        (Some(_), "PATCH") => ("UPDATE", options(req, "PatchOptions")),
        (Some(_), _) => ("UPDATE", options(req, "UpdateOptions")),
    };
    let name = match &old {
        Some(o) => o["metadata"]["name"].as_str().unwrap_or(""),
        None => new["metadata"]["name"].as_str().unwrap_or(""),
    }
    .to_string();
    let a = attrs(req, t, operation, &name, opts);
    let code = if old.is_some() { 200 } else { 201 };
    let (saved, warnings) = admit_and_write(shared, &a, t, old, new)?;
    let body = conversion::to_version(shared, &t.rt, &t.version, saved)?;
    Ok(with_warnings(Response::json(code, &body), &warnings))
}

fn admit_and_write(
    shared: &Shared,
    a: &Attrs,
    t: &Target,
    old: Option<Value>,
    new: Value,
) -> Result<(Value, Warnings), ApiError> {
    let mut warnings = Vec::new();
    // Objects go to each webhook converted to its version (`admission`), so
    // none is converted here unless a webhook is called.
    let new = admission::mutate(shared, a, new, old.as_ref(), &mut warnings)?;
    let mut new = conversion::for_storage(shared, &t.rt, new)?;
    if let Some(o) = &old {
        if new["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .is_empty()
        {
            new["metadata"]["resourceVersion"] = o["metadata"]["resourceVersion"].clone();
        }
    }
    let prepared = write(shared, t, old.is_some(), &a.name, new.clone(), true)?;
    admission::validate(shared, a, Some(&prepared), old.as_ref(), &mut warnings)?;
    let saved = match (a.dry_run, old.is_some()) {
        (true, _) => prepared,
        (false, true) => write(shared, t, true, &a.name, new, false)?,
        (false, false) => shared.store().create_prepared(&t.rt, prepared)?,
    };
    Ok((saved, warnings))
}

fn write(
    shared: &Shared,
    t: &Target,
    update: bool,
    name: &str,
    obj: Value,
    dry: bool,
) -> Result<Value, ApiError> {
    let mut st = shared.store();
    if update {
        st.update(&t.rt, &t.ns, name, obj, mode(t), dry)
    } else {
        st.create(&t.rt, &t.ns, obj, mode(t), dry)
    }
}

/// Server-side apply through admission: the merged object (or the applied one
/// when the object is new) is admitted, then the configuration is recorded.
pub fn apply(
    shared: &Shared,
    req: &Request,
    t: &Target,
    name: &str,
    manager: &str,
    body: Value,
) -> Reply {
    let (old, candidate) = {
        let st = shared.store();
        match st.get(&t.rt, &t.ns, name) {
            Ok(current) => {
                let prev = st.last_applied(&t.rt, &t.ns, name, manager);
                let merged = crate::patch::apply_config(&current, prev.as_ref(), &body);
                (Some(current), merged)
            }
            Err(e) if e.code == 404 => (None, body.clone()),
            Err(e) => return Err(e),
        }
    };
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    let a = attrs(req, t, operation, name, options(req, "PatchOptions"));
    let code = if old.is_some() { 200 } else { 201 };
    let (saved, warnings) = admit_and_write(shared, &a, t, old, candidate)?;
    if !a.dry_run {
        shared.store().record_applied(&t.rt, &saved, manager, body);
    }
    let out = conversion::to_version(shared, &t.rt, &t.version, saved)?;
    Ok(with_warnings(Response::json(code, &out), &warnings))
}

/// DELETE: the webhooks see the stored object as `oldObject`; a denial stops the delete.
pub fn before_delete(
    shared: &Shared,
    req: &Request,
    t: &Target,
    name: &str,
    opts: &Value,
    warnings: &mut Warnings,
) -> Result<(), ApiError> {
    let old = shared.store().get(&t.rt, &t.ns, name)?;
    let mut o = delete_options(req).unwrap_or_else(|_| opts.clone());
    o["kind"] = json!("DeleteOptions");
    o["apiVersion"] = json!("meta.k8s.io/v1");
    let mut a = attrs(req, t, "DELETE", name, o);
    a.dry_run = a.dry_run
        || opts["dryRun"]
            .as_array()
            .is_some_and(|d| d.iter().any(|v| v == "All"));
    admission::on_delete(shared, &a, &old, warnings)
}

/// DELETE on a collection with webhooks configured: each object is admitted
/// (operation DELETE, as kube-apiserver does per item), then deleted; objects
/// gone meanwhile are skipped.
pub fn delete_each(shared: &Shared, req: &Request, t: &Target, f: &Filter) -> Reply {
    let items: Vec<(String, String)> = shared
        .store()
        .list(&t.rt)
        .into_iter()
        .filter(|o| f.matches(o))
        .map(|o| {
            let m = &o["metadata"];
            let s = |k: &str| m[k].as_str().unwrap_or("").to_string();
            (s("namespace"), s("name"))
        })
        .collect();
    let mut warnings = Vec::new();
    for (ns, name) in items {
        let one = Target {
            ns: ns.clone(),
            ..t.clone()
        };
        match before_delete(shared, req, &one, &name, &json!({}), &mut warnings) {
            Err(e) if e.code == 404 => continue,
            other => other?,
        }
        match shared
            .store()
            .delete(&t.rt, &ns, &name, None, None, dry_run(req))
        {
            Err(e) if e.code == 404 => {}
            other => {
                other?;
            }
        }
    }
    let ok = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    Ok(with_warnings(Response::json(200, &ok), &warnings))
}

/// PUT or PATCH of the `scale` subresource: the webhooks see autoscaling/v1
/// Scale objects (new and old); the admitted replicas are written back.
pub fn scale(
    shared: &Shared,
    req: &Request,
    t: &Target,
    current: Value,
    new_scale: Value,
) -> Reply {
    let rv = new_scale["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("");
    let current_rv = current["metadata"]["resourceVersion"].clone();
    let name = current["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    if !rv.is_empty() && current_rv != rv {
        return Err(ApiError::conflict(&t.rt.group, &t.rt.plural, &name));
    }
    let kind = if req.method == "PATCH" {
        "PatchOptions"
    } else {
        "UpdateOptions"
    };
    let a = attrs(req, t, "UPDATE", &name, options(req, kind));
    let old_scale = to_scale(&t.rt, &current)?;
    let mut warnings = Vec::new();
    let new_scale = admission::mutate(shared, &a, new_scale, Some(&old_scale), &mut warnings)?;
    let mut updated = from_scale(&t.rt, current, &new_scale)?;
    updated["metadata"]["resourceVersion"] = current_rv;
    let write = |dry: bool| {
        shared.store().update(
            &t.rt,
            &t.ns,
            &name,
            updated.clone(),
            crate::store::WriteMode::Whole,
            dry,
        )
    };
    let prepared = to_scale(&t.rt, &write(true)?)?;
    admission::validate(shared, &a, Some(&prepared), Some(&old_scale), &mut warnings)?;
    let saved = if a.dry_run {
        prepared
    } else {
        to_scale(&t.rt, &write(false)?)?
    };
    Ok(with_warnings(Response::json(200, &saved), &warnings))
}
