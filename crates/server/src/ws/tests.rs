//! Byte tables for the WebSocket connection: client frames in (in every split where it
//! matters), frames, events and socket actions out. The RFC rule each row pins is cited.

use super::close;
use super::conn::{Conn, Handler, Sending};
use super::{Message, WsLimits};
use crate::h1::Transmit;
use crate::pool::Pool;

/// Echoes every message and records what it heard.
#[derive(Default)]
struct Echo {
    heard: Vec<String>,
    closed: Vec<Option<u16>>,
    /// Answer a message "bye" with a close of its own.
    close_on_bye: bool,
    /// Takes no more messages for now (`Handler::paused`).
    paused: bool,
}

impl Handler for Echo {
    fn message(&mut self, msg: Message<'_>, out: &mut Sending) {
        match msg {
            Message::Text(t) => {
                self.heard.push(format!("text:{t}"));
                if self.close_on_bye && t == "bye" {
                    out.close(close::NORMAL, "see you");
                } else {
                    out.text(t);
                }
            }
            Message::Binary(b) => {
                self.heard.push(format!("binary:{}", b.len()));
                out.binary(b);
            }
        }
    }
    fn closed(&mut self, code: Option<u16>) {
        self.closed.push(code);
    }
    fn paused(&self) -> bool {
        self.paused
    }
}

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A client frame: `b0` (FIN, RSV, opcode), masked with [`MASK`].
fn frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![b0];
    match payload.len() {
        n if n < 126 => v.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            v.push(0x80 | 126);
            v.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            v.push(0x80 | 127);
            v.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    v.extend_from_slice(&MASK);
    v.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    v
}

/// A server frame (unmasked).
fn server(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    linerate_ws::frame::write_head(&mut v, b0 & 0x80 != 0, false, opcode(b0), payload.len());
    v.extend_from_slice(payload);
    v
}

fn opcode(b0: u8) -> linerate_ws::frame::Opcode {
    use linerate_ws::frame::Opcode::*;
    match b0 & 0x0F {
        0 => Continuation,
        1 => Text,
        2 => Binary,
        8 => Close,
        9 => Ping,
        _ => Pong,
    }
}

fn close_frame(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(reason.as_bytes());
    server(0x88, &p)
}

struct Run {
    conn: Conn,
    echo: Echo,
    pool: Pool,
    now: u64,
}

impl Run {
    fn new() -> Run {
        Run::with(WsLimits::default())
    }
    fn with(limits: WsLimits) -> Run {
        Run {
            conn: Conn::new(0, limits),
            echo: Echo::default(),
            pool: Pool::default(),
            now: 0,
        }
    }
    fn recv(&mut self, input: &[u8]) {
        self.conn
            .recv(input, self.now, &mut self.pool, &mut self.echo);
    }
    /// Everything the connection sends now (as a driver whose socket takes all).
    fn output(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        while let Transmit::Bytes { .. } = self.conn.poll_transmit() {
            all.extend_from_slice(&self.conn.take_output(&mut self.pool));
            self.conn.sent(self.now, &mut self.pool);
        }
        all
    }
    fn transmit(&self) -> &'static str {
        match self.conn.poll_transmit() {
            Transmit::Bytes { .. } => "bytes",
            Transmit::Shutdown => "shutdown",
            Transmit::Close => "close",
            Transmit::Idle => "idle",
            _ => "other",
        }
    }
    fn at(&mut self, now: u64) {
        self.now = now;
        self.conn.on_timer(now, &mut self.echo);
    }
}

#[test]
fn messages_are_echoed_in_any_split() {
    let mut input = frame(0x81, b"Hello");
    input.extend(frame(0x82, &[7u8; 300]));
    input.extend(frame(0x81, "κόσμε".as_bytes()));
    input.extend(frame(0x82, &[1u8; 70_000]));
    let mut want = server(0x81, b"Hello");
    want.extend(server(0x82, &[7u8; 300]));
    want.extend(server(0x81, "κόσμε".as_bytes()));
    want.extend(server(0x82, &[1u8; 70_000]));
    for step in [input.len(), 1, 2, 3, 7, 13, 4096] {
        let mut r = Run::new();
        for piece in input.chunks(step) {
            r.recv(piece);
        }
        assert_eq!(r.output(), want, "pieces of {step}");
        assert_eq!(
            r.echo.heard,
            ["text:Hello", "binary:300", "text:κόσμε", "binary:70000"]
        );
        assert_eq!(r.transmit(), "idle");
        assert!(r.conn.wants_input());
    }
}

