//! WebSocket routes on a real server, over raw sockets: the handshake accepted (RFC 6455's
//! own key and accept value) and refused (426, 400), echoes of text and binary messages,
//! fragments with a ping between them, the close handshake, a protocol error's 1002, a layer
//! that refuses the handshake, a handler that closes, and the handler told of the end;
//! permessage-deflate agreed where a route turns it on (raw frames, Python's `websockets`, a
//! broadcast compressed once); the async variant (a task on a tokio runtime echoes, its queue
//! stops the reading while full, and dropping its stream closes the connection).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use linerate_server::testing::TestServer;
use linerate_server::websocket::{Message, WsHandler, WsOut};
use linerate_server::{Extensions, Layer, Request, Response, Router};

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

struct Echo {
    closed: Arc<Mutex<Vec<Option<u16>>>>,
}

impl WsHandler for Echo {
    fn on_message(&mut self, msg: Message<'_>, out: &mut WsOut<'_>) {
        match msg {
            Message::Text("close please") => out.close(4000, "as asked"),
            Message::Text("panic") => panic!("a handler bug"),
            msg => {
                out.send(msg);
            }
        }
    }
    fn on_close(&mut self, code: Option<u16>) {
        self.closed.lock().unwrap().push(code);
    }
}

/// Refuses requests without `Authorization: Bearer ok`.
struct Auth;

impl Layer for Auth {
    fn before(&self, req: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        (req.header("authorization") != Some(&b"Bearer ok"[..]))
            .then(|| Response::text("no").status(401))
    }
    fn after(&self, _: &Extensions, _: &mut Response) {}
}

struct Fixture {
    server: TestServer,
    closed: Arc<Mutex<Vec<Option<u16>>>>,
}

