//! Fuzzes the HPACK decoder (crates/hpack) over arbitrary bytes: as one header block on a fresh
//! decoder (twice: the same verdict and fields), as two blocks on one decoder (the table carried
//! between them), never a panic and never a dynamic table over its limit; and the Huffman code:
//! every byte string encodes and decodes back to itself.
#![no_main]

use linerate_hpack::{Decoder, HEADER_TABLE_SIZE, huffman};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn block(d: &mut Decoder, data: &[u8]) -> (bool, Fields) {
    let mut fields = Vec::new();
    let ok = d
        .decode(data, |n, v| fields.push((n.to_vec(), v.to_vec())))
        .is_ok();
    assert!(d.table_size() <= HEADER_TABLE_SIZE, "table over its limit");
    (ok, fields)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let first = block(&mut Decoder::new(), data);
    assert_eq!(
        first,
        block(&mut Decoder::new(), data),
        "the same block, the same answer"
    );
    let mid = data.len() / 2;
    let mut d = Decoder::new();
    block(&mut d, &data[..mid]);
    block(&mut d, &data[mid..]);

    let mut enc = Vec::new();
    huffman::encode(data, &mut enc);
    let mut dec = Vec::new();
    huffman::decode(&enc, &mut dec).expect("an encoding of ours decodes");
    assert_eq!(dec, data, "Huffman round trip");
});
