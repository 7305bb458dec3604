//! Lifetime, age and reuse, one row per rule of RFC 9111 §4.2 and RFC 5861.

use super::*;
use crate::entry::Entry;
use crate::facts::Request;
use crate::fields::Field;
use crate::key::{Key, Variant};
use crate::{Heuristic, Response};

/// The instant every test response was received (and, unless a row says otherwise, dated).
const T0: Time = Time(1_700_000_000);

fn date(t: Time) -> String {
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.0))
}

fn entry(fields: &[(&str, String)], timing: Timing) -> Entry {
    let fields: Vec<Field> = fields
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    let key = Key::new(b"http", b"a", b"/").unwrap();
    let resp = Response {
        status: 200,
        fields: &fields,
    };
    Entry::new(key, Variant::default(), &resp, Vec::new().into(), timing)
}

fn at(t: Time) -> Timing {
    Timing {
        request_time: t,
        response_time: t,
    }
}

fn req(cc: &str) -> RequestFacts {
    let fields: &[Field] = &[(b"Cache-Control", cc.as_bytes())];
    let fields = if cc.is_empty() { &[][..] } else { fields };
    RequestFacts::of(&Request {
        method: b"GET",
        scheme: b"http",
        authority: b"a",
        target: b"/",
        fields,
        body: false,
    })
}

fn cc(v: &str) -> (&'static str, String) {
    ("Cache-Control", v.to_string())
}

#[test]
fn lifetime_table() {
    let d = Options::default();
    let h = Options {
        heuristic: Some(Heuristic {
            percent: 10,
            max: 3600,
        }),
        ..Options::default()
    };
    type Row<'a> = (Vec<(&'a str, String)>, &'a Options, u64, &'a str);
    let rows: Vec<Row> = vec![
        (vec![cc("max-age=60")], &d, 60, "§4.2.1: max-age"),
        (
            vec![cc("max-age=60, s-maxage=5")],
            &d,
            5,
            "§4.2.1: s-maxage first in a shared cache",
        ),
        (
            vec![cc("s-maxage=x, max-age=60")],
            &d,
            0,
            "§4.2.1: a malformed s-maxage is stale",
        ),
        (
            vec![cc("max-age=60"), ("Expires", date(Time(T0.0 + 999)))],
            &d,
            60,
            "§4.2.1: max-age over Expires",
        ),
        (
            vec![("Expires", date(Time(T0.0 + 100))), ("Date", date(T0))],
            &d,
            100,
            "§4.2.1: Expires − Date",
        ),
        (
            vec![
                ("Expires", date(Time(T0.0 + 100))),
                ("Date", date(Time(T0.0 - 50))),
            ],
            &d,
            150,
            "§4.2.1: Date from the origin's clock",
        ),
        (
            vec![("Expires", date(Time(T0.0 + 100)))],
            &d,
            100,
            "§4.2.1: no Date, the response time",
        ),
        (
            vec![("Expires", "0".into())],
            &d,
            0,
            "§5.3: invalid is past",
        ),
        (
            vec![("Expires", date(Time(T0.0 - 100))), ("Date", date(T0))],
            &d,
            0,
            "§4.2.1: in the past",
        ),
        (
            vec![
                ("Last-Modified", date(Time(T0.0 - 10_000))),
                ("Date", date(T0)),
            ],
            &d,
            0,
            "§4.2.2: no heuristics by default",
        ),
        (
            vec![
                ("Last-Modified", date(Time(T0.0 - 10_000))),
                ("Date", date(T0)),
            ],
            &h,
            1000,
            "§4.2.2: 10% since Last-Modified",
        ),
        (
            vec![
                ("Last-Modified", date(Time(T0.0 - 1_000_000))),
                ("Date", date(T0)),
            ],
            &h,
            3600,
            "§4.2.2: capped",
        ),
    ];
    for (fields, opts, want, rule) in rows {
        let e = entry(&fields, at(T0));
        assert_eq!(lifetime(&e.facts, T0, opts), want, "{fields:?} ({rule})");
    }
}

#[test]
fn current_age_table() {
    // §4.2.3: corrected_initial_age = max(apparent_age, age_value + response_delay), plus the
    // time resident in this cache.
    let sent = Time(T0.0 - 2);
    let timing = Timing {
        request_time: sent,
        response_time: T0,
    };
    type Row<'a> = (Vec<(&'a str, String)>, Time, u64, &'a str);
    let rows: Vec<Row> = vec![
        (vec![("Date", date(T0))], T0, 2, "response delay counts"),
        (
            vec![("Date", date(T0))],
            Time(T0.0 + 10),
            12,
            "resident time",
        ),
        (
            vec![("Date", date(Time(T0.0 - 30)))],
            T0,
            30,
            "apparent age from Date",
        ),
        (
            vec![("Date", date(Time(T0.0 + 30)))],
            T0,
            2,
            "a Date in the future: apparent age 0",
        ),
        (
            vec![("Date", date(T0)), ("Age", "100".into())],
            T0,
            102,
            "Age + response delay",
        ),
        (
            vec![("Age", "abc".into())],
            T0,
            2,
            "§5.1: invalid Age ignored",
        ),
        (
            vec![],
            Time(T0.0 - 100),
            2,
            "now before the response: no negative resident time",
        ),
    ];
    for (fields, now, want, rule) in rows {
        let e = entry(&fields, timing);
        assert_eq!(
            current_age(&e.facts, e.timing, now),
            want,
            "{fields:?} ({rule})"
        );
    }
    let e = entry(&[("Age", "2147483648".into())], timing);
    assert_eq!(
        age_field(current_age(&e.facts, e.timing, Time(u64::MAX))),
        1 << 31,
        "§1.2.2"
    );
}

