//! WebSocket frame headers (RFC 6455 §5.2): reading a client's, strictly, and writing the
//! server's. A client's frame must be masked; a control frame must be whole and at most 125
//! bytes; reserved bits and opcodes are refused unless an extension defines them. Reading
//! never consumes a partial header: it answers how much more it needs.
#![forbid(unsafe_code)]

use crate::Error as WsError;

/// A frame's opcode (RFC 6455 §5.2, §11.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn from_bits(bits: u8) -> Option<Opcode> {
        Some(match bits {
            0x0 => Opcode::Continuation,
            0x1 => Opcode::Text,
            0x2 => Opcode::Binary,
            0x8 => Opcode::Close,
            0x9 => Opcode::Ping,
            0xA => Opcode::Pong,
            _ => return None,
        })
    }

    pub fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0x0,
            Opcode::Text => 0x1,
            Opcode::Binary => 0x2,
            Opcode::Close => 0x8,
            Opcode::Ping => 0x9,
            Opcode::Pong => 0xA,
        }
    }

    /// Close, ping and pong (opcodes 0x8–0xF).
    pub fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// A client frame's header, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    pub fin: bool,
    /// RSV1: the message is compressed (permessage-deflate, RFC 7692 §6), allowed only
    /// where [`read_head`]'s caller said so.
    pub rsv1: bool,
    pub opcode: Opcode,
    pub mask: [u8; 4],
    pub len: u64,
    /// The header's own length (2 to 14 bytes).
    pub size: usize,
}

/// The largest payload a control frame may carry (RFC 6455 §5.5).
pub const MAX_CONTROL_PAYLOAD: u64 = 125;

/// Reads a client frame's header from the start of `buf`: `Ok(None)` while it is not all
/// in. `rsv1_ok`: the connection negotiated an extension that defines RSV1.
/// `max_frame`: the largest payload taken ([`WsError::TooBig`] above it).
pub fn read_head(buf: &[u8], rsv1_ok: bool, max_frame: u64) -> Result<Option<FrameHead>, WsError> {
    let [b0, b1, ..] = *buf else {
        return Ok(None);
    };
    let fin = b0 & 0x80 != 0;
    let rsv1 = b0 & 0x40 != 0;
    // RFC 6455 §5.2: a reserved bit no extension defines fails the connection.
    if b0 & 0x30 != 0 || (rsv1 && !rsv1_ok) {
        return Err(WsError::Protocol("reserved bit set"));
    }
    let opcode = Opcode::from_bits(b0 & 0x0F).ok_or(WsError::Protocol("reserved opcode"))?;
    // RFC 6455 §5.1: a server closes the connection on an unmasked client frame.
    if b1 & 0x80 == 0 {
        return Err(WsError::Protocol("client frame not masked"));
    }
    let short = u64::from(b1 & 0x7F);
    let (len, at) = match short {
        126 => {
            let Some(b) = buf.get(2..4) else {
                return Ok(None);
            };
            (u64::from(u16::from_be_bytes([b[0], b[1]])), 4)
        }
        127 => {
            let Some(b) = buf.get(2..10) else {
                return Ok(None);
            };
            let len = u64::from_be_bytes(b.try_into().expect("eight bytes"));
            // RFC 6455 §5.2: the most significant bit MUST be 0.
            if len >> 63 != 0 {
                return Err(WsError::Protocol("frame length has its top bit set"));
            }
            (len, 10)
        }
        n => (n, 2),
    };
    if opcode.is_control() {
        // RFC 6455 §5.5: control frames are never fragmented and carry at most 125 bytes.
        if !fin {
            return Err(WsError::Protocol("fragmented control frame"));
        }
        if len > MAX_CONTROL_PAYLOAD {
            return Err(WsError::Protocol("control frame over 125 bytes"));
        }
        if rsv1 {
            // RFC 7692 §6: RSV1 marks data messages only.
            return Err(WsError::Protocol("compressed control frame"));
        }
    }
    if len > max_frame {
        return Err(WsError::TooBig);
    }
    let Some(m) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    Ok(Some(FrameHead {
        fin,
        rsv1,
        opcode,
        mask: [m[0], m[1], m[2], m[3]],
        len,
        size: at + 4,
    }))
}

