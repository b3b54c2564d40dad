//! URL routing: maps a request path to discovery, OpenAPI (v2 and v3), health or a
//! resource handler, resolving `/api/v1/...` and `/apis/<g>/<v>/...` paths
//! (namespaced or cluster-scoped, with an optional name and subresource, and the
//! legacy `/watch/` prefix) against the live registry.

use crate::discovery;
use crate::handlers::{self, Target};
use crate::http::{Request, Response};
use crate::openapi;
use crate::server::Shared;
use crate::status::ApiError;
use crate::watch::WatchPlan;
use std::sync::atomic::Ordering;

/// What the connection loop should do with a request.
pub enum Reply {
    /// Send this response.
    Full(Response),
    /// Hand the connection to a watch stream.
    Watch(Box<WatchPlan>),
}

fn json(v: serde_json::Value) -> Reply {
    Reply::Full(Response::json(200, &v))
}

fn error(e: ApiError) -> Reply {
    let mut resp = Response::json(e.code, &e.to_status());
    resp.headers
        .extend(crate::admission::warning_headers(&e.warnings));
    Reply::Full(resp)
}

fn not_found() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

fn found(v: Option<serde_json::Value>) -> Reply {
    v.map(json).unwrap_or_else(|| error(not_found()))
}

/// Routes one request.
pub fn route(shared: &Shared, req: &Request) -> Reply {
    let segs: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let host = shared
        .url
        .split("://")
        .nth(1)
        .unwrap_or("127.0.0.1")
        .to_string();
    if req.method != "GET" && !matches!(segs.first(), Some(&"api") | Some(&"apis")) {
        return error(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    match segs.as_slice() {
        ["version"] => json(discovery::version()),
        ["healthz"] | ["livez"] | ["readyz"] => Reply::Full(Response {
            code: 200,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: b"ok".to_vec(),
        }),
        ["api"] => json(discovery::api_versions(&host)),
        ["apis"] => json(discovery::api_groups(&shared.store().registry)),
        ["api", v] => found(discovery::resource_list(&shared.store().registry, "", v)),
        ["apis", g] => found(discovery::api_group(&shared.store().registry, g)),
        ["apis", g, v] => found(discovery::resource_list(&shared.store().registry, g, v)),
        ["openapi", "v2"] => openapi_v2(shared, req),
        ["openapi", "v3"] => json(openapi::v3_root(&shared.store().registry)),
        ["openapi", "v3", tail @ ..] => found(openapi::v3_for_path(&shared.store().registry, tail)),
        ["api", v, rest @ ..] => resource(shared, req, "", v, rest),
        ["apis", g, v, rest @ ..] => resource(shared, req, g, v, rest),
        _ => error(not_found()),
    }
}

/// `/openapi/v2`: protobuf when the Accept header asks for it (client-go does), else JSON.
fn openapi_v2(shared: &Shared, req: &Request) -> Reply {
    let wants_pb = req.header("accept").is_some_and(|a| a.contains("protobuf"));
    let reg = &shared.store().registry;
    if wants_pb {
        Reply::Full(Response {
            code: 200,
            headers: vec![("Content-Type".into(), openapi::V2_PROTOBUF.into())],
            body: openapi::v2_protobuf(reg),
        })
    } else {
        json(openapi::v2_json(reg))
    }
}

/// Resolves the resource part of a path into a `Target`.
fn resolve(shared: &Shared, group: &str, version: &str, rest: &[&str]) -> Result<Target, ApiError> {
    let st = shared.store();
    let reg = &st.registry;
    let namespaced_plural = |p: &str| reg.by_path(group, version, p).is_some_and(|t| t.namespaced);
    let (ns, parts) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural) => (ns.to_string(), {
            let mut v = vec![*plural];
            v.extend_from_slice(tail);
            v
        }),
        _ => (String::new(), rest.to_vec()),
    };
    let (plural, name, sub) = match parts.as_slice() {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(not_found()),
    };
    let rt = reg
        .by_path(group, version, plural)
        .ok_or_else(not_found)?
        .clone();
    if let Some(s) = &sub {
        let ok = (s == "status" && rt.status) || (s == "scale" && rt.scale.is_some());
        if !ok {
            return Err(not_found());
        }
    }
    Ok(Target {
        rt,
        version: version.to_string(),
        ns,
        name,
        sub,
    })
}

/// Whether discovery lists the verb this method means on this target.
fn verb_allowed(t: &Target, method: &str, watching: bool) -> bool {
    let named = t.name.is_some();
    let verb = match (method, named, watching) {
        ("GET", _, true) => "watch",
        ("GET", true, _) => "get",
        ("GET", false, _) => "list",
        ("POST", false, _) => "create",
        ("PUT", true, _) => "update",
        ("PATCH", true, _) => "patch",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        _ => return false,
    };
    match t.sub {
        Some(_) => matches!(verb, "get" | "update" | "patch"),
        None => t.rt.verbs.iter().any(|v| v == verb),
    }
}

/// Dispatches a resource request by method.
fn resource(shared: &Shared, req: &Request, group: &str, version: &str, rest: &[&str]) -> Reply {
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let t = match resolve(shared, group, version, rest) {
        Ok(t) => t,
        Err(e) => return error(e),
    };
    let watching = legacy_watch || req.flag("watch");
    if watching
        && shared.no_watch_list.load(Ordering::SeqCst)
        && req.param("sendInitialEvents").is_some()
    {
        // A server with its WatchList feature off (1.33's default, or before 1.27).
        return error(ApiError::invalid(
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".to_string(),
        ));
    }
    if !verb_allowed(&t, &req.method, watching) {
        return error(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    let result = match (req.method.as_str(), t.name.clone()) {
        ("GET", None) if legacy_watch || req.flag("watch") => {
            return match handlers::watch_plan(req, &t) {
                Ok(plan) => Reply::Watch(Box::new(plan)),
                Err(e) => error(e),
            };
        }
        ("GET", Some(n)) if legacy_watch || req.flag("watch") => {
            let mut t = t;
            t.name = None;
            let mut r = req.clone();
            r.query
                .push(("fieldSelector".into(), format!("metadata.name={n}")));
            return match handlers::watch_plan(&r, &t) {
                Ok(plan) => Reply::Watch(Box::new(plan)),
                Err(e) => error(e),
            };
        }
        ("GET", None) => handlers::list(shared, req, &t),
        ("GET", Some(n)) => handlers::get(shared, req, &t, &n),
        ("POST", None) => handlers::create(shared, req, &t),
        ("PUT", Some(n)) => handlers::update(shared, req, &t, &n),
        ("PATCH", Some(n)) => handlers::patch(shared, req, &t, &n),
        ("DELETE", Some(n)) => handlers::delete(shared, req, &t, &n),
        ("DELETE", None) => handlers::delete_collection(shared, req, &t),
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{} is not supported on this resource path", req.method),
        )),
    };
    match result {
        Ok(r) => Reply::Full(r),
        Err(e) => error(e),
    }
}
