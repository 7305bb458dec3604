//! The reverse proxy to HTTP/2 upstreams (`--proxy /=h2c://…`, `protocol = "h2c"`), against
//! real servers on 127.0.0.1: linerate's own h2c listener (the demo's gRPC GetSum and its
//! echo), and test upstreams written with hyperium's `h2` that count their connections and
//! see how their streams end. The client side is `h2` too, over the proxy's h2c listener.

mod common;

use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::bin::{Served, serve};

/// How long a test waits for something that must happen (never a measured duration).
const WAIT: Duration = Duration::from_secs(20);

/// HttpArena's prebuilt GetSum call (a = 1, b = 2) and its answer's message (result = 3).
const GET_SUM: &[u8] = &[0, 0, 0, 0, 4, 0x08, 1, 0x10, 2];
const GET_SUM_ANSWER: &[u8] = &[0, 0, 0, 0, 2, 0x08, 3];

/// The h2c port on a banner's "(h2c, prior knowledge) on http://ADDR" line.
fn h2c_addr(s: &Served) -> SocketAddr {
    s.banner
        .iter()
        .find_map(|l| l.split("(h2c, prior knowledge) on http://").nth(1))
        .expect("the banner names the h2c listener")
        .trim()
        .parse()
        .unwrap()
}

/// The demo with an h2c listener: the upstream.
fn demo_upstream() -> Served {
    serve(&["--h2c-port", "0"])
}

/// A proxy (no app) sending everything to the h2c upstream at `up`, with its own h2c
/// listener for the clients.
fn proxy_to(up: SocketAddr, extra: &[&str]) -> Served {
    let target = format!("/=h2c://{up}");
    let mut args = vec!["--app", "none", "--h2c-port", "0", "--proxy", &target];
    args.extend_from_slice(extra);
    serve(&args)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// An answer as the client saw it.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
    /// The head's HEADERS frame ended the stream (a Trailers-Only answer).
    ended_with_head: bool,
}

/// An h2 client connection to `addr` (the connection is driven on the runtime).
async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// `method path` with `fields` and `body` on `client`, and its whole answer.
async fn call(
    client: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
    fields: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://proxied{path}"));
    for (n, v) in fields {
        req = req.header(*n, *v);
    }
    let mut client = client.clone().ready().await.unwrap();
    let (answer, mut send) = client
        .send_request(req.body(()).unwrap(), body.is_empty())
        .unwrap();
    if !body.is_empty() {
        // Buffered by h2 and sent as the windows allow.
        send.send_data(Bytes::copy_from_slice(body), true).unwrap();
    }
    read_answer(answer.await.unwrap()).await
}

async fn read_answer(resp: http::Response<h2::RecvStream>) -> Answer {
    let (head, mut recv) = resp.into_parts();
    let ended_with_head = recv.is_end_stream();
    let mut body = Vec::new();
    while let Some(piece) = recv.data().await {
        let piece = piece.unwrap();
        let _ = recv.flow_control().release_capacity(piece.len());
        body.extend_from_slice(&piece);
    }
    let trailers = recv.trailers().await.unwrap();
    Answer {
        status: head.status.as_u16(),
        headers: head.headers,
        body,
        trailers,
        ended_with_head,
    }
}

/// What a test upstream does with each request.
#[derive(Clone, Copy)]
enum Script {
    /// Holds every answer until this many requests are in, then answers each `200 ok`
    /// with a trailer: only concurrent requests complete.
    AnswerWhenAllIn(usize),
    /// Holds every request until this many are in, then answers each `200` with its own
    /// request's path as the body (and a trailer), all at once: the answers for the
    /// streams of every client reach the proxy together.
    EchoWhenAllIn(usize),
    /// Answers the head at once, then reads the body to its end and reports how it ended.
    HeadThenReadBody,
    /// Drops the connection at the first request, unanswered.
    Die,
    /// Takes every request and never answers.
    Silent,
    /// Answers whole at once (`200 ok`, a trailer), then reads the body and reports how it
    /// ended.
    AnswerThenReadBody,
    /// Answers this many bytes as fast as its windows let it, counting them in `sent`.
    Stream(usize),
    /// Never answers; reports `Ok(0)` when a request is in, then `Err(reason)` when its
    /// stream is reset.
    WatchReset,
    /// A `103 Early Hints` with a `link` field, then `200 ok` with its length.
    EarlyHints,
}

/// A test HTTP/2 upstream on 127.0.0.1 (its own thread and runtime, gone with the test
/// process): its address, the connections it accepted, and how the request bodies ended
/// (`Ok(bytes)` at their end, `Err(reason)` reset).
struct H2Upstream {
    addr: SocketAddr,
    accepted: Arc<Mutex<usize>>,
    bodies: mpsc::Receiver<Result<usize, Option<h2::Reason>>>,
    /// Bytes a `Stream` script could send so far.
    sent: Arc<Mutex<usize>>,
}

