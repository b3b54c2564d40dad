//! Fuzz target: `shell_operator::fuzzing::kubeconfig` (see src/fuzzing.rs); corpus in fuzz/corpus/kubeconfig/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::kubeconfig(data));
