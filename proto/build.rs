//! Compiles proto/volley/v1/worker.proto with protox (pure Rust), so the build needs no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/volley/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
