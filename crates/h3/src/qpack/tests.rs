//! QPACK byte tables: RFC 9204 Appendix B's examples run as one connection, every encoder
//! output decoded back, and the refusals, each with its error.

use super::table::{STATIC, lookup};
use super::*;
use crate::Code;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decode(d: &mut Decoder, section: &[u8]) -> Result<(Fields, u64), DecodeError> {
    let mut fields = Vec::new();
    let r = d.decode(section, |n, v| fields.push((n.to_vec(), v.to_vec())))?;
    Ok((fields, r.required_insert_count))
}

fn f(n: &str, v: &str) -> (Vec<u8>, Vec<u8>) {
    (n.as_bytes().to_vec(), v.as_bytes().to_vec())
}

/// Appendix B, B.1 to B.5, on one decoder (a 220-byte table). The encoder stream is fed
/// whole and a byte at a time: the same table either way.
#[test]
fn rfc9204_appendix_b() {
    for bytewise in [false, true] {
        let mut d = Decoder::new(220);
        let feed = |d: &mut Decoder, s: &str| {
            let b = hex(s);
            if bytewise {
                for byte in &b {
                    d.encoder_stream(std::slice::from_ref(byte)).unwrap();
                }
            } else {
                d.encoder_stream(&b).unwrap();
            }
        };
        // B.1: a literal with a static name reference.
        let (fields, ric) = decode(&mut d, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c")).unwrap();
        assert_eq!((fields, ric), (vec![f(":path", "/index.html")], 0));

        // B.2: capacity 220, two inserts; a section of post-base references, blocked until
        // both inserts arrive.
        let section = hex("0381 10 11");
        assert_eq!(decode(&mut d, &section), Err(DecodeError::Blocked(2)));
        feed(
            &mut d,
            "3fbd01 c00f 7777 772e 6578 616d 706c 652e 636f 6d c10c 2f73 616d 706c 652f 7061 7468",
        );
        assert_eq!(d.insert_count(), 2);
        assert_eq!(d.table_size(), 106);
        let (fields, ric) = decode(&mut d, &section).unwrap();
        assert_eq!(
            fields,
            vec![
                f(":authority", "www.example.com"),
                f(":path", "/sample/path")
            ]
        );
        assert_eq!(ric, 2);
        let mut out = Vec::new();
        write_section_ack(&mut out, 4);
        assert_eq!(out, hex("84"));
        // The acknowledgment told the encoder of both inserts: no increment is owed.
        out.clear();
        d.write_increment(&mut out);
        assert_eq!(out, b"");

        // B.3: a speculative insert with a literal name; one increment owed.
        feed(
            &mut d,
            "4a63 7573 746f 6d2d 6b65 790c 6375 7374 6f6d 2d76 616c 7565",
        );
        assert_eq!(d.table_size(), 160);
        d.write_increment(&mut out);
        assert_eq!(out, hex("01"));

        // B.4: a duplicate of the oldest entry, then a section with relative references.
        feed(&mut d, "02");
        assert_eq!(d.table_size(), 217);
        let (fields, ric) = decode(&mut d, &hex("0500 80 c1 81")).unwrap();
        assert_eq!(
            fields,
            vec![
                f(":authority", "www.example.com"),
                f(":path", "/"),
                f("custom-key", "custom-value"),
            ]
        );
        assert_eq!(ric, 4);
        out.clear();
        write_stream_cancellation(&mut out, 8);
        assert_eq!(out, hex("48"));

        // B.5: an insert naming a dynamic entry evicts the oldest.
        feed(&mut d, "810d 6375 7374 6f6d 2d76 616c 7565 32");
        assert_eq!(d.table_size(), 215);
        assert_eq!(d.insert_count(), 5);
        out.clear();
        d.write_increment(&mut out);
        assert_eq!(out, hex("01"));
        // The evicted entry (absolute 0) cannot be referred to any more; the newest can.
        // Required Insert Count 5 encodes as 5 % 12 + 1 = 6, Base 5.
        assert_eq!(decode(&mut d, &hex("0600 84")), Err(DecodeError::Failed));
        let (fields, _) = decode(&mut d, &hex("0600 80")).unwrap();
        assert_eq!(fields, vec![f("custom-key", "custom-value2")]);
    }
}

/// Every representation the encoder writes decodes back, on a decoder without a table.
#[test]
fn encoder_round_trip() {
    let mut out = Vec::new();
    encode::prefix(&mut out);
    let mut want = Vec::new();
    for code in [
        100, 103, 200, 204, 206, 302, 304, 400, 403, 404, 421, 425, 500, 503, 201, 418, 599,
    ] {
        encode::status(&mut out, code);
        want.push(f(":status", &code.to_string()));
    }
    let cases = [
        ("content-type", "application/json"), // a whole static entry
        ("content-type", "text/plain; charset=utf-8"), // a static name
        ("content-length", "0"),
        ("content-length", "1234"),
        ("server", "linerate"),
        ("x-frame-options", "sameorigin"),
        ("x-custom-field-with-a-long-name", "v"), // a literal name over the 3-bit prefix
        ("a", ""),
    ];
    for (n, v) in cases {
        encode::field(&mut out, n.as_bytes(), v.as_bytes());
        want.push(f(n, v));
    }
    assert_eq!(decode(&mut Decoder::new(0), &out).unwrap(), (want, 0));
    // Whole static matches are one byte: `:status 200` and `content-type: application/json`.
    let mut one = Vec::new();
    encode::status(&mut one, 200);
    encode::field(&mut one, b"content-type", b"application/json");
    assert_eq!(one, [0xd9, 0xee]);
}

/// A request's pseudo-headers (RFC 9114 §4.3.1): whole static entries where the table has
/// them (RFC 9204 Appendix A: GET 17, POST 20, http 22, https 23, `/` 1), else the name by
/// its static index and the value literal; each row decodes back in order.
#[test]
fn request_pseudo_headers() {
    type Row<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str);
    let rows: &[Row] = &[
        // (method, scheme, authority, path, the section after its prefix, in hex)
        ("GET", "https", "a", "/", "d1 d7 50 01 61 c1"),
        ("POST", "http", "a", "/", "d4 d6 50 01 61 c1"),
        ("HEAD", "https", "ab", "/x", "d2 d7 50 02 61 62 51 02 2f 78"),
        (
            "PATCH",
            "https",
            "a",
            "/",
            "5f 00 05 50 41 54 43 48 d7 50 01 61 c1",
        ),
    ];
    for &(method, scheme, authority, path, bytes) in rows {
        let mut out = Vec::new();
        encode::prefix(&mut out);
        let at = out.len();
        encode::request(
            &mut out,
            method.as_bytes(),
            scheme.as_bytes(),
            authority.as_bytes(),
            path.as_bytes(),
        );
        assert_eq!(out[at..], hex(bytes)[..], "{method} {path}");
        let want = vec![
            f(":method", method),
            f(":scheme", scheme),
            f(":authority", authority),
            f(":path", path),
        ];
        assert_eq!(decode(&mut Decoder::new(0), &out).unwrap(), (want, 0));
    }
}

