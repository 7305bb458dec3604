//! Rendered starts of response heads, kept per worker.
//!
//! Owns remembering the fixed part of a head ([`ResponseHead::write_fixed`]: status line,
//! Server, Date, Content-Type) for the few (status, content type) pairs a server answers with
//! over and over, so a response costs one copy of that part instead of re-assembling it from
//! eight pieces; and, for answers whose body is a small `'static` slice (a handler's constant
//! text), the whole response. Entries hold the Date they were rendered with and are dropped
//! when it changes, so a cached head can never carry a stale Date. Callgrind, one worker: the
//! server's encoder went from 313 to 279 instructions per response with cached head starts, and
//! to 133 for pipelined plaintext once whole responses with `'static` bodies were cached, keyed
//! by address.

use crate::date::DATE_LEN;
use crate::encode::ResponseHead;

/// How many head starts, and how many whole responses, one cache holds; others are rendered
/// every time.
pub const HEAD_CACHE_ENTRIES: usize = 16;

/// Longest Content-Type value worth caching (longer ones are rendered every time).
const MAX_CACHED_TYPE: usize = 128;

/// Largest `'static` body kept inside a whole cached response.
const MAX_CACHED_BODY: usize = 1024;

#[derive(Debug)]
struct Entry {
    status: u16,
    content_type: Option<Box<[u8]>>,
    /// The fixed part of a head.
    bytes: Box<[u8]>,
}

/// Names a response with `'static` content type and body by the addresses and lengths of
/// both: a `'static` slice is never freed, so its address and length name its bytes for good,
/// and the key is compared without reading them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StaticKey {
    status: u16,
    content_type: Option<(usize, usize)>,
    body: (usize, usize),
}

#[derive(Debug)]
struct StaticEntry {
    key: StaticKey,
    /// The whole keep-alive response.
    bytes: Box<[u8]>,
}

/// A cache of rendered head starts (and of whole responses with small `'static` bodies) for
/// one Server value. Not shared: one per worker thread.
#[derive(Debug)]
pub struct HeadCache {
    server: Option<Box<[u8]>>,
    date: [u8; DATE_LEN],
    entries: Vec<Entry>,
    statics: Vec<StaticEntry>,
}

impl HeadCache {
    /// An empty cache for heads with this `Server` value.
    pub fn new(server: Option<&[u8]>) -> HeadCache {
        HeadCache {
            server: server.map(Box::from),
            date: [0; DATE_LEN],
            entries: Vec::with_capacity(HEAD_CACHE_ENTRIES),
            statics: Vec::with_capacity(HEAD_CACHE_ENTRIES),
        }
    }

    /// Appends the status line, Server, Date and Content-Type of a head, exactly as
    /// [`ResponseHead::write_fixed`] renders them with this cache's Server, copying a rendered
    /// entry when there is one.
    pub fn write_fixed(
        &mut self,
        status: u16,
        content_type: Option<&[u8]>,
        date: &[u8; DATE_LEN],
        out: &mut Vec<u8>,
    ) {
        self.check_date(date);
        let found = self.entries.iter().find(|e| {
            e.status == status
                && match (&e.content_type, content_type) {
                    (Some(a), Some(b)) => short_eq(a, b),
                    (None, None) => true,
                    _ => false,
                }
        });
        if let Some(entry) = found {
            out.extend_from_slice(&entry.bytes);
            return;
        }
        let start = out.len();
        self.head(status, content_type, date, 0).write_fixed(out);
        if self.entries.len() < HEAD_CACHE_ENTRIES
            && content_type.is_none_or(|ct| ct.len() <= MAX_CACHED_TYPE)
        {
            self.entries.push(Entry {
                status,
                content_type: content_type.map(Box::from),
                bytes: out[start..].into(),
            });
        }
    }

    /// Appends a whole keep-alive response with a `'static` content type and body and no other
    /// fields: [`write_fixed`](Self::write_fixed), Content-Length, the blank line and the body.
    /// Small bodies are remembered with their head, so a repeated answer is one copy.
    pub fn write_static(
        &mut self,
        status: u16,
        content_type: Option<&'static [u8]>,
        date: &[u8; DATE_LEN],
        body: &'static [u8],
        out: &mut Vec<u8>,
    ) {
        self.check_date(date);
        let key = StaticKey {
            status,
            content_type: content_type.map(|c| (c.as_ptr() as usize, c.len())),
            body: (body.as_ptr() as usize, body.len()),
        };
        if let Some(entry) = self.statics.iter().find(|e| e.key == key) {
            out.extend_from_slice(&entry.bytes);
            return;
        }
        let start = out.len();
        self.write_fixed(status, content_type, date, out);
        self.head(status, content_type, date, body.len() as u64)
            .write_varying(out);
        crate::encode::end_head(out);
        out.extend_from_slice(body);
        if body.len() <= MAX_CACHED_BODY && self.statics.len() < HEAD_CACHE_ENTRIES {
            self.statics.push(StaticEntry {
                key,
                bytes: out[start..].into(),
            });
        }
    }

    /// Drops every entry when the Date is not the one they were rendered with.
    fn check_date(&mut self, date: &[u8; DATE_LEN]) {
        if *date != self.date {
            self.entries.clear();
            self.statics.clear();
            self.date = *date;
        }
    }

    fn head<'a>(
        &'a self,
        status: u16,
        content_type: Option<&'a [u8]>,
        date: &'a [u8; DATE_LEN],
        content_length: u64,
    ) -> ResponseHead<'a> {
        ResponseHead {
            status,
            server: self.server.as_deref(),
            date,
            content_type,
            content_length,
            close: false,
            keep_alive_10: false,
        }
    }
}

