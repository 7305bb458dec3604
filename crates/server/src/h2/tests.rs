//! The HTTP/2 connection as byte tables: frames (and time) in, frames and actions out, no
//! sockets. Each test names the rule (RFC 9113) or the defence it pins; the raw-socket tests
//! in `crates/linerate/tests/http2.rs` and h2spec see the same from outside.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use linerate_http1::{BodyDecoder, DateCache, HeadRoom, Limits, ParseError, RequestHead, Version};

use super::conn::Conn;
use super::frame::{self, Code, Head, flag, kind, setting};
use super::stream::{
    MAX_BODY_STREAMS, MAX_CONCURRENT_STREAMS, MAX_CONTINUATIONS, MAX_CONTROL_PER_SEC,
    MAX_RESETS_PER_SEC, SMALL_BODY,
};
use crate::h1::{ConnConfig, Cx, Decision, Exchange, Service, Transmit};
use crate::pool::Pool;
use crate::response::{Body, FileBody, Response};

/// The test application: `/x` answers "x"; `/big` 100 bytes; `/file` a file body of
/// "0123456789"; `/echo` the body; `/defer` defers (answered with [`H::complete`]); anything
/// else 404. Bodies are limited to 16 bytes, but `/sink` takes any.
#[derive(Default)]
struct App {
    deferred: Vec<u64>,
    own: Vec<u16>,
    paths: Vec<String>,
    versions: Vec<Version>,
    /// The `:protocol` of each extended CONNECT.
    protocols: Vec<String>,
}

struct Pending {
    defer: bool,
    body: Vec<u8>,
}

