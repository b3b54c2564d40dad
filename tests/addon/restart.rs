//! A restart that costs nothing (issue 28): with every release deployed and nothing
//! changed, the new operator's first converge decides "unchanged" for each module
//! without one GET per rendered object (its drift check lists each kind once per
//! namespace) and creates no revision; an object deleted while the operator was
//! down is still found by that converge and put back.

use crate::harness::{Addon, NS};
use std::sync::Arc;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

const MODULES: [&str; 4] = ["ra", "rb", "rc", "rd"];

/// Four modules, each a ConfigMap and a Service named after it.
fn layout() -> Vec<(String, String)> {
    let mut files = vec![(
        "modules/values.yaml".to_string(),
        MODULES
            .iter()
            .map(|m| format!("{m}Enabled: true\n"))
            .collect(),
    )];
    for (i, m) in MODULES.iter().enumerate() {
        let dir = format!("modules/{:03}-{m}", i + 1);
        files.push((
            format!("{dir}/Chart.yaml"),
            format!("apiVersion: v2\nname: {m}\nversion: 0.0.1\n"),
        ));
        files.push((
            format!("{dir}/templates/cm.yaml"),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {m}\ndata:\n  a: b\n"),
        ));
        files.push((
            format!("{dir}/templates/svc.yaml"),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {m}\nspec:\n  ports:\n  - port: 80\n"
            ),
        ));
    }
    files
}

fn stop(addon: &mut Addon) {
    let mut child = addon.child.take().expect("running");
    child.kill().expect("kill");
    child.wait().expect("reaped");
}

/// The requests in `window` that GET one of the objects of `modules` by name.
fn object_gets(window: &[String], modules: &[&str]) -> Vec<String> {
    window
        .iter()
        .filter(|r| {
            modules.iter().any(|m| {
                ["configmaps", "services"].iter().any(|what| {
                    r.starts_with(&format!("GET /api/v1/namespaces/{NS}/{what}/{m}"))
                        && !r.contains("watch")
                })
            })
        })
        .cloned()
        .collect()
}

/// Lists (not watches) of `what` in the namespace.
fn lists(window: &[String], what: &str) -> usize {
    let path = format!("GET /api/v1/namespaces/{NS}/{what}");
    window
        .iter()
        .filter(|r| {
            (r.as_str() == path || r.starts_with(&format!("{path}?")))
                && !r.contains("watch=")
                && !r.contains("fieldSelector")
        })
        .count()
}

#[test]
fn helm4_restart_with_nothing_changed_gets_no_object_and_makes_no_revision() {
    restart_costs_nothing(4);
}

#[test]
fn helm3_restart_with_nothing_changed_gets_no_object_and_makes_no_revision() {
    restart_costs_nothing(3);
}

fn restart_costs_nothing(major: u32) {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let mut first = Addon::start(&refs, None, major);
    first.wait_ready();
    for m in MODULES {
        assert_eq!(first.revisions(m), vec![1], "{m}");
    }
    let sim = Arc::clone(&first.sim);
    stop(&mut first);

    // Nothing changed: no object is read by name, each kind is listed once, and no
    // helm upgrade runs.
    let before = sim.requests().len();
    let mut second = Addon::restart(Arc::clone(&sim), &refs, major);
    second.wait_ready();
    let window = sim.requests().split_off(before);
    assert_eq!(object_gets(&window, &MODULES), Vec::<String>::new());
    assert_eq!(lists(&window, "configmaps"), 1, "{window:#?}");
    assert_eq!(lists(&window, "services"), 1, "{window:#?}");
    for m in MODULES {
        assert_eq!(second.revisions(m), vec![1], "{m}");
    }
    let upgrades: Vec<String> = (second.steps().into_iter())
        .filter(|s| s.starts_with("helm:upgrade"))
        .collect();
    assert_eq!(upgrades, Vec::<String>::new());
    second.wait_log(&["helm upgrade not needed", "rd"], LONG);
    // Those reads went through the resource monitor's client (whose own first check is
    // minutes away): the release list and one list per kind at least.
    let metrics = second.metrics();
    let bookkeeping: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("addon_operator_kubernetes_client_request_result_total{")
                && l.contains(r#"component="helm_monitor""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(bookkeeping >= 3.0, "{metrics}");
    stop(&mut second);

    // An object deleted while no operator runs is drift: the next start's converge
    // upgrades that module only, and the object is back.
    sim.delete("v1", "Service", NS, "rb").expect("delete");
    let before = sim.requests().len();
    let third = Addon::restart(Arc::clone(&sim), &refs, major);
    third.wait_ready();
    third.wait_object("Service", "rb", |o| o.is_some());
    assert_eq!(third.revisions("rb"), vec![1, 2]);
    for m in ["ra", "rc", "rd"] {
        assert_eq!(third.revisions(m), vec![1], "{m}");
    }
    third.wait_log(&["helm upgrade", "resource /Service/rb absent"], LONG);
    // Only helm's own upgrade of rb reads objects by name.
    let window = sim.requests().split_off(before);
    assert_eq!(
        object_gets(&window, &["ra", "rc", "rd"]),
        Vec::<String>::new()
    );
}
