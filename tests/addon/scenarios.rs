//! flant's addon-operator examples, as our own scenarios in
//! `examples/addon-scenarios/`, run unchanged against kube-sim with the real helm;
//! each test checks what the seeds say the user sees.

use crate::common::TempDir;
use crate::harness::{Addon, NS, repo_root};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// Copies `src` into `dst`, keeping symlinks as symlinks and file modes.
fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for entry in std::fs::read_dir(src).expect("read dir") {
        let entry = entry.expect("entry");
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        let kind = entry.file_type().expect("type");
        if kind.is_symlink() {
            let target = std::fs::read_link(&from).expect("link");
            let _ = std::fs::remove_file(&to);
            std::os::unix::fs::symlink(target, &to).expect("symlink");
        } else if kind.is_dir() {
            copy_tree(&from, &to);
        } else {
            std::fs::copy(&from, &to).expect("copy");
        }
    }
}

/// Starts the scenario `name` with its ConfigMap data and `env`.
fn scenario(name: &str, env: &[(&str, &str)]) -> Addon {
    let dir = repo_root().join("examples/addon-scenarios").join(name);
    let cm: Value = serde_yaml::from_str(
        &std::fs::read_to_string(dir.join("configmap.yaml")).expect("configmap"),
    )
    .expect("yaml");
    let copy = |root: &Path| copy_tree(&dir, root);
    Addon::start_after(&[], Some(cm["data"].clone()), 4, env, &copy)
}

fn daemonset(addon: &Addon) -> Option<Value> {
    addon.sim.get("apps/v1", "DaemonSet", NS, "sysctl-tuner")
}

#[test]
fn startup_global_runs_its_onstartup_hook() {
    let addon = scenario("001-startup-global", &[]);
    addon.wait_ready();
    addon.wait_log(&["001-startup-global: the onStartup hook is running"], LONG);
    assert_eq!(
        addon.cli(&["module", "list", "-o", "json"]).trim(),
        r#"{"enabledModules":[],"modules":[]}"#
    );
}

#[test]
fn module_sysctl_tuner_installs_and_uninstalls_with_the_builtin_jq() {
    // PATH holds only a `jq` that is the operator binary: the hook's jq is the built-in one.
    let bin = TempDir::new("jq-bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_shell-operator"), bin.0.join("jq"))
        .expect("jq link");
    let path = bin.0.display().to_string();
    let addon = scenario("101-module-sysctl-tuner", &[("PATH", &path)]);
    addon.wait_ready();
    addon.wait_log(&["sysctl-tuner hook: beforeHelm"], LONG);
    addon.wait_log(&["sysctl-tuner hook: afterHelm"], LONG);
    let ds = daemonset(&addon).expect("DaemonSet installed");
    assert_eq!(ds["metadata"]["labels"]["heritage"], "addon-operator");
    addon.set_config("sysctlTunerEnabled", "false");
    addon.wait_log(&["sysctl-tuner hook: afterDeleteHelm"], LONG);
    let deadline = Instant::now() + LONG;
    while daemonset(&addon).is_some() {
        assert!(Instant::now() < deadline, "DaemonSet not removed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(addon.revisions("sysctl-tuner").is_empty());
}

#[test]
fn sysctl_tuner_values_merge_defaults_with_the_configmap() {
    let addon = scenario("201-sysctl-tuner-values", &[]);
    addon.wait_ready();
    let ds = daemonset(&addon).expect("DaemonSet");
    let script = ds["spec"]["template"]["spec"]["containers"][0]["args"][0]
        .as_str()
        .expect("args")
        .to_string();
    for line in [
        "sysctl -w net.core.somaxconn=1024",
        "sysctl -w net.ipv4.ip_forward=1",
        "sysctl -w vm.swappiness=10",
        "sleep 300",
    ] {
        assert!(script.contains(line), "{line:?} not in {script}");
    }
    assert!(
        !script.contains("sleep 600"),
        "the ConfigMap's sleep wins: {script}"
    );
}

#[test]
fn module_symlinks_in_two_modules_dirs_both_run() {
    let addon = scenario(
        "202-module-symlinks",
        &[("MODULES_DIR", "modules-1:modules-2")],
    );
    addon.wait_ready();
    addon.wait_log(&["backend module started"], LONG);
    addon.wait_log(&["frontend module started (a symlinked module)"], LONG);
    let list: Value =
        serde_json::from_str(&addon.cli(&["module", "list", "-o", "json"])).expect("json");
    assert_eq!(list["enabledModules"], json!(["backend", "frontend"]));
    let states: Vec<(&str, &str)> = (list["modules"].as_array().into_iter().flatten())
        .filter_map(|m| Some((m["name"].as_str()?, m["state"].as_str()?)))
        .collect();
    assert_eq!(
        states,
        [("backend", "Ready"), ("frontend", "Ready")],
        "{list}"
    );
}
