//! Generates the demo's gRPC service traits and servers (HttpArena's BenchmarkService, gRPC's
//! interop TestService) from linerate-grpc's .proto files with linerate-grpc's generator, as a
//! user's build script would. The messages are linerate-grpc's (extern paths): only the
//! services are written here, so no type exists twice. tests/grpc_generated.rs gets a user's
//! service with its own messages and descriptor set, from tests/proto/.

fn main() {
    linerate_grpc::build::configure()
        .extern_path(".benchmark", "::linerate_grpc::proto::benchmark")
        .extern_path(".grpc.testing", "::linerate_grpc::proto::grpc::testing")
        .compile(
            &["benchmark.proto", "grpc/testing/test.proto"],
            &["../grpc/proto"],
        )
        .unwrap_or_else(fail);
    linerate_grpc::build::configure()
        .file_descriptor_set("greeter.bin")
        .compile(&["greeter.proto"], &["tests/proto"])
        .unwrap_or_else(fail);
}

/// One clear line (a .proto error names FILE:LINE:COLUMN), not a backtrace.
fn fail(e: linerate_grpc::build::Error) {
    eprintln!("linerate: {e}");
    std::process::exit(1);
}
