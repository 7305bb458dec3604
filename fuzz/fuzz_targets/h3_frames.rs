//! Fuzzes the HTTP/3 frame reader (crates/h3) over arbitrary bytes: the first byte picks the
//! stream (request or control) and the HEADERS limit; the rest is read whole, split in two,
//! and a byte at a time. Never a panic, progress on every read, held frames within their
//! limits, and the same frames and verdict however the bytes arrive.
#![no_main]

use linerate_h3::frame::{Frame, FrameReader, Role};

#[derive(Debug, PartialEq)]
enum Ev {
    Data(Vec<u8>),
    Other(String),
    Error(u64),
}

fn run(role: Role, limit: usize, pieces: &[&[u8]]) -> (Vec<Ev>, bool) {
    let mut r = FrameReader::new(role, limit);
    let mut evs: Vec<Ev> = Vec::new();
    for piece in pieces {
        let mut input = *piece;
        while !input.is_empty() {
            match r.read(input) {
                Err(code) => {
                    evs.push(Ev::Error(code.value()));
                    return (evs, false);
                }
                Ok((used, frame)) => {
                    assert!(used > 0 && used <= input.len(), "progress within the input");
                    match frame {
                        Some(Frame::Data(d)) => {
                            assert!(!d.is_empty());
                            match evs.last_mut() {
                                Some(Ev::Data(prev)) => prev.extend_from_slice(d),
                                _ => evs.push(Ev::Data(d.to_vec())),
                            }
                        }
                        Some(Frame::Headers(h)) => {
                            assert!(h.len() <= limit, "HEADERS held within the limit");
                            evs.push(Ev::Other(format!("headers {h:?}")));
                        }
                        Some(f) => evs.push(Ev::Other(format!("{f:?}"))),
                        None => {}
                    }
                    input = &input[used..];
                }
            }
        }
    }
    (evs, r.at_boundary())
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let role = if first & 1 == 0 {
        Role::Request
    } else {
        Role::Control
    };
    let limit = usize::from(first >> 1) * 8;
    let whole = run(role, limit, &[rest]);
    let mid = rest.len() / 2;
    assert_eq!(
        run(role, limit, &[&rest[..mid], &rest[mid..]]),
        whole,
        "split in two"
    );
    let bytes: Vec<&[u8]> = rest.chunks(1).collect();
    assert_eq!(run(role, limit, &bytes), whole, "a byte at a time");
});
