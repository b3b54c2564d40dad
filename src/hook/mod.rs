//! Hooks: finding them under the hooks directory, asking each for its bindings with
//! `--config`, and the immutable [`Hook`] records every thread reads afterwards.
//!
//! Discovery and config loading run once, on the main thread, before any other thread
//! starts; a hook that cannot be loaded stops startup with a message naming it.

pub mod config;
pub mod context;
pub mod limiter;
pub mod table;

use crate::jq::JqFilter;
use crate::process::{self, ExitStatus};
use config::{ConfigVersion, HookConfig, HookKind};
use limiter::TokenBucket;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One loaded hook. A clone shares its rate limiter (a reload copies the hooks
/// it keeps into the new table, `hook/table.rs`).
#[derive(Debug, Clone)]
pub struct Hook {
    /// Path relative to the hooks dir, e.g. `002-hooks/a.sh`: the hook's name everywhere.
    pub name: String,
    /// Absolute path of the executable.
    pub path: PathBuf,
    pub config: HookConfig,
    /// `settings.executionMinInterval`/`executionBurst`, shared by all queues.
    pub limiter: Arc<Mutex<TokenBucket>>,
    /// Compiled `jqFilter` of each kubernetes binding (same index as `config.kubernetes`).
    pub jq_filters: Vec<Option<Arc<JqFilter>>>,
    /// FNV-1a of the `--config` output (0 for a hook the operator made): a reload
    /// keeps a hook whose path and sum are unchanged.
    pub config_sum: u128,
    /// Removed by a reload: its slot stays (hook indices never move), emptied of
    /// bindings; its tasks still queued are dropped.
    pub retired: bool,
}

impl Hook {
    /// True for a hook the operator made itself (addon-operator's ConfigMap watch):
    /// it has no executable, and is kept out of hook metrics and `hook list`.
    pub(crate) fn is_internal(&self) -> bool {
        self.path.as_os_str().is_empty()
    }

    /// True for config v0 hooks (their contexts have the v0 shape and never combine).
    pub(crate) fn is_v0(&self) -> bool {
        self.config.version == ConfigVersion::V0
    }

    /// True if the hook has `kubernetes` bindings (it needs watches).
    pub(crate) fn has_kube_bindings(&self) -> bool {
        !self.config.kubernetes.is_empty()
    }

    /// What is left of a hook a reload removed: its name and path, no bindings.
    pub(crate) fn retire(&self) -> Hook {
        let config = config::HookConfig {
            version: self.config.version.clone(),
            on_startup: None,
            schedule: Vec::new(),
            kubernetes: Vec::new(),
            validating: Vec::new(),
            mutating: Vec::new(),
            conversion: Vec::new(),
            settings: Default::default(),
            lifecycle: Default::default(),
        };
        Hook {
            name: self.name.clone(),
            path: self.path.clone(),
            config,
            limiter: Arc::clone(&self.limiter),
            jq_filters: Vec::new(),
            config_sum: 0,
            retired: true,
        }
    }
}

/// A hook that could not be found or loaded.
#[derive(Debug)]
pub(crate) struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Finds every hook under `root`: executable regular files, recursively, skipping
/// dot-entries, `lib` directories and docs/data files, sorted by path.
pub(crate) fn discover(root: &Path) -> Result<Vec<PathBuf>, LoadError> {
    discover_skipping(root, &[])
}

/// [`discover`], also skipping directories named in `skip` at any depth
/// (addon-operator's module hooks skip `venv`, a Python virtualenv, as flant does).
pub(crate) fn discover_skipping(root: &Path, skip: &[&str]) -> Result<Vec<PathBuf>, LoadError> {
    let mut found = Vec::new();
    walk(root, skip, &mut found)
        .map_err(|e| LoadError(format!("hooks dir '{}': {e}", root.display())))?;
    found.sort();
    Ok(found)
}

fn walk(dir: &Path, skip: &[&str], found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let link_type = entry.file_type()?;
        if link_type.is_dir() {
            if name != "lib" && !skip.contains(&name.as_str()) {
                walk(&path, skip, found)?;
            }
            continue;
        }
        if is_hook_file(&path, &name) {
            found.push(path);
        }
    }
    Ok(())
}

fn is_hook_file(path: &Path, name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    if matches!(ext, "yaml" | "yml" | "json" | "md" | "txt") {
        return false;
    }
    // Follows symlinks: a link counts only if it points at an executable file.
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    if meta.permissions().mode() & 0o111 == 0 {
        crate::log::warn(
            "file is skipped: no executable permissions, chmod +x is required to run this hook",
            &[("path", &path.display().to_string())],
        );
        return false;
    }
    true
}

/// Runs `<hook> --config` in the hook's directory, parses what it prints and
/// compiles its jq filters (with modules from `jq_library`).
pub(crate) fn load(
    root: &Path,
    path: &Path,
    timeout: Option<Duration>,
    jq_library: Option<&Path>,
) -> Result<Hook, LoadError> {
    load_as(root, path, timeout, jq_library, HookKind::Shell)
}

