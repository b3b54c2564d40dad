//! CRD conversion: for a ConversionReview on `/<crdName>`, group the objects by
//! their apiVersion, find a chain of declared rules from each version to
//! `desiredAPIVersion`, run the hook of each step with a `Conversion` context,
//! and answer with the converted objects in request order, or a Failure with a
//! clear message. Unlike flant, each chain converts only the objects of its own
//! source version, and objects already at the desired version pass unchanged.
//! Called on the conversion server's handler threads.

use super::chain::{Rule, find_chain};
use super::metrics::WebhookMetrics;
use super::response::{self, ConversionAnswer};
use super::run::HookRunner;
use super::server::{Handler, Reply};
use crate::hook::Hook;
use crate::hook::context::{BindingContext, BindingType, Payload};
use crate::log;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time budget of one conversion step: the API server waits 30 s for the whole call.
const STEP_BUDGET: Duration = Duration::from_secs(30);

/// Every conversion rule of every hook, by CRD name, in hook then rule order.
pub(crate) fn rules_by_crd(hooks: &[Hook]) -> BTreeMap<String, Vec<Rule>> {
    let mut out: BTreeMap<String, Vec<Rule>> = BTreeMap::new();
    for (hi, h) in hooks.iter().enumerate() {
        for (bi, b) in h.config.conversion.iter().enumerate() {
            let rules = out.entry(b.crd_name.clone()).or_default();
            for (from, to) in &b.conversions {
                rules.push(Rule {
                    from: from.clone(),
                    to: to.clone(),
                    hook: hi,
                    binding: bi,
                });
            }
        }
    }
    out
}

/// The conversion handler.
pub(crate) struct Conversion {
    pub(crate) crds: BTreeMap<String, Vec<Rule>>,
    pub(crate) runner: Arc<HookRunner>,
    pub(crate) metrics: Arc<WebhookMetrics>,
}

impl Handler for Conversion {
    fn handle(&self, path: &str, body: &[u8]) -> Reply {
        let started = Instant::now();
        let crd = path.trim_start_matches('/');
        let (reply, result) = self.answer(crd, body);
        let label = if self.crds.contains_key(crd) { crd } else { "" };
        self.metrics
            .observe("conversion", label, result, started.elapsed());
        reply
    }
}

impl Conversion {
    fn answer(&self, crd: &str, body: &[u8]) -> (Reply, &'static str) {
        let review: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(_) => return (Reply::text(400, "Invalid JSON payload"), "bad_request"),
        };
        let Some(request) = review.get("request").filter(|r| r.is_object()) else {
            return (
                Reply::text(400, "Missing parameters: request"),
                "bad_request",
            );
        };
        if !super::names::has_uid(request) {
            return (
                Reply::text(400, "Missing parameters: request.uid"),
                "bad_request",
            );
        }
        let Some(rules) = self.crds.get(crd) else {
            let msg = format!("no conversion hook for CRD '{crd}'");
            return (Reply::text(404, &msg), "not_found");
        };
        let outcome = self.convert(crd, rules, &review, request);
        if let Err(e) = &outcome {
            log::error(
                "conversion failed",
                &[("crd", crd), ("error", &e.to_string())],
            );
        }
        let result = if outcome.is_ok() {
            "success"
        } else {
            "failure"
        };
        let body = conversion_review(&review, outcome).to_string().into_bytes();
        (Reply::json(body), result)
    }

    /// Converts every object; `Err` is the Failure message.
    fn convert(
        &self,
        crd: &str,
        rules: &[Rule],
        review: &Value,
        request: &Value,
    ) -> Result<Vec<Value>, ConversionError> {
        let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
        let mut objects = request["objects"].as_array().cloned().unwrap_or_default();
        for (version, positions) in by_version(&objects, desired) {
            let chain = find_chain(rules, &version, desired).ok_or_else(|| {
                format!("no conversion path from {version} to {desired} for {crd} in the hooks' conversions")
            })?;
            let mut batch: Vec<Value> = positions.iter().map(|&i| objects[i].clone()).collect();
            for &step in &chain {
                batch = self.step(&rules[step], review, desired, batch)?;
            }
            if let Some(bad) = batch
                .iter()
                .find(|o| o["apiVersion"].as_str() != Some(desired))
            {
                return Err(format!(
                    "conversion of {crd} from {version} to {desired} was not successful: an object came back as {}",
                    bad["apiVersion"]
                ).into());
            }
            for (i, obj) in positions.into_iter().zip(batch) {
                objects[i] = obj;
            }
        }
        Ok(objects)
    }

    /// Runs one rule's hook over `objects`; returns what it converted them to.
    fn step(
        &self,
        rule: &Rule,
        review: &Value,
        desired: &str,
        objects: Vec<Value>,
    ) -> Result<Vec<Value>, ConversionError> {
        let hook = self.runner.hooks.get(rule.hook).ok_or("hook vanished")?;
        let b = hook
            .config
            .conversion
            .get(rule.binding)
            .ok_or("binding vanished")?;
        let count = objects.len();
        let mut request = review["request"].clone();
        request["objects"] = Value::Array(objects);
        let ctx = BindingContext {
            binding: b.name.clone(),
            binding_type: BindingType::Conversion,
            group: b.group.clone(),
            snapshot_names: b.include_snapshots_from.clone(),
            kube_binding: None,
            payload: Payload::Conversion {
                from_version: rule.from.clone(),
                to_version: rule.to.clone(),
                review: json!({
                    "apiVersion": review.get("apiVersion").cloned().unwrap_or_else(|| "apiextensions.k8s.io/v1".into()),
                    "kind": review.get("kind").cloned().unwrap_or_else(|| "ConversionReview".into()),
                    "request": request,
                }),
            },
        };
        let who = format!(
            "hook '{}' (binding '{}', {} -> {})",
            hook.name, b.name, rule.from, rule.to
        );
        let run = self
            .runner
            .run(rule.hook, ctx, STEP_BUDGET)
            .map_err(|e| ConversionError::from(format!("{who}: {e}")))?;
        if !run.success() {
            if !run.stderr.trim().is_empty() {
                log::error(
                    "hook stderr",
                    &[("hook", &hook.name), ("stderr", run.stderr.trim())],
                );
            }
            return Err(format!("{who} failed to convert to {desired}: {}", run.status).into());
        }
        match response::conversion(&run.conversion_response)
            .map_err(|e| ConversionError::from(format!("{who}: {e}")))?
        {
            ConversionAnswer::Failed(message) => Err(message.into()),
            ConversionAnswer::Converted(out) if out.len() != count => {
                Err(format!("{who} returned {} objects instead of {count}", out.len()).into())
            }
            ConversionAnswer::Converted(out) => Ok(out),
        }
    }
}

