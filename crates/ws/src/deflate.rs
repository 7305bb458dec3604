//! permessage-deflate (RFC 7692): the client's offers read and answered (§5, §7.1), a
//! client's compressed messages inflated piece by piece with the inflated size bounded
//! (§7.2.2), and a server message compressed with an empty window (§7.2.1).
//!
//! The negotiation is strict where RFC 6455 §9.1 is (a `Sec-WebSocket-Extensions` value
//! that breaks the grammar is [`Malformed`]: the handshake is refused) and declines where
//! RFC 7692 §7.1 says to (an offer with an unknown, repeated or ill-valued parameter is
//! passed over and the next one tried). The server never keeps its compressor's window
//! between messages: it always answers `server_no_context_takeover` (§7.1.1.1), so one
//! compressor can serve every connection of a thread and an idle connection holds none.
#![forbid(unsafe_code)]

use std::borrow::Cow;

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::Error as WsError;

/// The extension's name (RFC 7692 §7).
pub const NAME: &[u8] = b"permessage-deflate";
/// The largest LZ77 window, in bits (RFC 7692 §7.1.2); also the inflater's: a stream made
/// with any smaller window inflates with it.
pub const MAX_WINDOW_BITS: u8 = 15;
/// The four octets a compressed message's payload ends without (RFC 7692 §7.2.1): the end
/// of the empty stored block a sync flush writes. The inflater is fed them at the end.
pub const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];
/// The compression level for server messages: zlib's default, its balance of time and size.
pub const LEVEL: u32 = 6;
/// The heap an inflater holds (zlib-rs allocates its state and a 32 KiB window whatever
/// the window bits; 47,552 bytes measured), plus the inflater itself.
pub const INFLATE_BYTES: usize = 47_552 + std::mem::size_of::<Decompress>();

/// A `Sec-WebSocket-Extensions` value that breaks RFC 6455 §9.1's grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed;

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sec-WebSocket-Extensions is malformed")
    }
}

impl std::error::Error for Malformed {}

/// An extension parameter: its name and its value, if any (a quoted value unescaped).
pub type Param<'a> = (&'a [u8], Option<Cow<'a, [u8]>>);

/// One offered extension: its name and parameters, in order.
pub type Extension<'a> = (&'a [u8], Vec<Param<'a>>);

/// Reads a `Sec-WebSocket-Extensions` value (RFC 6455 §9.1): a comma-separated list of
/// extensions, each a token with `; name[=value]` parameters, a value a token or a
/// quoted-string whose unescaped content is a token. Empty list elements are skipped
/// (RFC 9110 §5.6.1); whitespace is allowed around the separators.
pub fn extensions(value: &[u8]) -> Result<Vec<Extension<'_>>, Malformed> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        skip_ows(value, &mut at);
        match value.get(at) {
            None => return Ok(out),
            Some(b',') => {
                at += 1;
                continue;
            }
            Some(_) => {}
        }
        let name = token(value, &mut at)?;
        let mut params = Vec::new();
        loop {
            skip_ows(value, &mut at);
            match value.get(at) {
                None => break,
                Some(b',') => {
                    at += 1;
                    break;
                }
                Some(b';') => {
                    at += 1;
                    skip_ows(value, &mut at);
                    let pname = token(value, &mut at)?;
                    skip_ows(value, &mut at);
                    let mut pvalue = None;
                    if value.get(at) == Some(&b'=') {
                        at += 1;
                        skip_ows(value, &mut at);
                        pvalue = Some(if value.get(at) == Some(&b'"') {
                            quoted(value, &mut at)?
                        } else {
                            Cow::Borrowed(token(value, &mut at)?)
                        });
                    }
                    params.push((pname, pvalue));
                }
                Some(_) => return Err(Malformed),
            }
        }
        out.push((name, params));
    }
}

fn skip_ows(value: &[u8], at: &mut usize) {
    while matches!(value.get(*at), Some(b' ' | b'\t')) {
        *at += 1;
    }
}

/// RFC 9110 §5.6.2's tchar.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A token at `at` (at least one tchar).
fn token<'a>(value: &'a [u8], at: &mut usize) -> Result<&'a [u8], Malformed> {
    let start = *at;
    while value.get(*at).is_some_and(|&b| is_tchar(b)) {
        *at += 1;
    }
    if *at == start {
        return Err(Malformed);
    }
    Ok(&value[start..*at])
}