/// Autobahn 1.1.1, 1.2.1: a message without payload is whole once its header is in (it
/// was first answered only when the next bytes came).
#[test]
fn empty_messages_are_answered_at_once() {
    let mut r = Run::new();
    r.recv(&frame(0x81, b""));
    assert_eq!(r.output(), server(0x81, b""));
    r.recv(&frame(0x82, b""));
    assert_eq!(r.output(), server(0x82, b""));
    r.recv(&frame(0x89, b""));
    assert_eq!(r.output(), server(0x8A, b""));
    r.recv(&[frame(0x01, b""), frame(0x80, b"")].concat());
    assert_eq!(r.output(), server(0x81, b""));
    assert_eq!(r.echo.heard, ["text:", "binary:0", "text:"]);
}

/// RFC 6455 §5.4: fragments make one message; control frames may come between them, and
/// are answered at once.
#[test]
fn fragments_with_a_ping_between() {
    let mut input = frame(0x01, b"Hel");
    input.extend(frame(0x89, b"are you there"));
    input.extend(frame(0x00, b"lo, "));
    input.extend(frame(0x8A, b"unsolicited pong"));
    input.extend(frame(0x80, b"world"));
    for step in [input.len(), 1, 5] {
        let mut r = Run::new();
        for piece in input.chunks(step) {
            r.recv(piece);
        }
        let mut want = server(0x8A, b"are you there");
        want.extend(server(0x81, b"Hello, world"));
        assert_eq!(r.output(), want, "pieces of {step}");
        assert_eq!(r.echo.heard, ["text:Hello, world"]);
    }
}

/// The close handshake begun by the client (RFC 6455 §5.5.1, §7.1.1): its code is echoed,
/// then the server shuts down its side first and drops what else comes.
#[test]
fn a_client_close_is_answered_and_the_server_shuts_first() {
    for (payload, want, told) in [
        (vec![0x03, 0xE8], close_frame(1000, ""), Some(1000)),
        (b"\x0f\xa0gone".to_vec(), close_frame(4000, ""), Some(4000)),
        (vec![], close_frame(1000, ""), None),
    ] {
        let mut r = Run::new();
        let mut input = frame(0x88, &payload);
        input.extend(frame(0x81, b"after the close"));
        r.recv(&input);
        assert_eq!(r.output(), want);
        assert_eq!(r.transmit(), "shutdown");
        assert!(r.echo.heard.is_empty());
        assert_eq!(r.echo.closed, [told]);
        r.conn.shut(r.now);
        assert!(r.conn.wants_input(), "lingering: input is read and dropped");
        r.recv(b"anything");
        r.conn.eof(&mut r.echo);
        assert_eq!(r.transmit(), "close");
        assert_eq!(r.echo.closed.len(), 1, "told once");
    }
}

