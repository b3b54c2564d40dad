//! The built-in jq on hooks' PATH, so `jq` in a hook works in a scratch image
//! (which has no jq, and no `ln` to make one).
//!
//! At startup, when no `jq` is found on the operator's PATH, the operator makes
//! `<tmp dir>/bin/jq`, a symlink to its own binary (which acts as jq when called by
//! that name), and every child it starts (hooks, their `--config`, `enabled`
//! scripts) gets that directory first on its PATH. An image that has a jq keeps
//! using it. The tmp dir is the operator's own 0700 directory (`tmp_dir.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The PATH children get, once [`install`] made the link.
static CHILD_PATH: OnceLock<OsString> = OnceLock::new();

/// The operator binary's path: `/proc/self/exe`, else an absolute argv[0] (a
/// scratch image without /proc).
pub(crate) fn own_path() -> Option<PathBuf> {
    std::env::current_exe().ok().or_else(|| {
        let argv0 = PathBuf::from(std::env::args_os().next()?);
        (argv0.is_absolute() && argv0.is_file()).then_some(argv0)
    })
}

/// Links `<tmp_dir>/bin/jq` to the operator when PATH has no jq; returns the link
/// made (None: PATH has a jq, or the binary's path is unknown).
pub(crate) fn install(tmp_dir: &Path) -> Result<Option<PathBuf>, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| is_executable(&dir.join("jq"))) {
        return Ok(None);
    }
    let Some(binary) = own_path() else {
        return Ok(None);
    };
    let bin = tmp_dir.join("bin");
    let fail = |e: std::io::Error| format!("built-in jq: cannot link {}: {e}", bin.display());
    match std::fs::create_dir(&bin) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(e)),
    }
    let link = bin.join("jq");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&binary, &link).map_err(fail)?;
    let dirs = std::iter::once(bin).chain(std::env::split_paths(&path));
    let joined = std::env::join_paths(dirs).map_err(|e| format!("built-in jq: PATH: {e}"))?;
    let _ = CHILD_PATH.set(joined);
    Ok(Some(link))
}

/// Gives `cmd` the PATH with the built-in jq, if [`install`] made one.
pub(crate) fn apply(cmd: &mut Command) {
    if let Some(path) = CHILD_PATH.get() {
        cmd.env("PATH", path);
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
