//! One async auth layer over a REST route and a gRPC service: the bearer
//! check an axum + tonic team writes once with `from_fn_with_state`. A call without
//! `authorization: Bearer good` ends UNAUTHENTICATED (a trailers-only answer, HTTP 200); the
//! REST route answers 401. The gRPC service is `test.Sum` (`Add` returns `a + b`, messages of
//! linerate-grpc's `benchmark.proto`); `Slow` sleeps `b` ms under a 100 ms route timeout
//! (DEADLINE_EXCEEDED past it).
//!
//! ```sh
//! cargo run -p linerate-server --example grpc_auth -- 127.0.0.1:50051
//! ```
//!
//! `examples/grpc_auth_client.py` calls it with Python's grpcio (`pip install grpcio`; no protoc):
//! `python3 grpc_auth_client.py 127.0.0.1:50051` prints each call's status.
//!
//! HTTP/1.1 and h2c (prior knowledge, what gRPC clients send without TLS) on the address given.
#![forbid(unsafe_code)]

use std::io;
use std::time::Duration;

use linerate_grpc::proto::benchmark::{SumReply, SumRequest};
use linerate_server::grpc::{self, Request, Status};
use linerate_server::{Config, Next, OwnedRequest, Response, Router, Server};

struct Sum;

impl grpc::Service for Sum {
    fn name(&self) -> &'static str {
        "test.Sum"
    }

    fn methods(self) -> Vec<grpc::Method> {
        vec![
            grpc::Method::unary("/test.Sum/Add", |req: Request<SumRequest>| {
                let r = req.get_ref();
                std::future::ready(Ok::<_, Status>(grpc::Response::new(SumReply {
                    result: r.a + r.b,
                })))
            }),
            grpc::Method::unary("/test.Sum/Slow", |req: Request<SumRequest>| async move {
                tokio::time::sleep(Duration::from_millis(req.get_ref().b as u64)).await;
                Ok::<_, Status>(grpc::Response::new(SumReply { result: 0 }))
            }),
        ]
    }
}

/// The bearer check: a lookup that waits (a timer here, Redis in a real service), then the
/// handler or a 401.
async fn bearer(req: OwnedRequest, next: Next) -> Response {
    tokio::time::sleep(Duration::from_millis(1)).await;
    if req.header("authorization") != Some(b"Bearer good") {
        return Response::text("missing or unknown bearer token").status(401);
    }
    next.run(req).await
}

fn main() -> io::Result<()> {
    let arg = std::env::args().nth(1);
    let addr = arg.as_deref().unwrap_or("127.0.0.1:50051");
    let addr = addr.parse().map_err(io::Error::other)?;
    let router = Router::new()
        .get("/hello", |_| "hello")
        .grpc(Sum)
        .timeout(Duration::from_millis(100))
        .around(bearer);
    let config = Config {
        addr,
        workers: 1,
        ..Config::default()
    };
    let server = Server::bind(config, router).map_err(|e| io::Error::other(e.to_string()))?;
    println!(
        "gRPC and REST behind one auth layer on {}",
        server.local_addr()
    );
    server.run_until_signal()
}
