//! The HTTP/3 connection as byte tables: stream bytes (and time) in, stream writes, ends,
//! resets and closes out through a recording [`Wire`], no QUIC. Each test names the rule
//! (RFC 9114, RFC 9204) or the defence it pins; `scripts/h3-interop.sh` sees the same from
//! outside with aioquic's client.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use linerate_h3::frame::{self, Frame, FrameReader, Role, kind, setting};
use linerate_h3::{Code, qpack, varint};
use linerate_http1::{BodyDecoder, DateCache, HeadRoom, Limits, ParseError, RequestHead, Version};

use super::conn::{Conn, Wire};
use super::{DRAIN_BODY_BYTES, MAX_BODY_STREAMS, MAX_FIELD_SECTION};
use crate::h1::{ConnConfig, Cx, Decision, Exchange, Service};
use crate::h2::MAX_RESETS_PER_SEC;
use crate::pool::Pool;
use crate::response::{Body, FileBody, Response};

/// `/x` answers "x" (`/own-server` too, naming its own `Server`); `/file` a 150,000-byte file; `/echo` the body (16 bytes at most);
/// `/defer` defers; `/relay` relays its body to `upstream`, which holds [`UPSTREAM_ROOM`]
/// bytes before it has no room; anything else 404.
#[derive(Default)]
struct App {
    deferred: Vec<u64>,
    own: Vec<u16>,
    paths: Vec<String>,
    versions: Vec<Version>,
    upstream: Rc<RefCell<Vec<u8>>>,
}

struct Pending {
    defer: bool,
    body: Vec<u8>,
    relay: Option<Rc<RefCell<Vec<u8>>>>,
}

/// What `/relay`'s upstream takes before it is full.
const UPSTREAM_ROOM: usize = 8;