impl H2Upstream {
    fn start(script: Script) -> H2Upstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        let (tx, bodies) = mpsc::channel();
        let counted = accepted.clone();
        let sent = Arc::new(Mutex::new(0));
        let sent_here = sent.clone();
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let waiting = Arc::new(Mutex::new(Vec::new()));
                let echoes = Arc::new(Mutex::new(Vec::new()));
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    *counted.lock().unwrap() += 1;
                    let (tx, waiting) = (tx.clone(), waiting.clone());
                    let echoes = echoes.clone();
                    let sent = sent_here.clone();
                    tokio::spawn(async move {
                        let Ok(mut conn) = h2::server::handshake(tcp).await else {
                            return;
                        };
                        while let Some(Ok((req, respond))) = conn.accept().await {
                            match script {
                                Script::Die => return,
                                Script::Silent => waiting.lock().unwrap().push(respond),
                                Script::AnswerWhenAllIn(n) => {
                                    let mut w = waiting.lock().unwrap();
                                    w.push(respond);
                                    if w.len() == n {
                                        for mut r in w.drain(..) {
                                            answer_ok(&mut r);
                                        }
                                    }
                                }
                                Script::EchoWhenAllIn(n) => {
                                    tokio::spawn(echo_when_all_in(req, respond, echoes.clone(), n));
                                }
                                Script::HeadThenReadBody => {
                                    let tx = tx.clone();
                                    tokio::spawn(read_body(req, respond, tx, false));
                                }
                                Script::WatchReset => {
                                    let tx = tx.clone();
                                    tokio::spawn(async move {
                                        let mut respond = respond;
                                        let _ = tx.send(Ok(0));
                                        let reason =
                                            std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
                                        let _ = tx.send(Err(reason.ok()));
                                    });
                                }
                                Script::Stream(total) => {
                                    tokio::spawn(stream_out(respond, total, sent.clone()));
                                }
                                Script::EarlyHints => {
                                    let mut respond = respond;
                                    let hints = http::Response::builder()
                                        .status(103)
                                        .header("link", "</a.css>; rel=preload")
                                        .body(())
                                        .unwrap();
                                    respond.send_informational(hints).unwrap();
                                    let resp = http::Response::builder()
                                        .status(200)
                                        .header("content-length", "2")
                                        .body(())
                                        .unwrap();
                                    let mut send = respond.send_response(resp, false).unwrap();
                                    send.send_data(Bytes::from_static(b"ok"), true).unwrap();
                                }
                                Script::AnswerThenReadBody => {
                                    let tx = tx.clone();
                                    tokio::spawn(read_body(req, respond, tx, true));
                                }
                            }
                        }
                    });
                }
            });
        });
        H2Upstream {
            addr,
            accepted,
            bodies,
            sent,
        }
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

/// `200` and `total` bytes (the pattern `i % 251`), each piece sent as soon as the stream's
/// window has room for it, counted in `sent`.
async fn stream_out(
    mut respond: h2::server::SendResponse<Bytes>,
    total: usize,
    sent: Arc<Mutex<usize>>,
) {
    let resp = http::Response::builder().status(200).body(()).unwrap();
    let mut send = respond.send_response(resp, false).unwrap();
    let body: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
    let mut at = 0;
    while at < total {
        send.reserve_capacity((total - at).min(64 * 1024));
        let Some(Ok(room)) = std::future::poll_fn(|cx| send.poll_capacity(cx)).await else {
            return;
        };
        let n = room.min(total - at);
        if n == 0 {
            continue;
        }
        send.send_data(Bytes::copy_from_slice(&body[at..at + n]), at + n == total)
            .unwrap();
        at += n;
        *sent.lock().unwrap() = at;
    }
}

/// The requests held so far, with their paths, by `Script::EchoWhenAllIn`.
type Echoes = Arc<Mutex<Vec<(h2::server::SendResponse<Bytes>, Vec<u8>)>>>;

/// Holds `req`; the `n`th request in answers every one held with its own path.
async fn echo_when_all_in(
    req: http::Request<h2::RecvStream>,
    respond: h2::server::SendResponse<Bytes>,
    echoes: Echoes,
    n: usize,
) {
    let got = req.uri().path().as_bytes().to_vec();
    let mut held = echoes.lock().unwrap();
    held.push((respond, got));
    if held.len() == n {
        for (mut respond, got) in held.drain(..) {
            let resp = http::Response::builder()
                .status(200)
                .header("content-length", got.len())
                .body(())
                .unwrap();
            let mut send = respond.send_response(resp, false).unwrap();
            send.send_data(Bytes::from(got), false).unwrap();
            let mut trailers = http::HeaderMap::new();
            trailers.insert("x-end", "yes".parse().unwrap());
            send.send_trailers(trailers).unwrap();
        }
    }
}

/// `200`, the body `ok`, and the trailer `x-end: yes`.
fn answer_ok(respond: &mut h2::server::SendResponse<Bytes>) {
    let resp = http::Response::builder().status(200).body(()).unwrap();
    let mut send = respond.send_response(resp, false).unwrap();
    send.send_data(Bytes::from_static(b"ok"), false).unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-end", "yes".parse().unwrap());
    send.send_trailers(trailers).unwrap();
}

async fn read_body(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    tx: mpsc::Sender<Result<usize, Option<h2::Reason>>>,
    whole: bool,
) {
    let _send = if whole {
        answer_ok(&mut respond);
        None
    } else {
        let resp = http::Response::builder().status(200).body(()).unwrap();
        Some(respond.send_response(resp, false).unwrap())
    };
    let mut body = req.into_body();
    let mut n = 0;
    loop {
        match body.data().await {
            Some(Ok(piece)) => {
                n += piece.len();
                let _ = body.flow_control().release_capacity(piece.len());
            }
            Some(Err(e)) => {
                let _ = tx.send(Err(e.reason()));
                return;
            }
            None => {
                let _ = tx.send(Ok(n));
                return;
            }
        }
    }
}

#[test]
fn a_grpc_unary_call_through_the_proxy_gets_its_message_and_its_trailers() {
    let up = demo_upstream();
    let proxy = proxy_to(h2c_addr(&up), &[]);
    let a = runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        call(
            &client,
            "POST",
            "/benchmark.BenchmarkService/GetSum",
            &[("content-type", "application/grpc"), ("te", "trailers")],
            GET_SUM,
        )
        .await
    });
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.headers["content-type"], "application/grpc");
    assert_eq!(a.body, GET_SUM_ANSWER);
    let trailers = a.trailers.expect("the answer's trailers are relayed");
    assert_eq!(trailers["grpc-status"], "0");
}

#[test]
fn a_failed_grpc_call_keeps_its_trailers_only_answer() {
    // An unknown method: UNIMPLEMENTED in a Trailers-Only answer (one HEADERS, END_STREAM),
    // which the proxy must not turn into a head followed by an empty end.
    let up = demo_upstream();
    let proxy = proxy_to(h2c_addr(&up), &[]);
    let a = runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        call(
            &client,
            "POST",
            "/benchmark.BenchmarkService/NoSuchMethod",
            &[("content-type", "application/grpc"), ("te", "trailers")],
            GET_SUM,
        )
        .await
    });
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        a.headers["grpc-status"], "12",
        "UNIMPLEMENTED in the head: {a:?}"
    );
    assert!(a.body.is_empty());
    assert!(
        a.ended_with_head,
        "one HEADERS frame with END_STREAM: {a:?}"
    );
}

