//! The generated differential corpus for addon-operator: each case `gen_addon.rs`
//! makes from a seed runs under flant's addon-operator v1.5.0 and ours on the same
//! real API server, each in a namespace of its own, and after the start and after
//! every step the suite compares what `addon.rs` compares (what every hook received,
//! releases with their revisions, `helm get values`/`manifest`), the ConfigMap, and
//! at the end the metric names; `addon::ALLOWED` names what is kept different. A
//! case that differs is shrunk (greedily: modules, hooks, ConfigMap entries, steps)
//! to the smallest that still differs the same way, and both are printed with the
//! seed. `make test-compat` runs [`FIXED`]; `ADDON_GEN_CASES=N` runs N more (from
//! `ADDON_GEN_FIRST`, default 1000); `SEED=s [DROP=m0,s3,…]` replays one case;
//! `ADDON_GEN_MINIMISE_RUNS` (default 15, 0: none) bounds the shrinking's reruns.

use crate::addon_compare::{config_data, diff_maps, metric_gaps, release_state, runs_since};
use crate::addon_oracle::{AddonOp, Who, namespace_with_config, patch_config};
use crate::gen_addon::{Case, Check};
use crate::gen_addon_files::Part;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The seeds `make test-compat` runs (README, "Measured against flant's
/// addon-operator v1.5.0"). 3, 1004 and 1008 use every part of the generator between them; 1002, 1003 and
/// 1005 are the minimal witnesses of bugs the corpus found (an unknown module's
/// section froze later edits, an `enabled` script unmeasured and not re-run on its
/// module's section, a revision for a value no template reads).
const FIXED: &[u64] = &[3, 1004, 1008, 1002, 1003, 1005];

/// The two sides.
const WHO: [Who; 2] = [Who::Flant, Who::Ours];

/// One difference: where (`start`, `s<i>`, `end`), what (the minimiser keeps a
/// smaller case when one of the same `kind`s still differs), the two sides.
#[derive(Clone)]
pub(crate) struct Diff {
    pub at: String,
    pub kind: String,
    pub detail: String,
}

/// Waits until no operator recorded a run for `quiet`; false when they still run
/// after 90 s (a hook failing and retried for ever).
fn settle(ops: &[AddonOp; 2], quiet: Duration) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    let counts = || ops.iter().map(|o| o.records().len()).collect::<Vec<_>>();
    let (mut last, mut since) = (counts(), Instant::now());
    while since.elapsed() < quiet {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
        if counts() != last {
            (last, since) = (counts(), Instant::now());
        }
    }
    true
}

