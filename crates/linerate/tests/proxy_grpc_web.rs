//! gRPC-Web translated to gRPC at the proxy (`--proxy-grpc-web`, `grpc_web = true`), with
//! raw HTTP/1.1 requests as curl or a browser sends them (binary and `-text`): against a
//! recording HTTP/2 upstream written with hyperium's `h2` (which sees what went up, and
//! answers gRPC only), and against linerate's own gRPC services over h2c.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::bin::{Served, serve};

/// How long a test waits for something that must happen (never a measured duration).
const WAIT: Duration = Duration::from_secs(20);

/// HttpArena's prebuilt GetSum call (a = 1, b = 2) and its answer's message (result = 3).
const GET_SUM: &[u8] = &[0, 0, 0, 0, 4, 0x08, 1, 0x10, 2];
const GET_SUM_ANSWER: &[u8] = &[0, 0, 0, 0, 2, 0x08, 3];

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A `-text` answer decoded: base64 flushed piece by piece, each padded on its own, so each
/// 4-character quantum is decoded on its own.
fn unb64(text: &[u8]) -> Vec<u8> {
    assert_eq!(
        text.len() % 4,
        0,
        "whole quanta: {:?}",
        String::from_utf8_lossy(text)
    );
    text.chunks(4)
        .flat_map(|q| base64::engine::general_purpose::STANDARD.decode(q).unwrap())
        .collect()
}

/// What one request brought the recording upstream: its path, content type and body.
type Seen = (String, String, Vec<u8>);

/// An HTTP/2 upstream that speaks gRPC only: each request's path, content type and body are
/// reported; `/x.Svc/Fail` gets a Trailers-Only NOT_FOUND, anything else its request body
/// back as the answer (in two DATA frames) with `grpc-status: 0` and a metadata trailer.
fn grpc_upstream() -> (SocketAddr, mpsc::Receiver<Seen>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        runtime().block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((req, respond))) = conn.accept().await {
                        tokio::spawn(answer(req, respond, tx.clone()));
                    }
                });
            }
        });
    });
    (addr, rx)
}

