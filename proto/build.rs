//! Compiles proto/volley/v1/worker.proto with protox (pure Rust), so the build needs no protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/volley/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    // prost decodes every element of a repeated field before anyone can count them, and an
    // empty NameStats is 2 bytes on the wire: with its Counters inline (256 bytes, 312 in all)
    // a worker's 4 MiB reply could make the controller allocate 650 MB; boxed (64 bytes), 134
    // MB, near the 100 MB an ErrorSample's 48 already allow.
    tonic_prost_build::configure().boxed(".volley.v1.NameStats.counters").compile_fds(descriptors)?;
    Ok(())
}
