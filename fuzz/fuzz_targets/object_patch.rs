//! Fuzz target: `shell_operator::fuzzing::object_patch` (see src/fuzzing.rs); corpus in fuzz/corpus/object_patch/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::object_patch(data));
