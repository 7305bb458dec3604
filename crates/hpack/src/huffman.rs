//! HPACK's Huffman code (RFC 7541 §5.2, Appendix B), decoded four bits at a time.
//!
//! The code is canonical, so its 257 code lengths define it; the decoding table is built
//! from them once per process: one state per internal node of the code tree (256), and for
//! each state and each nibble the next state and the symbol completed on the way (a code is
//! at least 5 bits long, so a nibble completes at most one). The decoder refuses EOS in the
//! string, padding longer than 7 bits, and padding that is not the start of EOS (all ones).
#![forbid(unsafe_code)]

use std::sync::OnceLock;

/// Code lengths in bits of symbols 0..=255 and EOS (256), from RFC 7541 Appendix B.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: u16 = 256;

/// The canonical codes (code, length), computed once.
fn codes() -> &'static [(u32, u8); 257] {
    static CODES: OnceLock<[(u32, u8); 257]> = OnceLock::new();
    CODES.get_or_init(canonical)
}

/// Symbols sorted by (length, symbol) get consecutive codes.
fn canonical() -> [(u32, u8); 257] {
    let mut order: Vec<u16> = (0..257).collect();
    order.sort_by_key(|&s| (LENGTHS[s as usize], s));
    let mut out = [(0u32, 0u8); 257];
    let (mut code, mut prev) = (0u32, LENGTHS[order[0] as usize]);
    for (k, &s) in order.iter().enumerate() {
        let len = LENGTHS[s as usize];
        if k > 0 {
            code = (code + 1) << (len - prev);
        }
        prev = len;
        out[s as usize] = (code, len);
    }
    out
}

/// One transition: the next state, and the symbol completed (`NONE` for none).
#[derive(Clone, Copy, Default)]
struct Step {
    next: u8,
    sym: u16,
    /// The nibble led through EOS or off the tree.
    fail: bool,
}

const NONE: u16 = u16::MAX;

struct Table {
    steps: Vec<[Step; 16]>,
    /// A string may end in this state: it is the root, or up to 7 one-bits below it.
    accepts: Vec<bool>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> Table {
    // The tree: internal nodes 0..256 (0 is the root); a child is a node or a leaf symbol.
    #[derive(Clone, Copy)]
    enum Child {
        Empty,
        Node(u16),
        Leaf(u16),
    }
    let mut kids: Vec<[Child; 2]> = vec![[Child::Empty; 2]];
    let mut ones: Vec<(bool, u8)> = vec![(true, 0)]; // (path all ones, depth)
    for (sym, (code, len)) in codes().iter().enumerate() {
        let mut node = 0usize;
        for i in (0..*len).rev() {
            let bit = ((code >> i) & 1) as usize;
            if i == 0 {
                kids[node][bit] = Child::Leaf(sym as u16);
            } else {
                node = match kids[node][bit] {
                    Child::Node(n) => n as usize,
                    _ => {
                        let n = kids.len();
                        kids.push([Child::Empty; 2]);
                        let (all, depth) = ones[node];
                        ones.push((all && bit == 1, depth + 1));
                        kids[node][bit] = Child::Node(n as u16);
                        n
                    }
                };
            }
        }
    }
    let mut steps = vec![[Step::default(); 16]; kids.len()];
    for (state, row) in steps.iter_mut().enumerate() {
        for (nibble, step) in row.iter_mut().enumerate() {
            let (mut node, mut sym, mut fail) = (state, NONE, false);
            for i in (0..4).rev() {
                match kids[node][(nibble >> i) & 1] {
                    Child::Node(n) => node = n as usize,
                    Child::Leaf(EOS) | Child::Empty => {
                        fail = true;
                        break;
                    }
                    Child::Leaf(s) => {
                        sym = s;
                        node = 0;
                    }
                }
            }
            *step = Step {
                next: node as u8,
                sym,
                fail,
            };
        }
    }
    let accepts = ones.iter().map(|&(all, depth)| all && depth <= 7).collect();
    Table { steps, accepts }
}

/// A string that is not a valid Huffman encoding.
#[derive(Debug, PartialEq, Eq)]
pub struct Invalid;

/// Appends the decoding of `src` to `dst`.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), Invalid> {
    let t = table();
    let mut state = 0usize;
    dst.reserve(src.len() * 8 / 5);
    for &b in src {
        for nibble in [b >> 4, b & 0xf] {
            let step = t.steps[state][nibble as usize];
            if step.fail {
                return Err(Invalid);
            }
            if step.sym != NONE {
                dst.push(step.sym as u8);
            }
            state = step.next as usize;
        }
    }
    // A state that completed no symbol in its last 8 bits would be 8+ bits of padding: the
    // accepting states are at most 7 ones deep, and the root after a completed symbol.
    if !t.accepts[state] {
        return Err(Invalid);
    }
    Ok(())
}

/// Appends the encoding of `src` to `dst`, padded with ones (RFC 7541 §5.2).
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let codes = codes();
    let (mut acc, mut bits) = (0u64, 0u32);
    for &b in src {
        let (code, len) = codes[b as usize];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        dst.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // RFC 7541 Appendix C.4 and C.6.
    #[test]
    fn rfc_examples() {
        for (enc, text) in [
            ("f1e3c2e5f23a6ba0ab90f4ff", "www.example.com"),
            ("a8eb10649cbf", "no-cache"),
            ("25a849e95ba97d7f", "custom-key"),
            ("25a849e95bb8e8b4bf", "custom-value"),
        ] {
            let mut out = Vec::new();
            decode(&hex(enc), &mut out).unwrap();
            assert_eq!(out, text.as_bytes());
            let mut back = Vec::new();
            encode(text.as_bytes(), &mut back);
            assert_eq!(back, hex(enc));
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut enc = Vec::new();
        encode(&all, &mut enc);
        let mut out = Vec::new();
        decode(&enc, &mut out).unwrap();
        assert_eq!(out, all);
        // and each alone, so every padding length is seen
        for b in 0..=255u8 {
            let mut enc = Vec::new();
            encode(&[b, b, b], &mut enc);
            let mut out = Vec::new();
            decode(&enc, &mut out).unwrap();
            assert_eq!(out, [b, b, b]);
        }
    }

    // RFC 7541 §5.2: padding over 7 bits, padding not of ones, and EOS are errors.
    #[test]
    fn bad_padding_and_eos() {
        let mut out = Vec::new();
        assert_eq!(decode(&[0x1f], &mut out), Ok(())); // 'a' (00011) + 111
        assert_eq!(decode(&[0x18], &mut out), Err(Invalid)); // 'a' + 000
        assert_eq!(decode(&[0x1f, 0xff], &mut out), Err(Invalid)); // 11 bits of padding
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xff], &mut out), Err(Invalid)); // EOS
        assert_eq!(decode(&[], &mut out), Ok(()));
    }
}
