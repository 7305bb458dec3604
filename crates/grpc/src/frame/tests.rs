//! Byte tables for the framing (PROTOCOL-HTTP2.md "Length-Prefixed-Message"), each stream
//! also fed at every split point, in every pair of split points and a byte at a time.

use super::*;

/// The messages (compressed flag, bytes) a decoder gave, and its verdict at the body's end.
type Outcome = (Vec<(bool, Vec<u8>)>, Result<(), FrameError>);

/// Everything a decoder gives for `pieces`, then its verdict at the end of the body.
fn run(pieces: &[&[u8]], max: usize, compression: bool) -> Outcome {
    let mut d = Decoder::new(max, compression);
    let mut got = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        loop {
            match d.next(&mut input) {
                Ok(Some(m)) => got.push((m.compressed, m.data.to_vec())),
                Ok(None) => {
                    assert!(input.is_empty(), "None with input left");
                    break;
                }
                Err(e) => return (got, Err(e)),
            }
        }
    }
    let end = d.finish();
    (got, end)
}

/// Feeds `stream` whole, at every split point, at every pair of split points and a byte at
/// a time, and checks that every way gives the same messages and verdict.
fn every_split(stream: &[u8], max: usize, compression: bool) -> Outcome {
    let whole = run(&[stream], max, compression);
    for i in 0..=stream.len() {
        let (a, b) = stream.split_at(i);
        assert_eq!(run(&[a, b], max, compression), whole, "split at {i}");
        for j in i..=stream.len() {
            let (b, c) = stream[i..].split_at(j - i);
            assert_eq!(
                run(&[a, b, c], max, compression),
                whole,
                "split at {i} and {j}"
            );
        }
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(run(&bytes, max, compression), whole, "byte by byte");
    whole
}

#[test]
fn messages_in_any_split() {
    // Length-Prefixed-Message → Compressed-Flag Message-Length Message; Compressed-Flag → 0 /
    // 1 ; Message-Length → {length of Message} # encoded as 4 byte unsigned integer (big
    // endian). An empty message is a prefix alone.
    let stream = [
        &[0, 0, 0, 0, 3, b'a', b'b', b'c'][..],
        &[0, 0, 0, 0, 0],
        &[1, 0, 0, 0, 2, 0x1f, 0x8b],
        &[0, 0, 0, 1, 0],
    ]
    .concat();
    let mut stream = stream;
    stream.extend(std::iter::repeat_n(b'z', 256));
    let (got, end) = every_split(&stream, 1024, true);
    assert_eq!(end, Ok(()));
    assert_eq!(
        got,
        [
            (false, b"abc".to_vec()),
            (false, Vec::new()),
            (true, vec![0x1f, 0x8b]),
            (false, vec![b'z'; 256]),
        ]
    );
}

#[test]
fn errors_in_any_split() {
    // Each row: a body, the limit, whether the call has a grpc-encoding, the messages before
    // the failure and the failure.
    type Row = (&'static [u8], usize, bool, usize, FrameError);
    let table: &[Row] = &[
        // A prefix over the limit is refused on the prefix alone (grpc-go: RESOURCE_EXHAUSTED).
        (
            &[0, 0, 0, 0, 5, 1, 2, 3, 4, 5],
            4,
            false,
            0,
            FrameError::TooLarge { len: 5, max: 4 },
        ),
        (
            &[0, 0xff, 0xff, 0xff, 0xff],
            4 << 20,
            false,
            0,
            FrameError::TooLarge {
                len: u32::MAX,
                max: 4 << 20,
            },
        ),
        (
            &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0],
            255,
            false,
            1,
            FrameError::TooLarge { len: 256, max: 255 },
        ),
        // "If the Message-Encoding header is omitted then the Compressed-Flag must be 0."
        (
            &[1, 0, 0, 0, 1, 7],
            16,
            false,
            0,
            FrameError::CompressedWithoutEncoding,
        ),
        // Compressed-Flag → 0 / 1: nothing else (grpc-go: "unexpected payload format").
        (&[2, 0, 0, 0, 0], 16, true, 0, FrameError::BadFlag(2)),
        // A request has no trailer frame: 0x80 is gRPC-Web's, in answers only.
        (&[0x80, 0, 0, 0, 0], 16, true, 0, FrameError::BadFlag(0x80)),
        (
            &[0, 0, 0, 0, 1, 9, 0xff, 0, 0, 0, 0],
            16,
            true,
            1,
            FrameError::BadFlag(0xff),
        ),
        // The body ends inside a prefix or a message (grpc-go: io.ErrUnexpectedEOF →
        // INTERNAL).
        (&[0], 16, false, 0, FrameError::Truncated),
        (&[0, 0, 0, 0], 16, false, 0, FrameError::Truncated),
        (&[0, 0, 0, 0, 1], 16, false, 0, FrameError::Truncated),
        (&[0, 0, 0, 0, 3, 1, 2], 16, false, 0, FrameError::Truncated),
        (
            &[0, 0, 0, 0, 1, 1, 0, 0],
            16,
            false,
            1,
            FrameError::Truncated,
        ),
    ];
    for &(stream, max, compression, before, err) in table {
        let (got, end) = every_split(stream, max, compression);
        assert_eq!((got.len(), end), (before, Err(err)), "{stream:?}");
    }
    let codes = [
        (
            FrameError::TooLarge { len: 1, max: 0 },
            Code::ResourceExhausted,
        ),
        (FrameError::CompressedWithoutEncoding, Code::Internal),
        (FrameError::BadFlag(2), Code::Internal),
        (FrameError::Truncated, Code::Internal),
    ];
    for (e, code) in codes {
        assert_eq!(e.code(), code, "{e}");
    }
}

#[test]
fn a_message_whole_in_its_piece_is_borrowed() {
    let body = [0, 0, 0, 0, 2, 8, 1, 0, 0, 0, 0, 1, 7];
    let mut d = Decoder::new(16, false);
    let mut input = &body[..];
    let m = d.next(&mut input).unwrap().unwrap();
    assert_eq!(m.data, [8, 1]);
    assert!(std::ptr::eq(m.data.as_ptr(), body[5..].as_ptr()), "copied");
    let m = d.next(&mut input).unwrap().unwrap();
    assert!(std::ptr::eq(m.data.as_ptr(), body[12..].as_ptr()), "copied");
    assert!(input.is_empty() && d.is_idle());
    assert_eq!(d.held.capacity(), 0);
}

#[test]
fn a_large_announced_length_reserves_nothing() {
    // 5 bytes announcing the limit must not make the decoder reserve the limit.
    let mut d = Decoder::new(DEFAULT_MAX_MESSAGE, false);
    let mut input = &[0u8, 0, 0x40, 0, 0, 1, 2, 3][..];
    assert_eq!(d.next(&mut input), Ok(None));
    assert!(d.held.capacity() < 1024, "{}", d.held.capacity());
    assert_eq!(d.finish(), Err(FrameError::Truncated));
}

#[test]
fn encoders_write_the_prefix() {
    let mut out = vec![0xAA];
    encode_raw(b"hi", false, &mut out);
    encode_raw(b"", true, &mut out);
    assert_eq!(out, [0xAA, 0, 0, 0, 0, 2, b'h', b'i', 1, 0, 0, 0, 0]);
    // The message is encoded straight after the prefix, whose length is patched.
    let mut out = vec![0xBB];
    let req = crate::proto::benchmark::SumRequest { a: 1, b: 2 };
    assert_eq!(encode(&req, &mut out), 4);
    assert_eq!(out, [0xBB, 0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02]);
}

#[test]
fn httparena_get_sum_frames() {
    use prost::Message as _;
    // HttpArena's prebuilt GetSum request (a = 1, b = 2) and its 7-byte answer.
    let request = [0x00, 0x00, 0x00, 0x00, 0x04, 0x08, 0x01, 0x10, 0x02];
    let mut d = Decoder::new(DEFAULT_MAX_MESSAGE, false);
    let mut input = &request[..];
    let m = d.next(&mut input).unwrap().unwrap();
    assert!(!m.compressed);
    let sum = crate::proto::benchmark::SumRequest::decode(m.data).unwrap();
    assert_eq!((sum.a, sum.b), (1, 2));
    assert_eq!(d.finish(), Ok(()));
    let mut out = Vec::new();
    encode(
        &crate::proto::benchmark::SumReply {
            result: sum.a + sum.b,
        },
        &mut out,
    );
    assert_eq!(out, [0, 0, 0, 0, 2, 0x08, 0x03]);
}

#[test]
fn web_answer_flags() {
    // PROTOCOL-WEB.md: "10000000b: an uncompressed trailer", "10000001b: a compressed
    // trailer"; other bits stay refused.
    type Row = (u8, bool, Result<(bool, bool), FrameError>);
    let table: &[Row] = &[
        (0x00, false, Ok((false, false))),
        (0x80, false, Ok((false, true))),
        (0x81, true, Ok((true, true))),
        (0x81, false, Err(FrameError::CompressedWithoutEncoding)),
        (0x82, true, Err(FrameError::BadFlag(0x82))),
        (0x40, true, Err(FrameError::BadFlag(0x40))),
    ];
    for &(flag, compression, want) in table {
        let body = [flag, 0, 0, 0, 1, b'k'];
        let mut d = Decoder::web_answer(16, compression);
        let mut input = &body[..];
        let got = d.next(&mut input).map(|m| {
            let m = m.unwrap();
            (m.compressed, m.trailers)
        });
        assert_eq!(got, want, "{flag:#x}");
    }
}
