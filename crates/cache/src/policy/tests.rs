//! Whole request lives through [`plan`] and [`after`] against a real [`Store`]: miss, store,
//! hit, stale, validation, 304, stale-if-error, invalidation, and the poisoning and deception
//! shapes a shared cache must resist (docs/cache-poisoning.md).

use super::*;
use crate::fields::Field;
use crate::store::Limits;

const T0: Time = Time(1_700_000_000);

fn get<'a>(target: &'a str, fields: &'a [Field<'a>]) -> Request<'a> {
    Request {
        method: b"GET",
        scheme: b"https",
        authority: b"shop.example",
        target: target.as_bytes(),
        fields,
        body: false,
    }
}

fn at(t: Time) -> Timing {
    Timing {
        request_time: t,
        response_time: t,
    }
}

fn store() -> Store {
    Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 2,
    })
}

/// Runs a miss through `after` and stores the answer as the server would; what `after` said.
fn fill(store: &Store, req: &Request, status: u16, fields: &[Field], t: Time) -> After {
    let resp = Response { status, fields };
    let got = after(req, Some(&resp), None, at(t), store, &Options::default());
    if let After::Store { key, variant } = &got {
        store.insert(Entry::new(
            key.clone(),
            variant.clone(),
            &resp,
            b"body"[..].into(),
            at(t),
        ));
    }
    got
}

fn plan_at(store: &Store, req: &Request, t: Time) -> Plan {
    plan(req, store, t, &Options::default())
}

/// `req`'s answer stored at T0 with `max-age=1` and an ETag, and planned when stale: the
/// entry the plan validates, and that time.
fn stale_entry(store: &Store, req: &Request) -> (Arc<Entry>, Time) {
    fill(
        store,
        req,
        200,
        &[(b"Cache-Control", b"max-age=1"), (b"ETag", b"\"v\"")],
        T0,
    );
    let later = Time(T0.0 + 5);
    let Plan::Forward {
        validate: Some(entry),
        ..
    } = plan_at(store, req, later)
    else {
        panic!("stale: validate")
    };
    (entry, later)
}

#[test]
fn miss_store_hit_with_age() {
    let s = store();
    let req = get("/p?id=1", &[]);
    assert!(matches!(
        plan_at(&s, &req, T0),
        Plan::Forward {
            validate: None,
            fwd: Fwd::UriMiss,
            ..
        }
    ));
    let cc: &[Field] = &[(b"Cache-Control", b"max-age=60")];
    assert!(matches!(fill(&s, &req, 200, cc, T0), After::Store { .. }));
    match plan_at(&s, &req, Time(T0.0 + 10)) {
        Plan::Answer {
            age: 10,
            ttl: 50,
            not_modified: false,
            revalidate: false,
            ..
        } => {}
        p => panic!("{p:?}"),
    }
    // A HEAD is answered from the GET's entry (§4.3.5's other direction: same key).
    let head = Request {
        method: b"HEAD",
        ..req
    };
    assert!(matches!(plan_at(&s, &head, T0), Plan::Answer { .. }));
}

#[test]
fn headers_outside_the_key_cannot_change_what_is_served() {
    // Poisoning: a response filled by a request carrying X-Forwarded-Host (and
    // friends) is the same entry every other request gets; those fields never pick another.
    let s = store();
    let evil: &[Field] = &[
        (b"X-Forwarded-Host", b"evil.example"),
        (b"X-Forwarded-Scheme", b"http"),
        (b"X-Original-URL", b"/admin"),
    ];
    let poisoned = get("/", evil);
    let clean = get("/", &[]);
    fill(&s, &poisoned, 200, &[(b"Cache-Control", b"max-age=60")], T0);
    let (Plan::Answer { entry: a, .. }, Plan::Answer { entry: b, .. }) =
        (plan_at(&s, &poisoned, T0), plan_at(&s, &clean, T0))
    else {
        panic!("both hit")
    };
    assert!(Arc::ptr_eq(&a, &b), "one key: the fields are not in it");
    assert_eq!(a.key.as_bytes(), b"https://shop.example/");
}

#[test]
fn an_absolute_target_that_disagrees_with_host_never_fills_the_cache() {
    // Poisoning: absolute-form for another host than Host.
    let s = store();
    let req = get("https://evil.example/", &[]);
    assert!(matches!(
        plan_at(&s, &req, T0),
        Plan::Bypass(Bypass::NoKey(NoKey::Disagrees))
    ));
    assert!(matches!(
        fill(&s, &req, 200, &[(b"Cache-Control", b"max-age=60")], T0),
        After::PassOn(None)
    ));
    assert_eq!(s.counters().snapshot().objects, 0);
}

