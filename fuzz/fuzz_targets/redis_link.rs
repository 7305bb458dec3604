//! Fuzzes linerate-kv's Redis link (the proxy worker's own connection to a Redis tier,
//! crates/kv/src/link.rs) over arbitrary server bytes. The first byte picks the greeting's
//! replies (0–3) and the asks' key counts; the rest is what the server sends. It asserts: no
//! panic; answers come in ask order, each with its ask's number of values when it is one;
//! the same answers and verdict whole, split in two and byte by byte (replies split across
//! reads are never misread).
//! Compiled in from the kv crate's files (std only), as `resp_replies` is.
#![no_main]

#[path = "../../crates/kv/src/resp.rs"]
#[allow(dead_code)]
mod resp;

#[path = "../../crates/kv/src/link.rs"]
#[allow(dead_code)]
mod link;

use link::{Broken, Link, Values};

type Answers = Vec<(u64, Result<Values, Broken>)>;

/// A link with `greeting` replies due and asks of `counts` keys (tickets 0, 1, …).
fn link(greeting: usize, counts: &[usize]) -> Link {
    let mut l = Link::new(b"", greeting);
    for (t, &n) in counts.iter().enumerate() {
        let keys: Vec<String> = (0..n).map(|k| format!("k{k}")).collect();
        l.ask(t as u64, &keys);
    }
    l
}

/// Feeds `chunks` in order; the answers and whether the link broke (it stops there).
fn read<'a>(mut l: Link, chunks: impl Iterator<Item = &'a [u8]>) -> (Answers, bool) {
    let mut answers = Vec::new();
    for c in chunks {
        if l.received(c, &mut answers).is_err() {
            return (answers, true);
        }
    }
    (answers, false)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let greeting = usize::from(pick & 3);
    let counts: Vec<usize> = [1, 1 + usize::from(pick >> 2 & 3), 1 + usize::from(pick >> 4)]
        .to_vec();
    let whole = read(link(greeting, &counts), std::iter::once(bytes));
    let (answers, _) = &whole;
    for (i, (ticket, outcome)) in answers.iter().enumerate() {
        assert_eq!(*ticket, i as u64, "answers out of ask order");
        if let Ok(values) = outcome {
            assert_eq!(values.len(), counts[i], "an answer with another ask's count");
        }
    }
    let mid = bytes.len() / 2;
    let split = read(
        link(greeting, &counts),
        [&bytes[..mid], &bytes[mid..]].into_iter(),
    );
    assert_eq!(split, whole, "split in two read differently");
    let bytewise = read(link(greeting, &counts), bytes.chunks(1));
    assert_eq!(bytewise, whole, "byte by byte read differently");
});
