//! Fuzz target `permission`: see `nacelle_fuzzing::permission`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::permission(data));
