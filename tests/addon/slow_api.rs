//! A hook's config patch is written to the ConfigMap without holding the addon
//! state's lock (issue 42): while the API server does not answer that write, events
//! are still routed and other queues' hooks still run.

use crate::harness::{Addon, NS, rec, within};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

/// The runs recorded under `tag`.
fn runs_of(addon: &Addon, tag: &str) -> usize {
    addon.runs().iter().filter(|(t, _)| t == tag).count()
}

fn binding(name: &str, label: &str, queue: &str) -> String {
    format!(
        r#"{{"configVersion":"v1","kubernetes":[{{"name":"{name}","apiVersion":"v1","kind":"ConfigMap",
        "labelSelector":{{"matchLabels":{{"{label}":"me"}}}},"namespace":{{"nameSelector":{{"matchNames":["{NS}"]}}}},
        "executeHookOnSynchronization":false,"queue":"{queue}"}}]}}"#
    )
}

#[test]
fn events_are_routed_while_a_config_patch_waits_for_the_api_server() {
    let files: Vec<(&str, String)> = vec![
        ("modules/values.yaml", "wEnabled: true\nw: {}\n".into()),
        (
            "modules/001-w/hooks/writer",
            rec(
                "writer",
                &binding("writes", "write", "writer"),
                r#"echo '[{"op":"add","path":"/w/saved","value":"x"}]' > "$CONFIG_VALUES_JSON_PATCH_PATH""#,
            ),
        ),
        (
            "global-hooks/hooks/watcher",
            rec("watcher", &binding("watches", "watch", "watcher"), ""),
        ),
    ];
    // The operator's requests carry the token "op", so the test can hold them.
    let before = |root: &std::path::Path| {
        let sim_config = root.join("kubeconfig");
        let text = std::fs::read_to_string(&sim_config).expect("kubeconfig");
        let text = text.replace("user: {}\n", "user:\n    token: op\n");
        std::fs::write(&sim_config, text).expect("kubeconfig");
    };
    let addon = Addon::start_after(&files, None, 4, &[], &before);
    addon.wait_ready();
    let cm = |name: &str, label: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": NS, "labels": {label: "me"}}})
    };
    // The API server stops answering the operator; its watches keep streaming.
    addon.sim.pause_client("op");
    addon.sim.create(cm("trigger", "write")).expect("create");
    within(&addon, "the writer ran", LONG, || {
        runs_of(&addon, "writer") == 1
    });
    std::thread::sleep(Duration::from_millis(500));
    addon.sim.create(cm("event", "watch")).expect("create");
    within(
        &addon,
        "the watcher ran while the write waits",
        Duration::from_secs(10),
        || runs_of(&addon, "watcher") == 1,
    );
    assert!(addon.configmap_data().is_null(), "the write is still held");

    addon.sim.resume_client("op");
    within(&addon, "the config patch saved", LONG, || {
        addon.configmap_data()["w"].as_str() == Some("saved: x\n")
    });
}