#[test]
fn many_concurrent_streams_share_one_upstream_connection() {
    const CALLS: usize = 40;
    let up = H2Upstream::start(Script::AnswerWhenAllIn(CALLS));
    let proxy = proxy_to(up.addr, &[]);
    let answers = runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let calls: Vec<_> = (0..CALLS)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    let path = format!("/call/{i}");
                    call(&client, "GET", &path, &[], b"").await
                })
            })
            .collect();
        let mut answers = Vec::new();
        for c in calls {
            answers.push(c.await.unwrap());
        }
        answers
    });
    // The upstream answers nothing until all are in at once: each answer proves they were
    // all in flight together.
    for a in &answers {
        assert_eq!((a.status, &a.body[..]), (200, &b"ok"[..]), "{a:?}");
        assert_eq!(a.trailers.as_ref().expect("trailers")["x-end"], "yes");
    }
    assert_eq!(
        up.accepted(),
        1,
        "{CALLS} streams in flight on one upstream connection"
    );
}

#[test]
fn concurrent_calls_from_two_clients_each_get_their_own_answer() {
    // Two client connections, each with many calls in flight on one upstream connection;
    // the upstream answers them all together, so one read of the proxy's carries answers
    // for both clients. Each answer must be its own request's (the upstream echoes the
    // path), never the other client's, and each stream must end whole.
    const PER_CLIENT: usize = 30;
    let up = H2Upstream::start(Script::EchoWhenAllIn(2 * PER_CLIENT));
    let proxy = proxy_to(up.addr, &[]);
    let answers = runtime().block_on(async {
        let mut calls = Vec::new();
        for c in 0..2 {
            let client = connect(h2c_addr(&proxy)).await;
            for i in 0..PER_CLIENT {
                let client = client.clone();
                calls.push(tokio::spawn(async move {
                    let path = format!("/client/{c}/call/{i}");
                    let a = tokio::time::timeout(WAIT, call(&client, "GET", &path, &[], b""))
                        .await
                        .unwrap_or_else(|_| panic!("{path}: no answer"));
                    (path, a)
                }));
            }
        }
        let mut answers = Vec::new();
        for c in calls {
            answers.push(c.await.unwrap());
        }
        answers
    });
    for (path, a) in &answers {
        assert_eq!(a.status, 200, "{path}: {a:?}");
        assert_eq!(
            String::from_utf8_lossy(&a.body),
            *path,
            "each call gets its own answer"
        );
        assert_eq!(a.trailers.as_ref().expect("trailers")["x-end"], "yes");
    }
    assert_eq!(up.accepted(), 1, "all on one upstream connection");
}

#[test]
fn http11_clients_waiting_together_each_get_their_own_answer() {
    // As above for HTTP/1.1 clients: their answers come from one upstream read too (the
    // length is given, so each answer is framed by Content-Length).
    const CLIENTS: usize = 6;
    let up = H2Upstream::start(Script::EchoWhenAllIn(CLIENTS));
    let proxy = proxy_to(up.addr, &[]);
    let mut clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let mut c = common::Client::connect(proxy.addr);
            c.send(format!("GET /client/{i} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
            c
        })
        .collect();
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(r.status, 200, "client {i}");
        assert_eq!(
            r.text(),
            format!("/client/{i}"),
            "each client gets its own answer"
        );
    }
}

#[test]
fn a_large_body_goes_up_and_comes_back_whole_both_ways() {
    // max_body_bytes bounds a proxied body too, and the demo's echo reads it whole.
    let up = serve(&["--h2c-port", "0", "--max-body-bytes", "4MiB"]);
    let proxy = proxy_to(h2c_addr(&up), &["--max-body-bytes", "4MiB"]);
    // Past every window on both hops (STREAM_WINDOW is 1 MiB, the server's 64 KiB at first).
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let a = runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        call(&client, "POST", "/", &[], &body).await
    });
    assert_eq!(a.status, 200);
    assert!(
        a.body == body,
        "the demo's echo came back whole ({} bytes)",
        a.body.len()
    );
}

#[test]
fn a_client_resetting_its_stream_cancels_the_upstream_stream() {
    let up = H2Upstream::start(Script::HeadThenReadBody);
    let proxy = proxy_to(up.addr, &[]);
    runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("POST")
            .uri("http://proxied/upload")
            .body(())
            .unwrap();
        let (answer, mut send) = client.send_request(req, false).unwrap();
        send.send_data(Bytes::from_static(b"a first piece"), false)
            .unwrap();
        let resp = answer.await.unwrap();
        assert_eq!(resp.status(), 200, "the upstream's head came through");
        send.send_reset(h2::Reason::CANCEL);
        // The upstream hears it as a reset of its stream, not as a body that ended.
        let ended = tokio::task::spawn_blocking(move || up.bodies.recv_timeout(WAIT))
            .await
            .unwrap()
            .expect("the upstream's stream ended");
        assert_eq!(ended, Err(Some(h2::Reason::CANCEL)));
    });
}

#[test]
fn an_upstream_that_dies_before_answering_is_502_and_the_client_goes_on() {
    let up = H2Upstream::start(Script::Die);
    let proxy = proxy_to(up.addr, &[]);
    runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let a = call(&client, "GET", "/x", &[], b"").await;
        assert_eq!(a.status, 502, "{a:?}");
        // The same client connection goes on (and the next try dies the same way).
        let a = call(&client, "POST", "/y", &[], b"body").await;
        assert_eq!(a.status, 502, "{a:?}");
    });
}

#[test]
fn an_upstream_nobody_listens_on_is_502() {
    let port = common::free_port("127.0.0.1");
    let proxy = proxy_to(format!("127.0.0.1:{port}").parse().unwrap(), &[]);
    let a = runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        call(&client, "GET", "/", &[], b"").await
    });
    assert_eq!(a.status, 502, "{a:?}");
}

#[test]
fn an_http11_client_gets_an_h2c_upstreams_answer() {
    let up = demo_upstream();
    let proxy = proxy_to(h2c_addr(&up), &[]);
    let mut c = common::Client::connect(proxy.addr);
    let r = c.get("/plaintext");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.header("via"), Some("2 linerate"));
}

