//! Compiles `proto/nacos_grpc_service.proto` with protox (no system `protoc`) and generates
//! the prost messages and tonic stubs into `OUT_DIR`.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/nacos_grpc_service.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        // The client stubs serve the raw-protocol tests and future tools.
        .build_client(true)
        .build_transport(false)
        // `google.protobuf.Any` is generated here so that its `value` can be `Bytes`: one
        // serialized push body is then shared by every connection it goes to.
        .compile_well_known_types(true)
        .bytes(".")
        .include_file("nacos_proto.rs")
        .compile_fds(fds)?;
    Ok(())
}
