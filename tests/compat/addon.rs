//! The addon-operator corpus beside flant's addon-operator v1.5.0 (the newest release
//! the Go module proxy serves whole): global hooks (onStartup, beforeAll, afterAll,
//! kubernetes, schedule: its first context), three modules with beforeHelm/afterHelm/afterDeleteHelm
//! hooks, an `enabled` script, values patches from global and module hooks, OpenAPI
//! config/values schemas with defaults, and a ConfigMap with global and module
//! sections and `<module>Enabled`. Both run it in namespaces of their own on the same
//! real API server through the same ConfigMap steps; after each step the suite
//! compares what every hook received, which releases exist (and at which revision),
//! their `helm get values` and `helm get manifest`; at the end, the metric names and
//! label names. A difference fails unless [`ALLOWED`] names it (each is in the
//! README's "Differences from flant's operators").

use crate::addon_compare::{diff_maps, metric_gaps, patch, rec, release_state, runs_since};
use crate::addon_oracle::{AddonOp, Who, namespace_with_config, patch_config, releases, settle};
use serde_json::{Value, json};
use std::time::Duration;

/// Differences kept on purpose against v1.5.0: (what, why).
pub const ALLOWED: &[(&str, &str)] = &[
    (
        "module hooks' /values/global/enabledModules",
        "flant's docs give module hooks `global.enabledModules` (the enabled modules in \
         run order); v1.5.0 gives it only to `enabled` scripts; we follow the docs",
    ),
    (
        "/config/<module> null",
        "v1.5.0 writes `null` into $CONFIG_VALUES_PATH for a module without a ConfigMap \
         section; we write `{}` (a hook's `jq '.m | keys'` works)",
    ),
    (
        "enabled scripts' runs",
        "v1.5.0 runs every `enabled` script again when only a module's section changes \
         (its docs: only that module runs), and after a `global` change it hands them \
         the global values from before the change; ours runs them at the documented \
         points with the current values",
    ),
    (
        "<module>Enabled alone",
        "v1.5.0 ignores a ConfigMap change that only flips `<module>Enabled` (it acts \
         on the next change of a values section); ours enables/disables at once, as \
         the docs say; the suite's steps flip it together with the module's section",
    ),
    (
        "<module>Enabled in a module's own values.yaml",
        "v1.5.0 (and flant's newer static extender) reads `<module>Enabled` only from \
         modules/values.yaml; its docs (\"Keys in values.yaml files\") count the module's \
         own values.yaml too, as ours does; the generated corpus sets it only in \
         modules/values.yaml",
    ),
    (
        "<module>Enabled without a change of the enabled set",
        "ours reloads all modules (beforeAll, afterAll) on any `*Enabled` change, as the \
         docs say; v1.5.0 only when the set of enabled modules changes (e.g. not when a \
         module its `enabled` script disabled gets `<module>Enabled: false`); the \
         generated corpus compares such a step by its outcome only",
    ),
    (
        "helm values /global/enabledModules",
        "the chart's values carry `global.enabledModules` (flant v1.0 and its docs; \
         v1.5.0 leaves it out); a chart that renders it sees the list",
    ),
    (
        "the heritage label",
        "every release object gets `heritage: addon-operator` (flant's newer releases \
         add it with a post-renderer; v1.5.0 does not)",
    ),
    (
        "metrics outside addon_operator_",
        "Go runtime (`go_*`), `process_*` and `promhttp_*` series come from Go's \
         Prometheus client; ours has no Go runtime and exports none of them",
    ),
    (
        "kubernetes_client_* label names",
        "v1.5.0 labels its client-go metrics by url/verb (rate limiter) and \
         code/host/method (results); ours uses flant's newer `component`, `verb`, \
         `code` (README, Metrics)",
    ),
];

