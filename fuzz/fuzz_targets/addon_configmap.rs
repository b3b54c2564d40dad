//! Fuzz target: `shell_operator::fuzzing::addon_configmap` (see src/fuzzing.rs); corpus in fuzz/corpus/addon_configmap/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::addon_configmap(data));