/// A quoted-string at `at` (RFC 9110 §5.6.4), unescaped; RFC 6455 §9.1 wants its content
/// to be a token.
fn quoted<'a>(value: &'a [u8], at: &mut usize) -> Result<Cow<'a, [u8]>, Malformed> {
    *at += 1;
    let start = *at;
    let mut escaped: Option<Vec<u8>> = None;
    loop {
        let Some(&b) = value.get(*at) else {
            return Err(Malformed);
        };
        *at += 1;
        match b {
            b'"' => break,
            b'\\' => {
                let Some(&next) = value.get(*at) else {
                    return Err(Malformed);
                };
                *at += 1;
                escaped
                    .get_or_insert_with(|| value[start..*at - 2].to_vec())
                    .push(next);
            }
            _ => {
                if let Some(e) = &mut escaped {
                    e.push(b);
                }
            }
        }
    }
    let content = match escaped {
        Some(e) => Cow::Owned(e),
        None => Cow::Borrowed(&value[start..*at - 1]),
    };
    if content.is_empty() || !content.iter().all(|&b| is_tchar(b)) {
        return Err(Malformed);
    }
    Ok(content)
}

/// The parameters a server agreed to: what the 101 answers and how the connection
/// compresses and inflates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// The client asked the server's compressor to keep to a window of 2^n bytes (8 to 15);
    /// `None`: it did not, and the answer does not name it.
    pub server_max_window_bits: Option<u8>,
    /// The answer names `client_no_context_takeover` (§7.1.1.2: the client offered it, or
    /// the server asks for it), so each of the client's messages inflates with an empty
    /// window and the inflater is freed between messages.
    pub client_no_context_takeover: bool,
}

impl Agreed {
    /// The window the server's compressor uses, or `None` when it sends every message as
    /// it is. A window of 8 bits is honoured that way: zlib cannot make a raw DEFLATE
    /// stream with a 256-byte window (it silently uses 512, which a strict 8-bit inflater
    /// refuses), and a message sent uncompressed keeps to any window (RFC 7692 §6).
    pub fn compress_bits(&self) -> Option<u8> {
        match self.server_max_window_bits {
            None => Some(MAX_WINDOW_BITS),
            Some(8) => None,
            Some(bits) => Some(bits),
        }
    }

    /// The `Sec-WebSocket-Extensions` answer (RFC 7692 §7.1): always
    /// `server_no_context_takeover` (§7.1.1.1 lets the server add it unasked), the
    /// client's `client_no_context_takeover` repeated, and the `server_max_window_bits` it
    /// asked for, kept (§7.1.2.1). `client_max_window_bits` is never named: the inflater
    /// takes any window, and a smaller one would save nothing (see [`INFLATE_BYTES`]).
    pub fn response(&self) -> String {
        let mut s = String::from("permessage-deflate; server_no_context_takeover");
        if self.client_no_context_takeover {
            s.push_str("; client_no_context_takeover");
        }
        if let Some(bits) = self.server_max_window_bits {
            s.push_str("; server_max_window_bits=");
            s.push_str(&bits.to_string());
        }
        s
    }
}

/// The first acceptable permessage-deflate offer among the `Sec-WebSocket-Extensions`
/// values (fields in order, offers in order: RFC 7692 §5 lets the client list them by
/// preference), or `None` when no offer is acceptable; other extensions are passed over.
/// Every value must be well-formed, even after the offer taken.
pub fn negotiate<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Option<Agreed>, Malformed> {
    let mut agreed = None;
    for value in values {
        for (name, params) in extensions(value)? {
            if agreed.is_none() && name == NAME {
                agreed = offer(&params);
            }
        }
    }
    Ok(agreed)
}

