//! Fuzzes the WebSocket codec (crates/ws) over arbitrary bytes: a frame header read whole is
//! read the same with bytes after it and asks for more on every shorter prefix, and its
//! length fits what it read; unmasking twice gives the bytes back at any offset; text checked
//! piece by piece (split where the first byte says, and byte by byte) agrees with the whole;
//! a close payload read is a code a peer may send and the rest as its reason; a
//! `Sec-WebSocket-Extensions` value agreed to answers the same agreement; DEFLATE data
//! inflated in two pieces agrees with the whole and never passes the limit.
#![no_main]

use linerate_ws::{close, deflate, frame, utf8::Utf8};

fn inflate(pieces: &[&[u8]], max: usize) -> Result<Vec<u8>, linerate_ws::Error> {
    let mut z = deflate::Inflate::new();
    let mut out = Vec::new();
    let got = pieces
        .iter()
        .try_for_each(|p| z.piece(p, &mut out, max))
        .and_then(|()| z.finish(&mut out, max));
    assert!(out.len() <= max + 1, "output past the limit");
    got.map(|()| out)
}

fn pieces_agree(data: &[u8], split: usize) {
    let whole = std::str::from_utf8(data).is_ok();
    let mut v = Utf8::default();
    let split = split.min(data.len());
    let got = v
        .feed(&data[..split])
        .and_then(|()| v.feed(&data[split..]))
        .and_then(|()| v.finish());
    assert_eq!(got.is_ok(), whole, "split at {split}");
    let mut v = Utf8::default();
    let got = data
        .iter()
        .try_for_each(|b| v.feed(std::slice::from_ref(b)))
        .and_then(|()| v.finish());
    assert_eq!(got.is_ok(), whole, "byte by byte");
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let first = data.first().copied().unwrap_or(0);
    for (rsv1_ok, max) in [(false, 1 << 20), (true, 200)] {
        let got = frame::read_head(data, rsv1_ok, max);
        if let Ok(Some(h)) = got {
            assert!(h.size <= data.len() && matches!(h.size, 6 | 8 | 14));
            assert!(h.len <= max);
            assert!(!h.opcode.is_control() || (h.fin && h.len <= frame::MAX_CONTROL_PAYLOAD));
            for n in 0..h.size {
                assert_eq!(
                    frame::read_head(&data[..n], rsv1_ok, max),
                    Ok(None),
                    "prefix {n}"
                );
            }
            let mut more = data.to_vec();
            more.push(0xAB);
            assert_eq!(frame::read_head(&more, rsv1_ok, max), got);
            // The server's own header for the same payload reads back (masked by a client).
            let mut own = Vec::new();
            frame::write_head(&mut own, h.fin, h.rsv1, h.opcode, h.len as usize);
            own[1] |= 0x80;
            own.extend_from_slice(&h.mask);
            let back = frame::read_head(&own, rsv1_ok, max).unwrap().unwrap();
            assert_eq!((back.fin, back.opcode, back.len), (h.fin, h.opcode, h.len));
        }
    }
    let mask = [first, 0x5A, 0xC3, 0x01];
    let mut bytes = data.to_vec();
    let offset = u64::from(first);
    frame::unmask(&mut bytes, mask, offset);
    frame::unmask(&mut bytes, mask, offset);
    assert_eq!(bytes, data, "unmask twice");
    pieces_agree(data, usize::from(first));
    if let Ok(Some((code, reason))) = close::read(data) {
        assert!(close::valid_code(code));
        assert_eq!(reason.len() + 2, data.len());
    }
    if let Ok(Some(agreed)) = deflate::negotiate([data]) {
        let answer = agreed.response();
        assert_eq!(deflate::negotiate([answer.as_bytes()]), Ok(Some(agreed)));
    }
    let split = usize::from(first).min(data.len());
    let whole = inflate(&[data], 4096);
    assert_eq!(
        inflate(&[&data[..split], &data[split..]], 4096),
        whole,
        "split at {split}"
    );
});