/// The encoder's look-up agrees with the table: every name is found at its first index,
/// and every entry with a value is matched whole.
#[test]
fn static_lookup_matches_the_table() {
    for (i, &(name, value)) in STATIC.iter().enumerate() {
        let (first, entries) = lookup(name).expect("every static name");
        assert_eq!(STATIC[first as usize].0, name);
        assert!(first as usize <= i);
        if !value.is_empty() {
            let hit = entries.iter().find(|(v, _)| *v == value).map(|e| e.1);
            assert_eq!(hit.map(|h| STATIC[h as usize]), Some((name, value)), "{i}");
        }
    }
    assert_eq!(lookup(b"x-not-there"), None);
}

/// Field sections refused: each is QPACK_DECOMPRESSION_FAILED, or blocked.
#[test]
fn refused_sections() {
    let cases: &[(&str, &[u8], Result<(), DecodeError>)] = &[
        ("empty: no prefix", b"", Err(DecodeError::Failed)),
        (
            "prefix cut after the count",
            &[0x00],
            Err(DecodeError::Failed),
        ),
        (
            "static index 100",
            &[0x00, 0x00, 0xff, 0x25],
            Err(DecodeError::Failed),
        ),
        (
            "static index 99, past the table",
            &[0x00, 0x00, 0xff, 0x24],
            Err(DecodeError::Failed),
        ),
        ("static 98 is the last", &[0x00, 0x00, 0xff, 0x23], Ok(())),
        (
            "dynamic reference with no table",
            &[0x00, 0x00, 0x80],
            Err(DecodeError::Failed),
        ),
        (
            "post-base reference with no table",
            &[0x00, 0x00, 0x10],
            Err(DecodeError::Failed),
        ),
        (
            "a count with no table",
            &[0x01, 0x00],
            Err(DecodeError::Failed),
        ),
        (
            "literal value cut",
            &[0x00, 0x00, 0x51, 0x05, b'a'],
            Err(DecodeError::Failed),
        ),
        (
            "literal name cut",
            &[0x00, 0x00, 0x23, b'a'],
            Err(DecodeError::Failed),
        ),
        (
            "bad Huffman value",
            &[0x00, 0x00, 0x51, 0x81, 0x00],
            Err(DecodeError::Failed),
        ),
        (
            "integer too long",
            &[
                0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            Err(DecodeError::Failed),
        ),
        ("index cut", &[0x00, 0x00, 0xff], Err(DecodeError::Failed)),
    ];
    for (what, section, want) in cases {
        let got = decode(&mut Decoder::new(0), section).map(|_| ());
        assert_eq!(&got, want, "{what}");
    }
    // With a 4096-byte table (128 entries, FullRange 256): counts past FullRange, a count
    // that wraps to 0, a Base below 0, and a section ahead of the inserts.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &[0xff, 0x02, 0x00]),
        Err(DecodeError::Failed)
    ); // 257
    assert_eq!(decode(&mut d, &[0x02, 0x82]), Err(DecodeError::Failed)); // Base -2
    assert_eq!(
        decode(&mut d, &[0x02, 0x00, 0x80]),
        Err(DecodeError::Blocked(1))
    );
    // MaxValue 128: an encoded count whose Required Insert Count would be past it and
    // below FullRange cannot come from a conformant encoder.
    assert_eq!(
        decode(&mut d, &[0xff, 0x01, 0x00]),
        Err(DecodeError::Failed)
    ); // 256 - 1
}

