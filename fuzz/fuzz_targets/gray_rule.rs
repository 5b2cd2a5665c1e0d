//! Fuzz target `gray_rule`: see `nacelle_fuzzing::gray_rule`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::gray_rule(data));
