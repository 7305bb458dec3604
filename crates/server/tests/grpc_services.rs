//! The standard gRPC services on a real server (`TestServer`, one worker, an h2c listener),
//! called by an independent HTTP/2 client (hyperium's h2) with raw gRPC frames: health
//! (grpc/doc/health-checking.md: Check, Watch and its changes, NOT_FOUND and SERVICE_UNKNOWN)
//! and server reflection v1 and v1alpha (list_services from the router, files by name and by
//! symbol with their imports, a registered descriptor set, NOT_FOUND answers).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use linerate_grpc::proto::grpc::health::v1::health_check_response::ServingStatus;
use linerate_grpc::proto::grpc::health::v1::{HealthCheckRequest, HealthCheckResponse};
use linerate_grpc::proto::grpc::reflection::v1::server_reflection_request::MessageRequest;
use linerate_grpc::proto::grpc::reflection::v1::server_reflection_response::MessageResponse;
use linerate_grpc::proto::grpc::reflection::v1::{
    ServerReflectionRequest, ServerReflectionResponse,
};
use linerate_server::Router;
use linerate_server::grpc::{Health, Method, Reflection, Request, Response, Service};
use linerate_server::testing::TestServer;
use prost::Message;
use prost_types::{DescriptorProto, FileDescriptorProto, FileDescriptorSet};

/// Longest any exchange may wait (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(20);

const CHECK: &str = "/grpc.health.v1.Health/Check";
const WATCH: &str = "/grpc.health.v1.Health/Watch";
const REFLECT_V1: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
const REFLECT_V1ALPHA: &str = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

/// A service added after reflection: listed all the same.
struct Echo;

impl Service for Echo {
    fn name(&self) -> &'static str {
        "test.Echo"
    }

    fn methods(self) -> Vec<Method> {
        vec![Method::unary(
            "/test.Echo/Say",
            |req: Request<HealthCheckRequest>| {
                std::future::ready(Ok(Response::new(req.into_inner())))
            },
        )]
    }
}