/// Positions of the objects not yet at `desired`, grouped by apiVersion in
/// first-seen order.
pub(crate) fn by_version(objects: &[Value], desired: &str) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let v = o["apiVersion"].as_str().unwrap_or_default();
        if v == desired {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| g == v) {
            Some((_, list)) => list.push(i),
            None => groups.push((v.to_string(), vec![i])),
        }
    }
    groups
}

/// The ConversionReview answer.
pub(crate) fn conversion_review(
    review: &Value,
    outcome: Result<Vec<Value>, ConversionError>,
) -> Value {
    let uid = review["request"]
        .get("uid")
        .cloned()
        .unwrap_or(Value::from(""));
    let response = match outcome {
        Ok(objects) => {
            json!({"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}})
        }
        Err(e) => {
            let message = e.to_string();
            json!({"uid": uid, "result": {"status": "Failure", "message": message}})
        }
    };
    json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or_else(|| "apiextensions.k8s.io/v1".into()),
        "kind": review.get("kind").cloned().unwrap_or_else(|| "ConversionReview".into()),
        "response": response,
    })
}

/// Why a conversion could not be done: the hook, the object and the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConversionError {
    problem: String,
}

impl From<String> for ConversionError {
    fn from(problem: String) -> ConversionError {
        ConversionError { problem }
    }
}

impl From<&str> for ConversionError {
    fn from(problem: &str) -> ConversionError {
        ConversionError::from(problem.to_string())
    }
}

impl std::fmt::Display for ConversionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for ConversionError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_group_by_version_skipping_desired() {
        let objs = [
            json!({"apiVersion":"a/v1"}),
            json!({"apiVersion":"a/v2"}),
            json!({"apiVersion":"a/v1"}),
            json!({"apiVersion":"a/v3"}),
        ];
        assert_eq!(
            by_version(&objs, "a/v3"),
            vec![
                ("a/v1".to_string(), vec![0, 2]),
                ("a/v2".to_string(), vec![1])
            ]
        );
    }

    #[test]
    fn review_shapes() {
        let review = json!({"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x"}});
        assert_eq!(
            conversion_review(&review, Ok(vec![json!({"a":1})])).to_string(),
            r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"convertedObjects":[{"a":1}],"result":{"status":"Success"},"uid":"x"}}"#
        );
        assert_eq!(
            conversion_review(&review, Err("bad".into()))["response"],
            json!({"uid":"x","result":{"status":"Failure","message":"bad"}})
        );
    }
}
