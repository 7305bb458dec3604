//! The client's state machine with byte tables: frames in, what it writes and reports out.
//! Server frames are built here by hand (or by `loona_hpack::Encoder` where the server's
//! dynamic table is the point); each rule cites RFC 9113 or RFC 7541.

use super::request::literal;
use super::*;

type C = Client<u32>;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    head(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

/// A header block of literal fields (the server's table untouched).
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        literal(&mut b, n, v.as_bytes());
    }
    b
}

/// HEADERS with `:status` only.
fn status(stream: u32, code: &str, end_stream: bool) -> Vec<u8> {
    let end = if end_stream { flag::END_STREAM } else { 0 };
    frame(
        kind::HEADERS,
        flag::END_HEADERS | end,
        stream,
        &block(&[(":status", code)]),
    )
}

fn data(stream: u32, body: &[u8], end_stream: bool) -> Vec<u8> {
    let end = if end_stream { flag::END_STREAM } else { 0 };
    frame(kind::DATA, end, stream, body)
}

fn get() -> Request {
    Request::new("GET", "http", "h:1", "/", &[], b"")
}

/// A started client (its own first bytes dropped) with `n` streams open, tagged 0..n.
fn opened(max: usize, n: u32, req: &Request) -> C {
    let mut c = C::new(max);
    c.start(&mut Vec::new());
    for tag in 0..n {
        c.open(req, tag, &mut Vec::new());
    }
    c
}

type Fed = Result<(Vec<u8>, Vec<Event<u32>>), H2Error>;

fn feed(c: &mut C, req: &Request, input: &[u8]) -> Fed {
    let (mut out, mut events) = (Vec::new(), Vec::new());
    c.recv(input, req, &mut out, &mut events)?;
    Ok((out, events))
}

/// The same input one byte at a time: framing must not depend on how reads split it.
fn feed_bytewise(c: &mut C, req: &Request, input: &[u8]) -> Fed {
    let (mut out, mut events) = (Vec::new(), Vec::new());
    for b in input {
        c.recv(std::slice::from_ref(b), req, &mut out, &mut events)?;
    }
    Ok((out, events))
}

