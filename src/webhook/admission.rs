//! Validating and mutating admission: routes a request path to its binding,
//! runs the hook with a `Validating`/`Mutating` binding context, reads its
//! response file and answers an AdmissionReview with the request's uid. Any
//! problem (no response, a bad one, a failing or slow hook) is a denial with a
//! message saying what went wrong, and a log line naming the hook; the server
//! never crashes. Called on the admission server's handler threads.

use super::metrics::WebhookMetrics;
use super::names::{CONFIGURATION_ID, safe_url_string, split_path};
use super::response::{self, AdmissionAnswer};
use super::run::HookRunner;
use super::server::{Handler, Reply};
use crate::hook::Hook;
use crate::hook::config::AdmissionBinding;
use crate::hook::context::{BindingContext, BindingType, Payload};
use crate::log;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where a webhook id leads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Route {
    pub(crate) hook: usize,
    pub(crate) binding: usize,
    pub(crate) mutating: bool,
}

/// The routing table: webhook id (`SafeURLString(binding name)`) → binding.
/// Two bindings with the same id are a startup error naming both (flant lets the
/// last one silently win).
pub fn routes(hooks: &[Hook]) -> Result<BTreeMap<String, Route>, String> {
    let mut table: BTreeMap<String, (Route, String)> = BTreeMap::new();
    for (hi, h) in hooks.iter().enumerate() {
        let all = h.config.validating.iter().map(|b| (b, false));
        let all = all.chain(h.config.mutating.iter().map(|b| (b, true)));
        let mut counts = (0, 0);
        for (b, mutating) in all {
            let bi = if mutating {
                &mut counts.1
            } else {
                &mut counts.0
            };
            let route = Route {
                hook: hi,
                binding: *bi,
                mutating,
            };
            *bi += 1;
            let who = format!("hook '{}' binding '{}'", h.name, b.name);
            let id = safe_url_string(&b.name);
            if let Some((_, other)) = table.get(&id) {
                return Err(format!(
                    "webhook path /{CONFIGURATION_ID}/{id} is used by {other} and by {who}; rename one binding"
                ));
            }
            table.insert(id, (route, who));
        }
    }
    Ok(table.into_iter().map(|(k, (r, _))| (k, r)).collect())
}

/// An admission binding the operator answers itself instead of running a hook
/// process (addon-operator's validation of its ModuleSettings objects). Called on
/// the admission server's handler threads with the review's `request`.
pub trait BuiltinAdmission: Send + Sync {
    /// `Ok`: allowed; `Err`: denied with this message.
    fn review(&self, request: &Value) -> Result<(), String>;
}

/// Builtin answers by hook index.
pub type Builtins = BTreeMap<usize, Arc<dyn BuiltinAdmission>>;

/// The admission handler.
pub struct Admission {
    pub routes: BTreeMap<String, Route>,
    pub runner: Arc<HookRunner>,
    pub metrics: Arc<WebhookMetrics>,
    /// Hooks whose bindings the operator answers itself.
    pub builtins: Builtins,
}

impl Handler for Admission {
    fn handle(&self, path: &str, body: &[u8]) -> Reply {
        let started = Instant::now();
        let (reply, binding, result) = self.answer(path, body);
        self.metrics
            .observe("admission", &binding, result, started.elapsed());
        reply
    }
}

/// A denial: HTTP status inside the AdmissionResponse and its message.
pub(crate) struct Denial {
    code: u16,
    message: String,
}

