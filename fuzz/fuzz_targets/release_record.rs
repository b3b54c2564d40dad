//! Fuzz target: `shell_operator::fuzzing::release_record` (see src/fuzzing.rs); corpus in fuzz/corpus/release_record/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::release_record(data));
