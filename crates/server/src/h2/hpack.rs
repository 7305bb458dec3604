//! HPACK (RFC 7541) for the server: request header blocks decoded by `loona-hpack` (its
//! Huffman decoder refuses EOS and bad padding, its integers refuse overflow, a size update at
//! the end of a block is an error) behind a bounded dynamic table; response header blocks
//! encoded here.
//!
//! The encoder is written by hand because a response's fields are known names: each finds its
//! static-table index with one `match` instead of a table scan, and values go out as literals
//! that never enter a dynamic table, so the encoder keeps no state and a peer's
//! SETTINGS_HEADER_TABLE_SIZE cannot make it allocate.
#![forbid(unsafe_code)]

/// The dynamic table size the server's decoder allows (SETTINGS_HEADER_TABLE_SIZE; the
/// default of RFC 9113 §6.5.2, so no SETTINGS entry is needed for it).
pub(crate) const HEADER_TABLE_SIZE: usize = 4096;

/// Why a header block could not be decoded: a connection error of type COMPRESSION_ERROR
/// (RFC 9113 §4.3), since the two tables may now differ.
#[derive(Debug)]
pub(crate) struct CompressionError;

/// One connection's request-header decoder.
pub(crate) struct Decoder(loona_hpack::Decoder<'static>);

impl Decoder {
    pub(crate) fn new() -> Decoder {
        let mut d = loona_hpack::Decoder::new();
        d.set_max_allowed_table_size(HEADER_TABLE_SIZE);
        Decoder(d)
    }

    /// Decodes a whole header block, calling `field` with each name and value in order. Every
    /// field is decoded even after `field` has seen enough (the table must stay in step with
    /// the peer's), and a size update anywhere but the block's start is refused (RFC 7541
    /// §4.2).
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CompressionError> {
        let late_update = has_late_update(block);
        let result = self
            .0
            .decode_with_cb(block, |name, value| field(&name, &value));
        match result {
            Ok(()) if !late_update => Ok(()),
            _ => Err(CompressionError),
        }
    }
}

/// Whether a block holds a dynamic table size update after its first field. Walks the
/// representations by their prefixes only; a malformed block is left to the decoder.
fn has_late_update(mut b: &[u8]) -> bool {
    let mut seen_field = false;
    fn int(b: &[u8], prefix: u8) -> Option<(usize, usize)> {
        let max = (1usize << prefix) - 1;
        let first = (*b.first()? as usize) & max;
        if first < max {
            return Some((first, 1));
        }
        let (mut v, mut shift, mut i) = (max, 0u32, 1);
        loop {
            let byte = *b.get(i)? as usize;
            v = v.checked_add((byte & 0x7f).checked_shl(shift)?)?;
            i += 1;
            shift += 7;
            if byte & 0x80 == 0 {
                return Some((v, i));
            }
            if shift > 28 {
                return None;
            }
        }
    }
    fn string(b: &[u8]) -> Option<usize> {
        let (len, used) = int(b, 7)?;
        Some(used + len)
    }
    while let Some(&first) = b.first() {
        let used = if first & 0x80 != 0 {
            int(b, 7).map(|(_, n)| n)
        } else if first & 0xe0 == 0x20 {
            if seen_field {
                return true;
            }
            int(b, 5).map(|(_, n)| n)
        } else {
            let prefix = if first & 0x40 != 0 { 6 } else { 4 };
            int(b, prefix).and_then(|(index, n)| {
                let name = if index == 0 { string(&b[n..])? } else { 0 };
                let value = string(b.get(n + name..)?)?;
                Some(n + name + value)
            })
        };
        seen_field |= first & 0xe0 != 0x20;
        match used {
            Some(n) if n <= b.len() => b = &b[n..],
            _ => return false,
        }
    }
    false
}

/// Appends an integer with an `prefix`-bit prefix whose other bits are `high` (RFC 7541 §5.1).
#[inline(always)]
fn integer(out: &mut Vec<u8>, high: u8, prefix: u8, mut v: usize) {
    let max = (1usize << prefix) - 1;
    if v < max {
        out.push(high | v as u8);
        return;
    }
    out.push(high | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A string literal without Huffman coding.
#[inline(always)]
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// `:status` (an indexed field for the seven the static table holds).
pub(crate) fn status(out: &mut Vec<u8>, status: u16) {
    let index = match status {
        200 => 8,
        204 => 9,
        206 => 10,
        304 => 11,
        400 => 12,
        404 => 13,
        500 => 14,
        _ => {
            // Literal without indexing, name `:status` (index 8).
            integer(out, 0, 4, 8);
            let mut b = itoa::Buffer::new();
            string(out, b.format(status).as_bytes());
            return;
        }
    };
    out.push(0x80 | index);
}

/// A field as a literal without indexing (RFC 7541 §6.2.2): the name by its static-table
/// index when it has one. `name` must be lowercase.
#[inline(always)]
pub(crate) fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match static_name(name) {
        Some(i) => integer(out, 0, 4, i),
        None => {
            out.push(0);
            string(out, name);
        }
    }
    string(out, value);
}

/// The static table's index of a response field name (RFC 7541 Appendix A).
fn static_name(name: &[u8]) -> Option<usize> {
    Some(match name {
        b"accept-ranges" => 18,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"date" => 33,
        b"etag" => 34,
        b"expires" => 36,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"proxy-authenticate" => 48,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn decode(d: &mut Decoder, block: &[u8]) -> Result<Fields, CompressionError> {
        let mut v = Vec::new();
        d.decode(block, |n, val| v.push((n.to_vec(), val.to_vec())))?;
        Ok(v)
    }

    #[test]
    fn our_encoding_decodes() {
        let mut out = Vec::new();
        status(&mut out, 200);
        status(&mut out, 418);
        field(&mut out, b"content-type", b"text/plain");
        field(&mut out, b"x-long-name-here", &[b'v'; 200]);
        let got = decode(&mut Decoder::new(), &out).unwrap();
        assert_eq!(got[0], (b":status".to_vec(), b"200".to_vec()));
        assert_eq!(got[1], (b":status".to_vec(), b"418".to_vec()));
        assert_eq!(got[2], (b"content-type".to_vec(), b"text/plain".to_vec()));
        assert_eq!(got[3], (b"x-long-name-here".to_vec(), vec![b'v'; 200]));
    }

    // RFC 7541 §4.2: a size update is allowed only at the start of a block.
    #[test]
    fn size_updates_only_at_the_start() {
        // update to 0, then :method GET (index 2)
        assert!(decode(&mut Decoder::new(), &[0x20, 0x82]).is_ok());
        // :method GET, then an update
        assert!(decode(&mut Decoder::new(), &[0x82, 0x20]).is_err());
        assert!(decode(&mut Decoder::new(), &[0x82, 0x20, 0x82]).is_err());
        // larger than allowed (4097: 0x3f then 4097-31)
        let mut big = Vec::new();
        integer(&mut big, 0x20, 5, 4097);
        big.push(0x82);
        assert!(decode(&mut Decoder::new(), &big).is_err());
    }

    // RFC 7541 §6.1: index 0 is an error; so is one past the tables.
    #[test]
    fn bad_indexes_are_compression_errors() {
        assert!(decode(&mut Decoder::new(), &[0x80]).is_err());
        assert!(decode(&mut Decoder::new(), &[0xbe]).is_err()); // 62: empty dynamic table
    }

    // RFC 7541 §5.2: padding longer than 7 bits, or not EOS's prefix, is an error.
    #[test]
    fn huffman_padding_is_checked() {
        // literal without indexing, new name "a" (Huffman 0x1f = 'a' + 3 bits of 1s), value
        assert!(decode(&mut Decoder::new(), &[0x00, 0x81, 0x1f, 0x01, b'x']).is_ok());
        // padding of zeros
        assert!(decode(&mut Decoder::new(), &[0x00, 0x81, 0x18, 0x01, b'x']).is_err());
        // a whole byte of padding
        assert!(decode(&mut Decoder::new(), &[0x00, 0x82, 0x1f, 0xff, 0x01, b'x']).is_err());
    }

    #[test]
    fn integers_round_trip() {
        for v in [0usize, 14, 15, 16, 127, 128, 300, 16_383, 1 << 20] {
            let mut out = Vec::new();
            integer(&mut out, 0, 4, v);
            out.push(0); // empty value
            let mut expect_name = None;
            // a literal without indexing with name index v must fail or name that entry
            if v > 0 && v <= 61 {
                expect_name = Some(v);
            }
            let got = decode(&mut Decoder::new(), &out);
            assert_eq!(got.is_ok(), expect_name.is_some(), "{v}");
        }
    }
}
