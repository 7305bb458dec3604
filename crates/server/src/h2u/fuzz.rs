//! What the `h2u_frames` fuzz target asserts about the upstream connection reading arbitrary
//! server bytes: no panic; the same events and the same output whether the bytes come whole,
//! split in two, or one at a time; each stream ends at most once and hears nothing after;
//! DATA only after a final head; never more held unconsumed than the windows we announced;
//! our output whole frames. The seeds in `fuzz/corpus/h2u_frames` also run here on stable
//! (`h2u::fuzz::tests`).
#![forbid(unsafe_code)]

use std::collections::HashMap;

use super::conn::{Conn, Events, STREAM_WINDOW, Settings, StreamError};
use super::fields::{Fields, Request};
use crate::h2::frame::{self, Head};

/// Inputs up to this long are also fed one byte at a time.
const BYTEWISE_MAX: usize = 4096;

/// Checks `data`: its first byte picks the settings (small windows, a small header list limit)
/// and how many requests are open (1 to 4, GETs and POSTs with a body under way); the rest is
/// the server's bytes after its preface. Panics on a broken invariant, and on nothing else.
pub fn check(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let settings = Settings {
        stream_window: if first & 1 != 0 { 100 } else { STREAM_WINDOW },
        max_header_list: if first & 2 != 0 { 200 } else { 64 * 1024 },
        ..Settings::default()
    };
    let streams = 1 + u32::from((first >> 2) & 3);
    let whole = run(settings, streams, &[rest]);
    let mid = rest.len() / 2;
    let two = run(settings, streams, &[&rest[..mid], &rest[mid..]]);
    assert_eq!(two, whole, "split in two");
    if rest.len() <= BYTEWISE_MAX {
        let bytes: Vec<&[u8]> = rest.chunks(1).collect();
        assert_eq!(run(settings, streams, &bytes), whole, "a byte at a time");
    }
}

/// What one stream has heard.
#[derive(Default)]
struct Seen {
    final_head: bool,
    ended: bool,
    /// Handed over, not consumed (nothing is consumed while the input is fed).
    held: u64,
}

struct Record {
    events: Vec<String>,
    streams: HashMap<u32, Seen>,
    window: u64,
}

impl Record {
    fn stream(&mut self, id: u32) -> &mut Seen {
        let s = self
            .streams
            .get_mut(&id)
            .expect("events only for opened streams");
        assert!(!s.ended, "stream {id}: an event after its end");
        s
    }
}

impl Events for Record {
    fn head(&mut self, id: u32, status: u16, fields: &Fields) {
        let s = self.stream(id);
        assert!(
            !s.final_head,
            "a head after the final one (trailers are `trailers`)"
        );
        s.final_head = status >= 200;
        assert!((100..1000).contains(&status) && status != 101);
        self.events
            .push(format!("head {id} {status} {}", fields.len()));
    }
    fn data(&mut self, id: u32, data: &[u8]) {
        let window = self.window;
        let s = self.stream(id);
        assert!(s.final_head, "DATA only after the final head");
        assert!(!data.is_empty());
        s.held += data.len() as u64;
        assert!(s.held <= window, "never more than the stream window held");
        self.events.push(format!("data {id} {}", data.len()));
    }
    fn trailers(&mut self, id: u32, fields: &Fields) {
        assert!(self.stream(id).final_head);
        self.events.push(format!("trailers {id} {}", fields.len()));
    }
    fn end(&mut self, id: u32) {
        let s = self.stream(id);
        assert!(s.final_head, "an end without a final head");
        s.ended = true;
        self.events.push(format!("end {id}"));
    }
    fn failed(&mut self, id: u32, error: StreamError) {
        self.stream(id).ended = true;
        self.events.push(format!("failed {id} {error:?}"));
    }
    fn writable(&mut self, id: u32) {
        self.events.push(format!("writable {id}"));
    }
    fn pong(&mut self) {
        self.events.push("pong".into());
    }
    fn goaway(&mut self) {
        self.events.push("goaway".into());
    }
}