/// RFC 9110 §15.2: an h2c upstream's 103 Early Hints reaches the client ahead of the final
/// answer.
#[test]
fn an_h2c_upstreams_early_hints_reach_the_client_before_its_answer() {
    let up = H2Upstream::start(Script::EarlyHints);
    let proxy = proxy_to(up.addr, &[]);
    let mut c = common::Client::connect(proxy.addr);
    let early = c.get("/x");
    assert_eq!(early.status, 103);
    assert_eq!(early.header("link"), Some("</a.css>; rel=preload"));
    let r = c.read_response();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
}

#[test]
fn a_configured_h2c_upstream_silent_past_its_timeout_is_504() {
    let up = H2Upstream::start(Script::Silent);
    let file = std::env::temp_dir().join(format!("linerate-proxy-h2-{}.toml", std::process::id()));
    std::fs::write(
        &file,
        format!(
            r#"
[[listen]]
addr = "127.0.0.1:0"
[[upstream]]
name = "grpc"
servers = ["{}"]
protocol = "h2c"
timeout = "1s"
tries = 1
[[site]]
default = true
app = "none"
[[site.proxy]]
prefix = "/"
upstream = "grpc"
"#,
            up.addr
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    let mut c = common::Client::connect(proxy.addr);
    let r = c.get("/slow");
    assert_eq!(r.status, 504);
    assert_eq!(
        up.accepted(),
        1,
        "the request reached the upstream over HTTP/2"
    );
}

#[test]
fn an_upstream_answering_before_the_body_ends_gets_its_stream_cancelled() {
    // RFC 9113 §8.1: the answer is whole while the client still sends; the proxy relays it
    // and gives up the upstream stream, which would otherwise stay open (half-closed)
    // against the server's concurrent streams for as long as the client sends.
    let up = H2Upstream::start(Script::AnswerThenReadBody);
    let proxy = proxy_to(up.addr, &[]);
    runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("POST")
            .uri("http://proxied/early")
            .body(())
            .unwrap();
        let (answer, mut send) = client.send_request(req, false).unwrap();
        send.send_data(Bytes::from_static(b"part of a body"), false)
            .unwrap();
        let a = read_answer(answer.await.unwrap()).await;
        assert_eq!((a.status, &a.body[..]), (200, &b"ok"[..]));
        assert_eq!(a.trailers.expect("trailers")["x-end"], "yes");
        let ended = tokio::task::spawn_blocking(move || up.bodies.recv_timeout(WAIT))
            .await
            .unwrap()
            .expect("the upstream's stream ended");
        assert_eq!(ended, Err(Some(h2::Reason::CANCEL)));
        drop(send);
    });
}

#[test]
fn a_client_that_does_not_read_holds_its_upstream_stream_to_a_window() {
    const TOTAL: usize = 8 << 20;
    let up = H2Upstream::start(Script::Stream(TOTAL));
    let proxy = proxy_to(up.addr, &[]);
    runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("GET")
            .uri("http://proxied/big")
            .body(())
            .unwrap();
        let (answer, _send) = client.send_request(req, true).unwrap();
        let resp = answer.await.unwrap();
        assert_eq!(resp.status(), 200);
        // Nothing is read: the upstream is held once the windows on the way are full. Wait
        // until its count stops moving (polled, bounded), then look at it.
        let mut last = usize::MAX;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = *up.sent.lock().unwrap();
            if now == last {
                break;
            }
            last = now;
        }
        // The proxy's stream window (1 MiB), the client's answer room (64 KiB) and the
        // client's own window (64 KiB): the rest stays upstream.
        assert!(
            last < 2 << 20,
            "a client reading nothing let the upstream send {last} bytes"
        );
        // Reading it all moves it all.
        let a = read_answer(resp).await;
        let want: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        assert!(a.body == want, "{} bytes came", a.body.len());
    });
}

