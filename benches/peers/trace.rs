//! Where the time from a patch to our hook's start goes, on the server the trial
//! runs against (issue 41): the `ours, stamped at exec` contender runs with
//! `SHELL_OPERATOR_LATENCY_TRACE` (src/latency_trace.rs), which stamps each stage of
//! an event in the operator; with the patch's send time and the hook's own stamp at
//! exec, each of the 50 updates splits into the server's part, our stages and the
//! kernel's start of the hook.

use std::path::Path;

/// The stages between stamps, in the trace line's order.
const STEPS: [&str; 7] = [
    "decode (reflector)",
    "reflector -> monitor hand-off",
    "monitor: store, filter, share, checksum",
    "monitor -> router -> queue hand-offs",
    "queue -> runner start",
    "runner: context file, log, temp files",
    "spawn call",
];

/// The median of each stage over the updates (µs), as one printable line; `None`
/// without a trace. `updates` pairs each patch's send time with the hook's start.
pub fn breakdown(trace: &Path, updates: &[(u128, u128)]) -> Option<String> {
    let text = std::fs::read_to_string(trace).ok()?;
    let lines: Vec<Vec<u128>> = text
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|f| f.split_once('=')?.1.parse().ok())
                .collect()
        })
        .filter(|t: &Vec<u128>| t.len() == 8 && t.iter().all(|v| *v > 0))
        .collect();
    // Each update's trace line: the last spawn at or before its hook started.
    let matched: Vec<(u128, u128, &Vec<u128>)> = updates
        .iter()
        .filter_map(|(sent, started)| {
            let line = lines
                .iter()
                .filter(|t| t[7] <= *started && t[0] >= *sent)
                .max_by_key(|t| t[7])?;
            Some((*sent, *started, line))
        })
        .collect();
    if matched.is_empty() {
        return None;
    }
    let median = |f: &dyn Fn(u128, u128, &[u128]) -> i128| {
        let mut v: Vec<f64> = matched
            .iter()
            .map(|(s, h, t)| f(*s, *h, t) as f64 / 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut parts = vec![format!(
        "patch sent -> our socket read {:.0}",
        median(&|s, _, t| t[0] as i128 - s as i128)
    )];
    for (i, name) in STEPS.iter().enumerate() {
        parts.push(format!(
            "{name} {:.0}",
            median(&|_, _, t| t[i + 1] as i128 - t[i] as i128)
        ));
    }
    parts.push(format!(
        "spawned -> hook's first instruction {:.0}",
        median(&|_, h, t| h as i128 - t[7] as i128)
    ));
    Some(format!(
        "median µs over {} updates: {}",
        matched.len(),
        parts.join(", ")
    ))
}
