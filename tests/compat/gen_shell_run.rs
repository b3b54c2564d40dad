//! The generated shell-operator corpus, part three: runs a generated case
//! (`gen_shell`) under flant's shell-operator v1.20.2 and ours on the real API
//! server, compares what the hooks received and what their patches left, and
//! shrinks a case that differs to the smallest that still does.
//!
//! Both operators' event order across queues and how events are combined into runs
//! are timing, so the comparison is made per phase (the start, then each step,
//! applied only after the previous one settled) and per hook, and only of what
//! neither operator leaves to timing:
//! - the multiset of the binding contexts the hook received in the phase, without
//!   their snapshots (combining keeps every ungrouped context);
//! - for grouped bindings, which groups fired in the phase (a group's contexts
//!   collapse to a number that depends on timing);
//! - the probe run after the phase (`gen_shell_render`): every binding's snapshot;
//! - the ConfigMaps and Secrets in the case's namespaces after the phase;
//! - the environment variable names each hook saw, and every step's API outcome.
//!
//! Names that differ by construction (namespaces, the case label) are mapped back to
//! NS0…/PROBE/TOKEN, and what only the server decides (uid, resourceVersion,
//! timestamps) is dropped, before anything is compared. Named flant quirks
//! ([`QUIRKS`]) are left out of flant's side; a configuration both operators refuse
//! at startup is an agreement.
//!
//! `cargo test --test compat generated` runs the fixed seeds; `GENERATED_SEEDS=N`
//! seeds 1..=N instead, `SEED=n` one seed (`make test-compat-generated N=…`).

use crate::common::Operator;
use crate::gen_shell::{Case, Kind, Side};
use crate::gen_shell_render::{apply, client, create, merge};
use crate::oracle::{Pair, differences, env_by_tag, json_diff, normalise};
use serde_json::{Value, json};
use shell_operator::kube::{Client, ListParams};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// How long neither operator's hooks must run for a phase to count as settled.
const QUIET: Duration = Duration::from_millis(1500);
/// Differences kept on purpose: (text in the difference, why). Each is in the
/// README's "Differences from flant's operators".
const ALLOWED: &[(&str, &str)] = &[];

/// flant quirks left out of flant's side before comparing, each with why; each is in
/// the README's "Differences from flant's operators" and done by [`drop_quirks`].
pub(crate) const QUIRKS: &[(&str, &str)] = &[(
    "Synchronization despite executeHookOnSynchronization: false",
    "a hook's Synchronization run for a grouped binding combines the Synchronization \
     tasks queued behind it for the same hook, and flant checks \
     executeHookOnSynchronization only for the first, so a later binding with \
     `executeHookOnSynchronization: false` gets its Synchronization context anyway; we \
     follow the setting (SEED=65 minimised: a grouped binding, then one with the \
     setting false)",
)];

/// Takes [`QUIRKS`] out of flant's observations of `case`: the Synchronization
/// contexts (start phase) of bindings with executeHookOnSynchronization false in a
/// hook that has a grouped binding. How many were taken out.
fn drop_quirks(case: &Case, flant: &mut Observed) -> usize {
    let mut dropped = 0;
    for hook in &case.hooks {
        if !hook.bindings.iter().any(|b| b.group.is_some()) {
            continue;
        }
        let quiet: Vec<&str> = hook
            .bindings
            .iter()
            .filter(|b| b.on_sync == Some(false))
            .map(|b| b.name.as_str())
            .collect();
        if let Some(list) = flant.get_mut(&format!("{} phase 0 contexts", hook.tag)) {
            let before = list.len();
            list.retain(|text| {
                let c: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                !(c["type"] == "Synchronization" && quiet.iter().any(|n| c["binding"] == *n))
            });
            dropped += before - list.len();
        }
    }
    dropped
}

/// What a case's run observed, per key ("h0 phase 2 contexts", …): a sorted list.
type Observed = BTreeMap<String, Vec<String>>;

