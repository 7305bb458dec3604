//! Code generation for build scripts (cargo feature `build`): [`Generator`], a prost-build
//! `ServiceGenerator` writing each service's trait, server and client for
//! `linerate_server::grpc`, and [`Builder`] / [`compile_protos`], which compile `.proto` files with protox (a protobuf
//! compiler in pure Rust: no `protoc`) and prost-build, and can keep the encoded
//! `FileDescriptorSet` for the reflection service. Writes Rust source only; serves nothing.
//!
//! For `service Greeter { rpc SayHello(HelloRequest) returns (HelloReply); }` in package
//! `hello`, the module `hello` gets `greeter_server::{Greeter, GreeterServer, SERVICE_NAME}`
//! beside the messages, as tonic-build names them:
//! - `trait Greeter: Send + Sync + 'static`, one method per RPC, each answering UNIMPLEMENTED
//!   unless the application writes it. The four shapes, for `rpc M(Req) returns (Resp)`:
//!   unary `fn m(&self, Request<Req>) -> impl Future<Output = Result<Response<Resp>, Status>>`;
//!   server streaming `fn m(&self, Request<Req>, &mut Sink<Resp>) -> impl Future<Output =
//!   Result<(), Status>>`; client streaming `Request<Streaming<Req>>` in, `Response<Resp>`
//!   out; bidirectional `Request<Streaming<Req>>` and `&mut Sink<Resp>` in. Every future is
//!   `Send`.
//! - `struct GreeterServer<T>` holding an `Arc<T>`, a `linerate_server::grpc::Service`:
//!   `Router::new().grpc(GreeterServer::new(MyGreeter))`.
//!
//! and `greeter_client::GreeterClient`, calling the service over a
//! `linerate_server::grpc::client::Channel` (`GreeterClient::connect("http://host:port")`, or
//! `GreeterClient::new(channel)`; feature `grpc-client` of linerate-server), one `async fn` per
//! RPC taking `&mut self`: unary `(impl IntoRequest<Req>) -> Result<Response<Resp>, Status>`;
//! server streaming answers `Response<client::Streaming<Resp>>` (`.message().await`); client
//! streaming and bidirectional take `impl IntoStreamingRequest<Message = Req>` (a `Stream` of
//! requests, alone or in a `Request`). Either half can be left out, as with tonic-build:
//! `build_client(false)` for a crate that only serves (it then needs no `grpc-client`),
//! `build_server(false)` for one that only calls.
//!
//! ```no_run
//! // build.rs's main
//! linerate_grpc::build::configure()
//!     .file_descriptor_set("hello_descriptor.bin")
//!     .compile(&["proto/hello.proto"], &["proto"])
//!     .unwrap_or_else(|e| panic!("{e}"));
//! ```

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use prost::Message as _;

/// Where the generated code finds the service layer by default (the path a user's crate
/// names `linerate-server` by).
pub const SERVER_PATH: &str = "::linerate_server::grpc";

/// A prost-build `ServiceGenerator` writing, per service, its trait, its server and its
/// client (see the module doc). Give it to `prost_build::Config::service_generator`, or use [`Builder`].
#[derive(Clone, Debug)]
pub struct Generator {
    server_path: String,
    /// Whether each service's trait and server are written.
    server: bool,
    /// Whether each service's client is written.
    client: bool,
}

impl Default for Generator {
    fn default() -> Generator {
        Generator {
            server_path: SERVER_PATH.to_string(),
            server: true,
            client: true,
        }
    }
}

impl Generator {
    /// A generator naming [`SERVER_PATH`].
    pub fn new() -> Generator {
        Generator::default()
    }

    /// Names the service layer by `path` instead (a crate that renames `linerate-server`,
    /// or re-exports its `grpc` module).
    pub fn server_path(mut self, path: impl Into<String>) -> Generator {
        self.server_path = path.into();
        self
    }

    /// Whether to write each service's trait and server (default: yes), as tonic-build's
    /// `build_server`.
    pub fn build_server(mut self, on: bool) -> Generator {
        self.server = on;
        self
    }

    /// Whether to write each service's client (default: yes), as tonic-build's
    /// `build_client`. A crate that serves and never calls leaves it out, and with it the
    /// need for linerate-server's `grpc-client` feature.
    pub fn build_client(mut self, on: bool) -> Generator {
        self.client = on;
        self
    }
}

