//! Two builds from two checkouts in different directories give the same bytes.
//!
//! The second checkout is a copy of every file git tracks (as it is in the working
//! tree, so uncommitted edits are in both) in a temp directory, with its own
//! target directory and no `.git`; it is told the commit through
//! SHELL_OPERATOR_COMMIT, as a build from a source tarball would be. To keep CI
//! time sane only arm64 (the cross build, the likelier to drift) is built twice;
//! the first build is the one the other tests use. The SBOMs must match as well.

use crate::common::TempDir;
use crate::{root, run, sha256, static_binary, static_binary_in, triple};
use std::process::Command;

/// Copies the tracked files of the repository into `dest`; `.tools` (caches,
/// not source) is linked so zig is not downloaded again.
fn copy_checkout(dest: &std::path::Path) {
    let files = run(Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root()));
    for rel in files.split('\0').filter(|f| !f.is_empty()) {
        let from = root().join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&from) else {
            continue; // deleted in the working tree
        };
        let to = dest.join(rel);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&from).expect("readlink");
            std::os::unix::fs::symlink(target, &to).expect("symlink");
        } else {
            std::fs::copy(&from, &to).expect("copy file");
        }
    }
    if !dest.join(".tools").exists() {
        std::os::unix::fs::symlink(root().join(".tools"), dest.join(".tools")).expect(".tools");
    }
}

#[test]
fn arm64_binary_and_sbom_are_identical_from_a_second_checkout() {
    let head = run(Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root()));
    let dir = TempDir::new("repro");
    let copy = dir.0.join("elsewhere/checkout");
    copy_checkout(&copy);
    // The copy builds while the first build is brought up to date: the last step
    // of each (the LTO link) uses one core, so the two overlap well.
    let second = std::thread::spawn({
        let copy = copy.clone();
        move || {
            let target_dir = copy.join("target");
            static_binary_in(
                &copy,
                "arm64",
                &[
                    ("SHELL_OPERATOR_COMMIT", head.trim()),
                    ("CARGO_TARGET_DIR", target_dir.to_str().expect("utf8")),
                ],
            )
        }
    });
    let first = static_binary("arm64");
    let second = second.join().expect("second build");
    assert!(
        second.starts_with(&copy),
        "{second:?} built outside the copy"
    );
    assert_eq!(sha256(&first), sha256(&second), "arm64 binaries differ");
    let sbom = |checkout: &std::path::Path, bin: &std::path::Path, out: &std::path::Path| {
        run(Command::new("python3")
            .arg(checkout.join("scripts/sbom.py"))
            .arg(triple("arm64"))
            .arg(bin)
            .arg(out));
    };
    sbom(root(), &first, &dir.0.join("first.json"));
    sbom(&copy, &second, &dir.0.join("second.json"));
    assert_eq!(
        sha256(&dir.0.join("first.json")),
        sha256(&dir.0.join("second.json")),
        "SBOMs differ"
    );
}
