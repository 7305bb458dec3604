//! gRPC's interop client, on linerate's generated client (`test_service_client`, from
//! linerate-grpc's test.proto by build.rs) and its own HTTP/2 connection: the core cases of
//! grpc/doc/interop-test-descriptions.md, one per run, with grpc-go's client's flags, so
//! scripts/grpc-interop.sh runs it against grpc-go's interop server as it runs grpc-go's
//! client against linerate.
//!
//!     cargo run -p linerate --example grpc_interop_client -- \
//!         --server_host 127.0.0.1 --server_port 10000 --test_case large_unary
//!
//! Exits 0 when the case passed; otherwise prints why and exits 1 (2 for a case it does not
//! have, or a flag it does not take). h2c (`--use_tls=false`), or TLS (`--use_tls=true`, with
//! `--use_test_ca --ca_file PEM` for a test CA and `--server_host_override NAME`).

use std::pin::Pin;
use std::process::ExitCode;
use std::task::{Context, Poll};
use std::time::Duration;

use linerate_grpc::proto::grpc::testing::{
    EchoStatus, Empty, Payload, ResponseParameters, SimpleRequest, StreamingInputCallRequest,
    StreamingOutputCallRequest,
};
use linerate_server::grpc::client::{Channel, ClientTlsConfig};
use linerate_server::grpc::{Code, Request, Status};

#[allow(dead_code, clippy::all)]
mod testing {
    include!(concat!(env!("OUT_DIR"), "/grpc.testing.rs"));
}

use testing::test_service_client::TestServiceClient;
use testing::unimplemented_service_client::UnimplementedServiceClient;

/// The cases, as interop-test-descriptions.md names them.
const CASES: &[&str] = &[
    "empty_unary",
    "large_unary",
    "client_streaming",
    "server_streaming",
    "ping_pong",
    "empty_stream",
    "timeout_on_sleeping_server",
    "cancel_after_begin",
    "cancel_after_first_response",
    "status_code_and_message",
    "special_status_message",
    "custom_metadata",
    "unimplemented_method",
    "unimplemented_service",
    "rpc_soak",
    "channel_soak",
];

/// The request and answer sizes of the streaming cases.
const REQUEST_SIZES: [usize; 4] = [27182, 8, 1828, 45904];
const RESPONSE_SIZES: [i32; 4] = [31415, 9, 2653, 58979];

/// A stream of requests from a queue: the streaming cases send as they go.
struct Feed<T>(tokio::sync::mpsc::UnboundedReceiver<T>);