fn settings_frame(values: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (id, v) in values {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    frame(kind::SETTINGS, 0, 0, &p)
}

fn window(stream: u32, inc: u32) -> Vec<u8> {
    frame(kind::WINDOW_UPDATE, 0, stream, &inc.to_be_bytes())
}

fn decode(block: &[u8]) -> Vec<(String, String)> {
    loona_hpack::Decoder::new()
        .decode(block)
        .expect("decodes")
        .into_iter()
        .map(|(n, v)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
        .collect()
}

/// The frames in `out`: (kind, flags, stream, payload length).
fn frames(mut out: &[u8]) -> Vec<(u8, u8, u32, usize)> {
    let mut v = Vec::new();
    while !out.is_empty() {
        let h = Head::parse(out);
        v.push((h.kind, h.flags, h.stream, h.len));
        out = &out[FRAME_HEAD + h.len..];
    }
    v
}

#[test]
fn start_is_preface_settings_and_a_connection_window() {
    // RFC 9113 §3.4: the preface, then SETTINGS; §6.9: the connection window only grows by
    // WINDOW_UPDATE.
    let mut out = Vec::new();
    C::new(1).start(&mut out);
    let mut want = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    want.extend_from_slice(&[0, 0, 12, 4, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[0, 2, 0, 0, 0, 0]); // ENABLE_PUSH 0
    want.extend_from_slice(&[0, 4, 0x01, 0, 0, 0]); // INITIAL_WINDOW_SIZE 16 MiB
    want.extend_from_slice(&[0, 0, 4, 8, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&((16u32 << 20) - 65_535).to_be_bytes());
    assert_eq!(out, want);
}

#[test]
fn request_blocks_are_literals_without_indexing_in_pseudo_header_order() {
    // RFC 7541 §6.1 / §6.2.2: whole static entries indexed, the rest literals without indexing
    // (the server's dynamic table untouched); RFC 9113 §8.3.1: pseudo-headers first.
    let r = get();
    assert_eq!(
        r.header_block(),
        [0x82, 0x86, 0x01, 3, b'h', b':', b'1', 0x84]
    );
    let headers = [
        ("Host".to_string(), "other:8".to_string()),
        ("X-Trace".to_string(), "a b".to_string()),
        ("Accept".to_string(), "*/*".to_string()),
    ];
    #[rustfmt::skip]
    let rows: Vec<(Request, Vec<(&str, &str)>)> = vec![
        (Request::new("GET", "http", "h:1", "/", &[], b""),
         vec![(":method", "GET"), (":scheme", "http"), (":authority", "h:1"), (":path", "/")]),
        (Request::new("POST", "https", "h", "/p?q=1", &headers, b"abc"),
         vec![(":method", "POST"), (":scheme", "https"), (":authority", "other:8"),
              (":path", "/p?q=1"), ("x-trace", "a b"), ("accept", "*/*"), ("content-length", "3")]),
        (Request::new("PATCH", "http", "h", "/x", &[], b""),
         vec![(":method", "PATCH"), (":scheme", "http"), (":authority", "h"), (":path", "/x")]),
    ];
    for (req, want) in rows {
        let got = decode(&req.header_block());
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        // Nothing entered the server's dynamic table: index 62, its first entry, is empty.
        let mut d = loona_hpack::Decoder::new();
        d.decode(&req.header_block()).unwrap();
        assert!(d.decode(&[0x80 | 62]).is_err());
    }
    // A body's length given by the user is not repeated.
    let own = [("Content-Length".to_string(), "3".to_string())];
    let r = Request::new("POST", "http", "h", "/", &own, b"abc");
    let names: Vec<String> = decode(&r.header_block()).into_iter().map(|f| f.0).collect();
    assert_eq!(names.iter().filter(|n| *n == "content-length").count(), 1);
}

#[test]
fn streams_get_odd_growing_ids_patched_into_precomputed_frames() {
    // RFC 9113 §5.1.1: client streams are odd and grow.
    let r = get();
    let mut c = C::new(8);
    c.start(&mut Vec::new());
    let mut out = Vec::new();
    for tag in 0..3 {
        c.open(&r, tag, &mut out);
    }
    let f = frames(&out);
    let flags = flag::END_HEADERS | flag::END_STREAM;
    assert_eq!(
        f,
        [
            (kind::HEADERS, flags, 1, 8),
            (kind::HEADERS, flags, 3, 8),
            (kind::HEADERS, flags, 5, 8)
        ]
    );
    assert_eq!((c.in_flight(), c.room(), c.oldest()), (3, 5, Some(&0)));
}

#[test]
fn a_long_header_block_continues_in_continuation_frames() {
    // RFC 9113 §6.10: HEADERS without END_HEADERS, then CONTINUATION on the same stream.
    let big = [("x-big".to_string(), "v".repeat(20_000))];
    let r = Request::new("GET", "http", "h", "/", &big, b"");
    let mut c = C::new(2);
    let mut out = Vec::new();
    c.open(&r, 0, &mut out);
    c.open(&r, 1, &mut out);
    let f = frames(&out);
    assert_eq!(f.len(), 4);
    assert_eq!(
        (f[0].0, f[0].1, f[0].2, f[0].3),
        (kind::HEADERS, flag::END_STREAM, 1, MAX_FRAME)
    );
    assert_eq!(
        (f[1].0, f[1].1, f[1].2),
        (kind::CONTINUATION, flag::END_HEADERS, 1)
    );
    assert_eq!(
        (f[2].0, f[2].2, f[3].0, f[3].2),
        (kind::HEADERS, 3, kind::CONTINUATION, 3)
    );
    assert_eq!(decode(&r.header_block())[4].1.len(), 20_000);
}

#[test]
fn a_response_completes_at_end_stream_however_the_bytes_are_split() {
    // RFC 9113 §8.1: HEADERS, DATA, END_STREAM; the status from the decoded block.
    let r = get();
    let mut input = status(1, "200", false);
    input.extend(data(1, b"hello", false));
    input.extend(data(1, b", world", true));
    input.extend(status(3, "404", true));
    let want = vec![
        Event::Response {
            tag: 0,
            status: 200,
            body: 12,
        },
        Event::Response {
            tag: 1,
            status: 404,
            body: 0,
        },
    ];
    for feeder in [feed, feed_bytewise] {
        let mut c = opened(8, 2, &r);
        let (out, events) = feeder(&mut c, &r, &input).unwrap();
        assert!(out.is_empty(), "nothing to answer");
        assert_eq!(events, want);
        assert_eq!((c.in_flight(), c.is_idle(), c.room()), (0, true, 8));
    }
}

#[test]
fn settings_are_acked_and_their_limits_honoured() {
    // RFC 9113 §6.5.3: SETTINGS are acknowledged; §5.1.2: MAX_CONCURRENT_STREAMS caps the
    // streams opened. Before the server's SETTINGS, at most 100 are assumed.
    let r = get();
    let mut c = C::new(200);
    c.start(&mut Vec::new());
    assert_eq!(c.room(), ASSUMED_MAX_STREAMS);
    let (out, _) = feed(
        &mut c,
        &r,
        &settings_frame(&[(setting::MAX_CONCURRENT_STREAMS, 2)]),
    )
    .unwrap();
    assert_eq!(out, frame(kind::SETTINGS, flag::ACK, 0, &[]));
    assert_eq!(c.room(), 2);
    let mut c = C::new(200);
    feed(&mut c, &r, &settings_frame(&[])).unwrap();
    assert_eq!(c.room(), 200, "a limit not named is no limit (§6.5.2)");
    // An ACK of our SETTINGS needs nothing.
    let (out, events) = feed(&mut c, &r, &frame(kind::SETTINGS, flag::ACK, 0, &[])).unwrap();
    assert!(out.is_empty() && events.is_empty());
}

#[test]
fn a_lowered_stream_limit_holds_new_streams_back() {
    let r = get();
    let mut c = opened(8, 4, &r);
    feed(
        &mut c,
        &r,
        &settings_frame(&[(setting::MAX_CONCURRENT_STREAMS, 3)]),
    )
    .unwrap();
    assert_eq!(c.room(), 0);
    feed(&mut c, &r, &status(1, "200", true)).unwrap();
    assert_eq!(c.room(), 0);
    feed(&mut c, &r, &status(3, "200", true)).unwrap();
    assert_eq!(c.room(), 1);
}

#[test]
fn ping_is_answered_with_its_payload() {
    // RFC 9113 §6.7.
    let r = get();
    let mut c = opened(1, 0, &r);
    let (out, _) = feed(&mut c, &r, &frame(kind::PING, 0, 0, b"12345678")).unwrap();
    assert_eq!(out, frame(kind::PING, flag::ACK, 0, b"12345678"));
    let (out, _) = feed(&mut c, &r, &frame(kind::PING, flag::ACK, 0, b"12345678")).unwrap();
    assert!(out.is_empty(), "an ACK is not answered");
}

#[test]
fn rst_stream_fails_its_request_only() {
    // RFC 9113 §6.4: the stream is closed; the connection goes on.
    let r = get();
    let mut c = opened(8, 2, &r);
    let (_, events) = feed(
        &mut c,
        &r,
        &frame(kind::RST_STREAM, 0, 3, &7u32.to_be_bytes()),
    )
    .unwrap();
    assert_eq!(events, [Event::Reset { tag: 1, code: 7 }]);
    assert_eq!((c.in_flight(), c.spent()), (1, false));
    let (_, events) = feed(&mut c, &r, &status(1, "200", true)).unwrap();
    assert_eq!(
        events,
        [Event::Response {
            tag: 0,
            status: 200,
            body: 0
        }]
    );
    // A reset of a stream already closed is ignored.
    assert!(
        feed(&mut c, &r, &frame(kind::RST_STREAM, 0, 1, &[0; 4]))
            .unwrap()
            .1
            .is_empty()
    );
}

#[test]
fn goaway_refuses_streams_above_its_last_id_and_stops_new_ones() {
    // RFC 9113 §6.8: streams above the last id were not processed; no new stream after it.
    let r = get();
    let mut c = opened(8, 3, &r);
    let mut p = 1u32.to_be_bytes().to_vec();
    p.extend_from_slice(&0u32.to_be_bytes());
    let (_, events) = feed(&mut c, &r, &frame(kind::GOAWAY, 0, 0, &p)).unwrap();
    assert_eq!(
        events,
        [Event::Refused { tag: 2 }, Event::Refused { tag: 1 }]
    );
    assert_eq!(
        (c.room(), c.spent(), c.in_flight(), c.is_idle()),
        (0, true, 1, false)
    );
    let (_, events) = feed(&mut c, &r, &status(1, "200", true)).unwrap();
    assert_eq!(
        events,
        [Event::Response {
            tag: 0,
            status: 200,
            body: 0
        }]
    );
    assert!(
        c.is_idle() && c.spent(),
        "idle and spent: time to reconnect"
    );
}

#[test]
fn every_header_block_goes_through_one_decoder() {
    // RFC 7541 §2.3.2: the server may index fields in its dynamic table and refer to them in
    // later blocks; RFC 9113 §4.3: one decoding context per connection.
    let r = get();
    let mut c = opened(8, 3, &r);
    // `:status: 203` with incremental indexing (name: static index 8) becomes entry 62.
    let mut first = vec![0x48, 3];
    first.extend_from_slice(b"203");
    let mut enc = loona_hpack::Encoder::new();
    let custom: Vec<(&[u8], &[u8])> = vec![(b"x-a", b"1")];
    first.extend(enc.encode(custom.clone())); // a new name: indexed by the encoder, entry 62
    let mut input = frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &first,
    );
    // Now 62 is x-a: 1 and 63 is :status: 203.
    let second = [0x80 | 63, 0x80 | 62];
    input.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        3,
        &second,
    ));
    let third = enc.encode(custom);
    assert_eq!(third, [0x80 | 62]);
    let mut tail = vec![0x80 | 63];
    tail.extend(third);
    input.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        5,
        &tail,
    ));
    let (_, events) = feed(&mut c, &r, &input).unwrap();
    let codes: Vec<u16> = events
        .iter()
        .map(|e| match e {
            Event::Response { status, .. } => *status,
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(codes, [203, 203, 203]);
}

#[test]
fn credit_is_given_back_at_half_the_window() {
    // RFC 9113 §6.9: WINDOW_UPDATE on the stream and the connection once half of each window
    // (16 MiB announced) is used; none for a stream the frame ends.
    let r = get();
    let mut c = opened(8, 1, &r);
    feed(&mut c, &r, &status(1, "200", false)).unwrap();
    let chunk = vec![7u8; MAX_FRAME];
    let half = (RECV_WINDOW / 2) as usize / MAX_FRAME;
    let mut out = Vec::new();
    for n in 1..=half {
        let (o, _) = feed(&mut c, &r, &data(1, &chunk, false)).unwrap();
        if n < half {
            assert!(
                o.is_empty(),
                "no update before half the window ({n} frames)"
            );
        }
        out = o;
    }
    let mut want = window(1, (RECV_WINDOW / 2) as u32);
    want.extend(window(0, (RECV_WINDOW / 2) as u32));
    assert_eq!(out, want);
    let (out, events) = feed(&mut c, &r, &data(1, b"end", true)).unwrap();
    assert!(out.is_empty());
    let body = (half * MAX_FRAME + 3) as u64;
    assert_eq!(
        events,
        [Event::Response {
            tag: 0,
            status: 200,
            body
        }]
    );
}

#[test]
fn data_beyond_the_window_is_a_flow_control_error() {
    // RFC 9113 §6.9.1: before `start` the connection window is the default 65,535.
    let r = get();
    let mut c = C::new(1);
    c.open(&r, 0, &mut Vec::new());
    feed(&mut c, &r, &status(1, "200", false)).unwrap();
    let chunk = vec![0u8; MAX_FRAME];
    for _ in 0..3 {
        feed(&mut c, &r, &data(1, &chunk, false)).unwrap();
    }
    assert_eq!(
        feed(&mut c, &r, &data(1, &chunk, false)),
        Err(H2Error::FlowControl)
    );
}

#[test]
fn a_request_body_waits_for_both_windows() {
    // RFC 9113 §6.9: DATA within the stream's and the connection's send windows (65,535 each
    // at first); §8.1: END_STREAM on the last DATA. A response before the body's end keeps the
    // stream open until the body is out.
    let body = vec![b'x'; 100_000];
    let r = Request::new("POST", "http", "h", "/", &[], &body);
    let mut c = C::new(4);
    let mut out = Vec::new();
    c.open(&r, 0, &mut out);
    let f = frames(&out);
    assert_eq!(f[0], (kind::HEADERS, flag::END_HEADERS, 1, f[0].3));
    let sizes: Vec<usize> = f[1..].iter().map(|x| x.3).collect();
    assert_eq!(sizes, [16_384, 16_384, 16_384, 16_383]);
    // The connection's window grows; the stream's is still spent.
    let (out, _) = feed(&mut c, &r, &window(0, 1 << 20)).unwrap();
    assert!(out.is_empty());
    // The answer comes early.
    let (_, events) = feed(&mut c, &r, &status(1, "413", true)).unwrap();
    assert_eq!(
        events,
        [Event::Response {
            tag: 0,
            status: 413,
            body: 0
        }]
    );
    assert_eq!((c.in_flight(), c.is_idle()), (0, false));
    let (out, _) = feed(&mut c, &r, &window(1, 1 << 20)).unwrap();
    let f = frames(&out);
    let sizes: Vec<usize> = f.iter().map(|x| x.3).collect();
    assert_eq!(sizes, [16_384, 16_384, 100_000 - 65_535 - 32_768]);
    assert!(f.iter().all(|x| x.0 == kind::DATA && x.2 == 1));
    assert_eq!(
        f.iter().map(|x| x.1).collect::<Vec<_>>(),
        [0, 0, flag::END_STREAM]
    );
    assert!(c.is_idle());
}

#[test]
fn initial_window_and_max_frame_settings_move_body_sending() {
    // RFC 9113 §6.9.2: INITIAL_WINDOW_SIZE moves open streams' windows by the difference;
    // §6.5.2: DATA may be as large as the server's MAX_FRAME_SIZE.
    let body = vec![b'y'; 100_000];
    let r = Request::new("POST", "http", "h", "/", &[], &body);
    let mut c = C::new(4);
    c.open(&r, 0, &mut Vec::new());
    let mut input = window(0, 1 << 20);
    input.extend(settings_frame(&[
        (setting::INITIAL_WINDOW_SIZE, 1 << 20),
        (setting::MAX_FRAME_SIZE, 40_000),
    ]));
    let (out, _) = feed(&mut c, &r, &input).unwrap();
    let f = frames(&out);
    assert_eq!(f[0], (kind::SETTINGS, flag::ACK, 0, 0));
    let sizes: Vec<usize> = f[1..].iter().map(|x| x.3).collect();
    assert_eq!(sizes, [34_465]);
    assert_eq!(f[1].1, flag::END_STREAM);
}

#[test]
fn when_stream_ids_run_out_the_connection_is_spent() {
    // RFC 9113 §5.1.1: ids cannot be reused; past 2^31 - 1 a new connection is needed.
    let r = get();
    let mut c = C::new(8);
    c.next_id = LAST_STREAM_ID - 2;
    assert_eq!(c.room(), 2);
    let mut out = Vec::new();
    c.open(&r, 0, &mut out);
    c.open(&r, 1, &mut out);
    assert_eq!(frames(&out)[1].2, LAST_STREAM_ID);
    assert_eq!((c.room(), c.spent()), (0, true));
    let mut input = status(LAST_STREAM_ID - 2, "200", true);
    input.extend(status(LAST_STREAM_ID, "200", true));
    assert_eq!(feed(&mut c, &r, &input).unwrap().1.len(), 2);
    assert!(c.is_idle());
    c.reset();
    assert_eq!((c.room(), c.spent(), c.next_id), (8, false, 1));
}

#[test]
fn interim_responses_trailers_padding_and_priority() {
    // RFC 9113 §8.1: 1xx heads before the final one, trailers with END_STREAM; §6.1/§6.2:
    // padding and the priority fields are stripped; §5.5: unknown frames are ignored.
    let r = get();
    let mut input = status(1, "103", false);
    input.extend(frame(0xfa, 0, 0, b"unknown"));
    input.extend(frame(kind::PRIORITY, 0, 1, &[0, 0, 0, 0, 16]));
    // HEADERS, padded (2 bytes) and with priority fields.
    let mut p = vec![2, 0, 0, 0, 0, 16];
    p.extend(block(&[(":status", "200")]));
    p.extend([0, 0]);
    input.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::PADDED | flag::PRIORITY,
        1,
        &p,
    ));
    input.extend(frame(
        kind::DATA,
        flag::PADDED,
        1,
        &[3, b'a', b'b', 0, 0, 0],
    ));
    input.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &block(&[("x-trailer", "t")]),
    ));
    // Stream 3: a header block split over CONTINUATION.
    let b = block(&[(":status", "204")]);
    input.extend(frame(kind::HEADERS, flag::END_STREAM, 3, &b[..2]));
    input.extend(frame(kind::CONTINUATION, flag::END_HEADERS, 3, &b[2..]));
    for feeder in [feed, feed_bytewise] {
        let mut c = opened(8, 2, &r);
        let (_, events) = feeder(&mut c, &r, &input).unwrap();
        assert_eq!(
            events,
            [
                Event::Response {
                    tag: 0,
                    status: 200,
                    body: 2
                },
                Event::Response {
                    tag: 1,
                    status: 204,
                    body: 0
                },
            ]
        );
    }
}