/// One RPC's streaming shape.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Unary,
    ServerStreaming,
    ClientStreaming,
    Bidi,
}

impl Shape {
    fn of(m: &prost_build::Method) -> Shape {
        match (m.client_streaming, m.server_streaming) {
            (false, false) => Shape::Unary,
            (false, true) => Shape::ServerStreaming,
            (true, false) => Shape::ClientStreaming,
            (true, true) => Shape::Bidi,
        }
    }

    /// The `Method` constructor of `linerate_server::grpc` for this shape.
    fn constructor(self) -> &'static str {
        match self {
            Shape::Unary => "unary",
            Shape::ServerStreaming => "server_streaming",
            Shape::ClientStreaming => "client_streaming",
            Shape::Bidi => "bidi_streaming",
        }
    }
}

/// A message type as seen from the service's module, one level below the messages': a
/// relative path gains `super::`; absolute paths and `()` (`google.protobuf.Empty`) stay.
fn from_inner(ty: &str) -> String {
    if ty.starts_with("::") || ty.starts_with("crate::") || ty == "()" {
        ty.to_string()
    } else {
        format!("super::{ty}")
    }
}

/// `Greeter` → `greeter`, `BenchmarkService` → `benchmark_service`.
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

impl prost_build::ServiceGenerator for Generator {
    fn generate(&mut self, service: prost_build::Service, buf: &mut String) {
        let full = if service.package.is_empty() {
            service.proto_name.clone()
        } else {
            format!("{}.{}", service.package, service.proto_name)
        };
        if self.server {
            self.server(&service, &full, buf);
        }
        if self.client {
            self.client(&service, &full, buf);
        }
    }
}

impl Generator {
    /// The service's server module, `<service>_server`: the trait to implement and the
    /// server serving it.
    fn server(&self, service: &prost_build::Service, full: &str, buf: &mut String) {
        // `write!` to a String cannot fail; the results are ignored below for that reason.
        let g = &self.server_path;
        let module = format!("{}_server", snake(&service.name));
        let name = &service.name;
        let server = format!("{name}Server");
        let _ = writeln!(
            buf,
            "/// `{full}`: the trait to implement ([`{module}::{name}`]) and the server that \
             serves it ([`{module}::{server}`]).\npub mod {module} {{\n    \
             #![allow(unused_imports, clippy::all)]\n    use ::std::sync::Arc;\n\n    \
             /// The service's full name.\n    pub const SERVICE_NAME: &str = \"{full}\";\n"
        );
        // The trait: one method per RPC, UNIMPLEMENTED unless written.
        service.comments.append_with_indent(1, buf);
        if !service.comments.leading.is_empty() {
            buf.push_str("    ///\n");
        }
        let _ = writeln!(
            buf,
            "    /// Generated from `{full}`; each method left out answers \
             UNIMPLEMENTED.\n    pub trait {name}: Send + Sync + 'static {{"
        );
        for m in &service.methods {
            let shape = Shape::of(m);
            let req = from_inner(&m.input_type);
            let resp = from_inner(&m.output_type);
            let input = match shape {
                Shape::Unary | Shape::ServerStreaming => format!("{g}::Request<{req}>"),
                Shape::ClientStreaming | Shape::Bidi => {
                    format!("{g}::Request<{g}::Streaming<{req}>>")
                }
            };
            let (sink, output) = match shape {
                Shape::Unary | Shape::ClientStreaming => {
                    (String::new(), format!("{g}::Response<{resp}>"))
                }
                Shape::ServerStreaming | Shape::Bidi => {
                    (format!(", out: &mut {g}::Sink<{resp}>"), "()".to_string())
                }
            };
            let unused = if sink.is_empty() {
                "request"
            } else {
                "(request, out)"
            };
            m.comments.append_with_indent(2, buf);
            let _ = writeln!(
                buf,
                "        /// `/{full}/{proto}`.\n        fn {rust}(\n            &self,\n            \
                 request: {input}{sink},\n        ) -> impl ::core::future::Future<Output = \
                 ::core::result::Result<{output}, {g}::Status>> + Send {{\n            \
                 let _ = {unused};\n            ::core::future::ready(::core::result::Result::Err(\
                 {g}::Status::new(\n                {g}::Code::Unimplemented,\n                \
                 \"/{full}/{proto} is not implemented\",\n            )))\n        }}",
                proto = m.proto_name,
                rust = m.name,
            );
        }
        let _ = writeln!(buf, "    }}\n");
        // The server: the trait's methods as `Method`s.
        let _ = writeln!(
            buf,
            "    /// Serves a [`{name}`]: `Router::new().grpc({server}::new(service))`.\n    \
             #[derive(Debug)]\n    pub struct {server}<T> {{\n        inner: Arc<T>,\n    }}\n\n    \
             impl<T: {name}> {server}<T> {{\n        /// Serves `inner`.\n        \
             pub fn new(inner: T) -> Self {{\n            Self::from_arc(Arc::new(inner))\n        \
             }}\n\n        /// Serves a service shared with the rest of the application.\n        \
             pub fn from_arc(inner: Arc<T>) -> Self {{\n            Self {{ inner }}\n        }}\n    \
             }}\n\n    impl<T> Clone for {server}<T> {{\n        fn clone(&self) -> Self {{\n            \
             Self {{ inner: self.inner.clone() }}\n        }}\n    }}\n\n    \
             impl<T: {name}> {g}::Service for {server}<T> {{\n        \
             fn name(&self) -> &'static str {{\n            SERVICE_NAME\n        }}\n\n        \
             fn methods(self) -> ::std::vec::Vec<{g}::Method> {{\n            \
             ::std::vec![",
        );
        for m in &service.methods {
            let shape = Shape::of(m);
            let path = format!("/{full}/{}", m.proto_name);
            let rust = &m.name;
            // The call's future owns a clone of the Arc (the trait's future borrows it):
            // two atomic operations, no allocation beyond the one `Method` makes.
            let body = match shape {
                Shape::Unary | Shape::ClientStreaming => format!(
                    "move |request| {{\n                        let inner = inner.clone();\n                        \
                     async move {{ inner.{rust}(request).await }}\n                    }}"
                ),
                Shape::ServerStreaming | Shape::Bidi => format!(
                    "move |request, mut out| {{\n                        let inner = inner.clone();\n                        \
                     async move {{\n                            \
                     let outcome = inner.{rust}(request, &mut out).await;\n                            \
                     (outcome, out)\n                        }}\n                    }}"
                ),
            };
            let _ = writeln!(
                buf,
                "                {{\n                    let inner = self.inner.clone();\n                    \
                 {g}::Method::{ctor}(\"{path}\", {body})\n                }},",
                ctor = shape.constructor(),
            );
        }
        let _ = writeln!(buf, "            ]\n        }}\n    }}\n}}");
    }