/// Failing the connection (RFC 6455 §7.1.7): a close frame with the right code, the socket
/// shut once it is out, nothing read after.
#[test]
fn failures_close_with_their_codes() {
    let limits = WsLimits {
        max_frame: 1000,
        max_message: 1500,
        ..WsLimits::default()
    };
    let big = vec![b'a'; 1001];
    let rows: Vec<(&str, Vec<u8>, u16)> = vec![
        // §5.1: a client frame must be masked.
        (
            "unmasked",
            vec![0x81, 0x02, b'h', b'i'],
            close::PROTOCOL_ERROR,
        ),
        // §5.2: reserved bits and opcodes.
        ("rsv1", frame(0xC1, b"x"), close::PROTOCOL_ERROR),
        ("opcode 3", frame(0x83, b""), close::PROTOCOL_ERROR),
        ("opcode 0xB", frame(0x8B, b""), close::PROTOCOL_ERROR),
        // §5.5: control frames whole and at most 125 bytes.
        ("fragmented ping", frame(0x09, b""), close::PROTOCOL_ERROR),
        ("ping of 126", frame(0x89, &[0; 126]), close::PROTOCOL_ERROR),
        // §5.4: continuation with nothing begun, a new message inside one.
        (
            "lone continuation",
            frame(0x80, b"x"),
            close::PROTOCOL_ERROR,
        ),
        (
            "text inside text",
            [frame(0x01, b"a"), frame(0x81, b"b")].concat(),
            close::PROTOCOL_ERROR,
        ),
        // §5.5.1, §7.4: close payloads.
        (
            "close of one byte",
            frame(0x88, &[3]),
            close::PROTOCOL_ERROR,
        ),
        (
            "close code 1005",
            frame(0x88, &1005u16.to_be_bytes()),
            close::PROTOCOL_ERROR,
        ),
        (
            "close code 999",
            frame(0x88, &999u16.to_be_bytes()),
            close::PROTOCOL_ERROR,
        ),
        (
            "close reason not UTF-8",
            frame(0x88, b"\x03\xe8\xff"),
            close::INVALID_DATA,
        ),
        // §8.1: text must be UTF-8.
        (
            "invalid text",
            frame(0x81, b"\xce\xba\xff"),
            close::INVALID_DATA,
        ),
        (
            "text ends mid-character",
            frame(0x81, b"\xce"),
            close::INVALID_DATA,
        ),
        // The named limits.
        ("frame over the limit", frame(0x82, &big), close::TOO_BIG),
        (
            "message over the limit",
            [frame(0x02, &big[..800]), frame(0x80, &big[..800])].concat(),
            close::TOO_BIG,
        ),
    ];
    for (name, input, code) in rows {
        let mut r = Run::with(limits);
        r.recv(&input);
        let out = r.output();
        let want_head = [0x88u8, 0, (code >> 8) as u8, code as u8];
        assert!(
            out.len() >= 4 && out[0] == 0x88 && out[2..4] == want_head[2..4],
            "{name}: {out:x?}"
        );
        assert_eq!(r.transmit(), "shutdown", "{name}");
        assert!(!r.conn.wants_input(), "{name}");
        assert!(r.echo.heard.is_empty(), "{name}: {:?}", r.echo.heard);
        assert_eq!(r.echo.closed, [None], "{name}");
    }
}

/// RFC 6455 §8.1 and Autobahn 6.4: invalid text fails inside a fragmented message, before
/// the message (even the frame) ends.
#[test]
fn invalid_text_fails_before_its_message_ends() {
    let mut r = Run::new();
    r.recv(&frame(0x01, "κόσμε".as_bytes()));
    assert_eq!(r.output(), b"");
    // The first bytes of the next fragment's payload are already invalid: F4 90.
    let next = frame(0x00, b"\xf4\x90\x80\x80edited");
    r.recv(&next[..8]);
    assert_eq!(
        r.output(),
        close_frame(close::INVALID_DATA, "text is not UTF-8")
    );
}

/// A message the handler answers with a close: the server's close frame goes out, the
/// client's is awaited and dropped messages are not handed on; its close ends it.
#[test]
fn a_server_close_waits_for_the_client_close() {
    let mut r = Run::new();
    r.echo.close_on_bye = true;
    let mut input = frame(0x81, b"bye");
    input.extend(frame(0x81, b"still talking"));
    r.recv(&input);
    assert_eq!(r.output(), close_frame(1000, "see you"));
    assert_eq!(r.echo.heard, ["text:bye"]);
    assert_eq!(r.transmit(), "idle");
    assert!(r.conn.wants_input());
    r.recv(&frame(0x88, &1000u16.to_be_bytes()));
    assert_eq!(r.output(), b"", "no second close frame");
    assert_eq!(r.transmit(), "shutdown");
    assert_eq!(r.echo.closed, [Some(1000)]);
}

