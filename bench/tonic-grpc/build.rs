//! Generates the messages and server traits from proto/ at build time: protox parses the
//! .proto files (there is no protoc on the machines this builds on) and tonic-prost-build
//! writes the Rust from the descriptor set.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["benchmark.proto", "grpc/testing/test.proto"];
    let fds = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .compile_fds(fds)?;
    for f in files {
        println!("cargo:rerun-if-changed=proto/{f}");
    }
    println!("cargo:rerun-if-changed=proto/grpc/testing/messages.proto");
    Ok(())
}
