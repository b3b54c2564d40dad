//! Replays every committed fuzz corpus file (`fuzz/corpus/<target>/*`) through the
//! matching `shell_operator::fuzzing` entry point on stable Rust, so a parser that
//! starts panicking or hanging on an input the fuzzer once found fails `cargo test`.
//! Also checks that targets and corpus directories match one to one and that no
//! corpus is empty (an empty one would make the replay pass without testing).

use shell_operator::fuzzing::TARGETS;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest one corpus input may take in a debug build before it counts as a hang.
const SLOW: Duration = Duration::from_secs(10);

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let mut dirs: Vec<String> = std::fs::read_dir(corpus_root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    names.sort();
    assert_eq!(dirs, names, "fuzz/corpus/ dirs vs fuzzing::TARGETS");
    let targets = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/fuzz_targets");
    for name in &names {
        let file = targets.join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&file).unwrap();
        let call = format!("shell_operator::fuzzing::{name}(data)");
        assert!(text.contains(&call), "{} must call {call}", file.display());
    }
}

#[test]
fn every_corpus_file_replays_without_panic_or_hang() {
    let mut failures = Vec::new();
    for (name, run) in TARGETS {
        let files = files_of(&corpus_root().join(name));
        assert!(!files.is_empty(), "fuzz/corpus/{name} is empty");
        for file in files {
            let data = std::fs::read(&file).unwrap();
            let started = Instant::now();
            if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failures.push(format!("{}: panicked", file.display()));
            }
            let took = started.elapsed();
            if took > SLOW {
                failures.push(format!("{}: took {took:?}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
