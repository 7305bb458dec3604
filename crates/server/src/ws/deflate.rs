//! Server messages as frames, compressed where permessage-deflate was agreed (RFC 7692).
//!
//! The server keeps no context between its messages (it always answers
//! `server_no_context_takeover`), so a compressor holds nothing of a connection once a
//! message is out: each thread keeps one per window size it was asked for, made on first
//! use and reset after each message. A connection pays nothing for the server's side; a
//! thread that compresses pays ~371 KiB per window size used (zlib-rs's state for 15 bits;
//! 245 KiB for 9), and a client asks for one of seven sizes at most. The same holds for any
//! thread that sends through a [`WsSender`](crate::websocket::WsSender).
#![forbid(unsafe_code)]

use std::cell::RefCell;

use linerate_ws::deflate::Deflate;
use linerate_ws::frame::{self, Opcode};

/// Messages shorter than this go out uncompressed: without context takeover each message
/// starts from an empty window, so a short one shrinks by a few bytes at best, for a
/// compressor reset (~3 µs: zlib-rs clears its 128 KiB hash table) and the compression.
pub const MIN_DEFLATE_BYTES: usize = 128;

thread_local! {
    /// This thread's compressors, by window bits (9 to 15).
    static DEFLATERS: RefCell<[Option<Deflate>; 7]> = const { RefCell::new([const { None }; 7]) };
}

/// Appends one whole message as a single server frame: compressed (RSV1 set, RFC 7692 §6)
/// when the connection agreed to it (`bits`: the compressor's window), the payload is at
/// least [`MIN_DEFLATE_BYTES`] and the compressed form is smaller; as it is otherwise (any
/// message may go uncompressed).
pub(crate) fn write_message(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8], bits: Option<u8>) {
    if let Some(bits) = bits
        && payload.len() >= MIN_DEFLATE_BYTES
        && compressed(out, opcode, payload, bits)
    {
        return;
    }
    frame::write_head(out, true, false, opcode, payload.len());
    out.extend_from_slice(payload);
}

/// Appends `payload` compressed as one frame; `false` (and `out` as it was) when the
/// compressed form is no smaller.
fn compressed(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8], bits: u8) -> bool {
    let start = out.len();
    // Room for the plain payload's header: the compressed form, smaller, needs no more.
    let room = head_len(payload.len());
    out.resize(start + room, 0);
    DEFLATERS.with_borrow_mut(|d| {
        d[usize::from(bits - 9)]
            .get_or_insert_with(|| Deflate::new(bits))
            .message(payload, out);
    });
    let len = out.len() - start - room;
    if len >= payload.len() {
        out.truncate(start);
        return false;
    }
    let mut head = Vec::with_capacity(10);
    frame::write_head(&mut head, true, true, opcode, len);
    out.splice(start..start + room, head);
    true
}

/// The length of a server frame's header for a payload of `len` bytes (RFC 6455 §5.2).
fn head_len(len: usize) -> usize {
    match len {
        0..126 => 2,
        126..=0xFFFF => 4,
        _ => 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_ws::deflate::Inflate;

    /// A frame read back: (first byte, payload).
    fn read(frame: &[u8]) -> (u8, &[u8]) {
        let (len, at) = match frame[1] {
            126 => (usize::from(u16::from_be_bytes([frame[2], frame[3]])), 4),
            127 => (
                u64::from_be_bytes(frame[2..10].try_into().unwrap()) as usize,
                10,
            ),
            n => (usize::from(n), 2),
        };
        assert_eq!(frame.len(), at + len, "one whole frame");
        (frame[0], &frame[at..])
    }

    fn inflate(payload: &[u8]) -> Vec<u8> {
        let mut z = Inflate::new();
        let mut out = Vec::new();
        z.piece(payload, &mut out, 1 << 24).unwrap();
        z.finish(&mut out, 1 << 24).unwrap();
        out
    }

    #[test]
    fn compressed_where_agreed_and_worth_it() {
        let json = br#"{"user":"someone","text":"hello there","room":"lobby"}"#.repeat(50);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 56) as u8
            })
            .collect();
        for (name, payload, bits, want_rsv1) in [
            ("agreed, 2,600 bytes of JSON", &json[..], Some(15), true),
            ("a smaller window", &json[..], Some(9), true),
            ("not agreed", &json[..], None, false),
            ("short", &json[..MIN_DEFLATE_BYTES - 1], Some(15), false),
            ("incompressible", &noise[..], Some(15), false),
        ] {
            let mut out = b"before".to_vec();
            write_message(&mut out, Opcode::Text, payload, bits);
            assert_eq!(&out[..6], b"before", "{name}");
            let (b0, body) = read(&out[6..]);
            assert_eq!(b0 & 0x40 != 0, want_rsv1, "{name}");
            assert_eq!(b0 & 0x8F, 0x81, "{name}: FIN, text");
            if want_rsv1 {
                assert!(body.len() < payload.len() / 5, "{name}: {}", body.len());
                assert_eq!(inflate(body), payload, "{name}");
            } else {
                assert_eq!(body, payload, "{name}");
            }
        }
    }

    /// The compressed frame's header is shorter than the plain payload's would be: the
    /// gap left for it is closed.
    #[test]
    fn the_header_shrinks_with_the_payload() {
        for len in [200usize, 70_000] {
            let payload = vec![b'a'; len];
            let mut out = Vec::new();
            write_message(&mut out, Opcode::Binary, &payload, Some(15));
            let (b0, body) = read(&out);
            assert_eq!(b0, 0xC2);
            assert!(body.len() < 126, "{len}: {}", body.len());
            assert_eq!(inflate(body), payload);
        }
    }
}
