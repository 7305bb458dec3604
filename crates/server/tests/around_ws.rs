//! WebSocket routes under async layers on a real server, over HTTP/1.1 and
//! HTTP/2 (RFC 8441, a raw h2c client): under a bearer layer that awaits before it passes,
//! an upgrade with the token is accepted (its 101 or 200 seen by the layer's after-code, with
//! the layer's field) and echoes, the accept function seeing the layer's extension; one
//! without the token gets the layer's 401 and no upgrade (HTTP/1.1: the connection closes
//! after it; HTTP/2: the stream ends, the connection serves on); a layer that changes the
//! accepted 101's status cancels the upgrade; a route timeout answers 503 in place of the
//! upgrade. Python's `websockets` client, where the environment names one
//! (`LINERATE_WS_PYTHON`), and headless Chromium over its HTTP/2 connection (where installed)
//! go through the layer too.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

mod common;
#[path = "common/h2.rs"]
mod h2;

use linerate_server::testing::TestServer;
use linerate_server::websocket::{Message, WsHandler, WsOut};
use linerate_server::{Extensions, Layer, Next, OwnedRequest, Response, Router};

use h2::{DATA, H2, has, status};

/// Who the bearer layer let in: the extension its accept function reads.
#[derive(Clone, Debug)]
struct User(String);

/// Echoes each message prefixed with its user's name.
struct Echo(String);

impl WsHandler for Echo {
    fn on_message(&mut self, msg: Message<'_>, out: &mut WsOut<'_>) {
        if let Message::Text(t) = msg {
            out.text(&format!("{}: {t}", self.0));
        }
    }
}

/// What the test's layer and accept function saw.
#[derive(Default)]
struct Seen {
    /// Accept function calls.
    accepts: AtomicUsize,
    /// The status the layer's after-code saw last.
    after: AtomicU16,
}

/// A WebSocket route at /ws under an awaiting bearer layer (`Authorization: Bearer
/// secret`, or `?token=secret` for clients that cannot set fields), and a plain route.
/// `/slow` waits past its route timeout in the layer.
fn router(seen: &Arc<Seen>) -> Router {
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let bearer = move |mut req: OwnedRequest, next: Next| {
        let seen = s1.clone();
        async move {
            // The check a Redis lookup would be: it awaits.
            tokio::time::sleep(Duration::from_millis(2)).await;
            let ok = req.header("authorization") == Some(b"Bearer secret".as_slice())
                || req.query_param("token").as_deref() == Some("secret");
            if !ok {
                return Response::text("no token\n").status(401);
            }
            req.extensions_mut().insert(User("alice".into()));
            let mut resp = next.run(req).await;
            seen.after.store(resp.status_code(), Ordering::SeqCst);
            resp.set_header("x-gate", "passed").unwrap();
            resp
        }
    };
    let slow = Router::new()
        .ws("/slow", |_, _| Ok(Echo("slow".into())))
        .around(|req: OwnedRequest, next: Next| async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            next.run(req).await
        })
        .timeout(Duration::from_millis(100));
    // A layer that turns the accepted handshake's 101 into a 403 after `next`.
    let vetoed = Router::new()
        .ws("/vetoed", move |_, _| {
            s3.accepts.fetch_add(1, Ordering::SeqCst);
            Ok(Echo("vetoed".into()))
        })
        .around(|req: OwnedRequest, next: Next| async move { next.run(req).await.status(403) });
    // The same from a sync layer's `after`, outside the async one.
    let vetoed_sync = Router::new()
        .ws("/vetoed-sync", |_, _| Ok(Echo("vetoed".into())))
        .around(|req: OwnedRequest, next: Next| next.run(req))
        .layer(VetoAfter);
    Router::new()
        .ws("/ws", move |req, _| {
            s2.accepts.fetch_add(1, Ordering::SeqCst);
            match req.extension::<User>() {
                Some(user) => Ok(Echo(user.0.clone())),
                None => Err(Response::text("no user\n").status(500)),
            }
        })
        .get("/plain", |_| Response::text("plain"))
        .around(bearer)
        .merge(slow)
        .merge(vetoed)
        .merge(vetoed_sync)
}

