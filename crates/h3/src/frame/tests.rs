//! Frame reader byte tables: bytes in, frames or a connection error out, each input also fed a
//! byte at a time and in two pieces at every split, with the same result.

use super::*;

#[derive(Debug, PartialEq, Eq)]
enum Ev {
    /// DATA pieces joined.
    Data(Vec<u8>),
    Headers(Vec<u8>),
    TooLarge(u64),
    Set(Settings),
    Goaway(u64),
    MaxPushId(u64),
    CancelPush(u64),
    Error(Code),
}

/// Reads `pieces` in order; the events, and whether the reader ended between frames.
fn run(role: Role, limit: usize, pieces: &[&[u8]]) -> (Vec<Ev>, bool) {
    let mut r = FrameReader::new(role, limit);
    let mut evs = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        while !input.is_empty() {
            let (used, frame) = match r.read(input) {
                Ok(x) => x,
                Err(code) => {
                    evs.push(Ev::Error(code));
                    return (evs, false);
                }
            };
            let ev = frame.map(|f| match f {
                Frame::Data(d) => Ev::Data(d.to_vec()),
                Frame::Headers(h) => Ev::Headers(h.to_vec()),
                Frame::HeadersTooLarge(n) => Ev::TooLarge(n),
                Frame::Settings(s) => Ev::Set(s),
                Frame::Goaway(id) => Ev::Goaway(id),
                Frame::MaxPushId(id) => Ev::MaxPushId(id),
                Frame::CancelPush(id) => Ev::CancelPush(id),
            });
            match (ev, evs.last_mut()) {
                (Some(Ev::Data(d)), Some(Ev::Data(prev))) => prev.extend_from_slice(&d),
                (Some(ev), _) => evs.push(ev),
                (None, _) => {}
            }
            assert!(used > 0, "a read of non-empty input uses bytes");
            input = &input[used..];
        }
    }
    (evs, r.at_boundary())
}

/// Runs `bytes` whole, a byte at a time, and split at every point: one answer.
fn check(role: Role, limit: usize, bytes: &[u8]) -> (Vec<Ev>, bool) {
    let whole = run(role, limit, &[bytes]);
    let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
    assert_eq!(
        run(role, limit, &bytewise),
        whole,
        "a byte at a time: {bytes:x?}"
    );
    for cut in 1..bytes.len() {
        let split = run(role, limit, &[&bytes[..cut], &bytes[cut..]]);
        assert_eq!(split, whole, "split at {cut}: {bytes:x?}");
    }
    whole
}

fn settings(pairs: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    write_settings(&mut out, pairs);
    out
}

