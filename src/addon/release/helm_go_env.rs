//! The Go runtime settings every helm process gets, unless the operator's own
//! environment chooses them. A helm run lives well under a second, most of it CPU
//! (starting a 60 MB binary, rendering, encoding); Go's default collector (`GOGC=100`)
//! spends a tenth of that collecting garbage the process exit frees anyway. With
//! `GOGC=400` the heap may grow to five times what is live instead of twice, and
//! helm runs faster by about that tenth (BENCHMARKS.md, issue 28). So that large
//! charts cannot push the helm processes over a container's memory limit that way,
//! each gets a soft limit (`GOMEMLIMIT`) of the cgroup's limit divided by the number
//! of helm processes that may run at once plus one (the operator's share), and its
//! collector works harder before it gets there.
//!
//! Set `GOGC` (e.g. `GOGC=100`, Go's default) or `GOMEMLIMIT` in the operator's
//! environment to choose otherwise: helm inherits them as they are.

use std::path::Path;

/// `GOGC` for helm when the environment names none.
const HELM_GOGC: &str = "400";

/// The variables to set on each helm command when up to `at_once` helm processes
/// run at the same time.
pub(crate) fn helm_go_env(at_once: usize) -> Vec<(&'static str, String)> {
    go_env(
        |name| std::env::var_os(name).is_some(),
        cgroup_memory_limit(Path::new("/sys/fs/cgroup")),
        at_once,
    )
}

/// What to set, given which variables the environment has, the memory limit, and
/// how many helm processes share it.
fn go_env(
    is_set: impl Fn(&str) -> bool,
    limit: Option<u64>,
    at_once: usize,
) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    if !is_set("GOGC") {
        env.push(("GOGC", HELM_GOGC.to_string()));
    }
    if let Some(limit) = limit.filter(|_| !is_set("GOMEMLIMIT")) {
        let shares = at_once.max(1) as u64 + 1;
        env.push(("GOMEMLIMIT", (limit / shares).to_string()));
    }
    env
}

/// The memory limit of the operator's cgroup (v2 `memory.max`, v1
/// `memory/memory.limit_in_bytes`), `None` when unlimited or unreadable.
fn cgroup_memory_limit(root: &Path) -> Option<u64> {
    let v2 = std::fs::read_to_string(root.join("memory.max"));
    let v1 = || std::fs::read_to_string(root.join("memory/memory.limit_in_bytes"));
    let text = v2.or_else(|_| v1()).ok()?;
    // cgroup v1 writes "unlimited" as a number near 2^63.
    text.trim().parse::<u64>().ok().filter(|&n| n < 1 << 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gogc_and_a_soft_limit_unless_the_environment_chooses() {
        let none = |_: &str| false;
        assert_eq!(go_env(none, None, 2), [("GOGC", "400".to_string())]);
        // Two helm processes at once and the operator: a third of the limit each.
        let with_limit = go_env(none, Some(600 << 20), 2);
        assert_eq!(with_limit[1], ("GOMEMLIMIT", (200u64 << 20).to_string()));
        assert_eq!(
            go_env(none, Some(600 << 20), 0)[1].1,
            (300u64 << 20).to_string()
        );
        let gogc_set = |n: &str| n == "GOGC";
        assert_eq!(go_env(gogc_set, Some(512 << 20), 2).len(), 1);
        let both_set = |_: &str| true;
        assert_eq!(go_env(both_set, Some(512 << 20), 2), []);
    }

    #[test]
    fn the_cgroup_limit_is_read_from_v2_or_v1() {
        let dir = std::env::temp_dir().join(format!("helm-go-env-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("memory")).unwrap();
        assert_eq!(cgroup_memory_limit(&dir), None);
        std::fs::write(
            dir.join("memory/memory.limit_in_bytes"),
            "9223372036854771712\n",
        )
        .unwrap();
        assert_eq!(cgroup_memory_limit(&dir), None, "v1 unlimited");
        std::fs::write(dir.join("memory/memory.limit_in_bytes"), "268435456\n").unwrap();
        assert_eq!(cgroup_memory_limit(&dir), Some(256 << 20));
        std::fs::write(dir.join("memory.max"), "max\n").unwrap();
        assert_eq!(cgroup_memory_limit(&dir), None, "v2 unlimited wins");
        std::fs::write(dir.join("memory.max"), "1073741824\n").unwrap();
        assert_eq!(cgroup_memory_limit(&dir), Some(1 << 30));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