/// 150,000 bytes, byte i is `i % 251`.
fn big_file() -> FileBody {
    let path = std::env::temp_dir().join(format!(
        "linerate-h3-big-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let bytes: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::File::create(&path)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
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
        match (path.as_str(), req.body) {
            ("/x", _) => Decision::Respond(Response::text("x")),
            ("/own-server", _) => Decision::Respond(Response::text("x").header("Server", "mine")),
            ("/file", _) => Decision::Respond(Response::new(200).body(Body::File(big_file()))),
            ("/defer", Some(_)) => {
                self.deferred.push(req.id);
                Decision::Defer
            }
            ("/echo" | "/defer", None) => Decision::ReadBody {
                limit: 16,
                pending: Pending {
                    defer: path == "/defer",
                    body: Vec::new(),
                    relay: None,
                },
            },
            ("/relay", None) => Decision::RelayBody {
                limit: 1 << 20,
                pending: Pending {
                    defer: false,
                    body: Vec::new(),
                    relay: Some(self.upstream.clone()),
                },
            },
            ("/echo", Some(b)) => Decision::Respond(Response::text_owned(
                String::from_utf8_lossy(b).into_owned(),
            )),
            _ => Decision::Respond(Response::text("nf").status(404)),
        }
    }

    fn data(&mut self, p: &mut Pending, data: &[u8]) -> Result<(), Response> {
        match &p.relay {
            Some(up) => up.borrow_mut().extend_from_slice(data),
            None => p.body.extend_from_slice(data),
        }
        Ok(())
    }

    fn room(&self, p: &Pending) -> bool {
        p.relay
            .as_ref()
            .is_none_or(|up| up.borrow().len() < UPSTREAM_ROOM)
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

    fn request_line_of(&self, _: &Pending) -> Vec<u8> {
        Vec::new()
    }
}

/// The QUIC side, recorded: each stream's bytes, ends, resets and STOP_SENDINGs, and the
/// connection's close. `limit` bytes are taken per write (0: all).
#[derive(Default)]
struct Rec {
    bytes: BTreeMap<u64, Vec<u8>>,
    finished: Vec<u64>,
    resets: Vec<(u64, Code)>,
    stops: Vec<(u64, Code)>,
    closed: Option<Code>,
    next_uni: u64,
    limit: usize,
}

impl Wire for Rec {
    fn write(&mut self, id: u64, data: &[u8]) -> usize {
        assert!(!self.finished.contains(&id), "write after finish on {id}");
        let n = if self.limit == 0 {
            data.len()
        } else {
            data.len().min(self.limit)
        };
        self.bytes
            .entry(id)
            .or_default()
            .extend_from_slice(&data[..n]);
        n
    }
    fn finish(&mut self, id: u64) {
        assert!(!self.finished.contains(&id), "finished twice: {id}");
        self.finished.push(id);
    }
    fn reset(&mut self, id: u64, code: Code) {
        self.resets.push((id, code));
    }
    fn stop(&mut self, id: u64, code: Code) {
        self.stops.push((id, code));
    }
    fn open_uni(&mut self) -> Option<u64> {
        let id = 3 + 4 * self.next_uni;
        self.next_uni += 1;
        Some(id)
    }
    fn close(&mut self, code: Code) {
        assert!(self.closed.is_none(), "closed twice");
        self.closed = Some(code);
    }
}

struct H {
    conn: Conn<Pending>,
    cx: Cx,
    head: RequestHead,
    app: App,
    wire: Rec,
}

/// The server's control stream and QPACK decoder stream ids (the first two it opens).
const CONTROL: u64 = 3;
const QDECODER: u64 = 7;

impl H {
    fn new() -> H {
        let cfg = ConnConfig {
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
        };
        let mut h = H {
            conn: Conn::new(),
            cx: Cx {
                now: 0,
                cfg,
                out: Vec::new(),
                room: HeadRoom::default(),
                pool: Pool::default(),
                date: DateCache::new(UNIX_EPOCH + Duration::from_secs(1_000_000_000)),
                draining: false,
                sendfile: false,
                alt_svc: None,
                cancelled: Vec::new(),
            },
            head: RequestHead::new(),
            app: App::default(),
            wire: Rec::default(),
        };
        h.flush();
        h
    }

    fn recv(&mut self, id: u64, data: &[u8], fin: bool) {
        self.conn
            .recv(id, data, fin, &mut self.head, &mut self.cx, &mut self.app);
        self.flush();
    }

    fn flush(&mut self) {
        self.conn.flush(&mut self.cx, &mut self.wire);
    }

    /// A request on stream `id`: its HEADERS (and `body` as one DATA frame), ended.
    fn request(&mut self, id: u64, fields: &[(&str, &str)], body: Option<&[u8]>) {
        let mut b = headers(fields);
        if let Some(body) = body {
            frame::write_head(&mut b, kind::DATA, body.len() as u64);
            b.extend_from_slice(body);
        }
        self.recv(id, &b, true);
    }

    fn get(&mut self, id: u64, path: &str) {
        self.request_owned(id, &get(path), None);
    }

    /// Stream `id`'s answer as the client reads it: the status, the fields, the body.
    fn answer(&self, id: u64) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let bytes = self.wire.bytes.get(&id).cloned().unwrap_or_default();
        let mut r = FrameReader::new(Role::Request, 1 << 20);
        let mut d = qpack::Decoder::new(0);
        let (mut status, mut fields, mut body) = (0, Vec::new(), Vec::new());
        let mut pos = 0;
        while pos < bytes.len() {
            let (used, f) = r
                .read(&bytes[pos..])
                .expect("the server's frames are valid");
            pos += used;
            match f {
                Some(Frame::Headers(s)) => {
                    d.decode(s, |n, v| {
                        let (n, v) = (
                            String::from_utf8_lossy(n).into_owned(),
                            String::from_utf8_lossy(v).into_owned(),
                        );
                        if n == ":status" {
                            status = v.parse().unwrap();
                        } else {
                            fields.push((n, v));
                        }
                    })
                    .expect("static-only sections");
                }
                Some(Frame::Data(p)) => body.extend_from_slice(p),
                None if used == 0 => break,
                _ => {}
            }
        }
        assert!(r.at_boundary(), "a frame is cut");
        (status, fields, body)
    }

    fn status(&self, id: u64) -> u16 {
        self.answer(id).0
    }
}

fn get(path: &str) -> Vec<(&'static str, String)> {
    vec![
        (":method", "GET".into()),
        (":scheme", "https".into()),
        (":authority", "a.test".into()),
        (":path", path.into()),
    ]
}

/// A HEADERS frame of `fields`, encoded against the static table.
fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut s = Vec::new();
    qpack::encode::prefix(&mut s);
    for (n, v) in fields {
        qpack::encode::field(&mut s, n.as_bytes(), v.as_bytes());
    }
    let mut b = Vec::new();
    frame::write_head(&mut b, kind::HEADERS, s.len() as u64);
    b.extend_from_slice(&s);
    b
}

fn owned<'a>(v: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    v.iter().map(|(n, v)| (*n, v.as_str())).collect()
}

