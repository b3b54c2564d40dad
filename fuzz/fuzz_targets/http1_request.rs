//! Fuzz target: `shell_operator::fuzzing::http1_request` (see src/fuzzing.rs); corpus in fuzz/corpus/http1_request/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::http1_request(data));