#[test]
fn protocol_violations_end_the_connection() {
    let r = get();
    let big = vec![0u8; MAX_FRAME + 1];
    let mut interrupted = frame(kind::HEADERS, 0, 1, &block(&[(":status", "200")]));
    interrupted.extend(data(3, b"x", false));
    let mut no_headers = Vec::new();
    no_headers.extend(data(1, b"x", false));
    #[rustfmt::skip]
    let rows: Vec<(&str, Vec<u8>, H2Error)> = vec![
        ("§4.2 frame over MAX_FRAME_SIZE", data(1, &big, false), H2Error::FrameSize(kind::DATA)),
        ("§6.1 DATA on stream 0", data(0, b"x", false), H2Error::Protocol("DATA on stream 0 (RFC 9113 §6.1)")),
        ("§8.1 DATA before HEADERS", no_headers, H2Error::Protocol("DATA before the response's HEADERS (RFC 9113 §8.1)")),
        ("§5.1 DATA on a stream never opened", [status(1, "200", false), data(9, b"x", false)].concat(),
         H2Error::Protocol("DATA on a stream that is not open (RFC 9113 §5.1)")),
        ("§6.6 PUSH_PROMISE after ENABLE_PUSH 0", frame(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2]),
         H2Error::Protocol("PUSH_PROMISE after SETTINGS_ENABLE_PUSH = 0 (RFC 9113 §6.6)")),
        ("RFC 7541 §2.3.3 index beyond the tables", frame(kind::HEADERS, flag::END_HEADERS, 1, &[0x80 | 70]),
         H2Error::Compression),
        ("§6.10 header block interrupted", interrupted,
         H2Error::Protocol("a header block is interrupted by another frame (RFC 9113 §6.10)")),
        ("§8.3.2 no :status", frame(kind::HEADERS, flag::END_HEADERS, 1, &block(&[("x", "y")])), H2Error::Status),
        ("§8.3.2 :status not three digits", status(1, "20", true), H2Error::Status),
        ("§6.5 SETTINGS of 5 bytes", frame(kind::SETTINGS, 0, 0, &[0; 5]), H2Error::FrameSize(kind::SETTINGS)),
        ("§6.7 PING of 7 bytes", frame(kind::PING, 0, 0, &[0; 7]), H2Error::FrameSize(kind::PING)),
        ("§6.9 WINDOW_UPDATE of 0", window(0, 0), H2Error::Protocol("WINDOW_UPDATE of 0 (RFC 9113 §6.9)")),
        ("§6.9.1 window past 2^31 - 1", window(0, 0x7fff_ffff), H2Error::FlowControl),
        ("§6.4 RST_STREAM on an idle stream", frame(kind::RST_STREAM, 0, 11, &[0; 4]),
         H2Error::Protocol("RST_STREAM on a stream never opened (RFC 9113 §6.4)")),
        ("§6.5.2 MAX_FRAME_SIZE too small", settings_frame(&[(setting::MAX_FRAME_SIZE, 100)]),
         H2Error::Protocol("SETTINGS_MAX_FRAME_SIZE out of range (RFC 9113 §6.5.2)")),
        ("§6.5.2 INITIAL_WINDOW_SIZE too large", settings_frame(&[(setting::INITIAL_WINDOW_SIZE, 1 << 31)]),
         H2Error::FlowControl),
        ("§6.8 GOAWAY of 4 bytes", frame(kind::GOAWAY, 0, 0, &[0; 4]), H2Error::FrameSize(kind::GOAWAY)),
    ];
    for (rule, input, want) in rows {
        for feeder in [feed, feed_bytewise] {
            let mut c = opened(8, 1, &r);
            assert_eq!(feeder(&mut c, &r, &input), Err(want), "{rule}");
        }
        assert!(!want.to_string().contains('\n'), "{rule}: one line");
    }
}

