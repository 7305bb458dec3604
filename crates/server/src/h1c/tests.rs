//! The upstream connection as byte tables: a request's bytes out, response bytes in, the
//! exchange's events out, every response also fed one byte at a time; timers exact.
#![forbid(unsafe_code)]

use super::conn::*;
use linerate_http1::{FieldSpan, ResponseError, ResponseInfo};

const T: Timeouts = Timeouts {
    connect: 100,
    send: 200,
    first_byte: 300,
    read: 400,
    idle: 500,
    tunnel: 600,
};

/// What the exchange heard, as text: `head 200 [fields]`, `data …`, `end`, `failed …`.
#[derive(Default)]
struct Heard {
    events: Vec<String>,
    /// Refuse data after this many pieces (backpressure), until cleared.
    full_after: Option<usize>,
}

fn names(head: &[u8], fields: &[FieldSpan]) -> String {
    let names: Vec<String> = fields
        .iter()
        .map(|f| String::from_utf8_lossy(&head[f.name.clone()]).into_owned())
        .collect();
    names.join(",")
}

impl Exchange for Heard {
    fn interim(&mut self, info: &ResponseInfo, head: &[u8], fields: &[FieldSpan]) {
        self.events
            .push(format!("interim {} [{}]", info.status, names(head, fields)));
    }
    fn head(&mut self, info: &ResponseInfo, head: &[u8], fields: &[FieldSpan]) {
        self.events
            .push(format!("head {} [{}]", info.status, names(head, fields)));
    }
    fn data(&mut self, data: &[u8]) -> bool {
        self.events
            .push(format!("data {}", String::from_utf8_lossy(data)));
        match &mut self.full_after {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                *n > 0
            }
            None => true,
        }
    }
    fn end(&mut self) {
        self.events.push("end".into());
    }
    fn failed(&mut self, error: UpError) {
        self.events.push(format!("failed {error:?}"));
    }
}

impl Heard {
    /// The events with consecutive data pieces joined (so splits do not matter).
    fn joined(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in &self.events {
            match (out.last_mut(), e.strip_prefix("data ")) {
                (Some(last), Some(d)) if last.starts_with("data ") => last.push_str(d),
                _ => out.push(e.clone()),
            }
        }
        out
    }
}

/// A connection, connected at 0, with `request` started (GET, no body).
fn ready(request: &[u8]) -> Conn {
    let mut c = Conn::new(0, T);
    c.connected(0);
    c.start(request, ReqBody::None, false, false, 0);
    c
}

/// A connection whose GET went out at 0, and an exchange listening for its answer.
fn asked() -> (Conn, Heard) {
    let mut c = ready(GET);
    output(&mut c, 0);
    (c, Heard::default())
}

/// A connection, connected at 0, with a request whose body goes out as `body`.
fn posting(head: &[u8], body: ReqBody) -> Conn {
    let mut c = Conn::new(0, T);
    c.connected(0);
    c.start(head, body, false, false, 0);
    c
}

