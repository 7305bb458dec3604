//! The client against the server's own gRPC layer on a real h2c listener (`TestServer`): each
//! call shape, deadlines, cancellation the server sees, metadata both ways, statuses, gzip;
//! against a socket that closes (UNAVAILABLE, then a new connection); and the answer's
//! reading against canned transport events (trailers-only, HTTP statuses, a compressed
//! answer, the receive limit).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use linerate_grpc::proto::benchmark::{SumReply, SumRequest};

use super::*;
use crate::Router;
use crate::grpc::tests::{COUNT_UP, ECHO_MD, FAIL, RUNNING, SUM, Sums, TOTAL};
use crate::grpc::{Code, Method, Request, Response, Service};
use crate::testing::TestServer;

/// Longest a test waits on anything (a bound on a hang, not a measurement).
const LIMIT: Duration = Duration::from_secs(20);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn server(router: Router) -> (TestServer, String) {
    let config = crate::Config {
        h2c: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        ..TestServer::config()
    };
    let server = TestServer::start_with(config, router).unwrap();
    let uri = format!("http://{}", server.h2c_addr().unwrap());
    (server, uri)
}

fn sums() -> (TestServer, String) {
    server(Router::new().grpc(Sums {
        called: Arc::default(),
    }))
}

fn req(a: i32, b: i32) -> SumRequest {
    SumRequest { a, b }
}

/// A stream of requests fed by a queue, for calls whose requests depend on the answers.
struct Feed(tokio::sync::mpsc::UnboundedReceiver<SumRequest>);

impl futures_core::Stream for Feed {
    type Item = SumRequest;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<SumRequest>> {
        self.0.poll_recv(cx)
    }
}

/// A stream of the given requests.
fn iter(items: Vec<SumRequest>) -> Feed {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for i in items {
        tx.send(i).unwrap();
    }
    Feed(rx)
}

/// A unary call (2 + 3) and a server-streaming one (counting up to 3), checked.
async fn unary_and_server_streaming(grpc: &Grpc) {
    let r: Response<SumReply> = grpc.unary(SUM, Request::new(req(2, 3))).await.unwrap();
    assert_eq!(r.get_ref().result, 5);

    let mut s = grpc
        .server_streaming::<_, SumReply>(COUNT_UP, Request::new(req(3, 0)))
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(m) = s.message().await.unwrap() {
        got.push(m.result);
    }
    assert_eq!(got, [1, 2, 3]);
}

#[test]
fn every_call_shape_over_h2c_on_one_connection() {
    let (_server, uri) = sums();
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap());
        unary_and_server_streaming(&grpc).await;

        let r: Response<SumReply> = grpc
            .client_streaming(
                TOTAL,
                Request::new(iter(vec![req(1, 2), req(3, 4), req(5, 6)])),
            )
            .await
            .unwrap();
        assert_eq!(r.get_ref().result, 21);

        // Ping-pong: each request sent only after the previous answer came.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tx.send(req(1, 1)).unwrap();
        let mut answers = grpc
            .streaming::<_, _, SumReply>(RUNNING, Request::new(Feed(rx)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answers.message().await.unwrap().unwrap().result, 2);
        tx.send(req(10, 0)).unwrap();
        assert_eq!(answers.message().await.unwrap().unwrap().result, 12);
        drop(tx);
        assert!(answers.message().await.unwrap().is_none());

        // Calls at once share the connection.
        let calls = (0..8).map(|i| {
            let grpc = grpc.clone();
            async move {
                let r: Response<SumReply> = grpc.unary(SUM, Request::new(req(i, i))).await?;
                Ok::<_, Status>(r.into_inner().result)
            }
        });
        let mut handles = Vec::new();
        for c in calls {
            handles.push(tokio::spawn(c));
        }
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.await.unwrap().unwrap(), 2 * i as i32);
        }
    });
}

