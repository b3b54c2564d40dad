//! Fuzz target: `shell_operator::fuzzing::watch_events` (see src/fuzzing.rs); corpus in fuzz/corpus/watch_events/.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| shell_operator::fuzzing::watch_events(data));