fn fixture() -> Fixture {
    let closed = Arc::new(Mutex::new(Vec::new()));
    let seen = closed.clone();
    let chat = Router::new()
        .ws("/private", |_, _| {
            Ok(Echo {
                closed: Arc::new(Mutex::new(Vec::new())),
            })
        })
        .layer(Auth);
    let router = Router::new()
        .ws("/ws", move |_, hs| {
            if hs.protocols().contains(&"chat") {
                hs.select_protocol("chat");
            }
            Ok(Echo {
                closed: seen.clone(),
            })
        })
        .ws("/refused", |_, _| {
            Err::<Echo, _>(Response::text("not today").status(403))
        })
        .get("/plain", |_| Response::text("plain"))
        .merge(chat);
    Fixture {
        server: TestServer::start(router).expect("server starts"),
        closed,
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

fn handshake_request(path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

/// Reads an HTTP response head (to the blank line).
fn read_head(s: &mut TcpStream) -> String {
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

/// Opens a WebSocket on `path` and checks the 101.
fn open(addr: SocketAddr, path: &str) -> TcpStream {
    let mut s = connect(addr);
    s.write_all(handshake_request(path, "").as_bytes()).unwrap();
    let head = read_head(&mut s);
    assert!(
        head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{head}"
    );
    s
}

use common::masked_frame as frame;

/// Reads one server frame: (first byte, payload).
fn read_frame(s: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut h = [0u8; 2];
    s.read_exact(&mut h).unwrap();
    assert_eq!(h[1] & 0x80, 0, "server frames are not masked");
    let len = match h[1] & 0x7F {
        126 => {
            let mut b = [0u8; 2];
            s.read_exact(&mut b).unwrap();
            u16::from_be_bytes(b) as usize
        }
        127 => {
            let mut b = [0u8; 8];
            s.read_exact(&mut b).unwrap();
            u64::from_be_bytes(b) as usize
        }
        n => n as usize,
    };
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).unwrap();
    (h[0], payload)
}

/// The connection ends (EOF) after what was read.
fn assert_ends(s: &mut TcpStream) {
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "nothing after the close: {rest:x?}");
}

#[test]
fn the_handshake_is_accepted_with_the_rfc_accept_value_and_a_chosen_subprotocol() {
    let f = fixture();
    let mut s = connect(f.server.addr());
    s.write_all(handshake_request("/ws", "Sec-WebSocket-Protocol: v1, chat\r\n").as_bytes())
        .unwrap();
    let head = read_head(&mut s).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.1 101 switching protocols\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nupgrade: websocket\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: upgrade\r\n"), "{head}");
    assert!(
        head.contains(&format!(
            "\r\nsec-websocket-accept: {}\r\n",
            ACCEPT.to_ascii_lowercase()
        )),
        "{head}"
    );
    assert!(
        head.contains("\r\nsec-websocket-protocol: chat\r\n"),
        "{head}"
    );
    assert!(
        !head.contains("content-length") && !head.contains("transfer-encoding"),
        "{head}"
    );
}

#[test]
fn refused_handshakes_get_426_or_400() {
    let f = fixture();
    let addr = f.server.addr();
    let rows = [
        // RFC 9110 §15.5.22: a plain GET to a WebSocket route.
        (
            "GET /ws HTTP/1.1\r\nHost: a\r\n\r\n".to_owned(),
            "426",
            Some("upgrade: websocket"),
        ),
        // RFC 6455 §4.2.2: another version.
        (
            handshake_request("/ws", "").replace("Version: 13", "Version: 8"),
            "426",
            Some("sec-websocket-version: 13"),
        ),
        (
            handshake_request("/ws", "").replace(KEY, "short"),
            "400",
            None,
        ),
        (
            handshake_request("/ws", "").replace("Connection: Upgrade", "Connection: close"),
            "400",
            None,
        ),
        // RFC 6455 §9.1: a malformed Sec-WebSocket-Extensions (compressing route or not).
        (
            handshake_request("/ws", "Sec-WebSocket-Extensions: permessage-deflate;;\r\n"),
            "400",
            None,
        ),
        // The accept function's own answer.
        (handshake_request("/refused", ""), "403", None),
        // A layer refuses before the handshake is accepted.
        (handshake_request("/private", ""), "401", None),
    ];
    for (request, status, field) in rows {
        let mut s = connect(addr);
        s.write_all(request.as_bytes()).unwrap();
        let head = read_head(&mut s).to_ascii_lowercase();
        assert!(
            head.starts_with(&format!("http/1.1 {status} ")),
            "{request:?}: {head}"
        );
        if let Some(field) = field {
            assert!(head.contains(field), "{request:?}: {head}");
        }
        if status == "426" {
            // RFC 9110 §7.8: whoever sends Upgrade lists it in Connection.
            assert!(
                head.contains("\r\nconnection: upgrade\r\n"),
                "{request:?}: {head}"
            );
        }
    }
    // The layer lets an authorized handshake through.
    let mut s = connect(addr);
    s.write_all(handshake_request("/private", "Authorization: Bearer ok\r\n").as_bytes())
        .unwrap();
    assert!(read_head(&mut s).starts_with("HTTP/1.1 101 "));
}

#[test]
fn messages_are_echoed_and_a_ping_between_fragments_is_answered() {
    let f = fixture();
    let mut s = open(f.server.addr(), "/ws");
    s.write_all(&frame(0x81, b"Hello")).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"Hello".to_vec()));
    let big: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    s.write_all(&frame(0x82, &big)).unwrap();
    assert_eq!(read_frame(&mut s), (0x82, big));
    // Five sent back to back (HttpArena's validator does this) come back in order.
    let burst: Vec<u8> = (0..5)
        .flat_map(|i| frame(0x81, format!("msg-{i}").as_bytes()))
        .collect();
    s.write_all(&burst).unwrap();
    for i in 0..5 {
        assert_eq!(read_frame(&mut s), (0x81, format!("msg-{i}").into_bytes()));
    }
    let mut pieces = frame(0x01, "κόσ".as_bytes());
    pieces.extend(frame(0x89, b"ping!"));
    pieces.extend(frame(0x80, "με".as_bytes()));
    // One byte at a time.
    for b in pieces {
        s.write_all(&[b]).unwrap();
    }
    assert_eq!(read_frame(&mut s), (0x8A, b"ping!".to_vec()));
    assert_eq!(read_frame(&mut s), (0x81, "κόσμε".as_bytes().to_vec()));
    // The client closes: the code is echoed and the server ends the TCP connection.
    s.write_all(&frame(0x88, &1000u16.to_be_bytes())).unwrap();
    assert_eq!(read_frame(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
    assert_ends(&mut s);
    assert_eq!(*f.closed.lock().unwrap(), [Some(1000)]);
}

#[test]
fn a_protocol_error_closes_1002_and_invalid_text_1007() {
    let f = fixture();
    let mut s = open(f.server.addr(), "/ws");
    // RFC 6455 §5.1: unmasked.
    s.write_all(&[0x81, 0x02, b'h', b'i']).unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!((b0, &payload[..2]), (0x88, &1002u16.to_be_bytes()[..]));
    assert_ends(&mut s);
    let mut s = open(f.server.addr(), "/ws");
    s.write_all(&frame(0x81, b"\xce\xba\xff")).unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!((b0, &payload[..2]), (0x88, &1007u16.to_be_bytes()[..]));
    assert_ends(&mut s);
}

#[test]
fn a_handler_closes_and_a_panicking_one_closes_1011_while_the_server_goes_on() {
    let f = fixture();
    let mut s = open(f.server.addr(), "/ws");
    s.write_all(&frame(0x81, b"close please")).unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!(b0, 0x88);
    assert_eq!(&payload[..2], &4000u16.to_be_bytes());
    assert_eq!(&payload[2..], b"as asked");
    // Messages after the server's close are dropped; the client's close ends it.
    s.write_all(&frame(0x81, b"ignored")).unwrap();
    s.write_all(&frame(0x88, &4000u16.to_be_bytes())).unwrap();
    assert_ends(&mut s);

    let mut s = open(f.server.addr(), "/ws");
    s.write_all(&frame(0x81, b"panic")).unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!((b0, &payload[..2]), (0x88, &1011u16.to_be_bytes()[..]));
    // The worker goes on serving.
    let mut s = connect(f.server.addr());
    s.write_all(b"GET /plain HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(
        all.starts_with("HTTP/1.1 200 ") && all.ends_with("plain"),
        "{all}"
    );
}

#[test]
fn a_client_that_drops_is_reported_to_the_handler() {
    let f = fixture();
    let s = open(f.server.addr(), "/ws");
    drop(s);
    for _ in 0..200 {
        if !f.closed.lock().unwrap().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(*f.closed.lock().unwrap(), [None]);
}

const PAGE: &str = r#"<!doctype html><meta charset="utf-8"><title>ws</title>
<script>
const seen = [];
const long = "κόσμε, hello again; ".repeat(100);
const ws = new WebSocket("ws://" + location.host + "/ws", ["chat"]);
ws.binaryType = "arraybuffer";
ws.onopen = () => {
  seen.push("open:" + ws.protocol + ":" + ws.extensions);
  ws.send("hello κόσμε");
  ws.send(long);
  ws.send(new Uint8Array([0, 1, 254, 255]).buffer);
};
ws.onmessage = e => {
  if (e.data === long) {
    seen.push("long:" + e.data.length);
  } else if (typeof e.data === "string") {
    seen.push("text:" + e.data);
  } else {
    seen.push("binary:" + Array.from(new Uint8Array(e.data)).join(","));
    ws.close(1000, "done");
  }
};
ws.onclose = e => {
  seen.push("close:" + e.code + ":" + e.wasClean);
  fetch("/report", { method: "POST", body: seen.join("|") });
};
</script>"#;

/// Chromium's own WebSocket client (headless): the handshake with a subprotocol and
/// permessage-deflate (Chromium offers it), text echoes (a long one compressed both ways)
/// and a binary one, and a clean close begun by the browser.
#[test]
fn chromium_opens_echoes_and_closes_cleanly() {
    let (tx, report) = std::sync::mpsc::channel::<String>();
    let tx = Mutex::new(tx);
    let closed = Arc::new(Mutex::new(Vec::new()));
    let seen = closed.clone();
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
        .ws_with("/ws", compressing(), move |_, hs| {
            hs.select_protocol("chat");
            Ok(Echo {
                closed: seen.clone(),
            })
        });
    let server = TestServer::start(router).expect("server starts");
    let profile = std::env::temp_dir().join(format!("linerate-ws-chromium-{}", std::process::id()));
    let Some(_browser) = common::chromium(&format!("http://{}/", server.addr()), &profile) else {
        return; // NOT RUN, said
    };
    let got = report
        .recv_timeout(Duration::from_secs(60))
        .expect("the page reports within the limit");
    let _ = std::fs::remove_dir_all(&profile);
    assert_eq!(
        got,
        "open:chat:permessage-deflate; server_no_context_takeover|text:hello κόσμε|long:2000|binary:0,1,254,255|close:1000:true"
    );
    assert_eq!(*closed.lock().unwrap(), [Some(1000)]);
}

/// A chat room: every member's messages go to every member, through each connection's
/// `WsSender` (the worker's inbox, as from another thread).
struct Member {
    room: Arc<linerate_server::websocket::Broadcast>,
    left: Arc<std::sync::atomic::AtomicUsize>,
}

impl WsHandler for Member {
    fn on_open(&mut self, out: &mut WsOut<'_>) {
        self.room.join(out.sender());
    }
    fn on_message(&mut self, msg: Message<'_>, _: &mut WsOut<'_>) {
        if let Message::Text(t) = msg {
            self.room
                .send(&linerate_server::websocket::Encoded::text(t));
        }
    }
    fn on_close(&mut self, _: Option<u16>) {
        self.left.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn a_broadcast_reaches_every_member_and_drops_those_that_left() {
    let room = Arc::new(linerate_server::websocket::Broadcast::new());
    let joined = room.clone();
    let left = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let leaving = left.clone();
    let router = Router::new().ws("/chat", move |_, _| {
        Ok(Member {
            room: joined.clone(),
            left: leaving.clone(),
        })
    });
    let server = TestServer::start(router).expect("server starts");
    let mut a = open(server.addr(), "/chat");
    let mut b = open(server.addr(), "/chat");
    let c = open(server.addr(), "/chat");
    for _ in 0..200 {
        if room.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(room.len(), 3);
    drop(c);
    for _ in 0..200 {
        if left.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    a.write_all(&frame(0x81, b"hello, room")).unwrap();
    assert_eq!(read_frame(&mut a), (0x81, b"hello, room".to_vec()));
    assert_eq!(read_frame(&mut b), (0x81, b"hello, room".to_vec()));
    b.write_all(&frame(0x81, b"hi a")).unwrap();
    assert_eq!(read_frame(&mut a), (0x81, b"hi a".to_vec()));
    assert_eq!(read_frame(&mut b), (0x81, b"hi a".to_vec()));
    assert_eq!(room.len(), 2, "the member that left is out of the room");
}

/// A thread sends on a connection with its `WsSender`, then closes it; once the client has
/// gone, a send is refused with `Gone`.
#[test]
fn a_sender_on_another_thread_sends_closes_and_learns_the_client_left() {
    use linerate_server::streaming::WriteError;
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    struct Ticker(Mutex<std::sync::mpsc::Sender<linerate_server::websocket::WsSender>>);
    impl WsHandler for Ticker {
        fn on_open(&mut self, out: &mut WsOut<'_>) {
            let sender = out.sender();
            let _ = self.0.lock().unwrap().send(sender.clone());
            std::thread::spawn(move || {
                for i in 0..3 {
                    sender.text(&format!("tick {i}")).unwrap();
                }
                sender.close();
            });
        }
        fn on_message(&mut self, _: Message<'_>, _: &mut WsOut<'_>) {}
    }
    let router = Router::new().ws("/ticks", move |_, _| {
        let (t, r) = std::sync::mpsc::channel();
        let _ = tx.lock().unwrap().send(r);
        Ok(Ticker(Mutex::new(t)))
    });
    let server = TestServer::start(router).expect("server starts");
    let mut s = open(server.addr(), "/ticks");
    for i in 0..3 {
        assert_eq!(read_frame(&mut s), (0x81, format!("tick {i}").into_bytes()));
    }
    assert_eq!(read_frame(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
    s.write_all(&frame(0x88, &1000u16.to_be_bytes())).unwrap();
    assert_eq!(read_frame_or_end(&mut s), None);
    let sender = rx.recv().unwrap().recv().unwrap();
    for _ in 0..200 {
        if sender.is_gone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(sender.text("late"), Err(WriteError::Gone));
}

/// The next frame, or `None` at the end of the connection.
fn read_frame_or_end(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut b = [0u8; 1];
    match s.read(&mut b) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some((b[0], Vec::new())),
    }
}

/// Shutdown closes an open WebSocket with 1001 and waits for the client's close.
#[test]
fn shutdown_closes_1001() {
    let closed = Arc::new(Mutex::new(Vec::new()));
    let seen = closed.clone();
    let router = Router::new().ws("/ws", move |_, _| {
        Ok(Echo {
            closed: seen.clone(),
        })
    });
    let server = TestServer::start(router).expect("server starts");
    let mut s = open(server.addr(), "/ws");
    s.write_all(&frame(0x81, b"before")).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"before".to_vec()));
    let stopping = std::thread::spawn(move || drop(server));
    let (b0, payload) = read_frame(&mut s);
    assert_eq!((b0, &payload[..2]), (0x88, &1001u16.to_be_bytes()[..]));
    s.write_all(&frame(0x88, &1001u16.to_be_bytes())).unwrap();
    assert_eq!(read_frame_or_end(&mut s), None);
    stopping.join().unwrap();
    assert_eq!(*closed.lock().unwrap(), [Some(1001)]);
}

/// A client that reads nothing holds its sender back: the thread sending 256 MiB is held
/// to what the sender's room, the connection's output limit and the sockets take, until the
/// client leaves and the sender learns it.
#[test]
fn a_client_that_reads_nothing_holds_the_sender_back() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const TOTAL: usize = 256 << 20;
    const PIECE: usize = 16 << 10;
    let taken = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(Mutex::new(None));
    struct Flood(Arc<AtomicUsize>, Arc<Mutex<Option<bool>>>);
    impl WsHandler for Flood {
        fn on_open(&mut self, out: &mut WsOut<'_>) {
            let (sender, taken, ended) = (out.sender(), self.0.clone(), self.1.clone());
            std::thread::spawn(move || {
                let piece = vec![7u8; PIECE];
                let mut sent = 0;
                let gone = loop {
                    if sent >= TOTAL {
                        break false;
                    }
                    match sender.binary(&piece) {
                        Ok(()) => {
                            sent += PIECE;
                            taken.store(sent, Ordering::SeqCst);
                        }
                        Err(linerate_server::streaming::WriteError::Full) => {
                            if sender.wait_room().is_err() {
                                break true;
                            }
                        }
                        Err(linerate_server::streaming::WriteError::Gone) => break true,
                    }
                };
                *ended.lock().unwrap() = Some(gone);
            });
        }
        fn on_message(&mut self, _: Message<'_>, _: &mut WsOut<'_>) {}
    }
    let (t, e) = (taken.clone(), ended.clone());
    let router = Router::new().ws("/flood", move |_, _| Ok(Flood(t.clone(), e.clone())));
    let server = TestServer::start(router).expect("server starts");
    let s = open(server.addr(), "/flood");
    // Nothing is read for two seconds: a correct server never lets the sender finish.
    std::thread::sleep(Duration::from_secs(2));
    let held = taken.load(Ordering::SeqCst);
    assert!(held > 0, "the sender sent something");
    assert!(held < 64 << 20, "{held} bytes taken with nobody reading");
    assert_eq!(
        *ended.lock().unwrap(),
        None,
        "the sender is still held back"
    );
    drop(s);
    for _ in 0..500 {
        if ended.lock().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        *ended.lock().unwrap(),
        Some(true),
        "the sender learned the client left"
    );
}

// permessage-deflate (RFC 7692).

use linerate_server::websocket::{Encoded, WsOptions};
use linerate_ws::deflate::{Deflate, Inflate};

fn compressing() -> WsOptions {
    WsOptions {
        compression: true,
        ..WsOptions::default()
    }
}

/// A payload compressed as a client would (no context kept).
fn deflated(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Deflate::new(15).message(data, &mut out);
    out
}

fn inflated(payload: &[u8]) -> Vec<u8> {
    let mut z = Inflate::new();
    let mut out = Vec::new();
    z.piece(payload, &mut out, 1 << 24).unwrap();
    z.finish(&mut out, 1 << 24).unwrap();
    out
}

/// Opens a WebSocket with `extensions` offered; the 101's head.
fn open_offering(addr: SocketAddr, path: &str, extensions: &str) -> (TcpStream, String) {
    let mut s = connect(addr);
    let extra = format!("Sec-WebSocket-Extensions: {extensions}\r\n");
    s.write_all(handshake_request(path, &extra).as_bytes())
        .unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    (s, head)
}

fn json(n: usize) -> String {
    (0..n)
        .map(|i| format!("{{\"id\":{i},\"name\":\"linerate\",\"tags\":[\"ws\",\"deflate\"]}}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A route that turns compression on answers the offer in its 101, inflates the client's
/// compressed messages and compresses its own (RSV1) when they are long enough; a route
/// that leaves it off declines the offer, and RSV1 there fails the connection (1002).
#[test]
fn compression_is_agreed_where_a_route_turns_it_on() {
    let router = Router::new()
        .ws_with("/z", compressing(), |_, _| {
            Ok(Echo {
                closed: Arc::new(Mutex::new(Vec::new())),
            })
        })
        .ws("/plain", |_, _| {
            Ok(Echo {
                closed: Arc::new(Mutex::new(Vec::new())),
            })
        })
        .ws_with("/declined", compressing(), |_, hs| {
            assert!(hs.compression(), "offered on a compressing route");
            hs.decline_compression();
            Ok(Echo {
                closed: Arc::new(Mutex::new(Vec::new())),
            })
        })
        .ws_with(
            "/fresh",
            WsOptions {
                client_no_context_takeover: true,
                ..compressing()
            },
            |_, _| {
                Ok(Echo {
                    closed: Arc::new(Mutex::new(Vec::new())),
                })
            },
        );
    let server = TestServer::start(router).expect("server starts");
    // A route may ask every client to compress each message afresh (RFC 7692 §7.1.1.2).
    let (_, head) = open_offering(server.addr(), "/fresh", "permessage-deflate");
    assert!(
        head.contains("\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; client_no_context_takeover\r\n"),
        "{head}"
    );
    let (mut s, head) = open_offering(
        server.addr(),
        "/z",
        "permessage-deflate; client_max_window_bits",
    );
    assert!(
        head.contains(
            "\r\nSec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover\r\n"
        ),
        "{head}"
    );
    let text = json(100);
    s.write_all(&frame(0xC1, &deflated(text.as_bytes())))
        .unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!(b0, 0xC1, "compressed text");
    assert!(payload.len() < text.len() / 5, "{}", payload.len());
    assert_eq!(inflated(&payload), text.as_bytes());
    // Short: echoed as it is, whether it came compressed or not.
    s.write_all(&frame(0xC1, &deflated(b"short"))).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"short".to_vec()));
    s.write_all(&frame(0x82, &[9; 50])).unwrap();
    assert_eq!(read_frame(&mut s), (0x82, vec![9; 50]));

    // The accept function may decline it for one connection.
    let (_, head) = open_offering(server.addr(), "/declined", "permessage-deflate");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("sec-websocket-extensions"),
        "{head}"
    );
    let (mut s, head) = open_offering(server.addr(), "/plain", "permessage-deflate");
    assert!(
        !head
            .to_ascii_lowercase()
            .contains("sec-websocket-extensions"),
        "{head}"
    );
    s.write_all(&frame(0xC1, &deflated(text.as_bytes())))
        .unwrap();
    let (b0, payload) = read_frame(&mut s);
    assert_eq!((b0, &payload[..2]), (0x88, &1002u16.to_be_bytes()[..]));
}

/// A broadcast compresses a message once: members that compress with the full window get
/// the compressed frame, one that asked for a smaller window and one that offered nothing
/// get it as it is.
#[test]
fn a_broadcast_goes_compressed_to_members_that_compress() {
    let room = Arc::new(linerate_server::websocket::Broadcast::new());
    let joined = room.clone();
    let router = Router::new().ws_with("/chat", compressing(), move |_, _| {
        Ok(Member {
            room: joined.clone(),
            left: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        })
    });
    let server = TestServer::start(router).expect("server starts");
    let (mut full, _) = open_offering(server.addr(), "/chat", "permessage-deflate");
    let (mut small, head) = open_offering(
        server.addr(),
        "/chat",
        "permessage-deflate; server_max_window_bits=10",
    );
    assert!(head.contains("server_max_window_bits=10"), "{head}");
    let mut plain = open(server.addr(), "/chat");
    for _ in 0..200 {
        if room.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(room.len(), 3);
    let text = json(50);
    plain.write_all(&frame(0x81, text.as_bytes())).unwrap();
    let (b0, payload) = read_frame(&mut full);
    assert_eq!(b0, 0xC1);
    assert_eq!(inflated(&payload), text.as_bytes());
    assert_eq!(read_frame(&mut small), (0x81, text.clone().into_bytes()));
    assert_eq!(read_frame(&mut plain), (0x81, text.clone().into_bytes()));
    // The same encoded message, sent again, is compressed to the same bytes.
    let encoded = Encoded::text(&text);
    assert_eq!(room.send(&encoded).sent, 3);
    assert_eq!(room.send(&encoded).sent, 3);
    let (_, first) = read_frame(&mut full);
    assert_eq!(read_frame(&mut full), (0xC1, first.clone()));
    assert_eq!(first, payload);
}

/// Python's `websockets` offers permessage-deflate by default: text and binary messages,
/// long ones compressed both ways (its compressor keeps its context; ours starts each
/// message afresh), short ones not. NOT RUN without python3 and `websockets`.
#[test]
fn python_websockets_exchanges_compressed_messages() {
    use std::process::Command;
    let has = Command::new("python3")
        .args(["-c", "import websockets.sync.client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        println!("NOT RUN: no python3 with websockets (pip install websockets)");
        return;
    }
    let router = Router::new().ws_with("/ws", compressing(), |_, _| {
        Ok(Echo {
            closed: Arc::new(Mutex::new(Vec::new())),
        })
    });
    let server = TestServer::start(router).expect("server starts");
    let script = r#"
import json, sys
from websockets.sync.client import connect
with connect(sys.argv[1], max_size=2**24, open_timeout=10, close_timeout=10) as ws:
    text = json.dumps([{"id": i, "name": "linerate", "tags": ["ws", "deflate"]} for i in range(3000)])
    data = bytes(range(256)) * 800
    for msg in [text, data, "short", text, b"\x00" * 1000000, text[:500]]:
        ws.send(msg)
        got = ws.recv(timeout=10)
        assert got == msg, (len(got), len(msg))
    print(ws.response.headers["Sec-WebSocket-Extensions"])
"#;
    let out = Command::new("python3")
        .args(["-c", script, &format!("ws://{}/ws", server.addr())])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "permessage-deflate; server_no_context_takeover"
    );
}

// The async variant: connections served by tasks on a tokio runtime.

use linerate_server::websocket::{OwnedMessage, WsStream};

/// A router whose `/ws` connections are each served by `task` on `rt`.
fn async_router<F, Fut>(rt: &tokio::runtime::Runtime, task: F) -> Router
where
    F: Fn(WsStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let spawn = rt.handle().clone();
    Router::new().ws("/ws", move |_, _| {
        let (handler, ws) = linerate_server::websocket::stream();
        spawn.spawn(task(ws));
        Ok(handler)
    })
}

#[test]
fn a_task_on_a_tokio_runtime_echoes_and_hears_the_close() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Arc::new(Mutex::new(tx));
    let router = async_router(&rt, move |mut ws| {
        let tx = tx.clone();
        async move {
            let mut seen = Vec::new();
            while let Some(msg) = ws.recv().await {
                ws.send(msg.as_message()).await.unwrap();
                seen.push(msg);
            }
            let _ = tx.lock().unwrap().send((seen, ws.ended()));
        }
    });
    let server = TestServer::start(router).expect("server starts");
    let mut s = open(server.addr(), "/ws");
    s.write_all(&frame(0x81, b"hello")).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"hello".to_vec()));
    s.write_all(&frame(0x82, &[0, 1, 2, 255])).unwrap();
    assert_eq!(read_frame(&mut s), (0x82, vec![0, 1, 2, 255]));
    // Fragmented, a ping between: the task sees one message, the ping is the server's.
    s.write_all(&frame(0x01, b"hel")).unwrap();
    s.write_all(&frame(0x89, b"p")).unwrap();
    s.write_all(&frame(0x80, b"lo again")).unwrap();
    assert_eq!(read_frame(&mut s), (0x8A, b"p".to_vec()));
    assert_eq!(read_frame(&mut s), (0x81, b"hello again".to_vec()));
    s.write_all(&frame(0x88, &1000u16.to_be_bytes())).unwrap();
    assert_eq!(read_frame(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
    assert_ends(&mut s);
    let (seen, ended) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(
        seen,
        [
            OwnedMessage::Text("hello".into()),
            OwnedMessage::Binary(vec![0, 1, 2, 255]),
            OwnedMessage::Text("hello again".into()),
        ]
    );
    assert_eq!(ended, Some(Some(1000)));
}

/// A task that does not take its messages holds the client back: the server stops reading
/// once the queue is full, so a client writing 64 MiB is stuck at what the sockets hold,
/// and the queue stays near its limit. Once the task reads, every message arrives, in order.
#[test]
fn a_task_that_does_not_read_stops_the_reading_until_it_does() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const MESSAGES: usize = 256;
    const SIZE: usize = 256 << 10;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go_rx = Arc::new(Mutex::new(Some(go_rx)));
    let (queued_tx, queued_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let router = async_router(&rt, move |mut ws| {
        let go = go_rx.lock().unwrap().take().expect("one connection");
        let (queued_tx, done_tx) = (queued_tx.clone(), done_tx.clone());
        async move {
            let first = ws.recv().await.expect("a first message");
            // Hold everything else until the test says so (a blocking wait, on purpose:
            // nothing on this task runs meanwhile).
            tokio::task::block_in_place(|| go.recv().unwrap());
            let _ = queued_tx.send(ws.queued());
            let mut received = vec![first];
            while received.len() < MESSAGES {
                received.push(ws.recv().await.expect("every message"));
            }
            let in_order = received.iter().enumerate().all(|(i, m)| {
                matches!(m, OwnedMessage::Binary(b) if b.len() == SIZE && b.iter().all(|&x| x == i as u8))
            });
            let _ = done_tx.send(in_order);
            ws.text("all in").await.unwrap();
        }
    });
    let server = TestServer::start(router).expect("server starts");
    let s = open(server.addr(), "/ws");
    let written = Arc::new(AtomicUsize::new(0));
    let mut w = s.try_clone().unwrap();
    let counted = written.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..MESSAGES {
            w.write_all(&frame(0x82, &vec![i as u8; SIZE])).unwrap();
            counted.fetch_add(SIZE, Ordering::SeqCst);
        }
    });
    // Two seconds for a server that kept reading to take it all.
    std::thread::sleep(Duration::from_secs(2));
    let held = written.load(Ordering::SeqCst);
    assert!(
        held < MESSAGES * SIZE / 2,
        "{held} bytes written while the task read one message"
    );
    go_tx.send(()).unwrap();
    let queued = queued_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The limit, plus what one read (64 KiB) held, plus the message that crossed it.
    assert!(
        queued <= linerate_server::websocket::MAX_INBOUND_BYTES + (64 << 10) + SIZE,
        "{queued} bytes queued"
    );
    assert!(
        done_rx.recv_timeout(Duration::from_secs(30)).unwrap(),
        "all in order"
    );
    writer.join().unwrap();
    let mut s = s;
    assert_eq!(read_frame(&mut s), (0x81, b"all in".to_vec()));
}

#[test]
fn a_dropped_stream_closes_its_connection_1000() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let router = async_router(&rt, |mut ws| async move {
        let msg = ws.recv().await.expect("a message");
        ws.send(msg.as_message()).await.unwrap();
    });
    let server = TestServer::start(router).expect("server starts");
    let mut s = open(server.addr(), "/ws");
    s.write_all(&frame(0x81, b"one")).unwrap();
    assert_eq!(read_frame(&mut s), (0x81, b"one".to_vec()));
    assert_eq!(read_frame(&mut s), (0x88, 1000u16.to_be_bytes().to_vec()));
    s.write_all(&frame(0x88, &1000u16.to_be_bytes())).unwrap();
    assert_ends(&mut s);
}
