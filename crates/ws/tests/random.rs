//! The fuzz target's invariants (fuzz/fuzz_targets/ws_frames.rs) over many pseudo-random
//! inputs from a fixed seed, so stable CI exercises them beyond the committed seeds: frame
//! headers whose bytes are mostly plausible (masked, short lengths), and byte strings mixing
//! ASCII with UTF-8 lead and continuation bytes.

use linerate_ws::{close, frame, utf8::Utf8};

/// xorshift64*: a fixed sequence, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn byte(&mut self) -> u8 {
        (self.next() >> 56) as u8
    }
}

#[test]
fn frame_heads_read_the_same_whole_and_ask_for_more_on_prefixes() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut complete = 0;
    for _ in 0..200_000 {
        let len = (rng.next() % 16) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        if len > 1 && rng.next() & 3 != 0 {
            data[1] |= 0x80; // mostly masked, so the checks get past the mask bit
            if rng.next() & 1 == 0 {
                data[0] &= 0x8F; // and mostly without reserved bits
            }
        }
        for (rsv1_ok, max) in [(false, 1 << 20), (true, 200)] {
            let got = frame::read_head(&data, rsv1_ok, max);
            if let Ok(Some(h)) = got {
                complete += 1;
                assert!(
                    h.size <= data.len() && matches!(h.size, 6 | 8 | 14),
                    "{data:x?}"
                );
                assert!(h.len <= max);
                assert!(!h.opcode.is_control() || (h.fin && h.len <= 125));
                for n in 0..h.size {
                    assert_eq!(
                        frame::read_head(&data[..n], rsv1_ok, max),
                        Ok(None),
                        "{data:x?} prefix {n}"
                    );
                }
                let mut own = Vec::new();
                frame::write_head(&mut own, h.fin, h.rsv1, h.opcode, h.len as usize);
                own[1] |= 0x80;
                own.extend_from_slice(&h.mask);
                let back = frame::read_head(&own, rsv1_ok, max).unwrap().unwrap();
                assert_eq!((back.fin, back.opcode, back.len), (h.fin, h.opcode, h.len));
            }
        }
    }
    assert!(
        complete > 10_000,
        "the inputs reach whole headers ({complete})"
    );
}

#[test]
fn text_checked_in_pieces_agrees_with_the_whole() {
    let pool: &[u8] = &[
        b'a', 0x7F, 0x80, 0x8F, 0x90, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5,
        0xFF, 0xA0, 0x9F,
    ];
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let (mut valid, mut invalid) = (0, 0);
    for _ in 0..100_000 {
        let len = (rng.next() % 10) as usize;
        let data: Vec<u8> = (0..len)
            .map(|_| pool[(rng.next() % pool.len() as u64) as usize])
            .collect();
        let whole = std::str::from_utf8(&data).is_ok();
        if whole {
            valid += 1
        } else {
            invalid += 1
        }
        let split = (rng.next() as usize) % (len + 1);
        let mut v = Utf8::default();
        let got = v
            .feed(&data[..split])
            .and_then(|()| v.feed(&data[split..]))
            .and_then(|()| v.finish());
        assert_eq!(got.is_ok(), whole, "{data:x?} split at {split}");
        let mut v = Utf8::default();
        let got = data
            .iter()
            .try_for_each(|b| v.feed(std::slice::from_ref(b)))
            .and_then(|()| v.finish());
        assert_eq!(got.is_ok(), whole, "{data:x?} byte by byte");
        if let Ok(Some((code, reason))) = close::read(&data) {
            assert!(close::valid_code(code));
            assert_eq!(reason.len() + 2, data.len());
        }
    }
    assert!(
        valid > 1_000 && invalid > 1_000,
        "both verdicts reached ({valid}, {invalid})"
    );
}

#[test]
fn unmasking_twice_is_the_identity_at_any_offset() {
    let mut rng = Rng(42);
    for _ in 0..2_000 {
        let len = (rng.next() % 100) as usize;
        let data: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        let mask = [rng.byte(), rng.byte(), rng.byte(), rng.byte()];
        let offset = rng.next() % 1000;
        let mut bytes = data.clone();
        frame::unmask(&mut bytes, mask, offset);
        frame::unmask(&mut bytes, mask, offset);
        assert_eq!(bytes, data);
    }
}