/// Feeds `pieces` to a connection with `streams` requests open; the events and our output.
fn run(settings: Settings, streams: u32, pieces: &[&[u8]]) -> (Vec<String>, Vec<u8>) {
    let mut c = Conn::new(0, settings);
    let mut rec = Record {
        events: Vec::new(),
        streams: HashMap::new(),
        window: u64::from(settings.stream_window),
    };
    let body = [7u8; 300];
    // The server's SETTINGS (empty) first, so that the requests open at once, whatever the
    // input's first frame (Conn::open takes one stream before them; the preface rule has
    // its own tests).
    let mut empty = Vec::new();
    frame::settings(&mut empty, &[]);
    c.recv(&empty, 1, &mut rec);
    for i in 0..streams {
        let req = Request {
            method: if i % 2 == 0 { b"GET" } else { b"POST" },
            scheme: b"http",
            authority: b"up",
            path: b"/",
            fields: &[],
        };
        let id = c.open(&req, i % 2 == 0).expect("room for four");
        if i % 2 == 1 {
            c.send(id, &body, false);
        }
        rec.streams.insert(id, Seen::default());
    }
    let mut out = c.take_output();
    c.sent(&mut rec);
    for piece in pieces {
        c.recv(piece, 1, &mut rec);
    }
    let total: u64 = rec.streams.values().map(|s| s.held).sum();
    assert!(
        total <= u64::from(settings.conn_window),
        "the connection window"
    );
    out.extend(c.take_output());
    c.sent(&mut rec);
    // Whole frames, each within the largest frame size a server may allow.
    let mut rest = &out[frame::PREFACE.len()..];
    while !rest.is_empty() {
        assert!(rest.len() >= frame::HEAD_LEN, "a whole frame header");
        let h = Head::parse(rest);
        assert!(rest.len() >= frame::HEAD_LEN + h.len, "a whole frame");
        rest = &rest[frame::HEAD_LEN + h.len..];
    }
    // Consuming everything afterwards, and the end of input, hold too.
    let held: Vec<(u32, u64)> = rec.streams.iter().map(|(id, s)| (*id, s.held)).collect();
    for (id, n) in held {
        c.consumed(id, n as usize);
    }
    c.eof(&mut rec);
    for (id, s) in &rec.streams {
        assert!(s.ended, "stream {id} heard an ending at EOF");
    }
    (rec.events, out)
}

#[cfg(test)]
mod tests {
    /// The committed seeds, through the same checks (on stable, without the fuzzer).
    #[test]
    fn fuzz_seeds_hold_the_invariants() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/h2u_frames");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("the seed directory") {
            let path = entry.unwrap().path();
            super::check(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n >= 5, "the seeds are there");
    }

    /// Seeded random frame sequences (frame types, flags, streams and payloads drawn from
    /// the ones that matter), through the same checks: a stand-in for the fuzzer on stable.
    #[test]
    fn random_frame_sequences_hold_the_invariants() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let heads: [&[u8]; 6] = [
            b"\x88",
            b"\x08\x03103",
            b"\x88\x00\x0econtent-length\x013",
            b"\x00\x0bgrpc-status\x010",
            b"\x40\x01x\x01y\xbe",
            b"\xff",
        ];
        for _ in 0..10_000 {
            let mut input = vec![next() as u8];
            // The server's SETTINGS first, most of the time.
            if next() % 8 != 0 {
                input.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
            }
            for _ in 0..next() % 12 {
                let r = next();
                let kind = (r % 11) as u8;
                let flags = (r >> 8) as u8 & 0x2d;
                let stream = [0u32, 1, 1, 3, 3, 5, 7, 2, 9][(r >> 16) as usize % 9];
                let payload: Vec<u8> = match kind {
                    1 | 9 => heads[(r >> 24) as usize % heads.len()].to_vec(),
                    4 => {
                        let id = [1u16, 2, 3, 4, 5, 6, 9][(r >> 24) as usize % 7];
                        let v = [0u32, 1, 10, 16_384, 1 << 20, 1 << 31][(r >> 32) as usize % 6];
                        let mut p = id.to_be_bytes().to_vec();
                        p.extend_from_slice(&v.to_be_bytes());
                        p
                    }
                    _ => (0..(r >> 24) % 40).map(|i| i as u8).collect(),
                };
                let len = payload.len() as u32;
                input.extend_from_slice(&len.to_be_bytes()[1..]);
                input.push(kind);
                input.push(flags);
                input.extend_from_slice(&stream.to_be_bytes());
                input.extend_from_slice(&payload);
            }
            super::check(&input);
        }
    }
}
