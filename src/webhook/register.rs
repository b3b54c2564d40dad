//! Registration of the admission webhooks: one `ValidatingWebhookConfiguration`
//! and one `MutatingWebhookConfiguration`, both named `<configuration name>-hooks`
//! exactly as flant really names them (so RBAC written for flant keeps working),
//! one entry per binding in name order, pointing at the operator's Service on
//! `/hooks/<SafeURLString(binding)>`. Existing objects keep their metadata and
//! get their `webhooks` replaced, so entries of removed bindings disappear; an
//! unchanged object is not written (the defaults kube-apiserver fills in, such as
//! the Service port 443, are no change). Runs once at startup on the main thread,
//! retrying with backoff when the API server refuses.
//!
//! [`Registrar`] keeps which hooks' entries are registered: all of them in
//! shell-operator; in addon-operator the global hooks' at startup, and a module's
//! hooks' only while the module is enabled (its run adds them before its CRDs and
//! helm, its delete removes them first), so a disabled module's webhook, even one
//! with `failurePolicy: Fail`, is never called.

use super::names::{CONFIGURATION_ID, admission_path};
use crate::hook::Hook;
use crate::hook::config::AdmissionBinding;
use crate::kube::{Client, KubeError};
use crate::log;
use serde_json::{Value, json};
use std::time::Duration;

/// flant's registration retry delays (6 attempts in all).
pub(crate) const RETRY_DELAYS: [Duration; 5] = [
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(15),
    Duration::from_secs(15),
];

const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// Where the API server reaches the admission server, and the defaults.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The objects' name: `<--validating-webhook-configuration-name>-hooks`.
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) service: String,
    /// Base64 of the `--validating-webhook-ca` file.
    pub(crate) ca_bundle: String,
    /// `--validating-webhook-failure-policy`, for bindings without `failurePolicy`.
    pub(crate) failure_policy: String,
}

impl Target {
    /// The object name for a configuration name flag value.
    pub(crate) fn object_name(configuration_name: &str) -> String {
        format!("{configuration_name}-{CONFIGURATION_ID}")
    }
}

/// One webhook entry for a binding.
pub(crate) fn entry(b: &AdmissionBinding, t: &Target) -> Value {
    let mut e = json!({
        "name": b.name,
        "rules": b.rules,
        "failurePolicy": b.failure_policy.clone().unwrap_or_else(|| t.failure_policy.clone()),
        "sideEffects": b.side_effects,
        "timeoutSeconds": b.timeout_seconds,
        "matchPolicy": "Equivalent",
        "admissionReviewVersions": ["v1", "v1beta1"],
        "clientConfig": {
            "service": {"namespace": t.namespace, "name": t.service, "path": admission_path(&b.name)},
            "caBundle": t.ca_bundle,
        },
    });
    if let Some(sel) = &b.label_selector {
        e["objectSelector"] = serde_json::to_value(sel).unwrap_or_default();
    }
    if let Some(sel) = &b.namespace_label_selector {
        e["namespaceSelector"] = serde_json::to_value(sel).unwrap_or_default();
    }
    if !b.match_conditions.is_empty() {
        e["matchConditions"] = Value::Array(b.match_conditions.clone());
    }
    e
}

/// Entries of the validating (or mutating) bindings of `hooks`, sorted by name.
pub(crate) fn entries<'a>(
    hooks: impl Iterator<Item = &'a Hook>,
    mutating: bool,
    t: &Target,
) -> Vec<Value> {
    let mut list: Vec<(&str, Value)> = hooks
        .flat_map(|h| {
            if mutating {
                &h.config.mutating
            } else {
                &h.config.validating
            }
        })
        .map(|b| (b.name.as_str(), entry(b, t)))
        .collect();
    list.sort_by(|a, b| a.0.cmp(b.0));
    list.into_iter().map(|(_, e)| e).collect()
}

/// The registered admission entries: which hooks' bindings are in the two
/// configuration objects. Shared by the operator (startup) and the addon engine
/// (module enable and delete); one registration at a time.
pub(crate) struct Registrar {
    client: Client,
    target: Target,
    hooks: std::sync::Arc<Vec<Hook>>,
    /// Per hook: its entries are registered.
    active: std::sync::Mutex<Vec<bool>>,
}