#[test]
fn account_css_with_a_cookie_or_private_is_not_stored() {
    // Web cache deception: the path looks static, the answer decides.
    for fields in [
        &[
            (&b"Cache-Control"[..], &b"max-age=600"[..]),
            (b"Set-Cookie", b"sid=1"),
        ][..],
        &[(b"Cache-Control", b"private, max-age=600")],
        &[(b"Content-Type", b"text/css")],
    ] {
        let s = store();
        let req = get("/account/x.css", &[]);
        assert!(
            matches!(fill(&s, &req, 200, fields, T0), After::PassOn(Some(_))),
            "{fields:?}"
        );
        assert!(matches!(
            plan_at(&s, &req, T0),
            Plan::Forward {
                fwd: Fwd::UriMiss,
                ..
            }
        ));
    }
}

#[test]
fn vary_star_is_never_served() {
    let s = store();
    let req = get("/v", &[]);
    let got = fill(
        &s,
        &req,
        200,
        &[(b"Cache-Control", b"max-age=60"), (b"Vary", b"*")],
        T0,
    );
    assert!(matches!(got, After::PassOn(Some(NotStored::Vary))));
    assert!(matches!(plan_at(&s, &req, T0), Plan::Forward { .. }));
}

#[test]
fn authorization_follows_section_3_5() {
    let s = store();
    let auth: &[Field] = &[(b"Authorization", b"Bearer t")];
    let req = get("/me", auth);
    let got = fill(&s, &req, 200, &[(b"Cache-Control", b"max-age=60")], T0);
    assert!(matches!(got, After::PassOn(Some(NotStored::Authorization))));
    let got = fill(&s, &req, 200, &[(b"Cache-Control", b"s-maxage=60")], T0);
    assert!(matches!(got, After::Store { .. }));
}

#[test]
fn stale_validated_by_304_is_fresh_again() {
    let s = store();
    let req = get("/doc", &[]);
    fill(
        &s,
        &req,
        200,
        &[
            (b"Cache-Control", b"max-age=10"),
            (b"ETag", b"\"v1\""),
            (b"X-A", b"1"),
        ],
        T0,
    );
    let later = Time(T0.0 + 20);
    let Plan::Forward {
        validate: Some(entry),
        fwd: Fwd::Stale,
        ..
    } = plan_at(&s, &req, later)
    else {
        panic!("stale: validate")
    };
    let resp = Response {
        status: 304,
        fields: &[(b"ETag", b"\"v1\""), (b"X-A", b"2")],
    };
    let After::Freshened(fresh) = after(
        &req,
        Some(&resp),
        Some(&entry),
        at(later),
        &s,
        &Options::default(),
    ) else {
        panic!("freshened")
    };
    assert_eq!(fresh.field(b"x-a"), Some(&b"2"[..]));
    assert!(matches!(
        plan_at(&s, &req, Time(later.0 + 5)),
        Plan::Answer { age: 5, .. }
    ));
    s.counters().record(crate::store::Event::Revalidated);
    assert_eq!(s.counters().snapshot().revalidated, 1);
    // A 304 for another representation: fetch again.
    let other = Response {
        status: 304,
        fields: &[(b"ETag", b"\"v9\"")],
    };
    assert!(matches!(
        after(
            &req,
            Some(&other),
            Some(&entry),
            at(later),
            &s,
            &Options::default()
        ),
        After::Refetch
    ));
}

#[test]
fn stale_if_error_on_5xx_and_on_no_answer() {
    let s = store();
    let req = get("/e", &[]);
    fill(
        &s,
        &req,
        200,
        &[
            (b"Cache-Control", b"max-age=10, stale-if-error=60"),
            (b"ETag", b"\"v\""),
        ],
        T0,
    );
    let later = Time(T0.0 + 30);
    let Plan::Forward {
        validate: Some(entry),
        ..
    } = plan_at(&s, &req, later)
    else {
        panic!()
    };
    let d = Options::default();
    let err = Response {
        status: 503,
        fields: &[],
    };
    assert!(matches!(
        after(&req, Some(&err), Some(&entry), at(later), &s, &d),
        After::ServeStale(..)
    ));
    assert!(matches!(
        after(&req, None, Some(&entry), at(later), &s, &d),
        After::ServeStale(..)
    ));
    let too_late = Time(T0.0 + 100);
    assert!(matches!(
        after(&req, None, Some(&entry), at(too_late), &s, &d),
        After::PassOn(None)
    ));
}