/// The corpus for an operator in `ns` (its kubernetes binding watches only `ns`).
pub fn corpus(ns: &str) -> Vec<(String, String)> {
    let mut files = vec![
        (
            "global-hooks/startup.sh".to_string(),
            rec(
                "g-startup",
                "configVersion: v1\nonStartup: 1",
                &patch("/global/fromStartup", "s"),
            ),
        ),
        (
            "global-hooks/before-all.sh".into(),
            rec("g-before-all", "configVersion: v1\nbeforeAll: 1", ""),
        ),
        (
            "global-hooks/after-all.sh".into(),
            rec("g-after-all", "configVersion: v1\nafterAll: 1", ""),
        ),
        (
            "global-hooks/kube.sh".into(),
            rec(
                "g-kube",
                &format!(
                    "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  \
                     namespace:\n    nameSelector:\n      matchNames: [{ns}]\n  \
                     labelSelector:\n    matchLabels: {{compat: addon}}\n  jqFilter: .data"
                ),
                "",
            ),
        ),
        (
            "global-hooks/schedule.sh".into(),
            rec(
                "g-sched",
                "configVersion: v1\nschedule:\n- name: every-second\n  crontab: \"* * * * * *\"",
                "",
            )
            // Only its first run is kept, apart (timing decides which step it falls in).
            .replace("\"$OUT_DIR/runs.log\"", "\"$OUT_DIR/sched.log\"")
            .replace("printf '%s {", "[ -s \"$OUT_DIR/sched.log\" ] || printf '%s {"),
        ),
        (
            "global-hooks/openapi/config-values.yaml".into(),
            "type: object\nproperties:\n  region: {type: string, default: eu}\n  \
             replicas: {type: integer, default: 1}\n"
                .into(),
        ),
        (
            "global-hooks/openapi/values.yaml".into(),
            "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  \
             fromStartup: {type: string}\n  owner: {type: string}\n"
                .into(),
        ),
        (
            "modules/values.yaml".into(),
            "global:\n  owner: compat\nalpha:\n  color: red\nalphaEnabled: true\n\
             betaEnabled: true\ngammaEnabled: false\n"
                .into(),
        ),
        (
            "modules/020-beta/enabled".into(),
            "#!/bin/sh\nprintf 'beta-enabled {\"ctx\":null,\"values\":%s,\"config\":%s}\\n' \
             \"$(tr -d '\\n' < \"$VALUES_PATH\")\" \"$(tr -d '\\n' < \"$CONFIG_VALUES_PATH\")\" >> \"$OUT_DIR/runs.log\"\n\
             if grep -q '\"region\":\"off\"' \"$VALUES_PATH\"; then echo false > \"$MODULE_ENABLED_RESULT\"; \
             else echo true > \"$MODULE_ENABLED_RESULT\"; fi\n"
                .into(),
        ),
    ];
    for dir in ["010-alpha", "020-beta", "030-gamma"] {
        let name = &dir[4..];
        let m = format!("modules/{dir}");
        files.extend([
            (
                format!("{m}/Chart.yaml"),
                format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
            ),
            (
                format!("{m}/templates/cm.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-values\ndata:\n  \
                     module: {{{{ .Values.{name} | toJson | quote }}}}\n  \
                     region: {{{{ .Values.global.region | quote }}}}\n  \
                     replicas: {{{{ .Values.global.replicas | quote }}}}\n  \
                     fromStartup: {{{{ .Values.global.fromStartup | quote }}}}\n"
                ),
            ),
            (
                format!("{m}/openapi/config-values.yaml"),
                "type: object\nproperties:\n  color: {type: string, default: blue}\n  \
                 size: {type: integer, default: 3}\n"
                    .into(),
            ),
            (
                format!("{m}/openapi/values.yaml"),
                "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  \
                 fromHook: {type: string}\n"
                    .into(),
            ),
            (
                format!("{m}/hooks/before-helm.sh"),
                rec(
                    &format!("{name}-before-helm"),
                    "configVersion: v1\nbeforeHelm: 1",
                    &patch(&format!("/{name}/fromHook"), "b"),
                ),
            ),
            (
                format!("{m}/hooks/after-helm.sh"),
                rec(
                    &format!("{name}-after-helm"),
                    "configVersion: v1\nafterHelm: 1",
                    "",
                ),
            ),
            (
                format!("{m}/hooks/after-delete.sh"),
                rec(
                    &format!("{name}-after-delete"),
                    "configVersion: v1\nafterDeleteHelm: 1",
                    "",
                ),
            ),
        ]);
    }
    files
}

/// The ConfigMap both start with.
pub const START_CONFIG: &[(&str, &str)] = &[("global", "region: us\n"), ("alpha", "size: 5\n")];

/// Writes `files` for [`AddonOp::start`].
pub fn start(who: Who, ns: &str) -> AddonOp {
    let files = corpus(ns);
    let refs: Vec<(&str, String)> = files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
    AddonOp::start(who, ns, &refs)
}