impl Registrar {
    /// `active`: which hooks' entries the first registration holds (`None`: all).
    pub(crate) fn new(
        client: Client,
        target: Target,
        hooks: std::sync::Arc<Vec<Hook>>,
        active: Option<Vec<bool>>,
    ) -> Registrar {
        let active = active.unwrap_or_else(|| vec![true; hooks.len()]);
        Registrar {
            client,
            target,
            hooks,
            active: std::sync::Mutex::new(active),
        }
    }

    /// Registers both configurations with the active hooks' entries, retrying
    /// each after `delays`.
    pub(crate) fn register(&self, delays: &[Duration]) -> Result<(), RegisterError> {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        self.write(&active, delays)
    }

    /// Adds (`on`) or removes the entries of `hooks` and registers again if that
    /// changes them; no retries (the caller's task is retried).
    pub(crate) fn set_active(&self, hooks: &[usize], on: bool) -> Result<(), RegisterError> {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let with_admission = |&&i: &&usize| {
            self.hooks
                .get(i)
                .is_some_and(|h| !h.config.validating.is_empty() || !h.config.mutating.is_empty())
        };
        let changed: Vec<usize> = hooks
            .iter()
            .filter(with_admission)
            .filter(|&&i| active.get(i).is_some_and(|a| *a != on))
            .copied()
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let mut next = active.clone();
        changed.iter().for_each(|&i| next[i] = on);
        self.write(&next, &[])?;
        *active = next;
        Ok(())
    }

    fn write(&self, active: &[bool], delays: &[Duration]) -> Result<(), RegisterError> {
        for (kind, mutating) in [
            ("ValidatingWebhookConfiguration", false),
            ("MutatingWebhookConfiguration", true),
        ] {
            let hooks = (self.hooks.iter().enumerate())
                .filter(|(i, _)| active.get(*i).copied().unwrap_or(false))
                .map(|(_, h)| h);
            let webhooks = entries(hooks, mutating, &self.target);
            let (client, name) = (&self.client, &self.target.name);
            with_retries(kind, delays, || apply(client, kind, name, &webhooks))?;
        }
        Ok(())
    }
}

fn with_retries(
    kind: &str,
    delays: &[Duration],
    mut f: impl FnMut() -> Result<(), KubeError>,
) -> Result<(), RegisterError> {
    let mut attempt = 0;
    loop {
        match f() {
            Ok(()) => return Ok(()),
            Err(e) if attempt < delays.len() => {
                log::warn(
                    &format!("cannot register the {kind}; will retry"),
                    &[
                        ("error", &e.to_string()),
                        ("retry_in", &format!("{:?}", delays[attempt])),
                    ],
                );
                std::thread::sleep(delays[attempt]);
                attempt += 1;
            }
            Err(e) => return Err(format!("cannot register the {kind}: {e}").into()),
        }
    }
}