#[test]
fn metadata_goes_both_ways_and_a_status_message_is_percent_decoded() {
    let (_server, uri) = sums();
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap());
        let mut request = Request::new(req(1, 1));
        request.metadata_mut().insert("x-in", "hello").unwrap();
        request
            .metadata_mut()
            .insert_bin("x-in-bin", vec![0u8, 0xff, 7])
            .unwrap();
        let r: Response<SumReply> = grpc.unary(ECHO_MD, request).await.unwrap();
        assert_eq!(r.metadata().get("x-out"), Some("hello"));
        assert_eq!(r.trailers().get_bin("x-out-bin"), Some(&[0u8, 0xff, 7][..]));

        let e = grpc
            .unary::<_, SumReply>(FAIL, Request::new(req(1, 1)))
            .await
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (Code::NotFound, "no such sum: ü%")
        );

        let e = grpc
            .unary::<_, SumReply>("/test.Sum/Nope", Request::new(req(1, 1)))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Unimplemented);
    });
}

/// A service that records what the server saw: the deadline of a call, and a streaming call
/// cut off by its client.
struct Watch {
    had_deadline: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
}

impl Service for Watch {
    fn name(&self) -> &'static str {
        "test.Watch"
    }

    fn methods(self) -> Vec<Method> {
        let (had, cancelled) = (self.had_deadline, self.cancelled);
        vec![
            Method::unary("/test.Watch/Sleep", move |r: Request<SumRequest>| {
                had.store(r.deadline().is_some(), Ordering::SeqCst);
                async move {
                    tokio::time::sleep(Duration::from_millis(r.get_ref().a as u64)).await;
                    Ok(Response::new(SumReply { result: 1 }))
                }
            }),
            Method::server_streaming(
                "/test.Watch/Forever",
                move |_: Request<SumRequest>, mut out| {
                    let cancelled = cancelled.clone();
                    async move {
                        for i in 0.. {
                            if let Err(s) = out.send(&SumReply { result: i }).await {
                                cancelled.store(s.code == Code::Cancelled, Ordering::SeqCst);
                                return (Err(s), out);
                            }
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        (Ok(()), out)
                    }
                },
            ),
        ]
    }
}

#[test]
fn a_deadline_is_sent_and_ends_the_call_on_the_client_side() {
    let had = Arc::new(AtomicBool::new(false));
    let router = Router::new()
        .grpc(Watch {
            had_deadline: had.clone(),
            cancelled: Arc::default(),
        })
        .route_async(
            crate::Method::Post,
            "/test.Silent/Wait",
            crate::OnWorker,
            |_req| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                crate::Response::text("late")
            },
        );
    let (_server, uri) = server(router);
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap());
        let mut r = Request::new(req(5_000, 0));
        r.set_timeout(Duration::from_millis(200));
        let e = grpc
            .unary::<_, SumReply>("/test.Watch/Sleep", r)
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::DeadlineExceeded, "{e}");
        assert!(had.load(Ordering::SeqCst), "the server saw grpc-timeout");

        // A server that never answers: the client's timer ends the call.
        let mut r = Request::new(req(0, 0));
        r.set_timeout(Duration::from_millis(200));
        let e = tokio::time::timeout(LIMIT, grpc.unary::<_, SumReply>("/test.Silent/Wait", r))
            .await
            .expect("the call ended")
            .unwrap_err();
        assert_eq!(e.code, Code::DeadlineExceeded, "{e}");

        // The connection still carries calls.
        let r: Response<SumReply> = grpc
            .unary("/test.Watch/Sleep", Request::new(req(0, 0)))
            .await
            .unwrap();
        assert_eq!(r.get_ref().result, 1);
    });
}

#[test]
fn dropping_a_streaming_answer_cancels_the_call_on_the_server() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let router = Router::new().grpc(Watch {
        had_deadline: Arc::default(),
        cancelled: cancelled.clone(),
    });
    let (_server, uri) = server(router);
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap());
        let mut s = grpc
            .server_streaming::<_, SumReply>("/test.Watch/Forever", Request::new(req(0, 0)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.message().await.unwrap().unwrap().result, 0);
        assert_eq!(s.message().await.unwrap().unwrap().result, 1);
        drop(s);
        let start = std::time::Instant::now();
        while !cancelled.load(Ordering::SeqCst) && start.elapsed() < LIMIT {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            cancelled.load(Ordering::SeqCst),
            "the server's Sink failed CANCELLED"
        );
    });
}

