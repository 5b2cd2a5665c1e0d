//! Fuzz target `listening_configs`: see `nacelle_fuzzing::listening_configs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::listening_configs(data));