fn rename(v: &mut Value, renames: &[(String, String)]) {
    let fix = |s: &str| {
        renames
            .iter()
            .fold(s.to_string(), |acc, (from, to)| acc.replace(from, to))
    };
    match v {
        Value::String(s) => *s = fix(s),
        Value::Array(items) => items.iter_mut().for_each(|i| rename(i, renames)),
        Value::Object(map) => {
            let old = std::mem::take(map);
            for (k, mut val) in old {
                rename(&mut val, renames);
                map.insert(fix(&k), val);
            }
        }
        _ => {}
    }
}

/// Drops what only the server decides.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for k in [
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "deletionTimestamp",
            ] {
                map.remove(k);
            }
            if map.contains_key("manager") {
                map.remove("time");
            }
            map.values_mut().for_each(scrub);
        }
        Value::Array(items) => items.iter_mut().for_each(scrub),
        _ => {}
    }
}

fn clean(mut v: Value, side: &Side) -> Value {
    rename(&mut v, &side.renames());
    scrub(&mut v);
    normalise(&mut v);
    v
}

/// The phase summaries of one operator's runs.log lines `[from, to)`.
fn summarise(
    out: &mut Observed,
    runs: &[(String, Value)],
    (from, to): (usize, usize),
    side: &Side,
    phase: usize,
    probe: bool,
) {
    for (tag, run) in &runs[from.min(runs.len())..to.min(runs.len())] {
        for c in run.as_array().cloned().unwrap_or_default() {
            let mut c = clean(c, side);
            if probe {
                out.entry(format!("{tag} probe after phase {phase}"))
                    .or_default()
                    .push(c.to_string());
            } else if c["type"] == "Group" {
                let list = out
                    .entry(format!("{tag} phase {phase} groups"))
                    .or_default();
                let g = c["groupName"].to_string();
                if !list.contains(&g) {
                    list.push(g);
                }
            } else {
                if let Some(m) = c.as_object_mut() {
                    m.remove("snapshots");
                }
                out.entry(format!("{tag} phase {phase} contexts"))
                    .or_default()
                    .push(c.to_string());
            }
        }
    }
}

/// The ConfigMaps and Secrets of `side`'s namespaces, cleaned, as one list.
fn objects(client: &Client, side: &Side) -> Vec<String> {
    let mut out = Vec::new();
    for kind in [Kind::ConfigMap, Kind::Secret] {
        let resource = client
            .resolve("v1", kind.name(), "generated corpus")
            .expect("resolve");
        for ns in &side.namespaces {
            let list = client
                .api(&resource, Some(ns))
                .list(&ListParams::default())
                .unwrap_or_else(|e| panic!("list {ns}: {e}"));
            for mut o in list.items {
                o["kind"] = json!(kind.name());
                out.push(clean(o, side).to_string());
            }
        }
    }
    out.sort();
    out
}

/// Waits until `done(runs)` for both operators (or the operator exited) or
/// `timeout`; the operators that did not get there.
fn wait_both(
    pair: &mut Pair,
    timeout: Duration,
    done: impl Fn(&[(String, Value)]) -> bool,
) -> Vec<&'static str> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut missing = Vec::new();
        for (who, op) in [("flant", &mut pair.flant), ("ours", &mut pair.ours)] {
            if !done(&op.runs()) && op.child.try_wait().ok().flatten().is_none() {
                missing.push(who);
            }
        }
        if missing.is_empty() || Instant::now() > deadline {
            return missing;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The exit code and the end of stderr of an operator that stopped.
fn exited(op: &mut Operator) -> Option<(Option<i32>, String)> {
    let status = op.child.try_wait().ok().flatten()?;
    let mut err = String::new();
    if let Some(mut pipe) = op.child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut err);
    }
    let logs = op.logs();
    let lines: Vec<&str> = logs.lines().chain(err.lines()).collect();
    Some((
        status.code(),
        lines[lines.len().saturating_sub(5)..].join("\n"),
    ))
}

