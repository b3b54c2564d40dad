//! Fuzz target: `shell_operator::fuzzing::hook_config` (see src/fuzzing.rs); corpus in fuzz/corpus/hook_config/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::hook_config(data));