/// One permessage-deflate offer's parameters (RFC 7692 §7.1): `None` declines it (a
/// parameter not defined for an offer, one repeated, a value where none belongs or none
/// where one must be, a window outside 8–15 or written with a leading zero).
pub fn offer(params: &[Param<'_>]) -> Option<Agreed> {
    let mut agreed = Agreed {
        server_max_window_bits: None,
        client_no_context_takeover: false,
    };
    let mut seen = [false; 4];
    for (name, value) in params {
        let which = match *name {
            b"server_no_context_takeover" => 0,
            b"client_no_context_takeover" => 1,
            b"server_max_window_bits" => 2,
            b"client_max_window_bits" => 3,
            _ => return None,
        };
        if std::mem::replace(&mut seen[which], true) {
            return None;
        }
        match (which, value) {
            // The server never keeps context: asked or not, it answers so.
            (0, None) => {}
            (1, None) => agreed.client_no_context_takeover = true,
            (2, Some(v)) => agreed.server_max_window_bits = Some(window_bits(v)?),
            // A hint of the client's own window (or that it takes one from the answer):
            // the inflater takes any, so it is checked and not answered.
            (3, None) => {}
            (3, Some(v)) => {
                window_bits(v)?;
            }
            _ => return None,
        }
    }
    Some(agreed)
}

/// A window size's value: a decimal integer from 8 to 15 without leading zeroes (§7.1.2).
fn window_bits(v: &[u8]) -> Option<u8> {
    match *v {
        [d @ b'8'..=b'9'] => Some(d - b'0'),
        [b'1', d @ b'0'..=b'5'] => Some(10 + d - b'0'),
        _ => None,
    }
}

/// A client's compressed messages inflated (RFC 7692 §7.2.2): each piece of a message's
/// payload as it comes, then the [`TAIL`]. The inflated message is bounded: output stops
/// and the message fails ([`WsError::TooBig`]) as soon as it passes its limit, without
/// inflating the rest (a decompression bomb costs at most the limit).
pub struct Inflate {
    z: Decompress,
}

impl Default for Inflate {
    fn default() -> Self {
        Inflate::new()
    }
}

impl std::fmt::Debug for Inflate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflate")
            .field("total_in", &self.z.total_in())
            .finish()
    }
}

/// How much an inflated message's buffer grows at least when it is full.
const GROW_BYTES: usize = 16 << 10;

impl Inflate {
    pub fn new() -> Inflate {
        Inflate {
            z: Decompress::new_with_window_bits(false, MAX_WINDOW_BITS),
        }
    }

    /// Inflates a piece of a message's payload (unmasked) onto `out`; `out` never passes
    /// `max` bytes.
    pub fn piece(&mut self, input: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), WsError> {
        self.run(input, out, max)
    }

    /// The message's payload is all in: its [`TAIL`] is inflated.
    pub fn finish(&mut self, out: &mut Vec<u8>, max: usize) -> Result<(), WsError> {
        self.run(&TAIL, out, max)
    }

    fn run(&mut self, mut input: &[u8], out: &mut Vec<u8>, max: usize) -> Result<(), WsError> {
        loop {
            if out.len() == out.capacity() {
                if out.len() > max {
                    return Err(WsError::TooBig);
                }
                // Geometric growth, but never past one byte over the limit: the byte that
                // tells a message over it from one at it.
                let want = (out.capacity() * 2)
                    .max(out.len() + GROW_BYTES)
                    .min(max + 1);
                out.reserve_exact(want - out.len());
            }
            let (used_before, had) = (self.z.total_in(), out.len());
            let status = match self.z.decompress_vec(input, out, FlushDecompress::None) {
                Ok(status) => status,
                // Past the limit before the bad data: the limit's verdict, whatever the
                // split (found by the fuzzer: a call that filled the output went on to
                // read a bad block header).
                Err(_) if out.len() > max => return Err(WsError::TooBig),
                Err(_) => return Err(WsError::InvalidDeflate),
            };
            let used = (self.z.total_in() - used_before) as usize;
            input = &input[used..];
            if out.len() > max {
                return Err(WsError::TooBig);
            }
            if status == Status::StreamEnd {
                // A block with BFINAL set ended the stream (§7.2.3.4): what follows starts
                // a new one (the byte after such a block and the tail make an empty stored
                // block). All of the ended stream's output is out.
                self.z.reset(false);
                if input.is_empty() {
                    return Ok(());
                }
                continue;
            }
            if out.len() < out.capacity() {
                // Room left: the inflater gave all it could from the input.
                if input.is_empty() {
                    return Ok(());
                }
                if used == 0 && out.len() == had {
                    return Err(WsError::InvalidDeflate);
                }
            }
        }
    }
}

