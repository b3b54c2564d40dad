//! The generated shell-operator corpus, part two: a generated case's hooks as files
//! (the `--config` YAML, the recorder and the patch operations) and its steps as API
//! calls, for one operator's copy ([`Side`]).
//!
//! Every hook with kubernetes bindings gets one more, `probe`: a ConfigMap in the
//! side's probe namespace, fired on Modified only, including every other binding's
//! snapshot. After each step has settled the runner changes the probe, so each such
//! hook runs once more and shows its whole snapshot state at that point, whatever
//! order its events came in. A run for the probe alone writes no patches.

use crate::gen_shell::{Binding, Hook, Kind, LabelSel, NsSel, OpKind, PROBE_MARKER, Side, Step};
use crate::oracle::recorder;
use serde_json::{Value, json};
use shell_operator::kube::{Client, Patch, PatchParams, Propagation};
use std::fmt::Write as _;

fn list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

fn label_selector(out: &mut String, indent: &str, labels: &[(String, String)], exprs: &[String]) {
    let _ = writeln!(out, "{indent}labelSelector:");
    if !labels.is_empty() {
        let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = writeln!(out, "{indent}  matchLabels: {{{}}}", pairs.join(", "));
    }
    if !exprs.is_empty() {
        let _ = writeln!(out, "{indent}  matchExpressions:");
        for e in exprs {
            let _ = writeln!(out, "{indent}  - {e}");
        }
    }
}

impl Binding {
    fn render(&self, side: &Side, out: &mut String, others: &[String]) {
        let _ = writeln!(out, "- name: {}", self.name);
        if self.api_version {
            out.push_str("  apiVersion: v1\n");
        }
        let _ = writeln!(out, "  kind: {}", self.kind.name());
        let (mut match_labels, mut exprs) = (Vec::new(), Vec::new());
        match &self.labels {
            Some(LabelSel::Match(pairs)) => {
                match_labels.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            }
            Some(LabelSel::Exprs(list_)) => exprs.extend(list_.iter().map(|(k, op, values)| {
                if values.is_empty() {
                    format!("{{key: {k}, operator: {op}}}")
                } else {
                    let v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
                    format!("{{key: {k}, operator: {op}, values: {}}}", list(&v))
                }
            })),
            None => {}
        }
        let ns_names = |idx: &[usize]| -> String {
            list(
                &idx.iter()
                    .map(|i| side.namespaces[*i].clone())
                    .collect::<Vec<_>>(),
            )
        };
        if self.kind == Kind::Namespace {
            match &self.ns {
                NsSel::Names(idx) => {
                    let _ = writeln!(out, "  nameSelector:\n    matchNames: {}", ns_names(idx));
                }
                NsSel::CaseLabel => match_labels.insert(0, ("gen-case".into(), side.token.clone())),
            }
        } else {
            match &self.ns {
                NsSel::Names(idx) => {
                    let _ = writeln!(
                        out,
                        "  namespace:\n    nameSelector:\n      matchNames: {}",
                        ns_names(idx)
                    );
                }
                NsSel::CaseLabel => {
                    let _ = writeln!(
                        out,
                        "  namespace:\n    labelSelector:\n      matchLabels: {{gen-case: {}}}",
                        side.token
                    );
                }
            }
            if let Some(names) = &self.names {
                let n: Vec<String> = names.iter().map(|s| s.to_string()).collect();
                let _ = writeln!(out, "  nameSelector:\n    matchNames: {}", list(&n));
            }
        }
        if !match_labels.is_empty() || !exprs.is_empty() {
            label_selector(out, "  ", &match_labels, &exprs);
        }
        if let Some((op, value)) = self.field {
            let _ = writeln!(
                out,
                "  fieldSelector:\n    matchExpressions:\n    - {{field: metadata.name, operator: {op}, value: {value}}}"
            );
        }
        if let Some(jq) = self.jq {
            let _ = writeln!(out, "  jqFilter: '{jq}'");
        }
        if let Some(events) = &self.on_event {
            let e: Vec<String> = events.iter().map(|s| s.to_string()).collect();
            let _ = writeln!(out, "  executeHookOnEvent: {}", list(&e));
        }
        if let Some(v) = self.on_sync {
            let _ = writeln!(out, "  executeHookOnSynchronization: {v}");
        }
        if let Some(v) = self.keep_full {
            let _ = writeln!(out, "  keepFullObjectsInMemory: {v}");
        }
        if let Some(g) = self.group {
            let _ = writeln!(out, "  group: {g}");
        }
        if let Some(q) = self.queue {
            let _ = writeln!(out, "  queue: {q}");
        }
        // Only names of the hook's other bindings (a shrunk case may have lost some).
        let include: Vec<String> = self
            .include
            .iter()
            .filter(|n| others.contains(n) && **n != self.name)
            .cloned()
            .collect();
        if !include.is_empty() {
            let _ = writeln!(out, "  includeSnapshotsFrom: {}", list(&include));
        }
    }
}

