//! Helpers shared by the integration tests of this crate.

// Each test crate (`mod common;`) uses a part of these; the rest is not dead.
#[allow(dead_code)]
pub mod archive;
#[allow(dead_code)]
pub mod audit;
#[allow(dead_code)]
pub mod grpc;
#[allow(dead_code)]
pub mod metrics;
#[allow(dead_code)]
pub mod webhook;
