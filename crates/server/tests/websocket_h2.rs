//! WebSocket over HTTP/2 (RFC 8441) on a real server, from a raw h2c client: the setting
//! announced only where a WebSocket route exists; extended CONNECT opened (200, the chosen
//! subprotocol, no accept value) and refused (404, 405, 501, 426, and a stream error where
//! `:protocol` was never announced); echoes on two WebSocket streams and a plain request on
//! one connection; a large message through both sides' flow control; the close handshake
//! ending the stream both ways; a client reset told to the handler; a sender on another
//! thread; and a handler that stops reading holding the client to one stream window.
//! Chromium (headless) opens `wss://` over the HTTP/2 connection that loaded its page.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

mod common;
#[path = "common/h2.rs"]
mod h2;

use linerate_server::testing::TestServer;
use linerate_server::websocket::{Message, WsHandler, WsOut};
use linerate_server::{Response, Router};

use h2::*;

/// How long a read waits (a bound on a hang, not a measurement).
const TIMEOUT: Duration = Duration::from_secs(5);

type Closed = Arc<Mutex<Vec<Option<u16>>>>;

struct Echo {
    closed: Closed,
    paused: Arc<AtomicBool>,
}

impl WsHandler for Echo {
    fn on_message(&mut self, msg: Message<'_>, out: &mut WsOut<'_>) {
        match msg {
            Message::Text("from a thread") => {
                let sender = out.sender();
                std::thread::spawn(move || {
                    sender.text("sent from a thread").unwrap();
                });
            }
            msg => {
                out.send(msg);
            }
        }
    }
    fn paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }
    fn on_close(&mut self, code: Option<u16>) {
        self.closed.lock().unwrap().push(code);
    }
}

struct Fixture {
    server: TestServer,
    closed: Closed,
    paused: Arc<AtomicBool>,
}

fn h2c_config() -> linerate_server::Config {
    linerate_server::Config {
        h2c: Some("127.0.0.1:0".parse().unwrap()),
        ..TestServer::config()
    }
}

fn fixture() -> Fixture {
    let closed = Closed::default();
    let paused = Arc::new(AtomicBool::new(false));
    let (seen, stop) = (closed.clone(), paused.clone());
    let router = Router::new()
        .ws("/ws", move |_, hs| {
            if hs.protocols().contains(&"chat") {
                hs.select_protocol("chat");
            }
            Ok(Echo {
                closed: seen.clone(),
                paused: stop.clone(),
            })
        })
        .get("/plain", |_| Response::text("plain"));
    Fixture {
        server: TestServer::start_with(h2c_config(), router).expect("server starts"),
        closed,
        paused,
    }
}

/// What the WebSocket tests add to the raw client.
impl H2 {
    /// `GET /plain` on `stream`, its body-less request ended.
    fn get_plain(&mut self, stream: u32) {
        let fields = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/plain"),
            (":authority", "localhost"),
        ];
        self.request(stream, &fields, true);
    }

    /// Sends a WebSocket frame on `stream`.
    fn ws_send(&mut self, stream: u32, b0: u8, payload: &[u8]) {
        let f = ws_frame(b0, payload);
        for piece in f.chunks(16_384) {
            self.send(DATA, 0, stream, piece);
        }
    }

    /// Reads one WebSocket frame from `stream`'s DATA: (first byte, payload), or `None` at
    /// END_STREAM.
    fn ws_read(&mut self, stream: u32, held: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
        loop {
            if let Some((b0, payload, used)) = parse_ws(held) {
                held.drain(..used);
                return Some((b0, payload));
            }
            let f = self.next_on(stream);
            if f.kind == WINDOW_UPDATE {
                continue; // the window its reader gave back
            }
            assert_eq!(f.kind, DATA, "{f:?}");
            held.extend_from_slice(&f.payload);
            if f.flags & END_STREAM != 0 && parse_ws(held).is_none() {
                assert!(held.is_empty(), "a cut frame: {held:x?}");
                return None;
            }
        }
    }
}

