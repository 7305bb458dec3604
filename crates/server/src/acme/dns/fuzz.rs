//! What the `dns_answer` fuzz target asserts about [`super::message::parse`] reading
//! arbitrary bytes as a DNS server's answer: no panic; a message read whole ends exactly at
//! its last record (every shorter prefix and any byte more are refused); its header is the
//! one `parse_header` reads; its TXT strings and TSIG record lie inside it. The seeds in
//! `fuzz/corpus/dns_answer` also run here on stable (`acme::dns::fuzz::tests`).
#![forbid(unsafe_code)]

use super::message::{HEADER, WireError, parse, parse_header};

/// Checks `data`; panics on a broken invariant, and on nothing else.
pub fn check(data: &[u8]) {
    let Ok(answer) = parse(data) else {
        return;
    };
    assert_eq!(parse_header(data), Ok(answer.header), "the header alone");
    assert_eq!(parse(data).as_ref(), Ok(&answer), "read twice");
    let txt: usize = answer.txt.iter().map(Vec::len).sum();
    assert!(
        txt <= data.len(),
        "{txt} TXT bytes in a {}-byte message",
        data.len()
    );
    if let Some(t) = &answer.tsig {
        assert!(
            t.start >= HEADER && t.start < data.len(),
            "TSIG at {}",
            t.start
        );
        assert!(t.mac.len() + t.other.len() < data.len() - t.start);
        assert!(
            t.key.len() <= super::message::MAX_NAME
                && t.algorithm.len() <= super::message::MAX_NAME
        );
    }
    let mut longer = data.to_vec();
    longer.push(0);
    assert_eq!(
        parse(&longer).err(),
        Some(WireError::Trailing),
        "a byte more"
    );
    // Counts fix where a message ends: no shorter prefix is one (checked at a few cuts).
    for cut in [data.len() - 1, data.len() / 2, HEADER] {
        if cut < data.len() && !(cut == HEADER && answer.header.counts == [0; 4]) {
            assert!(
                parse(&data[..cut]).is_err(),
                "a {cut}-byte prefix read whole"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    /// The committed seeds, through the same checks on stable.
    #[test]
    fn the_seeds_pass_the_fuzz_checks() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/dns_answer");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("fuzz/corpus/dns_answer") {
            super::check(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 4, "{n} seeds");
    }
}
