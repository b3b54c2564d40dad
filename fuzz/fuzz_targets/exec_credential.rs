//! Fuzz target: `shell_operator::fuzzing::exec_credential` (see src/fuzzing.rs); corpus in fuzz/corpus/exec_credential/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::exec_credential(data));
