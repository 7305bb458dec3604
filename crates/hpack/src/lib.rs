//! HPACK (RFC 7541), sans I/O: header blocks decoded (the server's requests, the load
//! generator's responses) and encoded (literal fields).
//!
//! Both are written here. The decoder because the crates measured were slow or lax: the
//! maintained `loona-hpack` builds a hash map for every Huffman string it decodes (callgrind,
//! h2load's requests, whose `:path` nghttp2 sends Huffman-coded and never indexed: 248,636
//! instructions per request, 84% of them in its Huffman decoder and hashing), and
//! `httlib-huffman` accepts zero-bit padding. This one decodes Huffman four bits at a time
//! (`huffman`), keeps the dynamic table within [`HEADER_TABLE_SIZE`], refuses index 0, indexes
//! past the tables, integers over [`MAX_INT`], truncated strings, and size updates anywhere
//! but at the block's start or above the limit. The encoder because a response's fields are
//! known names: each finds its static-table index with one `match`, and values go out as
//! literals that never enter a dynamic table, so it keeps no state and a peer's
//! SETTINGS_HEADER_TABLE_SIZE cannot make it allocate.
#![forbid(unsafe_code)]

use std::collections::VecDeque;

pub mod huffman;

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The dynamic table size the server's decoder allows (SETTINGS_HEADER_TABLE_SIZE; the
/// default of RFC 9113 §6.5.2, so no SETTINGS entry is needed for it).
pub const HEADER_TABLE_SIZE: usize = 4096;
/// The largest integer a representation may hold (RFC 7541 §5.1: "excessively large"
/// integers are errors); nothing the server accepts is near it.
pub const MAX_INT: usize = 1 << 24;

/// Why a header block could not be decoded: a connection error of type COMPRESSION_ERROR
/// (RFC 9113 §4.3), since the two tables may now differ.
#[derive(Debug, PartialEq, Eq)]
pub struct CompressionError;

/// The decoded size of a header list (RFC 9113 §6.5.2: each field's name and value and 32),
/// as [`Decoder::decode_within`] counted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListSize {
    /// Every field was handed out; the list's size.
    Within(usize),
    /// The list went past the limit: the fields after the one that crossed it were not
    /// handed out (the block was still decoded to its end, so the table is in step).
    Over,
}

/// The static table (RFC 7541 Appendix A), index 1 first.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// A dynamic table entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// One connection's header-block decoder.
#[derive(Default)]
pub struct Decoder {
    /// Newest first (dynamic index 62 is `table[0]`).
    table: VecDeque<Entry>,
    /// Sum of the entries' sizes (name + value + 32, RFC 7541 §4.1).
    size: usize,
    /// The current maximum (changed by size updates, never above [`HEADER_TABLE_SIZE`]).
    max: usize,
    /// Huffman-decoded name and value of the field at hand.
    name: Vec<u8>,
    value: Vec<u8>,
}

/// A string of a representation: where its bytes are.
enum Str {
    /// This range of the block, as sent.
    Raw(usize, usize),
    /// Huffman-decoded into the decoder's buffer.
    Decoded,
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            max: HEADER_TABLE_SIZE,
            ..Decoder::default()
        }
    }

    /// Decodes a whole header block, calling `field` with each name and value in order.
    pub fn decode(
        &mut self,
        block: &[u8],
        field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), CompressionError> {
        self.decode_within(block, usize::MAX, field).map(|_| ())
    }

    /// Decodes a whole header block, calling `field` with each name and value in order while
    /// the list's decoded size stays within `limit` (SETTINGS_MAX_HEADER_LIST_SIZE). Past it
    /// no more fields are handed out, but the block is decoded to its end, its insertions
    /// made, so the table stays in step with the peer's: a block that names one large table
    /// entry thousands of times (an HPACK bomb) costs its own bytes' decoding, never the
    /// expanded list.
    pub fn decode_within(
        &mut self,
        block: &[u8],
        limit: usize,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<ListSize, CompressionError> {
        let mut pos = 0;
        let mut fields = false;
        let mut size = 0usize;
        // Each field's size is counted before it is handed out.
        let mut within = |name: &[u8], value: &[u8]| {
            size = size.saturating_add(name.len() + value.len() + 32);
            size <= limit
        };
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                // §6.1 indexed field
                let (index, n) = read_int(&block[pos..], 7)?;
                pos += n;
                let (name, value) = self.entry(index)?;
                if within(name, value) {
                    field(name, value);
                }
            } else if b & 0xe0 == 0x20 {
                // §6.3 dynamic table size update: only before the first field (§4.2)
                let (size, n) = read_int(&block[pos..], 5)?;
                pos += n;
                if fields || size > HEADER_TABLE_SIZE {
                    return Err(CompressionError);
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                // §6.2 literals: with incremental indexing (01), without (0000), never (0001)
                let (index, n) = read_int(&block[pos..], if b & 0x40 != 0 { 6 } else { 4 })?;
                pos += n;
                let name = if index == 0 {
                    let (s, n) = read_str(block, pos, &mut self.name)?;
                    pos += n;
                    Some(s)
                } else {
                    None
                };
                let (value, n) = read_str(block, pos, &mut self.value)?;
                pos += n;
                let value_bytes = match value {
                    Str::Raw(a, b) => &block[a..b],
                    Str::Decoded => &self.value[..],
                };
                let name_bytes = match name {
                    Some(Str::Raw(a, b)) => &block[a..b],
                    Some(Str::Decoded) => &self.name[..],
                    None => self.entry_name(index)?,
                };
                if within(name_bytes, value_bytes) {
                    field(name_bytes, value_bytes);
                }
                if b & 0x40 != 0 {
                    let entry = (Box::from(name_bytes), Box::from(value_bytes));
                    self.insert(entry);
                }
            }
            fields = true;
        }
        if !fields && !block.is_empty() {
            // §4.2: a block may not end with a size update (and hold nothing else).
            return Err(CompressionError);
        }
        Ok(if size <= limit {
            ListSize::Within(size)
        } else {
            ListSize::Over
        })
    }

    /// The dynamic table's size (RFC 7541 §4.1): never above [`HEADER_TABLE_SIZE`].
    pub fn table_size(&self) -> usize {
        self.size
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), CompressionError> {
        match index {
            0 => Err(CompressionError),
            1..=61 => Ok(STATIC[index - 1]),
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(CompressionError),
        }
    }

    fn entry_name(&self, index: usize) -> Result<&[u8], CompressionError> {
        self.entry(index).map(|(n, _)| n)
    }

    /// §4.4: an entry larger than the table empties it and is not added.
    fn insert(&mut self, entry: Entry) {
        let size = entry.0.len() + entry.1.len() + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front(entry);
    }

    /// Drops the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }
}

