//! The latency part of the kube bench (issue 12 item 4): ConfigMaps created one at
//! a time, 60 ms apart, against an idle operator whose hook appends the time it
//! started; event → hook start is that time minus the time the create was sent.
//!
//! With the static C hook (`benches/latency_hook.c`) the operator also runs with
//! `SHELL_OPERATOR_LATENCY_TRACE` (src/latency_trace.rs), so the same run splits the
//! time into stages: kube-sim's part up to our socket read, each of our hand-offs,
//! the temp files, and the spawn up to the hook's first instruction.

use crate::common::pods::KubeSim;
use std::path::Path;
use std::time::Duration;

/// Which hook stamps its start time.
#[derive(Clone, Copy, PartialEq)]
pub enum Hook {
    /// `#!/bin/sh` running `date +%s%N` (what a typical hook pays).
    Shell,
    /// `benches/latency_hook.c`, compiled static here: no shell, no `date`.
    StaticC,
}

/// One run's samples: per event, when the create was sent and when the hook
/// started (Unix ns), and the trace lines (empty for the shell hook).
pub struct Samples {
    pub sent: Vec<u128>,
    pub started: Vec<u128>,
    pub trace: Vec<Vec<u128>>,
}

impl Samples {
    /// (p50, p99) of event → hook start, in ms.
    pub fn p50_p99(&self) -> (f64, f64) {
        let lat: Vec<f64> = self
            .sent
            .iter()
            .zip(&self.started)
            .map(|(s, h)| h.saturating_sub(*s) as f64 / 1e6)
            .collect();
        (percentile(&lat, 0.5), percentile(&lat, 0.99))
    }

    /// The median of each stage in µs, with its name: from the create request to
    /// our read of the watch line, between the traced stages, and from the spawn
    /// call to the hook's first instruction.
    pub fn stages(&self) -> Vec<(&'static str, f64)> {
        const STEPS: [&str; 6] = [
            "decode + cache (reflector)",
            "reflector -> monitor hand-off",
            "monitor: store, filter, checksum",
            "monitor -> router -> queue hand-offs",
            "queue -> runner start",
            "runner: labels, log, temp files",
        ];
        let mut out = Vec::new();
        let usable: Vec<(&u128, &u128, &Vec<u128>)> = self
            .sent
            .iter()
            .zip(&self.started)
            .zip(&self.trace)
            .map(|((s, h), t)| (s, h, t))
            .filter(|(_, _, t)| t.len() == 8 && t.iter().all(|v| *v > 0))
            .collect();
        let us = |f: &dyn Fn(&u128, &u128, &Vec<u128>) -> i128| {
            let v: Vec<f64> = usable
                .iter()
                .map(|(s, h, t)| f(s, h, t) as f64 / 1e3)
                .collect();
            percentile(&v, 0.5)
        };
        out.push((
            "kube-sim: create -> our socket read",
            us(&|s, _, t| t[0] as i128 - *s as i128),
        ));
        for (i, name) in STEPS.iter().enumerate() {
            out.push((name, us(&|_, _, t| t[i + 1] as i128 - t[i] as i128)));
        }
        out.push((
            "spawn -> hook's first instruction",
            us(&|_, h, t| *h as i128 - t[6] as i128),
        ));
        out.push(("(events traced)", usable.len() as f64));
        out
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// Runs 100 creates against a fresh operator with `hook`.
pub fn run(bin: &Path, sim: &KubeSim, work: &Path, hook: Hook) -> Samples {
    let out = work.join("out");
    let trace = work.join("trace");
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&trace);
    let binding = "kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [latency]\n  executeHookOnSynchronization: false";
    crate::write_hook(&work.join("hooks"), binding, "date +%s%N >> \"$OUT\"");
    let mut env: Vec<(&str, &Path)> = vec![("OUT", &out)];
    if hook == Hook::StaticC {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/latency_hook.c");
        crate::common::compile_static(&source, &work.join("hooks/h.sh")).expect("static hook");
        env.push(("SHELL_OPERATOR_LATENCY_TRACE", &trace));
    }
    let (mut child, _) = crate::start_on_hooks_with(bin, sim, work, &env);
    let tag = if hook == Hook::Shell { "sh" } else { "c" };
    let agent = ureq::Agent::new_with_defaults();
    let ns = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"latency"}}"#;
    let _ = agent
        .post(format!("{}/api/v1/namespaces", sim.url))
        .header("Content-Type", "application/json")
        .send(ns);
    let mut sent = Vec::new();
    for i in 0..100 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"lat-{tag}-{i}","namespace":"latency"}}}}"#
        );
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let _ = agent
            .post(format!("{}/api/v1/namespaces/latency/configmaps", sim.url))
            .header("Content-Type", "application/json")
            .send(body);
        sent.push(t);
        std::thread::sleep(Duration::from_millis(60));
    }
    std::thread::sleep(Duration::from_secs(1));
    let _ = child.kill();
    let _ = child.wait();
    let started = numbers(&std::fs::read_to_string(&out).unwrap_or_default())
        .into_iter()
        .filter_map(|mut l| l.pop())
        .collect();
    Samples {
        sent,
        started,
        trace: numbers(&std::fs::read_to_string(&trace).unwrap_or_default()),
    }
}

/// Each line's numbers (`name=123` or `123`).
fn numbers(text: &str) -> Vec<Vec<u128>> {
    text.lines()
        .map(|l| {
            l.split_whitespace()
                .filter_map(|w| w.rsplit('=').next()?.parse().ok())
                .collect()
        })
        .collect()
}