async fn answer(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    tx: mpsc::Sender<Seen>,
) {
    let path = req.uri().path().to_string();
    let ct = req
        .headers()
        .get("content-type")
        .map_or(String::new(), |v| v.to_str().unwrap().to_string());
    let mut recv = req.into_body();
    let mut body = Vec::new();
    while let Some(Ok(piece)) = recv.data().await {
        let _ = recv.flow_control().release_capacity(piece.len());
        body.extend_from_slice(&piece);
    }
    let _ = tx.send((path.clone(), ct, body.clone()));
    if path == "/x.Svc/Fail" {
        let resp = http::Response::builder()
            .status(200)
            .header("content-type", "application/grpc")
            .header("grpc-status", "5")
            .header("grpc-message", "no%20such%20thing")
            .body(())
            .unwrap();
        let _ = respond.send_response(resp, true);
        return;
    }
    let resp = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .header("x-initial", "yes")
        .body(())
        .unwrap();
    let mut send = respond.send_response(resp, false).unwrap();
    let half = body.len() / 2;
    send.send_data(Bytes::copy_from_slice(&body[..half]), false)
        .unwrap();
    send.send_data(Bytes::copy_from_slice(&body[half..]), false)
        .unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    trailers.insert("x-trailing", "done".parse().unwrap());
    send.send_trailers(trailers).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A proxy (no app) sending everything to the h2c upstream at `up`, with `extra` flags.
fn proxy_to(up: SocketAddr, extra: &[&str]) -> Served {
    let target = format!("/=h2c://{up}");
    let mut args = vec!["--app", "none", "--proxy", &target];
    args.extend_from_slice(extra);
    serve(&args)
}

/// An answer read to the connection's close: status, fields, the body de-chunked.
#[derive(Debug)]
struct Got {
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// The chunked body's trailer section (empty: none).
    trailers: Vec<u8>,
}

impl Got {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `POST path` over HTTP/1.1 as a browser's gRPC-Web client sends it, with `Connection:
/// close`, read to the end.
fn post(addr: SocketAddr, path: &str, content_type: &str, body: &[u8]) -> Got {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(WAIT)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: app.test\r\nContent-Type: {content_type}\r\n\
         X-Grpc-Web: 1\r\nAccept: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.write_all(body).unwrap();
    let mut all = Vec::new();
    tcp.read_to_end(&mut all).expect("the whole answer in time");
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8(all[..end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let fields: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_string(), v.trim().to_string())
        })
        .collect();
    let mut got = Got {
        status,
        fields,
        body: Vec::new(),
        trailers: Vec::new(),
    };
    let rest = &all[end..];
    if got.field("transfer-encoding") == Some("chunked") {
        (got.body, got.trailers) = dechunk(rest);
    } else {
        got.body = rest.to_vec();
    }
    got
}

/// A chunked body and its trailer section.
fn dechunk(mut b: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut out = Vec::new();
    loop {
        let line = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size");
        let size = usize::from_str_radix(std::str::from_utf8(&b[..line]).unwrap(), 16).unwrap();
        b = &b[line + 2..];
        if size == 0 {
            return (out, b.strip_suffix(b"\r\n").unwrap_or(b).to_vec());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// A gRPC frame (flag 0) around `msg`.
fn frame(msg: &[u8]) -> Vec<u8> {
    let mut f = vec![0];
    f.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    f.extend_from_slice(msg);
    f
}

/// A gRPC-Web body's frames: (flag, payload).
fn frames(mut body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !body.is_empty() {
        assert!(body.len() >= 5, "a frame's prefix: {body:?}");
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push((body[0], body[5..5 + len].to_vec()));
        body = &body[5 + len..];
    }
    out
}

#[test]
fn a_grpc_web_call_goes_up_as_grpc_and_comes_back_with_its_trailer_frame() {
    let (up, seen) = grpc_upstream();
    let proxy = proxy_to(up, &["--proxy-grpc-web"]);
    let msg = frame(b"\x0a\x05hello");
    let got = post(
        proxy.addr,
        "/x.Svc/Echo",
        "application/grpc-web+proto",
        &msg,
    );
    let (path, ct, body) = seen
        .recv_timeout(WAIT)
        .expect("the call reached the upstream");
    assert_eq!(path, "/x.Svc/Echo");
    assert_eq!(ct, "application/grpc", "sent up as gRPC");
    assert_eq!(body, msg, "the body as it came");
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(
        got.field("content-type"),
        Some("application/grpc-web+proto")
    );
    assert_eq!(
        got.field("x-initial"),
        Some("yes"),
        "initial metadata in the head"
    );
    assert_eq!(got.field("grpc-status"), None, "the status is in the body");
    assert!(got.trailers.is_empty(), "no HTTP trailers: {got:?}");
    let f = frames(&got.body);
    assert_eq!(f.len(), 2, "the message, then the trailer frame: {f:?}");
    assert_eq!(f[0], (0, b"\x0a\x05hello".to_vec()));
    assert_eq!(f[1].0, 0x80, "PROTOCOL-WEB.md's trailer flag");
    assert_eq!(f[1].1, b"grpc-status:0\r\nx-trailing:done\r\n");
}

#[test]
fn a_grpc_web_text_call_is_decoded_going_up_and_base64_coming_back() {
    let (up, seen) = grpc_upstream();
    let proxy = proxy_to(up, &["--proxy-grpc-web"]);
    let msg = frame(b"\x0a\x0bhello world");
    // Two padded segments one after the other, as a client flushing twice sends them.
    let (a, b) = msg.split_at(4);
    let body = format!("{}{}", b64(a), b64(b));
    let got = post(
        proxy.addr,
        "/x.Svc/Echo",
        "application/grpc-web-text",
        body.as_bytes(),
    );
    let (_, ct, up_body) = seen
        .recv_timeout(WAIT)
        .expect("the call reached the upstream");
    assert_eq!(ct, "application/grpc");
    assert_eq!(up_body, msg, "decoded before it went up");
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(
        got.field("content-type"),
        Some("application/grpc-web-text+proto")
    );
    assert!(
        got.body
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(b)),
        "base64 only: {:?}",
        String::from_utf8_lossy(&got.body)
    );
    assert!(got.trailers.is_empty(), "no HTTP trailers: {got:?}");
    let f = frames(&unb64(&got.body));
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(f[0], (0, b"\x0a\x0bhello world".to_vec()));
    assert_eq!(
        f[1],
        (0x80, b"grpc-status:0\r\nx-trailing:done\r\n".to_vec())
    );
}

#[test]
fn a_trailers_only_answer_is_the_trailer_frame_alone() {
    let (up, _seen) = grpc_upstream();
    let proxy = proxy_to(up, &["--proxy-grpc-web"]);
    let got = post(
        proxy.addr,
        "/x.Svc/Fail",
        "application/grpc-web+proto",
        &frame(b""),
    );
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(
        got.field("grpc-status"),
        None,
        "moved into the body: {got:?}"
    );
    let f = frames(&got.body);
    assert_eq!(
        f,
        [(
            0x80,
            b"grpc-status:5\r\ngrpc-message:no%20such%20thing\r\n".to_vec()
        )]
    );
}

#[test]
fn without_the_option_grpc_web_goes_up_as_it_came() {
    // Off by default: an upstream that serves gRPC-Web itself gets it untouched.
    let (up, seen) = grpc_upstream();
    let proxy = proxy_to(up, &[]);
    let body = b64(&frame(b"x"));
    let got = post(
        proxy.addr,
        "/x.Svc/Echo",
        "application/grpc-web-text",
        body.as_bytes(),
    );
    let (_, ct, up_body) = seen
        .recv_timeout(WAIT)
        .expect("the call reached the upstream");
    assert_eq!(ct, "application/grpc-web-text");
    assert_eq!(up_body, body.as_bytes());
    assert_eq!(got.status, 200);
    // The upstream's answer as it came: its body, its status in HTTP trailers.
    assert_eq!(got.body, body.as_bytes());
    assert!(
        String::from_utf8_lossy(&got.trailers).contains("grpc-status: 0"),
        "{got:?}"
    );
}

#[test]
fn a_text_body_that_is_not_base64_is_400() {
    let (up, seen) = grpc_upstream();
    let proxy = proxy_to(up, &["--proxy-grpc-web"]);
    let got = post(
        proxy.addr,
        "/x.Svc/Echo",
        "application/grpc-web-text",
        b"**not base64**",
    );
    assert_eq!(got.status, 400, "{got:?}");
    assert!(seen.try_recv().is_err(), "nothing went up");
}

#[test]
fn grpc_web_through_the_proxy_reaches_linerates_own_grpc_services() {
    // linerate's upstream answers gRPC-Web itself too: the recording upstream above shows the
    // translation; this shows a real gRPC server's answer (GetSum, an unknown method) read
    // back through it.
    let up = serve(&["--h2c-port", "0"]);
    let h2c: SocketAddr = up
        .banner
        .iter()
        .find_map(|l| l.split("(h2c, prior knowledge) on http://").nth(1))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let proxy = proxy_to(h2c, &["--proxy-grpc-web"]);
    let got = post(
        proxy.addr,
        "/benchmark.BenchmarkService/GetSum",
        "application/grpc-web-text",
        b64(GET_SUM).as_bytes(),
    );
    assert_eq!(got.status, 200, "{got:?}");
    let f = frames(&unb64(&got.body));
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(f[0].1, &GET_SUM_ANSWER[5..]);
    assert_eq!(f[1].0, 0x80);
    assert!(
        String::from_utf8_lossy(&f[1].1).contains("grpc-status:0"),
        "{f:?}"
    );
    let got = post(
        proxy.addr,
        "/benchmark.BenchmarkService/NoSuchMethod",
        "application/grpc-web",
        GET_SUM,
    );
    let f = frames(&got.body);
    assert_eq!(f.len(), 1, "{got:?}");
    assert_eq!(f[0].0, 0x80);
    assert!(
        String::from_utf8_lossy(&f[0].1).contains("grpc-status:12"),
        "UNIMPLEMENTED: {f:?}"
    );
}

#[test]
fn the_option_needs_an_http2_upstream() {
    let (code, err) = common::bin::run_err(&[
        "serve",
        "--app",
        "none",
        "--proxy",
        "/=http://127.0.0.1:1",
        "--proxy-grpc-web",
    ]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("it needs an HTTP/2 --proxy"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
