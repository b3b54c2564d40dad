//! Fuzz target: `shell_operator::fuzzing::hook_metrics` (see src/fuzzing.rs); corpus in fuzz/corpus/hook_metrics/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::hook_metrics(data));
