//! Configurations written for flant's newer addon-operator releases (issue 30 item
//! 6) start ours: a `beforeDeleteHelm` hook (run right before `helm uninstall`),
//! executables under a module's `hooks/venv/` (not hooks), and an OpenAPI `$ref` to
//! another file of the module's `openapi/`. The `<module>Maintenance` key is in
//! `contract.rs`.

use crate::harness::{Addon, chart, eventually, rec, refs, rendered_values};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

#[test]
fn a_before_delete_helm_hook_runs_right_before_helm_uninstall() {
    let config = r#"{"configVersion":"v1","beforeDeleteHelm":1,"afterDeleteHelm":1}"#;
    let mut layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "goneEnabled: true\n".into()),
        ("modules/001-gone/hooks/h".into(), rec("gone", config, "")),
    ];
    layout.extend(chart("modules/001-gone", "gone", "gone"));
    let addon = Addon::start(&refs(&layout), Some(json!({})), 4);
    addon.wait_ready();
    eventually(&addon, "release gone installed", || {
        addon.revisions("gone") == vec![1]
    });
    assert!(
        !addon.steps().contains(&"gone".to_string()),
        "no delete hook ran while enabled: {:?}",
        addon.steps()
    );
    addon.set_config("goneEnabled", "false");
    eventually(&addon, "release gone uninstalled", || {
        addon.revisions("gone").is_empty()
    });
    eventually(&addon, "afterDeleteHelm ran", || {
        addon
            .runs()
            .iter()
            .any(|(_, c)| c[0]["binding"] == "afterDeleteHelm")
    });
    let order: Vec<String> = addon
        .runs()
        .into_iter()
        .filter_map(|(tag, ctx)| match tag.as_str() {
            "gone" => ctx[0]["binding"].as_str().map(String::from),
            t if t.starts_with("helm:uninstall") => Some(t.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        ["beforeDeleteHelm", "helm:uninstall:gone", "afterDeleteHelm"]
    );
}

#[test]
fn executables_under_hooks_venv_are_not_hooks() {
    let layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "pyEnabled: true\n".into()),
        (
            "modules/001-py/hooks/h".into(),
            rec("py", r#"{"configVersion":"v1","onStartup":1}"#, ""),
        ),
        // A virtualenv's interpreter and scripts: none answers --config.
        (
            "modules/001-py/hooks/venv/bin/python3".into(),
            "#!/bin/sh\necho 'not a hook' >&2\nexit 3\n".into(),
        ),
        (
            "modules/001-py/hooks/venv/bin/pip".into(),
            "#!/bin/sh\nexit 1\n".into(),
        ),
        (
            "modules/001-py/hooks/sub/venv/bin/activate".into(),
            "#!/bin/sh\nexit 1\n".into(),
        ),
    ];
    let addon = Addon::start(&refs(&layout), Some(json!({})), 4);
    addon.wait_ready();
    assert_eq!(addon.steps(), ["py"]);
    let hooks = addon.cli(&["hook", "list", "-o", "json"]);
    assert!(!hooks.contains("venv"), "{hooks}");
}

#[test]
fn an_openapi_ref_to_another_file_of_the_folder_is_resolved() {
    let mut layout: Vec<(String, String)> = vec![
        ("modules/values.yaml".into(), "webEnabled: true\n".into()),
        (
            "modules/001-web/openapi/config-values.yaml".into(),
            "type: object\nproperties:\n  listen:\n    $ref: 'shared/net.yaml#/definitions/listen'\n"
                .into(),
        ),
        (
            "modules/001-web/openapi/shared/net.yaml".into(),
            "definitions:\n  port: {type: integer, default: 8080}\n  listen:\n    type: object\n    \
             default: {}\n    properties:\n      port: {$ref: '#/definitions/port'}\n      \
             host: {type: string, default: 0.0.0.0}\n"
                .into(),
        ),
    ];
    layout.extend(chart("modules/001-web", "web", "web"));
    let addon = Addon::start(
        &refs(&layout),
        Some(json!({"web": "listen: {port: 9000}\n"})),
        4,
    );
    addon.wait_ready();
    // Defaults of the referenced file fill the section; the ConfigMap's value stays.
    eventually(&addon, "release web rendered", || {
        rendered_values(&addon, "web") == Some(json!({"listen": {"port": 9000, "host": "0.0.0.0"}}))
    });
    // The referenced schema validates: a string port is refused, the release stays.
    addon.set_config("web", "listen: {port: eighty}\n");
    addon.wait_log(&["ConfigMap is invalid", "listen"], LONG);
    assert_eq!(addon.revisions("web"), vec![1]);
}