/// Waits until neither operator's runs.log grew for [`QUIET`] (false after 60 s).
fn settle(pair: &Pair) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    let counts = || (pair.flant.runs().len(), pair.ours.runs().len());
    let (mut last, mut since) = (counts(), Instant::now());
    while since.elapsed() < QUIET {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
        let now = counts();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    true
}

fn unique_token(who: char) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("gs{}x{n}{who}", std::process::id())
}

fn setup(client: &Client, case: &Case, side: &Side) {
    for ns in &side.namespaces {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"gen-case": side.token}}});
        create(client, Kind::Namespace, &obj).unwrap_or_else(|e| panic!("{e}"));
    }
    let probe_ns =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": side.probe_ns}});
    create(client, Kind::Namespace, &probe_ns).unwrap_or_else(|e| panic!("{e}"));
    let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "probe", "namespace": side.probe_ns},
        "data": {"marker": crate::gen_shell::PROBE_MARKER, "phase": "start"}});
    create(client, Kind::ConfigMap, &probe).unwrap_or_else(|e| panic!("{e}"));
    for o in case.setup_objects() {
        create(client, o.kind, &o.json(side)).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Runs `case` under both operators; every unexplained difference, each a line.
pub(crate) fn run_case(case: &Case) -> Vec<String> {
    run_case_counted(case).0
}

/// [`run_case`], and how many observations (contexts, snapshots, objects) of
/// flant's were compared.
pub(crate) fn run_case_counted(case: &Case) -> (Vec<String>, usize) {
    let client = client();
    let sides = [Side::new(unique_token('f')), Side::new(unique_token('o'))];
    for side in &sides {
        setup(&client, case, side);
    }
    let files: Vec<Vec<(String, String)>> = sides.iter().map(|s| case.hook_files(s)).collect();
    let refs: Vec<Vec<(&str, String)>> = files
        .iter()
        .map(|f| f.iter().map(|(n, s)| (n.as_str(), s.clone())).collect())
        .collect();
    let kubeconfig = control_plane::shared().admin_kubeconfig();
    let args = ["--kube-config", kubeconfig.to_str().expect("utf8")];
    let mut pair = Pair::start_sides((&refs[0], &args, &[]), (&refs[1], &args, &[]));
    let mut report = Vec::new();
    let probed: Vec<&str> = case
        .hooks
        .iter()
        .filter(|h| !h.bindings.is_empty())
        .map(|h| h.tag.as_str())
        .collect();
    let tags: Vec<&str> = case.hooks.iter().map(|h| h.tag.as_str()).collect();
    // Started: every hook ran (a probed one for its probe's Synchronization).
    let late = wait_both(&mut pair, Duration::from_secs(60), |runs| {
        tags.iter().all(|t| {
            runs.iter().any(|(tag, c)| {
                tag == t
                    && (!probed.contains(t)
                        || c.as_array()
                            .is_some_and(|a| a.iter().any(|c| c["binding"] == "probe")))
            })
        })
    });
    if !late.is_empty() {
        report.push(format!("startup: {late:?} did not run every hook in 60 s"));
    }
    // A configuration both refuse is an agreement (both exit non-zero at startup).
    match (exited(&mut pair.flant), exited(&mut pair.ours)) {
        (None, None) => {}
        (Some(f), Some(o)) => {
            if (f.0 == Some(0)) != (o.0 == Some(0)) {
                report.push(format!("both stopped at startup: flant {f:?}, ours {o:?}"));
            }
            eprintln!("both refused the case:\nflant {f:?}\nours {o:?}");
            return (report, 1);
        }
        (f, o) => {
            report.push(format!(
                "only one stopped at startup: flant {f:?}, ours {o:?}"
            ));
            return (report, 0);
        }
    }
    let ops = [&pair.flant, &pair.ours];
    let mut observed: [Observed; 2] = Default::default();
    let mut marks = [0usize; 2];
    let mut stuck = [false; 2];
    for phase in 0..=case.steps.len() {
        if phase > 0 {
            let outcomes: Vec<String> = sides
                .iter()
                .map(|s| {
                    let mut v = json!(format!("{:?}", apply(&client, s, &case.steps[phase - 1])));
                    rename(&mut v, &s.renames());
                    v.to_string()
                })
                .collect();
            if outcomes[0] != outcomes[1] {
                report.push(format!(
                    "step {phase}: flant's copy {} / ours {}",
                    outcomes[0], outcomes[1]
                ));
            }
        }
        if !settle(&pair) {
            report.push(format!("phase {phase}: the hooks never settled"));
        }
        let settled: Vec<usize> = ops.iter().map(|op| op.runs().len()).collect();
        if phase == 0 {
            for op in ops {
                std::fs::write(op.dir.0.join("out/started"), "").expect("write started");
            }
        }
        for (i, side) in sides.iter().enumerate() {
            let runs = ops[i].runs();
            summarise(
                &mut observed[i],
                &runs,
                (marks[i], settled[i]),
                side,
                phase,
                false,
            );
            observed[i].insert(
                format!("objects after phase {phase}"),
                objects(&client, side),
            );
            merge(
                &client,
                Kind::ConfigMap,
                Some(&side.probe_ns),
                "probe",
                json!({"data": {"phase": phase.to_string()}}),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        let want = json!(phase.to_string());
        let probe_seen = |runs: &[(String, Value)], from: usize| {
            probed.iter().all(|t| {
                runs[from.min(runs.len())..].iter().any(|(tag, c)| {
                    tag == t && c[0]["binding"] == "probe" && c[0]["filterResult"]["phase"] == want
                })
            })
        };
        // 20 s for each operator, 3 s once it missed a probe (it is stuck).
        let missing: Vec<&str> = [0, 1]
            .into_iter()
            .filter(|i| {
                let wait = if stuck[*i] { 3 } else { 20 };
                let deadline = Instant::now() + Duration::from_secs(wait);
                while !probe_seen(&ops[*i].runs(), settled[*i]) {
                    if Instant::now() > deadline {
                        return true;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                false
            })
            .map(|i| ["flant", "ours"][i])
            .collect();
        if !missing.is_empty() {
            report.push(format!(
                "phase {phase}: {missing:?} did not run every probe"
            ));
            for who in &missing {
                stuck[usize::from(*who == "ours")] = true;
            }
        }
        for (i, side) in sides.iter().enumerate() {
            let runs = ops[i].runs();
            summarise(
                &mut observed[i],
                &runs,
                (settled[i], runs.len()),
                side,
                phase,
                true,
            );
            marks[i] = runs.len();
        }
    }
    for list in observed.iter_mut().flat_map(|o| o.values_mut()) {
        list.sort();
    }
    let quirks = drop_quirks(case, &mut observed[0]);
    if quirks > 0 {
        eprintln!("left out {quirks} flant context(s): {}", QUIRKS[0].0);
    }
    let compared = observed[0].values().map(Vec::len).sum();
    if std::env::var("GENERATED_VERBOSE").is_ok() {
        eprintln!("observed from flant: {:#?}", observed[0]);
    }
    report.extend(compare(&observed[0], &observed[1]));
    report.extend(differences(
        "environment",
        &env_by_tag(&pair.flant),
        &env_by_tag(&pair.ours),
    ));
    for (who, op) in [("flant", &pair.flant), ("ours", &pair.ours)] {
        if op.runs().is_empty() {
            report.push(format!("{who}'s hooks never ran"));
        }
    }
    if !report.is_empty() {
        for (who, op) in [("flant", &pair.flant), ("ours", &pair.ours)] {
            report.push(format!("{who}'s log (last 30 lines):\n{}", tail(op, 30)));
        }
    }
    (report, compared)
}

/// At most 1,500 characters of `text`.
fn short(text: &str) -> String {
    match text.char_indices().nth(1500) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn tail(op: &Operator, n: usize) -> String {
    let logs = op.logs();
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Every key whose lists differ, with what only one side has (as multisets), unless
/// [`ALLOWED`] names it.
fn compare(flant: &Observed, ours: &Observed) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = flant.keys().chain(ours.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        let (f, o) = (
            flant.get(key).cloned().unwrap_or_default(),
            ours.get(key).cloned().unwrap_or_default(),
        );
        if f == o {
            continue;
        }
        let only = |a: &[String], b: &[String]| {
            let mut rest = b.to_vec();
            a.iter()
                .filter(|x| match rest.iter().position(|y| y == *x) {
                    Some(at) => {
                        rest.remove(at);
                        false
                    }
                    None => true,
                })
                .cloned()
                .collect::<Vec<_>>()
        };
        let (of, oo) = (only(&f, &o), only(&o, &f));
        let mut line = format!("{key}: {} only flant's, {} only ours", of.len(), oo.len());
        // Pairs in order, shown as the JSON pointers where they differ; the rest whole.
        for (a, b) in of.iter().zip(&oo) {
            let parse = |t: &str| serde_json::from_str(t).unwrap_or(Value::String(t.to_string()));
            let _ = write!(line, "\n  {}", json_diff(&parse(a), &parse(b)).join("\n  "));
        }
        for (who, rest) in [("flant", &of), ("ours", &oo)] {
            for extra in rest.iter().skip(of.len().min(oo.len())) {
                let _ = write!(line, "\n  only {who}: {}", short(extra));
            }
        }
        if !ALLOWED.iter().any(|(text, _)| line.contains(text)) {
            out.push(line);
        }
    }
    out
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("SEED") {
        return s
            .split(',')
            .map(|n| n.trim().parse().expect("SEED is a number or a comma list"))
            .collect();
    }
    if let Ok(n) = std::env::var("GENERATED_SEEDS") {
        let n: u64 = n.parse().expect("GENERATED_SEEDS is a number");
        return (1..=n).collect();
    }
    crate::gen_shell::FIXED_SEEDS.to_vec()
}

#[test]
fn generated_shell_cases_agree_with_flant() {
    crate::oracle::flant_shell_operator();
    let started = Instant::now();
    let mut failures = Vec::new();
    let seeds = seeds();
    for &seed in &seeds {
        let case = Case::generate(seed);
        let t = Instant::now();
        let (diffs, compared) = run_case_counted(&case);
        eprintln!(
            "generated shell case SEED={seed}: {} hook(s), {} step(s), {compared} observations compared, \
             {} difference(s), {:.1?} [{}]",
            case.hooks.len(),
            case.steps.len(),
            diffs.len(),
            t.elapsed(),
            crate::gen_shell::features(&case)
        );
        assert!(compared > 0, "SEED={seed}: nothing was observed");
        if !diffs.is_empty() {
            let first = format!("{}\n{}", case.describe(), diffs.join("\n"));
            eprintln!("{first}");
            let (small, small_diffs) = if std::env::var("GENERATED_SHRINK").as_deref() == Ok("0") {
                (case.clone(), diffs)
            } else {
                crate::gen_shell_shrink::shrink(&case, diffs)
            };
            failures.push(format!(
                "SEED={seed} differs (replay: SEED={seed} cargo test --test compat generated -- --nocapture):\n{first}\n\
                 minimised:\n{}\n{}",
                small.describe(),
                small_diffs.join("\n")
            ));
        }
    }
    eprintln!(
        "generated shell corpus: {} case(s) in {:.1?}",
        seeds.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} generated case(s) differ:\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
}