impl Hook {
    /// The hook's `--config` output for `side`.
    pub(crate) fn config(&self, side: &Side) -> String {
        let mut out = String::from("configVersion: v1\n");
        if let Some(order) = self.on_startup {
            let _ = writeln!(out, "onStartup: {order}");
        }
        if self.bindings.is_empty() {
            return out;
        }
        let names: Vec<String> = self.bindings.iter().map(|b| b.name.clone()).collect();
        out.push_str("kubernetes:\n");
        for b in &self.bindings {
            b.render(side, &mut out, &names);
        }
        let _ = writeln!(
            out,
            "- name: probe\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{}]\n  \
             nameSelector:\n    matchNames: [probe]\n  jqFilter: .data\n  executeHookOnEvent: [Modified]\n  \
             includeSnapshotsFrom: {}",
            side.probe_ns,
            list(&names)
        );
        out
    }

    /// The lines the hook writes to `$KUBERNETES_PATCH_PATH` for `side`.
    pub(crate) fn patch_lines(&self, side: &Side) -> Vec<String> {
        self.ops
            .iter()
            .map(|op| {
                let ns = &side.namespaces[op.ns];
                let labels: serde_json::Map<String, Value> = op
                    .labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                let target = json!({"kind": "ConfigMap", "namespace": ns, "name": op.name});
                let mut line = match op.kind {
                    OpKind::Create | OpKind::CreateIfNotExists | OpKind::CreateOrUpdate => json!({
                        "object": {"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": op.name, "namespace": ns, "labels": labels},
                            "data": {"p": op.value}}}),
                    OpKind::MergePatch => {
                        let mut t = target.clone();
                        t["mergePatch"] =
                            json!({"data": {"m": op.value}, "metadata": {"labels": labels}});
                        t
                    }
                    OpKind::JsonPatch => {
                        let mut t = target.clone();
                        t["jsonPatch"] =
                            json!([{"op": "add", "path": "/data/j", "value": op.value}]);
                        t
                    }
                    OpKind::JqPatch => {
                        let mut filter = format!(".data.q = \"{}\"", op.value);
                        for (k, v) in &op.labels {
                            let _ = write!(filter, " | .metadata.labels.{k} = \"{v}\"");
                        }
                        let mut t = target.clone();
                        t["jqFilter"] = json!(filter);
                        t
                    }
                    OpKind::DeleteInBackground | OpKind::DeleteNonCascading => target.clone(),
                };
                line["operation"] = json!(
                    format!("{:?}", op.kind)
                        .replace("JsonPatch", "JSONPatch")
                        .replace("JqPatch", "JQPatch")
                );
                if op.ignore_missing {
                    line["ignoreMissingObject"] = json!(true);
                }
                line.to_string()
            })
            .collect()
    }

    /// The executable: records its context (`oracle::recorder`), then, unless the run
    /// is the probe's alone, sleeps if slow and writes its patch operations.
    pub(crate) fn script(&self, side: &Side) -> String {
        let mut s = recorder(&self.tag, &self.config(side));
        let _ = writeln!(
            s,
            "if grep -q {PROBE_MARKER} \"$BINDING_CONTEXT_PATH\"; then exit 0; fi"
        );
        // Until the start has settled (the runner writes `$OUT_DIR/started`), a
        // Synchronization run writes nothing: its change to an object a later binding
        // of the same hook watches races that binding's Synchronization read, in both
        // operators (folded into the Synchronization, or a Modified after it).
        let _ = writeln!(
            s,
            "if [ ! -e \"$OUT_DIR/started\" ] && grep -Eq '\"type\": ?\"(Synchronization|Group)\"' \"$BINDING_CONTEXT_PATH\"; then exit 0; fi"
        );
        if self.slow {
            s.push_str("sleep 0.3\n");
        }
        let lines = self.patch_lines(side);
        if !lines.is_empty() {
            let _ = writeln!(
                s,
                "cat > \"$KUBERNETES_PATCH_PATH\" <<'PATCH'\n{}\nPATCH",
                lines.join("\n")
            );
        }
        s
    }
}

