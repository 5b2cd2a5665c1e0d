//! Fuzz target `form`: see `nacelle_fuzzing::form`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::form(data));
