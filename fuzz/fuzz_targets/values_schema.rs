//! Fuzz target: `shell_operator::fuzzing::values_schema` (see src/fuzzing.rs); corpus in fuzz/corpus/values_schema/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::values_schema(data));
