//! The operator's stale policy, one row per rule: which failures `use_stale` covers, that
//! `stale_max` bounds every stale answer, that RFC 9111's limits win over the policy
//! (§4.2.4, §5.2.2), and what a client's no-cache may force.

use super::*;
use crate::entry::{Entry, Timing};
use crate::facts::Request;
use crate::fields::Field;
use crate::freshness::{Reuse, Why, reuse};
use crate::key::{Key, Variant};
use crate::{ClientNoCache, Response};

const T0: Time = Time(1_700_000_000);

fn entry(cc: &str) -> Entry {
    let fields: Vec<Field> = vec![(b"Cache-Control", cc.as_bytes())];
    let resp = Response {
        status: 200,
        fields: &fields,
    };
    let timing = Timing {
        request_time: T0,
        response_time: T0,
    };
    Entry::new(
        Key::new(b"http", b"a", b"/").unwrap(),
        Variant::default(),
        &resp,
        Vec::new().into(),
        timing,
    )
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

fn policy(names: &[&str], stale_max: Option<u32>) -> Options {
    let use_stale = names
        .iter()
        .map(|n| UseStale::named(n).expect(n))
        .fold(UseStale::NONE, UseStale::with);
    Options {
        use_stale,
        stale_max,
        ..Options::default()
    }
}

#[test]
fn use_stale_serves_only_the_failures_it_names_within_stale_max_and_never_against_the_origins_limits()
 {
    let all = [
        "error", "timeout", "updating", "http_500", "http_502", "http_503", "http_504",
    ];
    let err = Failure::Error;
    let timeout = Failure::Timeout;
    let s500 = Failure::Status(500);
    let s503 = Failure::Status(503);
    type Row<'a> = (
        &'a str,
        &'a [&'a str],
        Option<u32>,
        u64,
        Failure,
        Option<StaleBy>,
        &'a str,
    );
    let rows: Vec<Row> = vec![
        ("max-age=60", &[], None, 80, err, None, "nothing grants it"),
        (
            "max-age=60",
            &["error"],
            None,
            80,
            err,
            Some(StaleBy::Policy(err)),
            "error",
        ),
        (
            "max-age=60",
            &["error"],
            None,
            80,
            timeout,
            None,
            "error is not timeout",
        ),
        (
            "max-age=60",
            &["timeout"],
            None,
            80,
            timeout,
            Some(StaleBy::Policy(timeout)),
            "timeout",
        ),
        (
            "max-age=60",
            &["http_500"],
            None,
            80,
            s500,
            Some(StaleBy::Policy(s500)),
            "http_500",
        ),
        (
            "max-age=60",
            &["http_500"],
            None,
            80,
            s503,
            None,
            "http_500 is not 503",
        ),
        (
            "max-age=60",
            &all,
            None,
            80,
            Failure::Status(404),
            None,
            "a 404 is an answer",
        ),
        (
            "max-age=60",
            &all,
            Some(3600),
            3660,
            s503,
            Some(StaleBy::Policy(s503)),
            "at stale_max",
        ),
        (
            "max-age=60",
            &all,
            Some(3600),
            3661,
            s503,
            None,
            "past stale_max",
        ),
        (
            "max-age=60",
            &all,
            None,
            10_000_000,
            err,
            Some(StaleBy::Policy(err)),
            "no bound set",
        ),
        (
            "max-age=60, stale-if-error=30",
            &[],
            None,
            80,
            err,
            Some(StaleBy::IfError),
            "RFC 5861",
        ),
        (
            "max-age=60, stale-if-error=30",
            &all,
            Some(10),
            80,
            err,
            None,
            "stale_max bounds it",
        ),
        (
            "max-age=60, must-revalidate",
            &all,
            None,
            80,
            err,
            None,
            "§5.2.2.2",
        ),
        (
            "max-age=60, proxy-revalidate",
            &all,
            None,
            80,
            s500,
            None,
            "§5.2.2.8",
        ),
        ("s-maxage=60", &all, None, 80, timeout, None, "§5.2.2.10"),
        (
            "max-age=60, no-cache",
            &all,
            None,
            80,
            err,
            None,
            "§5.2.2.4",
        ),
    ];
    for (cc, names, max, after, failure, want, rule) in rows {
        let got = on_failure(
            &req(""),
            &entry(cc),
            Time(T0.0 + after),
            failure,
            &policy(names, max),
        );
        assert_eq!(got, want, "{cc} / {names:?} / {max:?} at +{after} ({rule})");
    }
}