/// An application's own descriptor set: `my.proto`, package `my`, message `Outer.Inner`,
/// service `Svc`, importing `grpc/health/v1/health.proto`.
fn my_descriptor_set() -> Vec<u8> {
    let file = FileDescriptorProto {
        name: Some("my.proto".into()),
        package: Some("my".into()),
        dependency: vec!["grpc/health/v1/health.proto".into()],
        message_type: vec![DescriptorProto {
            name: Some("Outer".into()),
            nested_type: vec![DescriptorProto {
                name: Some("Inner".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        service: vec![prost_types::ServiceDescriptorProto {
            name: Some("Svc".into()),
            method: vec![prost_types::MethodDescriptorProto {
                name: Some("Get".into()),
                input_type: Some(".my.Outer".into()),
                output_type: Some(".grpc.health.v1.HealthCheckResponse".into()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        syntax: Some("proto3".into()),
        ..Default::default()
    };
    FileDescriptorSet { file: vec![file] }.encode_to_vec()
}

fn server(health: &Health) -> TestServer {
    let reflection = Reflection::new().register(&my_descriptor_set()).unwrap();
    let router = Router::new()
        .grpc(health.clone())
        .grpc(reflection)
        .grpc(Echo);
    let config = linerate_server::Config {
        h2c: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..TestServer::config()
    };
    TestServer::start_with(config, router).unwrap()
}

fn h2c(server: &TestServer) -> SocketAddr {
    server.h2c_addr().expect("an h2c listener")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// One gRPC frame around `message`.
fn frame(message: &impl Message) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(0);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out.into()
}

/// A call in flight: its answer's head and the messages read so far.
struct Call {
    head: http::response::Parts,
    body: h2::RecvStream,
    buf: BytesMut,
}

impl Call {
    /// Starts a call to `path` sending `messages` and ending the request stream.
    async fn start(
        client: &mut h2::client::SendRequest<Bytes>,
        path: &str,
        messages: &[Bytes],
    ) -> Call {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://localhost{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (resp, mut send) = client.send_request(req, false).unwrap();
        for (i, m) in messages.iter().enumerate() {
            send.send_data(m.clone(), i + 1 == messages.len()).unwrap();
        }
        if messages.is_empty() {
            send.send_data(Bytes::new(), true).unwrap();
        }
        let resp = tokio::time::timeout(LIMIT, resp).await.unwrap().unwrap();
        let (head, body) = resp.into_parts();
        assert_eq!(head.status, 200);
        Call {
            head,
            body,
            buf: BytesMut::new(),
        }
    }

    /// The next message; `None` at the end of the answer's body.
    async fn next<T: Message + Default>(&mut self) -> Option<T> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes(self.buf[1..5].try_into().unwrap()) as usize;
                if self.buf.len() >= 5 + len {
                    assert_eq!(self.buf[0], 0, "an uncompressed message");
                    self.buf.advance(5);
                    let m = self.buf.split_to(len);
                    return Some(T::decode(&m[..]).unwrap());
                }
            }
            let piece = tokio::time::timeout(LIMIT, self.body.data())
                .await
                .unwrap()?;
            let piece = piece.unwrap();
            let _ = self.body.flow_control().release_capacity(piece.len());
            self.buf.extend_from_slice(&piece);
        }
    }

    /// The call's `grpc-status`: from the trailers, or the head of a trailers-only answer.
    async fn status(mut self) -> String {
        if let Some(s) = self.head.headers.get("grpc-status") {
            return s.to_str().unwrap().to_string();
        }
        while self.next::<HealthCheckResponse>().await.is_some() {}
        let trailers = tokio::time::timeout(LIMIT, self.body.trailers())
            .await
            .unwrap();
        let trailers = trailers.unwrap().expect("trailers");
        trailers["grpc-status"].to_str().unwrap().to_string()
    }
}

fn check(service: &str) -> Bytes {
    frame(&HealthCheckRequest {
        service: service.into(),
    })
}

#[test]
fn health_check_answers_each_services_status_and_not_found_for_an_unknown_one() {
    let health = Health::new();
    health.set("test.Echo", ServingStatus::NotServing);
    let server = server(&health);
    runtime().block_on(async {
        let mut client = connect(h2c(&server)).await;
        // health-checking.md: "" is the server as a whole.
        let mut call = Call::start(&mut client, CHECK, &[check("")]).await;
        let got: HealthCheckResponse = call.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        assert_eq!(call.status().await, "0");

        let mut call = Call::start(&mut client, CHECK, &[check("test.Echo")]).await;
        let got: HealthCheckResponse = call.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::NotServing);
        assert_eq!(call.status().await, "0");

        // A change at run time is seen by the next Check.
        health.set("test.Echo", ServingStatus::Serving);
        let mut call = Call::start(&mut client, CHECK, &[check("test.Echo")]).await;
        let got: HealthCheckResponse = call.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        assert_eq!(call.status().await, "0");

        // "the server should respond with a NOT_FOUND status" for an unknown service.
        let call = Call::start(&mut client, CHECK, &[check("nope.Nope")]).await;
        assert_eq!(call.status().await, "5");
        health.remove("test.Echo");
        let call = Call::start(&mut client, CHECK, &[check("test.Echo")]).await;
        assert_eq!(call.status().await, "5");
    });
}

#[test]
fn health_watch_streams_service_unknown_then_every_change() {
    let health = Health::new();
    let server = server(&health);
    runtime().block_on(async {
        let mut client = connect(h2c(&server)).await;
        let mut later = Call::start(&mut client, WATCH, &[check("later.Svc")]).await;
        // An unknown service: SERVICE_UNKNOWN, and the call stays open.
        let got: HealthCheckResponse = later.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::ServiceUnknown);
        health.set("later.Svc", ServingStatus::Serving);
        let got: HealthCheckResponse = later.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        health.set("later.Svc", ServingStatus::NotServing);
        let got: HealthCheckResponse = later.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::NotServing);
        // The same status again sends nothing; the next change does (it would be the
        // repeat's message otherwise).
        health.set("later.Svc", ServingStatus::NotServing);
        health.remove("later.Svc");
        let got: HealthCheckResponse = later.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::ServiceUnknown);

        // A watch of a known service starts with its status; the connection still serves.
        let mut watch_all = Call::start(&mut client, WATCH, &[check("")]).await;
        let got: HealthCheckResponse = watch_all.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        let mut watch = Call::start(&mut client, WATCH, &[check("")]).await;
        let got: HealthCheckResponse = watch.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        let call = Call::start(&mut client, CHECK, &[check("")]).await;
        assert_eq!(call.status().await, "0");

        // A client that leaves (closes its connection, or resets its stream) ends its Watch
        // at once, without a status change; the others go on.
        assert_eq!(health.watchers(), 3);
        {
            let mut other = connect(h2c(&server)).await;
            let mut gone = Call::start(&mut other, WATCH, &[check("")]).await;
            let got: HealthCheckResponse = gone.next().await.unwrap();
            assert_eq!(got.status(), ServingStatus::Serving);
            assert_eq!(health.watchers(), 4);
        }
        assert!(
            until(|| health.watchers() == 3).await,
            "the departed client's Watch still runs"
        );
        drop(watch);
        health.set("", ServingStatus::NotServing);
        let got: HealthCheckResponse = watch_all.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::NotServing);
        // The reset Watch ended (at the reset, or at its send of that change): CANCELLED.
        assert!(
            until(|| health.watchers() == 2).await,
            "the reset Watch still runs"
        );
    });
}

/// Waits (bounded by [`LIMIT`]) until `done`; whether it came.
async fn until(done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > LIMIT {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

fn reflect(request: MessageRequest) -> Bytes {
    frame(&ServerReflectionRequest {
        host: "h".into(),
        message_request: Some(request),
    })
}

/// The names of the files of a file_descriptor_response, in order.
fn file_names(resp: &ServerReflectionResponse) -> Vec<String> {
    match &resp.message_response {
        Some(MessageResponse::FileDescriptorResponse(files)) => files
            .file_descriptor_proto
            .iter()
            .map(|f| {
                FileDescriptorProto::decode(&f[..])
                    .unwrap()
                    .name()
                    .to_string()
            })
            .collect(),
        other => panic!("not a file answer: {other:?}"),
    }
}

fn error_code(resp: &ServerReflectionResponse) -> i32 {
    match &resp.message_response {
        Some(MessageResponse::ErrorResponse(e)) => e.error_code,
        other => panic!("not an error: {other:?}"),
    }
}

#[test]
fn reflection_lists_the_routers_services_and_describes_registered_files() {
    let health = Health::new();
    let server = server(&health);
    runtime().block_on(async {
        let mut client = connect(h2c(&server)).await;
        for path in [REFLECT_V1, REFLECT_V1ALPHA] {
            let requests = [
                reflect(MessageRequest::ListServices(String::new())),
                reflect(MessageRequest::FileContainingSymbol(
                    "grpc.health.v1.Health".into(),
                )),
                reflect(MessageRequest::FileContainingSymbol(
                    "my.Outer.Inner".into(),
                )),
                reflect(MessageRequest::FileContainingSymbol("my.Svc.Get".into())),
                reflect(MessageRequest::FileByFilename(
                    "grpc/testing/test.proto".into(),
                )),
                reflect(MessageRequest::FileContainingSymbol("my.Nope".into())),
                reflect(MessageRequest::FileByFilename("nope.proto".into())),
            ];
            let mut call = Call::start(&mut client, path, &requests).await;
            let mut answers = Vec::new();
            while let Some(m) = call.next::<ServerReflectionResponse>().await {
                answers.push(m);
            }
            assert_eq!(
                answers.len(),
                requests.len(),
                "{path}: one answer per request"
            );
            for a in &answers {
                assert_eq!(a.valid_host, "h");
                assert!(a.original_request.is_some());
            }
            match &answers[0].message_response {
                Some(MessageResponse::ListServicesResponse(list)) => {
                    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
                    assert_eq!(
                        names,
                        [
                            "grpc.health.v1.Health",
                            "grpc.reflection.v1.ServerReflection",
                            "grpc.reflection.v1alpha.ServerReflection",
                            "test.Echo",
                        ]
                    );
                }
                other => panic!("not a list: {other:?}"),
            }
            assert_eq!(file_names(&answers[1]), ["grpc/health/v1/health.proto"]);
            // The file first, then its imports.
            assert_eq!(
                file_names(&answers[2]),
                ["my.proto", "grpc/health/v1/health.proto"]
            );
            assert_eq!(file_names(&answers[3])[0], "my.proto");
            let mut test = file_names(&answers[4]);
            assert_eq!(test.remove(0), "grpc/testing/test.proto");
            test.sort();
            assert_eq!(
                test,
                ["grpc/testing/empty.proto", "grpc/testing/messages.proto"]
            );
            assert_eq!(error_code(&answers[5]), 5, "NOT_FOUND");
            assert_eq!(error_code(&answers[6]), 5, "NOT_FOUND");
            assert_eq!(call.status().await, "0");
        }
    });
}

/// `Config::default()` had `h2c_preface: false`, unlike `linerate serve`, so a
/// library server with gRPC services on its one default port answered a gRPC client's
/// preface 505 and no call got through, without a word. The default port now takes HTTP/2
/// with prior knowledge beside HTTP/1.1.
#[test]
fn a_grpc_service_on_the_default_config_answers_over_h2c_prior_knowledge() {
    let server = TestServer::start(Router::new().grpc(Health::new())).unwrap();
    assert!(server.h2c_addr().is_none(), "the default port alone");
    runtime().block_on(async {
        let mut client = connect(server.addr()).await;
        let mut call = Call::start(&mut client, CHECK, &[check("")]).await;
        let got: HealthCheckResponse = call.next().await.unwrap();
        assert_eq!(got.status(), ServingStatus::Serving);
        assert_eq!(call.status().await, "0");
    });
}

/// With every HTTP/2 way in turned off, a router with gRPC services is refused at
/// bind (a typed error that says what to set), not served unreachable; one HTTP/2 listener of
/// any kind is enough.
#[test]
fn a_grpc_router_with_no_listener_that_speaks_http2_is_refused_at_bind() {
    let http1_only = linerate_server::Config {
        h2c_preface: false,
        ..TestServer::config()
    };
    let err = match TestServer::start_with(http1_only.clone(), Router::new().grpc(Health::new())) {
        Ok(_) => panic!("a gRPC router with no HTTP/2 listener was bound"),
        Err(e) => e,
    };
    assert_eq!(err.part, linerate_server::Part::Grpc);
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let message = err.to_string();
    assert!(message.contains("Config::h2c_preface"), "{message}");
    // The same configuration serves a router without gRPC.
    let plain = Router::new().get("/", |_| linerate_server::Response::text("ok"));
    TestServer::start_with(http1_only.clone(), plain).unwrap();
    // An h2c listener beside it is enough.
    let with_h2c = linerate_server::Config {
        h2c: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..http1_only
    };
    TestServer::start_with(with_h2c, Router::new().grpc(Health::new())).unwrap();
}