#[test]
fn gzip_requests_are_sent_compressed() {
    let (_server, uri) = sums();
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap())
            .send_compressed(CompressionEncoding::Gzip);
        let r: Response<SumReply> = grpc.unary(SUM, Request::new(req(20, 22))).await.unwrap();
        assert_eq!(r.get_ref().result, 42);
        let r: Response<SumReply> = grpc
            .client_streaming(TOTAL, Request::new(iter(vec![req(1, 2), req(3, 4)])))
            .await
            .unwrap();
        assert_eq!(r.get_ref().result, 10);
    });
}

#[test]
fn a_request_over_the_send_limit_is_refused_before_it_goes() {
    let (_server, uri) = sums();
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap()).max_encoding_message_size(2);
        let e = grpc
            .unary::<_, SumReply>(SUM, Request::new(req(1000, 1000)))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
    });
}

/// Accepts connections, reads a little of each and closes it: a server killed mid-call.
fn closing_listener() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for _ in 0..4 {
            let Ok((mut s, _)) = listener.accept() else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 64];
            let _ = std::io::Read::read(&mut s, &mut buf);
            drop(s);
        }
    });
    (uri, accepted)
}

#[test]
fn a_connection_lost_mid_call_is_unavailable_and_the_next_call_connects_again() {
    let (uri, accepted) = closing_listener();
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::connect(&uri).await.unwrap());
        for round in 1..=2 {
            let e = tokio::time::timeout(
                LIMIT,
                grpc.unary::<_, SumReply>(SUM, Request::new(req(1, 1))),
            )
            .await
            .expect("the call ended")
            .unwrap_err();
            assert_eq!(e.code, Code::Unavailable, "round {round}: {e}");
        }
    });
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "one connection per call"
    );
}

/// A transport answering every call with the same canned events.
struct Canned(Vec<fn() -> Down>);

impl Transport for Canned {
    fn start(&self, call: CallIo) -> CallWork {
        for e in &self.0 {
            let _ = call.down.send(e());
        }
        None
    }
}

fn grpc_head() -> Down {
    Down::Head(
        200,
        vec![(b"content-type".to_vec(), b"application/grpc".to_vec())],
    )
}

fn ok_trailers() -> Down {
    Down::Trailers(vec![(b"grpc-status".to_vec(), b"0".to_vec())])
}

fn canned(events: Vec<fn() -> Down>) -> Grpc {
    Grpc::new(Channel::from_transport(Canned(events)))
}

#[test]
fn answers_read_as_grpc_says() {
    runtime().block_on(async {
        let call = |g: Grpc| async move {
            g.unary::<_, SumReply>(SUM, Request::new(req(1, 1)))
                .await
                .map(|r| r.into_inner().result)
        };
        // A compressed answer is taken.
        let gz = canned(vec![
            || {
                Down::Head(
                    200,
                    vec![
                        (b"content-type".to_vec(), b"application/grpc".to_vec()),
                        (b"grpc-encoding".to_vec(), b"gzip".to_vec()),
                    ],
                )
            },
            || {
                let mut out = Vec::new();
                let plain = prost::Message::encode_to_vec(&SumReply { result: 9 });
                linerate_grpc::compress::encode_message(
                    linerate_grpc::compress::Encoding::Gzip,
                    &plain,
                    &mut out,
                );
                Down::Data(out.into())
            },
            ok_trailers,
            || Down::End,
        ]);
        assert_eq!(call(gz).await.unwrap(), 9);
        // Trailers-only: the head's status.
        let only = canned(vec![
            || {
                Down::Head(
                    200,
                    vec![
                        (b"content-type".to_vec(), b"application/grpc".to_vec()),
                        (b"grpc-status".to_vec(), b"7".to_vec()),
                        (b"grpc-message".to_vec(), b"no%20way".to_vec()),
                    ],
                )
            },
            || Down::End,
        ]);
        let e = call(only).await.unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (Code::PermissionDenied, "no way")
        );
        // An HTTP status without gRPC's: http-grpc-status-mapping.md.
        let e = call(canned(vec![|| Down::Head(503, vec![]), || Down::End]))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Unavailable);
        let e = call(canned(vec![|| Down::Head(401, vec![]), || Down::End]))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        // A 200 that is not gRPC.
        let e = call(canned(vec![
            || Down::Head(200, vec![(b"content-type".to_vec(), b"text/html".to_vec())]),
            || Down::End,
        ]))
        .await
        .unwrap_err();
        assert_eq!(e.code, Code::Unknown);
        // An answer without grpc-status.
        let e = call(canned(vec![
            grpc_head,
            || {
                let mut out = Vec::new();
                linerate_grpc::frame::encode(&SumReply { result: 1 }, &mut out);
                Down::Data(out.into())
            },
            || Down::End,
        ]))
        .await
        .unwrap_err();
        assert_eq!(e.code, Code::Internal);
        // A message cut off before the trailers.
        let e = call(canned(vec![
            grpc_head,
            || Down::Data(bytes::Bytes::from_static(&[0, 0, 0, 0, 9, 1])),
            ok_trailers,
            || Down::End,
        ]))
        .await
        .unwrap_err();
        assert_eq!(e.code, Code::Internal);
        // Over the receive limit.
        let big = canned(vec![
            grpc_head,
            || Down::Data(bytes::Bytes::from_static(&[0, 0, 0, 1, 0])),
            ok_trailers,
            || Down::End,
        ]);
        let e = call(big.max_decoding_message_size(16)).await.unwrap_err();
        assert_eq!(e.code, Code::ResourceExhausted);
        // The transport dropped the call.
        let e = call(canned(vec![grpc_head])).await.unwrap_err();
        assert_eq!(e.code, Code::Unavailable);
    });
}

