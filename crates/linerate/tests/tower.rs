//! An axum app (axum 0.8 from crates.io, with tower-http's CORS, compression and trace
//! layers) served by the engine through `linerate_server::tower`, on a real server: path
//! parameters and JSON both ways; a request body the service reads while the client is still
//! sending it; an answer whose first piece reaches the client before the service made the
//! last; a large upload counted whole through the body's backpressure; a CORS preflight, a
//! gzip answer decoded here, the trace layer's hooks called; the prefix a mount takes off and
//! the routes beside it; HEAD; hop-by-hop fields dropped; `poll_ready` awaited; a failing
//! service (500) and a body failing mid-answer (cut off); a body over the limit (413). Over
//! HTTP/1.1 (raw socket), HTTP/2 (curl, h2c and TLS) and HTTP/3 (the load generator's client:
//! GETs, a JSON POST and an upload, each answer's status and length).
//!
//! The handlers' futures run on a tokio multi-thread runtime, through `Spawn`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body as AxumBody, Bytes};
use axum::extract::{Extension, Path, State};
use axum::http::{self, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router as Axum};
use common::curl::{Got, curl_url};
use common::{READ_TIMEOUT, Running, config};
use futures_util::StreamExt;
use linerate_server::tower::OriginalUri;
use linerate_server::{Config, Response, Router, Server, TlsConfig};
use rustls::pki_types::CertificateDer;
use tower_http::compression::CompressionLayer;
use tower_http::cors::{Any, CorsLayer};
use tower_http::trace::TraceLayer;

/// What the tests and the app's handlers tell each other.
#[derive(Default)]
struct Probe {
    /// The upload handler saw its first piece.
    first_piece: Mutex<Option<mpsc::Sender<usize>>>,
    /// The ticking answer may make its second piece.
    tick: tokio::sync::Notify,
    /// Upload bodies that ended cut off.
    cut: AtomicUsize,
    /// The trace layer's span and response hooks ran.
    spans: AtomicUsize,
    responses: AtomicUsize,
}

const BIG: usize = 20_000;

fn big_text() -> String {
    (0..BIG).map(|i| (b'a' + (i % 26) as u8) as char).collect()
}

/// The app under test: an ordinary axum Router with tower-http layers.
fn app(probe: Arc<Probe>) -> Axum {
    let (spans, responses) = (probe.clone(), probe.clone());
    Axum::new()
        .route("/users/{id}", get(user).post(rename))
        .route("/upload", post(upload))
        .route("/trailers", post(trailers))
        .route("/refuse", post(|| async { StatusCode::UNAUTHORIZED }))
        .route("/ticks", get(ticks))
        .route("/big", get(|| async { big_text() }))
        .route("/large", get(|| async { large() }))
        .route(
            "/lying",
            get(|| async { AxumBody::new(Lying(vec![Bytes::from(vec![1u8; 70_000])])) }),
        )
        .route("/whoami", get(whoami))
        .route("/hop", get(hop))
        .route("/fail-mid", get(fail_mid))
        .route("/fail-first", get(fail_first))
        .route(
            "/panic",
            get(|| async {
                if true {
                    panic!("handler panics");
                }
                "never"
            }),
        )
        .with_state(probe)
        .layer(CompressionLayer::new())
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods([http::Method::GET, http::Method::POST]),
        )
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(move |_: &http::Request<_>| {
                    spans.spans.fetch_add(1, Ordering::SeqCst);
                    tracing::Span::none()
                })
                .on_response(
                    move |_: &http::Response<_>, _: Duration, _: &tracing::Span| {
                        responses.responses.fetch_add(1, Ordering::SeqCst);
                    },
                ),
        )
}

const LARGE: usize = 200_000;

/// More than a body sent whole: streamed, with the size it says.
fn large() -> Vec<u8> {
    (0..LARGE).map(|i| (i % 253) as u8).collect()
}

/// A body that says it has 100,000 bytes and has fewer.
struct Lying(Vec<Bytes>);

impl http_body::Body for Lying {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.pop().map(|b| Ok(http_body::Frame::data(b))))
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(100_000)
    }
}

async fn user(Path(id): Path<u64>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "id": id, "name": format!("user {id}") }))
}

async fn rename(Path(id): Path<u64>, Json(v): Json<serde_json::Value>) -> impl IntoResponse {
    let name = v["name"].as_str().unwrap_or("").to_uppercase();
    (
        StatusCode::CREATED,
        Json(serde_json::json!({ "id": id, "name": name })),
    )
}

