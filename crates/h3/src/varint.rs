//! QUIC variable-length integers (RFC 9000 §16): the two high bits of the first byte give the
//! length (1, 2, 4 or 8 bytes), the rest is the value, big-endian, up to 2^62 - 1.
//!
//! Decoding accepts every encoding of a value, the longer ones included: HTTP/3 asks for no
//! shortest encoding of its frame and stream types (the rule of RFC 9000 §12.4 is for QUIC's
//! own frame types, which are not read here).

/// The largest value a variable-length integer holds.
pub const MAX: u64 = (1 << 62) - 1;

/// The integer at the start of `b` and its length; `None` while `b` holds only part of it.
#[inline]
pub fn read(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for &byte in &b[1..len] {
        v = (v << 8) | u64::from(byte);
    }
    Some((v, len))
}

/// How many bytes the shortest encoding of `v` takes.
#[inline]
pub fn len(v: u64) -> usize {
    match v {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends the shortest encoding of `v` (at most [`MAX`]).
#[inline]
pub fn write(out: &mut Vec<u8>, v: u64) {
    debug_assert!(v <= MAX, "a varint holds 62 bits");
    match len(v) {
        1 => out.push(v as u8),
        2 => out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9000 Appendix A.1's examples, and the edges of each length.
    #[test]
    fn examples_and_edges() {
        let table: &[(&[u8], u64)] = &[
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            (&[0x40, 0x25], 37), // a longer encoding than needed still reads
            (&[0x3f], 63),
            (&[0x40, 0x40], 64),
            (&[0x7f, 0xff], 16_383),
            (&[0x80, 0x00, 0x40, 0x00], 16_384),
            (&[0xff; 8], MAX),
        ];
        for &(bytes, v) in table {
            assert_eq!(read(bytes), Some((v, bytes.len())), "{bytes:x?}");
            for cut in 0..bytes.len() {
                assert_eq!(read(&bytes[..cut]), None, "{bytes:x?} cut at {cut}");
            }
        }
        for &(bytes, v) in &table[..4] {
            let mut out = Vec::new();
            write(&mut out, v);
            assert_eq!(out, bytes);
        }
        for v in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            write(&mut out, v);
            assert_eq!(out.len(), len(v));
            assert_eq!(read(&out), Some((v, out.len())));
        }
    }
}
