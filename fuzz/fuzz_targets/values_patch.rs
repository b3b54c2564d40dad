//! Fuzz target: `shell_operator::fuzzing::values_patch` (see src/fuzzing.rs); corpus in fuzz/corpus/values_patch/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::values_patch(data));