#[test]
fn request_streams() {
    use Ev::*;
    let h = |p: &[u8]| {
        let mut out = Vec::new();
        write_head(&mut out, kind::HEADERS, p.len() as u64);
        out.extend_from_slice(p);
        out
    };
    let d = |p: &[u8]| {
        let mut out = Vec::new();
        write_head(&mut out, kind::DATA, p.len() as u64);
        out.extend_from_slice(p);
        out
    };
    let cat = |parts: &[Vec<u8>]| parts.concat();
    let grease = [0x21, 0x03, 1, 2, 3]; // a reserved type with a payload: skipped
    let unknown_long = [0x7f, 0xff, 0x01, 9]; // type 16383, one byte
    let cases: Vec<(&str, Vec<u8>, Vec<Ev>, bool)> = vec![
        (
            "headers only",
            h(b"\0\0\xd1"),
            vec![Headers(b"\0\0\xd1".to_vec())],
            true,
        ),
        (
            "headers, data, trailers",
            cat(&[h(b"ab"), d(b"hello"), d(b""), d(b" world"), h(b"t")]),
            vec![
                Headers(b"ab".to_vec()),
                Data(b"hello world".to_vec()),
                Headers(b"t".to_vec()),
            ],
            true,
        ),
        (
            "grease and unknown frames anywhere, even after trailers",
            cat(&[
                grease.to_vec(),
                h(b"a"),
                unknown_long.to_vec(),
                d(b"x"),
                h(b"t"),
                grease.to_vec(),
            ]),
            vec![
                Headers(b"a".to_vec()),
                Data(b"x".to_vec()),
                Headers(b"t".to_vec()),
            ],
            true,
        ),
        ("an empty HEADERS", h(b""), vec![Headers(vec![])], true),
        (
            "cut inside a payload",
            h(b"abc")[..3].to_vec(),
            vec![],
            false,
        ),
        ("cut inside a head", vec![0x01, 0x40], vec![], false),
        (
            "DATA first",
            d(b"x"),
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "DATA after trailers",
            cat(&[h(b"a"), h(b"t"), d(b"x")]),
            vec![
                Headers(b"a".to_vec()),
                Headers(b"t".to_vec()),
                Error(Code::FrameUnexpected),
            ],
            false,
        ),
        (
            "HEADERS after trailers",
            cat(&[h(b"a"), h(b"t"), h(b"u")]),
            vec![
                Headers(b"a".to_vec()),
                Headers(b"t".to_vec()),
                Error(Code::FrameUnexpected),
            ],
            false,
        ),
        (
            "SETTINGS on a request stream",
            settings(&[]),
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "GOAWAY on a request stream",
            vec![0x07, 0x01, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "PUSH_PROMISE from a client",
            vec![0x05, 0x01, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "HTTP/2 PRIORITY",
            vec![0x02, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "HTTP/2 PING",
            vec![0x06, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "HTTP/2 WINDOW_UPDATE",
            vec![0x08, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "HTTP/2 CONTINUATION",
            vec![0x09, 0x00],
            vec![Error(Code::FrameUnexpected)],
            false,
        ),
        (
            "HEADERS over the limit: skipped whole, then the stream goes on",
            cat(&[h(&[7; 17]), d(b"x")]),
            vec![TooLarge(17), Data(b"x".to_vec())],
            true,
        ),
        (
            "a DATA frame's length in eight bytes",
            cat(&[h(b"a"), vec![0x00, 0xc0, 0, 0, 0, 0, 0, 0, 2, b'o', b'k']]),
            vec![Headers(b"a".to_vec()), Data(b"ok".to_vec())],
            true,
        ),
    ];
    for (what, bytes, want, boundary) in cases {
        assert_eq!(check(Role::Request, 16, &bytes), (want, boundary), "{what}");
    }
}

#[test]
fn control_streams() {
    use Ev::*;
    let s = settings(&[
        (setting::QPACK_MAX_TABLE_CAPACITY, 4096),
        (setting::QPACK_BLOCKED_STREAMS, 16),
        (setting::MAX_FIELD_SECTION_SIZE, 65536),
        (setting::ENABLE_CONNECT_PROTOCOL, 1),
        (0x21 + 0x1f * 7, 12345), // grease: ignored
    ]);
    let want = Settings {
        qpack_max_table_capacity: 4096,
        qpack_blocked_streams: 16,
        max_field_section_size: Some(65536),
        enable_connect_protocol: true,
        h3_datagram: false,
    };
    let cat = |parts: &[&[u8]]| parts.concat();
    let cases: Vec<(&str, Vec<u8>, Vec<Ev>)> = vec![
        ("SETTINGS", s.clone(), vec![Set(want)]),
        (
            "empty SETTINGS",
            settings(&[]),
            vec![Set(Default::default())],
        ),
        (
            "then GOAWAY, MAX_PUSH_ID, CANCEL_PUSH and grease",
            cat(&[
                &s,
                &[0x07, 0x01, 0x04],
                &[0x0d, 0x02, 0x40, 0x64],
                &[0x03, 0x01, 0x00],
                &[0x21, 0x00],
            ]),
            vec![Set(want), Goaway(4), MaxPushId(100), CancelPush(0)],
        ),
        (
            "GOAWAY first",
            vec![0x07, 0x01, 0x04],
            vec![Error(Code::MissingSettings)],
        ),
        (
            "grease first",
            vec![0x21, 0x00],
            vec![Error(Code::MissingSettings)],
        ),
        (
            "SETTINGS twice",
            cat(&[&s, &s]),
            vec![Set(want), Error(Code::FrameUnexpected)],
        ),
        (
            "DATA",
            cat(&[&s, &[0x00, 0x00]]),
            vec![Set(want), Error(Code::FrameUnexpected)],
        ),
        (
            "HEADERS",
            cat(&[&s, &[0x01, 0x00]]),
            vec![Set(want), Error(Code::FrameUnexpected)],
        ),
        (
            "HTTP/2 PING",
            cat(&[&s, &[0x06, 0x00]]),
            vec![Set(want), Error(Code::FrameUnexpected)],
        ),
        (
            "GOAWAY with a byte too many",
            cat(&[&s, &[0x07, 0x02, 0x04, 0x00]]),
            vec![Set(want), Error(Code::FrameError)],
        ),
        (
            "GOAWAY with its id cut",
            cat(&[&s, &[0x07, 0x01, 0x40]]),
            vec![Set(want), Error(Code::FrameError)],
        ),
        (
            "empty GOAWAY",
            cat(&[&s, &[0x07, 0x00]]),
            vec![Set(want), Error(Code::FrameError)],
        ),
        (
            "a control frame over the limit",
            cat(&[&s, &[0x07, 0x50, 0x01]]),
            vec![Set(want), Error(Code::ExcessiveLoad)],
        ),
        (
            "a repeated setting",
            settings(&[(6, 1), (6, 1)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "a repeated unknown setting",
            settings(&[(0x40, 1), (0x40, 2)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "HTTP/2's ENABLE_PUSH",
            settings(&[(0x02, 0)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "HTTP/2's MAX_CONCURRENT_STREAMS",
            settings(&[(0x03, 9)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "HTTP/2's INITIAL_WINDOW_SIZE",
            settings(&[(0x04, 9)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "HTTP/2's MAX_FRAME_SIZE",
            settings(&[(0x05, 9)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "ENABLE_CONNECT_PROTOCOL 2",
            settings(&[(0x08, 2)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "H3_DATAGRAM 2",
            settings(&[(0x33, 2)]),
            vec![Error(Code::SettingsError)],
        ),
        (
            "a setting without its value",
            vec![0x04, 0x01, 0x06],
            vec![Error(Code::FrameError)],
        ),
    ];
    for (what, bytes, want) in cases {
        assert_eq!(check(Role::Control, 16, &bytes).0, want, "{what}");
    }
}

#[test]
fn reserved_types() {
    assert!(is_reserved(0x21));
    assert!(is_reserved(0x21 + 0x1f));
    assert!(is_reserved(0x21 + 0x1f * 1000));
    assert!(!is_reserved(0x20));
    assert!(!is_reserved(0x22));
    assert!(!is_reserved(0x00));
}

#[test]
fn writers() {
    let mut out = Vec::new();
    write_goaway(&mut out, 8);
    assert_eq!(out, [0x07, 0x01, 0x08]);
    out.clear();
    write_settings(
        &mut out,
        &[
            (setting::QPACK_MAX_TABLE_CAPACITY, 4096),
            (setting::QPACK_BLOCKED_STREAMS, 0),
        ],
    );
    assert_eq!(out, [0x04, 0x05, 0x01, 0x50, 0x00, 0x07, 0x00]);
    out.clear();
    write_head(&mut out, kind::DATA, 16_384);
    assert_eq!(out, [0x00, 0x80, 0x00, 0x40, 0x00]);
}

/// Seeded random streams of bytes (small values, so frame types and lengths mean something):
/// on both roles, the same frames and verdict whole, byte by byte and at every split.
#[test]
fn random_inputs_read_the_same_in_any_split() {
    let mut seed = 0x9114_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let len = (next() % 24) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| match next() % 4 {
                0 => (next() % 10) as u8,
                1 => 0x21,
                2 => (next() % 4) as u8 | 0x40,
                _ => next() as u8,
            })
            .collect();
        check(Role::Request, 8, &bytes);
        check(Role::Control, 8, &bytes);
    }
}

/// A frame read whole (HEADERS, SETTINGS, GOAWAY) that arrives whole comes out of the read
/// that brings its head, read in place: the bytes used are the whole frame, and the reader
/// is between frames after it. One that arrives cut is held and comes out of the read that
/// completes it.
#[test]
fn a_whole_frame_in_one_read_is_read_in_place() {
    let mut out = Vec::new();
    write_head(&mut out, kind::HEADERS, 3);
    out.extend_from_slice(b"abc");
    out.extend_from_slice(&[0x00, 0x01, b'z']); // DATA "z" after it
    let mut r = FrameReader::new(Role::Request, 64);
    assert_eq!(r.read(&out), Ok((5, Some(Frame::Headers(b"abc")))));
    assert!(r.at_boundary());
    assert_eq!(r.read(&out[5..]), Ok((2, None)));
    assert_eq!(r.read(&out[7..]), Ok((1, Some(Frame::Data(b"z")))));

    let mut r = FrameReader::new(Role::Request, 64);
    assert_eq!(r.read(&out[..4]), Ok((2, None)));
    assert_eq!(r.read(&out[2..4]), Ok((2, None)));
    assert_eq!(r.read(&out[4..]), Ok((1, Some(Frame::Headers(b"abc")))));

    let mut r = FrameReader::new(Role::Control, 0);
    let mut c = settings(&[(setting::QPACK_BLOCKED_STREAMS, 0)]);
    write_goaway(&mut c, 8);
    let (used, f) = r.read(&c).unwrap();
    assert_eq!((used, f), (4, Some(Frame::Settings(Settings::default()))));
    assert_eq!(r.read(&c[4..]), Ok((3, Some(Frame::Goaway(8)))));
}
