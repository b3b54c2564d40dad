//! Reloading hooks without Kubernetes (issue 39, `src/reload/`): onStartup and
//! schedule hooks added and removed under a running operator, the debug
//! socket's `hook list` following, and a reload the running operator cannot
//! take (kubernetes bindings, but no client) refused and counted. The
//! Kubernetes side (watches, Synchronization, webhook entries) is in
//! `tests/cluster/reload.rs`.

use crate::common;

use common::{Operator, hook, metric, run_binary};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn put(path: &Path, content: &str) {
    let dir = path.parent().expect("parent");
    let name = path.file_name().expect("name").to_string_lossy();
    let tmp = dir.join(format!(".tmp-{name}"));
    std::fs::write(&tmp, content).expect("write");
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&tmp, path).expect("rename");
}

fn reloads(op: &Operator, outcome: &str) -> u64 {
    let series = format!("shell_operator_hooks_reloads_total{{outcome=\"{outcome}\"}}");
    metric(&op.http_get("/metrics").1, &series).unwrap_or(0.0) as u64
}

fn wait_reloads(op: &Operator, outcome: &str, n: u64) {
    let deadline = Instant::now() + WAIT;
    while reloads(op, outcome) < n {
        assert!(
            Instant::now() < deadline,
            "no {n} reloads with outcome {outcome}; logs:\n{}",
            op.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn runs_of(op: &Operator, tag: &str) -> usize {
    op.runs().iter().filter(|(t, _)| t == tag).count()
}

fn hook_list(op: &Operator) -> String {
    let socket = op.debug_socket();
    let args = [
        "hook",
        "list",
        "--debug-unix-socket",
        socket.to_str().expect("utf8"),
    ];
    let (code, out, err) = run_binary(&args, &[]);
    assert_eq!(code, 0, "{err}");
    out
}

/// An added onStartup hook runs once; a removed schedule hook stops firing; the
/// kept hook runs no second onStartup; `hook list` shows the hooks as they are.
#[test]
fn added_hooks_start_and_removed_schedules_stop() {
    let on_startup = "configVersion: v1\nonStartup: 1";
    let every_second = "configVersion: v1\nschedule:\n- crontab: \"* * * * * *\"";
    let op = Operator::start(
        &[
            ("a.sh", hook("a", on_startup, "")),
            ("tick.sh", hook("tick", every_second, "")),
        ],
        &[],
        &[],
    );
    op.wait_runs(WAIT, |_| runs_of(&op, "tick") >= 2);
    assert_eq!(hook_list(&op), "[\"a.sh\",\"tick.sh\"]\n");
    let hooks = op.dir.0.join("hooks");
    std::fs::remove_file(hooks.join("tick.sh")).expect("rm");
    put(&hooks.join("b.sh"), &hook("b", on_startup, ""));
    wait_reloads(&op, "success", 1);
    op.wait_runs(WAIT, |_| runs_of(&op, "b") == 1);
    assert_eq!(hook_list(&op), "[\"a.sh\",\"b.sh\"]\n");
    // tick.sh fires no more: its count stays put for 3 s.
    let ticks = runs_of(&op, "tick");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(runs_of(&op, "tick"), ticks, "a removed schedule fired");
    assert_eq!(runs_of(&op, "a"), 1, "no second onStartup for a kept hook");

    // A hook with kubernetes bindings, but the operator has no client: refused.
    let kube = "configVersion: v1\nkubernetes:\n- kind: Pod\n";
    put(&hooks.join("k.sh"), &hook("k", kube, ""));
    wait_reloads(&op, "error", 1);
    let line = op.wait_log("hooks reload failed", WAIT);
    assert!(line.contains("k.sh") && line.contains("restart"), "{line}");
    assert_eq!(hook_list(&op), "[\"a.sh\",\"b.sh\"]\n", "nothing changed");
    assert_eq!(runs_of(&op, "b"), 1);
}