/// Appends a server frame's header (never masked, RFC 6455 §5.1) for a payload of `len`
/// bytes. `rsv1`: the payload is compressed.
pub fn write_head(out: &mut Vec<u8>, fin: bool, rsv1: bool, opcode: Opcode, len: usize) {
    let b0 = (u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode.bits();
    // The minimal length encoding (RFC 6455 §5.2).
    if len < 126 {
        out.extend_from_slice(&[b0, len as u8]);
    } else if len <= usize::from(u16::MAX) {
        let l = (len as u16).to_be_bytes();
        out.extend_from_slice(&[b0, 126, l[0], l[1]]);
    } else {
        out.extend_from_slice(&[b0, 127]);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// XORs `data` with the mask, `offset` bytes into the frame's payload (RFC 6455 §5.3).
/// Eight bytes at a time: the compiler turns the loop into vector XORs.
pub fn unmask(data: &mut [u8], mask: [u8; 4], offset: u64) {
    let mut key = mask;
    key.rotate_left((offset % 4) as usize);
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut chunks = data.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().expect("eight bytes")) ^ wide;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= key[i % 4];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: u64 = 1 << 20;

    fn masked(b0: u8, len_bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![b0];
        v.extend_from_slice(len_bytes);
        v.extend_from_slice(&[1, 2, 3, 4]);
        v
    }

    #[test]
    fn heads_read_by_rfc_6455_5_2() {
        type Row = (
            &'static str,
            Vec<u8>,
            Result<Option<(Opcode, bool, u64, usize)>, WsError>,
        );
        let rows: Vec<Row> = vec![
            (
                "text, 5 bytes",
                masked(0x81, &[0x85]),
                Ok(Some((Opcode::Text, true, 5, 6))),
            ),
            (
                "binary, not final",
                masked(0x02, &[0x80]),
                Ok(Some((Opcode::Binary, false, 0, 6))),
            ),
            (
                "16-bit length",
                masked(0x82, &[0xFE, 0x01, 0x00]),
                Ok(Some((Opcode::Binary, true, 256, 8))),
            ),
            (
                "64-bit length",
                masked(0x82, &[0xFF, 0, 0, 0, 0, 0, 1, 0, 0]),
                Ok(Some((Opcode::Binary, true, 65536, 14))),
            ),
            (
                "ping",
                masked(0x89, &[0x80]),
                Ok(Some((Opcode::Ping, true, 0, 6))),
            ),
            (
                "close, 125 bytes",
                masked(0x88, &[0xFD]),
                Ok(Some((Opcode::Close, true, 125, 6))),
            ),
            ("one byte", vec![0x81], Ok(None)),
            ("mask key partial", vec![0x81, 0x85, 1, 2], Ok(None)),
            ("16-bit length partial", vec![0x82, 0xFE, 0x01], Ok(None)),
            // §5.2: RSV bits without an extension.
            (
                "rsv1",
                masked(0xC1, &[0x80]),
                Err(WsError::Protocol("reserved bit set")),
            ),
            (
                "rsv2",
                masked(0xA1, &[0x80]),
                Err(WsError::Protocol("reserved bit set")),
            ),
            (
                "rsv3",
                masked(0x91, &[0x80]),
                Err(WsError::Protocol("reserved bit set")),
            ),
            // §5.2: opcodes 3–7 and B–F are reserved.
            (
                "opcode 3",
                masked(0x83, &[0x80]),
                Err(WsError::Protocol("reserved opcode")),
            ),
            (
                "opcode B",
                masked(0x8B, &[0x80]),
                Err(WsError::Protocol("reserved opcode")),
            ),
            // §5.1: client frames are masked.
            (
                "unmasked",
                vec![0x81, 0x05, b'h'],
                Err(WsError::Protocol("client frame not masked")),
            ),
            // §5.5: control frames are whole and small.
            (
                "fragmented ping",
                masked(0x09, &[0x80]),
                Err(WsError::Protocol("fragmented control frame")),
            ),
            (
                "ping of 126",
                masked(0x89, &[0xFE, 0, 126]),
                Err(WsError::Protocol("control frame over 125 bytes")),
            ),
            (
                "top length bit",
                masked(0x82, &[0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0]),
                Err(WsError::Protocol("frame length has its top bit set")),
            ),
            (
                "over the frame limit",
                masked(0x82, &[0xFF, 0, 0, 0, 0, 0, 0x10, 0, 1]),
                Err(WsError::TooBig),
            ),
        ];
        for (name, bytes, want) in rows {
            let got =
                read_head(&bytes, false, BIG).map(|h| h.map(|h| (h.opcode, h.fin, h.len, h.size)));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn rsv1_only_where_negotiated_and_never_on_control_frames() {
        let h = read_head(&masked(0xC1, &[0x80]), true, BIG)
            .unwrap()
            .unwrap();
        assert!(h.rsv1);
        assert_eq!(
            read_head(&masked(0xC9, &[0x80]), true, BIG),
            Err(WsError::Protocol("compressed control frame"))
        );
    }

    #[test]
    fn server_heads_use_the_minimal_length() {
        for (len, want) in [
            (0usize, vec![0x81, 0]),
            (125, vec![0x81, 125]),
            (126, vec![0x81, 126, 0, 126]),
            (65535, vec![0x81, 126, 0xFF, 0xFF]),
            (65536, vec![0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0]),
        ] {
            let mut out = Vec::new();
            write_head(&mut out, true, false, Opcode::Text, len);
            assert_eq!(out, want, "{len}");
        }
        let mut out = Vec::new();
        write_head(&mut out, false, true, Opcode::Binary, 1);
        assert_eq!(out, [0x42, 1]);
    }

    #[test]
    fn unmask_at_any_offset_matches_the_bytewise_rule() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        let plain: Vec<u8> = (0..67u8).collect();
        let masked: Vec<u8> = plain
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4])
            .collect();
        for split in 0..plain.len() {
            let mut a = masked[..split].to_vec();
            let mut b = masked[split..].to_vec();
            unmask(&mut a, mask, 0);
            unmask(&mut b, mask, split as u64);
            a.extend_from_slice(&b);
            assert_eq!(a, plain, "split at {split}");
        }
    }
}