/// A transport whose server resets every call CANCEL once `after` has passed (grpc-go's
/// server does so when the call's grpc-timeout ends), before this side's timer is polled.
struct ResetAfter(Duration);

impl Transport for ResetAfter {
    fn start(&self, call: CallIo) -> CallWork {
        std::thread::sleep(self.0);
        let reset = super::h2::stream_status(crate::h2u::StreamError::Reset(0x8));
        let _ = call.down.send(Down::Failed(reset));
        None
    }
}

#[test]
fn a_reset_cancel_past_the_deadline_ends_the_call_deadline_exceeded() {
    // grpc-go's interop case timeout_on_sleeping_server: the server's reset can come before
    // this side's timer fires; the call still ends DEADLINE_EXCEEDED, as the spec's case says.
    runtime().block_on(async {
        let grpc = Grpc::new(Channel::from_transport(ResetAfter(Duration::from_millis(
            30,
        ))));
        let mut r = Request::new(req(1, 1));
        r.set_timeout(Duration::from_millis(10));
        let e = grpc.unary::<_, SumReply>(SUM, r).await.unwrap_err();
        assert_eq!(e.code, Code::DeadlineExceeded, "{e}");
        // A reset before the deadline is the server cancelling: CANCELLED.
        let grpc = Grpc::new(Channel::from_transport(ResetAfter(Duration::ZERO)));
        let mut r = Request::new(req(1, 1));
        r.set_timeout(LIMIT);
        let e = grpc.unary::<_, SumReply>(SUM, r).await.unwrap_err();
        assert_eq!(e.code, Code::Cancelled, "{e}");
        // No deadline: CANCELLED.
        let e = grpc
            .unary::<_, SumReply>(SUM, Request::new(req(1, 1)))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Cancelled, "{e}");
    });
}

#[test]
fn a_test_client_serves_calls_in_process_through_its_routes() {
    let client = crate::testing::TestClient::new(
        Router::new()
            .get("/plain", |_| crate::Response::text("plain"))
            .grpc(Sums {
                called: Arc::default(),
            }),
    );
    let grpc = Grpc::new(client.grpc_channel());
    client.block_on(async {
        unary_and_server_streaming(&grpc).await;

        let r: Response<SumReply> = grpc
            .client_streaming(TOTAL, Request::new(iter(vec![req(1, 2), req(3, 4)])))
            .await
            .unwrap();
        assert_eq!(r.get_ref().result, 10);

        let mut request = Request::new(req(1, 1));
        request.metadata_mut().insert("x-in", "hi").unwrap();
        let r: Response<SumReply> = grpc.unary(ECHO_MD, request).await.unwrap();
        assert_eq!(r.metadata().get("x-out"), Some("hi"));

        let e = grpc
            .unary::<_, SumReply>(FAIL, Request::new(req(1, 1)))
            .await
            .unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (Code::NotFound, "no such sum: ü%")
        );
        // The router's own answer for a path no service has.
        let e = grpc
            .unary::<_, SumReply>("/test.Other/Nope", Request::new(req(1, 1)))
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Unimplemented);
    });
    // Off the client's thread there is no engine to serve it.
    let channel = client.grpc_channel();
    let e = std::thread::spawn(move || {
        crate::testing::grpc_channel::block_on(
            Grpc::new(channel).unary::<_, SumReply>(SUM, Request::new(req(1, 1))),
        )
    })
    .join()
    .unwrap()
    .unwrap_err();
    assert_eq!(e.code, Code::Unavailable);
}

