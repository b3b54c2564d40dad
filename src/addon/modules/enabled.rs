//! Which modules are enabled (seed 004, "Modules discovery"). Each module's
//! `<key>Enabled` comes from `MODULES_DIR/values.yaml`, then the module's own
//! `values.yaml`, then the ConfigMap, then global hooks' dynamic flags (the last
//! one set wins, flant v1.0's order); disabled by default. A module enabled so far
//! runs its `enabled` script, which can only say no. The script reads the values
//! files, with `global.enabledModules` listing the modules enabled before it, and
//! writes `true` or `false` into `$MODULE_ENABLED_RESULT`, and may say why it said
//! no in `$MODULE_ENABLED_REASON` (logged). Its stderr is logged at debug level.
//!
//! Any failure (the script exits non-zero or writes anything else) fails the whole
//! computation with the module's name and what it wrote; the caller keeps the
//! previous state and retries.

use crate::addon::modules::Module;
use crate::addon::state::{Shared, State};
use crate::executor::ChildFile;
use crate::log;
use crate::process::{self, ExitStatus};
use std::path::Path;
use std::process::Command;

/// The enabled modules, in module order.
pub(crate) fn compute(shared: &Shared, st: &State) -> Result<Vec<usize>, EnabledError> {
    let mut enabled: Vec<usize> = Vec::new();
    let layout = shared.layout();
    // Module order: by (order, name); a module a reload added has the last index.
    let mut order: Vec<(usize, &Module)> = layout.modules.iter().enumerate().collect();
    order.sort_by(|a, b| (a.1.order, &a.1.name).cmp(&(b.1.order, &b.1.name)));
    for (mi, module) in order {
        if st.removed.contains(&mi) {
            continue;
        }
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
                .map(|&m| layout.modules[m].name.clone())
                .collect();
            if !run_script(shared, st, mi, module, script, before)? {
                continue;
            }
        }
        enabled.push(mi);
    }
    Ok(enabled)
}

/// Most an `enabled` script may print (it is only logged).
const MAX_SCRIPT_STDOUT: usize = 1 << 20;

/// Most `$MODULE_ENABLED_RESULT` and `$MODULE_ENABLED_REASON` may hold.
const MAX_ANSWER: u64 = 4096;

/// Runs a module's `enabled` script; `Ok(false)` when it says the module is off.
/// Its files are made as a hook's are ([`ChildFile`]: 0600, `O_EXCL`, in the tmp
/// dir). Besides flant v1.0's three, it gets `$MODULE_ENABLED_REASON` (an empty file,
/// as flant's newer releases give), where it may say why it disables the module.
fn run_script(
    shared: &Shared,
    st: &State,
    mi: usize,
    module: &Module,
    script: &Path,
    enabled_before: Vec<String>,
) -> Result<bool, EnabledError> {
    let fail = |problem: Problem| EnabledError {
        module: module.name.clone(),
        problem,
    };
    let (config, values) =
        (st.module_files(mi, enabled_before)).map_err(|e| fail(Problem::Values(Box::new(e))))?;
    let file = |kind: &str, content: &[u8]| {
        let stem = format!("{}.module-{kind}", module.name);
        ChildFile::create(&shared.tmp_dir, &stem, content).map_err(|e| fail(Problem::File(e)))
    };
    let config = file(
        "config-values.json",
        &serde_json::to_vec(&config).unwrap_or_default(),
    )?;
    let values = file(
        "values.json",
        &serde_json::to_vec(&values).unwrap_or_default(),
    )?;
    let result = file("enabled-result", b"")?;
    let reason = file("enabled-reason", b"")?;
    let mut cmd = Command::new(script);
    crate::builtin_jq::apply(&mut cmd);
    cmd.current_dir(&module.path)
        .env("CONFIG_VALUES_PATH", config.path())
        .env("VALUES_PATH", values.path())
        .env("MODULE_ENABLED_RESULT", result.path())
        .env("MODULE_ENABLED_REASON", reason.path());
    let run = process::run_captured(&mut cmd, shared.script_timeout, MAX_SCRIPT_STDOUT).map_err(
        |error| {
            let script = script.to_path_buf();
            fail(Problem::Start { script, error })
        },
    )?;
    // As flant: the script's CPU and memory as a module hook `enabled`.
    let labels = crate::metrics::HookRunLabels {
        module: &module.name,
        hook: "enabled",
        binding: "enabled",
        queue: "main",
        activation: st.lifecycle.converge_event(),
    };
    (shared.metrics.module_hooks).observe_usage(&labels, &run.usage);
    for line in String::from_utf8_lossy(&run.stdout).lines() {
        log::info(line, &[("module", &module.name), ("output", "enabled")]);
    }
    if run.status != ExitStatus::Code(0) {
        let stderr = String::from_utf8_lossy(&run.stderr);
        let (status, stderr) = (run.status.to_string(), stderr.trim().to_string());
        return Err(fail(Problem::Failed { status, stderr }));
    }
    log_stderr(&module.name, "enabled", &run.stderr);
    let answer = |f: &ChildFile, var: &'static str| {
        let bytes = f
            .read(var, MAX_ANSWER)
            .map_err(|e| fail(Problem::File(e)))?;
        String::from_utf8(bytes).map_err(|_| fail(Problem::NotText(var)))
    };
    match answer(&result, "MODULE_ENABLED_RESULT")?.trim() {
        "true" => Ok(true),
        "false" => {
            let why = answer(&reason, "MODULE_ENABLED_REASON")?;
            log::info(
                "module disabled by its enabled script",
                &[("module", &module.name), ("reason", why.trim())],
            );
            Ok(false)
        }
        other => Err(fail(Problem::Answer(other.to_string()))),
    }
}

/// Logs, at debug level with the module's name, what a child process that
/// succeeded (an `enabled` script, helm) wrote to stderr; `output` says which.
pub(in crate::addon) fn log_stderr(module: &str, output: &str, stderr: &[u8]) {
    for line in String::from_utf8_lossy(stderr).lines() {
        let line = line.trim_end();
        if !line.is_empty() {
            log::debug(
                line,
                &[("module", module), ("output", output), ("stream", "stderr")],
            );
        }
    }
}

/// Why a module's `enabled` script gave no answer.
#[derive(Debug)]
pub(crate) struct EnabledError {
    module: String,
    problem: Problem,
}

/// What went wrong with the script.
#[derive(Debug)]
enum Problem {
    /// Its values could not be computed.
    Values(Box<crate::addon::Error>),
    /// One of its files could not be written or read.
    File(std::io::Error),
    /// It could not be started.
    Start {
        script: std::path::PathBuf,
        error: std::io::Error,
    },
    /// It exited with an error.
    Failed { status: String, stderr: String },
    /// An answer file (`$var`) is not UTF-8.
    NotText(&'static str),
    /// `$MODULE_ENABLED_RESULT` holds neither true nor false.
    Answer(String),
}

impl std::fmt::Display for EnabledError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "module '{}': enabled script: ", self.module)?;
        match &self.problem {
            Problem::Values(e) => e.fmt(f),
            Problem::File(e) => e.fmt(f),
            Problem::Start { script, error } => {
                write!(f, "cannot run {}: {error}", script.display())
            }
            Problem::Failed { status, stderr } => write!(f, "{status}: {stderr}"),
            Problem::NotText(var) => write!(f, "${var}: not UTF-8 text"),
            Problem::Answer(other) => write!(
                f,
                "wrote {other:?} to $MODULE_ENABLED_RESULT, expected true or false"
            ),
        }
    }
}

impl std::error::Error for EnabledError {}
