//! Generates the demo's gRPC service traits and servers (HttpArena's BenchmarkService, gRPC's
//! interop TestService) from linerate-grpc's .proto files with linerate-grpc's generator, as a
//! user's build script would. The messages are linerate-grpc's (extern paths): only the
//! services are written here, so no type exists twice.

fn main() {
    linerate_grpc::build::configure()
        .extern_path(".benchmark", "::linerate_grpc::proto::benchmark")
        .extern_path(".grpc.testing", "::linerate_grpc::proto::grpc::testing")
        .compile(
            &["benchmark.proto", "grpc/testing/test.proto"],
            &["../grpc/proto"],
        )
        .unwrap_or_else(|e| {
            // One clear line (a .proto error names FILE:LINE:COLUMN), not a backtrace.
            eprintln!("linerate: {e}");
            std::process::exit(1);
        });
}
