//! What we ship (issue 40): the static binaries for amd64 and arm64, the arm64 one
//! run under qemu-user-static, the multi-arch OCI image layout, the SBOMs and the
//! double build from two checkouts. Every build goes through the scripts `make
//! static` and `make image` run, so the tests check the artefacts users get.
//!
//! Missing tools (qemu-aarch64-static, zig, sha256sum, tar, python3) are failures,
//! never skips: `.ci/run` installs them.

#[path = "../common/mod.rs"]
mod common;

mod arm64;
mod image;
mod reproducible;
mod sbom;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Rust's target triple for a Debian/OCI architecture name.
pub fn triple(arch: &str) -> &'static str {
    match arch {
        "amd64" => "x86_64-unknown-linux-musl",
        "arm64" => "aarch64-unknown-linux-musl",
        other => panic!("unknown arch {other}"),
    }
}

/// One static build at a time: tests run in parallel and two LTO builds at once
/// only take longer on a small machine.
static BUILD: Mutex<()> = Mutex::new(());

/// Builds (or finds up to date) the static binary for `arch` with
/// scripts/static.sh, as `make static ARCH=arch` does; returns its path.
pub fn static_binary(arch: &str) -> PathBuf {
    let _one = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    static_binary_in(root(), arch, &[])
}

/// scripts/static.sh in checkout `dir` with extra `env`; the binary's path.
pub fn static_binary_in(dir: &Path, arch: &str, env: &[(&str, &str)]) -> PathBuf {
    let out = Command::new(dir.join("scripts/static.sh"))
        .arg(arch)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/static.sh");
    assert!(
        out.status.success(),
        "scripts/static.sh {arch} in {dir:?} failed"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let bin = PathBuf::from(text.lines().last().expect("binary path").trim());
    assert!(bin.is_file(), "{bin:?} missing after the build");
    bin
}

/// SHA-256 of a file, hex, by coreutils' sha256sum (a second implementation
/// beside the scripts' own use of it is not the point here: the bytes are).
pub fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    assert!(out.status.success(), "sha256sum {path:?}");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("digest")
        .to_string()
}

/// The ELF header's e_machine of `bytes`: 62 is x86-64, 183 is AArch64.
pub fn elf_machine(bytes: &[u8]) -> u16 {
    assert!(
        bytes.len() > 20 && bytes[..4] == *b"\x7fELF",
        "not an ELF file"
    );
    assert_eq!(bytes[5], 1, "little-endian ELF expected");
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// The e_machine each OCI architecture must have.
pub fn machine_of(arch: &str) -> u16 {
    match arch {
        "amd64" => 62,
        "arm64" => 183,
        other => panic!("unknown arch {other}"),
    }
}

/// Runs a command to completion; panics with its stderr unless it succeeded.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