/// Encoder stream refusals: each a QPACK_ENCODER_STREAM_ERROR.
#[test]
fn refused_encoder_instructions() {
    let err = Err(Code::QpackEncoderStreamError);
    let cases: &[(&str, usize, &str)] = &[
        ("capacity over the maximum", 100, "3f46"),
        ("any capacity with no table", 0, "21"),
        ("an insert with capacity 0", 100, "c0 01 61"),
        ("static name index past the table", 100, "3f45 ff24 01 61"),
        ("relative name with an empty table", 100, "3f45 80 01 61"),
        ("duplicate of nothing", 100, "3f45 00"),
        ("bad Huffman name", 100, "3f45 61 00 00 01 61"),
    ];
    for (what, cap, bytes) in cases {
        let mut d = Decoder::new(*cap);
        assert_eq!(d.encoder_stream(&hex(bytes)), err, "{what}");
    }
    // An entry larger than the capacity: 64 < 10 + 30 + 32.
    let mut big = hex("3f21 c0 1e");
    big.extend_from_slice(&[b'a'; 30]);
    assert_eq!(Decoder::new(100).encoder_stream(&big), err);
    // Capacity 0 itself is fine with no table.
    assert_eq!(Decoder::new(0).encoder_stream(&[0x20]), Ok(()));
    // An instruction that stays partial past anything that could fit the table.
    let mut d = Decoder::new(64);
    d.encoder_stream(&hex("3f21")).unwrap();
    let mut long = hex("5f ffffff"); // a name length far past 4 × 64
    long.extend_from_slice(&[b'a'; 400]);
    assert_eq!(d.encoder_stream(&long), err);
    // Lowering the capacity evicts.
    let mut d = Decoder::new(100);
    d.encoder_stream(&hex("3f45 c0 01 61")).unwrap(); // :authority: a = 43 bytes
    assert_eq!(d.table_size(), 43);
    d.encoder_stream(&hex("3f0b")).unwrap(); // capacity 42
    assert_eq!(d.table_size(), 0);
}

/// The decoder stream of an encoder that never inserts: only Stream Cancellations.
#[test]
fn decoder_stream_for_a_stateless_encoder() {
    assert_eq!(read_decoder_stream(&hex("48 7f 01")), Ok(3));
    assert_eq!(read_decoder_stream(&hex("48 7f")), Ok(1)); // the rest is split
    assert_eq!(
        read_decoder_stream(&hex("84")),
        Err(Code::QpackDecoderStreamError)
    );
    assert_eq!(
        read_decoder_stream(&hex("01")),
        Err(Code::QpackDecoderStreamError)
    );
    assert_eq!(
        read_decoder_stream(&hex("00")),
        Err(Code::QpackDecoderStreamError)
    );
}

/// A QPACK bomb: the encoder stream inserts a 4,000-byte value, then one section names it
/// 16,000 times (about 64 MB decoded). Past the limit no field is handed out; the section is
/// still read to its end (a bad reference after the limit fails it all the same).
#[test]
fn a_bomb_stops_at_the_limit() {
    use linerate_hpack::integer;
    let mut d = Decoder::new(4096);
    let mut enc = Vec::new();
    integer(&mut enc, 0x20, 5, 4096); // Set Dynamic Table Capacity
    integer(&mut enc, 0x40, 5, 6); // Insert with Literal Name
    enc.extend_from_slice(b"x-bomb");
    integer(&mut enc, 0, 7, 4000);
    enc.extend_from_slice(&[b'a'; 4000]);
    d.encoder_stream(&enc).unwrap();
    // Required Insert Count 1 (encoded 2 with 128 entries at most), Base 1.
    let mut section = vec![0x02, 0x00];
    section.extend(std::iter::repeat_n(0x80, 16_000));
    let mut handed = 0;
    let got = d
        .decode_within(&section, 16_384, |_, _| handed += 1)
        .unwrap();
    assert_eq!(got.list, ListSize::Over);
    assert_eq!(got.required_insert_count, 1);
    assert_eq!(handed, 4); // 4,038 each: four fit in 16 KiB
    let within = d.decode_within(&section[..3], 16_384, |_, _| {}).unwrap();
    assert_eq!(within.list, ListSize::Within(4038));
    // A reference to an entry never inserted, after the limit: still refused.
    section.push(0x81);
    assert_eq!(
        d.decode_within(&section, 16_384, |_, _| {}),
        Err(DecodeError::Failed)
    );
}