#[test]
fn proxy_urls_other_than_http_h2c_and_unix_are_refused_in_one_line() {
    for (url, says) in [
        (
            "https://127.0.0.1:1",
            "over TLS upstreams speak HTTP/2 (h2://HOST:PORT)",
        ),
        (
            "grpc://127.0.0.1:1",
            "expected http://HOST:PORT, h2c://HOST:PORT, h2://HOST:PORT or unix:/PATH",
        ),
        ("h2c://127.0.0.1", "the upstream needs a port"),
    ] {
        let arg = format!("/={url}");
        let (code, err) = common::bin::run_err(&["serve", "--proxy", &arg]);
        assert_eq!(code, 2, "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_client_resetting_a_call_that_waits_for_its_answer_cancels_the_upstream_stream() {
    // The request went up whole; the upstream is slow to answer. The client's RST_STREAM
    // (a cancelled gRPC call) reaches the upstream as one: it stops working on it.
    let up = H2Upstream::start(Script::WatchReset);
    let proxy = proxy_to(up.addr, &[]);
    runtime().block_on(async {
        let client = connect(h2c_addr(&proxy)).await;
        let mut client = client.ready().await.unwrap();
        let req = http::Request::builder()
            .method("GET")
            .uri("http://proxied/slow")
            .body(())
            .unwrap();
        let (_answer, mut send) = client.send_request(req, true).unwrap();
        let bodies = up.bodies;
        let (got, bodies) =
            tokio::task::spawn_blocking(move || (bodies.recv_timeout(WAIT), bodies))
                .await
                .unwrap();
        assert_eq!(got, Ok(Ok(0)), "the request reached the upstream");
        send.send_reset(h2::Reason::CANCEL);
        let ended = tokio::task::spawn_blocking(move || bodies.recv_timeout(WAIT))
            .await
            .unwrap()
            .expect("the upstream's stream was reset");
        assert_eq!(ended, Err(Some(h2::Reason::CANCEL)));
    });
}

#[test]
fn an_http11_clients_post_with_its_body_in_hand_reaches_an_h2c_upstream_whole() {
    // A body that came whole with the head (a small HTTP/1.1 POST) is no pipe: it must still
    // be sent, with END_STREAM, or the upstream waits for it and the client for the answer.
    let up = demo_upstream();
    let proxy = proxy_to(h2c_addr(&up), &[]);
    let mut c = common::Client::connect(proxy.addr);
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.read_response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, b"hello world", "the demo echoes the body");
}

// Active health checks: gRPC's health service.

/// A Check call as a test upstream saw it: its path, `content-type`, `te` and body.
type SeenCheck = (String, String, String, Vec<u8>);

/// A test HTTP/2 upstream with a health service: `POST /grpc.health.v1.Health/Check`
/// answers `grpc-status: 0` with SERVING or NOT_SERVING as `serving` says; any other
/// request is `200` with its name as the body.
struct HealthUpstream {
    addr: SocketAddr,
    serving: Arc<std::sync::atomic::AtomicBool>,
    checks: Arc<Mutex<Vec<SeenCheck>>>,
}

impl HealthUpstream {
    fn start(name: &'static str, serving: bool) -> HealthUpstream {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = Arc::new(AtomicBool::new(serving));
        let checks = Arc::new(Mutex::new(Vec::new()));
        let (flag, seen) = (serving.clone(), checks.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                while let Ok((tcp, _)) = listener.accept().await {
                    let (flag, seen) = (flag.clone(), seen.clone());
                    tokio::spawn(async move {
                        let Ok(mut conn) = h2::server::handshake(tcp).await else {
                            return;
                        };
                        while let Some(Ok((req, mut respond))) = conn.accept().await {
                            let (flag, seen) = (flag.clone(), seen.clone());
                            tokio::spawn(async move {
                                let path = req.uri().path().to_string();
                                let field = |n: &str| {
                                    req.headers()
                                        .get(n)
                                        .map_or("", |v| v.to_str().unwrap())
                                        .to_string()
                                };
                                let (ct, te) = (field("content-type"), field("te"));
                                let mut body = Vec::new();
                                let mut recv = req.into_body();
                                while let Some(Ok(piece)) = recv.data().await {
                                    let _ = recv.flow_control().release_capacity(piece.len());
                                    body.extend_from_slice(&piece);
                                }
                                if path != "/grpc.health.v1.Health/Check" {
                                    let resp = http::Response::builder()
                                        .status(200)
                                        .header("content-length", name.len())
                                        .body(())
                                        .unwrap();
                                    let mut send = respond.send_response(resp, false).unwrap();
                                    send.send_data(Bytes::from_static(name.as_bytes()), true)
                                        .unwrap();
                                    return;
                                }
                                seen.lock().unwrap().push((path, ct, te, body));
                                // HealthCheckResponse { status = 1 (SERVING) or 2 (NOT_SERVING) }
                                let status = if flag.load(Ordering::SeqCst) { 1 } else { 2 };
                                let resp = http::Response::builder()
                                    .status(200)
                                    .header("content-type", "application/grpc")
                                    .body(())
                                    .unwrap();
                                let mut send = respond.send_response(resp, false).unwrap();
                                send.send_data(
                                    Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]),
                                    false,
                                )
                                .unwrap();
                                let mut trailers = http::HeaderMap::new();
                                trailers.insert("grpc-status", "0".parse().unwrap());
                                send.send_trailers(trailers).unwrap();
                            });
                        }
                    });
                }
            });
        });
        HealthUpstream {
            addr,
            serving,
            checks,
        }
    }

    fn set_serving(&self, serving: bool) {
        self.serving
            .store(serving, std::sync::atomic::Ordering::SeqCst);
    }

    fn checks(&self) -> Vec<SeenCheck> {
        self.checks.lock().unwrap().clone()
    }
}

/// A proxy (HTTP/1.1 clients) to an h2c upstream of `servers`, with `health`'s check.
fn proxy_checked(servers: &[SocketAddr], health: &str) -> Served {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{s}\"")).collect();
    let file = std::env::temp_dir().join(format!(
        "linerate-proxy-h2-health-{}-{}.toml",
        std::process::id(),
        servers[0].port()
    ));
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"grpc\"\nservers = [{}]\n\
             protocol = \"h2c\"\nmax_fails = 0\n{health}\n[[site]]\ndefault = true\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"grpc\"\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    proxy
}

#[test]
fn a_grpc_health_check_takes_a_not_serving_server_out_and_brings_it_back() {
    let a = HealthUpstream::start("a", true);
    let b = HealthUpstream::start("b", true);
    let proxy = proxy_checked(
        &[a.addr, b.addr],
        "health_check = { grpc_service = \"app\", interval = \"50ms\", timeout = \"1s\", passes = 2, fails = 1 }",
    );
    let mut c = common::Client::connect(proxy.addr);
    let answers = |c: &mut common::Client| (0..6).map(|_| c.get("/").text()).collect::<Vec<_>>();
    common::eventually("the check calls a", || !a.checks().is_empty());
    assert!(answers(&mut c).contains(&"a".to_string()), "a serves");

    a.set_serving(false);
    common::eventually("a is taken out", || {
        answers(&mut c).iter().all(|s| s == "b")
    });
    let checks_then = a.checks().len();
    assert!(
        answers(&mut c).iter().all(|s| s == "b"),
        "a stays out while it is NOT_SERVING"
    );

    a.set_serving(true);
    common::eventually("a is back after two passes", || {
        answers(&mut c).contains(&"a".to_string())
    });
    assert!(a.checks().len() >= checks_then + 2);
    // Every check is gRPC's Check call naming the service, framed as one message.
    for (path, ct, te, body) in a.checks().into_iter().chain(b.checks()) {
        assert_eq!(path, "/grpc.health.v1.Health/Check");
        assert_eq!((ct.as_str(), te.as_str()), ("application/grpc", "trailers"));
        assert_eq!(body, [0, 0, 0, 0, 5, 0x0a, 3, b'a', b'p', b'p']);
    }
}