/// Counts the body's bytes as they arrive, telling the test when the first came; with
/// `x-expect-bytes`, a count other than that is a 400 (for clients that see only a length).
async fn upload(
    State(probe): State<Arc<Probe>>,
    headers: HeaderMap,
    body: AxumBody,
) -> (StatusCode, String) {
    let mut stream = body.into_data_stream();
    let mut n = 0;
    while let Some(piece) = stream.next().await {
        let Ok(piece) = piece else {
            probe.cut.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::BAD_REQUEST, "cut off".into());
        };
        if n == 0
            && let Some(tx) = probe.first_piece.lock().unwrap().as_ref()
        {
            let _ = tx.send(piece.len());
        }
        n += piece.len();
        // Slower than the client: the body's room fills and the connection is held.
        tokio::task::yield_now().await;
    }
    let expected = headers
        .get("x-expect-bytes")
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    match expected {
        Some(want) if want != n => (StatusCode::BAD_REQUEST, format!("{n} != {want}")),
        _ => (StatusCode::OK, n.to_string()),
    }
}

/// The body's length and its `checksum` trailer, read frame by frame.
async fn trailers(body: AxumBody) -> String {
    let mut body = std::pin::pin!(body);
    let (mut n, mut checksum) = (0, String::from("none"));
    while let Some(frame) =
        std::future::poll_fn(|cx| http_body::Body::poll_frame(body.as_mut(), cx)).await
    {
        let frame = frame.expect("a whole body");
        if let Some(t) = frame.trailers_ref() {
            checksum = t["checksum"].to_str().unwrap().to_string();
        } else if let Ok(data) = frame.into_data() {
            n += data.len();
        }
    }
    format!("n={n} checksum={checksum}")
}

/// `first` now; `second` only once the test says it has read `first`.
async fn ticks(State(probe): State<Arc<Probe>>) -> AxumBody {
    let stream = futures_util::stream::unfold(0, move |step| {
        let probe = probe.clone();
        async move {
            match step {
                0 => Some((Ok::<_, std::io::Error>(Bytes::from("first\n")), 1)),
                1 => {
                    probe.tick.notified().await;
                    Some((Ok(Bytes::from("second\n")), 2))
                }
                _ => None,
            }
        }
    });
    AxumBody::from_stream(stream)
}

async fn whoami(
    Extension(peer): Extension<SocketAddr>,
    Extension(OriginalUri(original)): Extension<OriginalUri>,
    uri: http::Uri,
    headers: HeaderMap,
) -> String {
    format!(
        "peer={} scheme={} uri={} original={} host={}",
        peer.ip(),
        uri.scheme_str().unwrap_or("-"),
        uri.path(),
        original.path(),
        headers
            .get("host")
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
    )
}

async fn hop() -> impl IntoResponse {
    (
        [
            ("connection", "x-private"),
            ("x-private", "secret"),
            ("keep-alive", "timeout=5"),
            ("x-kept", "yes"),
        ],
        "hop",
    )
}

/// A piece, then (after the head went out: the stream was not ready in between) a failure.
async fn fail_mid() -> AxumBody {
    let stream = futures_util::stream::unfold(0, |step| async move {
        match step {
            0 => Some((Ok(Bytes::from("part one\n")), 1)),
            1 => {
                tokio::task::yield_now().await;
                Some((Err(std::io::Error::other("the database went away")), 2))
            }
            _ => None,
        }
    });
    AxumBody::from_stream(stream)
}

/// Fails before anything was sent: a 500.
async fn fail_first() -> AxumBody {
    AxumBody::from_stream(futures_util::stream::iter([Err::<Bytes, _>(
        std::io::Error::other("no rows"),
    )]))
}

// ---------------------------------------------------------------------------------------------
// The server: a native route beside the app mounted at /api, HTTP/1.1, h2c and TLS (+ QUIC).

struct Srv {
    run: Running,
    h2c: SocketAddr,
    tls: SocketAddr,
    dir: PathBuf,
    anchor: CertificateDer<'static>,
    probe: Arc<Probe>,
    rt: tokio::runtime::Runtime,
}

