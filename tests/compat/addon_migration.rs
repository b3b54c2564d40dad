//! Migration between flant's addon-operator v1.5.0 and ours, both ways, on the real
//! API server (README, "Migrating from flant's addon-operator"): flant's converges
//! the corpus of `addon.rs` in a namespace and stops; ours starts on the same
//! namespace, ConfigMap and modules and must leave every release as it is (0 new helm
//! revisions) while its hooks see the values flant's saw; ours then upgrades one
//! release for a ConfigMap change, stops, and flant's starts again: again 0 new
//! revisions (ours wrote the checksum flant's reads).

use crate::addon::{START_CONFIG, start};
use crate::addon_oracle::{AddonOp, Who, namespace_with_config, patch_config, releases, settle};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// Waits for `op`'s first converge (its afterAll hook ran) and for quiet.
fn converged(op: &AddonOp) {
    op.wait_records("the first converge's afterAll", |r| {
        r.iter().any(|(t, _)| t == "g-after-all")
    });
    settle(&[op], Duration::from_secs(5));
}

/// The values each module hook saw last, `global.enabledModules` left out (ours
/// gives it to module hooks, v1.5.0 does not: README, "Differences").
fn module_values(op: &AddonOp) -> BTreeMap<String, Value> {
    op.records()
        .into_iter()
        .filter(|(t, _)| !t.starts_with("g-") && !t.ends_with("-enabled"))
        .map(|(t, mut r)| {
            if let Some(g) = r
                .pointer_mut("/values/global")
                .and_then(Value::as_object_mut)
            {
                g.remove("enabledModules");
            }
            (t, r["values"].clone())
        })
        .collect()
}

#[test]
fn releases_pass_from_flant_to_ours_and_back_without_a_new_revision() {
    let ns = namespace_with_config("compat-addon-move", START_CONFIG);
    let flant = start(Who::Flant, &ns);
    converged(&flant);
    let installed = releases(&ns);
    assert_eq!(
        installed.keys().map(String::as_str).collect::<Vec<_>>(),
        ["alpha", "beta"],
        "flant's v1.5.0 installed the enabled modules: {}",
        flant.logs()
    );
    assert!(
        installed
            .values()
            .all(|(rev, status)| *rev == 1 && status == "deployed")
    );
    let flant_saw = module_values(&flant);
    flant.stop();

    let ours = start(Who::Ours, &ns);
    converged(&ours);
    assert_eq!(
        releases(&ns),
        installed,
        "ours took over without a new revision; logs:\n{}",
        ours.logs()
    );
    let ours_saw = module_values(&ours);
    assert_eq!(ours_saw, flant_saw, "module hooks saw the same values");
    assert!(ours_saw.contains_key("alpha-after-helm"), "{ours_saw:?}");

    // Ours upgrades alpha for a ConfigMap change: revision 2, written by ours.
    patch_config(&ns, &json!({"alpha": "size: 6\n"}));
    ours.wait_records("alpha's afterHelm with size 6", |r| {
        r.iter()
            .any(|(t, v)| t == "alpha-after-helm" && v["values"]["alpha"]["size"] == 6)
    });
    settle(&[&ours], Duration::from_secs(3));
    let mut upgraded = installed.clone();
    upgraded.insert("alpha".into(), (2, "deployed".into()));
    assert_eq!(releases(&ns), upgraded, "ours upgraded alpha once");
    let ours_saw = module_values(&ours);
    ours.stop();

    // flant's v1.5.0 hashes its own `helm template` output (MD5) and compares it
    // with the release's `_addonOperatorModuleChecksum`: ours wrote the same.
    let back = start(Who::Flant, &ns);
    converged(&back);
    assert_eq!(
        releases(&ns),
        upgraded,
        "flant's took them back without a new revision; logs:\n{}",
        back.logs()
    );
    // A fresh start's beforeHelm sees no values patches yet; afterHelm's compare.
    let after_helm = |m: BTreeMap<String, Value>| {
        m.into_iter()
            .filter(|(t, _)| t.ends_with("-after-helm"))
            .collect::<BTreeMap<_, _>>()
    };
    let back_saw = after_helm(module_values(&back));
    assert_eq!(back_saw.len(), 2, "{back_saw:?}");
    assert_eq!(back_saw, after_helm(ours_saw), "and saw the same values");
}
