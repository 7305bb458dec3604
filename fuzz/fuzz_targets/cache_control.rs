//! Fuzzes linerate-cache's field readers over arbitrary bytes. The input's lines are
//! Cache-Control lines and, in turn, Age, Expires, Date, Last-Modified (crates/cache's date
//! reader), Vary and a key's authority/target. It asserts: no panic; every item's name is a
//! token; every lifetime at most 2^31; a restricting directive put before or after any line
//! is never lost; without quotes or escapes, lines combined with ", " read the same as apart
//! (RFC 9110 §5.3); a key made has no control bytes.
#![no_main]

use linerate_cache::cache_control::{
    Delta, Item, MAX_DELTA, RequestDirectives, ResponseDirectives, items,
};
use linerate_cache::{Key, ResponseFacts};

fn response(lines: &[&[u8]]) -> ResponseDirectives {
    let fields: Vec<(&[u8], &[u8])> = lines.iter().map(|l| (&b"cache-control"[..], *l)).collect();
    ResponseDirectives::parse(&fields)
}

fn within(d: Delta) -> bool {
    !matches!(d, Delta::Secs(s) if s > MAX_DELTA)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let lines: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    for line in &lines {
        for item in items(line) {
            let name = match item {
                Item::Directive { name, .. } => {
                    assert!(!name.is_empty(), "a directive without a name");
                    name
                }
                Item::Malformed { name } => name,
            };
            assert!(
                !name.iter().any(|b| b" ,;=\"\t".contains(b)),
                "a name that is no token"
            );
        }
    }
    let d = response(&lines);
    for l in [
        d.max_age,
        d.s_maxage,
        d.stale_while_revalidate,
        d.stale_if_error,
    ] {
        assert!(within(l), "a lifetime over 2^31");
    }
    let mut with = lines.clone();
    with.push(b"no-store, private");
    let w = response(&with);
    assert!(
        w.no_store && w.private,
        "a restriction after the lines lost"
    );
    let mut first: Vec<&[u8]> = vec![b"no-cache"];
    first.extend(&lines);
    assert!(
        response(&first).no_cache,
        "a restriction before the lines lost"
    );
    if !data.contains(&b'"') && !data.contains(&b'\\') {
        assert_eq!(
            response(&[&lines.join(&b", "[..])]),
            d,
            "lines combined read differently"
        );
    }
    let fields: Vec<(&[u8], &[u8])> = lines.iter().map(|l| (&b"cache-control"[..], *l)).collect();
    let r = RequestDirectives::parse(&fields);
    for v in [r.max_age, r.max_stale, r.min_fresh, r.stale_if_error]
        .into_iter()
        .flatten()
    {
        assert!(v <= MAX_DELTA);
    }
    for name in [&b"age"[..], b"expires", b"date", b"vary", b"last-modified"] {
        let fields: Vec<(&[u8], &[u8])> = lines.iter().map(|l| (name, *l)).collect();
        let facts = ResponseFacts::of(200, &fields);
        assert!(facts.age <= u64::from(MAX_DELTA));
    }
    if let [authority, target, ..] = lines[..] {
        if let Ok(k) = Key::new(b"https", authority, target) {
            assert!(k.as_bytes().starts_with(b"https://"));
            assert!(
                !k.as_bytes()
                    .iter()
                    .any(|b| *b <= b' ' || *b == 0x7f || *b == b'#'),
                "a key with control bytes"
            );
        }
    }
});