#[test]
fn the_clients_own_conditional_gets_a_304_from_a_fresh_entry() {
    // RFC 9110 §13.2.2 answered by the cache.
    let s = store();
    fill(
        &s,
        &get("/c", &[]),
        200,
        &[(b"Cache-Control", b"max-age=60"), (b"ETag", b"\"v1\"")],
        T0,
    );
    let cond: &[Field] = &[(b"If-None-Match", b"\"v1\"")];
    assert!(matches!(
        plan_at(&s, &get("/c", cond), T0),
        Plan::Answer {
            not_modified: true,
            ..
        }
    ));
    let other: &[Field] = &[(b"If-None-Match", b"\"v0\"")];
    assert!(matches!(
        plan_at(&s, &get("/c", other), T0),
        Plan::Answer {
            not_modified: false,
            ..
        }
    ));
    let pre: &[Field] = &[(b"If-Match", b"\"v1\"")];
    assert!(matches!(
        plan_at(&s, &get("/c", pre), T0),
        Plan::Bypass(Bypass::Preconditions)
    ));
}

#[test]
fn request_directives_steer_the_plan() {
    let s = store();
    fill(
        &s,
        &get("/r", &[]),
        200,
        &[
            (b"Cache-Control", b"max-age=60, stale-while-revalidate=30"),
            (b"ETag", b"\"v\""),
        ],
        T0,
    );
    let no_cache: &[Field] = &[(b"Cache-Control", b"no-cache")];
    assert!(
        matches!(
            plan_at(&s, &get("/r", no_cache), T0),
            Plan::Forward {
                validate: Some(_),
                fwd: Fwd::Request,
                ..
            }
        ),
        "§5.2.1.4"
    );
    let oic: &[Field] = &[(b"Cache-Control", b"only-if-cached")];
    assert!(
        matches!(plan_at(&s, &get("/other", oic), T0), Plan::GatewayTimeout),
        "§5.2.1.7"
    );
    assert!(
        matches!(plan_at(&s, &get("/r", oic), T0), Plan::Answer { .. }),
        "§5.2.1.7: stored and fresh"
    );
    let swr = Time(T0.0 + 70);
    assert!(
        matches!(
            plan_at(&s, &get("/r", &[]), swr),
            Plan::Answer {
                revalidate: true,
                ttl: -10,
                ..
            }
        ),
        "RFC 5861 §3"
    );
    assert!(
        matches!(
            plan_at(&s, &get("/r", oic), Time(T0.0 + 200)),
            Plan::GatewayTimeout
        ),
        "§5.2.1.7: stale"
    );
}

#[test]
fn unsafe_methods_invalidate_and_are_never_stored() {
    let s = store();
    fill(
        &s,
        &get("/items/1", &[]),
        200,
        &[(b"Cache-Control", b"max-age=60")],
        T0,
    );
    fill(
        &s,
        &get("/items/2", &[]),
        200,
        &[(b"Cache-Control", b"max-age=60")],
        T0,
    );
    let put = Request {
        method: b"PUT",
        ..get("/items/1", &[])
    };
    assert!(matches!(
        plan_at(&s, &put, T0),
        Plan::Bypass(Bypass::Method)
    ));
    let resp = Response {
        status: 204,
        fields: &[(b"Content-Location", b"/items/2")],
    };
    let got = after(&put, Some(&resp), None, at(T0), &s, &Options::default());
    assert!(matches!(got, After::PassOn(Some(NotStored::Method))));
    assert!(
        matches!(
            plan_at(&s, &get("/items/1", &[]), T0),
            Plan::Forward {
                fwd: Fwd::UriMiss,
                ..
            }
        ),
        "§4.4"
    );
    assert!(
        matches!(
            plan_at(&s, &get("/items/2", &[]), T0),
            Plan::Forward {
                fwd: Fwd::UriMiss,
                ..
            }
        ),
        "§4.4"
    );
}

#[test]
fn a_validated_entry_replaced_by_an_unstorable_answer_goes() {
    let s = store();
    let req = get("/n", &[]);
    let (entry, later) = stale_entry(&s, &req);
    let resp = Response {
        status: 200,
        fields: &[(b"Cache-Control", b"no-store")],
    };
    let got = after(
        &req,
        Some(&resp),
        Some(&entry),
        at(later),
        &s,
        &Options::default(),
    );
    assert!(matches!(got, After::PassOn(Some(NotStored::NoStore))));
    assert!(matches!(
        plan_at(&s, &req, later),
        Plan::Forward {
            fwd: Fwd::UriMiss,
            ..
        }
    ));
}

