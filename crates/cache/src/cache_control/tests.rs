//! Table tests for the Cache-Control reader, each row citing its rule, and property tests over
//! generated lines (a fixed-seed generator: the same cases every run).

use super::*;

fn response(lines: &[&str]) -> ResponseDirectives {
    let fields: Vec<(&[u8], &[u8])> = lines
        .iter()
        .map(|l| (&b"Cache-Control"[..], l.as_bytes()))
        .collect();
    ResponseDirectives::parse(&fields)
}

fn request(lines: &[(&str, &str)]) -> RequestDirectives {
    let fields: Vec<(&[u8], &[u8])> = lines
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    RequestDirectives::parse(&fields)
}

#[test]
fn response_max_age_table() {
    use Delta::*;
    let rows: &[(&[&str], Delta, &str)] = &[
        (&["max-age=3600"], Secs(3600), "§5.2.2.1"),
        (
            &["MAX-AGE=60"],
            Secs(60),
            "§5.2: names are case-insensitive",
        ),
        (
            &["max-age=003600"],
            Secs(3600),
            "§1.2.2: 1*DIGIT, leading zeros",
        ),
        (
            &["max-age=\"3600\""],
            Secs(3600),
            "§5.2: accept the quoted form too",
        ),
        (
            &["max-age='3600'"],
            Invalid,
            "§1.2.2: single quotes are not digits",
        ),
        (&["max-age=3600.0"], Invalid, "§1.2.2: no decimals"),
        (&["max-age=3600a"], Invalid, "§1.2.2: trailing alpha"),
        (&["max-age=a3600"], Invalid, "§1.2.2: leading alpha"),
        (&["max-age=-1"], Invalid, "§1.2.2: no sign"),
        (&["max-age="], Invalid, "§5.2: an empty argument"),
        (&["max-age"], Invalid, "§5.2.2.1: the argument is required"),
        (&["max-age =3600"], Invalid, "§5.2: no space before ="),
        (&["max-age= 3600"], Invalid, "§5.2: no space after ="),
        (
            &["max-age=99999999999999999999"],
            Secs(MAX_DELTA),
            "§1.2.2: saturate at 2^31",
        ),
        (&["max-age=2147483648"], Secs(MAX_DELTA), "§1.2.2"),
        (
            &["max-age=1, max-age=1"],
            Secs(1),
            "§4.2.1: repeats that agree",
        ),
        (
            &["max-age=3600, max-age=1"],
            Invalid,
            "§4.2.1: conflicting repeats read as stale",
        ),
        (
            &["max-age=1", "max-age=3600"],
            Invalid,
            "§4.2.1: across lines too",
        ),
        (
            &["extension=\"max-age=3600\", max-age=1"],
            Secs(1),
            "§5.2: inside a quoted string is no directive",
        ),
        (&["max-age=1, extension=\"max-age=3600\""], Secs(1), "§5.2"),
        (
            &["foo=\"a,max-age=9\"", "max-age=5"],
            Secs(5),
            "§5.6.4 RFC 9110: commas in quotes",
        ),
        (
            &["", " , ,max-age=7,"],
            Secs(7),
            "RFC 9110 §5.6.1: empty elements ignored",
        ),
        (&["max-age=7;x"], Invalid, "§5.2: not a directive"),
        (&["no-store"], Absent, "absent"),
    ];
    for (lines, want, rule) in rows {
        assert_eq!(response(lines).max_age, *want, "{lines:?} ({rule})");
    }
}

#[test]
fn response_flags_table() {
    type Check = fn(&ResponseDirectives) -> bool;
    let rows: &[(&str, Check, &str)] = &[
        ("no-store", |d| d.no_store, "§5.2.2.5"),
        (
            "no-store=1",
            |d| d.no_store,
            "malformed no-store still restricts",
        ),
        (
            "no-store x",
            |d| d.no_store,
            "malformed no-store still restricts",
        ),
        ("private", |d| d.private, "§5.2.2.7"),
        (
            "private=\"Set-Cookie\"",
            |d| d.private,
            "§5.2.2.7: qualified read as whole",
        ),
        ("no-cache", |d| d.no_cache, "§5.2.2.4"),
        (
            "no-cache=\"Set-Cookie, X\"",
            |d| d.no_cache,
            "§5.2.2.4: qualified read as whole",
        ),
        ("must-revalidate", |d| d.must_revalidate, "§5.2.2.2"),
        ("proxy-revalidate", |d| d.proxy_revalidate, "§5.2.2.8"),
        ("public", |d| d.public, "§5.2.2.9"),
        (
            "public=1",
            |d| !d.public,
            "a malformed grant grants nothing",
        ),
        ("must-understand", |d| d.must_understand, "§5.2.2.3"),
        (
            "must-understand=x",
            |d| !d.must_understand,
            "a malformed grant grants nothing",
        ),
        ("NO-STORE", |d| d.no_store, "§5.2: case-insensitive"),
        ("no-transform", |d| d.no_transform, "§5.2.2.6"),
        ("No-Transform", |d| d.no_transform, "§5.2: case-insensitive"),
        (
            "no-transforms, no-stores, publics",
            |d| !d.no_transform && !d.no_store && !d.public,
            "a longer name is another directive",
        ),
        (
            "MUST-UNDERSTAND",
            |d| d.must_understand,
            "§5.2: case-insensitive",
        ),
        (
            "x-no-store",
            |d| !d.no_store,
            "§5.2.3: unknown directives are ignored",
        ),
        (
            "\"no-store\"",
            |d| !d.no_store,
            "a quoted string is not a directive",
        ),
        ("s-maxage=5", |d| d.s_maxage == Delta::Secs(5), "§5.2.2.10"),
        (
            "stale-while-revalidate=30",
            |d| d.stale_while_revalidate == Delta::Secs(30),
            "RFC 5861 §3",
        ),
        (
            "stale-if-error=60",
            |d| d.stale_if_error == Delta::Secs(60),
            "RFC 5861 §4",
        ),
        (
            "stale-if-error=60, stale-if-error=5",
            |d| d.stale_if_error == Delta::Invalid,
            "conflicting repeats grant nothing",
        ),
    ];
    for (line, check, rule) in rows {
        assert!(check(&response(&[line])), "{line:?} ({rule})");
    }
}