use common::masked_frame as ws_frame;

/// A whole server frame at the start of `b`: (first byte, payload, bytes used).
fn parse_ws(b: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    if b.len() < 2 {
        return None;
    }
    assert_eq!(b[1] & 0x80, 0, "server frames are not masked");
    let (len, at) = match b[1] & 0x7f {
        126 if b.len() >= 4 => (u16::from_be_bytes([b[2], b[3]]) as usize, 4),
        127 if b.len() >= 10 => (
            u64::from_be_bytes(b[2..10].try_into().unwrap()) as usize,
            10,
        ),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    (b.len() >= at + len).then(|| (b[0], b[at..at + len].to_vec(), at + len))
}

fn wait_for(closed: &Closed, n: usize) -> Vec<Option<u16>> {
    for _ in 0..500 {
        let got = closed.lock().unwrap().clone();
        if got.len() >= n {
            return got;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    closed.lock().unwrap().clone()
}

/// RFC 8441 §3: SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 where a WebSocket route exists, and not
/// at all elsewhere; without it, `:protocol` is an unknown pseudo-header (a stream error).
#[test]
fn the_setting_is_announced_only_where_a_websocket_route_exists() {
    let f = fixture();
    let c = H2::connect(f.server.h2c_addr().unwrap(), TIMEOUT);
    assert!(c.settings.contains(&(8, 1)), "{:?}", c.settings);

    let plain = Router::new().get("/plain", |_| Response::text("plain"));
    let server = TestServer::start_with(h2c_config(), plain).unwrap();
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    assert!(
        !c.settings.iter().any(|(id, _)| *id == 8),
        "{:?}",
        c.settings
    );
    c.request(1, &connect_fields("/plain"), false);
    let f = c.next_on(1);
    assert_eq!(
        (f.kind, f.payload),
        (RST_STREAM, 1u32.to_be_bytes().to_vec())
    );
    // The connection goes on.
    c.get_plain(3);
    assert_eq!(status(&c.answer(3)), "200");
}

#[test]
fn an_extended_connect_opens_a_websocket_that_echoes_beside_other_streams() {
    let f = fixture();
    let mut c = H2::connect(f.server.h2c_addr().unwrap(), TIMEOUT);
    let answer = c.open(1, "/ws", &[("sec-websocket-protocol", "v1, chat")]);
    assert_eq!(status(&answer), "200", "{answer:?}");
    assert_eq!(
        has(&answer, "sec-websocket-protocol").as_deref(),
        Some("chat")
    );
    assert_eq!(has(&answer, "sec-websocket-accept"), None, "{answer:?}");
    assert_eq!(has(&answer, "content-length"), None, "{answer:?}");

    let mut held1 = Vec::new();
    c.ws_send(1, 0x81, b"hello");
    assert_eq!(c.ws_read(1, &mut held1), Some((0x81, b"hello".to_vec())));

    // A second WebSocket and a plain request on the same connection.
    let answer = c.open(3, "/ws", &[]);
    assert_eq!(status(&answer), "200");
    assert_eq!(has(&answer, "sec-websocket-protocol"), None);
    c.get_plain(5);
    assert_eq!(status(&c.answer(5)), "200");
    let mut held3 = Vec::new();
    c.ws_send(3, 0x82, &[0, 1, 2]);
    c.ws_send(1, 0x81, b"again");
    assert_eq!(c.ws_read(3, &mut held3), Some((0x82, vec![0, 1, 2])));
    assert_eq!(c.ws_read(1, &mut held1), Some((0x81, b"again".to_vec())));

    // 300 kB each way: more than either side's initial stream window (65,535 bytes for the
    // server's sends until our SETTINGS, 1 MiB ours) would hold in one go in DATA frames of
    // 16 KiB.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    c.ws_send(3, 0x82, &big);
    assert_eq!(c.ws_read(3, &mut held3), Some((0x82, big)));

    // A sender on another thread reaches the stream.
    c.ws_send(1, 0x81, b"from a thread");
    assert_eq!(
        c.ws_read(1, &mut held1),
        Some((0x81, b"sent from a thread".to_vec()))
    );

    // The close handshake: our close, the server's, its END_STREAM, then ours.
    c.ws_send(1, 0x88, &1000u16.to_be_bytes());
    assert_eq!(
        c.ws_read(1, &mut held1),
        Some((0x88, 1000u16.to_be_bytes().to_vec()))
    );
    assert_eq!(c.ws_read(1, &mut held1), None, "END_STREAM after the close");
    c.send(DATA, END_STREAM, 1, &[]);
    assert_eq!(wait_for(&f.closed, 1), [Some(1000)]);

    // A reset from the client is the handler's end, with no code.
    c.send(RST_STREAM, 0, 3, &8u32.to_be_bytes());
    assert_eq!(wait_for(&f.closed, 2), [Some(1000), None]);

    // The connection still serves.
    c.get_plain(7);
    assert_eq!(status(&c.answer(7)), "200");
}

#[test]
fn refused_extended_connects() {
    let f = fixture();
    let mut c = H2::connect(f.server.h2c_addr().unwrap(), TIMEOUT);
    // No route at the path: 404; a route that is not WebSocket: 405 naming its methods.
    let a = c.open(1, "/nothing", &[]);
    assert_eq!(status(&a), "404", "{a:?}");
    let a = c.open(3, "/plain", &[]);
    assert_eq!(status(&a), "405", "{a:?}");
    assert_eq!(has(&a, "allow").as_deref(), Some("GET, HEAD"), "{a:?}");
    // Another protocol: 501.
    let mut fields = connect_fields("/ws");
    fields[1] = (":protocol", "webtransport");
    c.request(5, &fields, false);
    assert_eq!(status(&c.answer(5)), "501");
    // RFC 8441 §5: the version is 13, as over HTTP/1.1.
    let mut fields = connect_fields("/ws");
    fields[5] = ("sec-websocket-version", "8");
    c.request(7, &fields, false);
    let a = c.answer(7);
    assert_eq!(status(&a), "426", "{a:?}");
    assert_eq!(has(&a, "sec-websocket-version").as_deref(), Some("13"));
    // RFC 8441 §4: :path is needed (malformed without: a stream error).
    let fields: Vec<_> = connect_fields("/ws")
        .into_iter()
        .filter(|(n, _)| *n != ":path")
        .collect();
    c.request(9, &fields, false);
    let r = c.next_on(9);
    assert_eq!(
        (r.kind, r.payload),
        (RST_STREAM, 1u32.to_be_bytes().to_vec())
    );
    // None of these reached the handler.
    assert!(f.closed.lock().unwrap().is_empty());
}

/// A handler that stops reading holds the client to the stream's window: the server gives
/// no window back until it reads again, then everything arrives in order.
#[test]
fn a_paused_handler_holds_the_client_to_one_stream_window() {
    let f = fixture();
    let mut c = H2::connect(f.server.h2c_addr().unwrap(), TIMEOUT);
    assert_eq!(status(&c.open(1, "/ws", &[])), "200");
    f.paused.store(true, Ordering::SeqCst);
    // 2 MiB in 16 KiB messages, more than the 1 MiB stream window the server announced.
    let msg = vec![7u8; 16_000];
    let frames: Vec<u8> = (0..131).flat_map(|_| ws_frame(0x82, &msg)).collect();
    let window = 1usize << 20;
    let (tx, rx) = mpsc::channel();
    let mut writer = c.s.try_clone().unwrap();
    let first: Vec<u8> = frames[..window].to_vec();
    std::thread::spawn(move || {
        for piece in first.chunks(16_384) {
            let mut f = Vec::new();
            f.extend_from_slice(&(piece.len() as u32).to_be_bytes()[1..]);
            f.extend_from_slice(&[DATA, 0, 0, 0, 0, 1]);
            f.extend_from_slice(piece);
            writer.write_all(&f).unwrap();
        }
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("one window is taken");
    // Nothing comes back while the handler is paused: no echo, no WINDOW_UPDATE for the
    // stream (the connection's may come).
    c.s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut h = [0u8; 9];
    loop {
        match c.s.read_exact(&mut h) {
            Ok(()) => {
                let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]);
                let mut p = vec![0u8; len];
                c.s.read_exact(&mut p).unwrap();
                assert_ne!(stream, 1, "stream 1 moved while paused: kind {}", h[3]);
            }
            Err(e) => {
                assert!(
                    matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                    "{e}"
                );
                break;
            }
        }
    }
    // A byte over the window is a flow-control error: the server never gave more.
    c.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    f.paused.store(false, Ordering::SeqCst);
    // The handler reads again once the worker visits the stream: a ping from our side of
    // the connection is such a visit.
    c.send(6, 0, 0, &[0; 8]);
    // The window comes back, and the rest goes.
    let mut sent = window;
    let mut held = Vec::new();
    let mut echoed = 0;
    while echoed < 131 {
        let f = c.read();
        match (f.kind, f.stream) {
            (WINDOW_UPDATE, 1) => {
                let more = u32::from_be_bytes(f.payload[..4].try_into().unwrap()) as usize;
                let end = (sent + more).min(frames.len());
                let piece = frames[sent..end].to_vec();
                for p in piece.chunks(16_384) {
                    c.send(DATA, 0, 1, p);
                }
                sent = end;
            }
            (DATA, 1) => {
                // Our windows given back, so the echo is never held by them.
                let n = (f.payload.len() as u32).to_be_bytes();
                if !f.payload.is_empty() {
                    c.send(WINDOW_UPDATE, 0, 1, &n);
                    c.send(WINDOW_UPDATE, 0, 0, &n);
                }
                held.extend_from_slice(&f.payload);
                while let Some((b0, payload, used)) = parse_ws(&held) {
                    assert_eq!((b0, payload.len()), (0x82, 16_000));
                    held.drain(..used);
                    echoed += 1;
                }
            }
            (GOAWAY, _) => panic!("the connection ended: {f:?}"),
            _ => {}
        }
    }
    assert_eq!(sent, frames.len());
}

const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>ws over h2</title>
<script>
const seen = [];
const ws = new WebSocket("wss://" + location.host + "/ws", ["chat"]);
ws.onopen = () => {
  seen.push("open:" + ws.protocol);
  ws.send("hello over h2");
};
ws.onmessage = e => {
  seen.push("text:" + e.data);
  ws.close(1000, "done");
};
ws.onerror = () => seen.push("error");
ws.onclose = e => {
  seen.push("close:" + e.code + ":" + e.wasClean);
  fetch("/report", { method: "POST", body: seen.join("|") });
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

/// Chromium's WebSocket client over HTTP/2: the page comes over HTTPS with ALPN h2, and the
/// `wss://` it opens to the same origin rides that connection as an extended CONNECT (the
/// route sees an HTTP/2 request), with a subprotocol, an echo, and a clean close.
#[test]
fn chromium_opens_a_websocket_over_its_http2_connection() {
    let dir = std::env::temp_dir().join(format!("linerate-ws-h2-{}", std::process::id()));
    let Some(cert) = certificate(&dir) else {
        return;
    };
    let (tx, report) = mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let versions = Arc::new(Mutex::new(Vec::new()));
    let (seen, closed) = (versions.clone(), Closed::default());
    let on_close = closed.clone();
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
        .ws("/ws", move |req, hs| {
            seen.lock().unwrap().push(format!("{:?}", req.version()));
            hs.select_protocol("chat");
            Ok(Echo {
                closed: on_close.clone(),
                paused: Arc::default(),
            })
        });
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
    assert_eq!(got, "open:chat|text:hello over h2|close:1000:true");
    assert_eq!(*versions.lock().unwrap(), ["Http2"]);
    assert_eq!(wait_for(&closed, 1), [Some(1000)]);
}

/// The async variant over HTTP/2: a task that holds its messages pauses the stream's reading
/// (its queue is full, the rest of the client's bytes wait in the stream's window), and its
/// `recv` resumes it (`WsSender::resume` reaches the tunnel through its sender's channel): with
/// nothing more from the client, every message still arrives.
#[test]
fn a_task_that_reads_late_gets_every_message_through_the_resume() {
    const MESSAGES: usize = 40;
    const SIZE: usize = 16_000;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let spawn = rt.handle().clone();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Arc::new(Mutex::new(Some(go_rx)));
    let router = Router::new().ws("/ws", move |_, _| {
        let (handler, mut ws) = linerate_server::websocket::stream();
        let go = go_rx.lock().unwrap().take().expect("one connection");
        spawn.spawn(async move {
            tokio::task::block_in_place(|| go.recv().unwrap());
            let mut n = 0;
            while n < MESSAGES {
                match ws.recv().await {
                    Some(linerate_server::websocket::OwnedMessage::Binary(b)) => {
                        assert!(b.len() == SIZE && b.iter().all(|&x| x == n as u8));
                        n += 1;
                    }
                    other => panic!("{other:?}"),
                }
            }
            ws.text("all in").await.unwrap();
            // Held open until the client closes.
            while ws.recv().await.is_some() {}
        });
        Ok(handler)
    });
    let server = TestServer::start_with(h2c_config(), router).expect("server starts");
    let mut c = H2::connect(server.h2c_addr().unwrap(), TIMEOUT);
    assert_eq!(status(&c.open(1, "/ws", &[])), "200");
    for i in 0..MESSAGES {
        c.ws_send(1, 0x82, &vec![i as u8; SIZE]);
    }
    // Everything is with the server before the task reads (so the client's last bytes are
    // not what wakes the stream); the task's reading is all that can move it then.
    std::thread::sleep(Duration::from_millis(500));
    go_tx.send(()).unwrap();
    let mut held = Vec::new();
    assert_eq!(c.ws_read(1, &mut held), Some((0x81, b"all in".to_vec())));
}

/// Shutdown: the connection's GOAWAY, and a close 1001 on each WebSocket stream; the close
/// handshake ends the stream both ways and the server's drain finishes.
#[test]
fn shutdown_sends_goaway_and_closes_each_stream_1001() {
    let f = fixture();
    let mut c = H2::connect(f.server.h2c_addr().unwrap(), TIMEOUT);
    assert_eq!(status(&c.open(1, "/ws", &[])), "200");
    let mut held = Vec::new();
    c.ws_send(1, 0x81, b"before");
    assert_eq!(c.ws_read(1, &mut held), Some((0x81, b"before".to_vec())));
    let Fixture { server, closed, .. } = f;
    let stopping = std::thread::spawn(move || server.stop());
    // GOAWAY (connection-level) and the stream's close frame, in either order.
    let (mut goaway, mut close) = (false, None);
    while !(goaway && close.is_some()) {
        let fr = c.read();
        match (fr.kind, fr.stream) {
            (GOAWAY, 0) => {
                assert_eq!(&fr.payload[4..8], &0u32.to_be_bytes(), "NO_ERROR");
                goaway = true;
            }
            (DATA, 1) => {
                held.extend_from_slice(&fr.payload);
                if let Some((b0, payload, used)) = parse_ws(&held) {
                    held.drain(..used);
                    close = Some((b0, payload));
                }
            }
            _ => {}
        }
    }
    let (b0, payload) = close.unwrap();
    assert_eq!((b0, &payload[..2]), (0x88, &1001u16.to_be_bytes()[..]));
    c.ws_send(1, 0x88, &1001u16.to_be_bytes());
    assert_eq!(c.ws_read(1, &mut held), None, "END_STREAM after the close");
    c.send(DATA, END_STREAM, 1, &[]);
    stopping.join().unwrap().expect("the server stops");
    assert_eq!(*closed.lock().unwrap(), [Some(1001)]);
}
