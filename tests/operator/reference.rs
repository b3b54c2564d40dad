//! `docs/reference.md` lists every self metric of both programs, and this test
//! keeps it true, in both directions: a family the code registers and the
//! reference lacks fails, and so does a row for a family the code does not
//! register, or with another type or other labels.
//!
//! Where the registered names come from: a scrape of `/metrics` cannot list them
//! all, because a labelled family shows only once it has a sample (no
//! `module_delete_errors_total` line before the first failed delete). Every self
//! metric is registered through one registry that records each family as it is
//! registered, samples or not (`shell_operator::metrics::Families`);
//! `shell_operator::metric_reference::every_family` calls each registration function the
//! startup calls (core metrics, the Kubernetes clients' by component, the
//! webhooks', `ha_is_leader`, addon-operator's own) and returns that record. So a
//! metric added to any of those functions is seen here with nothing else to
//! change. What that list could miss is a new registration function the startup
//! calls and `every_family` does not: [`scraped_families_are_registered`] closes
//! that gap for what a real binary exports, by starting shell-operator against
//! kube-sim with a kubernetes hook and `--ha` and checking every `# TYPE` family
//! it serves against the same list; `tests/addon/metrics.rs`
//! (`every_served_family_is_in_the_reference_list`) does the same for a real
//! addon-operator with a module and global hooks. The webhook families are covered
//! by the list only (no scrape starts a webhook server here).

use crate::common;
use common::{Operator, hook};
use kube_sim::Sim;
use shell_operator::flags::Program;
use shell_operator::metric_reference::every_family;
use shell_operator::metrics::Family;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One row of the reference: type and label names.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    kind: String,
    labels: Vec<String>,
}

/// The reference's metric tables, by section heading: `name → row`.
fn doc_tables() -> BTreeMap<String, BTreeMap<String, Row>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference.md");
    let text = std::fs::read_to_string(path).expect("docs/reference.md");
    let mut tables: BTreeMap<String, BTreeMap<String, Row>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("### ") {
            section = h.trim().to_string();
        } else if line.starts_with("## ") {
            section.clear();
        } else if let Some((name, row)) = parse_row(line) {
            let table = tables.entry(section.clone()).or_default();
            assert!(
                table.insert(name.clone(), row).is_none(),
                "{name} twice in section {section:?}"
            );
        }
    }
    tables
}

/// `| `name` | type | `a`, `b` | meaning |` → (name, row); other lines → None.
fn parse_row(line: &str) -> Option<(String, Row)> {
    let cells: Vec<&str> = line
        .trim()
        .strip_prefix('|')?
        .split('|')
        .map(str::trim)
        .collect();
    let name = cells.first()?.strip_prefix('`')?.strip_suffix('`')?;
    let labels = cells
        .get(2)?
        .split(',')
        .map(|l| l.trim().trim_matches('`').to_string())
        .filter(|l| !l.is_empty() && l != "—")
        .collect();
    Some((
        name.to_string(),
        Row {
            kind: cells.get(1)?.to_string(),
            labels,
        },
    ))
}

/// The name as the reference writes it: without the prefix, or with
/// `<prefix>` where the prefix is inside the name (`d8_telemetry_<prefix>…`).
fn doc_name(full: &str, prefix: &str) -> String {
    match full.strip_prefix(prefix) {
        Some(rest) => rest.to_string(),
        None => full.replacen(prefix, "<prefix>", 1),
    }
}

fn default_prefix(program: Program) -> &'static str {
    match program {
        Program::Shell => "shell_operator_",
        Program::Addon => "addon_operator_",
    }
}

fn registered(program: Program) -> BTreeMap<String, Row> {
    let prefix = default_prefix(program);
    every_family(program, prefix)
        .expect("registration")
        .into_iter()
        .map(|f: Family| {
            let row = Row {
                kind: f.kind.to_string(),
                labels: f.labels,
            };
            (doc_name(&f.name, prefix), row)
        })
        .collect()
}