#[test]
fn request_directives_table() {
    type Row<'a> = (&'a [(&'a str, &'a str)], RequestDirectives, &'a str);
    let rows: &[Row] = &[
        (
            &[("Cache-Control", "max-age=5")],
            RequestDirectives {
                max_age: Some(5),
                ..Default::default()
            },
            "§5.2.1.1",
        ),
        (
            &[("Cache-Control", "max-age=x")],
            RequestDirectives {
                max_age: Some(0),
                ..Default::default()
            },
            "malformed: strictest reading",
        ),
        (
            &[("Cache-Control", "max-age=9, max-age=3")],
            RequestDirectives {
                max_age: Some(3),
                ..Default::default()
            },
            "repeats: strictest reading",
        ),
        (
            &[("Cache-Control", "max-stale")],
            RequestDirectives {
                max_stale: Some(MAX_DELTA),
                ..Default::default()
            },
            "§5.2.1.2: no value, any staleness",
        ),
        (
            &[("Cache-Control", "max-stale=10")],
            RequestDirectives {
                max_stale: Some(10),
                ..Default::default()
            },
            "§5.2.1.2",
        ),
        (
            &[("Cache-Control", "max-stale=1x, max-stale")],
            RequestDirectives {
                max_stale: Some(0),
                ..Default::default()
            },
            "malformed max-stale grants nothing",
        ),
        (
            &[("Cache-Control", "min-fresh=20")],
            RequestDirectives {
                min_fresh: Some(20),
                ..Default::default()
            },
            "§5.2.1.3",
        ),
        (
            &[("Cache-Control", "min-fresh=-2")],
            RequestDirectives {
                min_fresh: Some(MAX_DELTA),
                ..Default::default()
            },
            "malformed: strictest reading",
        ),
        (
            &[("Cache-Control", "no-cache, no-store, only-if-cached")],
            RequestDirectives {
                no_cache: true,
                no_store: true,
                only_if_cached: true,
                ..Default::default()
            },
            "§5.2.1.4, §5.2.1.5, §5.2.1.7",
        ),
        (
            &[("Pragma", "no-cache")],
            RequestDirectives {
                no_cache: true,
                ..Default::default()
            },
            "§5.4: Pragma without Cache-Control",
        ),
        (
            &[("Pragma", "no-cache"), ("Cache-Control", "max-age=5")],
            RequestDirectives {
                max_age: Some(5),
                ..Default::default()
            },
            "§5.4: Cache-Control present, Pragma ignored",
        ),
        (
            &[("Cache-Control", "stale-if-error=30")],
            RequestDirectives {
                stale_if_error: Some(30),
                ..Default::default()
            },
            "RFC 5861 §4",
        ),
    ];
    for (fields, want, rule) in rows {
        assert_eq!(request(fields), *want, "{fields:?} ({rule})");
    }
}

/// A small fixed-seed generator (xorshift64*): property tests without a dependency, the same
/// inputs on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// Lines made of pieces that matter to the grammar: names, quotes, escapes, commas, OWS.
fn generated_lines(count: usize) -> Vec<String> {
    const PIECES: &[&str] = &[
        "max-age",
        "s-maxage",
        "no-store",
        "private",
        "public",
        "no-cache",
        "=",
        "\"",
        "\\",
        ",",
        " ",
        "\t",
        "1",
        "0",
        "2147483648",
        "99999999999",
        "a",
        "'",
        ";",
        "max-stale",
        "min-fresh",
        "must-revalidate",
        "\u{e9}",
        "\0",
    ];
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    (0..count)
        .map(|_| {
            let n = g.next() % 12;
            (0..n).map(|_| g.pick(PIECES)).collect()
        })
        .collect()
}