    /// The service's client module, `<service>_client`: `<Service>Client` over a
    /// `client::Channel`, one method per RPC calling the runtime's `client::Grpc`.
    fn client(&self, service: &prost_build::Service, full: &str, buf: &mut String) {
        let g = &self.server_path;
        let c = format!("{g}::client");
        let name = &service.name;
        let module = format!("{}_client", snake(name));
        let client = format!("{name}Client");
        let _ = writeln!(
            buf,
            "/// `{full}`: the client ([`{module}::{client}`]).\npub mod {module} {{\n    \
             #![allow(unused_imports, dead_code, clippy::all)]\n\n    \
             /// Calls `{full}` over a channel: `{client}::connect(\"http://127.0.0.1:50051\")`, \
             or `{client}::new(channel)` (a `TestClient`'s `grpc_channel()` among them).\n    \
             #[derive(Clone, Debug)]\n    pub struct {client} {{\n        inner: {c}::Grpc,\n    }}\n\n    \
             impl {client} {{\n        \
             /// Connects to `dst` (`http://host:port`, h2c) on the current tokio runtime.\n        \
             pub async fn connect(dst: &str) -> ::core::result::Result<Self, {c}::Error> {{\n            \
             ::core::result::Result::Ok(Self::new({c}::Channel::connect(dst).await?))\n        }}\n\n        \
             /// Calls over `channel`.\n        pub fn new(channel: {c}::Channel) -> Self {{\n            \
             Self {{ inner: {c}::Grpc::new(channel) }}\n        }}\n\n        \
             /// Calls over `channel`, `interceptor` run with each call's metadata first.\n        \
             pub fn with_interceptor(\n            channel: {c}::Channel,\n            \
             interceptor: impl Fn(&mut {g}::Metadata) -> ::core::result::Result<(), {g}::Status> \
             + Send + Sync + 'static,\n        ) -> Self {{\n            \
             Self {{ inner: {c}::Grpc::new(channel).with_interceptor(interceptor) }}\n        }}\n\n        \
             /// Compresses requests with `encoding`.\n        \
             pub fn send_compressed(mut self, encoding: {c}::CompressionEncoding) -> Self {{\n            \
             self.inner = self.inner.send_compressed(encoding);\n            self\n        }}\n\n        \
             /// Accepts answers compressed with `encoding` (gzip always is).\n        \
             pub fn accept_compressed(mut self, encoding: {c}::CompressionEncoding) -> Self {{\n            \
             self.inner = self.inner.accept_compressed(encoding);\n            self\n        }}\n\n        \
             /// The largest answer message taken.\n        \
             pub fn max_decoding_message_size(mut self, limit: usize) -> Self {{\n            \
             self.inner = self.inner.max_decoding_message_size(limit);\n            self\n        }}\n\n        \
             /// The largest request message sent.\n        \
             pub fn max_encoding_message_size(mut self, limit: usize) -> Self {{\n            \
             self.inner = self.inner.max_encoding_message_size(limit);\n            self\n        }}"
        );
        for m in &service.methods {
            let shape = Shape::of(m);
            let req = from_inner(&m.input_type);
            let resp = from_inner(&m.output_type);
            let path = format!("/{full}/{}", m.proto_name);
            let input = match shape {
                Shape::Unary | Shape::ServerStreaming => {
                    format!("impl {c}::IntoRequest<{req}>")
                }
                Shape::ClientStreaming | Shape::Bidi => {
                    format!("impl {c}::IntoStreamingRequest<Message = {req}>")
                }
            };
            let output = match shape {
                Shape::Unary | Shape::ClientStreaming => format!("{g}::Response<{resp}>"),
                Shape::ServerStreaming | Shape::Bidi => {
                    format!("{g}::Response<{c}::Streaming<{resp}>>")
                }
            };
            let call = match shape {
                Shape::Unary => "unary(PATH, request.into_request())",
                Shape::ServerStreaming => "server_streaming(PATH, request.into_request())",
                Shape::ClientStreaming => {
                    "client_streaming(PATH, request.into_streaming_request())"
                }
                Shape::Bidi => "streaming(PATH, request.into_streaming_request())",
            }
            .replace("PATH", &format!("\"{path}\""));
            buf.push('\n');
            m.comments.append_with_indent(2, buf);
            let _ = writeln!(
                buf,
                "        /// `{path}`.\n        pub async fn {rust}(\n            &mut self,\n            \
                 request: {input},\n        ) -> ::core::result::Result<{output}, {g}::Status> {{\n            \
                 self.inner.{call}.await\n        }}",
                rust = m.name,
            );
        }
        let _ = writeln!(buf, "    }}\n}}");
    }
}