/// Drain: close 1001, and without the client's close the close timeout ends it.
#[test]
fn drain_closes_1001_with_a_timeout() {
    let mut r = Run::new();
    r.now = 100;
    r.conn
        .close(close::GOING_AWAY, "server shutting down", r.now);
    assert_eq!(r.output(), close_frame(1001, "server shutting down"));
    assert_eq!(r.conn.deadline(), 100 + super::CLOSE_TIMEOUT_MS);
    r.at(100 + super::CLOSE_TIMEOUT_MS - 1);
    assert_eq!(r.transmit(), "idle");
    r.at(100 + super::CLOSE_TIMEOUT_MS);
    assert_eq!(r.transmit(), "shutdown");
    assert_eq!(r.echo.closed, [None]);
}

/// An idle connection is pinged; any input counts as an answer; silence closes it.
#[test]
fn idle_pings() {
    let limits = WsLimits {
        ping_after: 1000,
        ..WsLimits::default()
    };
    let mut r = Run::with(limits);
    assert_eq!(r.conn.deadline(), 1000);
    r.at(1000);
    assert_eq!(r.output(), server(0x89, b""));
    assert_eq!(r.conn.deadline(), 2000);
    r.now = 1500;
    r.recv(&frame(0x8A, b""));
    assert_eq!(r.conn.deadline(), 2500);
    r.at(2500);
    assert_eq!(r.output(), server(0x89, b""));
    r.at(3500);
    assert_eq!(r.transmit(), "close");
    assert_eq!(r.echo.closed, [None]);
}

/// A paused application holds the client back: the idle ping waits (its answer could not
/// be read), and the connection is not closed for a silence that is the server's; once it
/// resumes, the ping timer runs again from then.
#[test]
fn no_pings_while_the_application_is_paused() {
    let limits = WsLimits {
        ping_after: 1000,
        ..WsLimits::default()
    };
    let mut r = Run::with(limits);
    r.echo.paused = true;
    r.at(1000);
    assert_eq!(r.output(), b"");
    assert_eq!(r.conn.deadline(), 2000);
    r.at(2000);
    r.at(3000);
    assert_eq!(r.output(), b"");
    assert_eq!(r.transmit(), "idle");
    assert!(r.echo.closed.is_empty());
    r.echo.paused = false;
    r.at(4000);
    assert_eq!(r.output(), server(0x89, b""));
    r.at(5000);
    assert_eq!(r.transmit(), "close");
}

/// Backpressure: while the output held reaches its limit the connection reads nothing
/// more, and a client that never reads is dropped after the send timeout.
#[test]
fn output_bounds_reading_and_a_stalled_client_times_out() {
    let limits = WsLimits {
        max_queued: 1000,
        ..WsLimits::default()
    };
    let mut r = Run::with(limits);
    r.recv(&frame(0x82, &[0; 600]));
    assert!(r.conn.wants_input());
    r.recv(&frame(0x82, &[0; 600]));
    assert!(!r.conn.wants_input(), "1,208 bytes held");
    // The driver takes it; the socket does not report it sent.
    let taken = r.conn.take_output(&mut r.pool);
    assert_eq!(taken.len(), 1208);
    assert!(r.conn.wants_input());
    assert_eq!(r.conn.deadline(), super::SEND_TIMEOUT_MS);
    r.at(super::SEND_TIMEOUT_MS);
    assert_eq!(r.transmit(), "close");
}

/// An idle connection holds no buffer.
#[test]
fn idle_holds_nothing() {
    let mut r = Run::new();
    r.recv(&frame(0x81, b"hi"));
    r.output();
    r.recv(&frame(0x89, b"ping"));
    r.output();
    assert_eq!(r.conn.sending().map(|s| s.queued()), Some(0));
    assert_eq!(r.conn.held(), 0);
    r.recv(&frame(0x01, b"half a message"));
    assert!(r.conn.held() > 0);
    r.conn.release(&mut r.pool, &mut r.echo);
    assert_eq!(r.conn.held(), 0);
    assert!(
        std::mem::size_of::<Conn>() <= 256,
        "{}",
        std::mem::size_of::<Conn>()
    );
}

// permessage-deflate (RFC 7692).

