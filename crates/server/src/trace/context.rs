//! W3C Trace Context (<https://www.w3.org/TR/trace-context/>): the `traceparent` a request
//! brings, read strictly, and the one this server sends upstream; and a request's ids — its
//! trace, its span, its upstream exchange's span and its request id (nginx's `$request_id`) —
//! drawn from the worker's generator.
//!
//! Owns the formats and the ids; knows nothing of sampling policy (`sampler.rs`) or export.
#![forbid(unsafe_code)]

/// The version of `traceparent` written, and the only one whose layout is known. A later
/// version is read by its first four fields (§4.2.2: a higher version is parsed as 00 is).
const VERSION: u8 = 0x00;
/// `traceparent`'s length at version 00: `00-{32 hex}-{16 hex}-{2 hex}`.
const TRACEPARENT_LEN: usize = 55;
/// Most bytes of `tracestate` carried (§3.3.1.5: 512 at least must be kept; beyond, a
/// vendor may cut it). A longer one is not passed on.
pub(crate) const MAX_TRACESTATE: usize = 512;
/// Most bytes of a trusted client's `X-Request-Id` taken as this request's id.
pub(crate) const MAX_REQUEST_ID: usize = 64;

/// The sampled flag of `trace-flags`.
pub(crate) const SAMPLED: u8 = 0x01;

/// A parent context a request brought in `traceparent`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

/// Reads a `traceparent` value, or `None` where it is not one (§3.2: an invalid one is
/// ignored, and the request starts a new trace). Lowercase hex only; an all-zero trace or
/// span id is invalid; version ff is invalid; version 00 is exactly 55 bytes, a later
/// version at least that, with `-` after.
pub(crate) fn parse_traceparent(v: &[u8]) -> Option<Parent> {
    let v = trim(v);
    if v.len() < TRACEPARENT_LEN {
        return None;
    }
    let version = hex_byte(&v[0..2])?;
    if version == 0xff
        || (version == VERSION && v.len() != TRACEPARENT_LEN)
        || (version != VERSION && v.len() > TRACEPARENT_LEN && v[TRACEPARENT_LEN] != b'-')
        || v[2] != b'-'
        || v[35] != b'-'
        || v[52] != b'-'
    {
        return None;
    }
    let mut trace_id = [0u8; 16];
    for (i, b) in trace_id.iter_mut().enumerate() {
        *b = hex_byte(&v[3 + 2 * i..5 + 2 * i])?;
    }
    let mut span_id = [0u8; 8];
    for (i, b) in span_id.iter_mut().enumerate() {
        *b = hex_byte(&v[36 + 2 * i..38 + 2 * i])?;
    }
    let flags = hex_byte(&v[53..55])?;
    if trace_id == [0; 16] || span_id == [0; 8] {
        return None;
    }
    Some(Parent {
        trace_id,
        span_id,
        flags,
    })
}

/// Writes `00-{trace}-{span}-{flags}` into `out`.
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub(crate) fn write_traceparent(
    out: &mut Vec<u8>,
    trace_id: &[u8; 16],
    span_id: &[u8; 8],
    flags: u8,
) {
    // Composed on the stack four bytes (eight digits) at a time, then copied once: a digit
    // at a time into the `Vec` cost ~600 instructions (callgrind).
    let mut t = [0u8; TRACEPARENT_LEN];
    t[..3].copy_from_slice(b"00-");
    let mut at = 3;
    for chunk in trace_id.chunks_exact(4).chain(span_id.chunks_exact(4)) {
        let word = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        t[at..at + 8].copy_from_slice(&hex_u32(word));
        at += 8;
        if at == 35 {
            t[at] = b'-';
            at += 1;
        }
    }
    t[at] = b'-';
    t[at + 1..].copy_from_slice(&hex_u32(u32::from(flags))[6..]);
    out.extend_from_slice(&t);
}