/// HttpArena's GetSum request (a=1, b=2) and answer (result 3), as length-prefixed messages.
const GET_SUM: &[u8] = &[0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02];
const SUM3: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x03];

fn grpc_call() -> Request {
    Request::new(
        "POST",
        "http",
        "h:1",
        "/benchmark.BenchmarkService/GetSum",
        &[
            ("content-type".into(), "application/grpc".into()),
            ("te".into(), "trailers".into()),
        ],
        GET_SUM,
    )
}

/// A `--grpc` client (expecting `body` where given) with `n` calls open, tagged 0..n.
fn grpc_opened(n: u32, body: Option<&[u8]>, req: &Request) -> C {
    let mut c = C::new(8).grpc(grpc::Expect {
        body: body.map(std::sync::Arc::from),
    });
    c.start(&mut Vec::new());
    for tag in 0..n {
        c.open(req, tag, &mut Vec::new());
    }
    c
}

/// One answer on `stream`: a head of `head`'s fields after `:status`, `body` as one DATA
/// frame, then trailers (None: a trailers-only answer, the head ending the stream).
fn answer(
    stream: u32,
    head: &[(&str, &str)],
    body: &[u8],
    trailers: Option<&[(&str, &str)]>,
) -> Vec<u8> {
    let end = if trailers.is_none() {
        flag::END_STREAM
    } else {
        0
    };
    let mut out = frame(kind::HEADERS, flag::END_HEADERS | end, stream, &block(head));
    if let Some(t) = trailers {
        if !body.is_empty() {
            out.extend(data(stream, body, false));
        }
        out.extend(frame(
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            stream,
            &block(t),
        ));
    }
    out
}

