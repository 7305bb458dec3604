//! The upstream HTTP/2 connection as byte tables: the server's frames in, our frames (written
//! as text) and the caller's events out, every input also fed one byte at a time; timers
//! exact. Each row cites the RFC 9113 rule it pins.
#![forbid(unsafe_code)]

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

/// Settings small enough for tables: 100-byte stream windows, a 1000-byte connection window.
const SMALL: Settings = Settings {
    stream_window: 100,
    conn_window: 1000,
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

/// (rule, the server's bytes after `ready`, events, our frames after).
#[rustfmt::skip]
fn rows() -> Vec<(&'static str, Vec<u8>, Vec<&'static str>, Vec<&'static str>)> {
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
         vec!["head 1 200 []", "failed 1 FlowControl"], vec!["RST_STREAM 1 3"]),
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
         window_update(1, (1 << 31) - 1), vec!["failed 1 FlowControl"], vec!["RST_STREAM 1 3"]),
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
