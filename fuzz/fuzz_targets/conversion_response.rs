//! Fuzz target: `shell_operator::fuzzing::conversion_response` (see src/fuzzing.rs); corpus in fuzz/corpus/conversion_response/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::conversion_response(data));