impl<T> futures_core::Stream for Feed<T> {
    type Item = T;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

fn feed<T>() -> (tokio::sync::mpsc::UnboundedSender<T>, Feed<T>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (tx, Feed(rx))
}

fn payload(size: usize) -> Option<Payload> {
    Some(Payload {
        r#type: 0,
        body: vec![0; size],
    })
}

/// A failed check: the case's reason.
type Outcome = Result<(), String>;

fn check(ok: bool, what: impl FnOnce() -> String) -> Outcome {
    if ok { Ok(()) } else { Err(what()) }
}

fn status(e: Status) -> String {
    format!("the call failed: {e}")
}

/// Where the cases connect: h2c, or TLS verified as the flags say.
struct Dial {
    uri: String,
    tls: Option<ClientTlsConfig>,
}

impl Dial {
    async fn channel(&self) -> Result<Channel, String> {
        let channel = match &self.tls {
            None => Channel::connect(&self.uri).await,
            Some(tls) => Channel::connect_tls(&self.uri, tls.clone()).await,
        };
        channel.map_err(|e| format!("connect {}: {e}", self.uri))
    }
}

async fn run(case: &str, dial: &Dial) -> Outcome {
    let mut client = TestServiceClient::new(dial.channel().await?);
    match case {
        "empty_unary" => {
            let r = client.empty_call(Empty {}).await.map_err(status)?;
            check(*r.get_ref() == Empty {}, || "not Empty".into())
        }
        "large_unary" => large_unary(&mut client).await,
        "client_streaming" => {
            let (tx, stream) = feed();
            for size in REQUEST_SIZES {
                let _ = tx.send(StreamingInputCallRequest {
                    payload: payload(size),
                    expect_compressed: None,
                });
            }
            drop(tx);
            let r = client.streaming_input_call(stream).await.map_err(status)?;
            let got = r.get_ref().aggregated_payload_size;
            check(got == 74922, || format!("aggregated_payload_size {got}"))
        }
        "server_streaming" => {
            let req = StreamingOutputCallRequest {
                response_parameters: RESPONSE_SIZES
                    .iter()
                    .map(|&size| ResponseParameters {
                        size,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            let mut s = client
                .streaming_output_call(req)
                .await
                .map_err(status)?
                .into_inner();
            let mut sizes = Vec::new();
            while let Some(m) = s.message().await.map_err(status)? {
                sizes.push(m.payload.map_or(0, |p| p.body.len()) as i32);
            }
            check(sizes == RESPONSE_SIZES, || format!("sizes {sizes:?}"))
        }
        "ping_pong" => {
            let (tx, stream) = feed();
            let _ = tx.send(duplex_request(0));
            let mut s = client
                .full_duplex_call(stream)
                .await
                .map_err(status)?
                .into_inner();
            for (i, want) in RESPONSE_SIZES.into_iter().enumerate() {
                if i > 0 {
                    let _ = tx.send(duplex_request(i));
                }
                let m = s.message().await.map_err(status)?;
                let size = m.and_then(|m| m.payload).map_or(0, |p| p.body.len()) as i32;
                check(size == want, || format!("answer {i}: {size} bytes"))?;
            }
            drop(tx);
            let end = s.message().await.map_err(status)?;
            check(end.is_none(), || "a fifth answer".into())
        }
        "empty_stream" => {
            let (tx, stream) = feed::<StreamingOutputCallRequest>();
            drop(tx);
            let mut s = client
                .full_duplex_call(stream)
                .await
                .map_err(status)?
                .into_inner();
            let end = s.message().await.map_err(status)?;
            check(end.is_none(), || "an answer to no request".into())
        }
        "timeout_on_sleeping_server" => {
            let (tx, stream) = feed();
            let _ = tx.send(StreamingOutputCallRequest {
                payload: payload(27182),
                ..Default::default()
            });
            let mut req = Request::new(stream);
            req.set_timeout(Duration::from_millis(1));
            let got = match client.full_duplex_call(req).await {
                Err(e) => e.code,
                Ok(r) => match r.into_inner().message().await {
                    Err(e) => e.code,
                    Ok(_) => Code::Ok,
                },
            };
            drop(tx);
            check(got == Code::DeadlineExceeded, || format!("status {got}"))
        }
        "cancel_after_begin" => {
            // The caller gives up before sending anything: the call's future is dropped
            // (RST_STREAM CANCEL), and the call ends CANCELLED here.
            let (tx, stream) = feed::<StreamingInputCallRequest>();
            let call = client.streaming_input_call(stream);
            let got = tokio::select! {
                r = call => r.map(|_| ()).err().map_or(Code::Ok, |e| e.code),
                () = tokio::time::sleep(Duration::from_millis(50)) => Code::Cancelled,
            };
            drop(tx);
            check(got == Code::Cancelled, || format!("status {got}"))
        }
        "cancel_after_first_response" => {
            let (tx, stream) = feed();
            let _ = tx.send(duplex_request(0));
            let mut s = client
                .full_duplex_call(stream)
                .await
                .map_err(status)?
                .into_inner();
            let first = s.message().await.map_err(status)?;
            let size = first.and_then(|m| m.payload).map_or(0, |p| p.body.len()) as i32;
            check(size == RESPONSE_SIZES[0], || {
                format!("first answer: {size} bytes")
            })?;
            drop(s); // RST_STREAM CANCEL: the call ends CANCELLED
            drop(tx);
            Ok(())
        }
        "status_code_and_message" => {
            let echo = || {
                Some(EchoStatus {
                    code: 2,
                    message: "test status message".into(),
                })
            };
            status_echo(&mut client, echo, "test status message").await
        }
        "special_status_message" => {
            let text = "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n";
            let echo = || {
                Some(EchoStatus {
                    code: 2,
                    message: "\t\ntest with whitespace\r\nand Unicode BMP ☺ and non-BMP 😈\t\n"
                        .into(),
                })
            };
            status_echo(&mut client, echo, text).await
        }
        "custom_metadata" => custom_metadata(&mut client).await,
        "unimplemented_method" => {
            let e = client.unimplemented_call(Empty {}).await.err();
            let code = e.map_or(Code::Ok, |e| e.code);
            check(code == Code::Unimplemented, || format!("status {code}"))
        }
        "unimplemented_service" => {
            let mut other = UnimplementedServiceClient::new(dial.channel().await?);
            let e = other.unimplemented_call(Empty {}).await.err();
            let code = e.map_or(Code::Ok, |e| e.code);
            check(code == Code::Unimplemented, || format!("status {code}"))
        }
        "rpc_soak" => {
            for i in 0..20 {
                large_unary(&mut client)
                    .await
                    .map_err(|e| format!("iteration {i}: {e}"))?;
            }
            Ok(())
        }
        "channel_soak" => {
            for i in 0..20 {
                let channel = dial
                    .channel()
                    .await
                    .map_err(|e| format!("iteration {i}: {e}"))?;
                let mut fresh = TestServiceClient::new(channel);
                large_unary(&mut fresh)
                    .await
                    .map_err(|e| format!("iteration {i}: {e}"))?;
            }
            Ok(())
        }
        other => Err(format!("no case {other:?}")),
    }
}

fn duplex_request(i: usize) -> StreamingOutputCallRequest {
    StreamingOutputCallRequest {
        response_parameters: vec![ResponseParameters {
            size: RESPONSE_SIZES[i],
            ..Default::default()
        }],
        payload: payload(REQUEST_SIZES[i]),
        ..Default::default()
    }
}

async fn large_unary(client: &mut TestServiceClient) -> Outcome {
    let r = client
        .unary_call(SimpleRequest {
            response_size: 314159,
            payload: payload(271828),
            ..Default::default()
        })
        .await
        .map_err(status)?;
    let len = r.get_ref().payload.as_ref().map_or(0, |p| p.body.len());
    check(len == 314159, || format!("payload of {len} bytes"))
}

/// The server echoes `echo()`'s status on a unary and a full-duplex call.
async fn status_echo(
    client: &mut TestServiceClient,
    echo: impl Fn() -> Option<EchoStatus>,
    text: &str,
) -> Outcome {
    let e = client
        .unary_call(SimpleRequest {
            response_status: echo(),
            ..Default::default()
        })
        .await
        .err()
        .ok_or("UnaryCall: OK")?;
    check(e.code == Code::Unknown && e.message == text, || {
        format!("UnaryCall: {:?} {:?}", e.code, e.message)
    })?;
    let (tx, stream) = feed();
    let _ = tx.send(StreamingOutputCallRequest {
        response_status: echo(),
        ..Default::default()
    });
    drop(tx);
    let got = match client.full_duplex_call(stream).await {
        Err(e) => e,
        Ok(r) => r
            .into_inner()
            .message()
            .await
            .err()
            .ok_or("FullDuplexCall: OK")?,
    };
    check(got.code == Code::Unknown && got.message == text, || {
        format!("FullDuplexCall: {:?} {:?}", got.code, got.message)
    })
}

const INITIAL: &str = "x-grpc-test-echo-initial";
const TRAILING: &str = "x-grpc-test-echo-trailing-bin";

/// `req` with the echo metadata the server sends back.
fn with_metadata<T>(req: T) -> Request<T> {
    let mut req = Request::new(req);
    let md = req.metadata_mut();
    md.insert(INITIAL, "test_initial_metadata_value")
        .expect("a valid name and value");
    md.insert_bin(TRAILING, vec![0xab, 0xab, 0xab])
        .expect("a valid -bin name");
    req
}

async fn custom_metadata(client: &mut TestServiceClient) -> Outcome {
    let r = client
        .unary_call(with_metadata(SimpleRequest {
            response_size: 314159,
            payload: payload(271828),
            ..Default::default()
        }))
        .await
        .map_err(status)?;
    check(
        r.metadata().get(INITIAL) == Some("test_initial_metadata_value"),
        || format!("UnaryCall: initial metadata {:?}", r.metadata()),
    )?;
    check(
        r.trailers().get_bin(TRAILING) == Some(&[0xab, 0xab, 0xab][..]),
        || format!("UnaryCall: trailing metadata {:?}", r.trailers()),
    )?;
    let (tx, stream) = feed();
    let _ = tx.send(StreamingOutputCallRequest {
        response_parameters: vec![ResponseParameters {
            size: 314159,
            ..Default::default()
        }],
        payload: payload(271828),
        ..Default::default()
    });
    drop(tx);
    let r = client
        .full_duplex_call(with_metadata(stream))
        .await
        .map_err(status)?;
    check(
        r.metadata().get(INITIAL) == Some("test_initial_metadata_value"),
        || format!("FullDuplexCall: initial metadata {:?}", r.metadata()),
    )?;
    let mut s = r.into_inner();
    while s.message().await.map_err(status)?.is_some() {}
    check(
        s.trailers().and_then(|t| t.get_bin(TRAILING)) == Some(&[0xab, 0xab, 0xab][..]),
        || format!("FullDuplexCall: trailing metadata {:?}", s.trailers()),
    )
}

fn main() -> ExitCode {
    let mut host = "127.0.0.1".to_string();
    let mut port = String::new();
    let mut case = String::new();
    let (mut use_tls, mut test_ca) = (false, false);
    let (mut ca_file, mut host_override) = (None::<String>, None::<String>);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (arg.clone(), None),
        };
        // A flag's value: after `=`, else the next argument; a bool flag alone is true.
        let flag = |inline: &Option<String>| inline.as_deref().is_none_or(|v| v == "true");
        let mut value = || inline.clone().or_else(|| args.next()).unwrap_or_default();
        match name.as_str() {
            "--server_host" => host = value(),
            "--server_port" => port = value(),
            "--test_case" => case = value(),
            "--use_tls" => use_tls = flag(&inline),
            "--use_test_ca" => test_ca = flag(&inline),
            "--ca_file" => ca_file = Some(value()),
            "--server_host_override" => host_override = Some(value()),
            "--soak_iterations" => {
                let _ = value(); // the soaks run 20, as the script asks
            }
            other => {
                eprintln!("grpc_interop_client: unknown flag {other}");
                return ExitCode::from(2);
            }
        }
    }
    if !CASES.contains(&case.as_str()) {
        eprintln!(
            "grpc_interop_client: no case {case:?}; the cases: {}",
            CASES.join(" ")
        );
        return ExitCode::from(2);
    }
    let tls = if use_tls {
        let mut tls = ClientTlsConfig::new();
        if test_ca {
            let Some(path) = &ca_file else {
                eprintln!("grpc_interop_client: --use_test_ca needs --ca_file");
                return ExitCode::from(2);
            };
            match std::fs::read(path) {
                Ok(pem) => tls = tls.ca_certificate(pem),
                Err(e) => {
                    eprintln!("grpc_interop_client: {path}: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        if let Some(name) = host_override {
            tls = tls.domain_name(name);
        }
        Some(tls)
    } else {
        None
    };
    let scheme = if use_tls { "https" } else { "http" };
    let dial = Dial {
        uri: format!("{scheme}://{host}:{port}"),
        tls,
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("grpc_interop_client: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(&case, &dial)) {
        Ok(()) => {
            println!("{case}: passed");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("{case}: FAILED: {why}");
            ExitCode::FAILURE
        }
    }
}