/// Compresses whole messages, each with an empty window (the server's
/// `server_no_context_takeover`): nothing of one message stays for the next, so one
/// compressor serves any number of connections.
pub struct Deflate {
    z: Compress,
}

impl std::fmt::Debug for Deflate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deflate")
            .field("total_in", &self.z.total_in())
            .finish()
    }
}

impl Deflate {
    /// A compressor with a window of 2^`window_bits` bytes (9 to 15).
    pub fn new(window_bits: u8) -> Deflate {
        Deflate {
            z: Compress::new_with_window_bits(Compression::new(LEVEL), false, window_bits),
        }
    }

    /// Appends `payload` compressed to `out` (RFC 7692 §7.2.1: DEFLATE ended by a sync
    /// flush, whose 4-octet [`TAIL`] is removed); the compressor is then reset for the next
    /// message.
    pub fn message(&mut self, payload: &[u8], out: &mut Vec<u8>) {
        // Deflate's worst case (stored blocks) plus the flush's empty block.
        out.reserve(payload.len() + payload.len() / 1024 * 5 + 16);
        let mut input = payload;
        loop {
            let before = self.z.total_in();
            self.z
                .compress_vec(input, out, FlushCompress::Sync)
                .expect("deflate into a buffer with room does not fail");
            input = &input[(self.z.total_in() - before) as usize..];
            if input.is_empty() && out.len() < out.capacity() {
                break;
            }
            out.reserve(GROW_BYTES);
        }
        debug_assert!(
            out.ends_with(&TAIL),
            "a sync flush ends with an empty stored block"
        );
        out.truncate(out.len() - TAIL.len());
        self.z.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agreed(server_bits: Option<u8>, client_nct: bool) -> Option<Agreed> {
        Some(Agreed {
            server_max_window_bits: server_bits,
            client_no_context_takeover: client_nct,
        })
    }

    /// Offers in, agreement (or a refusal) out: one row per rule.
    #[test]
    fn offers_by_rfc_7692_7_1() {
        type Row = (
            &'static str,
            Vec<&'static str>,
            Result<Option<Agreed>, Malformed>,
        );
        let rows: Vec<Row> = vec![
            ("plain", vec!["permessage-deflate"], Ok(agreed(None, false))),
            (
                "a browser's",
                vec!["permessage-deflate; client_max_window_bits"],
                Ok(agreed(None, false)),
            ),
            (
                "Autobahn's default",
                vec!["permessage-deflate; client_no_context_takeover; client_max_window_bits"],
                Ok(agreed(None, true)),
            ),
            // §7.1.1.1: asked or not, the server keeps no context.
            (
                "server_no_context_takeover",
                vec!["permessage-deflate; server_no_context_takeover"],
                Ok(agreed(None, false)),
            ),
            // §7.1.2.1: 8 to 15; 8 is taken (and honoured by not compressing).
            (
                "server_max_window_bits=8",
                vec!["permessage-deflate; server_max_window_bits=8"],
                Ok(agreed(Some(8), false)),
            ),
            (
                "server_max_window_bits=10",
                vec!["permessage-deflate; server_max_window_bits=10"],
                Ok(agreed(Some(10), false)),
            ),
            (
                "a quoted value",
                vec!["permessage-deflate; server_max_window_bits=\"12\""],
                Ok(agreed(Some(12), false)),
            ),
            (
                "a quoted value with an escape",
                vec!["permessage-deflate; server_max_window_bits=\"1\\3\""],
                Ok(agreed(Some(13), false)),
            ),
            (
                "client_max_window_bits=9",
                vec!["permessage-deflate; client_max_window_bits=9"],
                Ok(agreed(None, false)),
            ),
            (
                "whitespace around the separators",
                vec!["  permessage-deflate ;\tserver_max_window_bits = 15 , x "],
                Ok(agreed(Some(15), false)),
            ),
            // §5: the first acceptable offer, in the client's order; §7.1: a bad one is
            // declined, not failed.
            (
                "a declined offer, then one taken",
                vec![
                    "permessage-deflate; server_max_window_bits=7, permessage-deflate; client_no_context_takeover",
                ],
                Ok(agreed(None, true)),
            ),
            (
                "offers across fields",
                vec![
                    "x-webkit-deflate-frame",
                    "permessage-deflate",
                    "permessage-deflate; server_max_window_bits=9",
                ],
                Ok(agreed(None, false)),
            ),
            ("an unknown extension only", vec!["foo; bar=1"], Ok(None)),
            (
                "empty elements",
                vec![", ,permessage-deflate,"],
                Ok(agreed(None, false)),
            ),
            ("no field value at all", vec![""], Ok(None)),
            // §7.1: declined.
            (
                "an unknown parameter",
                vec!["permessage-deflate; mem_level=4"],
                Ok(None),
            ),
            (
                "a repeated parameter",
                vec!["permessage-deflate; client_no_context_takeover; client_no_context_takeover"],
                Ok(None),
            ),
            (
                "server_max_window_bits without a value",
                vec!["permessage-deflate; server_max_window_bits"],
                Ok(None),
            ),
            (
                "server_max_window_bits=16",
                vec!["permessage-deflate; server_max_window_bits=16"],
                Ok(None),
            ),
            (
                "a leading zero",
                vec!["permessage-deflate; server_max_window_bits=09"],
                Ok(None),
            ),
            (
                "client_max_window_bits=7",
                vec!["permessage-deflate; client_max_window_bits=7"],
                Ok(None),
            ),
            (
                "a value on a flag",
                vec!["permessage-deflate; server_no_context_takeover=1"],
                Ok(None),
            ),
            ("the name's case", vec!["Permessage-Deflate"], Ok(None)),
            // RFC 6455 §9.1: the grammar, whatever the extension.
            (
                "a bare semicolon",
                vec!["permessage-deflate;"],
                Err(Malformed),
            ),
            (
                "no name",
                vec!["; server_no_context_takeover"],
                Err(Malformed),
            ),
            (
                "a space in a name",
                vec!["permessage deflate"],
                Err(Malformed),
            ),
            (
                "an empty value",
                vec!["permessage-deflate; a="],
                Err(Malformed),
            ),
            ("an unclosed quote", vec!["foo; a=\"15"], Err(Malformed)),
            ("a quoted non-token", vec!["foo; a=\"1 5\""], Err(Malformed)),
            ("an empty quoted value", vec!["foo; a=\"\""], Err(Malformed)),
            ("a slash", vec!["foo/1"], Err(Malformed)),
            (
                "malformed after the offer taken",
                vec!["permessage-deflate", "foo;;"],
                Err(Malformed),
            ),
        ];
        for (name, values, want) in rows {
            let got = negotiate(values.iter().map(|v| v.as_bytes()));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn answers() {
        let rows = [
            (
                agreed(None, false),
                "permessage-deflate; server_no_context_takeover",
            ),
            (
                agreed(None, true),
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            ),
            (
                agreed(Some(8), true),
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover; server_max_window_bits=8",
            ),
        ];
        for (a, want) in rows {
            let a = a.unwrap();
            assert_eq!(a.response(), want);
            // The answer is itself a well-formed offer of the same parameters.
            assert_eq!(negotiate([want.as_bytes()]), Ok(Some(a)));
        }
        assert_eq!(agreed(Some(8), false).unwrap().compress_bits(), None);
        assert_eq!(agreed(Some(9), false).unwrap().compress_bits(), Some(9));
        assert_eq!(agreed(None, false).unwrap().compress_bits(), Some(15));
    }

    fn inflate(pieces: &[&[u8]], max: usize) -> Result<Vec<u8>, WsError> {
        let mut z = Inflate::new();
        let mut out = Vec::new();
        for p in pieces {
            z.piece(p, &mut out, max)?;
        }
        z.finish(&mut out, max)?;
        Ok(out)
    }

    /// RFC 7692 §7.2.3's examples.
    #[test]
    fn the_rfc_examples_inflate() {
        let hello: &[u8] = &[0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        // §7.2.3.1: one message, in one piece and split in two frames' worth.
        assert_eq!(inflate(&[hello], 100).unwrap(), b"Hello");
        assert_eq!(inflate(&[&hello[..3], &hello[3..]], 100).unwrap(), b"Hello");
        // §7.2.3.2: the second "Hello" refers to the first (context takeover).
        let mut z = Inflate::new();
        let mut out = Vec::new();
        z.piece(hello, &mut out, 100).unwrap();
        z.finish(&mut out, 100).unwrap();
        out.clear();
        z.piece(&[0xf2, 0x00, 0x11, 0x00, 0x00], &mut out, 100)
            .unwrap();
        z.finish(&mut out, 100).unwrap();
        assert_eq!(out, b"Hello");
        // §7.2.3.3: no compression (a stored block).
        let stored = [
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ];
        assert_eq!(inflate(&[&stored], 100).unwrap(), b"Hello");
        // §7.2.3.4: a block with BFINAL set, then the byte that starts the next.
        let last = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
        assert_eq!(inflate(&[&last], 100).unwrap(), b"Hello");
        // §7.2.3.5: two DEFLATE blocks in one message.
        let two = [
            0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
        ];
        assert_eq!(inflate(&[&two], 100).unwrap(), b"Hello");
    }

    /// §7.2.3.1 the other way: "Hello" compresses to the RFC's bytes.
    #[test]
    fn hello_deflates_to_the_rfc_bytes() {
        let mut z = Deflate::new(15);
        let mut out = Vec::new();
        z.message(b"Hello", &mut out);
        assert_eq!(out, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
        // Reset: the second message starts from an empty window, byte for byte the same.
        out.clear();
        z.message(b"Hello", &mut out);
        assert_eq!(out, [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]);
    }

    #[test]
    fn round_trips_at_every_window() {
        let text: Vec<u8> = (0..200_000u32)
            .map(|i| b"the quick brown fox "[(i % 20) as usize] ^ (i / 7000) as u8)
            .collect();
        for bits in 9..=15 {
            let mut z = Deflate::new(bits);
            let mut out = Vec::new();
            z.message(&text, &mut out);
            assert!(out.len() < text.len() / 10, "{bits}: {}", out.len());
            for step in [out.len(), 1000, 7] {
                let pieces: Vec<&[u8]> = out.chunks(step).collect();
                assert_eq!(inflate(&pieces, 1 << 20).unwrap(), text, "{bits}/{step}");
            }
        }
    }

    /// A decompression bomb: a few KiB that inflate to far more are refused once the
    /// output passes the limit, and the output never grows far beyond it.
    #[test]
    fn a_bomb_stops_at_the_limit() {
        let zeros = vec![0u8; 10 << 20];
        let mut bomb = Vec::new();
        Deflate::new(15).message(&zeros, &mut bomb);
        assert!(bomb.len() < 20_000, "{}", bomb.len());
        let max = 100_000;
        let mut z = Inflate::new();
        let mut out = Vec::new();
        assert_eq!(z.piece(&bomb, &mut out, max), Err(WsError::TooBig));
        assert!(
            out.len() == max + 1 && out.capacity() == max + 1,
            "{}",
            out.capacity()
        );
        // At the limit exactly, it is taken.
        assert_eq!(
            inflate(&[&bomb[..]], zeros.len()).map(|v| v.len()),
            Ok(zeros.len())
        );
        assert_eq!(inflate(&[&bomb[..]], zeros.len() - 1), Err(WsError::TooBig));
    }

    /// Fuzzer find: the output passed the limit and a bad block header followed in the
    /// same input; whole it was refused as not DEFLATE, split as too big. Too big both ways.
    #[test]
    fn output_past_the_limit_then_bad_data_is_too_big_in_any_split() {
        let mut data = Vec::new();
        Deflate::new(15).message(&[b'*'; 4097], &mut data);
        // A stored block whose LEN and NLEN disagree.
        data.extend_from_slice(&[0x00, 0x05, 0x00, 0x00, 0x00]);
        for split in 0..=data.len() {
            let got = inflate(&[&data[..split], &data[split..]], 4096);
            assert_eq!(got, Err(WsError::TooBig), "split at {split}");
        }
    }

    #[test]
    fn garbage_is_refused() {
        // BTYPE 11 is reserved (RFC 1951 §3.2.3).
        assert_eq!(inflate(&[&[0xff, 0xff]], 100), Err(WsError::InvalidDeflate));
    }
}