impl Admission {
    /// The reply, the binding name (for metrics) and the result label.
    fn answer(&self, path: &str, body: &[u8]) -> (Reply, String, &'static str) {
        let review: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(_) => {
                return (
                    Reply::text(400, "Invalid JSON payload"),
                    String::new(),
                    "bad_request",
                );
            }
        };
        if !review.get("request").is_some_and(Value::is_object) {
            let reply = Reply::text(400, "Missing parameters: request");
            return (reply, String::new(), "bad_request");
        }
        if !super::names::has_uid(&review["request"]) {
            let reply = Reply::text(400, "Missing parameters: request.uid");
            return (reply, String::new(), "bad_request");
        }
        let (conf, id) = split_path(path);
        let found = (conf == CONFIGURATION_ID)
            .then(|| self.routes.get(&id))
            .flatten()
            .and_then(|r| Some((*r, self.binding(r)?)));
        let Some((route, binding)) = found else {
            let msg = format!("no hook found for '{conf}' '{id}'");
            return (Reply::text(404, &msg), String::new(), "not_found");
        };
        let outcome = self.run(route, binding, &review);
        let result = match &outcome {
            Ok(a) if a.allowed => "allowed",
            Ok(_) => "denied",
            Err(_) => "error",
        };
        let reply = Reply::json(admission_review(&review, outcome).to_string().into_bytes());
        (reply, binding.name.clone(), result)
    }

    fn binding(&self, r: &Route) -> Option<&AdmissionBinding> {
        let c = &self.runner.hooks.get(r.hook)?.config;
        if r.mutating {
            c.mutating.get(r.binding)
        } else {
            c.validating.get(r.binding)
        }
    }

    /// Runs the hook and reads its answer; `Err` when there is no usable answer.
    fn run(
        &self,
        route: Route,
        b: &AdmissionBinding,
        review: &Value,
    ) -> Result<AdmissionAnswer, Denial> {
        if let Some(builtin) = self.builtins.get(&route.hook) {
            let verdict = builtin.review(&review["request"]);
            return Ok(AdmissionAnswer {
                allowed: verdict.is_ok(),
                message: verdict.err().unwrap_or_default(),
                ..Default::default()
            });
        }
        let hook_name = self
            .runner
            .hooks
            .get(route.hook)
            .map(|h| h.name.as_str())
            .unwrap_or("?");
        let (binding_type, payload) = context_payload(route.mutating, review);
        let mut snapshot_names = b.include_snapshots_from.clone();
        snapshot_names.dedup();
        let ctx = BindingContext {
            binding: b.name.clone(),
            binding_type,
            group: b.group.clone(),
            snapshot_names,
            kube_binding: None,
            payload,
        };
        let budget = Duration::from_secs(b.timeout_seconds.clamp(1, 30) as u64);
        let fail = |code: u16, what: String| {
            log::error(
                "admission webhook hook failed; the request is denied",
                &[("hook", hook_name), ("binding", &b.name), ("error", &what)],
            );
            Denial {
                code,
                message: format!("hook '{hook_name}' (binding '{}') {what}", b.name),
            }
        };
        let run = self
            .runner
            .run(route.hook, ctx, budget)
            .map_err(|e| fail(500, format!("failed: {e}")))?;
        if !run.success() {
            if !run.stderr.trim().is_empty() {
                log::error(
                    "hook stderr",
                    &[("hook", hook_name), ("stderr", run.stderr.trim())],
                );
            }
            return Err(fail(500, format!("failed: {}", run.status)));
        }
        let mut answer = response::admission(&run.validating_response)
            .map_err(|e| fail(500, format!("wrote no usable response: {e}")))?;
        if !route.mutating && answer.patch.take().is_some() {
            log::warn(
                "a validating hook returned a patch; it is ignored",
                &[("hook", hook_name), ("binding", &b.name)],
            );
        }
        Ok(answer)
    }
}

/// The context payload: the review with its apiVersion and kind, as the docs show.
pub(crate) fn context_payload(mutating: bool, review: &Value) -> (BindingType, Payload) {
    let review = json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or_else(|| "admission.k8s.io/v1".into()),
        "kind": review.get("kind").cloned().unwrap_or_else(|| "AdmissionReview".into()),
        "request": review["request"].clone(),
    });
    if mutating {
        (BindingType::Mutating, Payload::Mutating { review })
    } else {
        (BindingType::Validating, Payload::Validating { review })
    }
}