/// Compiles `.proto` files with protox and prost-build into `$OUT_DIR` (one `<package>.rs`
/// per package, services by [`Generator`]). Made by [`configure`].
#[derive(Debug, Default)]
pub struct Builder {
    generator: Generator,
    extern_paths: Vec<(String, String)>,
    descriptor_set: Option<PathBuf>,
    out_dir: Option<PathBuf>,
}

/// A [`Builder`] with the defaults: services for [`SERVER_PATH`], no descriptor set kept,
/// output in `$OUT_DIR`.
pub fn configure() -> Builder {
    Builder::default()
}

/// Compiles `protos` (found under `includes`) with the defaults; see [`Builder::compile`].
pub fn compile_protos(
    protos: &[impl AsRef<Path>],
    includes: &[impl AsRef<Path>],
) -> Result<(), Error> {
    configure().compile(protos, includes)
}

impl Builder {
    /// Names the service layer by `path` ([`Generator::server_path`]).
    pub fn server_path(mut self, path: impl Into<String>) -> Builder {
        self.generator = self.generator.server_path(path);
        self
    }

    /// Whether to write each service's trait and server ([`Generator::build_server`]).
    pub fn build_server(mut self, on: bool) -> Builder {
        self.generator = self.generator.build_server(on);
        self
    }

    /// Whether to write each service's client ([`Generator::build_client`]).
    pub fn build_client(mut self, on: bool) -> Builder {
        self.generator = self.generator.build_client(on);
        self
    }

