//! Release auto-healing: the resource monitor (`--resources-check-period`, 1 s here)
//! puts back a rendered object deleted from the cluster and redeploys a release
//! whose latest revision is not `deployed`, counting both, with one list per kind
//! and namespace per check.

use crate::harness::{Addon, NS};
use serde_json::Value;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

fn layout() -> Vec<(String, String)> {
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n")
    };
    vec![
        ("modules/values.yaml".into(), "healEnabled: true\n".into()),
        (
            "modules/001-heal/Chart.yaml".into(),
            "apiVersion: v2\nname: heal\nversion: 0.0.1\n".into(),
        ),
        ("modules/001-heal/templates/a.yaml".into(), cm("heal-a")),
        ("modules/001-heal/templates/b.yaml".into(), cm("heal-b")),
        ("modules/001-heal/templates/c.yaml".into(), cm("heal-c")),
    ]
}

fn count(body: &str, series: &str) -> Option<f64> {
    crate::common::metric(body, series)
}

#[test]
fn deleted_objects_come_back_and_unexpected_releases_are_redeployed() {
    let files = layout();
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    let period = [("ADDON_OPERATOR_RESOURCES_CHECK_PERIOD", "1s")];
    let addon = Addon::start_with(&refs, None, 4, &period);
    addon.wait_ready();
    assert_eq!(addon.revisions("heal"), vec![1]);

    // A check lists ConfigMaps once for the three objects.
    let requests = addon.sim.requests().len();
    std::thread::sleep(Duration::from_millis(3500));
    let window: Vec<String> = addon.sim.requests().split_off(requests);
    let is = |r: &String, what: &str| {
        r.starts_with(&format!("GET /api/v1/namespaces/{NS}/{what}")) && !r.contains("watch")
    };
    let cm_lists = window
        .iter()
        .filter(|r| is(r, "configmaps") && !r.contains("fieldSelector"))
        .count();
    let checks = window
        .iter()
        .filter(|r| r.ends_with("/secrets?labelSelector=owner%3Dhelm"))
        .count();
    assert!(checks >= 2, "{window:#?}");
    assert_eq!(
        cm_lists, checks,
        "one ConfigMap list per check: {window:#?}"
    );

    // A deleted object comes back.
    addon
        .sim
        .delete("v1", "ConfigMap", NS, "heal-b")
        .expect("delete");
    addon.wait_object("ConfigMap", "heal-b", |o| o.is_some());
    let series = r#"addon_operator_modules_absent_resources_total{module="heal",resource="addons/ConfigMap/heal-b"} "#;
    assert_eq!(count(&addon.metrics(), series), Some(1.0));
    assert_eq!(addon.revisions("heal"), vec![1, 2], "one run, one upgrade");

    // A release whose latest revision is marked failed is redeployed. helm writes
    // revision 2 `deployed` last, after the objects: mark it only after that.
    let deadline = Instant::now() + LONG;
    loop {
        let secret = addon
            .sim
            .get("v1", "Secret", NS, "sh.helm.release.v1.heal.v2");
        if let Some(mut secret) = secret.filter(|s| s["metadata"]["labels"]["status"] == "deployed")
        {
            secret["metadata"]["labels"]["status"] = "failed".into();
            if addon.sim.update(secret).is_ok() {
                break;
            }
        }
        assert!(Instant::now() < deadline, "revision 2 never deployed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + LONG;
    while addon.revisions("heal") != vec![1, 2, 3] {
        assert!(
            Instant::now() < deadline,
            "not redeployed: {:?}\n{}",
            addon.revisions("heal"),
            addon.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let series = r#"addon_operator_modules_helm_release_redeployed_total{module="heal"} "#;
    assert_eq!(count(&addon.metrics(), series), Some(1.0));

    // The debug CLI shows what the monitor watches.
    let watched: Value =
        serde_json::from_str(&addon.cli(&["module", "resource-monitor", "-o", "json"]))
            .expect("json");
    let mut objects: Vec<String> = serde_json::from_value(watched["heal"].clone()).expect("list");
    objects.sort();
    assert_eq!(
        objects,
        vec![
            "addons/ConfigMap/heal-a",
            "addons/ConfigMap/heal-b",
            "addons/ConfigMap/heal-c"
        ]
    );
}
