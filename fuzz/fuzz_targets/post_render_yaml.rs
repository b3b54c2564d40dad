//! Fuzz target: `shell_operator::fuzzing::post_render_yaml` (see src/fuzzing.rs); corpus in fuzz/corpus/post_render_yaml/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::post_render_yaml(data));
