//! Fuzzes the QPACK decoder (crates/h3) over arbitrary bytes: the first byte picks the table
//! capacity and how many of the following bytes are encoder-stream instructions; the rest is
//! one field section. The encoder stream fed whole and a byte at a time leaves the same table
//! (or fails the same), the table never exceeds its capacity, and the section decodes to the
//! same verdict and fields twice.
#![no_main]

use linerate_h3::qpack::Decoder;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn section(d: &mut Decoder, s: &[u8]) -> (String, Fields) {
    let mut fields = Vec::new();
    let r = d.decode(s, |n, v| fields.push((n.to_vec(), v.to_vec())));
    (format!("{r:?}"), fields)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let capacity = [0, 64, 220, 4096][usize::from(first & 3)];
    let split = (usize::from(first >> 2) * 4).min(rest.len());
    let (encoder, sec) = rest.split_at(split);

    let mut whole = Decoder::new(capacity);
    let a = whole.encoder_stream(encoder);
    let mut bytewise = Decoder::new(capacity);
    let b = encoder
        .iter()
        .try_for_each(|byte| bytewise.encoder_stream(std::slice::from_ref(byte)));
    assert_eq!(
        a, b,
        "the encoder stream's verdict, whole and a byte at a time"
    );
    assert!(whole.table_size() <= capacity && bytewise.table_size() <= capacity);
    if a.is_ok() {
        assert_eq!(whole.insert_count(), bytewise.insert_count());
        assert_eq!(whole.table_size(), bytewise.table_size());
    }
    let one = section(&mut whole, sec);
    assert_eq!(
        one,
        section(&mut bytewise, sec),
        "the same table decodes the same"
    );
    assert_eq!(one, section(&mut whole, sec), "a section changes no table");
});