fn file_body() -> FileBody {
    let path = std::env::temp_dir().join(format!("linerate-h2-{}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(b"0123456789")
        .unwrap();
    let fd: OwnedFd = std::fs::File::open(&path).unwrap().into();
    let _ = std::fs::remove_file(&path);
    FileBody {
        file: Arc::new(fd),
        offset: 2,
        len: 6,
    }
}

/// 150,000 bytes, byte i is `i % 251`.
fn big_file() -> FileBody {
    let path = std::env::temp_dir().join(format!(
        "linerate-h2-big-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let bytes: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let fd: OwnedFd = std::fs::File::open(&path).unwrap().into();
    let _ = std::fs::remove_file(&path);
    FileBody {
        file: Arc::new(fd),
        offset: 0,
        len: 150_000,
    }
}

impl Service for App {
    type Pending = Pending;

    fn request(&mut self, req: Exchange<'_>) -> Decision<Pending> {
        let path = req.head.path(req.buf).to_string();
        self.paths.push(req.head.target(req.buf).to_string());
        self.versions.push(req.head.version());
        if let Some(p) = req.protocol {
            self.protocols.push(String::from_utf8_lossy(p).into_owned());
            return Decision::Relay { upgrade: true };
        }
        let send = Decision::Respond;
        match (path.as_str(), req.body) {
            ("/x", _) => send(Response::text("x")),
            ("/big", _) => send(Response::text_owned("b".repeat(100))),
            ("/file", _) => send(Response::new(200).body(Body::File(file_body()))),
            ("/bigfile", _) => send(Response::new(200).body(Body::File(big_file()))),
            ("/defer", Some(_)) => {
                self.deferred.push(req.id);
                Decision::Defer
            }
            ("/sink", None) => Decision::ReadBody {
                limit: u64::MAX,
                pending: Pending {
                    defer: false,
                    body: Vec::new(),
                },
            },
            ("/echo" | "/defer", None) => Decision::ReadBody {
                limit: 16,
                pending: Pending {
                    defer: path == "/defer",
                    body: Vec::new(),
                },
            },
            ("/echo", Some(b)) => send(Response::text_owned(
                String::from_utf8_lossy(b).into_owned(),
            )),
            _ => send(Response::text("nf").status(404)),
        }
    }

    fn data(&mut self, p: &mut Pending, data: &[u8]) -> Result<(), Response> {
        p.body.extend_from_slice(data);
        Ok(())
    }

    fn room(&self, _: &Pending) -> bool {
        true
    }

    fn end(&mut self, id: u64, p: Pending, _: BodyDecoder) -> Decision<Pending> {
        if p.defer {
            self.deferred.push(id);
            return Decision::Defer;
        }
        Decision::Respond(Response::text_owned(
            String::from_utf8_lossy(&p.body).into_owned(),
        ))
    }

    fn answered(&mut self, status: u16, _: Option<ParseError>, _: u64, _: &[u8]) {
        self.own.push(status);
    }

    fn request_line_of(&self, _: &Self::Pending) -> Vec<u8> {
        Vec::new()
    }
}

fn cfg() -> ConnConfig {
    ConnConfig {
        limits: Limits {
            max_head_bytes: 512,
            ..Limits::default()
        },
        header_timeout: 100,
        body_timeout: 200,
        min_body_rate: 0,
        keepalive_timeout: 1_000,
        send_timeout: 300,
        min_send_rate: 0,
        linger_timeout: 50,
        deferred_timeout: 500,
        max_requests: u64::MAX,
        max_deferred: 16,
        server: Some(b"t".to_vec()),
        extended_connect: false,
    }
}

/// A frame the server sent, its header block decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum F {
    Settings(Vec<(u16, u32)>),
    SettingsAck,
    Window(u32, u32),
    Headers {
        stream: u32,
        end: bool,
        fields: Vec<(String, String)>,
    },
    Data {
        stream: u32,
        end: bool,
        data: Vec<u8>,
    },
    Rst(u32, u32),
    GoAway(u32, u32),
    PingAck([u8; 8]),
}

/// The connection with the driver and the client played by the test.
struct H {
    conn: Conn<Pending>,
    cx: Cx,
    head: RequestHead,
    app: App,
    /// Bytes the server transmitted and the test has not read yet.
    wire: Vec<u8>,
    decoder: linerate_hpack::Decoder,
    stalled: bool,
    in_flight: Option<Vec<u8>>,
    shut: bool,
    closed: bool,
    reset: bool,
    /// File payloads are sent this many bytes per transmit, each left in flight until
    /// [`H::file_done`] (0: all at once).
    file_chunk: usize,
    /// A file send in flight: its length.
    file_in_flight: Option<u64>,
    /// `Transmit::File`s seen.
    file_sends: usize,
}

impl H {
    /// A connection past the preface and the client's empty SETTINGS, with the server's
    /// SETTINGS, its connection WINDOW_UPDATE and the ACK read.
    fn open() -> H {
        H::opened(H::fresh())
    }

    fn opened(mut h: H) -> H {
        h.preface(&[]);
        let got = h.frames();
        assert!(matches!(got[0], F::Settings(_)), "{got:?}");
        assert!(matches!(got[1], F::Window(0, _)), "{got:?}");
        assert_eq!(got[2], F::SettingsAck);
        h
    }

    fn fresh() -> H {
        let cfg = cfg();
        let cx = Cx {
            now: 0,
            cfg,
            out: Vec::new(),
            room: HeadRoom::default(),
            pool: Pool::default(),
            date: DateCache::new(UNIX_EPOCH + Duration::from_secs(1_767_225_600)),
            draining: false,
            sendfile: false,
            alt_svc: None,
            cancelled: Vec::new(),
        };
        H {
            conn: Conn::new(0, &cx),
            cx,
            head: RequestHead::new(),
            app: App::default(),
            wire: Vec::new(),
            decoder: linerate_hpack::Decoder::new(),
            stalled: false,
            in_flight: None,
            shut: false,
            closed: false,
            reset: false,
            file_chunk: 0,
            file_in_flight: None,
            file_sends: 0,
        }
    }

    /// The transport sends file ranges itself (plain TCP) and the client takes 64 KiB
    /// frames: payloads come as `Transmit::File`.
    fn sendfile() -> H {
        let mut h = H::fresh();
        h.cx.sendfile = true;
        h.preface(&[(setting::MAX_FRAME_SIZE, 65_536)]);
        h.frames();
        h.open_windows();
        h
    }

    /// The client gives the server room for 1 MiB on every stream and on the connection.
    fn open_windows(&mut self) {
        let mut b = Vec::new();
        frame::settings(&mut b, &[(setting::INITIAL_WINDOW_SIZE, 1 << 20)]);
        frame::window_update(&mut b, 0, 1 << 20);
        self.recv(&b);
        self.frames();
    }

    /// The file send in flight finished.
    fn file_done(&mut self) {
        if let Some(n) = self.file_in_flight.take() {
            self.conn.file_sent(n, &mut self.cx);
        }
        self.flush();
    }

    fn preface(&mut self, settings: &[(u16, u32)]) {
        let mut b = frame::PREFACE.to_vec();
        frame::settings(&mut b, settings);
        self.recv(&b);
    }

    fn recv(&mut self, bytes: &[u8]) -> &mut Self {
        self.conn
            .recv(bytes, &mut self.head, &mut self.cx, &mut self.app);
        self.flush();
        self
    }

    fn at(&mut self, t: u64) -> &mut Self {
        self.cx.now = t;
        if t >= self.conn.deadline() {
            self.conn.on_timer(&mut self.cx, &mut self.app);
            self.flush();
        }
        self
    }

    fn complete(&mut self, id: u64, resp: Response) -> bool {
        let taken = self.conn.complete(id, resp, &mut self.cx);
        self.flush();
        taken
    }

    fn unstall(&mut self) {
        self.stalled = false;
        if let Some(b) = self.in_flight.take() {
            self.wire.extend_from_slice(&b);
            self.conn.sent(b.len() as u64, &mut self.cx);
        }
        self.flush();
    }

    fn flush(&mut self) {
        for _ in 0..1000 {
            match self.conn.poll_transmit(&mut self.cx) {
                Transmit::Bytes { .. } => {
                    let buf = self.conn.take_output(&mut self.cx);
                    if self.stalled {
                        self.in_flight = Some(buf);
                        self.conn.stalled(&self.cx);
                        return;
                    }
                    self.wire.extend_from_slice(&buf);
                    self.conn.sent(buf.len() as u64, &mut self.cx);
                }
                Transmit::Shutdown => {
                    self.shut = true;
                    self.conn.shut(&mut self.cx);
                }
                Transmit::Close => {
                    self.closed = true;
                    return;
                }
                Transmit::Reset => {
                    self.reset = true;
                    return;
                }
                Transmit::File { file, offset, len } => {
                    self.file_sends += 1;
                    assert!(
                        self.cx.sendfile,
                        "sendfile only where the transport takes it"
                    );
                    let n = match self.file_chunk {
                        0 => len,
                        c => len.min(c as u64),
                    };
                    let mut buf = vec![0; n as usize];
                    rustix::io::pread(&*file.file, &mut buf, offset).unwrap();
                    self.wire.extend_from_slice(&buf);
                    if self.file_chunk == 0 {
                        self.conn.file_sent(n, &mut self.cx);
                    } else {
                        self.file_in_flight = Some(n);
                        self.conn.file_taken();
                        self.conn.stalled(&self.cx);
                        return;
                    }
                }
                Transmit::Idle => return,
            }
        }
        panic!("the connection kept transmitting");
    }

    /// Every whole frame the server sent since the last call.
    fn frames(&mut self) -> Vec<F> {
        let mut out = Vec::new();
        let mut pos = 0;
        while self.wire.len() - pos >= 9 {
            let h = Head::parse(&self.wire[pos..]);
            let p = self.wire[pos + 9..pos + 9 + h.len].to_vec();
            pos += 9 + h.len;
            let u32_at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
            out.push(match h.kind {
                kind::SETTINGS if h.has(flag::ACK) => F::SettingsAck,
                kind::SETTINGS => F::Settings(
                    p.chunks(6)
                        .map(|c| {
                            (
                                u16::from_be_bytes([c[0], c[1]]),
                                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                            )
                        })
                        .collect(),
                ),
                kind::WINDOW_UPDATE => F::Window(h.stream, u32_at(0)),
                kind::HEADERS => {
                    let mut fields = Vec::new();
                    self.decoder
                        .decode(&p, |n, v| {
                            fields.push((
                                String::from_utf8_lossy(n).into_owned(),
                                String::from_utf8_lossy(v).into_owned(),
                            ))
                        })
                        .unwrap();
                    F::Headers {
                        stream: h.stream,
                        end: h.has(flag::END_STREAM),
                        fields,
                    }
                }
                kind::DATA => F::Data {
                    stream: h.stream,
                    end: h.has(flag::END_STREAM),
                    data: p,
                },
                kind::RST_STREAM => F::Rst(h.stream, u32_at(0)),
                kind::GOAWAY => F::GoAway(u32_at(0), u32_at(4)),
                kind::PING => F::PingAck(p[..8].try_into().unwrap()),
                k => panic!("unexpected frame type {k}"),
            });
        }
        self.wire.drain(..pos);
        out
    }
}

/// A literal field without indexing, new name (RFC 7541 §6.2.2), no Huffman.
fn lit(b: &mut Vec<u8>, name: &str, value: &str) {
    b.push(0);
    for s in [name, value] {
        assert!(s.len() < 127);
        b.push(s.len() as u8);
        b.extend_from_slice(s.as_bytes());
    }
}

fn block(method: &str, path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    lit(&mut b, ":method", method);
    lit(&mut b, ":scheme", "https");
    lit(&mut b, ":authority", "example.com");
    lit(&mut b, ":path", path);
    for (n, v) in extra {
        lit(&mut b, n, v);
    }
    b
}

fn headers(stream: u32, block: &[u8], end_stream: bool) -> Vec<u8> {
    let mut b = Vec::new();
    frame::headers(&mut b, stream, block, end_stream, 16_384);
    b
}

fn get(stream: u32, path: &str) -> Vec<u8> {
    headers(stream, &block("GET", path, &[]), true)
}

fn data(stream: u32, bytes: &[u8], end: bool) -> Vec<u8> {
    let mut b = Vec::new();
    frame::head(
        &mut b,
        bytes.len(),
        kind::DATA,
        if end { flag::END_STREAM } else { 0 },
        stream,
    );
    b.extend_from_slice(bytes);
    b
}

fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::head(&mut b, payload.len(), kind, flags, stream);
    b.extend_from_slice(payload);
    b
}

fn status(f: &F) -> Option<(u32, String)> {
    match f {
        F::Headers { stream, fields, .. } => Some((
            *stream,
            fields.iter().find(|(n, _)| n == ":status")?.1.clone(),
        )),
        _ => None,
    }
}

fn goaway(code: Code) -> impl Fn(&F) -> bool {
    move |f| matches!(f, F::GoAway(_, c) if *c == code as u32)
}

// RFC 9113 §3.4: SETTINGS first; §6.5.3: the client's SETTINGS are acknowledged; the
// answer is HEADERS then DATA with END_STREAM.
#[test]
fn a_get_is_answered_with_headers_and_data() {
    let mut h = H::fresh();
    h.preface(&[]);
    h.recv(&get(1, "/x?q=1"));
    let got = h.frames();
    let F::Settings(s) = &got[0] else {
        panic!("{got:?}")
    };
    assert!(s.contains(&(setting::MAX_CONCURRENT_STREAMS, 100)));
    assert!(s.contains(&(setting::ENABLE_PUSH, 0)));
    assert_eq!(got[2], F::SettingsAck);
    let F::Headers {
        stream: 1,
        end: false,
        fields,
    } = &got[3]
    else {
        panic!("{got:?}")
    };
    let want = [
        (":status", "200"),
        ("date", "Thu, 01 Jan 2026 00:00:00 GMT"),
        ("server", "t"),
        ("content-type", "text/plain"),
        ("content-length", "1"),
    ];
    let fields: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    assert_eq!(fields, want);
    assert_eq!(
        got[4],
        F::Data {
            stream: 1,
            end: true,
            data: b"x".to_vec()
        }
    );
    assert_eq!(h.app.paths, ["/x?q=1"]);
    assert_eq!(
        h.app.versions,
        [Version::Http2],
        "handlers and logs see HTTP/2"
    );
    assert!(h.conn.is_idle());
}

#[test]
fn frames_split_anywhere_are_read_the_same() {
    let mut h = H::fresh();
    let mut all = frame::PREFACE.to_vec();
    frame::settings(&mut all, &[]);
    all.extend(get(1, "/x"));
    all.extend(get(3, "/big"));
    for b in &all {
        h.recv(std::slice::from_ref(b));
    }
    let got = h.frames();
    let statuses: Vec<_> = got.iter().filter_map(status).collect();
    assert_eq!(statuses, [(1, "200".into()), (3, "200".into())]);
}

// RFC 9113 §3.4: an invalid preface (here an HTTP/1.1 request on an h2c port) is a
// connection error; nothing is answered in HTTP/1.1.
#[test]
fn http11_on_an_h2c_connection_gets_goaway_not_http11() {
    let mut h = H::fresh();
    h.recv(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(!h.wire.starts_with(b"HTTP/1.1"));
    let got = h.frames();
    assert!(got.iter().any(goaway(Code::Protocol)), "{got:?}");
    assert!(h.shut);
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut h = H::fresh();
    let mut b = frame::PREFACE.to_vec();
    b.extend(get(1, "/x"));
    h.recv(&b);
    assert!(h.frames().iter().any(goaway(Code::Protocol)));
}

// Deferred answers leave as they come, across streams (no head-of-line blocking).
#[test]
fn deferred_answers_leave_out_of_order() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.recv(&get(3, "/defer"));
    h.recv(&get(5, "/x"));
    assert_eq!(
        h.frames().iter().filter_map(status).collect::<Vec<_>>(),
        [(5, "200".into())]
    );
    assert_eq!(h.app.deferred, [1, 3]);
    assert!(h.complete(3, Response::text("three")));
    assert!(h.complete(1, Response::text("one")));
    let got = h.frames();
    assert_eq!(
        got.iter()
            .filter_map(status)
            .map(|s| s.0)
            .collect::<Vec<_>>(),
        [3, 1]
    );
    assert!(
        !h.complete(1, Response::text("again")),
        "a stream answers once"
    );
}

#[test]
fn a_deferred_answer_that_does_not_come_is_a_503_on_its_stream() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.at(499);
    assert!(h.frames().is_empty());
    h.at(500);
    assert_eq!(
        h.frames().iter().filter_map(status).collect::<Vec<_>>(),
        [(1, "503".into())]
    );
    assert_eq!(h.app.own, [503]);
    assert!(!h.complete(1, Response::text("late")));
}

// RFC 9113 §6.9: DATA never exceeds the stream's or the connection's window; a
// WINDOW_UPDATE releases exactly its increment.
#[test]
fn flow_control_holds_data_until_the_window_opens() {
    let mut h = H::fresh();
    h.preface(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    h.frames();
    h.recv(&get(1, "/big"));
    let got = h.frames();
    assert_eq!(got.len(), 1, "HEADERS only: {got:?}");
    assert!(h.conn.wants_input(), "a window wait never stops reading");
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 30);
    h.recv(&wu);
    assert_eq!(
        h.frames(),
        [F::Data {
            stream: 1,
            end: false,
            data: vec![b'b'; 30]
        }]
    );
    frame::window_update(&mut wu, 1, 1000);
    h.recv(&wu);
    let got = h.frames();
    let total: usize = got
        .iter()
        .map(|f| match f {
            F::Data { data, .. } => data.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(total, 70);
    assert!(matches!(got.last(), Some(F::Data { end: true, .. })));
}

// RFC 9113 §6.9.2: a SETTINGS change of the initial window moves open streams' windows,
// even below zero.
#[test]
fn a_smaller_initial_window_can_make_a_stream_window_negative() {
    let mut h = H::fresh();
    h.preface(&[(setting::INITIAL_WINDOW_SIZE, 10)]);
    h.frames();
    h.recv(&get(1, "/big"));
    let got = h.frames();
    assert_eq!(
        got[1],
        F::Data {
            stream: 1,
            end: false,
            data: vec![b'b'; 10]
        }
    );
    let mut s = Vec::new();
    frame::settings(&mut s, &[(setting::INITIAL_WINDOW_SIZE, 5)]); // window -5
    frame::window_update(&mut s, 1, 7); // window 2
    h.recv(&s);
    let got = h.frames();
    assert_eq!(
        got,
        [
            F::SettingsAck,
            F::Data {
                stream: 1,
                end: false,
                data: vec![b'b'; 2]
            }
        ]
    );
}

// A client that never opens its window is cut off after the send timeout.
#[test]
fn a_zero_window_stall_ends_at_the_send_timeout() {
    let mut h = H::fresh();
    h.preface(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    h.recv(&get(1, "/big"));
    h.at(299);
    assert!(!h.reset);
    h.at(300);
    assert!(h.reset);
}

// A client that opens its window a byte before each send timeout: the minimum send rate
// ends it once the bytes it let out no longer pay for the time (a slow-read attack through
// flow control).
#[test]
fn a_window_opened_a_byte_at_a_time_meets_the_minimum_send_rate() {
    let trickle = |rate: u64| {
        let mut h = H::fresh();
        h.cx.cfg.min_send_rate = rate;
        h.preface(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
        h.recv(&get(1, "/big"));
        h.frames();
        let mut t = 0;
        while !h.reset && t < 3_000 {
            t += 290;
            h.at(t);
            let mut wu = Vec::new();
            frame::window_update(&mut wu, 1, 1);
            h.recv(&wu);
        }
        (h.reset, t)
    };
    // 1,000 bytes a second: each DATA frame of one byte (10 bytes) earns 10 ms past the
    // first 300, so the update at 580 finds the deadline (310) passed.
    assert_eq!(trickle(1000), (true, 580));
    // No minimum: the gap restarts with every frame.
    assert_eq!(trickle(0), (false, 3_190));
}

#[test]
fn file_bodies_are_read_into_data_frames() {
    let mut h = H::open();
    h.recv(&get(1, "/file"));
    let got = h.frames();
    assert_eq!(
        got[1],
        F::Data {
            stream: 1,
            end: true,
            data: b"234567".to_vec()
        }
    );
}

#[test]
fn head_gets_the_length_and_no_data() {
    let mut h = H::open();
    h.recv(&headers(1, &block("HEAD", "/big", &[]), true));
    let got = h.frames();
    assert_eq!(got.len(), 1);
    let F::Headers {
        end: true, fields, ..
    } = &got[0]
    else {
        panic!("{got:?}")
    };
    assert!(fields.contains(&("content-length".into(), "100".into())));
}

#[test]
fn request_bodies_arrive_as_data() {
    let mut h = H::open();
    h.recv(&headers(
        1,
        &block("POST", "/echo", &[("content-length", "5")]),
        false,
    ));
    h.recv(&data(1, b"hel", false));
    h.recv(&data(1, b"lo", true));
    let got = h.frames();
    assert_eq!(
        got[1],
        F::Data {
            stream: 1,
            end: true,
            data: b"hello".to_vec()
        }
    );
}

// RFC 9113 §8.1.1: a Content-Length that the DATA does not add up to is malformed.
#[test]
fn content_length_mismatch_is_a_stream_error() {
    let mut h = H::open();
    h.recv(&headers(
        1,
        &block("POST", "/echo", &[("content-length", "10")]),
        false,
    ));
    h.recv(&data(1, b"hello", true));
    assert_eq!(h.frames(), [F::Rst(1, Code::Protocol as u32)]);
    let mut h = H::open();
    h.recv(&headers(
        1,
        &block("POST", "/echo", &[("content-length", "2")]),
        false,
    ));
    h.recv(&data(1, b"hello", false));
    assert_eq!(h.frames(), [F::Rst(1, Code::Protocol as u32)]);
    // and the connection goes on
    h.recv(&get(3, "/x"));
    assert_eq!(
        h.frames().iter().filter_map(status).collect::<Vec<_>>(),
        [(3, "200".into())]
    );
}

// A body over the limit gets 413; the rest of the body is read and dropped until the client
// ends it (curl 7.88 drops an answer whose stream is reset before it has written
// its body), and the stream closes without RST_STREAM.
#[test]
fn a_body_over_the_limit_is_413_and_the_rest_is_drained() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/echo", &[]), false));
    h.recv(&data(1, &[b'a'; 17], false));
    let got = h.frames();
    assert_eq!(status(&got[0]), Some((1, "413".into())));
    assert!(!got.iter().any(|f| matches!(f, F::Rst(..))), "{got:?}");
    h.recv(&data(1, b"more", false));
    h.recv(&data(1, b"end", true));
    assert!(h.frames().is_empty());
    // Closed normally: a late frame on it is STREAM_CLOSED, not ignored as after a reset.
    h.recv(&data(1, b"late", false));
    assert_eq!(h.frames(), [F::GoAway(1, Code::StreamClosed as u32)]);
}

// Past linger_timeout a body still coming is cut: RST_STREAM(NO_ERROR), RFC 9113 §8.1; later
// DATA on that stream is ignored and the connection goes on.
#[test]
fn a_drained_body_that_does_not_end_is_reset_after_the_linger_timeout() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/echo", &[]), false));
    h.recv(&data(1, &[b'a'; 17], false));
    assert_eq!(status(&h.frames()[0]), Some((1, "413".into())));
    h.at(40);
    h.recv(&data(1, b"more", false));
    assert!(h.frames().is_empty(), "DATA does not extend the drain");
    h.at(51);
    assert_eq!(h.frames(), [F::Rst(1, Code::NoError as u32)]);
    h.recv(&data(1, b"more", true));
    assert!(h.frames().is_empty());
    h.recv(&get(3, "/x"));
    assert_eq!(
        h.frames().iter().filter_map(status).collect::<Vec<_>>(),
        [(3, "200".into())]
    );
}

// Early answers: an answer given before the request body is in — a handler
// that answers at the head, a 413 for a declared length — is never followed by a reset while
// the client can still end its body within the stream's window; the body is read and dropped.
// A body that cannot end within the window (no WINDOW_UPDATE is given for a dropped body) is
// cut at once with RST_STREAM(NO_ERROR) (RFC 9113 §8.1), and a stream whose END_STREAM has
// arrived is never reset.
#[test]
fn early_answers_drain_the_body_within_the_window_then_close() {
    let window = 1u64 << 20; // STREAM_WINDOW, announced in the server's SETTINGS
    // (path, content-length, DATA the client sends after the answer, reset expected)
    let rows: &[(&str, Option<u64>, &[usize], bool)] = &[
        ("/x", None, &[100, 100], false),
        ("/x", Some(300), &[100, 200], false),
        ("/missing", Some(5), &[5], false),
        ("/echo", Some(17), &[17], false),
        ("/x", Some(window), &[16_384; 64], false),
        ("/x", Some(window + 1), &[], true),
        ("/echo", Some(window + 1), &[], true),
    ];
    for &(path, declared, pieces, reset) in rows {
        let mut h = H::open();
        let len = declared.map(|d| d.to_string());
        let fields: Vec<(&str, &str)> =
            len.iter().map(|l| ("content-length", l.as_str())).collect();
        h.recv(&headers(1, &block("POST", path, &fields), false));
        let got = h.frames();
        assert!(
            matches!(got[0], F::Headers { stream: 1, .. }),
            "{path} {declared:?}: {got:?}"
        );
        let rst = got.iter().any(|f| matches!(f, F::Rst(1, _)));
        assert_eq!(rst, reset, "{path} {declared:?}: {got:?}");
        if reset {
            assert_eq!(got.last(), Some(&F::Rst(1, Code::NoError as u32)));
            continue;
        }
        for (i, &n) in pieces.iter().enumerate() {
            h.recv(&data(1, &vec![b'b'; n], i + 1 == pieces.len()));
        }
        let after = h.frames();
        assert!(
            !after
                .iter()
                .any(|f| matches!(f, F::Rst(..) | F::GoAway(..))),
            "{path} {declared:?}: {after:?}"
        );
        assert!(
            !after.iter().any(|f| matches!(f, F::Window(1, _))),
            "a dropped body gets no stream WINDOW_UPDATE: {after:?}"
        );
        h.at(1_000);
        assert!(
            !h.frames().iter().any(|f| matches!(f, F::Rst(..))),
            "{path} {declared:?}: reset after END_STREAM"
        );
    }
}

// A client that sends no length and fills the stream's window without ending its body can send
// nothing more: the drain ends with RST_STREAM(NO_ERROR) at once.
#[test]
fn a_drained_body_that_fills_the_window_is_reset() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/x", &[]), false));
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
    for _ in 0..63 {
        h.recv(&data(1, &[b'c'; 16_384], false));
    }
    assert!(h.frames().iter().all(|f| !matches!(f, F::Rst(..))));
    h.recv(&data(1, &[b'c'; 16_384], false));
    assert_eq!(
        h.frames()
            .into_iter()
            .filter(|f| matches!(f, F::Rst(..)))
            .collect::<Vec<_>>(),
        [F::Rst(1, Code::NoError as u32)]
    );
}

#[test]
fn a_declared_length_over_the_limit_is_413_at_once() {
    let mut h = H::open();
    h.recv(&headers(
        1,
        &block("POST", "/echo", &[("content-length", "100")]),
        false,
    ));
    assert_eq!(status(&h.frames()[0]), Some((1, "413".into())));
}

// RFC 9113 §8.2–8.3: malformed requests are stream errors; the connection goes on.
#[test]
fn malformed_requests_are_reset_and_the_connection_goes_on() {
    let rows: &[&[(&str, &str)]] = &[
        &[("Accept", "x")],
        &[("connection", "close")],
        &[("te", "gzip")],
        &[("x", " padded")],
        &[(":path", "/again")],
    ];
    for extra in rows {
        let mut h = H::open();
        h.recv(&headers(1, &block("GET", "/x", extra), true));
        assert_eq!(h.frames(), [F::Rst(1, Code::Protocol as u32)], "{extra:?}");
        h.recv(&get(3, "/x"));
        assert_eq!(
            h.frames().iter().filter_map(status).collect::<Vec<_>>(),
            [(3, "200".into())]
        );
    }
    // What the HTTP/1.1 parser refuses in the target is refused here too, with its status.
    let mut h = H::open();
    h.recv(&headers(1, &block("GET", "/a b", &[]), true));
    assert_eq!(status(&h.frames()[0]), Some((1, "400".into())));
}

// RFC 9113 §10.5.1: a header list over the limit is answered 431; the table stays in step.
#[test]
fn a_header_list_over_the_limit_is_431() {
    let mut h = H::open();
    let big = "v".repeat(120);
    let fields: Vec<(&str, &str)> = (0..5).map(|_| ("x-big", big.as_str())).collect();
    h.recv(&headers(1, &block("GET", "/x", &fields), true));
    assert_eq!(status(&h.frames()[0]), Some((1, "431".into())));
    h.recv(&get(3, "/x"));
    assert_eq!(status(&h.frames()[0]), Some((3, "200".into())));
}

#[test]
fn trailers_end_the_stream_and_may_not_hold_pseudo_headers() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/echo", &[]), false));
    h.recv(&data(1, b"ab", false));
    let mut t = Vec::new();
    lit(&mut t, "x-sum", "1");
    h.recv(&headers(1, &t, true));
    let got = h.frames();
    assert_eq!(
        got[1],
        F::Data {
            stream: 1,
            end: true,
            data: b"ab".to_vec()
        }
    );
    h.recv(&headers(3, &block("POST", "/echo", &[]), false));
    let mut t = Vec::new();
    lit(&mut t, ":path", "/");
    h.recv(&headers(3, &t, true));
    assert_eq!(h.frames(), [F::Rst(3, Code::Protocol as u32)]);
}

// RFC 9113 §5.1.2: streams beyond SETTINGS_MAX_CONCURRENT_STREAMS are refused.
#[test]
fn the_stream_beyond_the_concurrency_limit_is_refused() {
    let mut h = H::open();
    for i in 0..MAX_CONCURRENT_STREAMS as u32 {
        h.recv(&get(2 * i + 1, "/defer"));
    }
    assert_eq!(h.app.deferred.len(), MAX_CONCURRENT_STREAMS);
    assert!(h.frames().is_empty());
    let next = 2 * MAX_CONCURRENT_STREAMS as u32 + 1;
    h.recv(&get(next, "/defer"));
    assert_eq!(h.frames(), [F::Rst(next, Code::RefusedStream as u32)]);
}

// One connection may send MAX_BODY_STREAMS bodies over SMALL_BODY at once; one more is
// refused (retryable) — at its HEADERS when it declares its length, else when its DATA first
// takes it past SMALL_BODY — and a request without a body, or with a small one, still gets in.
#[test]
fn bodies_in_flight_per_connection_are_bounded() {
    let mut h = H::open();
    let big = (SMALL_BODY + 1).to_string();
    let declared = [("content-length", big.as_str())];
    for i in 0..MAX_BODY_STREAMS as u32 {
        h.recv(&headers(
            2 * i + 1,
            &block("POST", "/sink", &declared),
            false,
        ));
    }
    assert!(h.frames().is_empty());
    let next = 2 * MAX_BODY_STREAMS as u32 + 1;
    h.recv(&headers(next, &block("POST", "/sink", &declared), false));
    assert_eq!(h.frames(), [F::Rst(next, Code::RefusedStream as u32)]);
    h.recv(&get(next + 2, "/x"));
    assert_eq!(status(&h.frames()[0]), Some((next + 2, "200".into())));
    // A body of undeclared length opens; past SMALL_BODY it is one too many and refused.
    let undeclared = next + 4;
    h.recv(&headers(undeclared, &block("POST", "/sink", &[]), false));
    h.recv(&data(undeclared, &vec![b'a'; SMALL_BODY as usize], false));
    assert!(h.frames().is_empty(), "small so far");
    h.recv(&data(undeclared, b"a", false));
    assert_eq!(h.frames(), [F::Rst(undeclared, Code::RefusedStream as u32)]);
    // A small body is answered while the large ones go on.
    let small = undeclared + 2;
    h.recv(&headers(small, &block("POST", "/echo", &[]), false));
    h.recv(&data(small, b"ok", true));
    assert_eq!(status(&h.frames()[0]), Some((small, "200".into())));
    // one large body finishes: another may start
    h.recv(&data(1, &vec![b'b'; SMALL_BODY as usize + 1], true));
    h.frames();
    h.recv(&headers(
        small + 2,
        &block("POST", "/sink", &declared),
        false,
    ));
    assert!(h.frames().is_empty());
}

// gRPC's unary calls as h2load -m 100 sends them: every stream's HEADERS, then every DATA.
// Small bodies do not count among MAX_BODY_STREAMS: all 100 are answered.
#[test]
fn a_hundred_small_bodies_sent_after_their_headers_are_all_answered() {
    let mut h = H::open();
    for i in 0..MAX_CONCURRENT_STREAMS as u32 {
        h.recv(&headers(2 * i + 1, &block("POST", "/echo", &[]), false));
    }
    assert!(h.frames().is_empty(), "none refused");
    for i in 0..MAX_CONCURRENT_STREAMS as u32 {
        h.recv(&data(2 * i + 1, b"123456789", true));
    }
    let answered = h
        .frames()
        .iter()
        .filter(|f| status(f).is_some_and(|(_, s)| s == "200"))
        .count();
    assert_eq!(answered, MAX_CONCURRENT_STREAMS);
}

#[test]
fn header_blocks_continue_and_a_continuation_flood_is_calmed() {
    let mut h = H::open();
    let b = block("GET", "/x", &[]);
    let mut bytes = raw(kind::HEADERS, flag::END_STREAM, 1, &b[..10]);
    bytes.extend(raw(kind::CONTINUATION, 0, 1, &b[10..20]));
    bytes.extend(raw(kind::CONTINUATION, flag::END_HEADERS, 1, &b[20..]));
    h.recv(&bytes);
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
    // CVE-2024-27316: endless CONTINUATION frames.
    let mut bytes = raw(kind::HEADERS, flag::END_STREAM, 3, &b[..10]);
    for _ in 0..=MAX_CONTINUATIONS {
        bytes.extend(raw(kind::CONTINUATION, 0, 3, &[]));
    }
    h.recv(&bytes);
    assert!(h.frames().iter().any(goaway(Code::EnhanceYourCalm)));
    assert!(h.shut);
}

// RFC 9113 §6.10: nothing may come between HEADERS and its CONTINUATION.
#[test]
fn a_frame_inside_a_header_block_is_a_connection_error() {
    let mut h = H::open();
    let b = block("GET", "/x", &[]);
    let mut bytes = raw(kind::HEADERS, flag::END_STREAM, 1, &b[..10]);
    bytes.extend(raw(kind::PING, 0, 0, &[0; 8]));
    h.recv(&bytes);
    assert!(h.frames().iter().any(goaway(Code::Protocol)));
}

// CVE-2023-44487: streams opened and reset by the client faster than the limit.
#[test]
fn rapid_reset_is_calmed() {
    let mut h = H::open();
    let mut bytes = Vec::new();
    for i in 0..=MAX_RESETS_PER_SEC {
        let id = 2 * i + 1;
        bytes.extend(headers(id, &block("POST", "/echo", &[]), false));
        bytes.extend(raw(kind::RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    h.recv(&bytes);
    assert!(h.frames().iter().any(goaway(Code::EnhanceYourCalm)));
}

// A client that stops sending a body once its answer is whole (§8.1: Go's
// x/net/http2 sends RST_STREAM(NO_ERROR) then) abandons no work; while the server drained
// those streams, each reset counted as a rapid one and a busy uploader got
// ENHANCE_YOUR_CALM. Resets of streams still being answered count as before.
#[test]
fn resets_of_answered_streams_being_drained_are_not_rapid_resets() {
    let mut h = H::open();
    let mut bytes = Vec::new();
    for i in 0..=2 * MAX_RESETS_PER_SEC {
        let id = 2 * i + 1;
        bytes.extend(headers(id, &block("POST", "/x", &[]), false));
        bytes.extend(raw(kind::RST_STREAM, 0, id, &0u32.to_be_bytes()));
    }
    h.recv(&bytes);
    let got = h.frames();
    assert!(
        !got.iter().any(goaway(Code::EnhanceYourCalm)),
        "{:?}",
        got.last()
    );
    let answered = got.iter().filter_map(status).count();
    assert_eq!(answered, 2 * MAX_RESETS_PER_SEC as usize + 1);
}

// A declared body all in with the stream's window spent ends with an empty
// DATA (or trailers), which take no window: it is drained, not reset.
#[test]
fn a_declared_body_that_fills_the_window_exactly_ends_without_a_reset() {
    let mut h = H::open();
    let len = (1u64 << 20).to_string();
    h.recv(&headers(
        1,
        &block("POST", "/x", &[("content-length", &len)]),
        false,
    ));
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
    for _ in 0..64 {
        h.recv(&data(1, &[b'c'; 16_384], false));
    }
    h.recv(&data(1, b"", true));
    let got = h.frames();
    assert!(!got.iter().any(|f| matches!(f, F::Rst(..))), "{got:?}");
    h.recv(&get(3, "/x"));
    assert_eq!(
        h.frames().iter().filter_map(status).collect::<Vec<_>>(),
        [(3, "200".into())]
    );
}

#[test]
fn resets_under_the_rate_are_fine() {
    let mut h = H::open();
    for round in 0..3u32 {
        h.at(u64::from(round) * 1000);
        let mut bytes = Vec::new();
        for i in 0..MAX_RESETS_PER_SEC {
            let id = 2 * (round * MAX_RESETS_PER_SEC + i) + 1;
            bytes.extend(headers(id, &block("POST", "/echo", &[]), false));
            bytes.extend(raw(kind::RST_STREAM, 0, id, &8u32.to_be_bytes()));
        }
        h.recv(&bytes);
    }
    assert!(!h.frames().iter().any(goaway(Code::EnhanceYourCalm)));
}

#[test]
fn pings_are_acknowledged_and_a_ping_flood_is_calmed() {
    let mut h = H::open();
    h.recv(&raw(kind::PING, 0, 0, b"12345678"));
    assert_eq!(h.frames(), [F::PingAck(*b"12345678")]);
    let mut bytes = Vec::new();
    for _ in 0..=MAX_CONTROL_PER_SEC {
        bytes.extend(raw(kind::PING, 0, 0, b"12345678"));
    }
    h.recv(&bytes);
    assert!(h.frames().iter().any(goaway(Code::EnhanceYourCalm)));
}

#[test]
fn a_settings_flood_is_calmed() {
    let mut h = H::open();
    let mut bytes = Vec::new();
    for _ in 0..=MAX_CONTROL_PER_SEC {
        frame::settings(&mut bytes, &[]);
    }
    h.recv(&bytes);
    assert!(h.frames().iter().any(goaway(Code::EnhanceYourCalm)));
}

// A client that does not read: once a send stalls, nothing more is read, so its PINGs
// cannot make the server queue acknowledgements without bound.
#[test]
fn a_stalled_send_stops_reading() {
    let mut h = H::open();
    h.stalled = true;
    h.recv(&get(1, "/big"));
    assert!(h.in_flight.is_some());
    assert!(!h.conn.wants_input());
    h.unstall();
    assert!(h.conn.wants_input());
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
}

// RFC 9113 §6.8's graceful shutdown: a first GOAWAY with the highest id and a PING; a stream
// the client sent before it saw them is served; the PING's ACK (a round trip) brings the final
// GOAWAY naming the last stream, after which streams are not served; open streams finish; then
// the connection ends.
#[test]
fn drain_sends_goaway_and_finishes_open_streams() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/echo", &[]), false));
    h.conn.drain(&mut h.cx);
    h.flush();
    assert_eq!(
        h.frames(),
        [F::GoAway(0x7fff_ffff, 0), F::PingAck(*b"lr-drain")]
    );
    h.recv(&get(3, "/x"));
    assert_eq!(
        status(&h.frames()[0]),
        Some((3, "200".into())),
        "stream 3 was on its way before the client saw the GOAWAY"
    );
    assert!(!h.shut, "the final GOAWAY has not gone yet");
    h.recv(&raw(kind::PING, flag::ACK, 0, b"lr-drain"));
    assert_eq!(h.frames(), [F::GoAway(3, 0)]);
    h.recv(&get(5, "/x"));
    assert!(
        h.frames().is_empty(),
        "stream 5 came after the final GOAWAY"
    );
    assert!(!h.shut);
    h.recv(&data(1, b"done", true));
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
    assert!(h.shut);
}

// A client that never acknowledges the drain's PING gets the final GOAWAY after the wait, and
// an idle connection then ends; a PING ACK of another payload is not the round trip.
#[test]
fn a_drain_without_the_pings_ack_ends_after_its_wait() {
    let mut h = H::open();
    h.recv(&get(1, "/x"));
    h.frames();
    h.conn.drain(&mut h.cx);
    h.flush();
    assert_eq!(
        h.frames(),
        [F::GoAway(0x7fff_ffff, 0), F::PingAck(*b"lr-drain")]
    );
    h.recv(&raw(kind::PING, flag::ACK, 0, b"12345678"));
    assert!(h.frames().is_empty());
    assert!(!h.shut, "idle, but a request may be on its way");
    h.at(999);
    assert!(!h.shut);
    h.at(1000);
    assert_eq!(h.frames(), [F::GoAway(1, 0)]);
    assert!(h.shut);
}

#[test]
fn an_idle_connection_says_goaway_and_ends() {
    let mut h = H::open();
    h.recv(&get(1, "/x"));
    h.frames();
    h.at(999);
    assert!(!h.shut);
    h.at(1000);
    assert_eq!(h.frames(), [F::GoAway(1, 0)]);
    assert!(h.shut);
}

#[test]
fn a_silent_connection_closes_at_the_header_timeout() {
    let mut h = H::fresh();
    h.at(100);
    assert!(h.closed);
}

// RFC 9113 §5.1: frames for idle streams are connection errors; for streams that ended,
// STREAM_CLOSED; after the server's RST_STREAM, they are ignored.
#[test]
fn frames_on_idle_and_closed_streams() {
    let mut h = H::open();
    h.recv(&data(1, b"x", true));
    assert!(h.frames().iter().any(goaway(Code::Protocol)), "idle");
    let mut h = H::open();
    h.recv(&get(1, "/x"));
    h.frames();
    h.recv(&data(1, b"x", true));
    assert!(h.frames().iter().any(goaway(Code::StreamClosed)), "closed");
    let mut h = H::open();
    h.recv(&get(3, "/x"));
    h.recv(&get(1, "/x"));
    assert!(
        h.frames().iter().any(goaway(Code::Protocol)),
        "ids only grow"
    );
}

// RFC 9113 §6.9.1: a window above 2^31-1 is a flow-control error.
#[test]
fn window_overflow() {
    let mut h = H::open();
    let mut b = Vec::new();
    frame::window_update(&mut b, 0, 0x7fff_ffff);
    h.recv(&b);
    assert!(h.frames().iter().any(goaway(Code::FlowControl)));
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/echo", &[]), false));
    let mut b = Vec::new();
    frame::window_update(&mut b, 1, 0x7fff_ffff);
    h.recv(&b);
    assert_eq!(h.frames(), [F::Rst(1, Code::FlowControl as u32)]);
}

// A client may not send more than the window it was given (RFC 9113 §6.9.1).
#[test]
fn data_beyond_the_window_is_a_flow_control_error() {
    let mut h = H::open();
    h.recv(&headers(1, &block("POST", "/sink", &[]), false));
    let chunk = [0u8; 16_384];
    let mut bytes = Vec::new();
    // the stream window is 1 MiB: 64 full frames fill it, one byte more overflows
    for _ in 0..64 {
        bytes.extend(data(1, &chunk, false));
    }
    bytes.extend(data(1, b"!", false));
    h.recv(&bytes);
    let got = h.frames();
    assert!(
        got.iter()
            .any(|f| matches!(f, F::Rst(1, c) if *c == Code::FlowControl as u32)),
        "{got:?}"
    );
}

// A client that half-closes after its request (TLS close_notify in the same read) still gets
// the answer already written; then the connection closes (found by h2spec over TLS).
#[test]
fn input_ending_after_a_request_sends_the_answer_then_closes() {
    let mut h = H::open();
    h.conn
        .recv(&get(1, "/x"), &mut h.head, &mut h.cx, &mut h.app);
    h.conn.eof(&mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(status(&h.frames()[0]), Some((1, "200".into())));
    assert!(h.closed);
    assert!(h.cx.out.is_empty());
}

#[test]
fn input_ending_drops_streams_still_waiting_for_an_answer() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.conn.eof(&mut h.cx, &mut h.app);
    h.flush();
    assert!(h.closed);
    assert_eq!(h.app.own, [499]);
    assert!(!h.complete(1, Response::text("late")));
}

/// The DATA payload bytes of `stream`, in order.
fn body_of(frames: &[F], stream: u32) -> Vec<u8> {
    frames
        .iter()
        .filter_map(|f| match f {
            F::Data {
                stream: s, data, ..
            } if *s == stream => Some(data.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

// Over a transport that sends file ranges itself (h2c, kernel TLS), a file payload goes out
// with sendfile after its frame header: the frames are the same.
#[test]
fn file_payloads_by_sendfile_are_framed_the_same() {
    let want: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    for chunk in [0, 1000, 65_536] {
        let mut h = H::sendfile();
        h.file_chunk = chunk;
        h.recv(&get(1, "/bigfile"));
        for _ in 0..200 {
            h.file_done();
        }
        let got = h.frames();
        assert_eq!(body_of(&got, 1), want, "chunk {chunk}");
        let data: Vec<usize> = got
            .iter()
            .filter_map(|f| match f {
                F::Data { data, .. } => Some(data.len()),
                _ => None,
            })
            .collect();
        assert_eq!(data, [65_536, 65_536, 18_928]);
        assert!(h.file_sends >= 3, "the payloads went by sendfile");
        assert!(matches!(got.last(), Some(F::Data { end: true, .. })));
    }
}

// What is written while a payload is in flight (another stream's answer, a PING's ACK) goes
// out after the payload, never inside it.
#[test]
fn output_behind_a_file_payload_waits_for_it() {
    let mut h = H::sendfile();
    h.file_chunk = 5000;
    h.recv(&get(1, "/bigfile"));
    assert!(h.file_in_flight.is_some());
    assert!(!h.conn.wants_input(), "a send in flight stops reading");
    // Input read before the send stalled (the same turn of the loop) is still handled.
    h.recv(&get(3, "/x"));
    h.recv(&raw(kind::PING, 0, 0, b"abcdefgh"));
    for _ in 0..200 {
        h.file_done();
    }
    let got = h.frames();
    assert_eq!(body_of(&got, 1).len(), 150_000);
    assert_eq!(body_of(&got, 3), b"x");
    assert!(got.contains(&F::PingAck(*b"abcdefgh")));
}

#[test]
fn without_sendfile_file_payloads_are_read_into_frames() {
    let want: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    let mut h = H::open();
    h.open_windows();
    h.recv(&get(1, "/bigfile"));
    assert_eq!(body_of(&h.frames(), 1), want);
    // A transport that could send file ranges, but 16 KiB frames: read into the frames too.
    let mut h = H::open();
    h.open_windows();
    h.cx.sendfile = true;
    h.recv(&get(1, "/bigfile"));
    assert_eq!(body_of(&h.frames(), 1), want);
    assert_eq!(h.file_sends, 0);
}

// Streamed answers: HEADERS, then DATA as pieces come and the windows allow.

use crate::h1::StreamHead;

const UP_FIELDS: &[(&[u8], &[u8])] = &[
    (b"X-Up", b"1"),
    (b"Transfer-Encoding", b"chunked"),
    (b"Connection", b"close"),
];

fn up_head(length: Option<u64>) -> StreamHead<'static> {
    StreamHead {
        status: 200,
        fields: UP_FIELDS,
        length,
        date: None,
    }
}

impl H {
    fn start(&mut self, id: u64, length: Option<u64>) -> bool {
        let ok = self.conn.start_stream(id, &up_head(length), &mut self.cx);
        self.flush();
        ok
    }
    fn piece(&mut self, id: u64, data: &[u8]) -> bool {
        let ok = self.conn.stream_data(id, data, &mut self.cx);
        self.flush();
        ok
    }
    fn end(&mut self, id: u64) -> bool {
        let ok = self.conn.stream_end(id, &mut self.cx);
        self.flush();
        ok
    }
}

#[test]
fn a_streamed_answer_is_headers_then_data_then_end_stream() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    assert!(h.start(1, None));
    let got = h.frames();
    let [
        F::Headers {
            stream: 1,
            end: false,
            fields,
        },
    ] = got.as_slice()
    else {
        panic!("{got:?}")
    };
    assert!(fields.contains(&("x-up".into(), "1".into())), "{fields:?}");
    assert!(
        !fields
            .iter()
            .any(|(n, _)| n == "transfer-encoding" || n == "connection"),
        "connection-specific fields never go out over HTTP/2: {fields:?}"
    );
    assert!(h.piece(1, b"abc"));
    assert!(h.piece(1, b"def"));
    assert!(h.end(1));
    assert_eq!(
        h.frames(),
        [
            F::Data {
                stream: 1,
                end: false,
                data: b"abc".to_vec()
            },
            F::Data {
                stream: 1,
                end: false,
                data: b"def".to_vec()
            },
            F::Data {
                stream: 1,
                end: true,
                data: Vec::new()
            },
        ]
    );
    assert!(!h.piece(1, b"late"), "the stream is over");
    assert!(h.conn.is_idle());
}

#[test]
fn a_streamed_answer_waits_for_the_window_and_its_room_is_bounded() {
    let mut h = H::fresh();
    h.preface(&[(setting::INITIAL_WINDOW_SIZE, 4)]);
    h.frames();
    h.recv(&get(1, "/defer"));
    h.start(1, Some(10));
    let got = h.frames();
    let [F::Headers { fields, .. }] = got.as_slice() else {
        panic!("{got:?}")
    };
    assert!(fields.contains(&("content-length".into(), "10".into())));
    h.piece(1, b"0123456789");
    h.end(1);
    assert_eq!(
        h.frames(),
        [F::Data {
            stream: 1,
            end: false,
            data: b"0123".to_vec()
        }]
    );
    assert!(h.conn.stream_room(1));
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 100);
    h.recv(&wu);
    assert_eq!(
        h.frames(),
        [F::Data {
            stream: 1,
            end: true,
            data: b"456789".to_vec()
        }]
    );

    // A closed window: the held bytes reach the room limit and the source must wait.
    h.recv(&get(3, "/defer"));
    h.start(3, None);
    h.frames();
    h.piece(3, &vec![b'z'; crate::h1::STREAM_ROOM + 4]); // 4 go out in the window
    assert!(!h.conn.stream_room(3));
}

#[test]
fn a_streamed_answer_cut_off_is_reset_and_a_reset_stream_stops_its_source() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.start(1, None);
    h.piece(1, b"abc");
    assert!(h.conn.stream_abort(1, &mut h.cx));
    h.flush();
    let got = h.frames();
    assert_eq!(
        got.last(),
        Some(&F::Rst(1, Code::Internal as u32)),
        "{got:?}"
    );
    assert!(!got.iter().any(|f| matches!(f, F::Data { end: true, .. })));

    h.recv(&get(3, "/defer"));
    h.start(3, None);
    h.recv(&raw(kind::RST_STREAM, 0, 3, &8u32.to_be_bytes()));
    assert!(!h.piece(3, b"x"), "the client reset it: the source stops");
}

#[test]
fn a_streamed_answer_to_head_ends_with_its_headers() {
    let mut h = H::open();
    h.recv(&headers(1, &block("HEAD", "/defer", &[]), true));
    assert!(h.start(1, Some(5)));
    let got = h.frames();
    let [
        F::Headers {
            end: true, fields, ..
        },
    ] = got.as_slice()
    else {
        panic!("{got:?}")
    };
    assert!(fields.contains(&("content-length".into(), "5".into())));
    assert!(!h.piece(1, b"hello"), "no DATA for HEAD: the source stops");
}

fn connect_block(path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    lit(&mut b, ":method", "CONNECT");
    lit(&mut b, ":protocol", "websocket");
    lit(&mut b, ":scheme", "https");
    lit(&mut b, ":authority", "example.com");
    lit(&mut b, ":path", path);
    b
}

/// A connection whose server takes extended CONNECT (RFC 8441 §3): its SETTINGS say so.
fn extended() -> H {
    let mut h = H::fresh();
    h.cx.cfg.extended_connect = true;
    h.preface(&[]);
    let got = h.frames();
    assert!(
        matches!(&got[0], F::Settings(s) if s.contains(&(setting::ENABLE_CONNECT_PROTOCOL, 1))),
        "{got:?}"
    );
    h
}

#[test]
fn extended_connect_is_announced_only_where_it_is_taken() {
    let mut h = H::fresh();
    h.preface(&[]);
    let got = h.frames();
    assert!(
        matches!(&got[0], F::Settings(s) if !s.iter().any(|(id, _)| *id == setting::ENABLE_CONNECT_PROTOCOL)),
        "{got:?}"
    );
    // Unannounced, `:protocol` is an unknown pseudo-header: malformed (RFC 9113 §8.3).
    h.recv(&headers(1, &connect_block("/t"), false));
    assert_eq!(h.frames(), [F::Rst(1, Code::Protocol as u32)]);
    assert!(h.app.protocols.is_empty());
}

/// RFC 8441 §5: a tunnel's DATA are held for its reader, and the stream's window is given
/// back only as the reader takes them; its answer streams; the client's END_STREAM is seen
/// once all was taken, and the stream closes once both sides ended.
#[test]
fn a_tunnel_holds_the_clients_bytes_until_they_are_taken() {
    let mut h = extended();
    h.recv(&headers(1, &connect_block("/chat?x"), false));
    assert_eq!(h.app.protocols, ["websocket"]);
    assert_eq!(h.app.paths, ["/chat?x"]);
    let head = crate::h1::StreamHead {
        status: 200,
        fields: &[],
        length: None,
        date: None,
    };
    assert!(h.conn.start_stream(1, &head, &mut h.cx));
    h.flush();
    let got = h.frames();
    assert!(
        matches!(
            &got[..],
            [F::Headers {
                stream: 1,
                end: false,
                ..
            }]
        ),
        "{got:?}"
    );
    // 600,000 bytes (more than half the stream's window): none of the window comes back
    // while the reader has taken nothing.
    for piece in vec![7u8; 600_000].chunks(16_384) {
        h.recv(&data(1, piece, false));
    }
    assert_eq!(h.frames(), []);
    assert_eq!(
        h.conn.tunnel_input(1).map(|(b, ended)| (b.len(), ended)),
        Some((600_000, false))
    );
    assert!(!h.conn.tunnel_ended(1));
    h.conn.tunnel_used(1, 600_000, &mut h.cx);
    h.flush();
    assert_eq!(h.frames(), [F::Window(1, 600_000)]);
    // The client ends its side: seen once its bytes are taken.
    h.recv(&data(1, b"bye", true));
    assert!(!h.conn.tunnel_ended(1));
    h.conn.tunnel_used(1, 3, &mut h.cx);
    assert!(h.conn.tunnel_ended(1));
    // The server's side: DATA, then END_STREAM; the stream is then closed.
    assert!(h.conn.stream_data(1, b"out", &mut h.cx));
    assert!(h.conn.stream_end(1, &mut h.cx));
    h.flush();
    assert_eq!(
        h.frames(),
        [
            F::Data {
                stream: 1,
                end: false,
                data: b"out".to_vec()
            },
            F::Data {
                stream: 1,
                end: true,
                data: Vec::new()
            }
        ]
    );
    assert_eq!(h.conn.tunnel_input(1), None);
}

/// A tunnel the client resets, or one its reader gives up on (RST_STREAM(CANCEL)), is gone.
#[test]
fn a_tunnel_ends_with_either_sides_reset() {
    let mut h = extended();
    h.recv(&headers(1, &connect_block("/a"), false));
    h.recv(&headers(3, &connect_block("/b"), false));
    let head = crate::h1::StreamHead {
        status: 200,
        fields: &[],
        length: None,
        date: None,
    };
    assert!(h.conn.start_stream(1, &head, &mut h.cx));
    assert!(h.conn.start_stream(3, &head, &mut h.cx));
    h.flush();
    h.frames();
    h.recv(&raw(
        kind::RST_STREAM,
        0,
        1,
        &(Code::Cancel as u32).to_be_bytes(),
    ));
    assert_eq!(h.conn.tunnel_input(1), None);
    assert!(h.conn.tunnel_ended(1));
    // Stream 3 holds bytes its reader never took: they go with the reset.
    h.recv(&data(3, b"held", false));
    h.conn.tunnel_reset(3, &mut h.cx);
    h.flush();
    assert_eq!(h.frames(), [F::Rst(3, Code::Cancel as u32)]);
    assert_eq!(h.conn.tunnel_input(3), None);
    // A plain request still goes.
    h.recv(&get(5, "/x"));
    assert_eq!(status(&h.frames()[0]), Some((5, "200".into())));
}

/// RFC 7838 §3 and RFC 9114 §3.1.1: over HTTP/2 on a TLS listener that also serves HTTP/3,
/// a whole answer and a streamed head both carry `alt-svc` naming the UDP port.
#[test]
fn a_listener_with_http3_announces_it_in_whole_and_streamed_answers() {
    let alt = |got: &[F]| -> Vec<(u32, String)> {
        got.iter()
            .filter_map(|f| match f {
                F::Headers { stream, fields, .. } => Some(
                    fields
                        .iter()
                        .filter(|(n, _)| n == "alt-svc")
                        .map(|(_, v)| (*stream, v.clone()))
                        .collect::<Vec<_>>(),
                ),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let want = "h3=\":8443\"; ma=86400".to_string();
    let mut h = H::open();
    h.cx.alt_svc = Some(8443);
    h.recv(&get(1, "/x"));
    h.recv(&get(3, "/defer"));
    assert!(h.start(3, Some(2)));
    assert!(h.piece(3, b"ok"));
    assert!(h.end(3));
    assert_eq!(alt(&h.frames()), [(1, want.clone()), (3, want)]);

    let mut h = H::open();
    h.recv(&get(1, "/x"));
    assert_eq!(alt(&h.frames()), []);
}

// Trailer fields (RFC 9113 §8.1): a HEADERS frame with END_STREAM after the last DATA,
// no pseudo-header in it; not flow-controlled, but never before the DATA it follows.

fn grpc_trailers() -> Vec<(String, String)> {
    vec![
        ("grpc-status".into(), "0".into()),
        ("grpc-message".into(), "ok".into()),
    ]
}

fn with_trailers(body: &'static str) -> Response {
    Response::text(body)
        .trailer("grpc-status", "0")
        .trailer("Grpc-Message", "ok")
}

fn head_fields(f: &F) -> Vec<(String, String)> {
    match f {
        F::Headers { fields, .. } => fields.clone(),
        f => panic!("{f:?}"),
    }
}

#[test]
fn an_answer_with_trailers_ends_with_a_headers_frame_after_its_data() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    assert!(h.complete(1, with_trailers("hi")));
    // The trailing HEADERS exactly: END_STREAM | END_HEADERS, literal fields, lowercase.
    let mut block = Vec::new();
    linerate_hpack::field(&mut block, b"grpc-status", b"0");
    linerate_hpack::field(&mut block, b"grpc-message", b"ok");
    let mut want_tail = Vec::new();
    frame::headers(&mut want_tail, 1, &block, true, 16_384);
    assert!(h.wire.ends_with(&want_tail), "{:?}", h.wire);
    let got = h.frames();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(matches!(got[0], F::Headers { end: false, .. }));
    assert!(head_fields(&got[0]).contains(&("content-length".into(), "2".into())));
    assert_eq!(
        got[1],
        F::Data {
            stream: 1,
            end: false,
            data: b"hi".to_vec()
        }
    );
    assert_eq!(
        got[2],
        F::Headers {
            stream: 1,
            end: true,
            fields: grpc_trailers()
        }
    );
    assert!(h.conn.is_idle());
}

/// A gRPC answer once carried `content-length` (its message's), and curl stopped
/// reading there, before the trailers that hold `grpc-status`. gRPC's answers, whole or
/// trailers-only, carry none (as grpc-go and tonic send them);
/// gRPC-Web's (its trailers in the body) and any other answer with trailers keep theirs.
#[test]
fn grpc_answers_carry_no_content_length_grpc_web_ones_keep_it() {
    let message: &'static [u8] = b"\0\0\0\0\x02hi";
    let answer = |ct: &'static str, body: &'static [u8]| {
        Response::new(200)
            .content_type(ct)
            .body(Body::Static(body))
            .trailer("grpc-status", "0")
    };
    let trailers_only = Response::new(200)
        .content_type("application/grpc")
        .header("grpc-status", "5");
    let cases: [(&str, Response, Option<&str>); 5] = [
        ("unary", answer("application/grpc", message), None),
        ("+proto", answer("application/grpc+proto", message), None),
        ("trailers-only", trailers_only, None),
        (
            "gRPC-Web",
            answer("application/grpc-web+proto", message),
            Some("7"),
        ),
        ("not gRPC", with_trailers("hi"), Some("2")),
    ];
    for (name, resp, want) in cases {
        let mut h = H::open();
        h.recv(&get(1, "/defer"));
        assert!(h.complete(1, resp), "{name}");
        let got = h.frames();
        let lengths: Vec<String> = head_fields(&got[0])
            .into_iter()
            .filter(|(n, _)| n == "content-length")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            lengths,
            want.into_iter().map(String::from).collect::<Vec<_>>(),
            "{name}: {got:?}"
        );
        assert!(h.conn.is_idle(), "{name}: the answer is whole");
    }
}

#[test]
fn an_empty_answer_with_trailers_is_two_headers_frames_and_head_gets_none() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.complete(1, with_trailers(""));
    let got = h.frames();
    assert_eq!(got.len(), 2, "no DATA, not even an empty one: {got:?}");
    assert!(matches!(got[0], F::Headers { end: false, .. }));
    assert_eq!(
        got[1],
        F::Headers {
            stream: 1,
            end: true,
            fields: grpc_trailers()
        }
    );

    // RFC 9110 §9.3.2: HEAD has no content, and no trailers either.
    let mut h = H::open();
    h.recv(&headers(1, &block("HEAD", "/defer", &[]), true));
    h.complete(1, with_trailers("hi"));
    let got = h.frames();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(matches!(got[0], F::Headers { end: true, .. }));
}

#[test]
fn trailers_wait_for_the_data_before_them_not_for_the_window() {
    let mut h = H::fresh();
    h.preface(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    h.frames();
    h.recv(&get(1, "/defer"));
    h.complete(1, with_trailers("hi"));
    let got = h.frames();
    assert_eq!(got.len(), 1, "HEADERS only, the trailers wait: {got:?}");
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 1);
    h.recv(&wu);
    assert_eq!(
        h.frames(),
        [F::Data {
            stream: 1,
            end: false,
            data: b"h".to_vec()
        }]
    );
    let mut wu = Vec::new();
    frame::window_update(&mut wu, 1, 1);
    h.recv(&wu);
    assert_eq!(
        h.frames(),
        [
            F::Data {
                stream: 1,
                end: false,
                data: b"i".to_vec()
            },
            F::Headers {
                stream: 1,
                end: true,
                fields: grpc_trailers()
            }
        ]
    );
}

#[test]
fn a_streamed_answer_ends_with_its_trailers() {
    use std::borrow::Cow;
    let trailers = [
        (Cow::Borrowed("grpc-status"), Cow::Borrowed("0")),
        (Cow::Borrowed("grpc-message"), Cow::Borrowed("ok")),
    ];
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.start(1, None);
    h.frames();
    h.piece(1, b"abc");
    assert!(h.conn.stream_end_with(1, &trailers, &mut h.cx));
    h.flush();
    assert_eq!(
        h.frames(),
        [
            F::Data {
                stream: 1,
                end: false,
                data: b"abc".to_vec()
            },
            F::Headers {
                stream: 1,
                end: true,
                fields: grpc_trailers()
            }
        ]
    );
    assert!(h.conn.is_idle());
}

/// RFC 9113 §8.1: an interim (1xx) head goes out as HEADERS without END_STREAM ahead of the
/// final one (a proxy relaying 103 Early Hints), its fields lowercased and connection-specific
/// ones left out; once the final head is out, there is no place for one.
#[test]
fn an_interim_head_goes_before_the_final_one_and_never_after() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    let fields: &[(&[u8], &[u8])] = &[(b"Link", b"</a.css>; rel=preload"), (b"Connection", b"x")];
    assert!(h.conn.interim(1, 103, fields, &mut h.cx));
    assert!(h.start(1, Some(2)));
    assert!(!h.conn.interim(1, 103, fields, &mut h.cx));
    assert!(h.piece(1, b"ok"));
    assert!(h.end(1));
    let got = h.frames();
    assert!(
        matches!(
            got[0],
            F::Headers {
                stream: 1,
                end: false,
                ..
            }
        ),
        "{got:?}"
    );
    assert_eq!(
        head_fields(&got[0]),
        [
            (":status".to_string(), "103".to_string()),
            ("link".to_string(), "</a.css>; rel=preload".to_string())
        ]
    );
    assert_eq!(status(&got[1]), Some((1, "200".into())));
}

/// MadeYouReset (CVE-2025-8671): frames that make the server reset a stream, one stream
/// after another. Each reset counts against [`MAX_RESETS_PER_SEC`] as the client's own do:
/// the connection ends with ENHANCE_YOUR_CALM after at most that many, and every stream
/// whose answer was pending is listed for the driver to give up its work.
#[test]
fn made_you_reset_is_calmed() {
    type Poison = fn(u32) -> Vec<u8>;
    let forms: [(&str, bool, Poison); 4] = [
        // §5.1: DATA on a half-closed (remote) stream is STREAM_CLOSED.
        ("data on a closed stream", true, |id| data(id, b"x", false)),
        // §6.9: a WINDOW_UPDATE of 0 on a stream is PROTOCOL_ERROR.
        ("window update of 0", false, |id| {
            raw(kind::WINDOW_UPDATE, 0, id, &0u32.to_be_bytes())
        }),
        // §6.9.1: a window past 2^31-1 is FLOW_CONTROL_ERROR.
        ("window past 2^31-1", true, |id| {
            raw(kind::WINDOW_UPDATE, 0, id, &0x7fff_ffffu32.to_be_bytes())
        }),
        // §5.3.1: a stream depending on itself is PROTOCOL_ERROR.
        ("priority on itself", true, |id| {
            let mut p = id.to_be_bytes().to_vec();
            p.push(16);
            raw(kind::PRIORITY, 0, id, &p)
        }),
    ];
    for (form, whole, poison) in forms {
        let mut h = H::open();
        let mut bytes = Vec::new();
        for i in 0..2 * MAX_RESETS_PER_SEC {
            let id = 2 * i + 1;
            bytes.extend(headers(id, &block("GET", "/defer", &[]), whole));
            bytes.extend(poison(id));
        }
        h.recv(&bytes);
        let got = h.frames();
        let resets = got.iter().filter(|f| matches!(f, F::Rst(..))).count();
        assert!(got.iter().any(goaway(Code::EnhanceYourCalm)), "{form}");
        assert_eq!(resets, MAX_RESETS_PER_SEC as usize + 1, "{form}");
        // Deferred requests reset by the server: their work is given up.
        let deferred = if whole { h.app.deferred.len() } else { 0 };
        assert_eq!(h.cx.cancelled.len(), deferred, "{form}");
        assert!(whole || h.app.deferred.is_empty(), "{form}");
    }
}

/// A stream whose answer is pending, reset by the client, is listed for the driver to give
/// up its work (a deferred handler, a proxied exchange); one answered already is not.
#[test]
fn a_reset_stream_gives_up_its_work() {
    let mut h = H::open();
    h.recv(&get(1, "/defer"));
    h.recv(&get(3, "/x"));
    h.recv(&headers(5, &block("POST", "/echo", &[]), false));
    for id in [1, 3, 5] {
        h.recv(&raw(kind::RST_STREAM, 0, id, &8u32.to_be_bytes()));
    }
    assert_eq!(h.cx.cancelled, [1]);
    // A connection error gives up every pending answer.
    h.cx.cancelled.clear();
    h.recv(&get(7, "/defer"));
    h.recv(&get(9, "/defer"));
    h.recv(&raw(kind::PUSH_PROMISE, 0, 7, &[0; 4]));
    assert!(h.frames().iter().any(goaway(Code::Protocol)));
    assert_eq!(h.cx.cancelled, [7, 9]);
}

/// An HPACK bomb: one block puts a 200-byte value in the table, then names it 4,000 times
/// (about 930 KB decoded from 4 KB). The list is not expanded past `max_head_bytes` (512
/// here): 431, and the request buffers hold what a normal request makes them hold. The table
/// stays in step: the next request refers to the entry.
#[test]
fn an_hpack_bomb_is_431_without_being_expanded() {
    let mut h = H::open();
    h.recv(&get(1, "/x"));
    h.frames();
    let normal = h.conn.scratch_held();
    let mut b = block("GET", "/x", &[]);
    b.push(0x40);
    linerate_hpack::string(&mut b, b"x-bomb");
    linerate_hpack::string(&mut b, &[b'a'; 200]);
    b.extend(std::iter::repeat_n(0xbe, 4000));
    let mut bytes = Vec::new();
    frame::headers(&mut bytes, 3, &b, true, 16_384);
    h.recv(&bytes);
    assert_eq!(status(&h.frames()[0]), Some((3, "431".into())));
    assert!(
        h.conn.scratch_held() <= normal + 1024,
        "{}",
        h.conn.scratch_held()
    );
    let mut next = block("GET", "/x", &[]);
    next.push(0xbe);
    h.recv(&headers(5, &next, true));
    assert_eq!(status(&h.frames()[0]), Some((5, "200".into())));
    assert_eq!(h.app.paths.last().map(String::as_str), Some("/x"));
}

/// Rapid reset of a path answered at once: each stream is whole before its RST_STREAM is read,
/// so no stream is open to reset, but the answer was thrown away all the same: the resets
/// count, and the connection ends with ENHANCE_YOUR_CALM. RST_STREAM(NO_ERROR) does not.
#[test]
fn rapid_reset_of_answered_streams_is_calmed() {
    for (code, calmed) in [(8u32, true), (0, false)] {
        let mut h = H::open();
        let mut bytes = Vec::new();
        for i in 0..=MAX_RESETS_PER_SEC {
            let id = 2 * i + 1;
            bytes.extend(get(id, "/x"));
            bytes.extend(raw(kind::RST_STREAM, 0, id, &code.to_be_bytes()));
        }
        h.recv(&bytes);
        let got = h.frames();
        assert_eq!(
            got.iter().any(goaway(Code::EnhanceYourCalm)),
            calmed,
            "{code}"
        );
    }
}