/// A sync layer that turns every answer into a 403 on its way out.
struct VetoAfter;

impl Layer for VetoAfter {
    fn before(&self, _: &linerate_server::Request<'_>, _: &mut Extensions) -> Option<Response> {
        None
    }
    fn after(&self, _: &Extensions, resp: &mut Response) {
        resp.set_status(403);
    }
}

fn server(seen: &Arc<Seen>) -> TestServer {
    let config = linerate_server::Config {
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        ..TestServer::config()
    };
    TestServer::start_with(config, router(seen)).expect("server starts")
}

// HTTP/1.1

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// How long a read waits (a bound on a hang, not a measurement).
const TIMEOUT: Duration = Duration::from_secs(10);

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

fn handshake(s: &mut TcpStream, path: &str, extra: &str) -> String {
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).unwrap() == 0 {
            break;
        }
        head.push(b[0]);
    }
    String::from_utf8(head).unwrap()
}

/// Reads one short server frame: (first byte, payload).
fn read_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).unwrap();
    assert!(h[1] < 126, "a short unmasked frame: {h:x?}");
    let mut payload = vec![0u8; h[1] as usize];
    s.read_exact(&mut payload).unwrap();
    (h[0], payload)
}

#[test]
fn an_upgrade_under_an_awaiting_layer_is_accepted_and_echoes_over_http1() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut s = connect(server.addr());
    let head = handshake(&mut s, "/ws", "Authorization: Bearer secret\r\n");
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    let lower = head.to_ascii_lowercase();
    assert!(
        lower.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo=\r\n"),
        "{head}"
    );
    assert!(
        lower.contains("x-gate: passed\r\n"),
        "the layer's field: {head}"
    );
    assert!(lower.contains("upgrade: websocket\r\n"), "{head}");
    assert_eq!(
        seen.after.load(Ordering::SeqCst),
        101,
        "the after-code saw the 101"
    );
    s.write_all(&common::masked_frame(0x81, b"hello")).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"alice: hello".to_vec()));
    // The close handshake, as on any WebSocket connection.
    s.write_all(&common::masked_frame(0x88, &1000u16.to_be_bytes()))
        .unwrap();
    assert_eq!(read_frame(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
}

#[test]
fn an_upgrade_without_the_token_gets_the_layers_401_and_no_upgrade_over_http1() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut s = connect(server.addr());
    let head = handshake(&mut s, "/ws", "");
    assert!(head.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("upgrade: websocket"),
        "{head}"
    );
    // The body, then the end: what followed the handshake is never read as HTTP.
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert_eq!(rest, b"no token\n");
    assert_eq!(seen.accepts.load(Ordering::SeqCst), 0, "never accepted");
}

#[test]
fn a_layer_that_changes_the_accepted_101s_status_cancels_the_upgrade() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut s = connect(server.addr());
    let head = handshake(&mut s, "/vetoed", "Authorization: Bearer secret\r\n");
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("upgrade: websocket"),
        "{head}"
    );
    assert_eq!(
        seen.accepts.load(Ordering::SeqCst),
        1,
        "accepted, then vetoed"
    );
    // No WebSocket: the connection closes after the answer, whatever the client sends.
    let _ = s.write_all(&common::masked_frame(0x81, b"hello"));
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "no frame: {rest:x?}");
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    let answer = c.open(1, "/vetoed", &[("authorization", "Bearer secret")]);
    assert_eq!(status(&answer), "403", "{answer:?}");
    // A sync layer's `after`, outside the async layers, changes it the same way.
    let mut s = connect(server.addr());
    let head = handshake(&mut s, "/vetoed-sync", "Authorization: Bearer secret\r\n");
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    let answer = c.open(3, "/vetoed-sync", &[("authorization", "Bearer secret")]);
    assert_eq!(status(&answer), "403", "{answer:?}");
}

