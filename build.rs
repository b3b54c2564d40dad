//! Build facts for `shell-operator version --verbose` (issue 40): the target
//! triple, the git commit, the rustc version and how many crates are linked in.
//!
//! Each is passed to the compiler as an environment variable read with `env!`:
//! `SO_BUILD_TARGET`, `SO_BUILD_COMMIT`, `SO_BUILD_RUSTC`, `SO_BUILD_CRATES`.
//! Nothing here reads the clock, so two builds of one commit stay identical.
//!
//! The commit comes from `SHELL_OPERATOR_COMMIT` when set (a build from a source
//! tarball, or the reproducibility test's copy), else from `git rev-parse HEAD`,
//! else "unknown". The crate count is what `cargo tree` lists for the target
//! through normal (not build or dev) edges without proc-macros: exactly the
//! crates whose code is in the binary, ours included; the SBOM lists the same set.

use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=SO_BUILD_TARGET={target}");
    println!("cargo:rustc-env=SO_BUILD_COMMIT={}", commit());
    println!("cargo:rustc-env=SO_BUILD_RUSTC={}", rustc_version());
    println!("cargo:rustc-env=SO_BUILD_CRATES={}", crate_count(&target));
    println!("cargo:rerun-if-env-changed=SHELL_OPERATOR_COMMIT");
    println!("cargo:rerun-if-changed=Cargo.lock");
    println!("cargo:rerun-if-changed=build.rs");
}

/// stdout of a command when it ran and succeeded, trimmed.
fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit, and the files whose change means a new one (HEAD, its branch ref
/// and packed-refs; `--git-path` finds them in worktrees too).
fn commit() -> String {
    if let Ok(c) = std::env::var("SHELL_OPERATOR_COMMIT") {
        return c;
    }
    let git = |args: &[&str]| output(Command::new("git").args(args));
    let Some(head) = git(&["rev-parse", "HEAD"]) else {
        return "unknown".into();
    };
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(r);
    }
    for w in watch {
        // Only files that exist: cargo reruns a build script on every build while
        // one of its rerun-if-changed paths is missing.
        if let Some(path) = git(&["rev-parse", "--git-path", &w])
            && std::path::Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    head
}

/// `rustc -V` of the compiler cargo uses, e.g. "rustc 1.95.0 (59807616e 2026-04-14)".
fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    output(Command::new(rustc).arg("-V")).unwrap_or_else(|| "unknown".into())
}

/// Distinct packages `cargo tree` lists for `target` (see the module doc).
fn crate_count(target: &str) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let tree = output(
        Command::new(cargo)
            .current_dir(dir)
            .args(["tree", "--offline", "--locked", "-p", "shell-operator"])
            .args([
                "-e",
                "normal,no-proc-macro",
                "--prefix",
                "none",
                "-f",
                "{p}",
            ])
            .args(["--target", target])
            .env_remove("CARGO_ENCODED_RUSTFLAGS"),
    );
    let Some(tree) = tree else {
        println!("cargo:warning=cargo tree failed: the crate count is unknown");
        return "unknown".into();
    };
    let mut crates: Vec<&str> = tree
        .lines()
        .map(|l| l.trim_end_matches(" (*)"))
        .filter(|l| !l.is_empty())
        .collect();
    crates.sort_unstable();
    crates.dedup();
    crates.len().to_string()
}
