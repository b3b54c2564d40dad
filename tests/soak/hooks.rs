//! The soak's hooks dir: two kubernetes hooks (ConfigMaps and Secrets in namespace
//! `soak`, each on its own queue) that append every binding context they get to a
//! ledger file, a schedule hook that runs every second (and sleeps 0.8 s), and a validating webhook
//! hook that denies objects whose name starts with `bad`.

/// Namespace every driven object lives in.
pub const NAMESPACE: &str = "soak";

/// The two watched kinds: (kind, binding and ledger name).
pub const KINDS: [(&str, &str); 2] = [("ConfigMap", "cms"), ("Secret", "secrets")];

/// The annotation holding an object's update counter.
pub const COUNTER: &str = "soak/counter";

/// Path of the validating binding's webhook (its URL-safe name).
pub const WEBHOOK_PATH: &str = "/hooks/soak-example-com";

fn script(config: &str, body: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\ncat <<'CONFIG'\n{config}\nCONFIG\nexit 0\nfi\n{body}\n"
    )
}

/// A kubernetes hook on `kind` that writes each run's contexts as one line of
/// `$OUT_DIR/<binding>.ledger`. Only the filter result (name and counter) is kept.
fn ledger_hook(kind: &str, binding: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: {binding}\n  apiVersion: v1\n  kind: {kind}\n  \
         namespace:\n    nameSelector:\n      matchNames: [{NAMESPACE}]\n  keepFullObjectsInMemory: false\n  \
         jqFilter: '{{n: .metadata.name, c: .metadata.annotations[\"{COUNTER}\"]}}'\n  queue: {binding}"
    );
    let body = format!(
        "{{ tr -d '\\n' < \"$BINDING_CONTEXT_PATH\"; echo; }} >> \"$OUT_DIR/{binding}.ledger\""
    );
    script(&config, &body)
}

fn schedule_hook() -> String {
    let config =
        "configVersion: v1\nschedule:\n- name: tick\n  crontab: \"* * * * * *\"\n  queue: ticks";
    // The sleep keeps a child in the hook's group most of the time, so SIGTERM
    // usually finds one to stop.
    script(config, "date +%s >> \"$OUT_DIR/ticks.log\"\nsleep 0.8")
}

fn validating_hook() -> String {
    let config = "configVersion: v1\nkubernetesValidating:\n- name: soak.example.com\n  rules:\n  \
                  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    \
                  resources: [\"configmaps\"]\n    scope: Namespaced";
    let body = "if grep -q '\"name\":\"bad' \"$BINDING_CONTEXT_PATH\"; then\n  \
                echo '{\"allowed\":false,\"message\":\"bad names are forbidden\"}' > \"$VALIDATING_RESPONSE_PATH\"\n\
                else\n  echo '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"\nfi";
    script(config, body)
}

/// Every hook file: (path under the hooks dir, content).
pub fn all() -> Vec<(&'static str, String)> {
    vec![
        ("10-cms.sh", ledger_hook(KINDS[0].0, KINDS[0].1)),
        ("20-secrets.sh", ledger_hook(KINDS[1].0, KINDS[1].1)),
        ("30-schedule.sh", schedule_hook()),
        ("40-validate.sh", validating_hook()),
    ]
}
