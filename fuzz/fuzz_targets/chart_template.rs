//! Fuzz target: `shell_operator::fuzzing::chart_template` (see src/fuzzing.rs); corpus in fuzz/corpus/chart_template/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::chart_template(data));
