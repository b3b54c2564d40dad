//! Metrics written by hooks to `$METRICS_PATH`: a small hand-written store (names
//! and label sets come from hooks at run time, which the prometheus crate's fixed
//! collectors do not suit) and its Prometheus text exposition.
//!
//! Group semantics follow flant's documentation (the seed), not its current code:
//! - a series written without `group` never expires; counters keep adding;
//! - when a batch mentions a group, the group's earlier series that the batch does
//!   not write again are dropped; series it writes again keep their value (a
//!   counter keeps adding) — groups are global, across hooks;
//! - `{"group":g,"action":"expire"}` drops every series of the group.
//!
//! Every series gets a `hook` label (the op's own `hook` label is overridden). A
//! batch is parsed ([`parse::parse`]) before the run's other outputs are applied
//! and checked against the store ([`HookMetrics::apply`]) before anything changes,
//! so a bad batch never leaves half its ops applied. Queue threads call `apply`;
//! the HTTP thread calls `render`; one mutex guards the store.

pub mod parse;

pub(crate) use parse::{Action, Op};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Mutex;

type Labels = Vec<(String, String)>;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Counter,
    Gauge,
    Histogram(Vec<f64>),
}

impl Kind {
    fn of(action: &Action) -> Option<Kind> {
        match action {
            Action::Add(_) => Some(Kind::Counter),
            Action::Set(_) => Some(Kind::Gauge),
            Action::Observe { buckets, .. } => Some(Kind::Histogram(buckets.clone())),
            Action::Expire => None,
        }
    }
    fn type_name(&self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram(_) => "histogram",
        }
    }
}

#[derive(Debug, Default)]
struct Series {
    /// Counter or gauge value; the histogram's sum.
    value: f64,
    /// Histogram only: per-bucket (non-cumulative) counts and the total count.
    counts: Vec<u64>,
    count: u64,
    group: Option<String>,
}

#[derive(Debug)]
struct Family {
    kind: Kind,
    series: BTreeMap<Labels, Series>,
}

/// The shared store of every hook's metrics.
#[derive(Debug, Default)]
pub struct HookMetrics {
    families: Mutex<BTreeMap<String, Family>>,
}

impl HookMetrics {
    /// Checks `ops` (from `hook`'s run) against the store, then applies them all;
    /// on error nothing is changed.
    pub fn apply(&self, hook: &str, ops: &[Op]) -> Result<(), String> {
        let mut families = self.families.lock().unwrap_or_else(|p| p.into_inner());
        check_kinds(&families, ops)?;
        expire_unreported(&mut families, hook, ops);
        for op in ops {
            apply_one(&mut families, hook, op);
        }
        families.retain(|_, f| !f.series.is_empty());
        Ok(())
    }

    /// Number of series in the store (for tests and benchmarks).
    pub fn series_count(&self) -> usize {
        let families = self.families.lock().unwrap_or_else(|p| p.into_inner());
        families.values().map(|f| f.series.len()).sum()
    }

    /// Prometheus text exposition of every series, families sorted by name.
    pub fn render(&self) -> String {
        let families = self.families.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for (name, family) in families.iter() {
            let _ = writeln!(out, "# HELP {name} {name}");
            let _ = writeln!(out, "# TYPE {name} {}", family.kind.type_name());
            for (labels, s) in &family.series {
                render_series(&mut out, name, &family.kind, labels, s);
            }
        }
        out
    }
}

/// An op must match the type (and buckets) its family already has, in the store or
/// earlier in the same batch.
fn check_kinds(families: &BTreeMap<String, Family>, ops: &[Op]) -> Result<(), String> {
    let mut seen: BTreeMap<&str, Kind> = BTreeMap::new();
    for op in ops {
        let Some(kind) = Kind::of(&op.action) else {
            continue;
        };
        let known = seen
            .get(op.name.as_str())
            .cloned()
            .or_else(|| families.get(&op.name).map(|f| f.kind.clone()));
        match known {
            Some(k) if k != kind => {
                let field = match (&k, &kind) {
                    (Kind::Histogram(_), Kind::Histogram(_)) => "buckets",
                    _ => "action",
                };
                return Err(format!(
                    "line {}: field '{field}': metric {:?} is already a {}{}",
                    op.line,
                    op.name,
                    k.type_name(),
                    match k {
                        Kind::Histogram(b) => format!(" with buckets {b:?}"),
                        _ => String::new(),
                    }
                ));
            }
            _ => drop(seen.insert(&op.name, kind)),
        }
    }
    Ok(())
}

/// For each group the batch writes to, drops that group's series the batch does
/// not write again.
fn expire_unreported(families: &mut BTreeMap<String, Family>, hook: &str, ops: &[Op]) {
    let mut reported: BTreeMap<&str, BTreeSet<(&str, Labels)>> = BTreeMap::new();
    for op in ops.iter().filter(|o| o.action != Action::Expire) {
        if let Some(g) = &op.group {
            reported
                .entry(g)
                .or_default()
                .insert((op.name.as_str(), series_labels(hook, op)));
        }
    }
    for (name, family) in families.iter_mut() {
        family.series.retain(|labels, s| match &s.group {
            Some(g) => reported
                .get(g.as_str())
                .is_none_or(|keep| keep.contains(&(name.as_str(), labels.clone()))),
            None => true,
        });
    }
}

fn apply_one(families: &mut BTreeMap<String, Family>, hook: &str, op: &Op) {
    let Some(kind) = Kind::of(&op.action) else {
        let group = op.group.as_deref();
        for family in families.values_mut() {
            family.series.retain(|_, s| s.group.as_deref() != group);
        }
        return;
    };
    let family = families.entry(op.name.clone()).or_insert_with(|| Family {
        kind,
        series: BTreeMap::new(),
    });
    let series = family.series.entry(series_labels(hook, op)).or_default();
    series.group.clone_from(&op.group);
    match &op.action {
        Action::Add(v) => series.value += v,
        Action::Set(v) => series.value = *v,
        Action::Observe { value, buckets } => {
            series.counts.resize(buckets.len(), 0);
            if let Some(i) = buckets.iter().position(|b| value <= b) {
                series.counts[i] += 1;
            }
            series.count += 1;
            series.value += value;
        }
        Action::Expire => {}
    }
}

/// The op's labels plus `hook`, sorted by name.
fn series_labels(hook: &str, op: &Op) -> Labels {
    let mut labels = op.labels.clone();
    labels.insert("hook".into(), hook.into());
    labels.into_iter().collect()
}

fn render_series(out: &mut String, name: &str, kind: &Kind, labels: &Labels, s: &Series) {
    let Kind::Histogram(buckets) = kind else {
        let _ = writeln!(out, "{name}{} {}", label_text(labels, None), s.value);
        return;
    };
    let mut cumulative = 0;
    for (i, bound) in buckets.iter().enumerate() {
        cumulative += s.counts.get(i).copied().unwrap_or(0);
        let le = Some(bound.to_string());
        let _ = writeln!(out, "{name}_bucket{} {cumulative}", label_text(labels, le));
    }
    let inf = Some("+Inf".to_string());
    let _ = writeln!(out, "{name}_bucket{} {}", label_text(labels, inf), s.count);
    let _ = writeln!(out, "{name}_sum{} {}", label_text(labels, None), s.value);
    let _ = writeln!(out, "{name}_count{} {}", label_text(labels, None), s.count);
}

fn label_text(labels: &Labels, le: Option<String>) -> String {
    let mut parts: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        parts.push(format!("le=\"{le}\""));
    }
    format!("{{{}}}", parts.join(","))
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