#[test]
fn a_route_timeout_bounds_the_time_to_the_upgrade() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut s = connect(server.addr());
    let head = handshake(&mut s, "/slow", "Authorization: Bearer secret\r\n");
    assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    let answer = c.open(1, "/slow", &[("authorization", "Bearer secret")]);
    assert_eq!(status(&answer), "503", "{answer:?}");
}

// HTTP/2 (RFC 8441), a raw h2c client.

#[test]
fn an_upgrade_under_an_awaiting_layer_opens_the_tunnel_and_echoes_over_http2() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    let answer = c.open(1, "/ws", &[("authorization", "Bearer secret")]);
    assert_eq!(status(&answer), "200", "{answer:?}");
    assert_eq!(
        has(&answer, "x-gate").as_deref(),
        Some("passed"),
        "{answer:?}"
    );
    assert_eq!(has(&answer, "sec-websocket-accept"), None, "{answer:?}");
    assert_eq!(
        seen.after.load(Ordering::SeqCst),
        200,
        "the after-code saw the 200"
    );
    c.send(DATA, 0, 1, &common::masked_frame(0x81, b"hello"));
    let f = c.next_on(1);
    assert_eq!(f.kind, DATA, "{f:?}");
    assert_eq!(f.payload, b"\x81\x0calice: hello");
}

#[test]
fn an_upgrade_without_the_token_gets_the_layers_401_on_its_stream_over_http2() {
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    let (answer, ended) = {
        let mut fields = vec![
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "http"),
            (":path", "/ws"),
            (":authority", "localhost"),
            ("sec-websocket-version", "13"),
        ];
        fields.push(("authorization", "Bearer wrong"));
        c.request(1, &fields, false);
        c.answer_ends(1)
    };
    assert_eq!(status(&answer), "401", "{answer:?}");
    assert!(!ended, "the body follows");
    assert_eq!(c.body(1), b"no token\n", "the stream ends with the answer");
    assert_eq!(seen.accepts.load(Ordering::SeqCst), 0, "never accepted");
    // The connection serves on.
    c.request(
        3,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/plain"),
            (":authority", "localhost"),
            ("authorization", "Bearer secret"),
        ],
        true,
    );
    assert_eq!(status(&c.answer_ends(3).0), "200");
    assert_eq!(c.body(3), b"plain");
}

/// Python's `websockets` client (a venv's interpreter named by `LINERATE_WS_PYTHON`)
/// through the layer: refused without the token (401), echoed with it.
#[test]
fn pythons_websockets_client_is_refused_then_echoed_through_the_layer() {
    let Ok(python) = std::env::var("LINERATE_WS_PYTHON") else {
        println!("NOT RUN: LINERATE_WS_PYTHON names no interpreter with `websockets`");
        return;
    };
    let seen = Arc::new(Seen::default());
    let server = server(&seen);
    let script = r#"
import asyncio, sys
import websockets

async def main(addr):
    try:
        async with websockets.connect(f"ws://{addr}/ws"):
            print("refused: no")
    except websockets.exceptions.InvalidStatus as e:
        print("refused:", e.response.status_code)
    async with websockets.connect(f"ws://{addr}/ws?token=secret") as ws:
        await ws.send("hi from python")
        print("echo:", await ws.recv())

asyncio.run(main(sys.argv[1]))
"#;
    let out = std::process::Command::new(python)
        .args(["-c", script, &server.addr().to_string()])
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{stdout}");
    assert_eq!(stdout, "refused: 401\necho: alice: hi from python\n");
}