/// Takes what the connection has to send, as text, reporting it sent at `now`.
fn output(c: &mut Conn, now: u64) -> String {
    let mut all = Vec::new();
    while c.poll_transmit() == Transmit::Bytes {
        all.extend(c.take_output());
        c.sent(now);
    }
    String::from_utf8_lossy(&all).into_owned()
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: up\r\n\r\n";

/// (rule, response bytes, events with data joined, the connection reusable after).
#[rustfmt::skip]
const RESPONSES: &[(&str, &[u8], &[&str], bool)] = &[
    ("Content-Length body", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello", &["head 200 [Content-Length,X-A]", "data hello", "end"], true),
    ("chunked body, trailers dropped", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n", &["head 200 [Transfer-Encoding]", "data abcde", "end"], true),
    ("no body: 204 whatever it says (RFC 9112 §6.3)", b"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\n", &["head 204 [Content-Length]", "end"], true),
    ("no body: 304", b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", &["head 304 [ETag]", "end"], true),
    ("Content-Length: 0", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &["head 200 [Content-Length]", "end"], true),
    // RFC 9110 §15.2: a proxy forwards 1xx answers but those it asked for itself (the
    // client's 100 Continue came from this server when its body was read).
    ("a 103 is heard before the final head, a 100 is not", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", &["interim 103 [Link]", "head 200 [Content-Length]", "data x", "end"], true),
    ("Connection: close: not reused", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx", &["head 200 [Content-Length,Connection]", "data x", "end"], false),
    ("HTTP/1.0 without keep-alive: not reused", b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", &["head 200 [Content-Length]", "data x", "end"], false),
    ("bytes after the response: not reused", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n\r\n", &["head 200 [Content-Length]", "data x", "end"], false),
    // Strict reading: each is a 502, never a byte forwarded (RFC 9112 §6.3, §2.2, §5.2).
    ("length and chunked: response splitting", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", &["failed Malformed(LengthAndEncoding)"], false),
    ("two lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", &["failed Malformed(ContentLength)"], false),
    ("bare LF", b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx", &["failed Malformed(BareLf)"], false),
    ("obs-fold", b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 1\r\n\r\nx", &["failed Malformed(ObsFold)"], false),
    ("a coding it cannot decode", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nxxxx", &["failed Malformed(TransferCoding)"], false),
    ("a bad status line", b"HTTP/1.1 2OO OK\r\n\r\n", &["failed Malformed(StatusLine)"], false),
    ("HTTP/2 status line", b"HTTP/2 200\r\n\r\n", &["failed Malformed(StatusLine)"], false),
    ("a space before the colon", b"HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx", &["failed Malformed(FieldLine)"], false),
    ("bad chunk size after the head went out", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n", &["head 200 [Transfer-Encoding]", "data abc", "failed Malformed(Chunked(InvalidChunkSize))"], false),
    ("101 to a request that did not ask to upgrade", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", &["failed Unsolicited"], false),
];

#[test]
fn responses_whole_and_byte_by_byte() {
    for (rule, bytes, want, reusable) in RESPONSES {
        for step in [bytes.len(), 1, 7] {
            let mut c = ready(GET);
            assert_eq!(output(&mut c, 0), String::from_utf8_lossy(GET), "{rule}");
            let mut h = Heard::default();
            for piece in bytes.chunks(step) {
                c.recv(piece, 1, &mut h);
            }
            assert_eq!(h.joined(), *want, "{rule}, in pieces of {step}");
            assert_eq!(c.is_idle(), *reusable, "{rule}, in pieces of {step}");
            if !*reusable {
                assert_eq!(c.poll_transmit(), Transmit::Close, "{rule}");
            }
        }
    }
}

#[test]
fn head_request_answer_has_no_body_whatever_its_length() {
    let mut c = Conn::new(0, T);
    c.connected(0);
    c.start(b"HEAD / HTTP/1.1\r\n\r\n", ReqBody::None, true, false, 0);
    output(&mut c, 0);
    let mut h = Heard::default();
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", 1, &mut h);
    assert_eq!(h.joined(), ["head 200 [Content-Length]", "end"]);
    assert!(c.is_idle());
}

#[test]
fn body_to_the_close_ends_at_eof_and_is_not_reused() {
    let (mut c, mut h) = asked();
    c.recv(b"HTTP/1.1 200 OK\r\n\r\nsome ", 1, &mut h);
    c.recv(b"bytes", 2, &mut h);
    c.eof(&mut h);
    assert_eq!(h.joined(), ["head 200 []", "data some bytes", "end"]);
    assert!(!c.is_idle());
    assert_eq!(c.poll_transmit(), Transmit::Close);
}

#[test]
fn a_cut_off_response_fails_and_a_silent_close_is_retryable() {
    // Inside a length-delimited body: cut off, never passed off as whole.
    let (mut c, mut h) = asked();
    c.recv(
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        1,
        &mut h,
    );
    c.eof(&mut h);
    assert_eq!(
        h.joined(),
        ["head 200 [Content-Length]", "data abc", "failed CutOff"]
    );
    // Inside the head.
    let (mut c, mut h) = asked();
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Le", 1, &mut h);
    c.broken(&mut h);
    assert_eq!(h.joined(), ["failed CutOff"]);
    // Before any byte: closed unanswered (the pooled-connection case the proxy retries).
    let (mut c, mut h) = asked();
    c.eof(&mut h);
    assert_eq!(h.joined(), ["failed Closed"]);
    assert!(UpError::Closed.unanswered() && !UpError::CutOff.unanswered());
}

#[test]
fn a_pooled_connection_serves_the_next_request_and_knows_it_is_reused() {
    let mut c = ready(GET);
    assert!(!c.reused());
    output(&mut c, 0);
    let mut h = Heard::default();
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", 1, &mut h);
    assert!(c.is_idle() && c.is_free());
    assert_eq!(c.deadline(), 1 + T.idle);
    c.start(b"GET /2 HTTP/1.1\r\n\r\n", ReqBody::None, false, false, 10);
    assert!(c.reused());
    assert_eq!(output(&mut c, 10), "GET /2 HTTP/1.1\r\n\r\n");
    let mut h = Heard::default();
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb", 11, &mut h);
    assert_eq!(h.joined(), ["head 200 [Content-Length]", "data b", "end"]);
    // An idle pooled connection the upstream closes, or talks on, is dropped quietly.
    c.eof(&mut Heard::default());
    assert_eq!(c.poll_transmit(), Transmit::Close);
    let mut c = ready(GET);
    output(&mut c, 0);
    c.recv(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        1,
        &mut Heard::default(),
    );
    let mut h = Heard::default();
    c.recv(b"junk", 2, &mut h);
    assert!(h.events.is_empty());
    assert_eq!(c.poll_transmit(), Transmit::Close);
}

#[test]
fn request_bodies_are_framed_by_length_or_chunked() {
    let mut c = posting(
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        ReqBody::Length(5),
    );
    c.body(b"he");
    c.body(b"llo and more than declared");
    c.body_end();
    assert_eq!(c.out_len(), 43, "the head and exactly the declared length");
    assert_eq!(
        output(&mut c, 0),
        "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    );
    let mut c = posting(
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ReqBody::Chunked,
    );
    c.body(b"abc");
    c.body(b"");
    c.body(&[b'x'; 26]);
    c.body_end();
    assert_eq!(
        output(&mut c, 0),
        format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1a\r\n{}\r\n0\r\n\r\n",
            "x".repeat(26)
        )
    );
    // An answer before the body is all out: forwarded, and the connection is not reused.
    let mut h = Heard::default();
    let mut c = posting(
        b"POST / HTTP/1.1\r\nContent-Length: 9\r\n\r\n",
        ReqBody::Length(9),
    );
    c.body(b"abc");
    output(&mut c, 0);
    c.recv(
        b"HTTP/1.1 413 Too Large\r\nContent-Length: 0\r\n\r\n",
        1,
        &mut h,
    );
    assert_eq!(h.joined(), ["head 413 [Content-Length]", "end"]);
    assert_eq!(c.poll_transmit(), Transmit::Close);
    c.body(b"def"); // ignored: the exchange is over
}

#[test]
fn a_request_started_while_connecting_goes_out_once_connected() {
    let mut c = Conn::new(0, T);
    c.start(GET, ReqBody::None, false, false, 0);
    assert_eq!(c.poll_transmit(), Transmit::Idle);
    assert!(!c.wants_input());
    assert_eq!(c.deadline(), T.connect);
    c.connected(20);
    assert_eq!(output(&mut c, 20), String::from_utf8_lossy(GET));
    assert_eq!(c.deadline(), 20 + T.first_byte);
    // A connect that fails ends the queued exchange.
    let mut c = Conn::new(0, T);
    c.start(GET, ReqBody::None, false, false, 0);
    let mut h = Heard::default();
    c.connect_failed(&mut h);
    assert_eq!(h.joined(), ["failed Connect"]);
}

#[test]
fn each_timeout_is_exact() {
    // Connect.
    let mut c = Conn::new(0, T);
    c.start(GET, ReqBody::None, false, false, 0);
    let mut h = Heard::default();
    c.on_timer(T.connect - 1, &mut h);
    assert!(h.events.is_empty());
    c.on_timer(T.connect, &mut h);
    assert_eq!(h.joined(), ["failed Timeout(Connect)"]);
    // Send: from the stall.
    let mut c = ready(GET);
    assert_eq!(c.poll_transmit(), Transmit::Bytes);
    c.take_output();
    c.stalled(5);
    assert_eq!(c.deadline(), 5 + T.send);
    let mut h = Heard::default();
    c.on_timer(5 + T.send, &mut h);
    assert_eq!(h.joined(), ["failed Timeout(Send)"]);
    // First byte: from the request's last byte sent.
    let mut c = ready(GET);
    output(&mut c, 7);
    assert_eq!(c.deadline(), 7 + T.first_byte);
    let mut h = Heard::default();
    c.on_timer(7 + T.first_byte, &mut h);
    assert_eq!(h.joined(), ["failed Timeout(FirstByte)"]);
    // Read: between two reads of the response, once it started.
    let (mut c, mut h) = asked();
    c.recv(
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab",
        50,
        &mut h,
    );
    assert_eq!(c.deadline(), 50 + T.read);
    c.recv(b"cd", 60, &mut h);
    assert_eq!(c.deadline(), 60 + T.read);
    c.on_timer(60 + T.read, &mut h);
    assert_eq!(
        h.joined(),
        [
            "head 200 [Content-Length]",
            "data abcd",
            "failed Timeout(Read)"
        ]
    );
    // Idle in the pool: closed quietly.
    let mut c = ready(GET);
    output(&mut c, 0);
    c.recv(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        3,
        &mut Heard::default(),
    );
    let mut h = Heard::default();
    c.on_timer(3 + T.idle, &mut h);
    assert!(h.events.is_empty());
    assert_eq!(c.poll_transmit(), Transmit::Close);
}

#[test]
fn backpressure_holds_the_rest_until_resumed() {
    let mut c = ready(GET);
    output(&mut c, 0);
    let mut h = Heard {
        full_after: Some(1),
        ..Heard::default()
    };
    c.recv(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n",
        1,
        &mut h,
    );
    assert_eq!(h.joined(), ["head 200 [Transfer-Encoding]", "data abc"]);
    assert!(!c.wants_input(), "a full exchange stops the reading");
    assert_eq!(
        c.deadline(),
        u64::MAX,
        "no read timeout while the client is slow"
    );
    h.full_after = None;
    c.resume(2, &mut h);
    assert_eq!(
        h.joined(),
        ["head 200 [Transfer-Encoding]", "data abcdef", "end"]
    );
    assert!(c.is_idle());
    // Held bytes of a body that runs to the close still arrive before its end.
    let mut c = ready(GET);
    output(&mut c, 0);
    let mut h = Heard {
        full_after: Some(1),
        ..Heard::default()
    };
    c.recv(b"HTTP/1.1 200 OK\r\n\r\nfirst", 1, &mut h);
    c.recv(b" second", 2, &mut h);
    c.eof(&mut h);
    assert_eq!(h.joined(), ["head 200 []", "data first"]);
    h.full_after = None;
    c.resume(3, &mut h);
    assert_eq!(h.joined(), ["head 200 []", "data first second", "end"]);
}

#[test]
fn an_upgrade_becomes_a_tunnel() {
    let mut c = Conn::new(0, T);
    c.connected(0);
    c.start(
        b"GET /ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        ReqBody::None,
        false,
        true,
        0,
    );
    output(&mut c, 0);
    let mut h = Heard::default();
    c.recv(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x01\x02hi",
        1,
        &mut h,
    );
    assert_eq!(
        h.joined(),
        ["head 101 [Upgrade,Connection]", "data \u{1}\u{2}hi"]
    );
    assert_eq!(c.deadline(), 1 + T.tunnel);
    c.tunnel_send(b"\x01\x02abcd");
    assert_eq!(output(&mut c, 2), "\u{1}\u{2}abcd");
    c.eof(&mut h);
    assert_eq!(h.events.last().unwrap(), "end");
    assert_eq!(c.poll_transmit(), Transmit::Close);
}

#[test]
fn a_head_over_the_limit_is_malformed() {
    let (mut c, mut h) = asked();
    c.recv(b"HTTP/1.1 200 OK\r\n", 1, &mut h);
    let filler = format!("X-Fill: {}\r\n", "a".repeat(1000));
    for _ in 0..70 {
        c.recv(filler.as_bytes(), 1, &mut h);
    }
    assert_eq!(
        h.joined(),
        [format!(
            "failed {:?}",
            UpError::Malformed(ResponseError::HeadTooLarge)
        )]
    );
}

/// Passive health counts what nginx's default `proxy_next_upstream error timeout` counts:
/// an unreachable, silent or closing server; never an answer that is malformed, unasked for
/// or cut after it began (one malformed answer once took its server out for `fail_timeout`).
#[test]
fn only_errors_and_timeouts_before_an_answer_count_against_a_server() {
    #[rustfmt::skip]
    let table = [
        (UpError::Connect, false, true),
        (UpError::Timeout(Phase::Connect), false, true),
        (UpError::Timeout(Phase::Send), false, true),
        (UpError::Timeout(Phase::FirstByte), false, true),
        (UpError::Closed, false, true),
        (UpError::Malformed(ResponseError::StatusLine), false, false),
        (UpError::Malformed(ResponseError::ContentLength), false, false),
        (UpError::Unsolicited, false, false),
        (UpError::CutOff, true, false),
        (UpError::Timeout(Phase::Read), true, false),
    ];
    for (error, answered, counts) in table {
        assert_eq!(
            error.counts_against_server(answered),
            counts,
            "{error} (answered: {answered})"
        );
    }
}

#[test]
fn a_pooled_connection_writes_its_next_request_into_the_buffer_its_last_one_went_out_in() {
    let (mut c, mut h) = asked();
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", 1, &mut h);
    assert!(c.is_idle());
    // The driver hands the sent buffer back; the next head goes into that allocation (told
    // by its capacity, which a fresh one for this head would not have).
    c.start(GET, ReqBody::None, false, false, 2);
    let mut buf = c.take_output();
    buf.reserve_exact(1000);
    let capacity = buf.capacity();
    c.reuse_output(buf);
    c.sent(2);
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ny", 3, &mut h);
    c.start(GET, ReqBody::None, false, false, 4);
    let again = c.take_output();
    assert_eq!(again, GET, "the second request's bytes");
    assert_eq!(
        again.capacity(),
        capacity,
        "the head was written into a new allocation"
    );
    // One a request body grew past the bound is not kept; output written meanwhile (a
    // tunnel's) is never replaced.
    c.reuse_output(vec![0; 64 * 1024]);
    c.sent(4);
    c.recv(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz", 5, &mut h);
    c.start(GET, ReqBody::None, false, false, 6);
    let third = c.take_output();
    assert_eq!(third, GET);
    assert!(third.capacity() < 64 * 1024, "a large buffer was kept");
    let mut held = posting(GET, ReqBody::Length(3));
    held.take_output();
    held.body(b"abc");
    held.reuse_output(Vec::with_capacity(16));
    assert_eq!(
        held.take_output(),
        b"abc",
        "output written meanwhile was lost"
    );
}