    /// Uses the Rust types at `rust_path` for the protobuf package or message `proto_path`
    /// (`.grpc.testing` → `::linerate_grpc::proto::grpc::testing`) instead of generating
    /// them: only the services are written for a package whose messages another crate has.
    pub fn extern_path(
        mut self,
        proto_path: impl Into<String>,
        rust_path: impl Into<String>,
    ) -> Builder {
        self.extern_paths
            .push((proto_path.into(), rust_path.into()));
        self
    }

    /// Also writes the encoded `FileDescriptorSet` of the files and their imports (without
    /// source info) to `path`, relative to the output directory: what the reflection service
    /// answers from (`include_bytes!(concat!(env!("OUT_DIR"), "/<path>"))`).
    pub fn file_descriptor_set(mut self, path: impl Into<PathBuf>) -> Builder {
        self.descriptor_set = Some(path.into());
        self
    }

    /// Writes to `dir` instead of `$OUT_DIR`.
    pub fn out_dir(mut self, dir: impl Into<PathBuf>) -> Builder {
        self.out_dir = Some(dir.into());
        self
    }

    /// Compiles `protos` (paths under one of `includes`, or named relative to one) and their
    /// imports, and tells cargo to rerun the build script when any of them changes.
    pub fn compile(
        self,
        protos: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<(), Error> {
        let out = match self.out_dir {
            Some(dir) => dir,
            None => std::env::var_os("OUT_DIR")
                .map(PathBuf::from)
                .ok_or(Error::NoOutDir)?,
        };
        for include in includes {
            println!("cargo:rerun-if-changed={}", include.as_ref().display());
        }
        let fds = protox::compile(protos, includes).map_err(|e| Error::Proto(Box::new(e)))?;
        if let Some(name) = &self.descriptor_set {
            let mut bare = fds.clone();
            for file in &mut bare.file {
                file.source_code_info = None;
            }
            let path = out.join(name);
            std::fs::write(&path, bare.encode_to_vec()).map_err(|e| Error::Io(path, e))?;
        }
        let mut config = prost_build::Config::new();
        config.out_dir(&out);
        config.service_generator(Box::new(self.generator));
        for (proto, rust) in &self.extern_paths {
            config.extern_path(proto, rust);
        }
        config
            .compile_fds(fds)
            .map_err(|e| Error::Io(out.clone(), e))
    }
}

/// Why [`Builder::compile`] failed.
#[derive(Debug)]
pub enum Error {
    /// A `.proto` file did not parse or resolve (the message names FILE:LINE:COLUMN).
    Proto(Box<protox::Error>),
    /// Writing the output failed (the path written to).
    Io(PathBuf, std::io::Error),
    /// Not in a build script, and no [`Builder::out_dir`] given.
    NoOutDir,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // protox's Debug is `FILE:LINE:COLUMN: message`; its Display only the message.
            Error::Proto(e) => write!(f, "{e:?}"),
            Error::Io(path, e) => write!(f, "{}: {e}", path.display()),
            Error::NoOutDir => {
                f.write_str("OUT_DIR is not set: call from a build script or set out_dir")
            }
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_paths_from_the_service_module() {
        // The service's module sits one below its package's: relative paths climb once;
        // extern (absolute) paths and google.protobuf.Empty's `()` stay as they are.
        let table = [
            ("HelloRequest", "super::HelloRequest"),
            ("super::other::Msg", "super::super::other::Msg"),
            (
                "::linerate_grpc::proto::benchmark::SumRequest",
                "::linerate_grpc::proto::benchmark::SumRequest",
            ),
            ("crate::pb::Msg", "crate::pb::Msg"),
            ("()", "()"),
        ];
        for (given, want) in table {
            assert_eq!(from_inner(given), want, "{given}");
        }
        assert_eq!(snake("BenchmarkService"), "benchmark_service");
        assert_eq!(snake("Greeter"), "greeter");
    }