/// The page Chromium loads: a WebSocket without the token (refused: the browser sees a
/// failed connection), then one with it (echoed, closed cleanly); what it saw is posted back.
const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>ws under a layer</title>
<script>
const seen = [];
const report = () => fetch("/report", { method: "POST", body: seen.join("|") });
const bad = new WebSocket("wss://" + location.host + "/ws");
bad.onopen = () => seen.push("opened without the token");
bad.onclose = e => {
  seen.push("refused:" + e.code);
  const ws = new WebSocket("wss://" + location.host + "/ws?token=secret");
  ws.onopen = () => ws.send("hello over h2");
  ws.onmessage = e => {
    seen.push("text:" + e.data);
    ws.close(1000, "done");
  };
  ws.onclose = e => {
    seen.push("close:" + e.code + ":" + e.wasClean);
    report();
  };
};
</script>"#;

/// A throwaway certificate for 127.0.0.1 (openssl), or `None` with a NOT RUN line.
fn certificate(dir: &std::path::Path) -> Option<linerate_server::config::CertPair> {
    std::fs::create_dir_all(dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-addext"])
        .arg("subjectAltName=IP:127.0.0.1,DNS:localhost")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !made {
        println!("NOT RUN: no openssl to make a throwaway certificate");
        return None;
    }
    Some(linerate_server::config::CertPair { cert, key })
}

/// Chromium over the HTTP/2 connection that loaded its page (extended CONNECT): the bearer
/// layer (the token in the query, as a browser cannot set fields) refuses the first
/// WebSocket and lets the second through to the accept function, which sees its user and an
/// HTTP/2 request.
#[test]
fn chromium_is_refused_then_echoed_through_the_layer_over_http2() {
    let dir = std::env::temp_dir().join(format!("linerate-around-ws-{}", std::process::id()));
    let Some(cert) = certificate(&dir) else {
        return;
    };
    let (tx, report) = std::sync::mpsc::channel::<String>();
    let tx = std::sync::Mutex::new(tx);
    let versions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = versions.clone();
    let ws = Router::new()
        .ws("/ws", move |req, _| {
            seen.lock().unwrap().push(format!("{:?}", req.version()));
            let user = req.extension::<User>().map(|u| u.0.clone());
            Ok(Echo(user.unwrap_or_else(|| "nobody".into())))
        })
        .around(|mut req: OwnedRequest, next: Next| async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if req.query_param("token").as_deref() != Some("secret") {
                return Response::text("no token\n").status(401);
            }
            req.extensions_mut().insert(User("alice".into()));
            next.run(req).await
        });
    let router = Router::new()
        .get("/", |_| {
            Response::text(PAGE).content_type("text/html; charset=utf-8")
        })
        .post("/report", move |req| {
            let _ = tx
                .lock()
                .unwrap()
                .send(String::from_utf8_lossy(req.body()).into_owned());
            Response::new(204)
        })
        .merge(ws);
    let config = linerate_server::Config {
        tls: Some(linerate_server::TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: Some(cert),
            ktls: false,
            key_update_bytes: linerate_server::tls::TLS_KEY_UPDATE_BYTES,
            http2: true,
            options: Default::default(),
        }),
        ..TestServer::config()
    };
    let server = TestServer::start_with(config, router).expect("server starts");
    let url = format!("https://{}/", server.tls_addr().unwrap());
    let profile = dir.join("profile");
    let Some(_browser) = common::chromium_with(&url, &profile, &["--ignore-certificate-errors"])
    else {
        let _ = std::fs::remove_dir_all(&dir);
        return; // NOT RUN, said
    };
    let got = report
        .recv_timeout(Duration::from_secs(60))
        .expect("the page reports within the limit");
    let _ = std::fs::remove_dir_all(&dir);
    println!("chromium saw: {got}");
    assert_eq!(
        got,
        "refused:1006|text:alice: hello over h2|close:1000:true"
    );
    assert_eq!(
        *versions.lock().unwrap(),
        ["Http2"],
        "accepted once, over h2"
    );
}