/// What a call sent: its path, fields and body.
type Sent = Arc<std::sync::Mutex<Option<(String, Vec<(String, String)>, Vec<u8>)>>>;

/// A transport keeping what each call sent, answering an empty OK message.
struct Capture(Sent);

impl Transport for Capture {
    fn start(&self, mut call: CallIo) -> CallWork {
        let sent = self.0.clone();
        Some(Box::pin(async move {
            let mut body = Vec::new();
            while let Some(Up::Data(piece)) = call.up.recv().await {
                body.extend_from_slice(&piece);
            }
            *sent.lock().unwrap() = Some((call.path.clone(), call.fields.clone(), body));
            for e in [grpc_head(), empty_message(), ok_trailers(), Down::End] {
                let _ = call.down.send(e);
            }
        }))
    }
}

fn empty_message() -> Down {
    let mut out = Vec::new();
    linerate_grpc::frame::encode(&SumReply::default(), &mut out);
    Down::Data(out.into())
}

#[test]
fn a_call_sends_its_head_as_protocol_http2_md_says_and_gzip_when_asked() {
    let sent = Sent::default();
    let grpc = Grpc::new(Channel::from_transport(Capture(sent.clone())))
        .send_compressed(CompressionEncoding::Gzip);
    let mut request = Request::new(req(7, 8));
    request.set_timeout(Duration::from_secs(30));
    request.metadata_mut().insert("x-a", "1").unwrap();
    request
        .metadata_mut()
        .insert_bin("x-b-bin", vec![0xff, 0])
        .unwrap();
    runtime().block_on(async {
        let _: Response<SumReply> = grpc.unary(SUM, request).await.unwrap();
    });
    let (path, fields, body) = sent.lock().unwrap().take().unwrap();
    assert_eq!(path, SUM);
    let get = |n: &str| {
        fields
            .iter()
            .find(|(name, _)| name == n)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("content-type"), Some("application/grpc"));
    assert_eq!(get("te"), Some("trailers"));
    assert_eq!(get("grpc-encoding"), Some("gzip"));
    assert_eq!(get("grpc-accept-encoding"), Some("identity,gzip"));
    assert_eq!(get("x-a"), Some("1"));
    assert_eq!(get("x-b-bin"), Some("/wA"), "unpadded base64");
    assert!(get("user-agent").is_some_and(|ua| ua.starts_with("grpc-rust-linerate/")));
    // A timeout a moment under 30 s, in the finest unit that fits 8 digits.
    let timeout = get("grpc-timeout").unwrap();
    let left = linerate_grpc::timeout::parse(timeout.as_bytes()).unwrap();
    assert!(
        left <= Duration::from_secs(30) && left > Duration::from_secs(20),
        "{timeout}"
    );
    // One message, Compressed-Flag 1, gzip of the message.
    assert_eq!(body[0], 1, "compressed flag");
    let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
    assert_eq!(body.len(), 5 + len);
    let mut plain = Vec::new();
    linerate_grpc::compress::decompress(
        linerate_grpc::compress::Encoding::Gzip,
        &body[5..],
        1 << 20,
        &mut plain,
    )
    .unwrap();
    assert_eq!(plain, prost::Message::encode_to_vec(&req(7, 8)));
}

/// A throwaway CA's PEM, and a TLS listener's settings with a leaf it signed for localhost
/// (files under `dir`).
#[cfg(feature = "grpc-client-tls")]
fn tls_listener(dir: &std::path::Path) -> (String, crate::TlsConfig) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, leaf.pem()).unwrap();
    std::fs::write(&key, leaf_key.serialize_pem()).unwrap();
    let tls = crate::TlsConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert: Some(crate::config::CertPair { cert, key }),
        ktls: false,
        key_update_bytes: crate::tls::TLS_KEY_UPDATE_BYTES,
        http2: true,
        options: Default::default(),
    };
    (ca.pem(), tls)
}

