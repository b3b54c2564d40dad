//! Fuzz target: `shell_operator::fuzzing::jq_compile` (see src/fuzzing.rs); corpus in fuzz/corpus/jq_compile/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::jq_compile(data));