/// [`load`] for a hook of `kind` (addon-operator's global and module hooks); its name
/// is its path relative to `root`.
pub(crate) fn load_as(
    root: &Path,
    path: &Path,
    timeout: Option<Duration>,
    jq_library: Option<&Path>,
    kind: HookKind,
) -> Result<Hook, LoadError> {
    let name = path
        .strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned();
    let output = run_config(path, timeout)
        .map_err(|e| LoadError(format!("cannot get config for hook '{name}': {e}")))?;
    let config = config::parse_as(&name, &output, kind)
        .map_err(|e| LoadError(format!("{e}\n{}", quote_config(&output))))?;
    let mut jq_filters = Vec::with_capacity(config.kubernetes.len());
    for (i, b) in config.kubernetes.iter().enumerate() {
        let Some(code) = &b.jq_filter else {
            jq_filters.push(None);
            continue;
        };
        let filter = JqFilter::compile(code, jq_library, &[]).map_err(|e| {
            LoadError(format!(
                "hook '{name}': kubernetes[{i}] \"{}\": field 'jqFilter': {e}",
                b.name
            ))
        })?;
        jq_filters.push(Some(Arc::new(filter)));
    }
    let limiter = Arc::new(Mutex::new(TokenBucket::from_settings(&config.settings)));
    let mut sum = crate::fnv::Fnv128::new();
    sum.bytes(output.as_bytes());
    Ok(Hook {
        name,
        path: path.to_path_buf(),
        config,
        limiter,
        jq_filters,
        config_sum: sum.finish(),
        retired: false,
    })
}

/// Most a hook's `--config` may print (16 MiB; configs are a few KiB).
pub(crate) const MAX_CONFIG_OUTPUT: usize = 16 << 20;

/// How much of a bad `--config` output an error quotes.
const CONFIG_QUOTED: usize = 4096;

fn run_config(path: &Path, timeout: Option<Duration>) -> Result<String, String> {
    let mut cmd = std::process::Command::new(path);
    crate::builtin_jq::apply(&mut cmd);
    cmd.arg("--config");
    if let Some(dir) = path.parent() {
        cmd.current_dir(dir);
    }
    let run = process::run_captured(&mut cmd, timeout, MAX_CONFIG_OUTPUT).map_err(|e| {
        match e.kind() {
            std::io::ErrorKind::InvalidData => format!(
                "--config output is larger than {MAX_CONFIG_OUTPUT} bytes; the hook was killed"
            ),
            std::io::ErrorKind::Interrupted => e.to_string(),
            _ => format!("cannot start: {e}"),
        }
    })?;
    match run.status {
        ExitStatus::Code(0) => {
            String::from_utf8(run.stdout).map_err(|_| "--config output is not UTF-8".to_string())
        }
        status => {
            let stderr = String::from_utf8_lossy(&run.stderr);
            let stderr = stderr.trim();
            Err(if stderr.is_empty() {
                status.to_string()
            } else {
                format!("{status}: {stderr}")
            })
        }
    }
}

/// The `--config` output for an error message: whole if short, else its first
/// [`CONFIG_QUOTED`] bytes (a 100 MB output must not become a 100 MB log line).
fn quote_config(output: &str) -> String {
    let output = output.trim_end();
    if output.len() <= CONFIG_QUOTED {
        return format!("hook --config output: {output}");
    }
    let mut cut = CONFIG_QUOTED;
    while !output.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "hook --config output (first {cut} of {} bytes): {}",
        output.len(),
        &output[..cut]
    )
}

/// Discovers and loads every hook (their `--config` run a few at a time); the
/// error is the first failed hook's in discovery order.
pub(crate) fn load_all(
    root: &Path,
    timeout: Option<Duration>,
    jq_library: Option<&Path>,
) -> Result<Vec<Hook>, LoadError> {
    let paths = discover(root)?;
    let width = crate::threads::startup_width();
    crate::threads::map_parallel("hook-config", &paths, width, |p| {
        load(root, p, timeout, jq_library)
    })
    .into_iter()
    .collect()
}

/// The hook file name made safe for temp file names: `002-a/b.py` → `002-a-b-py`.
pub(crate) fn safe_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' => c,
            '.' | '/' | ' ' | '&' | '_' | '=' | '+' | ':' | '-' => '-',
            _ => continue,
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn touch(path: &Path, mode: u32) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn discovery_skips_lib_dotfiles_data_and_non_executables() {
        let dir = std::env::temp_dir().join(format!("so-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        touch(&dir.join("b.sh"), 0o755);
        touch(&dir.join("a/z.sh"), 0o755);
        touch(&dir.join("a/lib/helper.sh"), 0o755);
        touch(&dir.join("lib/common.sh"), 0o755);
        touch(&dir.join(".hidden/x.sh"), 0o755);
        touch(&dir.join(".dot.sh"), 0o755);
        touch(&dir.join("notes.md"), 0o755);
        touch(&dir.join("values.yaml"), 0o755);
        touch(&dir.join("plain.sh"), 0o644);
        std::os::unix::fs::symlink(dir.join("b.sh"), dir.join("c-link.sh")).expect("symlink");
        let found: Vec<String> = discover(&dir)
            .expect("discover")
            .iter()
            .map(|p| p.strip_prefix(&dir).expect("rel").display().to_string())
            .collect();
        assert_eq!(found, vec!["a/z.sh", "b.sh", "c-link.sh"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn safe_names_match_flant() {
        assert_eq!(
            safe_name("002-cool-hooks/monitor-namespaces.py"),
            "002-cool-hooks-monitor-namespaces-py"
        );
        assert_eq!(safe_name("a b__c.sh"), "a-b-c-sh");
    }
}
