//! The demo's gRPC services, written against the public `linerate_server::grpc` API like any
//! user's: HttpArena's `benchmark.BenchmarkService/GetSum` (the unary-grpc profiles) and
//! gRPC's interop `grpc.testing.TestService` (what grpc-go's interop client runs its cases
//! against: empty and large unary calls, the three streaming kinds, status and metadata
//! echoes, deadlines and cancellation).
//!
//! Owns only application behaviour; the protocol is the engine's.
#![forbid(unsafe_code)]

use std::time::Duration;

use linerate_grpc::proto::benchmark::{SumReply, SumRequest};
use linerate_grpc::proto::grpc::testing::{
    EchoStatus, Empty, Payload, SimpleRequest, SimpleResponse, StreamingInputCallRequest,
    StreamingInputCallResponse, StreamingOutputCallRequest, StreamingOutputCallResponse,
};
use linerate_server::grpc::{Code, Metadata, Request, Response, Sink, Status, Streaming};

/// The service traits and servers build.rs generates from linerate-grpc's .proto files (the
/// messages are linerate-grpc's).
mod generated {
    /// `benchmark`.
    pub mod benchmark {
        include!(concat!(env!("OUT_DIR"), "/benchmark.rs"));
    }
    /// `grpc.testing`: `UnimplementedService` is generated too, and served by nobody (the
    /// unimplemented_service case calls it).
    #[allow(dead_code)]
    pub mod testing {
        include!(concat!(env!("OUT_DIR"), "/grpc.testing.rs"));
    }
}

pub use generated::benchmark::benchmark_service_server::{
    BenchmarkService, BenchmarkServiceServer,
};
pub use generated::testing::test_service_server::{TestService, TestServiceServer};

/// The largest payload a test call may ask for (the interop cases ask for at most 314,159
/// bytes; a client asking for more is refused rather than served gigabytes).
const MAX_PAYLOAD: i32 = 4 << 20;

/// HttpArena's unary-grpc service: `GetSum(a, b)` is `a + b`.
pub struct Benchmark;

impl BenchmarkService for Benchmark {
    fn get_sum(
        &self,
        req: Request<SumRequest>,
    ) -> impl Future<Output = Result<Response<SumReply>, Status>> + Send {
        let m = req.get_ref();
        let result = m.a.wrapping_add(m.b);
        std::future::ready(Ok(Response::new(SumReply { result })))
    }
}

/// gRPC's interop test service (the server side of doc/interop-test-descriptions.md).
/// `UnimplementedCall` keeps the generated default: UNIMPLEMENTED, as the
/// unimplemented_method case expects.
pub struct Interop;

impl TestService for Interop {
    fn empty_call(
        &self,
        _: Request<Empty>,
    ) -> impl Future<Output = Result<Response<Empty>, Status>> + Send {
        std::future::ready(Ok(Response::new(Empty {})))
    }

    fn unary_call(
        &self,
        req: Request<SimpleRequest>,
    ) -> impl Future<Output = Result<Response<SimpleResponse>, Status>> + Send {
        std::future::ready(unary(req))
    }

    fn cacheable_unary_call(
        &self,
        req: Request<SimpleRequest>,
    ) -> impl Future<Output = Result<Response<SimpleResponse>, Status>> + Send {
        std::future::ready(unary(req))
    }

    async fn streaming_output_call(
        &self,
        req: Request<StreamingOutputCallRequest>,
        out: &mut Sink<StreamingOutputCallResponse>,
    ) -> Result<(), Status> {
        respond(req.get_ref(), out).await
    }

    async fn streaming_input_call(
        &self,
        mut req: Request<Streaming<StreamingInputCallRequest>>,
    ) -> Result<Response<StreamingInputCallResponse>, Status> {
        let mut total: i64 = 0;
        while let Some(m) = req.get_mut().message().await? {
            total += m.payload.map_or(0, |p| p.body.len() as i64);
        }
        let aggregated_payload_size = i32::try_from(total)
            .map_err(|_| Status::new(Code::OutOfRange, "the payloads sum past 2^31"))?;
        Ok(Response::new(StreamingInputCallResponse {
            aggregated_payload_size,
        }))
    }

