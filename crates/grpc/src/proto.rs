//! The protobuf messages of proto/ (generated at build time by prost-build and protox), each
//! service's method table, and the encoded `FileDescriptorSet` the reflection service
//! answers from. Only messages and constants: no server or client code, no I/O.

/// One method of a service, as the server's router needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Method {
    /// The request's `:path`: `/package.Service/Method`.
    pub path: &'static str,
    /// The method's name as the .proto spells it.
    pub name: &'static str,
    /// The client sends a stream of messages (else exactly one).
    pub client_streaming: bool,
    /// The server answers with a stream of messages (else exactly one).
    pub server_streaming: bool,
}

/// A service: its full name (`package.Service`, as reflection lists it) and its methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Service {
    /// `package.Service`.
    pub name: &'static str,
    /// In the .proto's order.
    pub methods: &'static [Method],
}

impl Service {
    /// The method whose `:path` is `path`.
    pub fn method(&self, path: &str) -> Option<&'static Method> {
        self.methods.iter().find(|m| m.path == path)
    }
}

/// The encoded `google.protobuf.FileDescriptorSet` of every file in proto/ (without source
/// info), dependencies before the files that import them; names are relative to proto/
/// (`grpc/testing/test.proto`).
pub static FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

/// HttpArena's benchmark service (`benchmark.BenchmarkService/GetSum`).
pub mod benchmark {
    include!(concat!(env!("OUT_DIR"), "/benchmark.rs"));
}

/// gRPC's own packages.
pub mod grpc {
    /// The interop test service and its messages (`grpc.testing`).
    pub mod testing {
        include!(concat!(env!("OUT_DIR"), "/grpc.testing.rs"));
    }
    /// Health checking (`grpc.health.v1`).
    pub mod health {
        /// `grpc.health.v1`.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/grpc.health.v1.rs"));
        }
    }
    /// Server reflection, both versions clients ask for.
    pub mod reflection {
        /// `grpc.reflection.v1`.
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/grpc.reflection.v1.rs"));
        }
        /// `grpc.reflection.v1alpha` (older clients; grpcurl falls back to it).
        pub mod v1alpha {
            include!(concat!(env!("OUT_DIR"), "/grpc.reflection.v1alpha.rs"));
        }
    }
}

/// Every service in proto/, in [`FILE_DESCRIPTOR_SET`]'s order.
pub const SERVICES: &[Service] = &[
    benchmark::benchmark_service_methods::SERVICE,
    grpc::testing::test_service_methods::SERVICE,
    grpc::testing::unimplemented_service_methods::SERVICE,
    grpc::health::v1::health_methods::SERVICE,
    grpc::reflection::v1::server_reflection_methods::SERVICE,
    grpc::reflection::v1alpha::server_reflection_methods::SERVICE,
];

#[cfg(test)]
mod tests {
    use prost::Message as _;
    use prost_types::FileDescriptorSet;

    use super::*;

    #[test]
    fn every_service_in_the_descriptor_set_has_its_table() {
        let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
        let mut from_set = Vec::new();
        for file in &set.file {
            assert!(
                file.source_code_info.is_none(),
                "{:?} keeps source info",
                file.name
            );
            for s in &file.service {
                let full = format!("{}.{}", file.package(), s.name());
                let methods: Vec<_> = s
                    .method
                    .iter()
                    .map(|m| {
                        (
                            format!("/{full}/{}", m.name()),
                            m.client_streaming(),
                            m.server_streaming(),
                        )
                    })
                    .collect();
                from_set.push((full, methods));
            }
        }
        let from_tables: Vec<_> = SERVICES
            .iter()
            .map(|s| {
                let methods: Vec<_> = s
                    .methods
                    .iter()
                    .map(|m| (m.path.to_string(), m.client_streaming, m.server_streaming))
                    .collect();
                (s.name.to_string(), methods)
            })
            .collect();
        assert_eq!(from_tables, from_set);
        let names: Vec<_> = set.file.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            [
                "benchmark.proto",
                "grpc/testing/empty.proto",
                "grpc/testing/messages.proto",
                "grpc/testing/test.proto",
                "grpc/health/v1/health.proto",
                "grpc/reflection/v1/reflection.proto",
                "grpc/reflection/v1alpha/reflection.proto",
            ]
        );
    }

    #[test]
    fn method_tables() {
        use grpc::testing::test_service_methods as t;
        // test.proto: the streaming kind of each TestService method.
        let table = [
            (
                t::EMPTY_CALL,
                "/grpc.testing.TestService/EmptyCall",
                false,
                false,
            ),
            (
                t::UNARY_CALL,
                "/grpc.testing.TestService/UnaryCall",
                false,
                false,
            ),
            (
                t::STREAMING_OUTPUT_CALL,
                "/grpc.testing.TestService/StreamingOutputCall",
                false,
                true,
            ),
            (
                t::STREAMING_INPUT_CALL,
                "/grpc.testing.TestService/StreamingInputCall",
                true,
                false,
            ),
            (
                t::FULL_DUPLEX_CALL,
                "/grpc.testing.TestService/FullDuplexCall",
                true,
                true,
            ),
            (
                t::HALF_DUPLEX_CALL,
                "/grpc.testing.TestService/HalfDuplexCall",
                true,
                true,
            ),
        ];
        for (m, path, client, server) in table {
            assert_eq!(
                (m.path, m.client_streaming, m.server_streaming),
                (path, client, server)
            );
            assert_eq!(t::SERVICE.method(path), Some(&m));
        }
        let get_sum = benchmark::benchmark_service_methods::GET_SUM;
        assert_eq!(get_sum.path, "/benchmark.BenchmarkService/GetSum");
        assert_eq!(
            grpc::health::v1::health_methods::WATCH.path,
            "/grpc.health.v1.Health/Watch"
        );
        let watch = grpc::health::v1::health_methods::WATCH;
        assert_eq!(
            (watch.client_streaming, watch.server_streaming),
            (false, true)
        );
        let info = grpc::reflection::v1alpha::server_reflection_methods::SERVER_REFLECTION_INFO;
        assert_eq!(
            info.path,
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
        );
        assert_eq!((info.client_streaming, info.server_streaming), (true, true));
    }

    #[test]
    fn interop_messages_have_the_spec_field_numbers() {
        use grpc::testing::*;
        // messages.proto: SimpleRequest.response_size = 2, payload = 3 (Payload.body = 2),
        // response_status = 7 (EchoStatus.code = 1, message = 2).
        let req = SimpleRequest {
            response_size: 1,
            payload: Some(Payload {
                r#type: 0,
                body: vec![0xAB],
            }),
            response_status: Some(EchoStatus {
                code: 2,
                message: "m".into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            req.encode_to_vec(),
            [
                0x10, 0x01, 0x1a, 0x03, 0x12, 0x01, 0xAB, 0x3a, 0x05, 0x08, 0x02, 0x12, 0x01, b'm'
            ]
        );
        let health = grpc::health::v1::HealthCheckResponse {
            status: grpc::health::v1::health_check_response::ServingStatus::Serving as i32,
        };
        assert_eq!(health.encode_to_vec(), [0x08, 0x01]);
        let list = grpc::reflection::v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                grpc::reflection::v1::server_reflection_request::MessageRequest::ListServices(
                    "*".into(),
                ),
            ),
        };
        assert_eq!(list.encode_to_vec(), [0x3a, 0x01, b'*']);
    }
}