/// The rows `program` has in the reference: "Both programs" plus its own section.
fn documented(program: Program) -> BTreeMap<String, Row> {
    let own = match program {
        Program::Shell => "shell-operator only",
        Program::Addon => "addon-operator only",
    };
    let mut tables = doc_tables();
    let mut rows = tables.remove("Both programs").unwrap_or_default();
    for (name, row) in tables.remove(own).unwrap_or_default() {
        assert!(
            rows.insert(name.clone(), row).is_none(),
            "{name} both in 'Both programs' and in '{own}'"
        );
    }
    rows
}

fn row_text(name: &str, r: &Row) -> String {
    let labels: Vec<String> = r.labels.iter().map(|l| format!("`{l}`")).collect();
    let labels = if labels.is_empty() {
        "—".to_string()
    } else {
        labels.join(", ")
    };
    format!("| `{name}` | {} | {labels} | … |", r.kind)
}

fn check(program: Program) {
    let code = registered(program);
    let doc = documented(program);
    let mut problems = Vec::new();
    for (name, row) in &code {
        match doc.get(name) {
            None => problems.push(format!(
                "missing from the reference: {}",
                row_text(name, row)
            )),
            Some(d) if d != row => problems.push(format!(
                "differs: the reference has {}, the code registers {}",
                row_text(name, d),
                row_text(name, row)
            )),
            Some(_) => {}
        }
    }
    for (name, row) in &doc {
        if !code.contains_key(name) {
            problems.push(format!(
                "not registered by the code: {}",
                row_text(name, row)
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/reference.md and the {program:?} metrics disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn reference_lists_every_shell_operator_metric() {
    check(Program::Shell);
}

#[test]
fn reference_lists_every_addon_operator_metric() {
    check(Program::Addon);
}

/// `# TYPE name kind` lines of the operator's own families in a `/metrics` text
/// (the hooks' metrics follow them and may not use the prefix).
fn exposed_types(body: &str, prefix: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.starts_with(prefix) || name.starts_with("d8_telemetry_"))
        .map(|(name, kind)| (name.to_string(), kind.trim().to_string()))
        .collect()
}

/// The real binary, with a kubernetes binding (the client's and the kube_*
/// families get samples) and `--ha` (`ha_is_leader`): every family it serves on
/// `/metrics` is one `every_family` lists, with the same type, so that list (and
/// through it the reference) cannot lack a family the startup registers.
#[test]
fn scraped_families_are_registered() {
    let sim = Sim::start();
    let dir = common::TempDir::new("reference");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let kc = kubeconfig.to_str().expect("utf8").to_string();
    let config = r#"{"configVersion":"v1","onStartup":1,
        "kubernetes":[{"name":"cms","apiVersion":"v1","kind":"ConfigMap","jqFilter":".metadata.name"}]}"#;
    let hooks = [("cms.sh", hook("cms", config, ""))];
    let args = ["--kube-config", &kc, "--namespace", "default", "--ha"];
    let op = Operator::start(&hooks, &args, &[]);
    // onStartup and the Synchronization both ran: the hook run, queue and kube
    // families have samples by then.
    op.wait_runs(Duration::from_secs(60), |runs| runs.len() >= 2);
    let prefix = default_prefix(Program::Shell);
    let families: BTreeMap<String, String> = every_family(Program::Shell, prefix)
        .expect("registration")
        .into_iter()
        .map(|f| (f.name, f.kind.to_string()))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    let exposed = loop {
        let exposed = exposed_types(&op.http_get("/metrics").1, prefix);
        let client = format!("{prefix}kubernetes_client_request_result_total");
        if exposed.contains_key(&client) || Instant::now() > deadline {
            break exposed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // A few that must be there, so that an empty scrape cannot pass.
    for base in [
        "live_ticks",
        "hook_run_seconds",
        "kube_snapshot_objects",
        "kubernetes_client_request_result_total",
        "ha_is_leader",
    ] {
        let name = format!("{prefix}{base}");
        assert!(
            exposed.contains_key(&name),
            "{name} not served:\n{exposed:#?}"
        );
    }
    for (name, kind) in &exposed {
        assert_eq!(
            families.get(name),
            Some(kind),
            "{name} ({kind}) is served but every_family does not list it as such"
        );
    }
}