#[test]
fn grpc_answers_are_checked_from_head_data_and_trailers() {
    // gRPC over HTTP/2: Response → Response-Headers *Length-Prefixed-Message Trailers, or
    // Trailers-Only; the call succeeded only with grpc-status 0 (and here, the bytes expected).
    const OK_HEAD: &[(&str, &str)] = &[(":status", "200"), ("content-type", "application/grpc")];
    const OK: &[(&str, &str)] = &[("grpc-status", "0")];
    let rows: Vec<(Vec<u8>, Result<(), grpc::Fault>, u32)> = vec![
        (answer(1, OK_HEAD, SUM3, Some(OK)), Ok(()), 1),
        // The right status with the wrong bytes: h2load would count this as a success.
        (
            answer(1, OK_HEAD, &[0, 0, 0, 0, 2, 0x08, 0x04], Some(OK)),
            Err(grpc::Fault::Body),
            1,
        ),
        (
            answer(
                1,
                OK_HEAD,
                SUM3,
                Some(&[("grpc-status", "13"), ("grpc-message", "x")]),
            ),
            Err(grpc::Fault::GrpcStatus),
            1,
        ),
        // Trailers-only: UNIMPLEMENTED in the one header block.
        (
            answer(
                1,
                &[
                    (":status", "200"),
                    ("content-type", "application/grpc"),
                    ("grpc-status", "12"),
                ],
                &[],
                None,
            ),
            Err(grpc::Fault::GrpcStatus),
            0,
        ),
        (
            answer(1, OK_HEAD, SUM3, Some(&[])),
            Err(grpc::Fault::NoGrpcStatus),
            1,
        ),
        (
            answer(
                1,
                &[(":status", "200"), ("content-type", "text/plain")],
                SUM3,
                Some(OK),
            ),
            Err(grpc::Fault::ContentType),
            1,
        ),
        (
            answer(
                1,
                &[(":status", "503"), ("content-type", "application/grpc")],
                &[],
                Some(OK),
            ),
            Err(grpc::Fault::HttpStatus),
            0,
        ),
    ];
    let req = grpc_call();
    for (i, (input, verdict, messages)) in rows.into_iter().enumerate() {
        for feeder in [feed, feed_bytewise] {
            let mut c = grpc_opened(1, Some(SUM3), &req);
            let (_, events) = feeder(&mut c, &req, &input).unwrap();
            let status = if i == 6 { 503 } else { 200 };
            assert_eq!(
                events,
                [Event::Grpc {
                    tag: 0,
                    status,
                    verdict,
                    messages
                }],
                "row {i}"
            );
            assert!(c.is_idle(), "row {i}");
        }
    }
}