/// The reader `items` replaced (three passes an element), kept as the oracle its one pass
/// must agree with.
fn reference_items(line: &[u8]) -> Vec<Item<'_>> {
    fn item(element: &[u8]) -> Item<'_> {
        let name_len = element
            .iter()
            .position(|b| !is_tchar(*b))
            .unwrap_or(element.len());
        let name = &element[..name_len];
        let rest = &element[name_len..];
        let malformed = Item::Malformed { name };
        if name.is_empty() {
            return malformed;
        }
        let Some(after_eq) = rest.strip_prefix(b"=") else {
            return if rest.iter().all(|b| is_ows(*b)) {
                Item::Directive { name, arg: None }
            } else {
                malformed
            };
        };
        let (arg, tail) = if let Some(q) = after_eq.strip_prefix(b"\"") {
            let Some(close) = quoted_end(q) else {
                return malformed;
            };
            (Arg::Quoted(&q[..close]), &q[close + 1..])
        } else {
            let len = after_eq
                .iter()
                .position(|b| !is_tchar(*b))
                .unwrap_or(after_eq.len());
            if len == 0 {
                return malformed;
            }
            (Arg::Token(&after_eq[..len]), &after_eq[len..])
        };
        if tail.iter().all(|b| is_ows(*b)) {
            Item::Directive {
                name,
                arg: Some(arg),
            }
        } else {
            malformed
        }
    }
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.iter().position(|b| !is_ows(*b) && *b != b',') {
        rest = &rest[start..];
        let end = element_end(rest);
        out.push(item(&rest[..end]));
        rest = rest.get(end + 1..).unwrap_or(&[]);
    }
    out
}

#[test]
fn property_one_pass_items_read_as_the_three_pass_reader_did() {
    for line in generated_lines(50_000) {
        let bytes = line.as_bytes();
        assert_eq!(
            items(bytes).collect::<Vec<_>>(),
            reference_items(bytes),
            "{line:?}"
        );
    }
}

#[test]
fn property_items_never_panic_and_stay_inside_the_line() {
    for line in generated_lines(20_000) {
        let bytes = line.as_bytes();
        let range = bytes.as_ptr_range();
        for item in items(bytes) {
            let name = match item {
                Item::Directive { name, arg } => {
                    if let Some(Arg::Token(a) | Arg::Quoted(a)) = arg {
                        assert!(range.contains(&a.as_ptr()) || a.is_empty(), "{line:?}");
                    }
                    assert!(!name.is_empty(), "{line:?}");
                    name
                }
                Item::Malformed { name } => name,
            };
            assert!(name.iter().all(|b| is_tchar(*b)), "{line:?}");
        }
        let _ = response(&[&line]);
        let _ = request(&[("cache-control", &line)]);
    }
}

#[test]
fn property_split_across_lines_at_commas_reads_the_same() {
    // RFC 9110 §5.3: a list field's lines combine with commas; splitting a line at a comma
    // that is outside quotes (an element boundary) must not change the directives.
    for line in generated_lines(20_000) {
        let bytes = line.as_bytes();
        let end = element_end(bytes);
        if end >= bytes.len() {
            continue;
        }
        let (a, b) = (&line[..end], &line[end + 1..]);
        assert_eq!(response(&[&line]), response(&[a, b]), "{line:?}");
        assert_eq!(
            request(&[("cache-control", &line)]),
            request(&[("cache-control", a), ("cache-control", b)]),
            "{line:?}"
        );
    }
}

#[test]
fn property_restricting_directives_are_never_lost_by_adding_elements() {
    // Appending any element to a line that has no-store / private / no-cache keeps them: a
    // later element cannot undo a restriction.
    for line in generated_lines(5_000) {
        for restrict in ["no-store", "private", "no-cache", "must-revalidate"] {
            let d = response(&[&format!("{restrict}, {line}")]);
            let kept = match restrict {
                "no-store" => d.no_store,
                "private" => d.private,
                "no-cache" => d.no_cache,
                _ => d.must_revalidate,
            };
            // Unless the generated tail opens a quoted string that swallows nothing before it:
            // the restriction comes first, so it is always its own element.
            assert!(kept, "{restrict}, {line:?}");
        }
    }
}

#[test]
fn property_max_age_is_valid_only_for_digits() {
    let mut g = Gen(7);
    for _ in 0..10_000 {
        let n = g.next() % 6;
        let arg: String = (0..n)
            .map(|_| g.pick(&["0", "7", "9", "a", "-", ".", " ", "\"", "+"]))
            .collect();
        let got = response(&[&format!("max-age={arg}")]).max_age;
        // OWS may end an element (RFC 9110 §5.6.1); it is not part of the argument.
        let arg = arg.trim_end_matches(' ');
        let digits = !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit());
        let quoted_digits = arg.len() > 2
            && arg.starts_with('"')
            && arg.ends_with('"')
            && arg[1..arg.len() - 1].bytes().all(|b| b.is_ascii_digit());
        let valid = matches!(got, Delta::Secs(_));
        assert_eq!(valid, digits || quoted_digits, "max-age={arg:?} -> {got:?}");
        if let Delta::Secs(s) = got {
            assert!(s <= MAX_DELTA);
        }
    }
}
