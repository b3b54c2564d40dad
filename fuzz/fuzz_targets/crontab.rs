//! Fuzz target: `shell_operator::fuzzing::crontab` (see src/fuzzing.rs); corpus in fuzz/corpus/crontab/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::crontab(data));