    /// A scratch directory of this test's own under the system's temporary one.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("linerate-grpc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_broken_proto_is_one_error_naming_its_place() {
        let dir = scratch("broken");
        std::fs::write(
            dir.join("bad.proto"),
            "syntax = \"proto3\";\nmessage M {\n  int32 x = ;\n}\n",
        )
        .unwrap();
        let err = configure()
            .out_dir(&dir)
            .compile(&["bad.proto"], &[&dir])
            .unwrap_err();
        assert!(matches!(err, Error::Proto(_)), "{err:?}");
        let line = err.to_string();
        assert!(line.contains("bad.proto:3:"), "{line}");
        assert!(!line.contains('\n'), "one line: {line}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn every_shape_is_generated_with_its_signature() {
        let dir = scratch("shapes");
        std::fs::write(
            dir.join("s.proto"),
            "syntax = \"proto3\";\npackage p;\nmessage A {}\n// Says.\nservice Svc {\n  \
             rpc U(A) returns (A);\n  rpc S(A) returns (stream A);\n  \
             rpc C(stream A) returns (A);\n  rpc B(stream A) returns (stream A);\n}\n",
        )
        .unwrap();
        configure()
            .out_dir(&dir)
            .server_path("crate::g")
            .file_descriptor_set("s.bin")
            .compile(&["s.proto"], &[&dir])
            .unwrap();
        let code: String = std::fs::read_to_string(dir.join("p.rs"))
            .unwrap()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            // Whether the formatter leaves a trailing comma is no matter here.
            .replace(",>", ">")
            .replace(",)", ")");
        for want in [
            "pubmodsvc_server{",
            "pubconstSERVICE_NAME:&str=\"p.Svc\";",
            "///Says.",
            "pubtraitSvc:Send+Sync+'static{",
            "fnu(&self,request:crate::g::Request<super::A>)->impl::core::future::Future<Output=::core::result::Result<crate::g::Response<super::A>,crate::g::Status>>+Send",
            "fns(&self,request:crate::g::Request<super::A>,out:&mutcrate::g::Sink<super::A>)->impl::core::future::Future<Output=::core::result::Result<(),crate::g::Status>>+Send",
            "fnc(&self,request:crate::g::Request<crate::g::Streaming<super::A>>)->impl::core::future::Future<Output=::core::result::Result<crate::g::Response<super::A>,crate::g::Status>>+Send",
            "fnb(&self,request:crate::g::Request<crate::g::Streaming<super::A>>,out:&mutcrate::g::Sink<super::A>)->impl::core::future::Future<Output=::core::result::Result<(),crate::g::Status>>+Send",
            "crate::g::Code::Unimplemented,\"/p.Svc/Uisnotimplemented\")",
            "pubstructSvcServer<T>{inner:Arc<T>,}",
            "impl<T:Svc>crate::g::ServiceforSvcServer<T>",
            "crate::g::Method::unary(\"/p.Svc/U\"",
            "crate::g::Method::server_streaming(\"/p.Svc/S\"",
            "crate::g::Method::client_streaming(\"/p.Svc/C\"",
            "crate::g::Method::bidi_streaming(\"/p.Svc/B\"",
            "pubmodsvc_client{",
            "pubstructSvcClient{inner:crate::g::client::Grpc,}",
            "pubasyncfnconnect(dst:&str)->::core::result::Result<Self,crate::g::client::Error>",
            "pubfnwith_interceptor(channel:crate::g::client::Channel,interceptor:implFn(&mutcrate::g::Metadata)->::core::result::Result<(),crate::g::Status>+Send+Sync+'static)->Self",
            "pubasyncfnu(&mutself,request:implcrate::g::client::IntoRequest<super::A>)->::core::result::Result<crate::g::Response<super::A>,crate::g::Status>{self.inner.unary(\"/p.Svc/U\",request.into_request()).await}",
            "pubasyncfns(&mutself,request:implcrate::g::client::IntoRequest<super::A>)->::core::result::Result<crate::g::Response<crate::g::client::Streaming<super::A>>,crate::g::Status>{self.inner.server_streaming(\"/p.Svc/S\",request.into_request()).await}",
            "pubasyncfnc(&mutself,request:implcrate::g::client::IntoStreamingRequest<Message=super::A>)->::core::result::Result<crate::g::Response<super::A>,crate::g::Status>{self.inner.client_streaming(\"/p.Svc/C\",request.into_streaming_request()).await}",
            "pubasyncfnb(&mutself,request:implcrate::g::client::IntoStreamingRequest<Message=super::A>)->::core::result::Result<crate::g::Response<crate::g::client::Streaming<super::A>>,crate::g::Status>{self.inner.streaming(\"/p.Svc/B\",request.into_streaming_request()).await}",
        ] {
            assert!(code.contains(want), "missing {want}\nin {code}");
        }
        let set =
            prost_types::FileDescriptorSet::decode(&std::fs::read(dir.join("s.bin")).unwrap()[..])
                .unwrap();
        assert_eq!(set.file.len(), 1);
        assert_eq!(set.file[0].service[0].method.len(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