/// Byte equality for short values, eight bytes a step, without a `memcmp` call (which costs
/// more than the comparison for a content type).
#[inline]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        if x != y {
            return false;
        }
    }
    ca.remainder()
        .iter()
        .zip(cb.remainder())
        .all(|(x, y)| x == y)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head<'a>(status: u16, date: &'a [u8], ct: Option<&'a [u8]>) -> ResponseHead<'a> {
        ResponseHead {
            status,
            server: Some(b"linerate"),
            date,
            content_type: ct,
            content_length: 5,
            close: false,
            keep_alive_10: false,
        }
    }

    const D1: &[u8] = b"Thu, 19 Nov 2026 10:00:00 GMT";
    const D2: &[u8] = b"Thu, 19 Nov 2026 10:00:01 GMT";

    /// Every answer of the cache equals the direct rendering, hit or miss, across date changes,
    /// statuses and content types (including near misses of a cached type).
    #[test]
    fn cached_heads_equal_direct_rendering() {
        let mut cache = HeadCache::new(Some(b"linerate"));
        let cases: Vec<ResponseHead<'_>> = vec![
            head(200, D1, Some(b"text/plain")),
            head(200, D1, Some(b"text/plain")),
            head(200, D1, Some(b"application/json")),
            head(404, D1, Some(b"text/plain")),
            head(200, D1, None),
            head(200, D2, Some(b"text/plain")),
            head(200, D2, Some(b"text/plain")),
            head(304, D2, None),
            head(200, D2, Some(b"text/plaim")),
            head(200, D2, Some(b"text/plain; charset=utf-8")),
            head(200, D2, Some(b"text/plain; charset=utf-9")),
            head(200, D2, Some(b"text/plain; charset=utf-8")),
        ];
        for (i, h) in cases.iter().enumerate() {
            let (mut want, mut got) = (b"prefix".to_vec(), b"prefix".to_vec());
            h.write_fixed(&mut want);
            let date = h.date.try_into().unwrap();
            cache.write_fixed(h.status, h.content_type, date, &mut got);
            assert_eq!(got, want, "case {i}");
        }
    }

    /// A whole cached response equals the head rendered directly, the blank line and the
    /// body, for the same body again, another body with the same head, and a new Date.
    #[test]
    fn cached_static_responses_equal_direct_rendering() {
        static HELLO: &[u8] = b"Hello, World!";
        static OTHER: &[u8] = b"Hello, World?";
        let mut cache = HeadCache::new(Some(b"linerate"));
        let cases = [
            (D1, HELLO),
            (D1, HELLO),
            (D1, OTHER),
            (D1, HELLO),
            (D2, HELLO),
        ];
        for (i, (date, body)) in cases.into_iter().enumerate() {
            let h = ResponseHead {
                content_length: body.len() as u64,
                ..head(200, date, Some(b"text/plain"))
            };
            let mut want = b"prefix".to_vec();
            h.write_start(&mut want);
            crate::encode::end_head(&mut want);
            want.extend_from_slice(body);
            let mut got = b"prefix".to_vec();
            let date = date.try_into().unwrap();
            cache.write_static(200, Some(b"text/plain"), date, body, &mut got);
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn a_new_date_drops_every_entry_and_the_cache_stays_bounded() {
        let (d1, d2) = (D1.try_into().unwrap(), D2.try_into().unwrap());
        let mut cache = HeadCache::new(Some(b"linerate"));
        let types: Vec<Vec<u8>> = (0..20).map(|i| format!("type/{i}").into_bytes()).collect();
        for t in &types {
            cache.write_fixed(200, Some(t), d1, &mut Vec::new());
        }
        assert_eq!(cache.entries.len(), HEAD_CACHE_ENTRIES);
        cache.write_fixed(200, Some(b"text/plain"), d2, &mut Vec::new());
        assert_eq!(cache.entries.len(), 1);
        let mut out = Vec::new();
        cache.write_fixed(200, Some(b"text/plain"), d2, &mut out);
        assert!(out.windows(D2.len()).any(|w| w == D2));

        let bodies: Vec<&'static [u8]> = (0..20)
            .map(|i| &*Box::leak(format!("body {i}").into_bytes().into_boxed_slice()))
            .collect();
        for (i, body) in bodies.iter().enumerate() {
            let mut out = Vec::new();
            cache.write_static(200, Some(b"text/plain"), d2, body, &mut out);
            assert!(out.ends_with(format!("\r\n\r\nbody {i}").as_bytes()));
        }
        assert_eq!(cache.statics.len(), HEAD_CACHE_ENTRIES);
        cache.write_static(200, None, d1, bodies[0], &mut Vec::new());
        assert_eq!((cache.entries.len(), cache.statics.len()), (1, 1));
    }

    /// Equal bytes at another address are another key: the answer is still the same bytes.
    #[test]
    fn static_keys_are_addresses_and_equal_bytes_elsewhere_answer_the_same() {
        let d1 = D1.try_into().unwrap();
        let mut cache = HeadCache::new(Some(b"linerate"));
        let a: &'static [u8] = b"same";
        let b: &'static [u8] = Box::leak(b"same".to_vec().into_boxed_slice());
        let (mut x, mut y) = (Vec::new(), Vec::new());
        cache.write_static(200, Some(b"text/plain"), d1, a, &mut x);
        cache.write_static(200, Some(b"text/plain"), d1, b, &mut y);
        assert_eq!(x, y);
        assert_eq!(cache.statics.len(), 2);
    }
}
