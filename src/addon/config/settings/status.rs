//! The `status` the operator writes on a ModuleSettings object: what it last did
//! with the module (or, for `global`, with the converge), built from plain facts
//! so it is tested without a server.
//!
//! ```yaml
//! status:
//!   observedGeneration: 4          # the object's generation whose spec is in effect
//!   enabled: true
//!   state: Ready                   # Ready, Failed, Disabled
//!   revision: 3                    # the helm release's last revision
//!   lastConvergeTime: "2026-11-28T06:00:00Z"   # the last run that succeeded
//!   valuesChecksum: 9b0c…          # checksum of the values in effect
//!   lastError: ""                  # the last run's error ("" once one succeeds)
//!   conditions:
//!   - {type: Ready, status: "True", reason: Converged, message: …, lastTransitionTime: …}
//!   - {type: Error, status: "False", reason: NoError, message: "", lastTransitionTime: …}
//! ```
//!
//! A condition keeps its `lastTransitionTime` while its status stays the same. A
//! failure keeps the revision and converge time of the last success. Fields with
//! nothing to say are written as `null`, so a merge patch removes them.

use serde_json::{Map, Value, json};

/// Where a module run failed: the `Error` condition's reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Webhooks, CRDs, onStartup hooks.
    Startup,
    BeforeHelm,
    Helm,
    AfterHelm,
}

impl Phase {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Phase::Startup => "StartupFailed",
            Phase::BeforeHelm => "BeforeHelmHookFailed",
            Phase::Helm => "HelmFailed",
            Phase::AfterHelm => "AfterHelmHookFailed",
        }
    }
}

/// What the operator last did with a module.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A run succeeded at `at` (RFC 3339); `revision`: its release's, if any.
    Converged { revision: Option<u64>, at: String },
    /// A run failed in `phase` with `error` (it is retried).
    Failed { phase: Phase, error: String },
    /// The module is disabled (deleted).
    Disabled,
}

/// The facts a status is built from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Facts {
    pub(crate) generation: i64,
    pub(crate) enabled: bool,
    pub(crate) checksum: String,
    pub(crate) outcome: Outcome,
}

/// The status for `facts` at `now`, after `prev` (the status written last).
pub(crate) fn build(prev: Option<&Value>, facts: &Facts, now: &str) -> Value {
    let keep = |field: &str| {
        prev.and_then(|p| p.get(field))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let (state, revision, at, error) = match &facts.outcome {
        Outcome::Converged { revision, at } => (
            "Ready",
            revision.map_or(Value::Null, Value::from),
            Value::from(at.as_str()),
            None,
        ),
        Outcome::Failed { phase, error } => (
            "Failed",
            keep("revision"),
            keep("lastConvergeTime"),
            Some((*phase, error.as_str())),
        ),
        Outcome::Disabled => ("Disabled", Value::Null, keep("lastConvergeTime"), None),
    };
    let ready = match &facts.outcome {
        Outcome::Converged { .. } => ("True", "Converged", "the module's last run succeeded"),
        Outcome::Failed { .. } => (
            "False",
            "RunFailed",
            "the module's last run failed; it is retried",
        ),
        Outcome::Disabled => ("False", "Disabled", "the module is disabled"),
    };
    let err = match error {
        Some((phase, text)) => ("True", phase.reason(), text),
        None => ("False", "NoError", ""),
    };
    let conditions = vec![
        condition(prev, "Ready", ready, now),
        condition(prev, "Error", err, now),
    ];
    json!({
        "observedGeneration": facts.generation,
        "enabled": facts.enabled,
        "state": state,
        "revision": revision,
        "lastConvergeTime": at,
        "valuesChecksum": facts.checksum,
        "lastError": error.map_or("", |(_, e)| e),
        "conditions": conditions,
    })
}

/// One condition; its `lastTransitionTime` is kept from `prev` while its status
/// stays.
fn condition(
    prev: Option<&Value>,
    kind: &str,
    (status, reason, message): (&str, &str, &str),
    now: &str,
) -> Value {
    let before = prev
        .and_then(|p| p.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find(|c| c["type"] == kind));
    let since = match before {
        Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
        _ => Value::from(now),
    };
    let mut c = Map::new();
    c.insert("type".into(), kind.into());
    c.insert("status".into(), status.into());
    c.insert("reason".into(), reason.into());
    c.insert("message".into(), message.into());
    c.insert("lastTransitionTime".into(), since);
    Value::Object(c)
}

/// The current time as the API server writes times (RFC 3339, seconds, `Z`).
pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(outcome: Outcome) -> Facts {
        Facts {
            generation: 2,
            enabled: true,
            checksum: "abc".into(),
            outcome,
        }
    }

    fn cond<'a>(status: &'a Value, kind: &str) -> &'a Value {
        let all = status["conditions"].as_array().expect("conditions");
        all.iter().find(|c| c["type"] == kind).expect("condition")
    }

    #[test]
    fn a_success_is_ready_with_its_revision_and_time() {
        let ok = Outcome::Converged {
            revision: Some(3),
            at: "T1".into(),
        };
        let s = build(None, &facts(ok), "T1");
        assert_eq!(s["state"], "Ready");
        assert_eq!(s["revision"], 3);
        assert_eq!(s["lastConvergeTime"], "T1");
        assert_eq!(s["observedGeneration"], 2);
        assert_eq!(s["valuesChecksum"], "abc");
        assert_eq!(s["lastError"], "");
        assert_eq!(cond(&s, "Ready")["status"], "True");
        assert_eq!(cond(&s, "Ready")["reason"], "Converged");
        assert_eq!(cond(&s, "Error")["status"], "False");
    }

    /// A failure carries the error and its phase, keeps the last success's
    /// revision and time, and moves only the conditions whose status changed.
    #[test]
    fn a_failure_keeps_the_last_success_and_names_its_phase() {
        let ok = Outcome::Converged {
            revision: Some(3),
            at: "T1".into(),
        };
        let first = build(None, &facts(ok), "T1");
        let failed = Outcome::Failed {
            phase: Phase::Helm,
            error: "helm upgrade: boom".into(),
        };
        let s = build(Some(&first), &facts(failed.clone()), "T2");
        assert_eq!(s["state"], "Failed");
        assert_eq!(s["revision"], 3);
        assert_eq!(s["lastConvergeTime"], "T1");
        assert_eq!(s["lastError"], "helm upgrade: boom");
        let error = cond(&s, "Error");
        assert_eq!(
            (&error["status"], &error["reason"], &error["message"]),
            (
                &json!("True"),
                &json!("HelmFailed"),
                &json!("helm upgrade: boom")
            )
        );
        assert_eq!(error["lastTransitionTime"], "T2");
        let again = build(Some(&s), &facts(failed), "T3");
        assert_eq!(cond(&again, "Error")["lastTransitionTime"], "T2");
        assert_eq!(cond(&again, "Ready")["lastTransitionTime"], "T2");
    }

    #[test]
    fn a_disabled_module_has_no_revision() {
        let mut f = facts(Outcome::Disabled);
        f.enabled = false;
        let s = build(None, &f, "T1");
        assert_eq!(s["state"], "Disabled");
        assert_eq!(s["revision"], Value::Null);
        assert_eq!(s["enabled"], false);
        assert_eq!(cond(&s, "Ready")["reason"], "Disabled");
    }
}