/// An integer with a `prefix`-bit prefix at the start of `b` (§5.1): its value and length.
fn read_int(b: &[u8], prefix: u8) -> Result<(usize, usize), CompressionError> {
    let max = (1usize << prefix) - 1;
    let first = (b[0] as usize) & max;
    if first < max {
        return Ok((first, 1));
    }
    let (mut v, mut shift) = (max, 0u32);
    for (i, &byte) in b.iter().enumerate().skip(1) {
        v += ((byte & 0x7f) as usize) << shift;
        if v > MAX_INT {
            return Err(CompressionError);
        }
        if byte & 0x80 == 0 {
            return Ok((v, i + 1));
        }
        shift += 7;
        if shift > 28 {
            return Err(CompressionError); // zero continuation bytes, forever
        }
    }
    Err(CompressionError)
}

/// A string literal at `pos` (§5.2): raw in the block, or Huffman-decoded into `buf`.
fn read_str(block: &[u8], pos: usize, buf: &mut Vec<u8>) -> Result<(Str, usize), CompressionError> {
    let Some(&first) = block.get(pos) else {
        return Err(CompressionError);
    };
    let (len, n) = read_int(&block[pos..], 7)?;
    let start = pos + n;
    let end = start.checked_add(len).filter(|&e| e <= block.len());
    let Some(end) = end else {
        return Err(CompressionError);
    };
    if first & 0x80 == 0 {
        return Ok((Str::Raw(start, end), n + len));
    }
    buf.clear();
    huffman::decode(&block[start..end], buf).map_err(|_| CompressionError)?;
    Ok((Str::Decoded, n + len))
}

