//! Fuzzes linerate-kv's RESP reply reader (the Redis tier's client) over arbitrary bytes.
//! It asserts: no panic; a reply read takes no more than the bytes given, reads the same
//! from exactly its own bytes and with more bytes after it, and every proper prefix of those
//! bytes is "not yet" (so a reply split across reads is never misread).
//! The reader is compiled in from crates/kv/src/resp.rs (std only) rather than through
//! linerate-kv, whose Redis and memcached clients would bring tokio into the fuzz build.
#![no_main]

#[path = "../../crates/kv/src/resp.rs"]
#[allow(dead_code)]
mod resp;

use resp::parse;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(Some((reply, used))) = parse(data) else {
        return;
    };
    assert!(used > 0 && used <= data.len(), "a reply read past its bytes");
    let own = &data[..used];
    assert_eq!(parse(own), Ok(Some((reply.clone(), used))), "a reply read differently alone");
    let mut more = own.to_vec();
    more.extend_from_slice(b"+tail\r\n");
    assert_eq!(parse(&more), Ok(Some((reply, used))), "bytes after a reply changed it");
    for cut in 0..used {
        assert_eq!(parse(&own[..cut]), Ok(None), "a prefix read as a whole reply");
    }
});
