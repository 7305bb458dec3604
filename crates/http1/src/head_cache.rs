//! Rendered starts of response heads, kept per worker.
//!
//! Owns remembering the fixed part of a head ([`ResponseHead::write_fixed`]: status line,
//! Server, Date, Content-Type) for the few (status, content type) pairs a server answers with
//! over and over, so a response costs one copy of that part instead of re-assembling it from
//! eight pieces. Entries hold the Date they were rendered with and are dropped when it changes,
//! so a cached head can never carry a stale Date. Callgrind (pipelined plaintext, one worker):
//! the server's head encoder went from 313 to 279 instructions per response, the rest being
//! Content-Length, the body copy and the checks for fields the demo answers never carry.

use crate::date::DATE_LEN;
use crate::encode::ResponseHead;

/// How many (status, content type) pairs one cache holds; others are rendered every time.
pub const HEAD_CACHE_ENTRIES: usize = 8;

/// Longest Content-Type value worth caching (longer ones are rendered every time).
const MAX_CACHED_TYPE: usize = 128;

#[derive(Debug)]
struct Entry {
    status: u16,
    content_type: Option<Box<[u8]>>,
    bytes: Box<[u8]>,
}

/// A cache of rendered head starts for one Server value. Not shared: one per worker thread.
#[derive(Debug)]
pub struct HeadCache {
    server: Option<Box<[u8]>>,
    date: [u8; DATE_LEN],
    entries: Vec<Entry>,
}

impl HeadCache {
    /// An empty cache for heads with this `Server` value.
    pub fn new(server: Option<&[u8]>) -> HeadCache {
        HeadCache {
            server: server.map(Box::from),
            date: [0; DATE_LEN],
            entries: Vec::with_capacity(HEAD_CACHE_ENTRIES),
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
        if *date != self.date {
            self.entries.clear();
            self.date = *date;
        }
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
        let head = ResponseHead {
            status,
            server: self.server.as_deref(),
            date,
            content_type,
            content_length: 0,
            close: false,
            keep_alive_10: false,
        };
        head.write_fixed(out);
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
    }
}
