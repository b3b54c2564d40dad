//! Fuzz target: `shell_operator::fuzzing::admission_review` (see src/fuzzing.rs); corpus in fuzz/corpus/admission_review/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::admission_review(data));
