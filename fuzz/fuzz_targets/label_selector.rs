//! Fuzz target: `shell_operator::fuzzing::label_selector` (see src/fuzzing.rs); corpus in fuzz/corpus/label_selector/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::label_selector(data));
