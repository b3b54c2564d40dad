//! A restart that costs nothing (issue 28): with every release deployed and nothing
//! changed, the new operator's first converge decides "unchanged" for each module
//! without one GET per rendered object (its drift check lists each kind once per
//! namespace), without one helm process (the release's checksum and manifest are read
//! from its Secret) and creates no revision; an object deleted while the operator was
//! down is still found by that converge and put back with one `helm upgrade`. A
//! module's value change costs that one `helm upgrade`; a `global` change costs nothing
//! for a chart whose templates cannot read `global`, one `helm template` and no revision
//! for a chart that reads other `global` keys, and an upgrade where it shows.

use crate::harness::{Addon, NS};
use std::sync::Arc;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

const MODULES: [&str; 4] = ["ra", "rb", "rc", "rd"];

/// Modules whose templates read `global.shown` (the others cannot read `global`).
const READ_GLOBAL: [&str; 2] = ["rc", "rd"];

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
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {m}\ndata:\n  \
                 a: {{{{ (.Values.{m} | default dict).greeting | default \"b\" | quote }}}}\n{}",
                if READ_GLOBAL.contains(m) {
                    "  g: {{ .Values.global.shown | default \"-\" | quote }}\n"
                } else {
                    ""
                }
            ),
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

/// The helm commands the operator ran (`helm:<command>:<release>`), but `version`.
fn helm_calls(addon: &Addon) -> Vec<String> {
    (addon.runs().into_iter())
        .map(|(t, _)| t)
        .filter(|t| t.starts_with("helm:") && !t.starts_with("helm:version:"))
        .collect()
}

/// The `moduleChecksum` label of each release's latest storage Secret.
fn stored_checksums(sim: &kube_sim::Sim) -> Vec<(String, u64, String)> {
    let mut latest: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    for s in sim.list("v1", "Secret", NS) {
        let labels = &s["metadata"]["labels"];
        let (Some(name), Some(v)) = (labels["name"].as_str(), labels["version"].as_str()) else {
            continue;
        };
        let v: u64 = v.parse().expect("version");
        let sum = labels["moduleChecksum"].as_str().unwrap_or("").to_string();
        if latest.get(name).is_none_or(|(r, _)| *r < v) {
            latest.insert(name.to_string(), (v, sum));
        }
    }
    latest.into_iter().map(|(n, (v, s))| (n, v, s)).collect()
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
    // Not one helm process for the unchanged modules: no template, no get, no history.
    assert_eq!(helm_calls(&second), Vec::<String>::new());
    // Those reads went through the operator's bookkeeping client (not the hooks' nor
    // the resource monitor's): the release list and one list per kind at least.
    let metrics = second.metrics();
    let bookkeeping: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("addon_operator_kubernetes_client_request_result_total{")
                && l.contains(r#"component="addon_bookkeeping""#)
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
    // The drift was seen in the release's stored manifest: one helm process, the upgrade.
    assert_eq!(helm_calls(&third), ["helm:upgrade:rb"]);
    // Only helm's own upgrade of rb reads objects by name.
    let window = sim.requests().split_off(before);
    assert_eq!(
        object_gets(&window, &["ra", "rc", "rd"]),
        Vec::<String>::new()
    );
}

#[test]
fn helm4_value_change_costs_one_upgrade_and_a_global_change_no_revision() {
    changes_cost_what_they_must(4);
}

#[test]
fn helm3_value_change_costs_one_upgrade_and_a_global_change_no_revision() {
    changes_cost_what_they_must(3);
}

fn changes_cost_what_they_must(major: u32) {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let mut addon = Addon::start(&refs, None, major);
    addon.wait_ready();
    let cm_data = |addon: &Addon, m: &str| {
        addon
            .object("v1", "ConfigMap", m)
            .map(|o| o["data"]["a"].clone())
    };
    for m in MODULES {
        assert_eq!(addon.revisions(m), vec![1], "{m}");
        assert_eq!(cm_data(&addon, m), Some("b".into()), "{m}");
    }

    // A value of one module: one helm process, its upgrade, and the new revision
    // (nothing renders to decide; `--flant-checksum` would add one plain render).
    let before = helm_calls(&addon).len();
    addon.set_config("rb", "greeting: hi\n");
    addon.wait_object("ConfigMap", "rb", |o| {
        o.is_some_and(|o| o["data"]["a"] == "hi")
    });
    poll(|| addon.revisions("rb") == [1, 2], "rb revision 2");
    assert_eq!(helm_calls(&addon)[before..], ["helm:upgrade:rb"]);
    // helm runs with GOGC=400 unless the operator's environment sets it.
    let gogc = std::env::var("GOGC").unwrap_or_else(|_| "400".into());
    let env = addon.helm_gogc();
    assert!(env.iter().any(|(c, _)| c == "upgrade"), "{env:?}");
    assert!(env.iter().all(|(_, g)| *g == gogc), "{env:?}");

    // A `global` value no template reads. The modules whose templates cannot read
    // `global` keep their checksum: no helm process. The two that read another
    // `global` key run one `helm upgrade` each, which the post-renderer stops before
    // a revision (the render makes the release's objects), and their new checksum
    // is kept on the release.
    for round in 1..=2 {
        let sums = stored_checksums(&addon.sim);
        let before = helm_calls(&addon).len();
        addon.set_config("global", &format!("unused: {round}\n"));
        poll(
            || {
                let now = stored_checksums(&addon.sim);
                now.len() == 4
                    && now
                        .iter()
                        .zip(&sums)
                        .all(|(n, s)| (n.2 != s.2) == READ_GLOBAL.contains(&n.0.as_str()))
            },
            "the checksums of the modules reading global moved, and only theirs",
        );
        // rd (the last order) moved: the converge is over.
        let mut calls = helm_calls(&addon).split_off(before);
        calls.sort();
        assert_eq!(
            calls,
            ["helm:upgrade:rc", "helm:upgrade:rd"],
            "round {round}"
        );
        for m in ["ra", "rc", "rd"] {
            assert_eq!(addon.revisions(m), vec![1], "{m}");
        }
        assert_eq!(addon.revisions("rb"), vec![1, 2]);
    }

    // A `global` value the two read: they upgrade (one helm process each), the
    // others do not run helm.
    let before = helm_calls(&addon).len();
    addon.set_config("global", "unused: 2\nshown: hello\n");
    addon.wait_object("ConfigMap", "rd", |o| {
        o.is_some_and(|o| o["data"]["g"] == "hello")
    });
    poll(|| addon.revisions("rd") == [1, 2], "rd revision 2");
    let mut calls = helm_calls(&addon).split_off(before);
    calls.sort();
    assert_eq!(calls, ["helm:upgrade:rc", "helm:upgrade:rd"]);
    assert_eq!(addon.revisions("rc"), vec![1, 2]);
    assert_eq!(addon.revisions("ra"), vec![1]);
    let sim = Arc::clone(&addon.sim);
    stop(&mut addon);

    // So the restart after it finds every module unchanged: no helm process.
    let again = Addon::restart(Arc::clone(&sim), &refs, major);
    again.wait_ready();
    again.wait_log(&["helm upgrade not needed", "rd"], LONG);
    assert_eq!(helm_calls(&again), Vec::<String>::new());
    assert_eq!(cm_data(&again, "rb"), Some("hi".into()));
}

/// Waits until `cond` holds (a deadline, not a sleep as the assertion).
fn poll(cond: impl Fn() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + LONG;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "not in {LONG:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