    async fn full_duplex_call(
        &self,
        req: Request<Streaming<StreamingOutputCallRequest>>,
        out: &mut Sink<StreamingOutputCallResponse>,
    ) -> Result<(), Status> {
        full_duplex(req, out).await
    }

    async fn half_duplex_call(
        &self,
        req: Request<Streaming<StreamingOutputCallRequest>>,
        out: &mut Sink<StreamingOutputCallResponse>,
    ) -> Result<(), Status> {
        half_duplex(req, out).await
    }
}

/// `UnaryCall`: a payload of the size asked, the status asked, the metadata echoed.
fn unary(req: Request<SimpleRequest>) -> Result<Response<SimpleResponse>, Status> {
    let m = req.get_ref();
    if let Some(s) = &m.response_status {
        check_status(s)?;
    }
    let mut resp = Response::new(SimpleResponse {
        payload: Some(payload(m.response_size)?),
        ..Default::default()
    });
    let (mut initial, mut trailing) = (Metadata::new(), Metadata::new());
    echo_metadata(req.metadata(), &mut initial, &mut trailing);
    *resp.metadata_mut() = initial;
    *resp.trailers_mut() = trailing;
    Ok(resp)
}

/// `StreamingOutputCall`'s and `FullDuplexCall`'s answer to one request: a message per
/// response parameter, each after its interval.
async fn respond(
    req: &StreamingOutputCallRequest,
    out: &mut Sink<StreamingOutputCallResponse>,
) -> Result<(), Status> {
    if let Some(s) = &req.response_status {
        check_status(s)?;
    }
    for p in &req.response_parameters {
        if p.interval_us > 0 {
            tokio::time::sleep(Duration::from_micros(p.interval_us as u64)).await;
        }
        let message = StreamingOutputCallResponse {
            payload: Some(payload(p.size)?),
        };
        out.send(&message).await?;
    }
    Ok(())
}

async fn full_duplex(
    mut req: Request<Streaming<StreamingOutputCallRequest>>,
    out: &mut Sink<StreamingOutputCallResponse>,
) -> Result<(), Status> {
    let (mut initial, mut trailing) = (Metadata::new(), Metadata::new());
    echo_metadata(req.metadata(), &mut initial, &mut trailing);
    *out.metadata_mut() = initial;
    *out.trailers_mut() = trailing;
    while let Some(m) = req.get_mut().message().await? {
        respond(&m, out).await?;
    }
    Ok(())
}

async fn half_duplex(
    mut req: Request<Streaming<StreamingOutputCallRequest>>,
    out: &mut Sink<StreamingOutputCallResponse>,
) -> Result<(), Status> {
    let mut all = Vec::new();
    while let Some(m) = req.get_mut().message().await? {
        all.push(m);
    }
    for m in &all {
        respond(m, out).await?;
    }
    Ok(())
}

/// The interop cases' echo: `x-grpc-test-echo-initial` back as initial metadata,
/// `x-grpc-test-echo-trailing-bin` as trailing metadata.
fn echo_metadata(from: &Metadata, initial: &mut Metadata, trailing: &mut Metadata) {
    if let Some(v) = from.get(ECHO_INITIAL) {
        let _ = initial.insert(ECHO_INITIAL, v.to_string());
    }
    if let Some(v) = from.get_bin(ECHO_TRAILING) {
        let _ = trailing.insert_bin(ECHO_TRAILING, v.to_vec());
    }
}

const ECHO_INITIAL: &str = "x-grpc-test-echo-initial";
const ECHO_TRAILING: &str = "x-grpc-test-echo-trailing-bin";

/// The status a request asks the call to end with (status_code_and_message,
/// special_status_message).
fn check_status(s: &EchoStatus) -> Result<(), Status> {
    if s.code == 0 {
        return Ok(());
    }
    Err(Status::new(Code::from_i32(s.code), s.message.clone()))
}

/// A COMPRESSABLE payload of `size` zero bytes.
fn payload(size: i32) -> Result<Payload, Status> {
    if !(0..=MAX_PAYLOAD).contains(&size) {
        return Err(Status::new(
            Code::InvalidArgument,
            format!("payload size {size} outside 0..={MAX_PAYLOAD}"),
        ));
    }
    Ok(Payload {
        r#type: 0,
        body: vec![0; size as usize],
    })
}
