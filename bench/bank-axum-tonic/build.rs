//! Generates bank.proto's messages and server trait at build time, as bench/tonic-grpc does:
//! protox parses the .proto file (there is no protoc on the machines this builds on) and
//! tonic-prost-build writes the Rust from the descriptor set.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(["bank.proto"], ["../bank"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=../bank/bank.proto");
    Ok(())
}