impl H {
    fn request_owned(&mut self, id: u64, fields: &[(&'static str, String)], body: Option<&[u8]>) {
        let f = owned(fields);
        self.request(id, &f, body);
    }
}

#[test]
fn control_and_qpack_streams_open_first() {
    // §6.2.1: the control stream opens with SETTINGS; RFC 9204 §4.2: the decoder stream.
    let h = H::new();
    let ctl = &h.wire.bytes[&CONTROL];
    let (ty, n) = varint::read(ctl).unwrap();
    assert_eq!(ty, 0x00);
    let mut r = FrameReader::new(Role::Control, 1024);
    let mut pos = n;
    let s = loop {
        let (used, f) = r.read(&ctl[pos..]).unwrap();
        pos += used;
        match f {
            Some(Frame::Settings(s)) => break s,
            None if used > 0 => {}
            f => panic!("{f:?}"),
        }
    };
    assert_eq!(s.qpack_max_table_capacity, super::QPACK_CAPACITY as u64);
    assert_eq!(s.qpack_blocked_streams, 0);
    assert_eq!(s.max_field_section_size, Some(512));
    assert_eq!(h.wire.bytes[&QDECODER], [0x03]);
    let _ = setting::QPACK_MAX_TABLE_CAPACITY;
}

#[test]
fn a_request_is_answered_on_its_stream_and_the_stream_ends() {
    let mut h = H::new();
    h.request_owned(0, &get("/x?q=1"), None);
    let (status, fields, body) = h.answer(0);
    assert_eq!(status, 200);
    assert_eq!(body, b"x");
    assert!(fields.contains(&("content-length".into(), "1".into())));
    assert!(fields.contains(&("server".into(), "t".into())));
    assert_eq!(h.wire.finished, [0]);
    assert_eq!(h.app.paths, ["/x?q=1"]);
    assert_eq!(h.app.versions, [Version::Http3]);
    assert!(h.conn.is_idle());
}

#[test]
fn a_body_split_at_every_byte_is_read_whole() {
    let mut req = headers(&owned(&[
        (":method", "POST".into()),
        (":scheme", "https".into()),
        (":authority", "a.test".into()),
        (":path", "/echo".into()),
        ("content-length", "5".into()),
    ]));
    frame::write_head(&mut req, kind::DATA, 2);
    req.extend_from_slice(b"he");
    frame::write_head(&mut req, kind::DATA, 3);
    req.extend_from_slice(b"llo");
    let mut h = H::new();
    for (i, b) in req.iter().enumerate() {
        h.recv(4, &[*b], i == req.len() - 1);
    }
    assert_eq!(h.answer(4), (200, h.answer(4).1, b"hello".to_vec()));
}

#[test]
fn malformed_requests_are_stream_errors() {
    // §4.1.2, §4.2, §4.3: H3_MESSAGE_ERROR on the stream; the connection goes on.
    let cases: &[&[(&str, &str)]] = &[
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/x"),
            ("Upper", "1"),
        ],
        &[(":method", "GET"), (":scheme", "https")],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/x"),
            ("connection", "x"),
        ],
        &[
            (":method", "GET"),
            (":path", "/x"),
            (":scheme", "https"),
            (":status", "200"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/x"),
            ("te", "gzip"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/x"),
            ("content-length", "3"),
        ],
    ];
    for (i, fields) in cases.iter().enumerate() {
        let mut h = H::new();
        h.request(0, fields, None);
        assert_eq!(h.wire.resets, [(0, Code::MessageError)], "case {i}");
        assert!(h.wire.closed.is_none(), "case {i}");
        h.get(4, "/x");
        assert_eq!(h.status(4), 200, "case {i}: the connection goes on");
    }
}

#[test]
fn a_body_longer_or_shorter_than_its_content_length_is_malformed() {
    for body in [&b"abc"[..], b"a"] {
        let mut h = H::new();
        let fields = [
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/echo"),
            ("content-length", "2"),
        ];
        h.request(0, &fields, Some(body));
        assert_eq!(h.wire.resets, [(0, Code::MessageError)], "{body:?}");
    }
}

#[test]
fn trailers_end_the_request_and_may_not_carry_pseudo_fields() {
    let post = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "a"),
        (":path", "/echo"),
    ];
    let mut req = headers(&post);
    frame::write_head(&mut req, kind::DATA, 2);
    req.extend_from_slice(b"ok");
    req.extend_from_slice(&headers(&[("x-sum", "1")]));
    let mut h = H::new();
    h.recv(0, &req, true);
    assert_eq!(h.answer(0).2, b"ok");

    let mut bad = headers(&post);
    bad.extend_from_slice(&headers(&[(":path", "/y")]));
    let mut h = H::new();
    h.recv(0, &bad, true);
    assert_eq!(h.wire.resets, [(0, Code::MessageError)]);
}

#[test]
fn frame_order_and_ends_are_enforced() {
    // §4.1: DATA before HEADERS is H3_FRAME_UNEXPECTED, a connection error.
    let mut h = H::new();
    let mut b = Vec::new();
    frame::write_head(&mut b, kind::DATA, 1);
    b.push(b'x');
    h.recv(0, &b, true);
    assert_eq!(h.wire.closed, Some(Code::FrameUnexpected));

    // §7.1: a frame cut by the stream's end is H3_FRAME_ERROR.
    let mut h = H::new();
    let req = headers(&owned(&get("/x")));
    h.recv(0, &req[..req.len() - 1], true);
    assert_eq!(h.wire.closed, Some(Code::FrameError));

    // §4.1: a stream that ends without a request is H3_REQUEST_INCOMPLETE.
    let mut h = H::new();
    h.recv(0, &[], true);
    assert_eq!(h.wire.resets, [(0, Code::RequestIncomplete)]);
    assert!(h.wire.closed.is_none());
}

