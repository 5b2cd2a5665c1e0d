//! Fuzz target `jwt`: see `nacelle_fuzzing::jwt`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::jwt(data));
