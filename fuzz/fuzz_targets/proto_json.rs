//! Fuzz target `proto_json`: see `nacelle_fuzzing::proto_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::proto_json(data));