#[test]
fn a_304_that_makes_the_entry_private_or_no_store_answers_its_request_only() {
    for cc in [&b"private, max-age=600"[..], b"no-store"] {
        let s = store();
        let req = get("/p", &[]);
        let (entry, later) = stale_entry(&s, &req);
        let resp = Response {
            status: 304,
            fields: &[(b"ETag", b"\"v\""), (b"Cache-Control", cc)],
        };
        let got = after(
            &req,
            Some(&resp),
            Some(&entry),
            at(later),
            &s,
            &Options::default(),
        );
        assert!(matches!(got, After::Freshened(_)), "this request's answer");
        assert!(
            matches!(
                plan_at(&s, &req, later),
                Plan::Forward {
                    fwd: Fwd::UriMiss,
                    ..
                }
            ),
            "{}: the shared cache keeps nothing",
            String::from_utf8_lossy(cc)
        );
    }
}

#[test]
fn answers_to_conditions_the_cache_does_not_evaluate_are_not_stored() {
    // An If-Match request goes up as it came; its 412, even with a lifetime, is no answer
    // to the next plain GET.
    let s = store();
    let conditional: &[Field] = &[(b"If-Match", b"\"nope\"")];
    let req = get("/doc", conditional);
    assert!(matches!(
        plan_at(&s, &req, T0),
        Plan::Bypass(Bypass::Preconditions)
    ));
    let got = fill(&s, &req, 412, &[(b"Cache-Control", b"max-age=300")], T0);
    assert!(matches!(got, After::PassOn(None)));
    assert!(matches!(
        plan_at(&s, &get("/doc", &[]), T0),
        Plan::Forward {
            fwd: Fwd::UriMiss,
            ..
        }
    ));
}

