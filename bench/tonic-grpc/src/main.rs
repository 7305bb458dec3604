//! The tonic peer for the gRPC figures: tonic 0.14 on ONE current-thread tokio runtime,
//! serving HttpArena's `benchmark.BenchmarkService/GetSum` (unary) and gRPC interop's
//! `grpc.testing.TestService/StreamingOutputCall` (server streaming: one message of
//! `response_parameters[i].size` zero bytes per entry; `interval_us` and the other request
//! fields are not used by the figures and are ignored). h2c on `--addr`, or TLS (ALPN h2)
//! with `--tls CERT KEY`; with `--tls-addr` too, h2c stays on `--addr` and TLS is served on
//! `--tls-addr` (the arena's unary-grpc and unary-grpc-tls from one process).
//!
//!   tonic-grpc --addr 127.0.0.1:50051 [--tls cert.pem key.pem [--tls-addr 127.0.0.1:50052]]

use std::net::SocketAddr;
use std::pin::Pin;

use tokio_stream::Stream;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

mod benchmark {
    tonic::include_proto!("benchmark");
}
mod testing {
    tonic::include_proto!("grpc.testing");
}

use benchmark::benchmark_service_server::{BenchmarkService, BenchmarkServiceServer};
use benchmark::{SumReply, SumRequest};
use testing::test_service_server::{TestService, TestServiceServer};
use testing::{Payload, StreamingOutputCallRequest, StreamingOutputCallResponse};

struct Sum;

#[tonic::async_trait]
impl BenchmarkService for Sum {
    async fn get_sum(&self, req: Request<SumRequest>) -> Result<Response<SumReply>, Status> {
        let r = req.into_inner();
        Ok(Response::new(SumReply {
            result: r.a.wrapping_add(r.b),
        }))
    }
}

/// Most bytes one streamed message may ask for: the interop client's largest is 314,159.
const MAX_MESSAGE: i32 = 4 << 20;

struct Streaming;

type Messages = Pin<Box<dyn Stream<Item = Result<StreamingOutputCallResponse, Status>> + Send>>;

#[tonic::async_trait]
impl TestService for Streaming {
    type StreamingOutputCallStream = Messages;

    async fn streaming_output_call(
        &self,
        req: Request<StreamingOutputCallRequest>,
    ) -> Result<Response<Messages>, Status> {
        let params = req.into_inner().response_parameters;
        if params.iter().any(|p| !(0..=MAX_MESSAGE).contains(&p.size)) {
            return Err(Status::invalid_argument("a response size out of range"));
        }
        let messages = params.into_iter().map(|p| {
            Ok(StreamingOutputCallResponse {
                payload: Some(Payload {
                    r#type: 0,
                    body: vec![0; p.size as usize],
                }),
            })
        });
        Ok(Response::new(Box::pin(tokio_stream::iter(messages))))
    }
}

struct Args {
    addr: SocketAddr,
    tls: Option<(String, String)>,
    /// With `--tls`: TLS here, and h2c stays on `addr` (the arena's unary-grpc-tls).
    tls_addr: Option<SocketAddr>,
}

fn args() -> Result<Args, String> {
    let mut addr = None;
    let mut tls = None;
    let mut tls_addr = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--addr" => {
                let v = it.next().ok_or("--addr needs ADDR")?;
                addr = Some(v.parse().map_err(|e| format!("--addr {v}: {e}"))?);
            }
            "--tls-addr" => {
                let v = it.next().ok_or("--tls-addr needs ADDR")?;
                tls_addr = Some(v.parse().map_err(|e| format!("--tls-addr {v}: {e}"))?);
            }
            "--tls" => {
                let cert = it.next().ok_or("--tls needs CERT KEY")?;
                let key = it.next().ok_or("--tls needs CERT KEY")?;
                tls = Some((cert, key));
            }
            other => {
                return Err(format!(
                    "unknown argument {other:?} (--addr ADDR [--tls CERT KEY [--tls-addr ADDR]])"
                ))
            }
        }
    }
    if tls_addr.is_some() && tls.is_none() {
        return Err("--tls-addr needs --tls CERT KEY".into());
    }
    Ok(Args {
        addr: addr.ok_or("--addr ADDR is required")?,
        tls,
        tls_addr,
    })
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tonic-grpc: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = rt.block_on(serve(args)) {
        eprintln!("tonic-grpc: {e}");
        std::process::exit(1);
    }
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let identity = match &args.tls {
        Some((cert, key)) => Some(Identity::from_pem(
            std::fs::read(cert)?,
            std::fs::read(key)?,
        )),
        None => None,
    };
    let one = |addr: SocketAddr, identity: Option<Identity>| async move {
        let mut server = Server::builder();
        if let Some(identity) = identity {
            server = server.tls_config(ServerTlsConfig::new().identity(identity))?;
        }
        server
            .add_service(BenchmarkServiceServer::new(Sum))
            .add_service(TestServiceServer::new(Streaming))
            .serve(addr)
            .await?;
        Ok::<(), Box<dyn std::error::Error>>(())
    };
    match args.tls_addr {
        // h2c on --addr and TLS on --tls-addr, both on this one thread.
        Some(tls_addr) => {
            tokio::try_join!(one(args.addr, None), one(tls_addr, identity))?;
        }
        None => one(args.addr, identity).await?,
    }
    Ok(())
}