/// Whether `v` may be passed on as `tracestate`: at most [`MAX_TRACESTATE`] bytes of
/// visible ASCII, spaces, tabs and commas (its list members are not checked one by one; a
/// value with a control byte is dropped, as §3.3.1 allows for one that cannot be parsed).
pub(crate) fn tracestate_ok(v: &[u8]) -> bool {
    !v.is_empty()
        && v.len() <= MAX_TRACESTATE
        && v.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
}

/// A trusted client's `X-Request-Id`, when it can stand for this request's: 1 to
/// [`MAX_REQUEST_ID`] bytes of letters, digits, `-`, `_`, `.`, `:`, `+`, `/`, `=` (UUIDs,
/// hex, base64 and ULIDs pass; spaces, quotes and control bytes do not).
pub(crate) fn request_id_ok(v: &[u8]) -> bool {
    !v.is_empty()
        && v.len() <= MAX_REQUEST_ID
        && v.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_.:+/=".contains(&b))
}

/// Lowercase hex of `bytes`, appended.
pub(crate) fn hex_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xf)]);
    }
}

/// Two lowercase hex digits as a byte.
fn hex_byte(two: &[u8]) -> Option<u8> {
    let d = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(d(two[0])? << 4 | d(two[1])?)
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// A request's id: 128 random bits written as 32 hex digits (nginx's `$request_id`), or a
/// trusted client's own (kept as it came, [`request_id_ok`]). Drawn for every request when
/// ids are on, as text at once ([`Ids::hex32`]): it is written as it is, upstream and in the
/// log.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RequestId {
    ours: [u8; 32],
    taken: Option<Box<[u8]>>,
}

impl Default for RequestId {
    /// No id (ids are off).
    fn default() -> RequestId {
        RequestId {
            ours: [0; 32],
            taken: None,
        }
    }
}

impl RequestId {
    /// An id of this text (32 hex digits).
    #[cfg(test)]
    pub(crate) fn from_hex(ours: [u8; 32]) -> RequestId {
        RequestId { ours, taken: None }
    }

    /// A trusted client's id, when [`request_id_ok`].
    #[cfg(test)]
    pub(crate) fn taken(v: &[u8]) -> Option<RequestId> {
        let v = trim(v);
        request_id_ok(v).then(|| RequestId {
            ours: [0; 32],
            taken: Some(v.into()),
        })
    }

    /// Sets this id to `ours` (a new request's), or a trusted client's `theirs` when usable.
    #[inline]
    pub(crate) fn set(&mut self, ours: [u8; 32], theirs: Option<&[u8]>) {
        self.ours = ours;
        if self.taken.is_some() || theirs.is_some() {
            self.taken = theirs.map(trim).filter(|v| request_id_ok(v)).map(Box::from);
        }
    }

    /// The id's text: the client's, or ours.
    #[inline]
    pub(crate) fn text(&self) -> &[u8] {
        match &self.taken {
            Some(t) => t,
            None => &self.ours,
        }
    }

    /// The id's text, owned (it is ASCII: hex, or a client's that passed [`request_id_ok`]).
    pub(crate) fn to_text(&self) -> String {
        String::from_utf8_lossy(self.text()).into_owned()
    }

    /// No id was drawn (ids are off).
    pub(crate) fn is_none(&self) -> bool {
        self.taken.is_none() && self.ours[0] == 0
    }
}