#[test]
fn reuse_table() {
    use Reuse::*;
    let d = Options::default();
    let now = |s: u64| Time(T0.0 + s);
    let stale_mr = Validate(Why::Stale {
        must_revalidate: true,
    });
    let stale = Validate(Why::Stale {
        must_revalidate: false,
    });
    let rows: Vec<(&str, &str, u64, Reuse, &str)> = vec![
        (
            "max-age=60",
            "",
            10,
            Fresh { age: 10, ttl: 50 },
            "§4.2: fresh",
        ),
        (
            "max-age=60",
            "",
            60,
            stale,
            "§4.2: fresh only while lifetime > age",
        ),
        (
            "max-age=60",
            "no-cache",
            10,
            Validate(Why::RequestNoCache),
            "§5.2.1.4",
        ),
        (
            "max-age=60, no-cache",
            "",
            10,
            Validate(Why::ResponseNoCache),
            "§5.2.2.4",
        ),
        (
            "max-age=60",
            "max-age=5",
            10,
            Validate(Why::RequestMaxAge),
            "§5.2.1.1",
        ),
        (
            "max-age=60",
            "max-age=10",
            10,
            Fresh { age: 10, ttl: 50 },
            "§5.2.1.1: not older than",
        ),
        (
            "max-age=60",
            "min-fresh=55",
            10,
            Validate(Why::MinFresh),
            "§5.2.1.3",
        ),
        (
            "max-age=60",
            "min-fresh=50",
            10,
            Fresh { age: 10, ttl: 50 },
            "§5.2.1.3",
        ),
        (
            "max-age=60",
            "max-stale=30",
            80,
            StaleAllowed { age: 80, stale: 20 },
            "§5.2.1.2",
        ),
        (
            "max-age=60",
            "max-stale=10",
            80,
            stale,
            "§5.2.1.2: too stale",
        ),
        (
            "max-age=60",
            "max-stale",
            9999,
            StaleAllowed {
                age: 9999,
                stale: 9939,
            },
            "§5.2.1.2: any",
        ),
        (
            "max-age=60, must-revalidate",
            "max-stale",
            80,
            stale_mr,
            "§5.2.2.2",
        ),
        (
            "max-age=60, proxy-revalidate",
            "max-stale",
            80,
            stale_mr,
            "§5.2.2.8",
        ),
        (
            "s-maxage=60",
            "max-stale",
            80,
            stale_mr,
            "§5.2.2.10: s-maxage implies proxy-revalidate",
        ),
        (
            "max-age=60, stale-while-revalidate=30",
            "",
            80,
            StaleWhileRevalidate { age: 80, stale: 20 },
            "RFC 5861 §3",
        ),
        (
            "max-age=60, stale-while-revalidate=30",
            "",
            100,
            stale,
            "RFC 5861 §3: past the window",
        ),
        (
            "max-age=60, stale-while-revalidate=30, must-revalidate",
            "",
            80,
            stale_mr,
            "§4.2.4: must-revalidate wins",
        ),
        (
            "max-age=60, stale-while-revalidate=30",
            "no-cache",
            10,
            Validate(Why::RequestNoCache),
            "§5.2.1.4",
        ),
        (
            "max-age=1, max-age=3600",
            "",
            0,
            stale,
            "§4.2.1: conflicting lifetimes are stale",
        ),
    ];
    for (resp_cc, req_cc, after, want, rule) in rows {
        let e = entry(&[cc(resp_cc), ("Date", date(T0))], at(T0));
        assert_eq!(
            reuse(&req(req_cc), &e, now(after), &d),
            want,
            "{resp_cc} / {req_cc} at +{after} ({rule})"
        );
    }
}

#[test]
fn stale_if_error_table() {
    let d = Options::default();
    let now = |s: u64| Time(T0.0 + s);
    let rows: Vec<(&str, &str, u64, bool, &str)> = vec![
        ("max-age=60, stale-if-error=30", "", 80, true, "RFC 5861 §4"),
        (
            "max-age=60, stale-if-error=30",
            "",
            100,
            false,
            "RFC 5861 §4: past the window",
        ),
        (
            "max-age=60",
            "stale-if-error=30",
            80,
            true,
            "RFC 5861 §4: asked by the request",
        ),
        ("max-age=60", "", 80, false, "nothing grants it"),
        (
            "max-age=60, stale-if-error=30, must-revalidate",
            "",
            80,
            false,
            "§5.2.2.2: must-revalidate wins",
        ),
        ("s-maxage=60, stale-if-error=30", "", 80, false, "§5.2.2.10"),
        (
            "max-age=60, stale-if-error=30, no-cache",
            "",
            80,
            false,
            "§5.2.2.4",
        ),
    ];
    for (resp_cc, req_cc, after, want, rule) in rows {
        let e = entry(&[cc(resp_cc), ("Date", date(T0))], at(T0));
        assert_eq!(
            stale_if_error(&req(req_cc), &e, now(after), &d),
            want,
            "{resp_cc} / {req_cc} ({rule})"
        );
    }
    assert!(is_error_status(503) && !is_error_status(404) && !is_error_status(501));
}