/// Appends an integer with an `prefix`-bit prefix whose other bits are `high` (RFC 7541 §5.1;
/// QPACK's integers are the same, RFC 9204 §4.1.1).
#[inline(always)]
pub fn integer(out: &mut Vec<u8>, high: u8, prefix: u8, mut v: usize) {
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

/// A string literal without Huffman coding (QPACK's value strings are the same, RFC 9204
/// §4.1.2).
#[inline(always)]
pub fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// `:status` (an indexed field for the seven the static table holds).
pub fn status(out: &mut Vec<u8>, status: u16) {
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
/// index when it has one (its first entry), so no dynamic table is touched and the same bytes
/// mean the same field every time. `name` must be lowercase. The server's responses and the
/// load generator's requests both use it.
#[inline(always)]
pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match static_name(name) {
        Some(i) => integer(out, 0, 4, i),
        None => {
            out.push(0);
            string(out, name);
        }
    }
    string(out, value);
}

/// The static table's first index for a field name (RFC 7541 Appendix A), by one `match`.
fn static_name(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b":status" => 8,
        b"accept-charset" => 15,
        b"accept-encoding" => 16,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
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
    fn every_static_name_finds_its_first_index() {
        for (i, (name, _)) in STATIC.iter().enumerate() {
            let first = STATIC.iter().position(|(n, _)| n == name).unwrap() + 1;
            assert_eq!(
                static_name(name),
                Some(first),
                "{}",
                String::from_utf8_lossy(name)
            );
            assert!(first <= i + 1);
        }
        assert_eq!(static_name(b"x-custom"), None);
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

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn text(fields: &Fields) -> Vec<String> {
        fields
            .iter()
            .map(|(n, v)| {
                format!(
                    "{}: {}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                )
            })
            .collect()
    }

    // RFC 7541 Appendix C.3 (plain) and C.4 (Huffman): three requests on one connection, the
    // dynamic table carried from one to the next.
    #[test]
    fn rfc_request_examples() {
        for blocks in [
            [
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 84be 5808 6e6f 2d63 6163 6865",
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
            ],
            [
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ],
        ] {
            let mut d = Decoder::new();
            let base = [
                ":method: GET",
                ":scheme: http",
                ":path: /",
                ":authority: www.example.com",
            ];
            assert_eq!(text(&decode(&mut d, &hex(blocks[0])).unwrap()), base);
            let mut second = base.to_vec();
            second.push("cache-control: no-cache");
            assert_eq!(text(&decode(&mut d, &hex(blocks[1])).unwrap()), second);
            assert_eq!(
                text(&decode(&mut d, &hex(blocks[2])).unwrap()),
                [
                    ":method: GET",
                    ":scheme: https",
                    ":path: /index.html",
                    ":authority: www.example.com",
                    "custom-key: custom-value"
                ]
            );
            assert_eq!(d.size, 164, "C.3.3/C.4.3: the table holds 164 bytes");
        }
    }

    // RFC 7541 §4.3–4.4: entries are evicted oldest first; one larger than the table empties it.
    #[test]
    fn the_dynamic_table_stays_within_its_size() {
        let mut d = Decoder::new();
        let mut block = vec![0x3f, 0xe1, 0x00]; // size update to 31 + 0x61 = 128
        for name in ["aaaa", "bbbb", "cccc"] {
            block.extend([0x40, 4]);
            block.extend(name.as_bytes());
            block.extend([28]);
            block.extend([b'v'; 28]); // 4 + 28 + 32 = 64 bytes per entry
        }
        decode(&mut d, &block).unwrap();
        assert_eq!(d.size, 128);
        assert_eq!(&d.table[0].0[..], b"cccc");
        assert_eq!(&d.table[1].0[..], b"bbbb");
        assert!(
            decode(&mut d, &[0xc0]).is_err(),
            "index 64: aaaa was evicted"
        );
        let mut big = vec![0x40, 4];
        big.extend(b"dddd");
        big.extend([0x7f, 0x62]); // 127 + 98 = 225-byte value
        big.extend([b'v'; 225]);
        decode(&mut d, &big).unwrap();
        assert_eq!((d.size, d.table.len()), (0, 0));
    }

    #[test]
    fn truncated_and_oversized_representations_are_errors() {
        assert!(decode(&mut Decoder::new(), &[0x00, 0x05, b'a']).is_err()); // name cut short
        assert!(decode(&mut Decoder::new(), &[0xff]).is_err()); // integer cut short
        assert!(decode(&mut Decoder::new(), &[0xff, 0x80, 0x80, 0x80, 0x80, 0x80]).is_err());
        assert!(decode(&mut Decoder::new(), &[0xff, 0xff, 0xff, 0xff, 0x7f]).is_err()); // > MAX_INT
    }

    // RFC 7541 §4.2: a size update is allowed only at the start of a block.
    #[test]
    fn size_updates_only_at_the_start() {
        // update to 0, then :method GET (index 2)
        assert!(decode(&mut Decoder::new(), &[0x20, 0x82]).is_ok());
        // :method GET, then an update
        assert!(decode(&mut Decoder::new(), &[0x82, 0x20]).is_err());
        assert!(decode(&mut Decoder::new(), &[0x82, 0x20, 0x82]).is_err());
        assert!(
            decode(&mut Decoder::new(), &[0x20]).is_err(),
            "a block of only an update"
        );
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

    /// An HPACK bomb: one block inserts a 4,000-byte value, then names it 16,000 times
    /// (about 64 MB decoded from 20 KB). Past the limit no field is handed out, the block is
    /// still read to its end, and the table stays in step for the next block.
    #[test]
    fn a_bomb_stops_at_the_limit_and_keeps_the_table_in_step() {
        let mut block = vec![0x40];
        string(&mut block, b"x-bomb");
        string(&mut block, &[b'a'; 4000]);
        block.extend(std::iter::repeat_n(0xbe, 16_000)); // index 62, the new entry
        let mut d = Decoder::new();
        let (mut handed, mut bytes) = (0, 0);
        let got = d.decode_within(&block, 16_384, |n, v| {
            handed += 1;
            bytes += n.len() + v.len();
        });
        assert_eq!(got, Ok(ListSize::Over));
        // The literal and three references fit in 16 KiB (4,038 each); nothing after.
        assert_eq!(handed, 4);
        assert_eq!(bytes, 4 * 4006);
        assert_eq!(d.table_size(), 4038);
        let next = decode(&mut d, &[0xbe]).unwrap();
        assert_eq!(text(&next), [format!("x-bomb: {}", "a".repeat(4000))]);
        // Within the limit, the size is the list's (§6.5.2: 32 per field).
        let within = d.decode_within(&[0x82, 0xbe], 16_384, |_, _| {});
        assert_eq!(within, Ok(ListSize::Within(7 + 3 + 32 + 4038)));
    }
}
