//! HTTP/2 with prior knowledge on a cleartext HTTP/1.1 listener (`Listen::h2c_preface`): a
//! connection whose first bytes are the client preface (RFC 9113 §3.4) becomes HTTP/2
//! before the HTTP/1.1 parser sees them; anything else is HTTP/1.1 from its first
//! mismatching byte.
//!
//! Owns only that choice. It waits for more bytes only while all so far are the preface's
//! start, so an HTTP/1.1 request is handed on in the read it arrives in (`GET`'s `G` already
//! differs). The bytes it holds meanwhile live in the connection's `Preamble` (after a PROXY
//! protocol header, when the listener has one).
#![forbid(unsafe_code)]

use super::{Backend, Shared, Token, Worker};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection's first bytes say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sniff {
    /// Every byte so far is the preface's: wait for more.
    More,
    /// The whole preface: HTTP/2.
    Http2,
    /// A byte differs from the preface: HTTP/1.1.
    Http1,
}

/// Judges `seen`, every byte the connection sent so far.
pub(crate) fn sniff(seen: &[u8]) -> Sniff {
    let n = seen.len().min(PREFACE.len());
    if seen[..n] != PREFACE[..n] {
        Sniff::Http1
    } else if n < PREFACE.len() {
        Sniff::More
    } else {
        Sniff::Http2
    }
}

impl<B: Backend> Worker<B> {
    /// Bytes for a connection whose protocol is still undecided: `false` when it is not
    /// (they are the connection's as they are). Held while they are the preface's start;
    /// once decided, everything held goes to the connection, made HTTP/2 first if it was
    /// the preface.
    pub(super) fn sniffed(&mut self, token: Token, data: &[u8], sh: &Shared) -> bool {
        let idx = (token & 0xffff_ffff) as u32;
        let Some(pre) = self
            .preambles
            .get_mut(&idx)
            .filter(|p| p.generation == (token >> 32) as u32 && !p.proxy && p.sniff)
        else {
            return false;
        };
        let held = !pre.buf.is_empty();
        if held {
            pre.buf.extend_from_slice(data);
        }
        let verdict = sniff(if held { &pre.buf } else { data });
        if verdict == Sniff::More {
            if !held {
                pre.buf.extend_from_slice(data);
            }
            return true;
        }
        let Some(pre) = self.preambles.remove(&idx) else {
            return true;
        };
        let bytes: &[u8] = if held { &pre.buf } else { data };
        self.with(token, sh, |live, p| {
            if verdict == Sniff::Http2 {
                live.conn.upgrade(p.cx.now, p.cx);
            }
            p.received(live, bytes);
        });
        true
    }

    /// The connection's input ended while its protocol was undecided: what it held (the
    /// start of a preface, or nothing) is HTTP/1.1's to judge before the end.
    pub(super) fn sniff_ended(&mut self, token: Token, sh: &Shared) {
        let idx = (token & 0xffff_ffff) as u32;
        let Some(pre) = self.preambles.get(&idx) else {
            return;
        };
        if pre.generation != (token >> 32) as u32 || pre.proxy || !pre.sniff {
            return;
        }
        if let Some(pre) = self.preambles.remove(&idx)
            && !pre.buf.is_empty()
        {
            self.with(token, sh, |live, p| p.received(live, &pre.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9113 §3.4: the preface decides, byte by byte; the first byte that differs makes
    /// the connection HTTP/1.1 at once.
    #[test]
    fn the_first_bytes_decide_the_protocol() {
        #[rustfmt::skip]
        let rows: &[(&[u8], Sniff)] = &[
            (b"", Sniff::More),
            (b"P", Sniff::More),
            (b"PRI * HTTP/2.0\r\n", Sniff::More),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r", Sniff::More),
            (PREFACE, Sniff::Http2),
            (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0", Sniff::Http2),
            (b"G", Sniff::Http1),
            (b"GET / HTTP/1.1\r\n\r\n", Sniff::Http1),
            (b"POST / HTTP/1.1\r\n", Sniff::Http1),
            (b"PRI / HTTP/1.1\r\n\r\n", Sniff::Http1),
            (b"PRI * HTTP/1.1\r\n\r\n", Sniff::Http1),
            (b"pri * HTTP/2.0\r\n\r\nSM\r\n\r\n", Sniff::Http1),
            (b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", Sniff::Http1),
        ];
        for (seen, want) in rows {
            assert_eq!(sniff(seen), *want, "{:?}", String::from_utf8_lossy(seen));
        }
    }
}