impl std::fmt::Debug for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// The 8 lowercase hex digits of `x`, most significant first, without a loop or a table:
/// each nibble spread into a byte, then `'0'` added, and `'a' - '0' - 10` more where it is
/// above 9 (a digit at a time cost ~4× this, callgrind).
#[inline]
fn hex_u32(x: u32) -> [u8; 8] {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let mut v = u64::from(x);
    v = (v | (v << 16)) & 0x0000_ffff_0000_ffff;
    v = (v | (v << 8)) & 0x00ff_00ff_00ff_00ff;
    v = (v | (v << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte k holds nibble k (from the least significant): big-endian order puts the most
    // significant first.
    let above9 = ((v + 6 * ONES) >> 4) & ONES;
    (v + 0x30 * ONES + above9 * (b'a' - b'0' - 10) as u64).to_be_bytes()
}

/// A worker's generator of ids: wyrand (Wang Yi's), seeded from the process's random keys,
/// the thread and the clock. Ids need to be unique and unguessable enough to never collide
/// across a fleet (W3C's "random" trace ids), not secret: nothing is keyed by them.
#[derive(Clone, Debug)]
pub(crate) struct Ids {
    state: u64,
}

impl Ids {
    pub(crate) fn new() -> Ids {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        h.write_u64(u64::from(std::process::id()));
        std::hash::Hash::hash(&std::thread::current().id(), &mut h);
        Ids { state: h.finish() }
    }

    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }

    /// A span id: 8 bytes, never all zero.
    #[inline]
    pub(crate) fn span_id(&mut self) -> [u8; 8] {
        loop {
            let v = self.next_u64();
            if v != 0 {
                return v.to_be_bytes();
            }
        }
    }

    /// A request id: 128 random bits as 32 lowercase hex digits.
    #[inline]
    pub(crate) fn hex32(&mut self) -> [u8; 32] {
        let (a, b) = (self.next_u64(), self.next_u64());
        let mut out = [0u8; 32];
        out[..8].copy_from_slice(&hex_u32((a >> 32) as u32));
        out[8..16].copy_from_slice(&hex_u32(a as u32));
        out[16..24].copy_from_slice(&hex_u32((b >> 32) as u32));
        out[24..].copy_from_slice(&hex_u32(b as u32));
        out
    }

    /// A trace id: 16 bytes, never all zero.
    #[inline]
    pub(crate) fn id128(&mut self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.span_id());
        out[8..].copy_from_slice(&self.next_u64().to_be_bytes());
        out
    }
}