use linerate_ws::deflate::{Agreed, Deflate, Inflate};

fn agreed(client_no_context_takeover: bool) -> Option<Agreed> {
    Some(Agreed {
        server_max_window_bits: None,
        client_no_context_takeover,
    })
}

impl Run {
    fn deflate(agreed: Option<Agreed>) -> Run {
        let mut r = Run::new();
        r.conn = Conn::new(0, WsLimits::default()).with_deflate(agreed);
        r
    }
    fn deflate_with(limits: WsLimits, agreed: Option<Agreed>) -> Run {
        let mut r = Run::with(limits);
        r.conn = Conn::new(0, limits).with_deflate(agreed);
        r
    }
}

/// A client's compressed message (no context kept): its payload, deflated.
fn deflated(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Deflate::new(15).message(data, &mut out);
    out
}

/// The server's close frame's code, from its output.
fn close_code(out: &[u8]) -> Option<u16> {
    (out.len() >= 4 && out[0] == 0x88).then(|| u16::from_be_bytes([out[2], out[3]]))
}

/// The handshake's offer in, the 101's `Sec-WebSocket-Extensions` (or a refusal) out
/// (RFC 7692 §5, §7.1): the first acceptable offer is taken, one with a parameter it cannot
/// take is declined, a malformed field value refuses the handshake (400).
#[test]
fn deflate_offers_and_their_answers() {
    use super::handshake::{self, Refusal};
    use linerate_http1::{Limits, RequestHead};
    type Row = (
        &'static str,
        &'static [&'static str],
        Result<Option<&'static str>, Refusal>,
    );
    let rows: &[Row] = &[
        ("none", &[], Ok(None)),
        (
            "a browser's",
            &["permessage-deflate; client_max_window_bits"],
            Ok(Some("permessage-deflate; server_no_context_takeover")),
        ),
        (
            "Autobahn's default",
            &["permessage-deflate; client_no_context_takeover; client_max_window_bits"],
            Ok(Some(
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            )),
        ),
        // §7.1.2.1: the window asked for is kept (8 by sending messages uncompressed).
        (
            "server_max_window_bits=8",
            &["permessage-deflate; server_max_window_bits=8"],
            Ok(Some(
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=8",
            )),
        ),
        // §5: offers in the client's order of preference; §7.1: a bad one is declined.
        (
            "the first acceptable of several",
            &[
                "permessage-deflate; server_max_window_bits=16",
                "permessage-deflate; server_max_window_bits=10, permessage-deflate",
            ],
            Ok(Some(
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=10",
            )),
        ),
        (
            "a repeated parameter: declined",
            &["permessage-deflate; server_no_context_takeover; server_no_context_takeover"],
            Ok(None),
        ),
        (
            "an unknown parameter: declined",
            &["permessage-deflate; level=9"],
            Ok(None),
        ),
        (
            "unknown extensions: passed over",
            &["x-foo, y-bar; q=1"],
            Ok(None),
        ),
        // RFC 6455 §9.1's grammar.
        (
            "malformed",
            &["permessage-deflate; =15"],
            Err(Refusal::Extensions),
        ),
    ];
    for (name, values, want) in rows {
        let fields: String = values
            .iter()
            .map(|v| format!("Sec-WebSocket-Extensions: {v}\r\n"))
            .collect();
        let raw = format!(
            "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{fields}\r\n"
        );
        let mut head = RequestHead::default();
        head.parse(raw.as_bytes(), &Limits::default()).unwrap();
        let got = handshake::check(&head, raw.as_bytes()).map(|o| o.deflate.map(|a| a.response()));
        assert_eq!(got, want.map(|a| a.map(str::to_owned)), "{name}");
    }
}