#[test]
fn the_same_modules_see_the_same_values_and_get_the_same_releases() {
    let flant_ns = namespace_with_config("compat-addon-flant", START_CONFIG);
    let ours_ns = namespace_with_config("compat-addon-ours", START_CONFIG);
    let flant = start(Who::Flant, &flant_ns);
    let ours = start(Who::Ours, &ours_ns);
    for op in [&flant, &ours] {
        op.wait_records("the first converge's afterAll", |r| {
            r.iter().any(|(t, _)| t == "g-after-all")
        });
    }
    settle(&[&flant, &ours], Duration::from_secs(4));

    let cm = |ns: &str| {
        control_plane::shared()
            .kubectl(&[
                "-n",
                ns,
                "create",
                "configmap",
                "watched",
                "--from-literal=k=v",
            ])
            .and_then(|_| {
                control_plane::shared().kubectl(&[
                    "-n",
                    ns,
                    "label",
                    "configmap",
                    "watched",
                    "compat=addon",
                ])
            })
            .unwrap_or_else(|e| panic!("{e}"));
    };
    type Step = (&'static str, Option<Value>);
    let steps: Vec<Step> = vec![
        ("start", None),
        (
            "a module's value changes",
            Some(json!({"alpha": "size: 7\n"})),
        ),
        (
            "a module is disabled",
            Some(json!({"alphaEnabled": "false", "alpha": "size: 8\n"})),
        ),
        (
            "the module is enabled again",
            Some(json!({"alphaEnabled": "true", "alpha": "size: 9\n"})),
        ),
        (
            "a disabled module is enabled",
            Some(json!({"gammaEnabled": "true", "gamma": "color: green\n"})),
        ),
        (
            "global changes",
            Some(json!({"global": "region: ap\nreplicas: 2\n"})),
        ),
        ("a watched object appears", None),
    ];
    let mut report = Vec::new();
    let mut from = (0, 0);
    for (i, (name, data)) in steps.iter().enumerate() {
        match data {
            Some(data) => {
                patch_config(&flant_ns, data);
                patch_config(&ours_ns, data);
            }
            None if i > 0 => {
                cm(&flant_ns);
                cm(&ours_ns);
            }
            None => {}
        }
        settle(&[&flant, &ours], Duration::from_secs(5));
        let (f, o) = (runs_since(&flant, from.0), runs_since(&ours, from.1));
        assert!(
            i == 0 || !f.is_empty() || *name == "a watched object appears",
            "step {name}: flant's hooks did not run: {}",
            flant.logs()
        );
        report.extend(diff_maps(&format!("step '{name}': runs of"), &f, &o));
        report.extend(diff_maps(
            &format!("step '{name}': release"),
            &release_state(&flant_ns),
            &release_state(&ours_ns),
        ));
        from = (flant.records().len(), ours.records().len());
    }
    let first_schedule = |op: &AddonOp| {
        let text = std::fs::read_to_string(op.dir.0.join("out/sched.log")).unwrap_or_default();
        let json = text.split_once(' ').map_or("null", |(_, j)| j.trim());
        serde_json::from_str::<Value>(json).unwrap_or(Value::Null)["ctx"].clone()
    };
    let sched = first_schedule(&flant);
    assert_eq!(
        sched[0]["type"], "Schedule",
        "flant's schedule hook ran: {sched}"
    );
    if sched != first_schedule(&ours) {
        report.push(format!(
            "the first schedule context:\n  flant: {sched}\n  ours:  {}",
            first_schedule(&ours)
        ));
    }
    report.extend(metric_gaps(&flant, &ours));
    if !releases(&flant_ns).contains_key("gamma") {
        let gamma: Vec<String> = flant
            .logs()
            .lines()
            .filter(|l| l.contains("gamma"))
            .map(String::from)
            .collect();
        report.push(format!("flant's operator never installed gamma: {gamma:?}"));
    }
    assert!(
        report.is_empty(),
        "{} difference(s) between flant's addon-operator v1.5.0 and ours:\n{}\n\
         (allowed, not counted: {:?})",
        report.len(),
        report.join("\n"),
        ALLOWED.iter().map(|(what, _)| *what).collect::<Vec<_>>()
    );
}
