//! Which modules are enabled (seed 004, "Modules discovery"). Each module's
//! `<key>Enabled` comes from `MODULES_DIR/values.yaml`, then the module's own
//! `values.yaml`, then the ConfigMap, then global hooks' dynamic flags (the last
//! one set wins, flant v1.0's order); disabled by default. A module enabled so far
//! runs its `enabled` script, which can only say no. The script reads the values
//! files, with `global.enabledModules` listing the modules enabled before it, and
//! writes `true` or `false` into `$MODULE_ENABLED_RESULT`.
//!
//! Any failure (the script exits non-zero or writes anything else) fails the whole
//! computation with the module's name and what it wrote; the caller keeps the
//! previous state and retries.

use super::modules::Module;
use super::state::{Shared, State};
use crate::log;
use crate::process::{self, ExitStatus};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// The enabled modules, in module order.
pub fn compute(shared: &Shared, st: &State) -> Result<Vec<usize>, String> {
    let mut enabled: Vec<usize> = Vec::new();
    for (mi, module) in shared.layout.modules.iter().enumerate() {
        let key = &module.key;
        let flag = [
            module.static_enabled,
            st.config.enabled.get(key).copied(),
            st.dynamic.get(key).copied(),
        ]
        .into_iter()
        .flatten()
        .last()
        .unwrap_or(false);
        if !flag {
            continue;
        }
        if let Some(script) = &module.enabled_script {
            let before: Vec<String> = enabled
                .iter()
                .map(|&m| shared.layout.modules[m].name.clone())
                .collect();
            if !run_script(shared, st, mi, module, script, before)? {
                log::info(
                    "module disabled by its enabled script",
                    &[("module", &module.name)],
                );
                continue;
            }
        }
        enabled.push(mi);
    }
    Ok(enabled)
}

static SCRIPT_RUNS: AtomicU64 = AtomicU64::new(0);

/// Most an `enabled` script may print (it is only logged).
const MAX_SCRIPT_STDOUT: usize = 1 << 20;

/// Runs a module's `enabled` script; `Ok(false)` when it says the module is off.
fn run_script(
    shared: &Shared,
    st: &State,
    mi: usize,
    module: &Module,
    script: &Path,
    enabled_before: Vec<String>,
) -> Result<bool, String> {
    let fail = |e: String| format!("module '{}': enabled script: {e}", module.name);
    let (config, values) = st.module_files(mi, enabled_before).map_err(fail)?;
    let id = SCRIPT_RUNS.fetch_add(1, Ordering::Relaxed);
    let file = |kind: &str| -> PathBuf {
        let name = format!("{}.module-{kind}-{}-{id}", module.name, std::process::id());
        shared.tmp_dir.join(name)
    };
    let files = TempFiles(vec![
        file("config-values.json"),
        file("values.json"),
        file("enabled-result"),
    ]);
    let write = |p: &Path, bytes: &[u8]| {
        std::fs::write(p, bytes).map_err(|e| fail(format!("{}: {e}", p.display())))
    };
    write(
        &files.0[0],
        &serde_json::to_vec(&config).unwrap_or_default(),
    )?;
    write(
        &files.0[1],
        &serde_json::to_vec(&values).unwrap_or_default(),
    )?;
    write(&files.0[2], b"")?;
    let mut cmd = Command::new(script);
    crate::builtin_jq::apply(&mut cmd);
    cmd.current_dir(&module.path)
        .env("CONFIG_VALUES_PATH", &files.0[0])
        .env("VALUES_PATH", &files.0[1])
        .env("MODULE_ENABLED_RESULT", &files.0[2]);
    let run = process::run_captured(&mut cmd, shared.script_timeout, MAX_SCRIPT_STDOUT)
        .map_err(|e| fail(format!("cannot run {}: {e}", script.display())))?;
    for line in String::from_utf8_lossy(&run.stdout).lines() {
        log::info(line, &[("module", &module.name), ("output", "enabled")]);
    }
    if run.status != ExitStatus::Code(0) {
        let stderr = String::from_utf8_lossy(&run.stderr);
        return Err(fail(format!("{}: {}", run.status, stderr.trim())));
    }
    let result =
        read_bounded(&files.0[2]).map_err(|e| fail(format!("$MODULE_ENABLED_RESULT: {e}")))?;
    match result.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(fail(format!(
            "wrote {other:?} to $MODULE_ENABLED_RESULT, expected true or false"
        ))),
    }
}

/// Reads at most 4 KiB: the answer is one word.
fn read_bounded(path: &Path) -> std::io::Result<String> {
    crate::bounded_read::read_to_string(path, 4096)
}

/// Temp files removed on drop.
struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}
