//! Fuzz target: `shell_operator::fuzzing::admission_response` (see src/fuzzing.rs); corpus in fuzz/corpus/admission_response/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::admission_response(data));