#[test]
fn oversized_field_sections_get_431() {
    // Over MAX_FIELD_SECTION encoded: skipped unread.
    let mut h = H::new();
    let mut b = Vec::new();
    frame::write_head(&mut b, kind::HEADERS, MAX_FIELD_SECTION as u64 + 1);
    b.resize(b.len() + MAX_FIELD_SECTION + 1, 0);
    h.recv(0, &b, true);
    assert_eq!(h.status(0), 431);
    // Over max_head_bytes decoded.
    let mut h = H::new();
    let long = "v".repeat(600);
    let mut f = get("/x");
    f.push(("x-long", long));
    h.request_owned(0, &f, None);
    assert_eq!(h.status(0), 431);
    assert_eq!(h.app.own, [431]);
}

#[test]
fn partial_writes_keep_the_answer_in_order_and_end_it_after_the_last_byte() {
    let mut h = H::new();
    h.wire.limit = 7;
    h.get(0, "/file");
    let mut rounds = 0;
    while !h.wire.finished.contains(&0) {
        h.flush();
        rounds += 1;
        assert!(rounds < 100_000);
    }
    let (status, _, body) = h.answer(0);
    assert_eq!(status, 200);
    assert_eq!(body.len(), 150_000);
    assert!(body.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
}

#[test]
fn deferred_answers_come_later_and_a_reset_abandons_them() {
    let mut h = H::new();
    h.request(
        0,
        &[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/defer"),
        ],
        Some(b""),
    );
    assert_eq!(h.app.deferred, [0]);
    assert!(!h.wire.bytes.contains_key(&0));
    assert!(h.conn.complete(0, Response::text("later"), &mut h.cx));
    h.flush();
    assert_eq!(h.answer(0).2, b"later");

    h.request(
        4,
        &[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/defer"),
        ],
        Some(b""),
    );
    h.conn.reset(4, &mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(h.app.own, [499]);
    assert!(!h.conn.complete(4, Response::text("late"), &mut h.cx));
    assert!(h.wire.resets.contains(&(4, Code::RequestCancelled)));
}

#[test]
fn timers_answer_408_and_503_and_drop_requests_that_never_came() {
    let mut h = H::new();
    // A request whose HEADERS never completes.
    h.recv(0, &[0x01], false);
    // A body that stops coming.
    let mut b = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "a"),
        (":path", "/echo"),
    ]);
    frame::write_head(&mut b, kind::DATA, 1);
    b.push(b'a');
    h.recv(4, &b, false);
    // A deferred answer that never comes.
    h.request(
        8,
        &[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/defer"),
        ],
        Some(b""),
    );
    assert_eq!(h.conn.deadline(), 100);
    h.cx.now = 100;
    h.conn.on_timer(&mut h.cx, &mut h.app);
    h.flush();
    assert!(h.wire.resets.contains(&(0, Code::RequestIncomplete)));
    h.cx.now = 500;
    h.conn.on_timer(&mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(h.status(4), 408);
    assert_eq!(h.status(8), 503);
    // The unread rest of the body is not wanted (§4.1.2): after the drain's linger_timeout
    // the client is asked to stop.
    assert!(!h.wire.stops.contains(&(4, Code::NoError)));
    h.cx.now = 550;
    h.conn.on_timer(&mut h.cx, &mut h.app);
    h.flush();
    assert!(h.wire.stops.contains(&(4, Code::NoError)));
}

#[test]
fn critical_streams_are_one_each_and_never_close() {
    let ctl = |extra: &[u8]| {
        let mut b = vec![0x00];
        frame::write_settings(&mut b, &[]);
        b.extend_from_slice(extra);
        b
    };
    // A second control stream (§6.2.1), a push stream (§6.2.2): H3_STREAM_CREATION_ERROR.
    let mut h = H::new();
    h.recv(2, &ctl(&[]), false);
    h.recv(6, &ctl(&[]), false);
    assert_eq!(h.wire.closed, Some(Code::StreamCreationError));
    let mut h = H::new();
    h.recv(2, &[0x01], false);
    assert_eq!(h.wire.closed, Some(Code::StreamCreationError));
    // Closing one: H3_CLOSED_CRITICAL_STREAM.
    let mut h = H::new();
    h.recv(2, &ctl(&[]), true);
    assert_eq!(h.wire.closed, Some(Code::ClosedCriticalStream));
    // SETTINGS must come first (§6.2.1).
    let mut h = H::new();
    let mut b = vec![0x00];
    frame::write_goaway(&mut b, 0);
    h.recv(2, &b, false);
    assert_eq!(h.wire.closed, Some(Code::MissingSettings));
    // §7.2.3: no push was promised, so CANCEL_PUSH names an unknown id.
    let mut h = H::new();
    h.recv(2, &ctl(&[0x03, 0x01, 0x00]), false);
    assert_eq!(h.wire.closed, Some(Code::IdError));
    // §6.2.3: an unknown type is asked to stop; the connection goes on.
    let mut h = H::new();
    h.recv(10, &[0x21, 0xff], false);
    assert_eq!(h.wire.stops, [(10, Code::StreamCreationError)]);
    assert!(h.wire.closed.is_none());
}