#[test]
fn linerates_own_health_service_passes_the_check_and_a_not_serving_server_does_not() {
    // linerate's gRPC server (the demo's grpc.health.v1, "" SERVING) beside an upstream
    // that answers NOT_SERVING: only the demo stays in (were both out, both would be tried).
    let demo = demo_upstream();
    let b = HealthUpstream::start("b", false);
    let proxy = proxy_checked(
        &[h2c_addr(&demo), b.addr],
        "health_check = { interval = \"50ms\", timeout = \"1s\" }",
    );
    let mut c = common::Client::connect(proxy.addr);
    common::eventually("the check calls b", || !b.checks().is_empty());
    common::eventually("b is out and the demo in", || {
        (0..10).all(|_| c.get("/baseline11?a=1&b=2").text() == "3")
    });
    // The empty service name: the whole server (an empty HealthCheckRequest).
    assert_eq!(b.checks()[0].3, [0, 0, 0, 0, 0]);
}

#[test]
fn a_server_that_never_answers_its_check_or_refuses_its_connection_is_taken_out() {
    // One request in two would go to each failing server (tries = 1: no second server, and
    // passive health is off), so only the active check can leave every answer b's.
    let silent = H2Upstream::start(Script::Silent);
    let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused_addr = refused.local_addr().unwrap();
    drop(refused);
    let b = HealthUpstream::start("b", true);
    let proxy = proxy_checked(
        &[silent.addr, refused_addr, b.addr],
        "tries = 1\ntimeout = \"1s\"\nhealth_check = { interval = \"50ms\", timeout = \"200ms\" }",
    );
    let mut c = common::Client::connect(proxy.addr);
    common::eventually("the check calls the silent server", || {
        silent.accepted() > 0
    });
    common::eventually("both failing servers are out", || {
        (0..9).all(|_| c.get("/").text() == "b")
    });
}

/// HTTP/2 frames passing one way on a socket, told by type (RFC 9113 §4.1's frame header;
/// the client's 24-byte preface skipped).
#[derive(Default)]
struct FrameCount {
    skip: usize,
    head: Vec<u8>,
    body_left: usize,
}

impl FrameCount {
    /// Counts the frames that start in `b` into `by_kind`.
    fn feed(&mut self, mut b: &[u8], by_kind: &mut [usize; 10]) {
        while !b.is_empty() {
            let n = if self.skip > 0 {
                let n = self.skip.min(b.len());
                self.skip -= n;
                n
            } else if self.body_left > 0 {
                let n = self.body_left.min(b.len());
                self.body_left -= n;
                n
            } else {
                let n = (9 - self.head.len()).min(b.len());
                self.head.extend_from_slice(&b[..n]);
                if self.head.len() == 9 {
                    let h = std::mem::take(&mut self.head);
                    self.body_left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    if let Some(k) = by_kind.get_mut(usize::from(h[3])) {
                        *k += 1;
                    }
                }
                n
            };
            b = &b[n..];
        }
    }
}

/// The frames a tapped upstream's connections carried, all together, by type: the proxy's
/// and the upstream's.
#[derive(Default)]
struct Seen {
    from_proxy: [usize; 10],
    to_proxy: [usize; 10],
}

const HEADERS: usize = 0x1;
const RST_STREAM: usize = 0x3;
const GOAWAY: usize = 0x7;

/// A TCP stream whose frames both ways are counted in `Seen`.
struct Tap {
    tcp: tokio::net::TcpStream,
    from_proxy: FrameCount,
    to_proxy: FrameCount,
    seen: Arc<Mutex<Seen>>,
}

impl tokio::io::AsyncRead for Tap {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let me = &mut *self;
        let r = std::pin::Pin::new(&mut me.tcp).poll_read(cx, buf);
        let mut seen = me.seen.lock().unwrap();
        me.from_proxy
            .feed(&buf.filled()[before..], &mut seen.from_proxy);
        r
    }
}

impl tokio::io::AsyncWrite for Tap {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let me = &mut *self;
        let r = std::pin::Pin::new(&mut me.tcp).poll_write(cx, data);
        if let std::task::Poll::Ready(Ok(n)) = r {
            let mut seen = me.seen.lock().unwrap();
            me.to_proxy.feed(&data[..n], &mut seen.to_proxy);
        }
        r
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A hyperium `h2` upstream with its default settings (`max_pending_accept_reset_streams`
/// 20: more RST_STREAMs than that on streams it has not accepted yet is GOAWAY
/// ENHANCE_YOUR_CALM "too_many_resets", its rapid-reset guard) whose application takes no
/// stream while its gate is shut: the connection is still read (`poll_closed`), so streams
/// pile up pending accept. `/hold` is answered `200 ok` once `release` is set; any other
/// path gets a head at once, then waits for its reset and reports it on `ends`.
struct GatedUpstream {
    addr: SocketAddr,
    accepted: Arc<Mutex<usize>>,
    seen: Arc<Mutex<Seen>>,
    gate: Arc<Gate>,
    ends: mpsc::Receiver<(String, Option<h2::Reason>)>,
}

/// The upstream application's accept gate, and the held `/hold` answer's release.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    release: Mutex<bool>,
    wakers: Mutex<Vec<std::task::Waker>>,
}

impl Gate {
    fn set(&self, which: &Mutex<bool>) {
        *which.lock().unwrap() = true;
        for w in self.wakers.lock().unwrap().drain(..) {
            w.wake();
        }
    }

