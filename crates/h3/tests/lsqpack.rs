//! Interop: field sections that ls-qpack (a real encoder, through pylsqpack) wrote with a
//! 4096-byte dynamic table, decoded by our decoder to exactly the fields it was given. The
//! vectors and the script that made them are in `tests/data/`.

use linerate_h3::qpack::Decoder;

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

#[test]
fn lsqpack_sections_decode() {
    let text = include_str!("data/lsqpack.txt");
    let mut d = Decoder::new(4096);
    let mut want: Fields = Vec::new();
    let mut got: Option<Fields> = None;
    let (mut sections, mut dynamic) = (0, 0);
    let check = |got: &mut Option<Fields>, want: &mut Fields| {
        if let Some(g) = got.take() {
            assert_eq!(&g, want);
        }
        want.clear();
    };
    for line in text.lines() {
        let parts: Vec<&str> = line.split(' ').collect();
        match parts[0] {
            "enc" => d.encoder_stream(&unhex(parts[1])).unwrap(),
            "sec" => {
                check(&mut got, &mut want);
                let mut fields = Vec::new();
                let r = d
                    .decode(&unhex(parts[2]), |n, v| {
                        fields.push((n.to_vec(), v.to_vec()))
                    })
                    .unwrap_or_else(|e| panic!("stream {}: {e:?}", parts[1]));
                sections += 1;
                dynamic += usize::from(r.required_insert_count > 0);
                got = Some(fields);
            }
            "field" => want.push((unhex(parts[1]), unhex(parts[2]))),
            other => panic!("unknown line {other}"),
        }
    }
    check(&mut got, &mut want);
    assert_eq!(sections, 60);
    // The vectors exercise the dynamic table, not only the static one.
    assert!(
        dynamic > 30,
        "{dynamic} of {sections} sections used the dynamic table"
    );
    assert!(d.insert_count() > 10, "{} inserts", d.insert_count());
}
