//! The upstream HTTP/2 connection as byte tables: the server's frames in, our frames (written
//! as text) and the caller's events out, every input also fed one byte at a time; timers
//! exact. Each row cites the RFC 9113 rule it pins.
#![forbid(unsafe_code)]

use super::cancel::RESET_BUDGET;
use super::conn::*;
use super::fields::{Fields, Request};
use crate::h1c::Transmit;
use crate::h2::frame::{self, Head, flag, kind};
use linerate_hpack as hpack;

/// What the caller heard, as text.
#[derive(Default)]
pub(super) struct Heard {
    pub events: Vec<String>,
}

fn fields_text(f: &Fields) -> String {
    let v: Vec<String> = f
        .iter()
        .map(|(n, v)| {
            format!(
                "{}: {}",
                String::from_utf8_lossy(n),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    v.join(", ")
}

impl Events for Heard {
    fn head(&mut self, id: u32, status: u16, fields: &Fields) {
        self.events
            .push(format!("head {id} {status} [{}]", fields_text(fields)));
    }
    fn data(&mut self, id: u32, data: &[u8]) {
        // Pieces of one stream in a row are joined, so splits do not matter.
        let text = String::from_utf8_lossy(data);
        let prefix = format!("data {id} ");
        match self.events.last_mut() {
            Some(last) if last.starts_with(&prefix) => last.push_str(&text),
            _ => self.events.push(format!("{prefix}{text}")),
        }
    }
    fn trailers(&mut self, id: u32, fields: &Fields) {
        self.events
            .push(format!("trailers {id} [{}]", fields_text(fields)));
    }
    fn end(&mut self, id: u32) {
        self.events.push(format!("end {id}"));
    }
    fn failed(&mut self, id: u32, error: StreamError) {
        self.events.push(format!("failed {id} {error:?}"));
    }
    fn writable(&mut self, id: u32) {
        self.events.push(format!("writable {id}"));
    }
    fn pong(&mut self) {
        self.events.push("pong".into());
    }
    fn goaway(&mut self) {
        self.events.push("goaway".into());
    }
}

/// Our frames as text, one per frame; header blocks decoded with `dec` (the server's decoder).
pub(super) fn frames_text(mut b: &[u8], dec: &mut hpack::Decoder) -> Vec<String> {
    let mut out = Vec::new();
    if b.starts_with(frame::PREFACE) {
        out.push("PREFACE".to_string());
        b = &b[frame::PREFACE.len()..];
    }
    let mut block: Vec<u8> = Vec::new();
    while b.len() >= frame::HEAD_LEN {
        let h = Head::parse(b);
        let p = &b[frame::HEAD_LEN..frame::HEAD_LEN + h.len];
        b = &b[frame::HEAD_LEN + h.len..];
        let es = if h.has(flag::END_STREAM) { " ES" } else { "" };
        let u32at = |i: usize| u32::from_be_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let text = match h.kind {
            kind::SETTINGS if h.has(flag::ACK) => "SETTINGS ACK".to_string(),
            kind::SETTINGS => {
                let v: Vec<String> = p
                    .chunks(6)
                    .map(|e| {
                        format!(
                            "{}={}",
                            u16::from_be_bytes([e[0], e[1]]),
                            u32::from_be_bytes([e[2], e[3], e[4], e[5]])
                        )
                    })
                    .collect();
                format!("SETTINGS [{}]", v.join(","))
            }
            kind::WINDOW_UPDATE => format!("WINDOW_UPDATE {} +{}", h.stream, u32at(0)),
            kind::DATA => format!("DATA {}{es} {}", h.stream, String::from_utf8_lossy(p)),
            kind::RST_STREAM => format!("RST_STREAM {} {}", h.stream, u32at(0)),
            kind::GOAWAY => format!("GOAWAY {} {}", u32at(0), u32at(4)),
            kind::PING if h.has(flag::ACK) => format!("PING ACK {p:?}"),
            kind::PING => format!("PING {p:?}"),
            kind::HEADERS | kind::CONTINUATION => {
                block.extend_from_slice(p);
                if !h.has(flag::END_HEADERS) {
                    out.push(format!(
                        "{} {} ({} bytes)",
                        if h.kind == kind::HEADERS {
                            "HEADERS"
                        } else {
                            "CONTINUATION"
                        },
                        h.stream,
                        p.len()
                    ));
                    continue;
                }
                let mut f = Vec::new();
                dec.decode(&block, |n, v| {
                    f.push(format!(
                        "{}: {}",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    ))
                })
                .expect("our header block decodes");
                block.clear();
                let name = if h.kind == kind::HEADERS {
                    "HEADERS"
                } else {
                    "CONTINUATION"
                };
                format!("{name} {}{es} [{}]", h.stream, f.join(", "))
            }
            k => format!("FRAME {k}"),
        };
        out.push(text);
    }
    assert!(b.is_empty(), "whole frames only");
    out
}

/// A test connection: the state machine, the server's HPACK decoder for our blocks, what the
/// caller heard.
pub(super) struct T {
    pub c: Conn,
    pub dec: hpack::Decoder,
    pub h: Heard,
}

impl T {
    pub(super) fn new(settings: Settings) -> T {
        T {
            c: Conn::new(0, settings),
            dec: hpack::Decoder::new(),
            h: Heard::default(),
        }
    }

    /// Our output since the last call, as frames.
    pub(super) fn out(&mut self) -> Vec<String> {
        let mut all = Vec::new();
        while self.c.poll_transmit() == Transmit::Bytes {
            all.extend(self.c.take_output());
            self.c.sent(&mut self.h);
        }
        frames_text(&all, &mut self.dec)
    }

    pub(super) fn recv(&mut self, bytes: &[u8]) {
        self.c.recv(bytes, 1, &mut self.h);
    }

    pub(super) fn events(&mut self) -> Vec<String> {
        std::mem::take(&mut self.h.events)
    }
}

/// Settings small enough for tables: 100-byte stream windows (the connection's stays the
/// protocol's smallest, 65,535).
const SMALL: Settings = Settings {
    stream_window: 100,
    conn_window: 65_535,
    max_frame: frame::DEFAULT_MAX_FRAME as u32,
    max_header_list: 200,
    settings_timeout: 50,
    ping_timeout: 70,
};

fn get(path: &str) -> Request<'_> {
    Request {
        method: b"GET",
        scheme: b"http",
        authority: b"up",
        path: path.as_bytes(),
        fields: &[],
    }
}

// ----- the server's frames, as bytes -----

fn settings(values: &[(u16, u32)]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::settings(&mut out, values);
    out
}

fn settings_ack() -> Vec<u8> {
    let mut out = Vec::new();
    frame::settings_ack(&mut out);
    out
}

/// A response header block: `:status` (when given) then `fields`.
fn block(status: Option<&str>, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    if let Some(s) = status {
        hpack::field(&mut b, b":status", s.as_bytes());
    }
    for (n, v) in fields {
        hpack::field(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

fn headers(stream: u32, status: Option<&str>, fields: &[(&str, &str)], end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    frame::headers(&mut out, stream, &block(status, fields), end, 16_384);
    out
}

fn raw(len: usize, k: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::head(&mut out, len, k, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn data(stream: u32, d: &str, end: bool) -> Vec<u8> {
    let mut out = Vec::new();
    frame::data(&mut out, stream, d.as_bytes(), end);
    out
}

fn rst(stream: u32, code: u32) -> Vec<u8> {
    raw(4, kind::RST_STREAM, 0, stream, &code.to_be_bytes())
}

fn goaway(last: u32, code: u32) -> Vec<u8> {
    let mut p = last.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    raw(8, kind::GOAWAY, 0, 0, &p)
}

fn window_update(stream: u32, inc: u32) -> Vec<u8> {
    let mut out = Vec::new();
    frame::window_update(&mut out, stream, inc);
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// A connection past the handshake (the server's empty SETTINGS and its ACK of ours), with a
/// GET open on stream 1 and our frames so far taken.
fn ready() -> T {
    let mut t = T::new(SMALL);
    t.out();
    t.recv(&cat(&[settings(&[]), settings_ack()]));
    t.c.open(&get("/"), true).unwrap();
    t.out();
    t.events();
    t
}

#[test]
fn the_start_is_preface_settings_and_window() {
    // RFC 9113 §3.4: preface, then SETTINGS; §6.5.2 ENABLE_PUSH 0 (2), INITIAL_WINDOW_SIZE
    // (4), MAX_FRAME_SIZE (5), MAX_HEADER_LIST_SIZE (6); §6.9.2: the connection window is
    // raised by WINDOW_UPDATE.
    let mut t = T::new(Settings::default());
    assert_eq!(
        t.out(),
        [
            "PREFACE",
            "SETTINGS [2=0,4=1048576,5=16384,6=65536]",
            "WINDOW_UPDATE 0 +16711681",
        ]
    );
    // §6.5.3: the server's SETTINGS are acknowledged; its ACK of ours stops the timer.
    assert_eq!(t.c.deadline(), SETTINGS_TIMEOUT);
    t.recv(&cat(&[settings(&[(3, 10)]), settings_ack()]));
    assert_eq!(t.out(), ["SETTINGS ACK"]);
    assert_eq!(t.c.deadline(), u64::MAX);
    assert!(t.c.is_idle());
}

/// A table row: (rule, the server's bytes after `ready`, events, our frames after).
type Row = (&'static str, Vec<u8>, Vec<&'static str>, Vec<&'static str>);

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    vec![
        ("a response: head, DATA, end (§8.1)",
         cat(&[headers(1, Some("200"), &[("content-type", "text/plain")], false), data(1, "hello", true)]),
         vec!["head 1 200 [content-type: text/plain]", "data 1 hello", "end 1"], vec![]),
        ("a head with END_STREAM: no content",
         headers(1, Some("204"), &[], true), vec!["head 1 204 []", "end 1"], vec![]),
        ("1xx heads are passed as such (§8.1)",
         cat(&[headers(1, Some("103"), &[("link", "</a>")], false), headers(1, Some("200"), &[], true)]),
         vec!["head 1 103 [link: </a>]", "head 1 200 []", "end 1"], vec![]),
        ("trailers after DATA (§8.1)",
         cat(&[headers(1, Some("200"), &[], false), data(1, "m", false), headers(1, None, &[("grpc-status", "0")], true)]),
         vec!["head 1 200 []", "data 1 m", "trailers 1 [grpc-status: 0]", "end 1"], vec![]),
        ("content-length matches the DATA (§8.1.1)",
         cat(&[headers(1, Some("200"), &[("content-length", "3")], false), data(1, "abc", true)]),
         vec!["head 1 200 [content-length: 3]", "data 1 abc", "end 1"], vec![]),
        ("content-length short of the DATA (§8.1.1)",
         cat(&[headers(1, Some("200"), &[("content-length", "2")], false), data(1, "abc", true)]),
         vec!["head 1 200 [content-length: 2]", "failed 1 Malformed(LengthMismatch)"], vec!["RST_STREAM 1 1"]),
        ("content-length over the DATA (§8.1.1)",
         cat(&[headers(1, Some("200"), &[("content-length", "5")], false), data(1, "abc", true)]),
         vec!["head 1 200 [content-length: 5]", "data 1 abc", "failed 1 Malformed(LengthMismatch)"], vec!["RST_STREAM 1 1"]),
        ("content-length over the DATA, trailers (§8.1.1)",
         cat(&[headers(1, Some("200"), &[("content-length", "5")], false), headers(1, None, &[("x", "1")], true)]),
         vec!["head 1 200 [content-length: 5]", "failed 1 Malformed(LengthMismatch)"], vec!["RST_STREAM 1 1"]),
        ("204 with content-length and no DATA",
         headers(1, Some("204"), &[("content-length", "7")], true), vec!["head 1 204 [content-length: 7]", "end 1"], vec![]),
        ("DATA on a 304 (RFC 9110 §15.4.5)",
         cat(&[headers(1, Some("304"), &[], false), data(1, "x", true)]),
         vec!["head 1 304 []", "failed 1 Malformed(UnexpectedData)"], vec!["RST_STREAM 1 1"]),
        ("DATA before HEADERS (§8.1)",
         data(1, "x", true), vec!["failed 1 Malformed(UnexpectedData)"], vec!["RST_STREAM 1 1"]),
        ("HEADERS after the head without END_STREAM (§8.1)",
         cat(&[headers(1, Some("200"), &[], false), headers(1, None, &[("x", "1")], false)]),
         vec!["head 1 200 []", "failed 1 Malformed(HeadersOrder)"], vec!["RST_STREAM 1 1"]),
        ("1xx with END_STREAM (§8.1)",
         headers(1, Some("100"), &[], true), vec!["failed 1 Malformed(HeadersOrder)"], vec!["RST_STREAM 1 1"]),
        ("no :status (§8.3.2)",
         headers(1, None, &[("x", "1")], true), vec!["failed 1 Malformed(NoStatus)"], vec!["RST_STREAM 1 1"]),
        ("a request pseudo-header in a response (§8.3)",
         headers(1, Some("200"), &[(":path", "/")], true), vec!["failed 1 Malformed(PseudoHeader)"], vec!["RST_STREAM 1 1"]),
        ("uppercase field name (§8.2.1)",
         headers(1, Some("200"), &[("X-Up", "1")], true), vec!["failed 1 Malformed(Field(UppercaseName))"], vec!["RST_STREAM 1 1"]),
        ("connection-specific field (§8.2.2)",
         headers(1, Some("200"), &[("connection", "close")], true), vec!["failed 1 Malformed(Field(ConnectionSpecific))"], vec!["RST_STREAM 1 1"]),
        ("a header list over our SETTINGS_MAX_HEADER_LIST_SIZE (§10.5.1)",
         headers(1, Some("200"), &[("x", &"v".repeat(200))], true), vec!["failed 1 Malformed(TooLarge)"], vec!["RST_STREAM 1 1"]),
        ("RST_STREAM from the server (§6.4)",
         rst(1, 2), vec!["failed 1 Reset(2)"], vec![]),
        ("RST_STREAM REFUSED_STREAM: retryable (§8.7)",
         rst(1, 7), vec!["failed 1 Refused"], vec![]),
        ("GOAWAY below the stream: it finishes (§6.8)",
         cat(&[goaway(1, 0), headers(1, Some("200"), &[], true)]),
         vec!["goaway", "head 1 200 []", "end 1"], vec!["GOAWAY 0 0"]),
        ("GOAWAY above last-stream-id: refused, safe to retry (§6.8)",
         goaway(0, 0), vec!["failed 1 Refused", "goaway"], vec!["GOAWAY 0 0"]),
        ("GOAWAY with an error: the stream fails (§6.8)",
         goaway(1, 2), vec!["failed 1 Connection(GoAway(2))", "goaway"], vec!["GOAWAY 0 0"]),
        ("PUSH_PROMISE after ENABLE_PUSH 0 (§6.5.2, §8.4)",
         raw(4, kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
         vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("HEADERS on an idle stream of ours (§5.1)",
         headers(3, Some("200"), &[], true), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("HEADERS on an even stream: the server opens none (§5.1.1)",
         headers(2, Some("200"), &[], true), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("DATA on an idle stream (§5.1)",
         data(5, "x", false), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("DATA on stream 0 (§6.1)",
         data(0, "x", false), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("DATA past the stream window: FLOW_CONTROL_ERROR (§6.9.1)",
         cat(&[headers(1, Some("200"), &[], false), data(1, &"x".repeat(101), false)]),
         vec!["head 1 200 []", "failed 1 Protocol(FlowControl)"], vec!["RST_STREAM 1 3"]),
        ("a frame over our MAX_FRAME_SIZE (§4.2)",
         raw(16_385, kind::DATA, 0, 1, &[0; 16_385]),
         vec!["failed 1 Connection(Protocol(FrameSize))"], vec!["GOAWAY 0 6"]),
        ("a bad HPACK block: COMPRESSION_ERROR (§4.3)",
         raw(1, kind::HEADERS, flag::END_HEADERS, 1, &[0x80]),
         vec!["failed 1 Connection(Protocol(Compression))"], vec!["GOAWAY 0 9"]),
        ("an interleaved header block (§6.10)",
         cat(&[raw(1, kind::HEADERS, 0, 1, &[0x88]), data(1, "x", false)]),
         vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("CONTINUATION without HEADERS (§6.10)",
         raw(1, kind::CONTINUATION, flag::END_HEADERS, 1, &[0x88]),
         vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("a header block split over CONTINUATION",
         cat(&[raw(0, kind::HEADERS, flag::END_STREAM, 1, &[]), raw(0, kind::CONTINUATION, 0, 1, &[]), raw(1, kind::CONTINUATION, flag::END_HEADERS, 1, &[0x88])]),
         vec!["head 1 200 []", "end 1"], vec![]),
        ("an endless CONTINUATION chain is cut off (CVE-2024-27316)",
         cat(&[raw(0, kind::HEADERS, 0, 1, &[]), (0..20).flat_map(|_| raw(0, kind::CONTINUATION, 0, 1, &[])).collect()]),
         vec!["failed 1 Connection(Protocol(EnhanceYourCalm))"], vec!["GOAWAY 0 11"]),
        ("the server's PING is answered (§6.7)",
         raw(8, kind::PING, 0, 0, &[1, 2, 3, 4, 5, 6, 7, 8]), vec![], vec!["PING ACK [1, 2, 3, 4, 5, 6, 7, 8]"]),
        ("a PING of the wrong size (§6.7)",
         raw(7, kind::PING, 0, 0, &[0; 7]), vec!["failed 1 Connection(Protocol(FrameSize))"], vec!["GOAWAY 0 6"]),
        ("SETTINGS ENABLE_PUSH 1 from a server (§6.5.2)",
         settings(&[(2, 1)]), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("SETTINGS MAX_FRAME_SIZE below 16384 (§6.5.2)",
         settings(&[(5, 100)]), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("SETTINGS INITIAL_WINDOW_SIZE over 2^31-1 (§6.5.2)",
         settings(&[(4, 1 << 31)]), vec!["failed 1 Connection(Protocol(FlowControl))"], vec!["GOAWAY 0 3"]),
        ("SETTINGS of a bad length (§6.5)",
         raw(5, kind::SETTINGS, 0, 0, &[0; 5]), vec!["failed 1 Connection(Protocol(FrameSize))"], vec!["GOAWAY 0 6"]),
        ("unknown SETTINGS and frame types are ignored (§5.5, §6.5.2)",
         cat(&[settings(&[(0x99, 1)]), raw(2, 0x42, 0, 1, &[1, 2])]), vec![], vec!["SETTINGS ACK"]),
        ("WINDOW_UPDATE of 0 on the connection (§6.9)",
         window_update(0, 0), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("WINDOW_UPDATE overflowing the connection window (§6.9.1)",
         window_update(0, (1 << 31) - 1), vec!["failed 1 Connection(Protocol(FlowControl))"], vec!["GOAWAY 0 3"]),
        ("WINDOW_UPDATE overflowing a stream window (§6.9.1)",
         window_update(1, (1 << 31) - 1), vec!["failed 1 Protocol(FlowControl)"], vec!["RST_STREAM 1 3"]),
        ("RST_STREAM on an idle stream (§6.4)",
         rst(9, 8), vec!["failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
        ("padded DATA: the padding is given back at once (§6.1)",
         cat(&[headers(1, Some("200"), &[], false), raw(6, kind::DATA, flag::PADDED | flag::END_STREAM, 1, &[3, b'o', b'k', 0, 0, 0])]),
         vec!["head 1 200 []", "data 1 ok", "end 1"], vec![]),
        ("padding longer than the frame (§6.1)",
         cat(&[headers(1, Some("200"), &[], false), raw(2, kind::DATA, flag::PADDED, 1, &[5, b'x'])]),
         vec!["head 1 200 []", "failed 1 Connection(Protocol(Protocol))"], vec!["GOAWAY 0 1"]),
    ]
}

#[test]
fn responses_whole_and_byte_by_byte() {
    for (rule, bytes, want, want_out) in rows() {
        for step in [bytes.len().max(1), 1, 7] {
            let mut t = ready();
            for piece in bytes.chunks(step) {
                t.recv(piece);
            }
            assert_eq!(t.events(), want, "{rule}, in pieces of {step}");
            assert_eq!(t.out(), want_out, "{rule}, in pieces of {step}");
        }
    }
}

/// A connection past the handshake with nothing open.
fn started(server_settings: &[(u16, u32)]) -> T {
    let mut t = T::new(SMALL);
    t.out();
    t.recv(&cat(&[settings(server_settings), settings_ack()]));
    t.out();
    t
}

fn post<'a>(fields: &'a [(&'a [u8], &'a [u8])]) -> Request<'a> {
    Request {
        method: b"POST",
        scheme: b"http",
        authority: b"up",
        path: b"/p",
        fields,
    }
}

#[test]
fn a_request_with_a_body_and_trailers() {
    // RFC 9113 §8.1: HEADERS, DATA, then a trailer block with END_STREAM.
    let mut t = started(&[]);
    let id = t.c.open(&post(&[(b"TE", b"trailers")]), false).unwrap();
    assert_eq!(t.c.send(id, b"abc", false), 3);
    t.c.trailers(id, &[(b"X-Sum", b"6")]);
    assert_eq!(
        t.out(),
        [
            "HEADERS 1 [:method: POST, :scheme: http, :authority: up, :path: /p, te: trailers]",
            "DATA 1 abc",
            "HEADERS 1 ES [x-sum: 6]",
        ]
    );
    assert_eq!(
        t.c.send(id, b"late", true),
        0,
        "nothing after the body's end"
    );
    t.recv(&headers(1, Some("200"), &[], true));
    assert_eq!(t.events(), ["head 1 200 []", "end 1"]);
    assert!(t.c.is_idle());
}

#[test]
fn the_body_waits_for_both_send_windows() {
    // RFC 9113 §6.9: DATA within the stream's and the connection's windows; §6.9.2: the
    // server's INITIAL_WINDOW_SIZE sets the stream's, and moves open streams' by the change.
    let mut t = started(&[(4, 4)]);
    let id = t.c.open(&post(&[]), false).unwrap();
    t.out();
    assert_eq!(t.c.send_room(id), 4);
    assert_eq!(t.c.send(id, b"abcdef", true), 4, "the stream window");
    assert_eq!(t.out(), ["DATA 1 abcd"]);
    assert_eq!(t.c.send(id, b"ef", true), 0);
    assert_eq!(t.events(), Vec::<String>::new());
    // §6.9.2: a larger INITIAL_WINDOW_SIZE opens the stream's window by the difference.
    t.recv(&settings(&[(4, 5)]));
    assert_eq!(t.events(), ["writable 1"]);
    assert_eq!(t.out(), ["SETTINGS ACK"]);
    assert_eq!(t.c.send(id, b"ef", true), 1);
    // §6.9.2: a smaller one can make it negative; a WINDOW_UPDATE must cover that first.
    t.recv(&settings(&[(4, 2)]));
    assert_eq!(t.out(), ["DATA 1 e", "SETTINGS ACK"]);
    t.recv(&window_update(1, 3));
    assert_eq!(t.c.send_room(id), 0, "5 sent, 2 - 5 + 3 = 0");
    assert_eq!(t.events(), Vec::<String>::new());
    t.recv(&window_update(1, 1));
    assert_eq!(t.events(), ["writable 1"]);
    assert_eq!(t.c.send(id, b"f", true), 1);
    assert_eq!(t.out(), ["DATA 1 ES f"]);
}

#[test]
fn the_connection_window_is_shared() {
    // RFC 9113 §6.9.1: the connection's send window (65,535 at the start) bounds all streams.
    let mut t = started(&[(4, 1 << 20)]);
    let a = t.c.open(&post(&[]), false).unwrap();
    let b = t.c.open(&post(&[]), false).unwrap();
    t.out();
    let big = vec![b'x'; 40_000];
    assert_eq!(t.c.send(a, &big, false), 40_000);
    assert_eq!(t.c.send(b, &big, false), 65_535 - 40_000);
    t.out();
    assert_eq!(t.c.send_room(a), 0);
    assert_eq!(
        t.c.send(a, b"more", false),
        0,
        "no room: told when there is"
    );
    t.recv(&window_update(0, 100));
    let mut woke = t.events();
    woke.sort();
    assert_eq!(woke, ["writable 1", "writable 3"]);
    assert_eq!(t.c.send_room(a), 100);
}

#[test]
fn data_frames_follow_the_servers_max_frame_size() {
    // RFC 9113 §4.2: no frame over the peer's SETTINGS_MAX_FRAME_SIZE (16,384 by default);
    // §6.10: a header block over it continues in CONTINUATION frames.
    let mut t = started(&[(4, 1 << 20)]);
    let long = "v".repeat(20_000);
    let fields: &[(&[u8], &[u8])] = &[(b"x-long", long.as_bytes())];
    let id = t.c.open(&post(fields), false).unwrap();
    let out = t.out();
    assert_eq!(out.len(), 2, "{:?}", &out[0][..20]);
    assert!(
        out[0].starts_with("HEADERS 1 (16384 bytes)"),
        "{}",
        &out[0][..30]
    );
    assert!(out[1].starts_with("CONTINUATION 1 [:method: POST"));
    assert_eq!(t.c.send(id, &vec![b'y'; 20_000], true), 20_000);
    let frames = t.out();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[0].len(), "DATA 1 ".len() + 16_384);
    assert!(frames[1].starts_with("DATA 1 ES "));
    // A larger MAX_FRAME_SIZE from the server is used.
    let mut t = started(&[(4, 1 << 20), (5, 20_000)]);
    let id = t.c.open(&post(&[]), false).unwrap();
    t.out();
    t.c.send(id, &vec![b'y'; 20_000], true);
    assert_eq!(t.out().len(), 1);
}

#[test]
fn a_header_table_size_change_is_acknowledged_in_the_next_block() {
    // RFC 7541 §4.2, RFC 9113 §6.5.2: the server's SETTINGS_HEADER_TABLE_SIZE changes; our
    // next header block starts with a size update (to 0: we never index).
    let mut t = started(&[(1, 0)]);
    t.c.open(&get("/"), true).unwrap();
    let mut all = Vec::new();
    while t.c.poll_transmit() == Transmit::Bytes {
        all.extend(t.c.take_output());
        t.c.sent(&mut t.h);
    }
    assert_eq!(all[frame::HEAD_LEN], 0x20, "a size update first");
    t.c.open(&get("/b"), true).unwrap();
    let second = t.c.take_output();
    assert_ne!(second[frame::HEAD_LEN], 0x20, "only once");
}

#[test]
fn max_concurrent_streams_is_honoured() {
    // RFC 9113 §5.1.2: no stream beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS: "no
    // room", so the caller waits or takes another connection.
    let mut t = started(&[(3, 2)]);
    let a = t.c.open(&get("/a"), true).unwrap();
    t.c.open(&get("/b"), true).unwrap();
    assert_eq!(t.c.open(&get("/c"), true), Err(OpenError::NoRoom));
    assert!(!t.c.can_open());
    t.out();
    t.recv(&headers(a, Some("200"), &[], true));
    assert_eq!(t.events(), ["head 1 200 []", "end 1"]);
    assert!(t.c.can_open());
    assert_eq!(t.c.open(&get("/c"), true), Ok(5));
    // Before the server's SETTINGS, its limit is not known: one stream (the rest wait for
    // `settled`); SETTINGS without the setting allow ASSUMED_MAX_STREAMS.
    let mut t = T::new(SMALL);
    t.c.open(&get("/"), true).unwrap();
    assert!(!t.c.settled());
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::NoRoom));
    t.recv(&settings(&[]));
    assert!(t.c.settled());
    for _ in 1..ASSUMED_MAX_STREAMS {
        t.c.open(&get("/"), true).unwrap();
    }
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::NoRoom));
    // A server allowing 2 (and stream 1 open before its SETTINGS): one more, not 99.
    let mut t = T::new(SMALL);
    t.c.open(&get("/"), true).unwrap();
    t.recv(&settings(&[(3, 2)]));
    t.c.open(&get("/"), true).unwrap();
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::NoRoom));
}

#[test]
fn a_head_larger_than_the_servers_list_limit_is_not_sent() {
    // RFC 9113 §6.5.2 SETTINGS_MAX_HEADER_LIST_SIZE.
    let mut t = started(&[(6, 200)]);
    let v = "v".repeat(100);
    let fields: &[(&[u8], &[u8])] = &[(b"x", v.as_bytes())];
    assert_eq!(t.c.open(&post(fields), true), Err(OpenError::TooLarge));
    assert_eq!(t.out(), Vec::<String>::new());
    assert_eq!(t.c.open(&get("/"), true), Ok(1), "the id was not used");
}

#[test]
fn receive_windows_reopen_only_as_the_caller_consumes() {
    // RFC 9113 §6.9: the server may send a stream window's worth (100 bytes here); the
    // WINDOW_UPDATE comes only as the caller says it passed bytes on (half a window at a
    // time), for the stream and the connection alike. A slow consumer holds the server to
    // one window.
    let mut t = ready();
    t.recv(&cat(&[
        headers(1, Some("200"), &[], false),
        data(1, &"a".repeat(100), false),
    ]));
    assert_eq!(t.events().len(), 2);
    assert_eq!(t.out(), Vec::<String>::new(), "nothing given back unasked");
    t.recv(&data(1, "b", false));
    assert_eq!(
        t.events(),
        ["failed 1 Protocol(FlowControl)"],
        "past the window"
    );
    assert_eq!(t.out(), ["RST_STREAM 1 3"]);

    let mut t = ready();
    t.recv(&cat(&[
        headers(1, Some("200"), &[], false),
        data(1, &"a".repeat(100), false),
    ]));
    t.events();
    t.c.consumed(1, 49);
    assert_eq!(t.out(), Vec::<String>::new(), "less than half a window");
    t.c.consumed(1, 1);
    assert_eq!(t.out(), ["WINDOW_UPDATE 1 +50"]);
    t.recv(&data(1, &"c".repeat(50), true));
    assert_eq!(
        t.events(),
        [format!("data 1 {}", "c".repeat(50)), "end 1".into()]
    );
}

/// The smallest connection window (RFC 9113 §6.9.2: 65,535, which SETTINGS cannot lower)
/// shared by four streams of 16,384: the fourth has one byte less than its own window.
const WIDE: Settings = Settings {
    stream_window: 16_384,
    conn_window: 65_535,
    ..SMALL
};

/// A connection with four GETs open (1, 3, 5, 7), each answered with `sizes[i]` bytes of DATA
/// (END_STREAM when `end`).
fn four_answered(sizes: [usize; 4], end: bool) -> T {
    let mut t = T::new(WIDE);
    t.recv(&cat(&[settings(&[]), settings_ack()]));
    for _ in 0..4 {
        t.c.open(&get("/"), true).unwrap();
    }
    t.out();
    for (i, n) in sizes.iter().enumerate() {
        let id = 2 * i as u32 + 1;
        t.recv(&cat(&[
            headers(id, Some("200"), &[], false),
            data(id, &"z".repeat(*n), end),
        ]));
    }
    t.events();
    t
}

#[test]
fn the_connection_window_is_shut_when_full() {
    // RFC 9113 §6.9.1: DATA past the connection window is a FLOW_CONTROL_ERROR, though each
    // stream's own window has room.
    let mut t = four_answered([16_384, 16_384, 16_384, 16_383], false);
    t.recv(&data(7, "x", false));
    let mut failed = t.events();
    failed.sort();
    assert_eq!(
        failed,
        [1, 3, 5, 7].map(|id| format!("failed {id} Connection(Protocol(FlowControl))"))
    );
    assert_eq!(t.out(), ["GOAWAY 0 3"]);
}

#[test]
fn the_connection_window_reopens_at_half() {
    // RFC 9113 §6.9: the connection window reopens by what the caller consumed, once half of
    // it is owed, also for streams that have ended (their bytes are still the caller's).
    let mut t = four_answered([16_384, 16_384, 16_384, 16_383], true);
    t.c.consumed(1, 16_384);
    assert_eq!(t.out(), Vec::<String>::new());
    t.c.consumed(7, 16_383);
    assert_eq!(t.out(), ["WINDOW_UPDATE 0 +32767"]);
    t.c.consumed(7, 1);
    t.c.consumed(1, 1);
    assert_eq!(
        t.out(),
        Vec::<String>::new(),
        "no more than was handed over"
    );
}

#[test]
fn a_cancel_resets_the_stream_and_returns_its_window() {
    // RFC 9113 §6.4, §8.7: RST_STREAM(CANCEL) for a request no longer wanted; §5.4.2: its
    // late frames are ignored; their bytes still count against the connection window (§6.9)
    // and come back at once, with the bytes the caller held and dropped.
    let mut t = four_answered([16_384, 0, 0, 0], false);
    t.c.cancel(1);
    assert_eq!(t.out(), ["RST_STREAM 1 8"]);
    assert_eq!(t.c.open_streams(), 3);
    t.recv(&cat(&[
        data(1, &"b".repeat(16_382), false),
        headers(1, None, &[("x", "1")], true),
    ]));
    assert_eq!(t.events(), Vec::<String>::new());
    assert_eq!(t.out(), Vec::<String>::new());
    t.recv(&data(1, "b", false));
    assert_eq!(
        t.out(),
        ["WINDOW_UPDATE 0 +32767"],
        "16,384 held and 16,383 late"
    );
}

#[test]
fn frames_after_the_end_are_stream_closed() {
    // RFC 9113 §5.1: DATA after END_STREAM on a closed stream is STREAM_CLOSED.
    let mut t = ready();
    t.recv(&headers(1, Some("200"), &[], true));
    t.events();
    t.recv(&data(1, "x", false));
    assert_eq!(t.out(), ["GOAWAY 0 5"]);
}

#[test]
fn pings_both_ways() {
    // RFC 9113 §6.7: ours is answered with the same payload (an event); a wrong payload is not
    // ours; no answer by the deadline ends the connection.
    let mut t = ready();
    assert!(t.c.ping(10));
    assert!(!t.c.ping(11), "one at a time");
    assert_eq!(t.out(), ["PING [0, 0, 0, 0, 0, 0, 0, 1]"]);
    assert_eq!(t.c.deadline(), 10 + SMALL.ping_timeout);
    t.recv(&raw(8, kind::PING, flag::ACK, 0, &[0, 0, 0, 0, 0, 0, 0, 9]));
    assert_eq!(t.events(), Vec::<String>::new());
    t.recv(&raw(8, kind::PING, flag::ACK, 0, &[0, 0, 0, 0, 0, 0, 0, 1]));
    assert_eq!(t.events(), ["pong"]);
    assert_eq!(t.c.deadline(), u64::MAX);

    assert!(t.c.ping(100));
    t.out();
    t.c.on_timer(100 + SMALL.ping_timeout - 1, &mut t.h);
    assert_eq!(t.events(), Vec::<String>::new());
    t.c.on_timer(100 + SMALL.ping_timeout, &mut t.h);
    assert_eq!(t.events(), ["failed 1 Connection(Timeout)"]);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
}

#[test]
fn unacknowledged_settings_time_out() {
    // RFC 9113 §6.5.3: SETTINGS_TIMEOUT (4) once the ACK is late.
    let mut t = T::new(SMALL);
    t.out();
    t.c.open(&get("/"), true).unwrap();
    t.recv(&settings(&[]));
    t.out();
    assert_eq!(t.c.deadline(), SMALL.settings_timeout);
    t.c.on_timer(SMALL.settings_timeout, &mut t.h);
    assert_eq!(t.events(), ["failed 1 Connection(Timeout)"]);
    assert_eq!(t.out(), ["GOAWAY 0 4"]);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
}

#[test]
fn the_servers_first_frame_must_be_settings() {
    // RFC 9113 §3.4.
    let mut t = T::new(SMALL);
    t.out();
    t.recv(&raw(8, kind::PING, 0, 0, &[0; 8]));
    assert_eq!(t.out(), ["GOAWAY 0 1"]);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
}

#[test]
fn control_floods_end_the_connection() {
    // The server's own bound (MAX_CONTROL_PER_SEC), applied to a server: PING or SETTINGS
    // floods end with ENHANCE_YOUR_CALM (11).
    let mut t = ready();
    let ping = raw(8, kind::PING, 0, 0, &[0; 8]);
    let flood: Vec<u8> = (0..=crate::h2::MAX_CONTROL_PER_SEC)
        .flat_map(|_| ping.clone())
        .collect();
    t.recv(&flood);
    assert_eq!(
        t.events(),
        ["failed 1 Connection(Protocol(EnhanceYourCalm))"]
    );
    assert_eq!(t.out().last().unwrap(), "GOAWAY 0 11");
}

#[test]
fn our_goaway_lets_open_streams_finish() {
    // RFC 9113 §6.8: GOAWAY(NO_ERROR) at close; no new stream; the open one finishes, then
    // the connection closes.
    let mut t = ready();
    t.c.goaway();
    assert_eq!(t.out(), ["GOAWAY 0 0"]);
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::Closing));
    assert_eq!(t.c.poll_transmit(), Transmit::Idle);
    t.recv(&headers(1, Some("200"), &[], true));
    assert_eq!(t.events(), ["head 1 200 []", "end 1"]);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
}

#[test]
fn eof_fails_what_is_open() {
    let mut t = ready();
    t.c.eof(&mut t.h);
    assert_eq!(t.events(), ["failed 1 Connection(Closed)"]);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
    assert!(!t.c.wants_input());
}

#[test]
fn a_stream_still_in_the_output_when_the_connection_ends_is_unsent() {
    // RFC 9113 §8.7: a request the server never received was not processed; one handed to
    // the socket may have been. Stream 1's HEADERS went out (`ready`), stream 3's did not.
    let mut t = ready();
    let unsent = t.c.open(&get("/later"), true).unwrap();
    t.c.eof(&mut t.h);
    let events = t.events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events.contains(&format!("failed {unsent} Unsent")),
        "{events:?}"
    );
    assert!(
        events.contains(&"failed 1 Connection(Closed)".to_string()),
        "{events:?}"
    );
    // The same when our PING goes unanswered (the output is dropped).
    let mut t = ready();
    assert!(t.c.ping(1));
    t.out();
    let unsent = t.c.open(&get("/later"), true).unwrap();
    t.c.on_timer(1 + SMALL.ping_timeout, &mut t.h);
    let events = t.events();
    assert!(
        events.contains(&format!("failed {unsent} Unsent")),
        "{events:?}"
    );
    assert!(
        events.contains(&"failed 1 Connection(Timeout)".to_string()),
        "{events:?}"
    );
    // A connection error of ours still sends the output before its GOAWAY: the stream may
    // reach the server, so it is not known unprocessed.
    let mut t = ready();
    let queued = t.c.open(&get("/later"), true).unwrap();
    t.recv(&raw(8, kind::PING, 0, 1, &[0; 8])); // §6.7: a PING names no stream
    let events = t.events();
    assert!(
        events.contains(&format!("failed {queued} Connection(Protocol(Protocol))")),
        "{events:?}"
    );
}

#[test]
fn a_slow_consumer_holds_the_server_to_the_window() {
    // What the caller is handed and has not consumed never exceeds the stream window, so a
    // slow client downstream bounds this connection's memory (the caller holds the bytes).
    let mut t = ready();
    t.recv(&headers(1, Some("200"), &[], false));
    let mut handed = 0;
    for _ in 0..10 {
        t.recv(&data(1, &"q".repeat(10), false));
    }
    for e in t.events() {
        if let Some(d) = e.strip_prefix("data 1 ") {
            handed += d.len();
        }
    }
    assert_eq!(handed, 100);
    t.recv(&data(1, "q", false));
    assert_eq!(t.events(), ["failed 1 Protocol(FlowControl)"]);
}

#[test]
fn data_refused_on_a_stream_still_returns_the_connection_window() {
    // RFC 9113 §6.9: DATA count against the connection window even when the stream rejects
    // them; bytes never handed to the caller come back at once, or a few bad streams would
    // shut the connection for all.
    let mut t = T::new(WIDE);
    t.recv(&cat(&[settings(&[]), settings_ack()]));
    for _ in 0..2 {
        t.c.open(&get("/"), true).unwrap();
    }
    t.out();
    t.recv(&data(1, &"a".repeat(16_384), false));
    assert_eq!(t.events(), ["failed 1 Malformed(UnexpectedData)"]);
    t.recv(&cat(&[
        headers(3, Some("200"), &[], false),
        data(3, &"b".repeat(16_383), true),
    ]));
    t.events();
    assert_eq!(t.out(), ["RST_STREAM 1 1"]);
    t.c.consumed(3, 16_383);
    assert_eq!(t.out(), ["WINDOW_UPDATE 0 +32767"]);
}

#[test]
fn a_stream_answered_while_its_body_goes_up_ends_once() {
    // RFC 9113 §8.1: the server may answer before the request's body ends; the stream heard
    // `end`, so neither its RST_STREAM(NO_ERROR) nor the connection's end fail it afterwards
    // (each stream hears exactly one ending).
    for last in [rst(1, 0), goaway(0, 2)] {
        let mut t = started(&[]);
        let id = t.c.open(&post(&[]), false).unwrap();
        t.c.send(id, b"part", false);
        t.out();
        t.recv(&headers(1, Some("200"), &[], true));
        assert_eq!(t.events(), ["head 1 200 []", "end 1"]);
        assert_eq!(t.c.send_room(id), 65_531, "the body may still go up");
        t.recv(&last);
        t.c.eof(&mut t.h);
        let events = t.events();
        assert!(
            !events.iter().any(|e| e.starts_with("failed")),
            "{events:?}"
        );
        assert_eq!(t.c.send(id, b"more", true), 0, "the stream is gone");
    }
}

#[test]
fn a_head_request_has_no_content_whatever_its_length_says() {
    // RFC 9113 §8.1.1: a response to HEAD may carry a non-zero Content-Length and no DATA;
    // DATA with content on it is malformed.
    let head = Request {
        method: b"HEAD",
        ..get("/")
    };
    let mut t = started(&[]);
    t.c.open(&head, true).unwrap();
    t.out();
    t.recv(&headers(1, Some("200"), &[("content-length", "5")], true));
    assert_eq!(t.events(), ["head 1 200 [content-length: 5]", "end 1"]);
    t.c.open(&head, true).unwrap();
    t.out();
    t.recv(&cat(&[
        headers(3, Some("200"), &[], false),
        data(3, "x", true),
    ]));
    assert_eq!(
        t.events(),
        ["head 3 200 []", "failed 3 Malformed(UnexpectedData)"]
    );
}

#[test]
fn only_a_refusal_is_retryable() {
    // RFC 9113 §8.7: REFUSED_STREAM and streams above a GOAWAY's last id were not processed.
    assert!(StreamError::Refused.retryable());
    assert!(StreamError::Unsent.retryable());
    for e in [
        StreamError::Reset(2),
        StreamError::Protocol(crate::h2::frame::Code::FlowControl),
        StreamError::Connection(ConnError::GoAway(2)),
        StreamError::Connection(ConnError::Closed),
    ] {
        assert!(!e.retryable(), "{e}");
    }
}

/// A connection allowing `max` streams with `n` GETs open (1, 3, …).
fn opened(max: u32, n: u32) -> T {
    let mut t = started(&[(3, max)]);
    for _ in 0..n {
        t.c.open(&get("/"), true).unwrap();
    }
    t.out();
    t
}

/// Gives up the first `n` streams opened (1, 3, 5, …), in order.
fn cancel_first(t: &mut T, n: u32) {
    for i in 0..n {
        t.c.cancel(1 + 2 * i);
    }
}

#[test]
fn cancels_beyond_the_reset_budget_wait_until_the_server_accepted_them() {
    // RFC 9113 §8.7, §6.4: a stream no longer wanted is reset (CANCEL). A burst of resets on
    // streams the server has not accepted yet is what rapid-reset guards (CVE-2023-44487)
    // count: hyperium h2 answers its 21st with GOAWAY ENHANCE_YOUR_CALM, failing every other
    // stream. So RESET_BUDGET go at once; the rest stay open, unheard, until an answer
    // proves them accepted.
    let n = RESET_BUDGET as u32 + 3;
    let mut t = opened(100, n);
    cancel_first(&mut t, n);
    let resets: Vec<String> = (0..RESET_BUDGET as u32)
        .map(|i| format!("RST_STREAM {} 8", 1 + 2 * i))
        .collect();
    assert_eq!(t.out(), resets);
    assert_eq!(t.c.open_streams(), 0, "the caller has none open");
    // §5.1.2: the abandoned three still count against the server's limit.
    for _ in 0..100 - 3 {
        t.c.open(&get("/"), true).unwrap();
    }
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::NoRoom));
    t.out();
    // The first abandoned one (21) is answered: it was accepted, and every stream below it
    // (accepted in order), so the budget is whole: 21 goes for free, 23 and 25 within it.
    t.recv(&headers(21, Some("200"), &[], false));
    assert_eq!(
        t.out(),
        ["RST_STREAM 21 8", "RST_STREAM 23 8", "RST_STREAM 25 8"]
    );
    assert_eq!(
        t.events(),
        Vec::<String>::new(),
        "no event for a stream given up"
    );
    // Their late frames are ignored (§5.4.2), their bytes returned to the connection window.
    t.recv(&cat(&[data(21, "late", false), data(23, "late", true)]));
    assert_eq!(t.events(), Vec::<String>::new());
    assert_eq!(t.c.poll_transmit(), Transmit::Idle);
}

#[test]
fn an_answer_on_a_higher_stream_releases_the_budget() {
    // The server takes streams in the order their HEADERS came: a head on a live stream
    // above the abandoned ones means they were accepted; resetting them is never counted.
    let n = RESET_BUDGET as u32 + 2;
    let mut t = opened(100, n + 1);
    cancel_first(&mut t, n);
    assert_eq!(t.out().len(), RESET_BUDGET);
    let live = 1 + 2 * n;
    t.recv(&headers(live, Some("200"), &[], true));
    assert_eq!(
        t.events(),
        [format!("head {live} 200 []"), format!("end {live}")]
    );
    assert_eq!(t.out(), ["RST_STREAM 21 8", "RST_STREAM 23 8"]);
    // A stream whose head came is reset at once, budget or not.
    let mut t = opened(100, n + 1);
    cancel_first(&mut t, n);
    t.out();
    t.recv(&headers(live, Some("200"), &[], false));
    t.events();
    t.c.cancel(live);
    assert_eq!(
        t.out(),
        ["RST_STREAM 21 8", "RST_STREAM 23 8", "RST_STREAM 25 8"]
    );
}

#[test]
fn an_abandoned_stream_that_ends_is_forgotten_without_a_reset() {
    // §5.1: END_STREAM both ways closes it; the server's RST_STREAM closes it too.
    let n = RESET_BUDGET as u32 + 2;
    let mut t = opened(100, n);
    cancel_first(&mut t, n);
    t.out();
    t.recv(&rst(23, 8));
    // A Trailers-Only answer on 21 (our GET ended its side): closed, nothing to reset.
    t.recv(&headers(21, Some("200"), &[("grpc-status", "1")], true));
    assert_eq!(t.out(), Vec::<String>::new());
    assert_eq!(t.events(), Vec::<String>::new());
    assert!(t.c.is_idle());
}

#[test]
fn too_many_abandoned_streams_retire_the_connection() {
    // Abandoned streams hold the server's stream slots: at half its limit (here 12 of 24)
    // the connection takes no new stream (GOAWAY NO_ERROR, §6.8) and closes once its live
    // stream is done, which ends the abandoned ones without a reset.
    let mut t = opened(24, 23);
    for i in 0..22 {
        t.c.cancel(1 + 2 * i);
    }
    let out = t.out();
    assert_eq!(out.len(), RESET_BUDGET + 1, "{out:?}");
    assert_eq!(out.last().unwrap(), "GOAWAY 0 0");
    assert_eq!(t.c.open(&get("/"), true), Err(OpenError::Closing));
    assert_eq!(t.c.poll_transmit(), Transmit::Idle);
    t.recv(&headers(45, Some("200"), &[], true));
    assert_eq!(t.events(), ["head 45 200 []", "end 45"]);
    // The answer on 45 proved the abandoned ones accepted: reset on the way out.
    assert_eq!(t.out().len(), 12);
    assert_eq!(t.c.poll_transmit(), Transmit::Close);
}