#[test]
fn the_dynamic_table_is_filled_acknowledged_and_never_waited_for() {
    // RFC 9204: the encoder stream sets the capacity and inserts :authority; the request
    // refers to the entry; the decoder stream acknowledges the insert and the section.
    let mut h = H::new();
    let mut enc = vec![0x02, 0x3f, 0xbd, 0x01, 0xc0, 0x0f];
    enc.extend_from_slice(b"www.example.com");
    h.recv(10, &enc, false);
    assert_eq!(
        h.wire.bytes[&QDECODER],
        [0x03, 0x01],
        "Insert Count Increment 1"
    );
    let section = [0x02, 0x00, 0x80, 0xd1, 0xd7, 0xc1];
    let mut req = Vec::new();
    frame::write_head(&mut req, kind::HEADERS, section.len() as u64);
    req.extend_from_slice(&section);
    h.recv(0, &req, true);
    assert_eq!(h.status(0), 404);
    assert_eq!(
        h.wire.bytes[&QDECODER],
        [0x03, 0x01, 0x80],
        "Section Acknowledgment"
    );
    // A section that needs a second insert would block: QPACK_BLOCKED_STREAMS is 0.
    let blocked = [0x03, 0x00, 0x80, 0xd1, 0xd7, 0xc1];
    let mut req = Vec::new();
    frame::write_head(&mut req, kind::HEADERS, blocked.len() as u64);
    req.extend_from_slice(&blocked);
    h.recv(4, &req, true);
    assert_eq!(h.wire.closed, Some(Code::QpackDecompressionFailed));
}

#[test]
fn goaway_drains_open_requests_and_refuses_new_ones() {
    let mut h = H::new();
    h.request(
        0,
        &[
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/defer"),
        ],
        Some(b""),
    );
    h.conn.drain(&mut h.cx);
    h.flush();
    let ctl = &h.wire.bytes[&CONTROL];
    let mut want = Vec::new();
    frame::write_goaway(&mut want, 4);
    assert!(ctl.ends_with(&want), "GOAWAY(4) on the control stream");
    h.get(4, "/x");
    assert!(h.wire.resets.contains(&(4, Code::RequestRejected)));
    assert!(!h.conn.is_done(), "stream 0 is still open");
    assert!(h.conn.complete(0, Response::text("done"), &mut h.cx));
    h.flush();
    assert_eq!(h.answer(0).2, b"done");
    assert!(h.conn.is_done());
}

#[test]
fn defences_bodies_at_once_and_rapid_resets() {
    let mut h = H::new();
    let post = [
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "a"),
        (":path", "/echo"),
    ];
    for i in 0..=MAX_BODY_STREAMS as u64 {
        h.recv(4 * i, &headers(&post), false);
    }
    let last = 4 * MAX_BODY_STREAMS as u64;
    assert_eq!(h.wire.resets, [(last, Code::RequestRejected)]);

    let mut h = H::new();
    for i in 0..=MAX_RESETS_PER_SEC as u64 {
        h.recv(4 * i, &[0x01], false);
        h.conn.reset(4 * i, &mut h.cx, &mut h.app);
    }
    h.flush();
    assert_eq!(h.wire.closed, Some(Code::ExcessiveLoad));
}

#[test]
fn an_answer_before_the_body_ends_drains_the_rest() {
    // §4.1.2: a whole answer may come before the request ends; the rest is read and dropped
    // until FIN (a client still writing may drop an answer whose request stream is
    // stopped), and no STOP_SENDING is sent.
    let mut h = H::new();
    let mut b = headers(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":authority", "a"),
        (":path", "/x"),
    ]);
    frame::write_head(&mut b, kind::DATA, 1);
    b.push(b'a');
    h.recv(0, &b, false);
    assert_eq!(h.status(0), 200);
    assert!(h.wire.stops.is_empty());
    assert!(!h.conn.is_idle());
    // What still comes for it is dropped.
    h.recv(0, &[0x00, 0x01, b'b'], true);
    assert!(h.wire.closed.is_none());
    assert!(h.wire.stops.is_empty());
    assert!(h.conn.is_idle());
}