    /// Ready once `which` is set.
    fn poll(&self, which: &Mutex<bool>, cx: &mut std::task::Context<'_>) -> bool {
        self.wakers.lock().unwrap().push(cx.waker().clone());
        *which.lock().unwrap()
    }
}

impl GatedUpstream {
    fn start() -> GatedUpstream {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let gate = Arc::new(Gate::default());
        let (tx, ends) = mpsc::channel();
        let (counted, seen_here, gate_here) = (accepted.clone(), seen.clone(), gate.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    *counted.lock().unwrap() += 1;
                    let tap = Tap {
                        tcp,
                        from_proxy: FrameCount {
                            skip: 24,
                            ..FrameCount::default()
                        },
                        to_proxy: FrameCount::default(),
                        seen: seen_here.clone(),
                    };
                    let (gate, tx) = (gate_here.clone(), tx.clone());
                    tokio::spawn(async move {
                        let Ok(mut conn) = h2::server::handshake(tap).await else {
                            return;
                        };
                        loop {
                            let next = std::future::poll_fn(|cx| {
                                if gate.poll(&gate.open, cx) {
                                    return conn.poll_accept(cx);
                                }
                                // Read on without taking a stream.
                                match conn.poll_closed(cx) {
                                    std::task::Poll::Ready(_) => std::task::Poll::Ready(None),
                                    std::task::Poll::Pending => std::task::Poll::Pending,
                                }
                            })
                            .await;
                            let Some(Ok((req, respond))) = next else {
                                return;
                            };
                            let (gate, tx) = (gate.clone(), tx.clone());
                            tokio::spawn(gated_answer(req, respond, gate, tx));
                        }
                    });
                }
            });
        });
        GatedUpstream {
            addr,
            accepted,
            seen,
            gate,
            ends,
        }
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }

    /// Frames of `kind` the proxy sent (`from_proxy`) or the upstream sent back.
    fn frames(&self, kind: usize, from_proxy: bool) -> usize {
        let seen = self.seen.lock().unwrap();
        if from_proxy {
            seen.from_proxy[kind]
        } else {
            seen.to_proxy[kind]
        }
    }

    /// Waits (bounded: 2,000 looks) until the proxy sent at least `n` frames of `kind`.
    async fn wait_for(&self, kind: usize, n: usize) {
        let mut tries = 0;
        while self.frames(kind, true) < n {
            tries += 1;
            assert!(
                tries < 2_000,
                "the proxy sent {} frames of type {kind}, not {n}",
                self.frames(kind, true)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn gated_answer(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    gate: Arc<Gate>,
    tx: mpsc::Sender<(String, Option<h2::Reason>)>,
) {
    let path = req.uri().path().to_string();
    if path == "/hold" {
        std::future::poll_fn(|cx| {
            if gate.poll(&gate.release, cx) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        })
        .await;
        return answer_ok(&mut respond);
    }
    if path.starts_with("/b") {
        return answer_ok(&mut respond);
    }
    // One reset while it waited to be accepted says so at once; another gets a head, then
    // waits for its reset.
    let early = std::future::poll_fn(|cx| match respond.poll_reset(cx) {
        std::task::Poll::Ready(Ok(reason)) => std::task::Poll::Ready(Some(reason)),
        _ => std::task::Poll::Ready(None),
    })
    .await;
    let resp = http::Response::builder().status(200).body(()).unwrap();
    let reason = match (early, respond.send_response(resp, false)) {
        (Some(reason), _) => Some(reason),
        (None, Err(e)) => e.reason(),
        (None, Ok(mut send)) => match std::future::poll_fn(|cx| send.poll_reset(cx)).await {
            Ok(reason) => Some(reason),
            Err(e) => e.reason(),
        },
    };
    let _ = tx.send((path, reason));
}

#[test]
fn a_client_leaving_with_many_calls_in_flight_costs_no_other_client_its_calls() {
    // The regression: a client gone with 40 calls the upstream has not accepted yet made the
    // proxy send 40 RST_STREAM(CANCEL) at once; hyperium h2 (tonic's server) answers more
    // than 20 such resets with GOAWAY ENHANCE_YOUR_CALM "too_many_resets", and every other
    // client's call on that upstream connection failed. The proxy now resets a few and
    // abandons the rest until the upstream has accepted them.
    const LEAVING: usize = 40;
    let up = GatedUpstream::start();
    let proxy = proxy_to(up.addr, &[]);
    let addr = h2c_addr(&proxy);
    runtime().block_on(async {
        // Client B's first call: accepted, its answer held through the burst.
        let b = connect(addr).await;
        up.gate.set(&up.gate.open);
        let held = {
            let b = b.clone();
            tokio::spawn(async move { call(&b, "GET", "/hold", &[], b"").await })
        };
        up.wait_for(HEADERS, 1).await;
        *up.gate.open.lock().unwrap() = false;
        // Client A: LEAVING calls that sit pending accept upstream, then it is gone.
        let a = connect(addr).await;
        let mut answers = Vec::new();
        for i in 0..LEAVING {
            let mut a = a.clone().ready().await.unwrap();
            let req = http::Request::builder()
                .uri(format!("http://proxied/a/{i}"))
                .body(())
                .unwrap();
            answers.push(a.send_request(req, true).unwrap());
        }
        up.wait_for(HEADERS, 1 + LEAVING).await;
        drop(answers);
        drop(a);
        up.wait_for(RST_STREAM, 1).await;
        // B's next call goes up behind the resets: once it is in, they all were read.
        let second = {
            let b = b.clone();
            tokio::spawn(async move { call(&b, "GET", "/b/1", &[], b"").await })
        };
        up.wait_for(HEADERS, 2 + LEAVING).await;
        up.gate.set(&up.gate.release);
        up.gate.set(&up.gate.open);
        let held = held.await.unwrap();
        assert_eq!((held.status, &held.body[..]), (200, &b"ok"[..]), "{held:?}");
        let second = second.await.unwrap();
        assert_eq!(second.status, 200, "{second:?}");
        for i in 2..12 {
            let a = call(&b, "GET", &format!("/b/{i}"), &[], b"").await;
            assert_eq!(
                (a.status, &a.body[..]),
                (200, &b"ok"[..]),
                "call {i}: {a:?}"
            );
        }
    });
    assert_eq!(up.frames(GOAWAY, false), 0, "the upstream never went away");
    assert_eq!(up.accepted(), 1, "one upstream connection throughout");
    // Every call of the client that left was cancelled upstream, none left open.
    let mut cancelled = 0;
    while cancelled < LEAVING {
        let (path, reason) = up
            .ends
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{cancelled} of the {LEAVING} calls cancelled"));
        assert!(path.starts_with("/a/"), "{path}");
        assert_eq!(reason, Some(h2::Reason::CANCEL), "{path}");
        cancelled += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Cancelled streams and the upstream: a client that opens streams and has
// them reset, by itself (rapid reset) or by the server for a frame it sent (MadeYouReset),
// in the read that brought them, costs the upstream nothing. Raw frames on a socket, so each
// stream's HEADERS and the frame that ends it arrive in one write.

/// An HTTP/1.1 upstream that counts the request heads it reads and answers each `200 ok`,
/// keeping its connections.
struct CountingUpstream {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl CountingUpstream {
    fn start() -> CountingUpstream {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut w = s.try_clone().unwrap();
                    let mut r = BufReader::new(s);
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut field = String::new();
                        while r.read_line(&mut field).unwrap_or(0) > 2 {
                            field.clear();
                        }
                        seen.lock().unwrap().push(line.trim_end().to_string());
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
                        if w.write_all(ok).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        CountingUpstream { addr, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// An HTTP/2 frame.
fn raw_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut b = vec![len[1], len[2], len[3], kind, flags];
    b.extend_from_slice(&stream.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

/// HEADERS (END_HEADERS, and END_STREAM) for `GET path`: literals without indexing.
fn raw_get(stream: u32, path: &str) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":authority", "proxied"),
        (":path", path),
    ] {
        block.push(0);
        block.push(n.len() as u8);
        block.extend_from_slice(n.as_bytes());
        block.push(v.len() as u8);
        block.extend_from_slice(v.as_bytes());
    }
    raw_frame(0x1, 0x4 | 0x1, stream, &block)
}

/// A frame the server sent: (type, flags, stream, payload).
type RawFrame = (u8, u8, u32, Vec<u8>);

/// Reads the server's frames from `s` until `last` holds for one (it is included) or the
/// connection ends.
fn raw_frames_until(
    s: &mut std::net::TcpStream,
    last: impl Fn(&RawFrame) -> bool,
) -> Vec<RawFrame> {
    use std::io::Read;
    s.set_read_timeout(Some(WAIT)).unwrap();
    let (mut buf, mut frames) = (Vec::new(), Vec::new());
    loop {
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let id = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let f = (buf[3], buf[4], id, buf[9..9 + len].to_vec());
            buf.drain(..9 + len);
            let done = last(&f);
            frames.push(f);
            if done {
                return frames;
            }
        }
        let mut chunk = [0u8; 16_384];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return frames,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The types of the frames on `stream`.
fn kinds_on(frames: &[RawFrame], stream: u32) -> Vec<u8> {
    frames
        .iter()
        .filter(|f| f.2 == stream)
        .map(|f| f.0)
        .collect()
}

/// The error code of the GOAWAY among `frames`, if one came.
fn goaway_code(frames: &[RawFrame]) -> Option<u32> {
    let f = frames.iter().find(|f| f.0 == 0x7)?;
    Some(u32::from_be_bytes([f.3[4], f.3[5], f.3[6], f.3[7]]))
}

/// A proxy (no app, an h2c listener) to a [`CountingUpstream`], and a raw connection to its
/// h2c listener.
fn proxy_to_counting() -> (CountingUpstream, Served, std::net::TcpStream) {
    let up = CountingUpstream::start();
    let target = format!("/=http://{}", up.addr);
    let proxy = serve(&["--app", "none", "--h2c-port", "0", "--proxy", &target]);
    let s = std::net::TcpStream::connect(h2c_addr(&proxy)).unwrap();
    (up, proxy, s)
}

/// Streams cancelled in the read that opened them, by the client (RST_STREAM) or by the
/// server for the client's fault (DATA on a half-closed stream: STREAM_CLOSED; a WINDOW_UPDATE
/// past 2^31-1: FLOW_CONTROL_ERROR; a PRIORITY on itself), never reach the HTTP/1.1 upstream:
/// only the last, normal request does.
#[test]
fn streams_cancelled_in_the_read_that_opened_them_never_reach_the_upstream() {
    use std::io::Write;
    let (up, _proxy, mut s) = proxy_to_counting();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(raw_frame(0x4, 0, 0, &[]));
    type Poison = fn(u32) -> Vec<u8>;
    let poisons: [Poison; 4] = [
        |id| raw_frame(0x3, 0, id, &8u32.to_be_bytes()),
        |id| raw_frame(0x0, 0, id, b"x"),
        |id| raw_frame(0x8, 0, id, &0x7fff_ffffu32.to_be_bytes()),
        |id| {
            let mut p = id.to_be_bytes().to_vec();
            p.push(16);
            raw_frame(0x2, 0, id, &p)
        },
    ];
    let mut id = 1;
    for poison in poisons {
        for _ in 0..20 {
            out.extend(raw_get(id, "/cancelled"));
            out.extend(poison(id));
            id += 2;
        }
    }
    s.write_all(&out).unwrap();
    s.write_all(&raw_get(id, "/normal")).unwrap();
    let frames = raw_frames_until(&mut s, |f| f.2 == id && f.1 & 0x1 != 0);
    let kinds = kinds_on(&frames, id);
    assert!(
        kinds[0] == 0x1 && kinds[1..].iter().all(|&k| k == 0x0),
        "the normal request's answer, HEADERS then DATA: {kinds:?}"
    );
    assert_eq!(goaway_code(&frames), None, "80 resets are within the limit");
    assert_eq!(up.heads(), ["GET /normal HTTP/1.1"]);
}

/// MadeYouReset (CVE-2025-8671) through the proxy: past MAX_RESETS_PER_SEC resets the server
/// sent for the client's frames, the connection ends with GOAWAY(ENHANCE_YOUR_CALM), and none
/// of the reset requests reached the upstream.
#[test]
fn server_resets_past_the_limit_end_the_connection_and_nothing_went_up() {
    use std::io::Write;
    let (up, _proxy, mut s) = proxy_to_counting();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(raw_frame(0x4, 0, 0, &[]));
    let limit = linerate_server::http2::MAX_RESETS_PER_SEC;
    for i in 0..=limit {
        let id = 2 * i + 1;
        out.extend(raw_get(id, "/reset"));
        out.extend(raw_frame(0x0, 0, id, b"x"));
    }
    s.write_all(&out).unwrap();
    let frames = raw_frames_until(&mut s, |f| f.0 == 0x7);
    let resets = frames.iter().filter(|f| f.0 == 0x3).count();
    assert_eq!(
        resets,
        limit as usize + 1,
        "one reset per stream up to the limit's"
    );
    assert_eq!(goaway_code(&frames), Some(0xb), "GOAWAY(ENHANCE_YOUR_CALM)");
    assert!(up.heads().is_empty(), "{:?}", up.heads());
}