/// The fuzz target's checks (fuzz/fuzz_targets/trace_context.rs) over arbitrary bytes, each
/// line a field value: a `traceparent` read is written back as it came (version 00), or
/// with its own version's first four parts; its ids are never all zero; whatever passes as a
/// `tracestate` or request id holds only the bytes allowed; a request carrying the lines as
/// `traceparent`, `tracestate` and `X-Request-Id` begins without a panic, sampled as its
/// parent says.
#[cfg_attr(not(all(feature = "proxy", feature = "http2")), allow(dead_code))]
pub fn fuzz_check(data: &[u8]) {
    for line in data.split(|&b| b == b'\n') {
        if let Some(p) = parse_traceparent(line) {
            assert!(
                p.trace_id != [0; 16] && p.span_id != [0; 8],
                "an all-zero id read"
            );
            let mut out = Vec::new();
            write_traceparent(&mut out, &p.trace_id, &p.span_id, p.flags);
            assert_eq!(
                out[3..],
                trim(line)[3..55],
                "a traceparent not read as written"
            );
        }
        if tracestate_ok(line) {
            assert!(line.len() <= MAX_TRACESTATE && !line.iter().any(|&b| b < 0x20 && b != b'\t'));
        }
        let mut id = RequestId::default();
        id.set([b'0'; 32], Some(line));
        assert!(id.text().len() <= MAX_REQUEST_ID.max(32));
        assert!(
            id.text().iter().all(|&b| b.is_ascii_graphic()),
            "a request id with a space or control byte"
        );
    }
    let mut lines = data.split(|&b| b == b'\n');
    let (tp, ts, rid) = (lines.next(), lines.next(), lines.next());
    let mut req = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for (name, v) in [
        ("traceparent", tp),
        ("tracestate", ts),
        ("x-request-id", rid),
    ] {
        if let Some(v) = v.filter(|v| !v.iter().any(|&b| b == b'\r' || b == 0)) {
            req.extend_from_slice(format!("{name}: ").as_bytes());
            req.extend_from_slice(v);
            req.extend_from_slice(b"\r\n");
        }
    }
    req.extend_from_slice(b"\r\n");
    let mut head = linerate_http1::RequestHead::new();
    if head.parse(&req, &Default::default()).is_ok() {
        let sampler = super::Sampler::parse(None, None).unwrap_or(super::Sampler::AlwaysOn);
        let mut t = super::RequestTrace::default();
        t.begin(&mut Ids::new(), &head, &req, true, Some(&sampler));
        assert!(t.traced());
        let parent = head.header(&req, "traceparent").and_then(parse_traceparent);
        if let Some(p) = parent {
            assert_eq!(t.trace_id, p.trace_id);
            assert_eq!(
                t.recorded(),
                p.flags & SAMPLED != 0,
                "the parent's decision not followed"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparent_table() {
        let ok = parse_traceparent(GOOD).unwrap();
        assert_eq!(ok.trace_id[0], 0x4b);
        assert_eq!(ok.span_id[7], 0xb7);
        assert_eq!(ok.flags, 1);
        // (value, valid)
        let cases: &[(&[u8], bool)] = &[
            (GOOD, true),
            (
                b"  00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00 ",
                true,
            ),
            // Uppercase hex is invalid (§3.2.2.2).
            (
                b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                false,
            ),
            // All-zero trace id, all-zero span id.
            (
                b"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                false,
            ),
            (
                b"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                false,
            ),
            // Version ff; version 00 with more after it; a later version with more after it.
            (
                b"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
                false,
            ),
            (
                b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
                true,
            ),
            (
                b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01xx",
                false,
            ),
            // Short, wrong separators, non-hex.
            (
                b"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                false,
            ),
            (
                b"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                false,
            ),
            (
                b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
                false,
            ),
            (b"", false),
        ];
        for (v, valid) in cases {
            assert_eq!(
                parse_traceparent(v).is_some(),
                *valid,
                "{}",
                String::from_utf8_lossy(v)
            );
        }
    }

    /// The fuzz target's seeds, replayed on stable.
    #[test]
    fn fuzz_seeds() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/trace_context"
        );
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            fuzz_check(&std::fs::read(e.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 3);
    }

    #[test]
    fn traceparent_round_trip() {
        let p = parse_traceparent(GOOD).unwrap();
        let mut out = Vec::new();
        write_traceparent(&mut out, &p.trace_id, &p.span_id, p.flags);
        assert_eq!(out, GOOD);
    }

    #[test]
    fn request_ids() {
        let mut ids = Ids::new();
        let a = RequestId::from_hex(ids.hex32());
        let b = RequestId::from_hex(ids.hex32());
        assert_eq!(a.to_text().len(), 32);
        assert!(
            a.to_text()
                .bytes()
                .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
        );
        assert_ne!(a, b);
        let mut hex = Vec::new();
        hex_into(&mut hex, &[0x00, 0x0f, 0xa5, 0xff]);
        assert_eq!(hex, b"000fa5ff");
        for x in [0u32, 9, 10, 0xdead_beef, 0x0123_4567, 0x89ab_cdef, u32::MAX] {
            assert_eq!(hex_u32(x), *format!("{x:08x}").as_bytes(), "{x:#x}");
        }
        assert_eq!(
            RequestId::taken(b" 7c9e6679-7425-40de-944b-e07fc1f90ae7 ")
                .unwrap()
                .to_text(),
            "7c9e6679-7425-40de-944b-e07fc1f90ae7"
        );
        // A client's id taken, then a request without one: ours again.
        let mut id = RequestId::default();
        assert!(id.is_none());
        id.set([b'1'; 32], Some(b"abc"));
        assert_eq!(id.to_text(), "abc");
        id.set([b'1'; 32], None);
        assert_eq!(id.to_text(), "1".repeat(32));
        id.set([b'2'; 32], Some(b"bad id"));
        assert_eq!(id.to_text(), "2".repeat(32));
        for bad in [
            &b""[..],
            b"a b",
            b"x\"y",
            b"\x01",
            &[b'a'; MAX_REQUEST_ID + 1],
        ] {
            assert!(RequestId::taken(bad).is_none(), "{bad:?}");
        }
        assert!(tracestate_ok(b"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        assert!(!tracestate_ok(b"a=\x01"));
        assert!(!tracestate_ok(&[b'a'; MAX_TRACESTATE + 1]));
    }
}