#[test]
fn a_drain_ends_with_stop_sending_past_its_bytes_or_its_time() {
    let post = |path: &str, len: Option<&str>| {
        let mut f = vec![
            (":method", "POST"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", path),
        ];
        if let Some(l) = len {
            f.push(("content-length", l));
        }
        let mut b = headers(&f);
        frame::write_head(&mut b, kind::DATA, 1);
        b.push(b'a');
        b
    };
    // Past linger_timeout (50 ms here).
    let mut h = H::new();
    h.recv(0, &post("/x", None), false);
    assert_eq!(h.status(0), 200);
    assert_eq!(h.conn.deadline(), 50);
    h.cx.now = 50;
    h.conn.on_timer(&mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(h.wire.stops, [(0, Code::NoError)]);
    assert!(
        h.wire.resets.is_empty(),
        "the answer is whole: its side is not reset"
    );
    // Past DRAIN_BODY_BYTES.
    let mut h = H::new();
    h.recv(0, &post("/x", None), false);
    let mut big = Vec::new();
    frame::write_head(&mut big, kind::DATA, DRAIN_BODY_BYTES + 1);
    h.recv(0, &big, false);
    let chunk = vec![b'c'; 64 * 1024];
    for _ in 0..(DRAIN_BODY_BYTES as usize / chunk.len()) {
        h.recv(0, &chunk, false);
    }
    assert!(
        h.wire.stops.is_empty(),
        "{DRAIN_BODY_BYTES} bytes are drained"
    );
    h.recv(0, b"c", false);
    assert_eq!(h.wire.stops, [(0, Code::NoError)]);
    // A declared body longer than the drain would take: asked to stop at once.
    let mut h = H::new();
    let len = (DRAIN_BODY_BYTES + 2).to_string();
    h.recv(0, &post("/x", Some(&len)), false);
    assert_eq!(h.status(0), 200);
    assert_eq!(h.wire.stops, [(0, Code::NoError)]);
    // One that fits is drained to its end.
    let mut h = H::new();
    h.recv(0, &post("/x", Some("3")), false);
    h.recv(0, &[0x00, 0x02, b'b', b'c'], true);
    assert!(h.wire.stops.is_empty());
    assert!(h.conn.is_idle());
}

/// RFC 9000 §4.6 and RFC 9114 §4.1.1: a request stream the client cancels before its
/// HEADERS were read (RESET_STREAM, or STOP_SENDING) is closed on our side too, in both
/// halves, or the transport would keep it, and its stream credit, for the connection's
/// life (100 such cancels left a connection that could open no request). A reset of a
/// stream already answered and forgotten closes our half the same way (a no-op where it is
/// closed).
#[test]
fn requests_cancelled_before_their_headers_are_read_close_both_halves() {
    let mut h = H::new();
    h.conn.reset(0, &mut h.cx, &mut h.app);
    h.conn.stopped(4, &mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(
        h.wire.resets,
        [(0, Code::RequestCancelled), (4, Code::RequestCancelled)]
    );
    assert_eq!(h.wire.stops, [(4, Code::RequestCancelled)]);
    assert!(h.app.own.is_empty(), "nothing was answered");

    h.get(8, "/x");
    assert_eq!(h.status(8), 200);
    h.conn.reset(8, &mut h.cx, &mut h.app);
    h.flush();
    assert!(h.wire.resets.contains(&(8, Code::RequestCancelled)));
    assert!(h.wire.closed.is_none());
}

/// A relayed body whose upstream is full stops being read (the transport then holds the
/// client to the stream's window) until the upstream has room, and is read again then; a
/// body the application reads itself is never held.
#[test]
fn a_relayed_body_is_not_read_while_its_upstream_is_full() {
    let mut h = H::new();
    let data = |b: &[u8]| {
        let mut out = Vec::new();
        frame::write_head(&mut out, kind::DATA, b.len() as u64);
        out.extend_from_slice(b);
        out
    };
    let post = |path: &str| {
        let mut f = get(path);
        f[0].1 = "POST".into();
        f
    };
    h.recv(0, &headers(&owned(&post("/relay"))), false);
    assert!(h.conn.reading(0));
    h.recv(0, &data(b"abcd"), false);
    assert!(h.conn.reading(0), "room for 8 bytes upstream");
    h.recv(0, &data(b"efghij"), false);
    assert_eq!(*h.app.upstream.borrow(), b"abcdefghij");
    assert!(!h.conn.reading(0), "the upstream is full: not read");
    assert_eq!(h.conn.resumed(), None);
    // The upstream takes what it held: the stream is read again.
    h.app.upstream.borrow_mut().clear();
    h.conn.body_room(0);
    assert!(h.conn.reading(0));
    assert_eq!((h.conn.resumed(), h.conn.resumed()), (Some(0), None));
    h.conn.body_room(0);
    assert_eq!(
        h.conn.resumed(),
        None,
        "room for a stream not held: nothing to resume"
    );
    h.conn.body_room(44);
    assert_eq!(h.conn.resumed(), None, "an unknown stream");
    // A body the application reads (not relayed) is never held.
    h.recv(4, &headers(&owned(&post("/echo"))), false);
    h.recv(4, &data(b"0123456789abcdef"), false);
    assert!(h.conn.reading(4));
    h.recv(4, &[], true);
    assert_eq!(
        h.answer(4),
        (200, h.answer(4).1, b"0123456789abcdef".to_vec())
    );
}

/// Every answer carries the second's `date` and the server's `server` (kept encoded for the
/// second, so a new second must show); an answer that names its own `server` carries that
/// one alone.
#[test]
fn answers_carry_the_current_date_and_one_server() {
    let mut h = H::new();
    let field = |h: &H, id: u64, name: &str| -> Vec<String> {
        h.answer(id)
            .1
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v)
            .collect()
    };
    h.get(0, "/x");
    h.get(4, "/x");
    let first = field(&h, 0, "date");
    assert_eq!(first, ["Sun, 09 Sep 2001 01:46:40 GMT"]);
    assert_eq!(field(&h, 4, "date"), first);
    assert_eq!(field(&h, 4, "server"), ["t"]);
    h.cx.date
        .update(UNIX_EPOCH + Duration::from_secs(1_000_000_001));
    h.get(8, "/x");
    assert_eq!(field(&h, 8, "date"), ["Sun, 09 Sep 2001 01:46:41 GMT"]);
    assert_eq!(field(&h, 8, "server"), ["t"]);
    h.get(12, "/own-server");
    assert_eq!(field(&h, 12, "server"), ["mine"]);
    assert_eq!(field(&h, 12, "date"), ["Sun, 09 Sep 2001 01:46:41 GMT"]);
}

// Trailer fields (RFC 9114 §4.1): a HEADERS frame after the last DATA, then the stream's end.

/// The HEADERS frame the server writes for the gRPC trailers: QPACK against the static
/// table only, names lowercase.
fn trailer_frame() -> Vec<u8> {
    headers(&[("grpc-status", "0"), ("grpc-message", "ok")])
}

fn data_frame(body: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    frame::write_head(&mut b, kind::DATA, body.len() as u64);
    b.extend_from_slice(body);
    b
}

fn with_trailers(body: &'static str) -> Response {
    Response::text(body)
        .trailer("grpc-status", "0")
        .trailer("Grpc-Message", "ok")
}

/// As over HTTP/2 (`h2/tests.rs`), a gRPC answer carries no `content-length`,
/// whole or trailers-only; gRPC-Web's and other answers with trailers keep theirs.
#[test]
fn grpc_answers_carry_no_content_length_grpc_web_ones_keep_it() {
    let message: &'static [u8] = b"\0\0\0\0\x02hi";
    let answer = |ct: &'static str| {
        Response::new(200)
            .content_type(ct)
            .body(Body::Static(message))
            .trailer("grpc-status", "0")
    };
    let trailers_only = Response::new(200)
        .content_type("application/grpc")
        .header("grpc-status", "5");
    let cases: [(&str, Response, Option<&str>); 4] = [
        ("unary", answer("application/grpc"), None),
        ("trailers-only", trailers_only, None),
        ("gRPC-Web", answer("application/grpc-web+proto"), Some("7")),
        ("not gRPC", with_trailers("hi"), Some("2")),
    ];
    for (i, (name, resp, want)) in cases.into_iter().enumerate() {
        let id = 4 * i as u64;
        let mut h = H::new();
        h.get(id, "/defer");
        assert!(h.conn.complete(id, resp, &mut h.cx), "{name}");
        h.flush();
        let (status, fields, _) = h.answer(id);
        assert_eq!(status, 200, "{name}");
        let lengths: Vec<&str> = fields
            .iter()
            .filter(|(n, _)| n == "content-length")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(
            lengths,
            want.into_iter().collect::<Vec<_>>(),
            "{name}: {fields:?}"
        );
        assert!(h.wire.finished.contains(&id), "{name}: the stream ends");
    }
}

#[test]
fn an_answer_with_trailers_ends_with_a_headers_frame_after_its_data() {
    let mut h = H::new();
    h.get(0, "/defer");
    assert!(h.conn.complete(0, with_trailers("hi"), &mut h.cx));
    h.flush();
    let bytes = &h.wire.bytes[&0];
    let tail = [data_frame(b"hi"), trailer_frame()].concat();
    assert!(bytes.ends_with(&tail), "{bytes:?}");
    assert!(h.wire.finished.contains(&0), "the stream ends after them");
    let (status, fields, body) = h.answer(0);
    assert_eq!((status, body.as_slice()), (200, &b"hi"[..]));
    assert!(fields.ends_with(&[
        ("grpc-status".into(), "0".into()),
        ("grpc-message".into(), "ok".into())
    ]));

    // An empty body: HEADERS, then the trailers' HEADERS.
    h.get(4, "/defer");
    h.conn.complete(4, with_trailers(""), &mut h.cx);
    h.flush();
    let bytes = &h.wire.bytes[&4];
    assert!(bytes.ends_with(&trailer_frame()), "{bytes:?}");
    assert!(!bytes.ends_with(&[data_frame(b""), trailer_frame()].concat()));

    // RFC 9110 §9.3.2: HEAD gets neither content nor trailers.
    h.request(
        8,
        &[
            (":method", "HEAD"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "/defer"),
        ],
        None,
    );
    h.conn.complete(8, with_trailers("hi"), &mut h.cx);
    h.flush();
    let bytes = &h.wire.bytes[&8];
    assert!(!bytes.ends_with(&trailer_frame()), "{bytes:?}");
    assert!(h.wire.finished.contains(&8));
}

#[test]
fn a_streamed_answer_ends_with_its_trailers() {
    use std::borrow::Cow;
    let trailers = [
        (Cow::Borrowed("grpc-status"), Cow::Borrowed("0")),
        (Cow::Borrowed("grpc-message"), Cow::Borrowed("ok")),
    ];
    let mut h = H::new();
    h.get(0, "/defer");
    let head = crate::h1::StreamHead {
        status: 200,
        fields: &[],
        length: None,
        date: None,
    };
    assert!(h.conn.start_stream(0, &head, &mut h.cx));
    assert!(h.conn.stream_data(0, b"abc", &mut h.cx));
    assert!(h.conn.stream_end_with(0, &trailers, &mut h.cx));
    h.flush();
    let bytes = &h.wire.bytes[&0];
    let tail = [data_frame(b"abc"), trailer_frame()].concat();
    assert!(bytes.ends_with(&tail), "{bytes:?}");
    assert!(h.wire.finished.contains(&0));
}

/// RFC 9114 §4.1: an interim (1xx) head is a HEADERS frame ahead of the final one (a proxy
/// relaying 103 Early Hints); once the final head is out, there is no place for one.
#[test]
fn an_interim_head_goes_before_the_final_one_and_never_after() {
    let mut h = H::new();
    h.get(0, "/defer");
    let fields: &[(&[u8], &[u8])] = &[(b"link", b"</a.css>; rel=preload")];
    assert!(h.conn.interim(0, 103, fields, &mut h.cx));
    let head = crate::h1::StreamHead {
        status: 200,
        fields: &[],
        length: None,
        date: None,
    };
    assert!(h.conn.start_stream(0, &head, &mut h.cx));
    assert!(!h.conn.interim(0, 103, fields, &mut h.cx));
    assert!(h.conn.stream_end_with(0, &[], &mut h.cx));
    h.flush();
    let bytes = &h.wire.bytes[&0];
    // Two HEADERS frames (type 0x01) lead the stream: the 103's, then the 200's.
    assert_eq!(bytes[0], 0x01, "{bytes:?}");
    let second = 2 + usize::from(bytes[1]);
    assert_eq!(bytes[second], 0x01, "{bytes:?}");
}

/// MadeYouReset over HTTP/3: requests that make the server reset their streams (here
/// malformed ones, H3_MESSAGE_ERROR) count against [`MAX_RESETS_PER_SEC`] as the client's
/// own resets do; past it the connection ends with H3_EXCESSIVE_LOAD.
#[test]
fn server_resets_the_client_caused_are_calmed() {
    let mut h = H::new();
    let bad = [
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/defer"),
        ("Upper", "1"),
    ];
    for i in 0..MAX_RESETS_PER_SEC as u64 {
        h.request(4 * i, &bad, None);
    }
    assert!(h.wire.closed.is_none());
    assert_eq!(h.wire.resets.len(), MAX_RESETS_PER_SEC as usize);
    h.request(4 * u64::from(MAX_RESETS_PER_SEC), &bad, None);
    assert_eq!(h.wire.closed, Some(Code::ExcessiveLoad));
}

/// A deferred request reset by the client, or stopped, is listed for the driver to give up
/// its work; an answered one is not.
#[test]
fn a_cancelled_request_gives_up_its_work() {
    let mut h = H::new();
    h.get(0, "/defer");
    h.get(4, "/defer");
    h.get(8, "/x");
    h.conn.reset(0, &mut h.cx, &mut h.app);
    h.conn.stopped(4, &mut h.cx, &mut h.app);
    h.conn.reset(8, &mut h.cx, &mut h.app);
    h.flush();
    assert_eq!(h.cx.cancelled, [0, 4]);
}

/// A QPACK bomb: the encoder stream inserts a 150-byte value, then one section names it
/// 6,000 times (about 1.1 MB decoded from 6 KB). Past `max_head_bytes` (512 here) nothing
/// more is written down: 431, and the request buffers hold no more than a normal request's.
#[test]
fn a_qpack_bomb_is_431_without_being_expanded() {
    let mut h = H::new();
    h.get(0, "/x");
    let normal = h.conn.scratch_held();
    // The encoder stream: capacity 220, then an insert with a literal name.
    let mut enc = vec![0x02, 0x3f, 0xbd, 0x01, 0x46];
    enc.extend_from_slice(b"x-bomb");
    linerate_hpack::integer(&mut enc, 0, 7, 150);
    enc.extend_from_slice(&[b'a'; 150]);
    h.recv(10, &enc, false);
    // Required Insert Count 1, Base 1; GET https /, then the entry 6,000 times.
    let mut section = vec![0x02, 0x00, 0xd1, 0xd7, 0xc1];
    section.extend(std::iter::repeat_n(0x80, 6000));
    let mut req = Vec::new();
    frame::write_head(&mut req, kind::HEADERS, section.len() as u64);
    req.extend_from_slice(&section);
    h.recv(4, &req, true);
    assert_eq!(h.status(4), 431);
    assert!(
        h.conn.scratch_held() <= normal + 1024,
        "{}",
        h.conn.scratch_held()
    );
    assert!(h.wire.closed.is_none());
}