/// The AdmissionReview answer: the request's apiVersion and kind, a response
/// with its uid.
pub(crate) fn admission_review(review: &Value, outcome: Result<AdmissionAnswer, Denial>) -> Value {
    let uid = review["request"]
        .get("uid")
        .cloned()
        .unwrap_or(Value::from(""));
    let mut response = json!({ "uid": uid });
    match outcome {
        Ok(a) => {
            response["allowed"] = a.allowed.into();
            if !a.warnings.is_empty() {
                response["warnings"] = a.warnings.into();
            }
            if let Some(patch) = a.patch {
                response["patch"] = patch.into();
                response["patchType"] = "JSONPatch".into();
            }
            if !a.allowed {
                response["status"] = status(403, &a.message);
            }
        }
        Err(d) => {
            response["allowed"] = false.into();
            response["status"] = status(d.code, &d.message);
        }
    }
    json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or_else(|| "admission.k8s.io/v1".into()),
        "kind": review.get("kind").cloned().unwrap_or_else(|| "AdmissionReview".into()),
        "response": response,
    })
}

fn status(code: u16, message: &str) -> Value {
    if message.is_empty() {
        json!({ "code": code })
    } else {
        json!({ "code": code, "message": message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review() -> Value {
        json!({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1"}})
    }

    #[test]
    fn allow_with_warnings_and_patch() {
        let a = AdmissionAnswer {
            allowed: true,
            message: String::new(),
            warnings: vec!["careful".into()],
            patch: Some("W10=".into()),
        };
        assert_eq!(
            admission_review(&review(), Ok(a)).to_string(),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"allowed":true,"patch":"W10=","patchType":"JSONPatch","uid":"u-1","warnings":["careful"]}}"#
        );
    }

    fn hook(name: &str, config: &str) -> Hook {
        let config = crate::hook::config::parse(name, config).expect("config");
        Hook {
            name: name.into(),
            path: name.into(),
            limiter: std::sync::Arc::new(std::sync::Mutex::new(
                crate::hook::limiter::TokenBucket::from_settings(&config.settings),
            )),
            config_sum: 0,
            retired: false,
            jq_filters: vec![],
            config,
        }
    }

    const RULE: &str = "  rules: [{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [pods]}]\n";

    #[test]
    fn routes_by_safe_name_and_collisions_name_both_bindings() {
        let a = hook(
            "a.sh",
            &format!(
                "configVersion: v1\nkubernetesValidating:\n- name: x.example.example.com\n{RULE}kubernetesMutating:\n- name: y.example.com\n{RULE}"
            ),
        );
        let table = routes(&[a]).expect("routes");
        assert_eq!(
            table.get("x-example-example-com"),
            Some(&Route {
                hook: 0,
                binding: 0,
                mutating: false
            })
        );
        assert_eq!(
            table.get("y-example-com"),
            Some(&Route {
                hook: 0,
                binding: 0,
                mutating: true
            })
        );
        let b = hook(
            "b.sh",
            &format!(
                "configVersion: v1\nkubernetesMutating:\n- name: x-example.example.com\n{RULE}"
            ),
        );
        let a = hook(
            "a.sh",
            &format!(
                "configVersion: v1\nkubernetesValidating:\n- name: x.example.example.com\n{RULE}"
            ),
        );
        assert_eq!(
            routes(&[a, b]).expect_err("collision"),
            "webhook path /hooks/x-example-example-com is used by hook 'a.sh' binding \
             'x.example.example.com' and by hook 'b.sh' binding 'x-example.example.com'; \
             rename one binding"
        );
    }

    #[test]
    fn denials() {
        let deny = AdmissionAnswer {
            allowed: false,
            message: "no".into(),
            ..Default::default()
        };
        assert_eq!(
            admission_review(&review(), Ok(deny))["response"],
            json!({"uid":"u-1","allowed":false,"status":{"code":403,"message":"no"}})
        );
        let err = Denial {
            code: 500,
            message: "boom".into(),
        };
        assert_eq!(
            admission_review(&review(), Err(err))["response"],
            json!({"uid":"u-1","allowed":false,"status":{"code":500,"message":"boom"}})
        );
    }
}
