//! A burst of patches on the real API server, flant's operator and ours one after
//! the other (not side by side: on a small machine they would share the CPU): how
//! many hook runs each started for the same changes, and how many binding contexts
//! one run combined. The figures behind the 2,000-patch burst of `make bench-peers`
//! (`cargo test --test compat a_burst -- --nocapture` prints them): both combine the
//! burst into a few dozen runs; flant's first run waits (its queue, found empty,
//! is polled every 125 ms until 250 ms have passed), ours starts at once.

use crate::common::Operator;
use crate::oracle::{flant_shell_operator, stop};
use serde_json::json;
use shell_operator::kube::{Client, KubeSettings, Patch, PatchParams};
use std::path::Path;
use std::time::{Duration, Instant};

/// ConfigMaps in the burst.
const OBJECTS: usize = 2000;
/// ConfigMaps in the watched store (the burst patches the first OBJECTS). The
/// bench's store holds 10,000 pods; more here would burden the shared API server
/// for the tests that run beside this one.
const STORE: usize = 3000;
/// Bytes of data in each (a pod is a few kB).
const FILLER: usize = 2000;
/// Threads patching at once.
const SENDERS: usize = 4;

/// The bench's hook: every object name it was handed, plus one line per run with the
/// number of contexts and one with the run's start and end (ns).
fn hook(ns: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = --config ]; then cat <<'EOF'\nconfigVersion: v1\nkubernetes:\n\
         - name: cms\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n\
         EOF\nexit 0\nfi\nt0=$(date +%s%N)\n\
         jq -r '.[] | (.object.metadata.name // empty), (.objects[]?.object.metadata.name)' \"$BINDING_CONTEXT_PATH\" >> \"$OUT_DIR/seen\"\n\
         jq length \"$BINDING_CONTEXT_PATH\" >> \"$OUT_DIR/batches\"\n\
         echo \"$t0 $(date +%s%N)\" >> \"$OUT_DIR/times\"\n"
    )
}

/// Our kube client on ConfigMaps of `ns`, without a rate limit (as `make
/// bench-peers` does), and `each(api, i)` for every i below `n` from SENDERS threads.
fn from_senders(ns: &str, n: usize, each: impl Fn(&shell_operator::kube::Api<'_>, usize) + Sync) {
    let settings = KubeSettings {
        kubeconfig: control_plane::shared()
            .admin_kubeconfig()
            .display()
            .to_string(),
        qps: -1.0,
        ..KubeSettings::default()
    };
    let client = Client::from_config(&settings).expect("client");
    let resource = client.resolve("v1", "ConfigMap", "burst").expect("resolve");
    let api = client.api(&resource, Some(ns));
    std::thread::scope(|s| {
        for k in 0..SENDERS {
            let (api, each) = (&api, &each);
            s.spawn(move || {
                for i in (k..n).step_by(SENDERS) {
                    each(api, i);
                }
            });
        }
    });
}

/// Labels ConfigMaps c0..c{OBJECTS} with `burst=value`.
fn patch_all(ns: &str, value: &str) {
    from_senders(ns, OBJECTS, |api, i| {
        let patch = Patch::Merge(json!({"metadata": {"labels": {"burst": value}}}));
        api.patch(&format!("c{i}"), &patch, &PatchParams::default())
            .unwrap_or_else(|e| panic!("patch c{i}: {e}"));
    });
}

/// What one operator did with the burst.
#[derive(Debug)]
struct BurstFigures {
    runs: usize,
    contexts: usize,
    largest: usize,
    ms: u128,
}

fn lines(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Starts `program` on the hook, waits for its Synchronization, labels every
/// ConfigMap from SENDERS kubectl processes at once and waits until the hook saw
/// each name again.
fn run_burst(program: &Path, ns: &str, value: &str) -> BurstFigures {
    let cp = control_plane::shared();
    let kubeconfig = cp.admin_kubeconfig();
    let args = ["--kube-config", kubeconfig.to_str().expect("utf8")];
    let mut op = Operator::start_program(program, &[("burst.sh", hook(ns))], &args, &[]);
    let out = op.dir.0.join("out");
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines(&out, "seen").len() < STORE || lines(&out, "batches").is_empty() {
        assert!(
            Instant::now() < deadline,
            "no Synchronization: {} names, batches {:?}\n{}",
            lines(&out, "seen").len(),
            lines(&out, "batches"),
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = (lines(&out, "seen").len(), lines(&out, "batches").len());
    let started = Instant::now();
    patch_all(ns, value);
    let burst_contexts = |out: &Path| -> usize {
        lines(out, "batches")[before.1..]
            .iter()
            .filter_map(|l| l.trim().parse::<usize>().ok())
            .sum()
    };
    while lines(&out, "seen").len() < before.0 + OBJECTS || burst_contexts(&out) < OBJECTS {
        assert!(
            Instant::now() < deadline,
            "the burst was not all seen: {}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ms = started.elapsed().as_millis();
    let batches: Vec<usize> = lines(&out, "batches")[before.1..]
        .iter()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    eprintln!("contexts per run: {batches:?}");
    let times: Vec<(u128, u128)> = lines(&out, "times")[before.1..]
        .iter()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    let in_hooks: u128 = times.iter().map(|(a, b)| b.saturating_sub(*a)).sum();
    let between: u128 = times
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].1))
        .sum();
    eprintln!(
        "inside the hook processes {} ms, between runs {} ms",
        in_hooks / 1_000_000,
        between / 1_000_000
    );
    stop(&mut op, "the operator");
    BurstFigures {
        runs: batches.len(),
        contexts: batches.iter().sum(),
        largest: batches.iter().copied().max().unwrap_or(0),
        ms,
    }
}

#[test]
fn a_burst_of_patches_is_combined_into_few_runs_as_in_flant() {
    let cp = control_plane::shared();
    let ns = cp.namespace("compat-burst");
    let filler = "x".repeat(FILLER);
    from_senders(&ns, STORE, |api, i| {
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("c{i}"), "namespace": ns}, "data": {"v": filler}});
        api.create(&obj)
            .unwrap_or_else(|e| panic!("create c{i}: {e}"));
    });
    let flant = run_burst(&flant_shell_operator(), &ns, "f");
    let ours = run_burst(Path::new(crate::common::binary()), &ns, "o");
    for (who, f) in [("flant", &flant), ("ours", &ours)] {
        eprintln!(
            "burst of {OBJECTS}, {who}: {} ms until all seen, {} runs, {} contexts, largest run {}",
            f.ms, f.runs, f.contexts, f.largest
        );
        assert_eq!(f.contexts, OBJECTS, "{who}: one context per change: {f:?}");
        assert!(
            f.runs * 10 <= OBJECTS && f.largest > 1,
            "{who}: the burst's events were combined into few runs: {f:?}"
        );
    }
}
