//! Fuzz target `grpc_frames`: see `nacelle_fuzzing::grpc_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| nacelle_fuzzing::grpc_frames(data));
