//! Every self metric a program can export, for the metric reference's test
//! (`tests/operator/reference.rs` against `docs/reference.md`).
//!
//! A running operator registers some families only when it needs them (the
//! Kubernetes client's when a hook has a kubernetes binding, the webhooks' when
//! a hook serves one, `ha_is_leader` with `--ha`). [`every_family`] calls the
//! same registration functions the startup calls, all of them, on one
//! [`Metrics`], and returns what that registry recorded. A metric added to any of
//! these functions is seen without touching this file; a new registration
//! function must be added here (the tests that scrape a real shell-operator and
//! addon-operator would then show a family this list lacks).
//!
//! A module of its own, which nothing in the crate uses: it reaches into the
//! modules that register metrics, and they all use `metrics`, so living inside
//! `metrics` would make a module cycle.

use crate::flags::Program;
use crate::metrics::{Family, Metrics};

/// The Kubernetes clients each program starts, by their `component` label.
fn client_components(program: Program) -> &'static [&'static str] {
    match program {
        Program::Shell => &["main"],
        Program::Addon => &["main", "helm_monitor", "addon_bookkeeping"],
    }
}

/// Every family `program` registers under `prefix`, each once, in registration
/// order (the queue action histogram included: it is on unless
/// `QUEUE_ACTIONS_METRICS=no`).
pub fn every_family(program: Program, prefix: &str) -> Result<Vec<Family>, String> {
    let metrics = match program {
        Program::Shell => Metrics::with_options(prefix, true),
        Program::Addon => Metrics::for_addon(prefix, true),
    }
    .map_err(|e| e.to_string())?;
    for component in client_components(program) {
        crate::kube::ClientMetrics::new(prefix, component)
            .register(metrics.registry())
            .map_err(|e| format!("client metrics {component}: {e}"))?;
    }
    crate::webhook::metrics::WebhookMetrics::register(prefix, &metrics)
        .map_err(|e| e.to_string())?;
    crate::leader::gauge(prefix, &metrics).map_err(|e| e.to_string())?;
    match program {
        Program::Shell => {
            crate::reload::register_metric(metrics.registry(), prefix)?;
        }
        Program::Addon => {
            crate::addon::AddonMetrics::register(prefix, metrics.registry())
                .map_err(|e| e.to_string())?;
            crate::addon::reload::register_metric(metrics.registry(), prefix)
                .map_err(|e| e.to_string())?;
        }
    }
    let mut families: Vec<Family> = Vec::new();
    for f in metrics.families() {
        // One client family per component: the same name, type and labels.
        if !families.contains(&f) {
            families.push(f);
        }
    }
    Ok(families)
}