impl Srv {
    fn stop(self) {
        self.run.stop();
        self.rt.shutdown_background();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn serve(name: &str) -> Srv {
    serve_with(name, |_| {})
}

/// [`serve`] with `tweak` applied to the config.
fn serve_with(name: &str, tweak: impl FnOnce(&mut Config)) -> Srv {
    let dir = std::env::temp_dir().join(format!("linerate-tower-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let probe = Arc::new(Probe::default());
    let handle = rt.handle().clone();
    let router = Router::new()
        .get("/native", |_| Response::text("native"))
        .service("/api", app(probe.clone()), move |f| {
            handle.spawn(f);
        });
    let cfg = Config {
        tls: Some(TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(linerate_server::config::CertPair {
                cert: dir.join("cert.pem"),
                key: dir.join("key.pem"),
            }),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: Default::default(),
        }),
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        quic: true,
        ..config()
    };
    let mut cfg = cfg;
    tweak(&mut cfg);
    let server = Server::bind(cfg, router).expect("bind");
    let h2c = server.h2c_addr().expect("h2c address");
    let tls = server.tls_addr().expect("TLS address");
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    Srv {
        run: Running {
            addr,
            handle,
            stats,
            thread: Some(thread),
        },
        h2c,
        tls,
        dir,
        anchor: ck.cert.der().clone(),
        probe,
        rt,
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 on a raw socket, chunked bodies decoded here.

struct Answer {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// The body's framing ended as it should (a Content-Length's bytes, or the last chunk).
    whole: bool,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

struct H1 {
    s: TcpStream,
    buf: Vec<u8>,
}

impl H1 {
    fn connect(addr: SocketAddr) -> H1 {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.set_nodelay(true).unwrap();
        H1 { s, buf: Vec::new() }
    }

    fn send(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Reads more; `false` at EOF (or a reset).
    fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 65536];
        match self.s.read(&mut chunk) {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
        }
    }

    fn line(&mut self) -> Option<String> {
        loop {
            if let Some(p) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(self.buf[..p].to_vec()).unwrap();
                self.buf.drain(..p + 2);
                return Some(line);
            }
            if !self.fill() {
                return None;
            }
        }
    }

    fn head(&mut self) -> (u16, Vec<(String, String)>) {
        let status = self.line().expect("a status line");
        let code = status[9..12].parse().unwrap();
        let mut fields = Vec::new();
        loop {
            let l = self.line().expect("a field line");
            if l.is_empty() {
                return (code, fields);
            }
            let (n, v) = l.split_once(':').unwrap();
            fields.push((n.to_string(), v.trim().to_string()));
        }
    }

    /// One chunk's data; `Some(empty)` for the last chunk (with the empty trailer section's
    /// CRLF), `None` if the connection ended.
    fn chunk(&mut self) -> Option<Vec<u8>> {
        let size = usize::from_str_radix(self.line()?.trim(), 16).unwrap();
        while self.buf.len() < size + 2 {
            if !self.fill() {
                return None;
            }
        }
        let data = self.buf[..size].to_vec();
        self.buf.drain(..size + 2);
        Some(data)
    }

    fn answer(&mut self, head_request: bool) -> Answer {
        let (status, fields) = self.head();
        let find = |n: &str| {
            fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        let mut whole = true;
        if head_request || status == 204 || status == 304 {
        } else if find("transfer-encoding").as_deref() == Some("chunked") {
            loop {
                match self.chunk() {
                    // The last chunk, its (empty) trailer section taken with it.
                    Some(d) if d.is_empty() => break,
                    Some(d) => body.extend_from_slice(&d),
                    None => {
                        whole = false;
                        break;
                    }
                }
            }
        } else {
            let len: usize = find("content-length").map_or(0, |v| v.parse().unwrap());
            while self.buf.len() < len {
                if !self.fill() {
                    whole = false;
                    break;
                }
            }
            let n = len.min(self.buf.len());
            body = self.buf.drain(..n).collect();
        }
        Answer {
            status,
            fields,
            body,
            whole,
        }
    }

    fn request(&mut self, method: &str, path: &str, fields: &str, body: &[u8]) -> Answer {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\n{fields}Content-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.send(&req);
        self.answer(method == "HEAD")
    }
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

#[test]
fn an_axum_app_answers_over_http1_with_params_json_cors_gzip_and_trace() {
    let srv = serve("h1");
    let mut c = H1::connect(srv.run.addr);

    let a = c.request("GET", "/api/users/7", "", b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.field("content-type"), Some("application/json"));
    assert_eq!(a.text(), r#"{"id":7,"name":"user 7"}"#);
    // A body of known size goes out whole, with its length.
    assert_eq!(a.field("content-length"), Some("24"));

    let a = c.request(
        "POST",
        "/api/users/9",
        "Content-Type: application/json\r\n",
        br#"{"name":"ada"}"#,
    );
    assert_eq!(a.status, 201);
    assert_eq!(a.text(), r#"{"id":9,"name":"ADA"}"#);

    // axum's own answers come through: a bad JSON body is its 400/422, an unknown path its 404.
    let a = c.request(
        "POST",
        "/api/users/9",
        "Content-Type: application/json\r\n",
        b"{",
    );
    assert!(a.status == 400 || a.status == 422, "{}", a.status);
    assert_eq!(c.request("GET", "/api/nope", "", b"").status, 404);

    // CORS preflight, answered by tower-http's layer (the engine's own OPTIONS stays out).
    let a = c.request(
        "OPTIONS",
        "/api/users/7",
        "Origin: http://example.com\r\nAccess-Control-Request-Method: POST\r\n",
        b"",
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.field("access-control-allow-origin"), Some("*"));
    assert!(
        a.field("access-control-allow-methods")
            .is_some_and(|m| m.contains("POST")),
        "{:?}",
        a.fields
    );

    // Compression by tower-http: gzip, decoded here to the original.
    let a = c.request("GET", "/api/big", "Accept-Encoding: gzip\r\n", b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.field("content-encoding"), Some("gzip"));
    assert!(a.whole);
    assert_eq!(gunzip(&a.body), big_text().as_bytes());
    let a = c.request("GET", "/api/big", "", b"");
    assert_eq!(a.field("content-encoding"), None);
    assert_eq!(a.body, big_text().as_bytes());

    // The trace layer's hooks ran for these requests.
    assert!(srv.probe.spans.load(Ordering::SeqCst) >= 6);
    common::eventually("the trace layer's on_response ran", || {
        srv.probe.responses.load(Ordering::SeqCst) >= 6
    });
    srv.stop();
}

#[test]
fn a_mount_takes_its_prefix_off_and_the_routes_beside_it_answer_first() {
    let srv = serve("mount");
    let mut c = H1::connect(srv.run.addr);
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    let a = c.request("GET", "/api/whoami?x=1", "", b"");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.text(),
        "peer=127.0.0.1 scheme=http uri=/whoami original=/api/whoami host=t"
    );
    // Outside the mount: the engine's 404, not the app's.
    let a = c.request("GET", "/apix/whoami", "", b"");
    assert_eq!(a.status, 404);
    // HEAD reaches the service; its length is GET's, and no body follows.
    let get = c.request("GET", "/api/users/7", "", b"");
    let head = c.request("HEAD", "/api/users/7", "", b"");
    assert_eq!(head.status, 200);
    assert_eq!(head.field("content-length"), get.field("content-length"));
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    srv.stop();
}

#[test]
fn a_chunked_bodys_trailer_fields_reach_the_service_as_its_last_frame() {
    let srv = serve("trailers");
    let mut c = H1::connect(srv.run.addr);
    c.send(
        b"POST /api/trailers HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
          5\r\nhello\r\n0\r\nChecksum: abc\r\n\r\n",
    );
    assert_eq!(c.answer(false).text(), "n=5 checksum=abc");
    // Without trailers, none.
    let a = c.request("POST", "/api/trailers", "", b"hey");
    assert_eq!(a.text(), "n=3 checksum=none");
    srv.stop();
}

#[test]
fn a_large_body_of_known_size_keeps_its_length_and_one_that_lies_is_cut_off() {
    let srv = serve("sized");
    let mut c = H1::connect(srv.run.addr);
    let a = c.request("GET", "/api/large", "", b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.field("content-length"), Some("200000"));
    assert_eq!(a.field("transfer-encoding"), None);
    assert!(a.whole);
    assert_eq!(a.body, large());
    // HEAD: the same length, no body (the next answer on the connection reads clean).
    let head = c.request("HEAD", "/api/large", "", b"");
    assert_eq!(head.field("content-length"), Some("200000"));
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    // It said 100,000 bytes and ended at 70,000: the connection closes short of the length.
    let a = c.request("GET", "/api/lying", "", b"");
    assert_eq!(a.field("content-length"), Some("100000"));
    assert!(!a.whole, "a body short of its length must not look whole");
    for via in [Via::H2c, Via::H2Tls] {
        let got = curl(&srv, via, "/api/large", &[]);
        assert_eq!(got.header("content-length"), Some("200000"), "{via:?}");
        assert_eq!(got.body, large(), "{via:?}");
    }
    srv.stop();
}

#[test]
fn hop_by_hop_fields_of_the_service_are_dropped() {
    // RFC 9110 §7.6.1: Connection, the fields it names, Keep-Alive.
    let srv = serve("hop");
    let mut c = H1::connect(srv.run.addr);
    let a = c.request("GET", "/api/hop", "", b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.field("x-kept"), Some("yes"));
    assert_eq!(a.field("x-private"), None);
    assert_eq!(a.field("keep-alive"), None);
    assert_eq!(a.field("connection"), None);
    // The connection is still usable.
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    srv.stop();
}

#[test]
fn the_service_sees_the_first_piece_of_a_body_before_the_client_sent_the_rest() {
    let srv = serve("upload");
    let (tx, rx) = mpsc::channel();
    *srv.probe.first_piece.lock().unwrap() = Some(tx);
    let mut c = H1::connect(srv.run.addr);
    let total = 1 << 20;
    c.send(
        format!("POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Length: {total}\r\n\r\n")
            .as_bytes(),
    );
    c.send(&[7u8; 1000]);
    // A buffered body would reach the handler only whole: this would never come.
    let first = rx
        .recv_timeout(READ_TIMEOUT)
        .expect("the handler got the first piece while the body was incomplete");
    assert!(first <= 1000, "{first}");
    c.send(&vec![7u8; total - 1000]);
    let a = c.answer(false);
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), total.to_string());
    srv.stop();
}

#[test]
fn an_answer_before_the_body_is_read_leaves_the_connection_to_read_the_rest_and_go_on() {
    // The service answers 401 without taking the body: the rest is read and thrown away,
    // and the next request on the connection is answered.
    let srv = serve("refuse");
    let mut c = H1::connect(srv.run.addr);
    let total = 4 << 20;
    let writer = {
        let mut s = c.s.try_clone().unwrap();
        std::thread::spawn(move || {
            s.write_all(
                format!("POST /api/refuse HTTP/1.1\r\nHost: t\r\nContent-Length: {total}\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
            s.write_all(&vec![9u8; total]).unwrap();
        })
    };
    assert_eq!(c.answer(false).status, 401);
    writer.join().unwrap();
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    srv.stop();
}

#[test]
fn a_large_upload_is_counted_whole_through_the_bodys_backpressure() {
    let srv = serve("large");
    let total = 24 << 20;
    let body: Vec<u8> = (0..total).map(|i| (i % 251) as u8).collect();
    // Content-Length, then chunked.
    let mut c = H1::connect(srv.run.addr);
    let writer = {
        let mut s = c.s.try_clone().unwrap();
        let body = body.clone();
        std::thread::spawn(move || {
            s.write_all(
                format!("POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Length: {total}\r\n\r\n")
                    .as_bytes(),
            )
            .unwrap();
            s.write_all(&body).unwrap();
        })
    };
    let a = c.answer(false);
    writer.join().unwrap();
    assert_eq!((a.status, a.text()), (200, total.to_string()));
    let writer = {
        let mut s = c.s.try_clone().unwrap();
        let body = body.clone();
        std::thread::spawn(move || {
            s.write_all(
                b"POST /api/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n",
            )
            .unwrap();
            for piece in body.chunks(100_000) {
                s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                    .unwrap();
                s.write_all(piece).unwrap();
                s.write_all(b"\r\n").unwrap();
            }
            s.write_all(b"0\r\n\r\n").unwrap();
        })
    };
    let a = c.answer(false);
    writer.join().unwrap();
    assert_eq!((a.status, a.text()), (200, total.to_string()));
    // Over HTTP/2 (flow control is the backpressure there).
    let file = srv.dir.join("upload.bin");
    std::fs::write(&file, &body).unwrap();
    let at = format!("@{}", file.display());
    for via in [Via::H2c, Via::H2Tls] {
        let got = curl(&srv, via, "/api/upload", &["--data-binary", &at]);
        assert_eq!(
            (got.status, got.text()),
            (200, total.to_string()),
            "{via:?}"
        );
    }
    srv.stop();
}

#[test]
fn a_body_over_the_stream_limit_is_refused_413_declared_or_as_it_grows() {
    let srv = serve_with("limit", |c| c.max_stream_body_bytes = 100_000);
    // Declared: refused before the service is called.
    let mut c = H1::connect(srv.run.addr);
    c.send(b"POST /api/upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100001\r\n\r\n");
    let a = c.answer(false);
    assert_eq!(a.status, 413);
    assert_eq!(a.field("connection"), Some("close"));
    assert_eq!(
        srv.probe.spans.load(Ordering::SeqCst),
        0,
        "the service never saw it"
    );
    // Chunked: the connection answers 413 once it outgrows the limit, and closes; the
    // service's body ends cut off.
    let mut c = H1::connect(srv.run.addr);
    c.send(b"POST /api/upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    let piece = vec![1u8; 50_000];
    for _ in 0..3 {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.send(&piece);
        c.send(b"\r\n");
    }
    let a = c.answer(false);
    assert_eq!(a.status, 413);
    assert!(!c.fill(), "the connection closes after the 413");
    common::eventually("the service's body ended cut off", || {
        srv.probe.cut.load(Ordering::SeqCst) == 1
    });
    // The server goes on.
    let mut c = H1::connect(srv.run.addr);
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    srv.stop();
}

#[test]
fn a_streamed_answer_sends_its_first_piece_before_the_service_made_the_last() {
    let srv = serve("ticks");
    let mut c = H1::connect(srv.run.addr);
    c.send(b"GET /api/ticks HTTP/1.1\r\nHost: t\r\n\r\n");
    let (status, fields) = c.head();
    assert_eq!(status, 200);
    assert!(
        fields
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked"),
        "{fields:?}"
    );
    // The second piece waits for this test: a buffered answer would never come.
    assert_eq!(c.chunk().expect("the first piece"), b"first\n");
    srv.probe.tick.notify_one();
    assert_eq!(c.chunk().expect("the second piece"), b"second\n");
    assert_eq!(c.chunk().expect("the last chunk"), b"");
    // The connection goes on.
    assert_eq!(c.request("GET", "/native", "", b"").text(), "native");
    srv.stop();
}

#[test]
fn a_panicking_service_is_a_500_and_a_body_failing_mid_answer_is_cut_off() {
    let srv = serve("fail");
    let mut c = H1::connect(srv.run.addr);
    let a = c.request("GET", "/api/panic", "", b"");
    assert_eq!(a.status, 500);
    let mut c = H1::connect(srv.run.addr);
    let a = c.request("GET", "/api/fail-first", "", b"");
    assert_eq!(a.status, 500);
    let mut c = H1::connect(srv.run.addr);
    let a = c.request("GET", "/api/fail-mid", "", b"");
    assert_eq!(a.status, 200);
    assert_eq!(a.text(), "part one\n");
    assert!(!a.whole, "a body that failed must not end as if whole");
    srv.stop();
}

/// A service that is not ready at its first poll (it asks to be polled again) and refuses a
/// call made before it said ready.
#[derive(Clone)]
struct Slow {
    polls: Arc<AtomicUsize>,
    ready: bool,
}

impl tower_service::Service<http::Request<linerate_server::tower::Body>> for Slow {
    type Response = http::Response<String>;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if self.polls.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.ready = true;
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<linerate_server::tower::Body>) -> Self::Future {
        let ready = std::mem::take(&mut self.ready);
        Box::pin(async move {
            if !ready {
                return Err(std::io::Error::other("called before ready"));
            }
            Ok(http::Response::new(format!("ready {}", req.uri().path())))
        })
    }
}

#[test]
fn poll_ready_is_awaited_before_each_call_and_an_error_is_a_500() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let polls = Arc::new(AtomicUsize::new(0));
    let handle = rt.handle().clone();
    let svc = Slow {
        polls: polls.clone(),
        ready: false,
    };
    let router = linerate_server::tower::router(svc, move |f| {
        handle.spawn(f);
    });
    let run = common::start(config(), router);
    let mut c = H1::connect(run.addr);
    for i in 0..3 {
        let a = c.request("GET", &format!("/r{i}"), "", b"");
        assert_eq!((a.status, a.text()), (200, format!("ready /r{i}")));
    }
    assert_eq!(polls.load(Ordering::SeqCst), 6, "two polls per request");
    run.stop();
    rt.shutdown_background();
}

/// A service whose clones are ready once its gate opens (a concurrency limit's shape: the
/// readiness is shared, each clone polls for its own), counting its clones and polls.
struct Gated {
    gate: Arc<Gate>,
}

#[derive(Default)]
struct Gate {
    open: std::sync::atomic::AtomicBool,
    waiters: Mutex<Vec<std::task::Waker>>,
    clones: AtomicUsize,
    polls: AtomicUsize,
}

impl Gate {
    fn open(&self) {
        self.open.store(true, Ordering::SeqCst);
        for w in self.waiters.lock().unwrap().drain(..) {
            w.wake();
        }
    }
}

impl Clone for Gated {
    fn clone(&self) -> Gated {
        self.gate.clones.fetch_add(1, Ordering::SeqCst);
        Gated {
            gate: self.gate.clone(),
        }
    }
}

impl tower_service::Service<http::Request<linerate_server::tower::Body>> for Gated {
    type Response = http::Response<String>;
    type Error = std::io::Error;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.gate.polls.fetch_add(1, Ordering::SeqCst);
        let mut waiters = self.gate.waiters.lock().unwrap();
        if self.gate.open.load(Ordering::SeqCst) {
            return Poll::Ready(Ok(()));
        }
        waiters.push(cx.waker().clone());
        Poll::Pending
    }

    fn call(&mut self, req: http::Request<linerate_server::tower::Body>) -> Self::Future {
        std::future::ready(Ok(http::Response::new(format!("ok {}", req.uri().path()))))
    }
}

#[test]
fn a_worker_calls_its_one_ready_clone_and_one_not_ready_waits_in_its_requests_own_task() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let gate = Arc::new(Gate::default());
    let svc = Gated { gate: gate.clone() };
    let router = linerate_server::tower::router(svc, move |f| {
        handle.spawn(f);
    });
    let run = common::start(config(), router);
    let addr = run.addr;
    // The first request finds its clone not ready: it waits, and holds nothing else up.
    let first = std::thread::spawn(move || H1::connect(addr).request("GET", "/a", "", b""));
    for _ in 0..500 {
        if gate.polls.load(Ordering::SeqCst) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        gate.polls.load(Ordering::SeqCst) > 0,
        "the first request was polled for"
    );
    gate.open();
    let a = first.join().unwrap();
    assert_eq!((a.status, a.text()), (200, "ok /a".to_string()));
    // The rest are called on the worker's one clone, ready each time.
    let mut c = H1::connect(addr);
    for path in ["/b", "/c", "/d", "/e"] {
        let a = c.request("GET", path, "", b"");
        assert_eq!((a.status, a.text()), (200, format!("ok {path}")));
    }
    assert_eq!(
        gate.clones.load(Ordering::SeqCst),
        2,
        "the clone that was not ready went with its request; the worker's next one was kept"
    );
    run.stop();
    rt.shutdown_background();
}

#[test]
fn a_service_error_is_a_500() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let failing = tower_service_fn(|| Err(std::io::Error::other("no")));
    let router = linerate_server::tower::router(failing, move |f| {
        handle.spawn(f);
    });
    let run = common::start(config(), router);
    let mut c = H1::connect(run.addr);
    assert_eq!(c.request("GET", "/", "", b"").status, 500);
    run.stop();
    rt.shutdown_background();
}

/// A service answering every request with `f()`.
fn tower_service_fn(
    f: fn() -> Result<http::Response<String>, std::io::Error>,
) -> impl tower_service::Service<
    http::Request<linerate_server::tower::Body>,
    Response = http::Response<String>,
    Error = std::io::Error,
    Future = std::future::Ready<Result<http::Response<String>, std::io::Error>>,
> + Clone
+ Send
+ Sync
+ 'static {
    #[derive(Clone)]
    struct F(fn() -> Result<http::Response<String>, std::io::Error>);
    impl tower_service::Service<http::Request<linerate_server::tower::Body>> for F {
        type Response = http::Response<String>;
        type Error = std::io::Error;
        type Future = std::future::Ready<Result<http::Response<String>, std::io::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<linerate_server::tower::Body>) -> Self::Future {
            std::future::ready((self.0)())
        }
    }
    F(f)
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 through curl, HTTP/3 through the load generator's client.

#[derive(Clone, Copy, Debug)]
enum Via {
    H2c,
    H2Tls,
}

fn curl(srv: &Srv, via: Via, path: &str, args: &[&str]) -> Got {
    let (url, flags): (String, &[&str]) = match via {
        Via::H2c => (
            format!("http://{}{path}", srv.h2c),
            &["--http2-prior-knowledge"],
        ),
        Via::H2Tls => (format!("https://{}{path}", srv.tls), &["--http2", "-k"]),
    };
    curl_url(&srv.dir, &url, flags, args)
}

#[test]
fn the_same_app_answers_over_http2_in_cleartext_and_over_tls() {
    let srv = serve("h2");
    for via in [Via::H2c, Via::H2Tls] {
        let got = curl(&srv, via, "/api/users/7", &[]);
        assert_eq!(got.version, "2", "{via:?}");
        assert_eq!(got.status, 200);
        assert_eq!(got.text(), r#"{"id":7,"name":"user 7"}"#);

        let got = curl(
            &srv,
            via,
            "/api/users/3",
            &[
                "-H",
                "content-type: application/json",
                "--data-binary",
                r#"{"name":"bo"}"#,
            ],
        );
        assert_eq!(
            (got.status, got.text()),
            (201, r#"{"id":3,"name":"BO"}"#.into())
        );

        let got = curl(
            &srv,
            via,
            "/api/users/7",
            &[
                "-X",
                "OPTIONS",
                "-H",
                "origin: http://example.com",
                "-H",
                "access-control-request-method: POST",
            ],
        );
        assert_eq!(got.status, 200, "{via:?}");
        assert_eq!(got.header("access-control-allow-origin"), Some("*"));

        let got = curl(&srv, via, "/api/big", &["-H", "accept-encoding: gzip"]);
        assert_eq!(got.header("content-encoding"), Some("gzip"), "{via:?}");
        assert_eq!(gunzip(&got.body), big_text().as_bytes());

        // The streamed answer: its second piece once the first went out.
        let tick = {
            let probe = srv.probe.clone();
            std::thread::spawn(move || {
                // Released at once: curl reads the whole answer (the order is HTTP/1.1's test).
                probe.tick.notify_one();
            })
        };
        let got = curl(&srv, via, "/api/ticks", &[]);
        tick.join().unwrap();
        assert_eq!((got.status, got.text()), (200, "first\nsecond\n".into()));

        let got = curl(&srv, via, "/api/whoami", &[]);
        // The authority is HTTP/2's `:authority`, handed on as Host.
        let scheme = match via {
            Via::H2c => "http",
            Via::H2Tls => "https",
        };
        let want = format!(
            "peer=127.0.0.1 scheme={scheme} uri=/whoami original=/api/whoami host=127.0.0.1:"
        );
        assert!(got.text().starts_with(&want), "{via:?}: {}", got.text());
    }
    assert!(srv.probe.spans.load(Ordering::SeqCst) >= 12);
    srv.stop();
}

#[test]
fn the_same_app_answers_over_http3() {
    let srv = serve("h3");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(srv.anchor.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let quic = common::h3::quic(tls);
    let got = common::h3::get(
        &quic,
        srv.tls,
        &["/api/users/7", "/api/big", "/api/nope", "/native"],
    );
    assert_eq!(
        got.answers,
        [(200, 24), (200, BIG as u64), (404, 0), (200, 6)]
    );
    // Bodies both ways over HTTP/3: JSON in and out, and an upload counted whole.
    let upload = vec![5u8; 300_000];
    let json = br#"{"name":"cy"}"#;
    // The upload handler checks x-expect-bytes: the client reports only lengths.
    let fields = |body: &[u8]| {
        [
            ("content-type".to_string(), "application/json".to_string()),
            ("x-expect-bytes".to_string(), body.len().to_string()),
        ]
    };
    let (json_fields, upload_fields) = (fields(json), fields(&upload));
    let answers = common::h3::send(
        &quic,
        srv.tls,
        &[
            ("POST", "/api/users/4", &json_fields, json),
            ("POST", "/api/upload", &upload_fields, &upload),
        ],
    )
    .answers;
    let created = r#"{"id":4,"name":"CY"}"#.len() as u64;
    assert_eq!(answers, [(201, created), (200, "300000".len() as u64)]);
    assert!(srv.probe.spans.load(Ordering::SeqCst) >= 5);
    srv.stop();
}
