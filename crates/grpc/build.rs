//! Compiles proto/ with protox (a protobuf compiler in pure Rust) and prost-build into
//! `$OUT_DIR/<package>.rs`, writes each service's method table beside its messages
//! ([`MethodTable`]), and stores the encoded `FileDescriptorSet` of every file (without
//! source info) as `$OUT_DIR/descriptors.bin` for the reflection service.

use std::fmt::Write as _;
use std::path::PathBuf;

use prost::Message as _;

/// The .proto files, relative to proto/ (their names as reflection reports them).
const FILES: &[&str] = &[
    "benchmark.proto",
    "grpc/testing/empty.proto",
    "grpc/testing/messages.proto",
    "grpc/testing/test.proto",
    "grpc/health/v1/health.proto",
    "grpc/reflection/v1/reflection.proto",
    "grpc/reflection/v1alpha/reflection.proto",
];

fn main() {
    println!("cargo:rerun-if-changed=proto");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let fds = match protox::compile(FILES, ["proto"]) {
        Ok(fds) => fds,
        Err(e) => {
            // One clear line, not a backtrace: protox's Debug names FILE:LINE:COLUMN (its
            // Display only the message).
            eprintln!("linerate-grpc: {e:?}");
            std::process::exit(1);
        }
    };
    let mut bare = fds.clone();
    for file in &mut bare.file {
        file.source_code_info = None;
    }
    std::fs::write(out.join("descriptors.bin"), bare.encode_to_vec()).expect("descriptors.bin");
    let mut config = prost_build::Config::new();
    config.service_generator(Box::new(MethodTable));
    if let Err(e) = config.compile_fds(fds) {
        eprintln!("linerate-grpc: {e}");
        std::process::exit(1);
    }
}

/// Writes, for each service, a module `<service>_methods` holding `SERVICE` (a
/// `crate::proto::Service`) and one `crate::proto::Method` constant per method: no server
/// or client code (the server's service layer dispatches on these paths).
struct MethodTable;

impl prost_build::ServiceGenerator for MethodTable {
    fn generate(&mut self, service: prost_build::Service, buf: &mut String) {
        let full = if service.package.is_empty() {
            service.proto_name.clone()
        } else {
            format!("{}.{}", service.package, service.proto_name)
        };
        let module = format!("{}_methods", snake(&service.name));
        let _ = writeln!(
            buf,
            "/// The methods of `{full}`: paths and streaming kinds."
        );
        let _ = writeln!(buf, "pub mod {module} {{");
        let mut names = Vec::new();
        for m in &service.methods {
            let constant = m.name.to_uppercase();
            let path = format!("/{full}/{}", m.proto_name);
            let _ = writeln!(
                buf,
                "    /// `{path}`: `{}` → `{}`.\n    pub const {constant}: crate::proto::Method = \
                 crate::proto::Method {{ path: \"{path}\", name: \"{}\", client_streaming: {}, \
                 server_streaming: {} }};",
                m.input_proto_type.trim_start_matches('.'),
                m.output_proto_type.trim_start_matches('.'),
                m.proto_name,
                m.client_streaming,
                m.server_streaming
            );
            names.push(constant);
        }
        let _ = writeln!(
            buf,
            "    /// The service, its methods in declaration order.\n    pub const SERVICE: \
             crate::proto::Service = crate::proto::Service {{ name: \"{full}\", methods: &[{}] }};",
            names.join(", ")
        );
        let _ = writeln!(buf, "}}");
    }
}

/// `BenchmarkService` → `benchmark_service` (prost-build's Rust names are UpperCamelCase).
fn snake(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}
