//! Fuzz target: `shell_operator::fuzzing::field_selector` (see src/fuzzing.rs); corpus in fuzz/corpus/field_selector/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::field_selector(data));