#[test]
fn updating_serves_stale_while_one_refresh_goes_up_within_stale_max_and_never_against_the_origins_limits()
 {
    let updating = policy(&["updating"], Some(100));
    let none = Options::default();
    let stale_mr = Reuse::Validate(Why::Stale {
        must_revalidate: true,
    });
    let stale = Reuse::Validate(Why::Stale {
        must_revalidate: false,
    });
    let rows: Vec<(&str, &Options, u64, Reuse, &str)> = vec![
        (
            "max-age=60",
            &updating,
            80,
            Reuse::StaleUpdating { age: 80, stale: 20 },
            "updating",
        ),
        (
            "max-age=60",
            &updating,
            160,
            Reuse::StaleUpdating {
                age: 160,
                stale: 100,
            },
            "at max",
        ),
        ("max-age=60", &updating, 161, stale, "past stale_max"),
        ("max-age=60", &none, 80, stale, "no policy"),
        (
            "max-age=60",
            &updating,
            30,
            Reuse::Fresh { age: 30, ttl: 30 },
            "fresh",
        ),
        (
            "max-age=60, stale-while-revalidate=30",
            &updating,
            80,
            Reuse::StaleWhileRevalidate { age: 80, stale: 20 },
            "the origin's grant first",
        ),
        (
            "max-age=60, must-revalidate",
            &updating,
            80,
            stale_mr,
            "§5.2.2.2",
        ),
        ("s-maxage=60", &updating, 80, stale_mr, "§5.2.2.10"),
        (
            "max-age=60, no-cache",
            &updating,
            80,
            Reuse::Validate(Why::ResponseNoCache),
            "§5.2.2.4",
        ),
    ];
    for (cc, opts, after, want, rule) in rows {
        assert_eq!(
            reuse(&req(""), &entry(cc), Time(T0.0 + after), opts),
            want,
            "{cc} at +{after} ({rule})"
        );
    }
    // stale_max bounds the origin's and the client's grants too.
    let bounded = policy(&[], Some(10));
    let swr = entry("max-age=60, stale-while-revalidate=30");
    assert_eq!(reuse(&req(""), &swr, Time(T0.0 + 75), &bounded), stale);
    assert_eq!(
        reuse(
            &req("max-stale=100"),
            &entry("max-age=60"),
            Time(T0.0 + 75),
            &bounded
        ),
        stale
    );
}

#[test]
fn a_clients_no_cache_or_max_age_0_is_not_heeded_when_ignored() {
    let ignore = Options {
        client_no_cache: ClientNoCache::Ignore,
        ..Options::default()
    };
    let revalidate = Options::default();
    let e = entry("max-age=60");
    let at = Time(T0.0 + 10);
    let fields: &[Field] = &[(b"Pragma", b"no-cache")];
    let pragma = RequestFacts::of(&Request {
        method: b"GET",
        scheme: b"http",
        authority: b"a",
        target: b"/",
        fields,
        body: false,
    });
    for (facts, why) in [
        (req("no-cache"), Why::RequestNoCache),
        (req("max-age=0"), Why::RequestMaxAge),
        (pragma, Why::RequestNoCache),
    ] {
        assert_eq!(
            reuse(&facts, &e, at, &ignore),
            Reuse::Fresh { age: 10, ttl: 50 }
        );
        assert_eq!(reuse(&facts, &e, at, &revalidate), Reuse::Validate(why));
    }
    // The origin's no-cache is the origin's to say: still validated.
    assert_eq!(
        reuse(&req(""), &entry("no-cache"), at, &ignore),
        Reuse::Validate(Why::ResponseNoCache)
    );
}