#[test]
fn plans_after_a_long_key_look_up_their_own() {
    // The key is built in a buffer each thread keeps between plans: a shorter key after a
    // longer one must be exactly its own bytes, never the longer key's tail, and a plan that
    // goes forward carries the key `after` stores under.
    let s = store();
    let long = format!("/{}", "a".repeat(300));
    let short = get("/s", &[]);
    let long = get(&long, &[]);
    let ok: &[Field] = &[(b"cache-control", b"max-age=60")];
    assert!(matches!(fill(&s, &short, 200, ok, T0), After::Store { .. }));
    for req in [&long, &short, &long] {
        match plan_at(&s, req, T0) {
            Plan::Answer { .. } => assert_eq!(req.target, b"/s"),
            Plan::Forward { key, .. } => {
                assert_eq!(req.target, long.target);
                assert_eq!(
                    key,
                    Key::new(b"https", b"shop.example", long.target).unwrap()
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

/// [`plan_keyed`] (a request planned again under the key its first plan made) decides as
/// [`plan_with`] does: a held entry answers when the store has none, the store's own answers
/// when it has one, and the method and precondition bypasses stand.
#[test]
fn a_keyed_plan_decides_as_the_written_key_does() {
    let s = store();
    let req = get("/keyed?x=1", &[]);
    let Plan::Forward { key, .. } = plan_at(&s, &req, T0) else {
        panic!("a miss first");
    };
    // An entry held apart from the store (a second tier's), fresh for 60 s.
    let cc: &[Field] = &[(b"Cache-Control", b"max-age=60")];
    let held = Arc::new(Entry::new(
        key.clone(),
        Variant::default(),
        &Response {
            status: 200,
            fields: cc,
        },
        b"held"[..].into(),
        at(T0),
    ));
    let opts = Options::default();
    let t = Time(T0.0 + 5);
    let same = |a: &Plan, b: &Plan| format!("{a:?}") == format!("{b:?}");
    let keyed = plan_keyed(&req, &key, &s, Some(&held), t, &opts);
    assert!(matches!(keyed, Plan::Answer { age: 5, .. }), "{keyed:?}");
    assert!(same(&keyed, &plan_with(&req, &s, Some(&held), t, &opts)));
    // Without it, a miss under the same key.
    let miss = plan_keyed(&req, &key, &s, None, t, &opts);
    assert!(
        matches!(&miss, Plan::Forward { key: k, .. } if *k == key),
        "{miss:?}"
    );
    assert!(same(&miss, &plan_with(&req, &s, None, t, &opts)));
    // The store's entry, once there, answers as for a written key.
    fill(&s, &req, 200, cc, T0);
    let stored = plan_keyed(&req, &key, &s, Some(&held), t, &opts);
    assert!(same(&stored, &plan_with(&req, &s, Some(&held), t, &opts)));
    // The bypasses: a POST, and a precondition the origin judges.
    let post = Request {
        method: b"POST",
        ..req
    };
    assert!(matches!(
        plan_keyed(&post, &key, &s, Some(&held), t, &opts),
        Plan::Bypass(Bypass::Method)
    ));
    let if_match: &[Field] = &[(b"If-Match", b"\"a\"")];
    let conditional = get("/keyed?x=1", if_match);
    assert!(matches!(
        plan_keyed(&conditional, &key, &s, Some(&held), t, &opts),
        Plan::Bypass(Bypass::Preconditions)
    ));
}

#[test]
fn a_304_that_adds_a_set_cookie_answers_its_request_only() {
    // A 304 that sets a cookie freshens the stored answer into one that sets a
    // cookie: it goes to the request that caused it, and the store keeps nothing that would
    // replay the cookie to the next visitor.
    let s = store();
    let req = get("/p", &[]);
    let (entry, later) = stale_entry(&s, &req);
    let resp = Response {
        status: 304,
        fields: &[
            (b"ETag", b"\"v\""),
            (b"Cache-Control", b"public, max-age=600"),
            (b"Set-Cookie", b"sid=mine"),
        ],
    };
    let got = after(
        &req,
        Some(&resp),
        Some(&entry),
        at(later),
        &s,
        &Options::default(),
    );
    let After::Freshened(fresh) = got else {
        panic!("this request's answer: {got:?}")
    };
    assert_eq!(fresh.field(b"set-cookie"), Some(&b"sid=mine"[..]));
    assert!(
        matches!(
            plan_at(&s, &req, later),
            Plan::Forward {
                fwd: Fwd::UriMiss,
                ..
            }
        ),
        "the next visitor finds no entry carrying the cookie"
    );
}

#[test]
fn a_get_with_content_is_neither_answered_from_the_store_nor_stored() {
    // A "fat GET" whose body the origin reads must not poison the URL's entry, and
    // must not be answered with the URL's entry either (its answer may differ).
    let s = store();
    let plain = get("/search", &[]);
    let cc: &[Field] = &[(b"Cache-Control", b"max-age=60")];
    fill(&s, &plain, 200, cc, T0);
    let length: &[Field] = &[(b"Content-Length", b"7")];
    let fat = Request {
        body: true,
        ..get("/search", length)
    };
    assert!(matches!(plan_at(&s, &fat, T0), Plan::Bypass(Bypass::Body)));
    let head = Request {
        method: b"HEAD",
        ..fat
    };
    assert!(matches!(plan_at(&s, &head, T0), Plan::Bypass(Bypass::Body)));
    let keyed = Key::new(b"https", b"shop.example", b"/search").unwrap();
    assert!(matches!(
        plan_keyed(&fat, &keyed, &s, None, T0, &Options::default()),
        Plan::Bypass(Bypass::Body)
    ));
    let empty = Store::new(Limits {
        capacity: 1 << 20,
        max_object: 1 << 16,
        shards: 2,
    });
    assert!(matches!(
        fill(&empty, &fat, 200, cc, T0),
        After::PassOn(Some(NotStored::Body))
    ));
    assert!(matches!(
        plan_at(&empty, &plain, T0),
        Plan::Forward {
            fwd: Fwd::UriMiss,
            ..
        }
    ));
}

#[test]
fn a_refresh_answered_500_keeps_the_stale_entry_and_use_stale_serves_it() {
    // a failed background refresh removed the entry it was refreshing (the
    // 500, not storable, "replaced" it), and the next client went to the failing origin.
    let s = store();
    let req = get("/u", &[]);
    let (entry, later) = stale_entry(&s, &req);
    let err = Response {
        status: 500,
        fields: &[],
    };
    let d = Options::default();
    assert!(matches!(
        after(&req, Some(&err), Some(&entry), at(later), &s, &d),
        After::PassOn(_)
    ));
    let policy = Options {
        use_stale: crate::UseStale::HTTP_500,
        ..Options::default()
    };
    assert!(matches!(
        after(&req, Some(&err), Some(&entry), at(later), &s, &policy),
        After::ServeStale(_, StaleBy::Policy(Failure::Status(500)))
    ));
    assert!(matches!(
        after_failure(&req, Some(&entry), Failure::Timeout, at(later), &policy),
        After::PassOn(None)
    ));
    let updating = Options {
        use_stale: crate::UseStale::UPDATING,
        ..Options::default()
    };
    assert!(matches!(
        plan(&req, &s, later, &updating),
        Plan::Answer {
            revalidate: true,
            updating: true,
            ..
        }
    ));
}
