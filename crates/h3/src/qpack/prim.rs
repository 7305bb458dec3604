//! QPACK's primitives (RFC 9204 §4.1): prefixed integers (HPACK's, RFC 7541 §5.1, with the
//! prefix sizes QPACK uses) and string literals whose Huffman flag sits just above the
//! length's prefix.

use linerate_hpack::huffman;

use crate::varint;

/// A representation could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    /// The bytes stop inside it.
    Short,
    /// An integer over 2^62 - 1 (RFC 9204 §4.1.1: an implementation's limit; nothing QPACK
    /// counts is larger), or a Huffman string that is not one.
    Invalid,
}

/// The integer with a `prefix`-bit prefix at `b[pos..]`: its value and the position after it.
pub(crate) fn int(b: &[u8], pos: usize, prefix: u8) -> Result<(u64, usize), Bad> {
    let first = *b.get(pos).ok_or(Bad::Short)?;
    let max = (1u64 << prefix) - 1;
    let v = u64::from(first) & max;
    if v < max {
        return Ok((v, pos + 1));
    }
    let (mut v, mut shift) = (max, 0u32);
    let mut i = pos + 1;
    loop {
        let byte = *b.get(i).ok_or(Bad::Short)?;
        i += 1;
        if shift > 56 {
            return Err(Bad::Invalid); // more continuation bytes than 62 bits need
        }
        v = v
            .checked_add(u64::from(byte & 0x7f) << shift)
            .filter(|&v| v <= varint::MAX)
            .ok_or(Bad::Invalid)?;
        if byte & 0x80 == 0 {
            return Ok((v, i));
        }
        shift += 7;
    }
}

/// Where a string's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Str {
    /// This range of the input, as sent.
    Raw(usize, usize),
    /// Huffman-decoded into the caller's buffer.
    Decoded,
}

/// The string literal at `b[pos..]` whose length has a `prefix`-bit prefix and whose
/// Huffman flag is the bit above it: where its bytes are, and the position after it.
pub(crate) fn string(
    b: &[u8],
    pos: usize,
    prefix: u8,
    buf: &mut Vec<u8>,
) -> Result<(Str, usize), Bad> {
    let first = *b.get(pos).ok_or(Bad::Short)?;
    let (len, start) = int(b, pos, prefix)?;
    let end = (start as u64)
        .checked_add(len)
        .filter(|&e| e <= b.len() as u64)
        .ok_or(Bad::Short)? as usize;
    if first & (1 << prefix) == 0 {
        return Ok((Str::Raw(start, end), end));
    }
    buf.clear();
    huffman::decode(&b[start..end], buf).map_err(|_| Bad::Invalid)?;
    Ok((Str::Decoded, end))
}

/// Appends `v` with a `prefix`-bit prefix under the bits `high` (HPACK's writer: the same
/// integers).
#[inline]
pub(crate) fn write_int(out: &mut Vec<u8>, high: u8, prefix: u8, v: u64) {
    linerate_hpack::integer(out, high, prefix, v as usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7541 §C.1's integers, and the limits.
    #[test]
    fn integers() {
        assert_eq!(int(&[0x0a], 0, 5), Ok((10, 1)));
        assert_eq!(int(&[0x1f, 0x9a, 0x0a], 0, 5), Ok((1337, 3)));
        assert_eq!(int(&[0x2a], 0, 8), Ok((42, 1)));
        assert_eq!(int(&[0xff, 0x9a], 0, 5), Err(Bad::Short));
        assert_eq!(int(&[], 0, 5), Err(Bad::Short));
        // 2^62 - 1 fits; one more does not; endless zero continuations are refused.
        let mut out = Vec::new();
        write_int(&mut out, 0, 7, varint::MAX);
        assert_eq!(int(&out, 0, 7), Ok((varint::MAX, out.len())));
        let mut over = Vec::new();
        write_int(&mut over, 0, 7, varint::MAX);
        *over.last_mut().unwrap() += 1;
        assert_eq!(int(&over, 0, 7), Err(Bad::Invalid));
        let mut zeros = vec![0x7f];
        zeros.extend_from_slice(&[0x80; 12]);
        zeros.push(0);
        assert_eq!(int(&zeros, 0, 7), Err(Bad::Invalid));
        for v in [0, 30, 31, 127, 128, 1337, 1 << 40] {
            for prefix in [3, 4, 5, 6, 7, 8] {
                let mut out = vec![0xee];
                write_int(&mut out, 0, prefix, v);
                assert_eq!(int(&out, 1, prefix), Ok((v, out.len())), "{v} /{prefix}");
            }
        }
    }

    #[test]
    fn strings() {
        let mut buf = Vec::new();
        // Raw, with a 3-bit prefix (a literal name: the H flag is 0x08).
        assert_eq!(string(b"\x03abcX", 0, 3, &mut buf), Ok((Str::Raw(1, 4), 4)));
        assert_eq!(string(b"\x03ab", 0, 3, &mut buf), Err(Bad::Short));
        // Huffman "www.example.com" (RFC 7541 §C.4.1), with a 7-bit prefix.
        let mut huff = vec![0x8c];
        huff.extend_from_slice(&[
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ]);
        assert_eq!(string(&huff, 0, 7, &mut buf), Ok((Str::Decoded, 13)));
        assert_eq!(buf, b"www.example.com");
        // EOS-length padding is not a Huffman string.
        assert_eq!(string(&[0x81, 0x00], 0, 7, &mut buf), Err(Bad::Invalid));
    }
}