#[cfg(feature = "grpc-client-tls")]
#[test]
fn calls_go_over_tls_verified_against_the_given_ca() {
    let dir = std::env::temp_dir().join(format!("linerate-grpc-client-tls-{}", std::process::id()));
    let (ca, tls) = tls_listener(&dir);
    let config = crate::Config {
        tls: Some(tls),
        ..TestServer::config()
    };
    let server = TestServer::start_with(
        config,
        Router::new().grpc(Sums {
            called: Arc::default(),
        }),
    )
    .unwrap();
    let uri = format!("https://{}", server.tls_addr().unwrap());
    runtime().block_on(async {
        let trusted = ClientTlsConfig::new()
            .ca_certificate(ca.clone())
            .domain_name("localhost");
        let grpc = Grpc::new(Channel::connect_tls(&uri, trusted).await.unwrap());
        let r: Response<SumReply> = grpc.unary(SUM, Request::new(req(4, 5))).await.unwrap();
        assert_eq!(r.get_ref().result, 9);
        let mut s = grpc
            .server_streaming::<_, SumReply>(COUNT_UP, Request::new(req(2, 0)))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(s.message().await.unwrap().unwrap().result, 1);
        assert_eq!(s.message().await.unwrap().unwrap().result, 2);
        assert!(s.message().await.unwrap().is_none());

        // Another name than the certificate's: the handshake fails, nothing is called.
        let wrong = ClientTlsConfig::new()
            .ca_certificate(ca)
            .domain_name("elsewhere.test");
        let e = Channel::connect_tls(&uri, wrong).await.unwrap_err();
        assert!(matches!(e, Error::Connect(_)), "{e}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_channel_runs_on_a_workers_runtime_inside_an_on_worker_handler() {
    let (_backend, uri) = sums();
    let router =
        Router::new().route_async(crate::Method::Get, "/sum", crate::OnWorker, move |_req| {
            let uri = uri.clone();
            async move {
                // Connected, driven and called on the worker's own current-thread runtime.
                let grpc = match Channel::connect(&uri).await {
                    Ok(channel) => Grpc::new(channel),
                    Err(e) => return crate::Response::text_owned(format!("connect: {e}")),
                };
                let mut results = Vec::new();
                for i in 0..3 {
                    match grpc
                        .unary::<_, SumReply>(SUM, Request::new(req(20, 22 + i)))
                        .await
                    {
                        Ok(r) => results.push(r.into_inner().result.to_string()),
                        Err(e) => results.push(e.to_string()),
                    }
                }
                crate::Response::text_owned(results.join(","))
            }
        });
    let front = TestServer::start(router).unwrap();
    for _ in 0..2 {
        let mut s = std::net::TcpStream::connect(front.addr()).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /sum HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
        let mut answer = String::new();
        std::io::Read::read_to_string(&mut s, &mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("\r\n\r\n42,43,44"), "{answer}");
    }
}

#[test]
fn an_interceptor_adds_metadata_to_each_call_or_refuses_it() {
    let sent = Sent::default();
    let grpc = Grpc::new(Channel::from_transport(Capture(sent.clone()))).with_interceptor(|md| {
        if md.get("x-refuse").is_some() {
            return Err(Status::new(Code::Unauthenticated, "no token"));
        }
        md.insert("authorization", "Bearer t")
            .map_err(|_| Status::new(Code::Internal, "bad metadata"))
    });
    runtime().block_on(async {
        let _: Response<SumReply> = grpc.unary(SUM, Request::new(req(1, 2))).await.unwrap();
        let (_, fields, _) = sent.lock().unwrap().take().unwrap();
        assert!(
            fields
                .iter()
                .any(|(n, v)| n == "authorization" && v == "Bearer t"),
            "{fields:?}"
        );
        let mut refused = Request::new(req(1, 2));
        refused.metadata_mut().insert("x-refuse", "1").unwrap();
        let e = grpc.unary::<_, SumReply>(SUM, refused).await.unwrap_err();
        assert_eq!(e.code, Code::Unauthenticated);
        assert!(sent.lock().unwrap().is_none(), "nothing was sent");
    });
}