#[test]
fn grpc_data_is_read_across_frames_and_padding() {
    // Two messages in three DATA frames, one of them padded (RFC 9113 §6.1).
    let req = grpc_call();
    let two: Vec<u8> = [SUM3, SUM3].concat();
    let mut input = frame(
        kind::HEADERS,
        flag::END_HEADERS,
        1,
        &block(&[
            (":status", "200"),
            ("content-type", "application/grpc+proto"),
        ]),
    );
    input.extend(data(1, &two[..3], false));
    let mut padded = vec![2];
    padded.extend_from_slice(&two[3..10]);
    padded.extend([0, 0]);
    input.extend(frame(kind::DATA, flag::PADDED, 1, &padded));
    input.extend(data(1, &two[10..], false));
    input.extend(frame(
        kind::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &block(&[("grpc-status", "0")]),
    ));
    for feeder in [feed, feed_bytewise] {
        let mut c = grpc_opened(1, Some(&two), &req);
        let (_, events) = feeder(&mut c, &req, &input).unwrap();
        assert_eq!(
            events,
            [Event::Grpc {
                tag: 0,
                status: 200,
                verdict: Ok(()),
                messages: 2
            }]
        );
    }
}

#[test]
fn a_plain_client_reports_grpc_answers_as_responses() {
    // Without `grpc`, a gRPC error is just a 200 (what h2load counts): the check is opt-in.
    let req = grpc_call();
    let mut c = opened(8, 1, &req);
    let input = answer(
        1,
        &[(":status", "200"), ("content-type", "application/grpc")],
        SUM3,
        Some(&[("grpc-status", "13")]),
    );
    let (_, events) = feed(&mut c, &req, &input).unwrap();
    assert_eq!(
        events,
        [Event::Response {
            tag: 0,
            status: 200,
            body: SUM3.len() as u64
        }]
    );
}