/// Our kube client with the control plane's admin kubeconfig.
pub(crate) fn client() -> Client {
    let settings = shell_operator::kube::KubeSettings {
        kubeconfig: control_plane::shared()
            .admin_kubeconfig()
            .display()
            .to_string(),
        qps: -1.0,
        ..Default::default()
    };
    Client::from_config(&settings).expect("kube client")
}

fn api<'a>(client: &'a Client, kind: Kind, ns: Option<&str>) -> shell_operator::kube::Api<'a> {
    let resource = client
        .resolve("v1", kind.name(), "generated corpus")
        .expect("resolve");
    client.api(&resource, ns)
}

/// Creates `obj` (any JSON object) of `kind`.
pub(crate) fn create(client: &Client, kind: Kind, obj: &Value) -> Result<(), String> {
    let ns = obj["metadata"]["namespace"].as_str();
    api(client, kind, ns)
        .create(obj)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Merge-patches an object.
pub(crate) fn merge(
    client: &Client,
    kind: Kind,
    ns: Option<&str>,
    name: &str,
    patch: Value,
) -> Result<(), String> {
    api(client, kind, ns)
        .patch(name, &Patch::Merge(patch), &PatchParams::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Makes `step` on `side`'s copy; an error (an object a shrunk case no longer has)
/// is returned, to be compared like the rest.
pub(crate) fn apply(client: &Client, side: &Side, step: &Step) -> Result<(), String> {
    match step {
        Step::Create(obj) => create(client, obj.kind, &obj.json(side)),
        Step::Label(kind, ns, name, key, value) => merge(
            client,
            *kind,
            Some(&side.namespaces[*ns]),
            name,
            json!({"metadata": {"labels": {*key: value}}}),
        ),
        Step::Data(kind, ns, name, key, value) => merge(
            client,
            *kind,
            Some(&side.namespaces[*ns]),
            name,
            json!({"data": {*key: value}}),
        ),
        Step::Annotate(kind, ns, name, value) => merge(
            client,
            *kind,
            Some(&side.namespaces[*ns]),
            name,
            json!({"metadata": {"annotations": {"note": value}}}),
        ),
        Step::Delete(kind, ns, name) => api(client, *kind, Some(&side.namespaces[*ns]))
            .delete(name, Some(Propagation::Background))
            .map_err(|e| e.to_string()),
        Step::NsLabel(ns, value) => merge(
            client,
            Kind::Namespace,
            None,
            &side.namespaces[*ns],
            json!({"metadata": {"labels": {"tier": value}}}),
        ),
    }
}