/// RFC 7692 §7.2.3's examples as client frames (masked), each in every split: "Hello".
#[test]
fn the_rfc_7692_examples_are_heard() {
    let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
    let rows: Vec<(&str, Vec<u8>)> = vec![
        // §7.2.3.1: one frame (0xc1 0x07 …), and the same message in two fragments.
        ("one frame", frame(0xC1, &hello)),
        (
            "two fragments",
            [frame(0x41, &hello[..3]), frame(0x80, &hello[3..])].concat(),
        ),
        // §7.2.3.3: a stored block (no compression).
        (
            "stored",
            frame(
                0xC1,
                &[
                    0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
                ],
            ),
        ),
        // §7.2.3.4: a block with BFINAL set.
        (
            "bfinal",
            frame(0xC1, &[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00]),
        ),
        // §7.2.3.5: two DEFLATE blocks.
        (
            "two blocks",
            frame(
                0xC1,
                &[
                    0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
                ],
            ),
        ),
        // RFC 6455 §5.4: a ping between the fragments of a compressed message.
        (
            "a ping between fragments",
            [
                frame(0x41, &hello[..3]),
                frame(0x89, b""),
                frame(0x80, &hello[3..]),
            ]
            .concat(),
        ),
    ];
    for (name, input) in rows {
        for step in [input.len(), 1, 2, 5] {
            let mut r = Run::deflate(agreed(false));
            for piece in input.chunks(step) {
                r.recv(piece);
            }
            let want = if name.contains("ping") {
                [server(0x8A, b""), server(0x81, b"Hello")].concat()
            } else {
                server(0x81, b"Hello")
            };
            // Five bytes are under MIN_DEFLATE_BYTES: the echo goes out uncompressed.
            assert_eq!(r.output(), want, "{name}, pieces of {step}");
            assert_eq!(r.echo.heard, ["text:Hello"], "{name}, pieces of {step}");
        }
    }
}

/// §7.2.3.2: the second message refers to the first one's window (context takeover), so
/// it is heard only where the client keeps its context; where it agreed to
/// `client_no_context_takeover`, the inflater starts empty and the reference fails (1007).
#[test]
fn the_window_is_kept_between_messages_unless_agreed_otherwise() {
    let input = [
        frame(0xC1, &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]),
        frame(0xC1, &[0xf2, 0x00, 0x11, 0x00, 0x00]),
    ]
    .concat();
    let mut r = Run::deflate(agreed(false));
    r.recv(&input);
    assert_eq!(r.echo.heard, ["text:Hello", "text:Hello"]);
    r.output();
    assert_eq!(r.conn.held(), linerate_ws::deflate::INFLATE_BYTES);
    let mut r = Run::deflate(agreed(true));
    r.recv(&input[..13]);
    r.output();
    assert_eq!(r.conn.held(), 0, "no inflater between messages");
    r.recv(&input[13..]);
    assert_eq!(r.echo.heard, ["text:Hello"]);
    assert_eq!(close_code(&r.output()), Some(close::INVALID_DATA));
}

/// Messages of 128 bytes and more go out compressed (RSV1 on their one frame); each starts
/// from an empty window (server_no_context_takeover), so each inflates alone.
#[test]
fn large_messages_are_echoed_compressed() {
    let json = br#"{"user":"someone","text":"hello there","room":"lobby"}"#.repeat(40);
    let binary = vec![7u8; 70_000];
    let input = [
        frame(0xC1, &deflated(&json)),
        frame(0x82, &binary),
        frame(0xC1, &deflated(&json)),
    ]
    .concat();
    let mut r = Run::deflate(agreed(false));
    r.recv(&input);
    let out = r.output();
    let mut at = 0;
    for (want_b0, want) in [(0xC1, &json[..]), (0xC2, &binary[..]), (0xC1, &json[..])] {
        assert_eq!(out[at], want_b0);
        let (len, head) = match out[at + 1] {
            126 => (
                usize::from(u16::from_be_bytes([out[at + 2], out[at + 3]])),
                4,
            ),
            n => (usize::from(n), 2),
        };
        let payload = &out[at + head..at + head + len];
        assert!(len < want.len() / 10, "{len}");
        let mut z = Inflate::new();
        let mut plain = Vec::new();
        z.piece(payload, &mut plain, 1 << 20).unwrap();
        z.finish(&mut plain, 1 << 20).unwrap();
        assert_eq!(plain, want);
        at += head + len;
    }
    assert_eq!(at, out.len());
}