/// The last lines of an operator's log, for a difference that needs them.
fn log_tail(op: &AddonOp) -> String {
    let logs = op.logs();
    let lines: Vec<&str> = logs.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Runs `case` under both operators; every difference found.
pub(crate) fn run_case(case: &Case) -> Vec<Diff> {
    let start: Vec<(&str, &str)> = case
        .start
        .iter()
        .filter_map(|(_, k, v)| Some((k.as_str(), v.as_deref()?)))
        .collect();
    let ns = [
        namespace_with_config("gen-flant", &start),
        namespace_with_config("gen-ours", &start),
    ];
    let mut ops = [0, 1].map(|j| {
        let files = case.files(&ns[j]);
        let refs: Vec<(&str, String)> =
            files.iter().map(|(p, c)| (p.as_str(), c.clone())).collect();
        AddonOp::start(WHO[j], &ns[j], &refs)
    });
    let mut diffs = Vec::new();
    // Both converge (their afterAll ran), or one stops or never gets there: then
    // the other is still given its time, and each that did not is a difference.
    let deadline = Instant::now() + Duration::from_secs(60);
    let done = loop {
        let done = ops
            .each_ref()
            .map(|o| o.records().iter().any(|(t, _)| t == "g-after-all"));
        let alive = ops.each_mut().map(|o| o.running());
        if (done[0] || !alive[0]) && (done[1] || !alive[1]) || Instant::now() > deadline {
            break done;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    if done != [true, true] {
        for (op, _) in ops.iter().zip(done).filter(|(_, d)| !d) {
            let detail = format!(
                "{:?} never ran afterAll; its log ends:\n{}",
                op.who,
                log_tail(op)
            );
            let kind = format!("{:?} converges", op.who);
            diffs.push(Diff {
                at: "start".into(),
                kind,
                detail,
            });
        }
        return diffs;
    }
    let mut from = [0, 0];
    for (i, step) in std::iter::once(None)
        .chain(case.steps.iter().map(Some))
        .enumerate()
    {
        let at = if i == 0 {
            "start".to_string()
        } else {
            format!("s{}", i - 1)
        };
        if let Some(step) = step {
            let data: Map<String, Value> = step
                .data
                .iter()
                .map(|(_, k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                .collect();
            for n in &ns {
                if !data.is_empty() {
                    patch_config(n, &Value::Object(data.clone()));
                }
                if let Some((name, k)) = &step.watched {
                    let yaml = format!(
                        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {n}\n  \
                         labels: {{compat: gen}}\ndata:\n  k: {k}\n"
                    );
                    control_plane::shared()
                        .apply(&yaml)
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            }
        }
        if !settle(&ops, Duration::from_secs(5)) {
            let detail = format!("{}\n{}", log_tail(&ops[0]), log_tail(&ops[1]));
            diffs.push(Diff {
                at,
                kind: "settles".into(),
                detail,
            });
            return diffs;
        }
        let check = step.map_or(Check::All, |s| s.check);
        let mut found = Vec::new();
        if check == Check::All {
            let [f, o] = [0, 1].map(|j| runs_since(&ops[j], from[j]));
            found.extend(diff_maps("runs of", &f, &o));
        }
        if check != Check::Nothing {
            found.extend(diff_maps(
                "release",
                &release_state(&ns[0]),
                &release_state(&ns[1]),
            ));
            let [f, o] = [&ns[0], &ns[1]].map(|n| config_data(n));
            if f != o {
                found.push(format!("configmap:\n  flant: {f}\n  ours:  {o}"));
            }
        }
        for detail in found {
            let kind = detail.split(':').next().unwrap_or_default().to_string();
            diffs.push(Diff {
                at: at.clone(),
                kind,
                detail,
            });
        }
        from = [0, 1].map(|j| ops[j].records().len());
    }
    let runs = ops.each_ref().map(|o| o.records().len());
    eprintln!(
        "seed {}: {runs:?} runs recorded; releases at the end: {:?}",
        case.seed,
        crate::addon_oracle::releases(&ns[0])
    );
    for detail in metric_gaps(&ops[0], &ops[1]) {
        diffs.push(Diff {
            at: "end".into(),
            kind: "metrics".into(),
            detail,
        });
    }
    diffs
}

/// The kinds of `diffs`.
fn kinds(diffs: &[Diff]) -> BTreeSet<String> {
    diffs.iter().map(|d| d.kind.clone()).collect()
}

/// Shrinks `case` (which differs by `diffs`) greedily to the smallest case that
/// still differs in one of the same kinds, in at most `budget` runs: steps after the
/// first differing one go at once, then each module, global hook, module hook,
/// ConfigMap entry and step is tried without. Returns the case and the parts dropped.
pub(crate) fn minimise(case: &Case, diffs: &[Diff], budget: usize) -> (Case, Vec<Part>) {
    let mut cur = case.clone();
    let mut dropped = Vec::new();
    let first = diffs
        .iter()
        .find_map(|d| d.at.strip_prefix('s')?.parse::<usize>().ok());
    let only_steps = diffs.iter().all(|d| d.at.starts_with('s'));
    let mut want = kinds(diffs);
    if let (Some(first), true) = (first, only_steps) {
        let at_first: Vec<Diff> = diffs
            .iter()
            .filter(|d| d.at == format!("s{first}"))
            .cloned()
            .collect();
        want = kinds(&at_first);
        while cur.steps.len() > first + 1 {
            let p = Part::Step(cur.steps.len() - 1);
            cur = cur.without(&p).expect("step");
            dropped.push(p);
        }
    }
    // A part tried and kept once is not tried again (by what it is, not where).
    let mut kept: BTreeSet<String> = BTreeSet::new();
    let mut runs = 0;
    let mut progress = true;
    while progress && runs < budget {
        progress = false;
        let mut parts: Vec<Part> = (0..cur.modules.len()).rev().map(Part::Module).collect();
        parts.extend((0..cur.global_hooks.len()).rev().map(Part::Global));
        for (i, m) in cur.modules.iter().enumerate() {
            parts.extend((0..m.hooks.len()).rev().map(|j| Part::Hook(i, j)));
        }
        parts.extend((0..cur.start.len()).rev().map(Part::Start));
        parts.extend((0..cur.steps.len()).rev().map(Part::Step));
        for p in parts {
            if runs >= budget {
                break;
            }
            let id = identity(&cur, &p);
            let Some(next) = cur.without(&p).filter(|_| !kept.contains(&id)) else {
                continue;
            };
            runs += 1;
            let got = run_case(&next);
            eprintln!(
                "minimising seed {}: without {p}: {} difference(s)",
                case.seed,
                got.len()
            );
            if !kinds(&got).is_disjoint(&want) {
                cur = next;
                dropped.push(p);
                progress = true;
                break;
            }
            kept.insert(id);
        }
    }
    (cur, dropped)
}

/// What `part` of `case` is, independent of its index.
fn identity(case: &Case, part: &Part) -> String {
    let module = |i: usize| case.modules.get(i).map_or("", |m| m.name);
    match *part {
        Part::Module(i) => format!("module {}", module(i)),
        Part::Hook(i, j) => format!(
            "hook {} {:?}",
            module(i),
            case.modules.get(i).and_then(|m| m.hooks.get(j))
        ),
        Part::Global(i) => format!("global {:?}", case.global_hooks.get(i)),
        Part::Start(i) => format!("entry {:?}", case.start.get(i).map(|e| &e.1)),
        Part::Step(i) => format!("step {:?}", case.steps.get(i).map(|s| (&s.what, &s.data))),
    }
}

/// The seeds to run: `SEED` (with `DROP`) alone, else [`FIXED`] and
/// `ADDON_GEN_CASES` more from `ADDON_GEN_FIRST`.
fn cases() -> Vec<(Case, Vec<Part>)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(seed) = env("SEED") {
        let seed = seed.parse().expect("SEED is a number");
        let drops: Vec<Part> = env("DROP")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| Part::parse(s).unwrap_or_else(|| panic!("DROP: bad part {s}")))
            .collect();
        let mut case = Case::generate(seed);
        for p in &drops {
            case = case
                .without(p)
                .unwrap_or_else(|| panic!("DROP: no part {p} left"));
        }
        return vec![(case, drops)];
    }
    let n: u64 = env("ADDON_GEN_CASES").map_or(0, |n| n.parse().expect("ADDON_GEN_CASES"));
    let first: u64 = env("ADDON_GEN_FIRST").map_or(1000, |n| n.parse().expect("ADDON_GEN_FIRST"));
    FIXED
        .iter()
        .copied()
        .chain(first..first + n)
        .map(|s| (Case::generate(s), Vec::new()))
        .collect()
}

#[test]
fn generated_module_trees_behave_the_same_under_both() {
    let budget: usize =
        std::env::var("ADDON_GEN_MINIMISE_RUNS").map_or(15, |n| n.parse().expect("number"));
    let began = Instant::now();
    let cases = cases();
    let mut report = Vec::new();
    for (case, drops) in &cases {
        let t = Instant::now();
        let diffs = run_case(case);
        eprintln!(
            "generated case seed {}: {} difference(s) in {} s",
            case.seed,
            diffs.len(),
            t.elapsed().as_secs()
        );
        if diffs.is_empty() {
            continue;
        }
        let mut text = format!(
            "seed {} (replay: SEED={} DROP={})\n{}",
            case.seed,
            case.seed,
            join(drops),
            case.describe()
        );
        for d in &diffs {
            text.push_str(&format!(
                "  at {}: {}\n",
                d.at,
                d.detail.replace('\n', "\n    ")
            ));
        }
        if budget > 0 {
            let (small, more) = minimise(case, &diffs, budget);
            let all: Vec<Part> = drops.iter().chain(&more).cloned().collect();
            text.push_str(&format!(
                "minimised (replay: SEED={} DROP={}):\n{}  files: {}\n",
                case.seed,
                join(&all),
                small.describe(),
                small
                    .files("NS")
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ));
        }
        eprintln!("{text}");
        report.push(text);
    }
    eprintln!(
        "generated corpus: {} case(s), {} differing, {} s",
        cases.len(),
        report.len(),
        began.elapsed().as_secs()
    );
    assert!(
        report.is_empty(),
        "{} of {} generated case(s) differ between flant's addon-operator v1.5.0 and ours \
         (each printed above with its tree, differences and minimised case):\n{}",
        report.len(),
        cases.len(),
        report
            .iter()
            .flat_map(|t| t.lines().filter(|l| l.contains("replay:")))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn join(parts: &[Part]) -> String {
    parts
        .iter()
        .map(Part::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
