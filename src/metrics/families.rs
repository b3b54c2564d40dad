//! The registry every self metric is registered in, and the list of the families
//! registered so far.
//!
//! A Prometheus registry shows on `/metrics` only the families that have a
//! sample: a counter vector nobody has touched (`module_delete_errors_total`
//! before the first failed delete) is registered but invisible. [`Families`]
//! wraps the registry and remembers, at registration, each family's name, type,
//! label names and help, so that the metric reference (`docs/reference.md`) can
//! be checked against what the code registers, samples or not
//! (`tests/operator/reference.rs`).

use prometheus::Registry;
use prometheus::core::Collector;
use prometheus::proto::{MetricFamily, MetricType};
use std::sync::{Arc, Mutex};

/// One registered metric family, as the reference describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    /// The full name, prefix included.
    pub name: String,
    /// `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub kind: &'static str,
    /// Label names: constant labels first, then the variable ones in their
    /// declared order.
    pub labels: Vec<String>,
    /// The `# HELP` text.
    pub(crate) help: String,
}

/// A Prometheus registry that remembers the families registered in it.
/// Clones share the registry and the list.
#[derive(Clone, Default)]
pub struct Families {
    registry: Registry,
    seen: Arc<Mutex<Vec<Family>>>,
}

impl Families {
    /// Registers `c` and remembers its families (refused ones are not kept).
    pub(crate) fn register(&self, c: Box<dyn Collector>) -> prometheus::Result<()> {
        let described = describe(c.as_ref());
        self.registry.register(c)?;
        self.list_guard().extend(described);
        Ok(())
    }

    /// Unregisters `c` and forgets its families.
    pub(crate) fn unregister(&self, c: Box<dyn Collector>) -> prometheus::Result<()> {
        let names: Vec<String> = describe(c.as_ref()).into_iter().map(|f| f.name).collect();
        self.registry.unregister(c)?;
        self.list_guard().retain(|f| !names.contains(&f.name));
        Ok(())
    }

    /// The families that have samples, for the exposition.
    pub(crate) fn gather(&self) -> Vec<MetricFamily> {
        self.registry.gather()
    }

    /// Every family registered, in registration order.
    pub fn list(&self) -> Vec<Family> {
        self.list_guard().clone()
    }

    fn list_guard(&self) -> std::sync::MutexGuard<'_, Vec<Family>> {
        // A panic while holding the list cannot leave it half-written (one
        // `extend` or `retain`), so a poisoned lock is still a usable list.
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The families `c` declares: names, help and labels from its descriptors, the
/// type from what it collects (a vector with no child still reports its type).
fn describe(c: &dyn Collector) -> Vec<Family> {
    let collected = c.collect();
    c.desc()
        .into_iter()
        .map(|d| {
            let kind = collected
                .iter()
                .find(|mf| mf.name() == d.fq_name)
                .map_or("untyped", |mf| kind_name(mf.get_field_type()));
            let labels = d
                .const_label_pairs
                .iter()
                .map(|p| p.name().to_string())
                .chain(d.variable_labels.iter().cloned())
                .collect();
            Family {
                name: d.fq_name.clone(),
                kind,
                labels,
                help: d.help.clone(),
            }
        })
        .collect()
}

fn kind_name(t: MetricType) -> &'static str {
    match t {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{CounterVec, Opts};

    #[test]
    fn a_family_without_samples_is_listed_but_not_gathered() {
        let f = Families::default();
        let c = CounterVec::new(
            Opts::new("x_errors_total", "Errors.").const_label("component", "main"),
            &["module", "kind"],
        )
        .expect("counter");
        f.register(Box::new(c.clone())).expect("register");
        assert!(f.gather().is_empty());
        let listed = f.list();
        assert_eq!(
            listed,
            vec![Family {
                name: "x_errors_total".into(),
                kind: "counter",
                labels: vec!["component".into(), "module".into(), "kind".into()],
                help: "Errors.".into(),
            }]
        );
        f.unregister(Box::new(c)).expect("unregister");
        assert!(f.list().is_empty());
    }
}