/// A server that agreed to a window of 8 bits sends every message as it is (zlib cannot
/// compress with it; an uncompressed message keeps to any window).
#[test]
fn a_window_of_8_bits_is_kept_by_not_compressing() {
    let big = vec![b'a'; 1000];
    let mut r = Run::deflate(Some(Agreed {
        server_max_window_bits: Some(8),
        client_no_context_takeover: false,
    }));
    r.recv(&frame(0xC2, &deflated(&big)));
    assert_eq!(r.output(), server(0x82, &big));
}

/// The defences: RSV1 where it means nothing (RFC 7692 §6), compressed data that is not
/// DEFLATE, text that is not UTF-8 once inflated (failing before the message ends), and a
/// decompression bomb stopped at the message limit without inflating the rest.
#[test]
fn deflate_failures_close_with_their_codes() {
    let limits = WsLimits {
        max_message: 100_000,
        ..WsLimits::default()
    };
    let bomb = deflated(&vec![0u8; 20 << 20]);
    assert!(bomb.len() < 30_000, "{}", bomb.len());
    let mut bad_text = deflated("κόσμε".repeat(10).as_bytes());
    bad_text.extend(deflated(b"\xff more"));
    let rows: Vec<(&str, Option<Agreed>, Vec<u8>, u16)> = vec![
        (
            "RSV1 not agreed",
            None,
            frame(0xC1, &deflated(b"x")),
            close::PROTOCOL_ERROR,
        ),
        (
            "RSV1 on a continuation",
            agreed(false),
            [frame(0x01, b"a"), frame(0xC0, b"b")].concat(),
            close::PROTOCOL_ERROR,
        ),
        (
            "RSV1 on a continuation of a compressed message",
            agreed(false),
            [frame(0x41, &[0xf2, 0x48]), frame(0xC0, &[0xcd])].concat(),
            close::PROTOCOL_ERROR,
        ),
        (
            "RSV1 on a ping",
            agreed(false),
            frame(0xC9, b""),
            close::PROTOCOL_ERROR,
        ),
        (
            "not DEFLATE",
            agreed(false),
            frame(0xC2, &[0xff, 0xff, 0xff]),
            close::INVALID_DATA,
        ),
        (
            "not UTF-8 once inflated",
            agreed(false),
            frame(0xC1, &bad_text),
            close::INVALID_DATA,
        ),
        ("a bomb", agreed(false), frame(0xC2, &bomb), close::TOO_BIG),
        (
            "a bomb in fragments",
            agreed(false),
            [
                frame(0x42, &bomb[..100]),
                frame(0x00, &bomb[100..]),
                frame(0x80, b""),
            ]
            .concat(),
            close::TOO_BIG,
        ),
    ];
    for (name, agreed, input, code) in rows {
        let mut r = Run::deflate_with(limits, agreed);
        r.recv(&input);
        assert_eq!(close_code(&r.output()), Some(code), "{name}");
        assert_eq!(r.transmit(), "shutdown", "{name}");
        assert!(r.echo.heard.is_empty(), "{name}: {:?}", r.echo.heard);
    }
    // Refused as soon as the inflated size passes the limit: half the bomb's frame is in,
    // the rest is never inflated.
    let mut r = Run::deflate_with(limits, agreed(false));
    let whole = frame(0xC2, &bomb);
    r.recv(&whole[..whole.len() / 2]);
    assert_eq!(close_code(&r.output()), Some(close::TOO_BIG));
}

/// A compressed message at the limit exactly is taken; one byte more is refused (1009).
#[test]
fn the_message_limit_is_on_the_inflated_size() {
    let limits = WsLimits {
        max_message: 50_000,
        ..WsLimits::default()
    };
    for (len, heard) in [(50_000, true), (50_001, false)] {
        let mut r = Run::deflate_with(limits, agreed(false));
        r.recv(&frame(0xC2, &deflated(&vec![1u8; len])));
        assert_eq!(!r.echo.heard.is_empty(), heard, "{len}");
        if !heard {
            assert_eq!(close_code(&r.output()), Some(close::TOO_BIG));
        }
    }
}
