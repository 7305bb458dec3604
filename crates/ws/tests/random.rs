//! The fuzz target's invariants (fuzz/fuzz_targets/ws_frames.rs) over many pseudo-random
//! inputs from a fixed seed, so stable CI exercises them beyond the committed seeds: frame
//! headers whose bytes are mostly plausible (masked, short lengths), byte strings mixing
//! ASCII with UTF-8 lead and continuation bytes, `Sec-WebSocket-Extensions` values built from
//! the grammar's pieces, and DEFLATE streams with bytes flipped.

use linerate_ws::{close, deflate, frame, utf8::Utf8};

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

/// Extension values from the grammar's pieces: whatever is read, an agreement's answer reads
/// back as the same agreement, and a well-formed value followed by another offer keeps its
/// verdict when it had one.
#[test]
fn extension_values_answer_what_they_agreed() {
    let pieces: &[&str] = &[
        "permessage-deflate",
        "x-foo",
        "; ",
        ";",
        ", ",
        ",",
        " ",
        "server_no_context_takeover",
        "client_no_context_takeover",
        "server_max_window_bits",
        "client_max_window_bits",
        "=",
        "8",
        "10",
        "15",
        "16",
        "\"",
        "\\",
        "09",
    ];
    let mut rng = Rng(0x5851_F42D_4C95_7F2D);
    let (mut agreed, mut malformed) = (0, 0);
    for _ in 0..100_000 {
        let n = 1 + (rng.next() % 8) as usize;
        let mut value = String::new();
        for i in 0..n {
            // Mostly an offer's shape: the name first.
            let p = if i == 0 && rng.next() & 3 != 0 {
                0
            } else {
                (rng.next() % pieces.len() as u64) as usize
            };
            value.push_str(pieces[p]);
        }
        match deflate::negotiate([value.as_bytes()]) {
            Ok(Some(a)) => {
                agreed += 1;
                let answer = a.response();
                assert_eq!(
                    deflate::negotiate([answer.as_bytes()]),
                    Ok(Some(a)),
                    "{value}"
                );
                let more = format!("{value}, permessage-deflate");
                assert_eq!(
                    deflate::negotiate([more.as_bytes()]),
                    Ok(Some(a)),
                    "{value}"
                );
            }
            Ok(None) => {}
            Err(deflate::Malformed) => malformed += 1,
        }
    }
    assert!(
        agreed > 1_000 && malformed > 1_000,
        "both verdicts reached ({agreed}, {malformed})"
    );
}

/// DEFLATE streams, some with a byte flipped: inflated in two pieces, byte by byte or whole,
/// the verdict and the output agree, and the output never passes the limit.
#[test]
fn inflating_in_pieces_agrees_with_the_whole() {
    let text: Vec<u8> = b"{\"id\":1,\"name\":\"linerate\",\"tags\":[\"ws\",\"deflate\"]} "
        .iter()
        .copied()
        .cycle()
        .take(3000)
        .collect();
    let mut compressed = Vec::new();
    deflate::Deflate::new(15).message(&text, &mut compressed);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (mut ok, mut failed) = (0, 0);
    for round in 0..3_000 {
        let mut data = compressed.clone();
        if round % 4 != 0 {
            let at = (rng.next() as usize) % data.len();
            data[at] ^= 1 << (rng.next() % 8);
        }
        let max = if round % 3 == 0 { 2_000 } else { 1 << 16 };
        let run = |pieces: &[&[u8]]| {
            let mut z = deflate::Inflate::new();
            let mut out = Vec::new();
            let got = pieces
                .iter()
                .try_for_each(|p| z.piece(p, &mut out, max))
                .and_then(|()| z.finish(&mut out, max));
            assert!(out.len() <= max + 1);
            got.map(|()| out)
        };
        let whole = run(&[&data]);
        let split = (rng.next() as usize) % (data.len() + 1);
        assert_eq!(
            run(&[&data[..split], &data[split..]]),
            whole,
            "split at {split}"
        );
        let bytes: Vec<&[u8]> = data.chunks(1).collect();
        assert_eq!(run(&bytes), whole, "byte by byte");
        if whole.is_ok() {
            ok += 1;
        } else {
            failed += 1;
        }
    }
    assert!(
        ok > 100 && failed > 100,
        "both verdicts reached ({ok}, {failed})"
    );
}