/// Creates or updates one configuration object. No object is created for an
/// empty list; an existing one is emptied (its entries would point at paths
/// nobody serves any more).
fn apply(client: &Client, kind: &str, name: &str, webhooks: &[Value]) -> Result<(), KubeError> {
    let resource = client.resolve(API_VERSION, kind, "webhook registration")?;
    let api = client.api(&resource, None);
    let existing = match api.get(name) {
        Ok(obj) => Some(obj),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    let fields = [("kind", kind), ("name", name)];
    match existing {
        None if webhooks.is_empty() => Ok(()),
        None => {
            let obj = json!({"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "webhooks": webhooks});
            api.create(&obj)?;
            log::info("webhook configuration created", &fields);
            Ok(())
        }
        Some(obj) if up_to_date(&obj, webhooks, kind == "MutatingWebhookConfiguration") => {
            log::info("webhook configuration is up to date", &fields);
            Ok(())
        }
        Some(obj) if !obj.is_object() => Err(KubeError::Invalid(format!(
            "{kind} {name} is not an object"
        ))),
        Some(mut obj) => {
            obj["webhooks"] = Value::Array(webhooks.to_vec());
            api.replace(name, &obj)?;
            log::info("webhook configuration updated", &fields);
            Ok(())
        }
    }
}

/// True when the stored `obj` holds `webhooks`, as written or as kube-apiserver
/// stores them: the defaults it fills in are no change.
fn up_to_date(obj: &Value, webhooks: &[Value], mutating: bool) -> bool {
    let stored = obj["webhooks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    stored.len() == webhooks.len()
        && stored
            .iter()
            .zip(webhooks)
            .all(|(s, w)| s == w || *s == with_server_defaults(w, mutating))
}

/// `entry` with the defaults admissionregistration.k8s.io/v1 gives a webhook:
/// service port 443, rule scope `*`, empty object and namespace selectors, and
/// reinvocationPolicy `Never` for a mutating one.
pub(crate) fn with_server_defaults(entry: &Value, mutating: bool) -> Value {
    let mut e = entry.clone();
    if let Some(obj) = e.as_object_mut() {
        for key in ["objectSelector", "namespaceSelector"] {
            obj.entry(key).or_insert_with(|| json!({}));
        }
        if mutating {
            obj.entry("reinvocationPolicy")
                .or_insert_with(|| "Never".into());
        }
    }
    if let Some(service) = e
        .pointer_mut("/clientConfig/service")
        .and_then(Value::as_object_mut)
    {
        service.entry("port").or_insert_with(|| 443.into());
    }
    for rule in e
        .get_mut("rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(rule) = rule.as_object_mut() {
            rule.entry("scope").or_insert_with(|| "*".into());
        }
    }
    e
}

/// Why the webhook configurations could not be registered (the API call and its error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegisterError {
    problem: String,
}

impl From<String> for RegisterError {
    fn from(problem: String) -> RegisterError {
        RegisterError { problem }
    }
}

impl From<&str> for RegisterError {
    fn from(problem: &str) -> RegisterError {
        RegisterError::from(problem.to_string())
    }
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for RegisterError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook::config::LabelSelector;

    fn target() -> Target {
        Target {
            name: Target::object_name("shell-operator-hooks"),
            namespace: "ns".into(),
            service: "svc".into(),
            ca_bundle: "Q0E=".into(),
            failure_policy: "Ignore".into(),
        }
    }

    fn binding() -> AdmissionBinding {
        AdmissionBinding {
            name: "privateRepo.example.com".into(),
            group: None,
            include_snapshots_from: vec![],
            rules: vec![
                json!({"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}),
            ],
            failure_policy: None,
            side_effects: "None".into(),
            timeout_seconds: 10,
            match_conditions: vec![],
            label_selector: Some(LabelSelector {
                match_labels: [("a".to_string(), "b".to_string())].into(),
                match_expressions: vec![],
            }),
            namespace_label_selector: None,
        }
    }

    #[test]
    fn entry_shape_and_default_failure_policy() {
        let b = binding();
        assert_eq!(target().name, "shell-operator-hooks-hooks");
        assert_eq!(
            entry(&b, &target()),
            json!({
                "name": "privateRepo.example.com",
                "rules": [{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}],
                "failurePolicy": "Ignore",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "matchPolicy": "Equivalent",
                "admissionReviewVersions": ["v1", "v1beta1"],
                "objectSelector": {"matchLabels": {"a": "b"}},
                "clientConfig": {
                    "service": {"namespace": "ns", "name": "svc", "path": "/hooks/private-repo-example-com"},
                    "caBundle": "Q0E="
                }
            })
        );
    }

    #[test]
    fn stored_defaults_are_no_change_but_a_dropped_selector_is() {
        let mut b = binding();
        let written = vec![entry(&b, &target())];
        // As kube-apiserver stores it (a mutating hook, read back with kubectl).
        let stored = json!({"webhooks": [{
            "name": "privateRepo.example.com",
            "rules": [{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"],"scope":"*"}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": 10,
            "matchPolicy": "Equivalent",
            "reinvocationPolicy": "Never",
            "admissionReviewVersions": ["v1", "v1beta1"],
            "objectSelector": {"matchLabels": {"a": "b"}},
            "namespaceSelector": {},
            "clientConfig": {
                "service": {"namespace": "ns", "name": "svc", "path": "/hooks/private-repo-example-com", "port": 443},
                "caBundle": "Q0E="
            }
        }]});
        assert!(up_to_date(&stored, &written, true));
        assert!(
            !up_to_date(&stored, &written, false),
            "no reinvocationPolicy on a validating hook"
        );
        let as_written = json!({"webhooks": written.clone()});
        assert!(up_to_date(&as_written, &written, true));
        b.label_selector = None;
        assert!(!up_to_date(&stored, &[entry(&b, &target())], true));
        assert!(!up_to_date(&stored, &[], true));
    }
}
