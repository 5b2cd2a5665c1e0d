//! Compiles `proto/nacos_grpc_service.proto` with protox (no system `protoc`) and generates
//! the prost messages and the tonic client stubs into `OUT_DIR` (the server side is
//! `nacelle-grpc`'s `rpc.rs`, on h2).

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/nacos_grpc_service.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        // The client stubs serve member-to-member calls, SDKs, the tests and the bench.
        .build_client(true)
        .build_transport(false)
        // `google.protobuf.Any` is generated here so that its `value` can be `Bytes`.
        .compile_well_known_types(true)
        .bytes(".")
        .include_file("nacos_proto.rs")
        .compile_fds(fds)?;
    Ok(())
}
