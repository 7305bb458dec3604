//! Validation (RFC 9111 §4.3): the validators a conditional request upstream carries, a
//! stored entry freshened by a 304 (§4.3.4: which fields are replaced), and the cache's own
//! answer to a client's conditional GET or HEAD (RFC 9110 §13.2.2) — a 304 with the fields
//! RFC 9110 §15.4.5 lists. Builds field lists; sends nothing.

use crate::shared::Shared;

use crate::entry::{Entry, Timing};
use crate::fields::{Field, OwnedField, elements, first, is_not_stored, parse_date, values};

/// The client's conditional fields, removed from a request the cache forwards on a miss or
/// to validate: the cache wants a whole answer it can store (or its own 304), and answers the
/// client's conditions itself from the result.
pub const CLIENT_CONDITIONALS: &[&[u8]] = &[b"if-none-match", b"if-modified-since"];

/// The fields to add to the request sent upstream to validate `entry` (§4.3.1):
/// If-None-Match with its ETag, If-Modified-Since with its Last-Modified.
pub fn conditional_fields(entry: &Entry) -> Vec<(&'static [u8], &[u8])> {
    let mut out: Vec<(&'static [u8], &[u8])> = Vec::with_capacity(2);
    if let Some(etag) = entry.field(b"etag") {
        out.push((b"if-none-match", etag));
    }
    if let Some(lm) = entry.field(b"last-modified") {
        out.push((b"if-modified-since", lm));
    }
    out
}

/// Fields a 304 never replaces in a stored response (§3.2, beyond those never stored at all):
/// Content-Length describes the stored body, not the 304's (cache-tests requires it), and a
/// Content-Encoding or Content-Range from a 304 would no longer describe the bytes kept
/// (§3.2 allows keeping fields "necessary to assure integrity of the stored response").
pub const KEPT_ON_UPDATE: &[&[u8]] = &[b"content-length", b"content-encoding", b"content-range"];

/// Why a 304 does not freshen the entry it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// Its ETag (or, without one, its Last-Modified) is not the stored one (§4.3.4): the
    /// origin chose another representation; the request is sent again unconditionally.
    Validator,
}

/// The entry `stored` freshened by a 304's fields (§4.3.4, §3.2): each field the 304 carries
/// replaces the stored lines of that name (hop-by-hop and [`KEPT_ON_UPDATE`] fields
/// excepted), the rest are kept, the body is shared; its age starts again from `timing`.
///
/// A 304 without validators is taken to answer the entry whose validators were sent (the
/// only one asked about); §4.3.4 would select it only when the entry also had none, which
/// would turn most origins' bare 304s into a second, unconditional fetch.
pub fn freshen(
    stored: &Entry,
    not_modified: &[Field<'_>],
    timing: Timing,
) -> Result<Entry, Mismatch> {
    if let Some(etag) = first(not_modified, b"etag") {
        if stored.field(b"etag") != Some(etag) {
            return Err(Mismatch::Validator);
        }
    } else if let Some(lm) = first(not_modified, b"last-modified") {
        let stored_lm = stored.field(b"last-modified").and_then(parse_date);
        if stored_lm.is_none() || stored_lm != parse_date(lm) {
            return Err(Mismatch::Validator);
        }
    }
    let replaced = |name: &[u8]| {
        !is_not_stored(not_modified, name)
            && !KEPT_ON_UPDATE.iter().any(|k| k.eq_ignore_ascii_case(name))
            && not_modified
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
    };
    let mut fields: Vec<OwnedField> = stored
        .fields
        .iter()
        .filter(|(n, _)| !replaced(n))
        .cloned()
        .collect();
    fields.extend(
        not_modified
            .iter()
            .filter(|(n, _)| replaced(n))
            .map(|(n, v)| (Shared::from(*n), Shared::from(*v))),
    );
    Ok(Entry::from_stored(
        stored.key.clone(),
        stored.variant.clone(),
        stored.status,
        fields,
        stored.body.clone(),
        timing,
    ))
}

/// Whether the cache answers a client's GET or HEAD with 304 from `entry` (RFC 9110
/// §13.2.2): If-None-Match decides when present (weak comparison, `*` matches any); else
/// If-Modified-Since, when it is one valid date, against the entry's Last-Modified (or Date,
/// or the time it was received: RFC 9111 §4.3.2).
pub fn not_modified(request: &[Field<'_>], entry: &Entry) -> bool {
    if values(request, b"if-none-match").next().is_some() {
        let Some(etag) = entry.field(b"etag") else {
            // §13.1.2: `*` is false without a current representation; we have one.
            return values(request, b"if-none-match")
                .flat_map(elements)
                .any(|t| t == b"*");
        };
        return values(request, b"if-none-match")
            .flat_map(elements)
            .any(|t| t == b"*" || weak_eq(t, etag));
    }
    let mut ims = values(request, b"if-modified-since");
    let (Some(ims), None) = (ims.next(), ims.next()) else {
        return false;
    };
    // RFC 9111 §4.3.2: the stored response's Last-Modified, else its Date, else the time
    // it was received.
    let modified = entry
        .facts
        .last_modified
        .or(entry.facts.date)
        .unwrap_or(entry.timing.response_time);
    parse_date(ims).is_some_and(|since| modified <= since)
}

/// Weak comparison of two entity-tags (RFC 9110 §8.8.3.2): the opaque tags equal, either
/// or both marked weak.
fn weak_eq(a: &[u8], b: &[u8]) -> bool {
    matches!((opaque_tag(a), opaque_tag(b)), (Some(x), Some(y)) if x == y)
}

/// The opaque-tag of an entity-tag (its quotes kept, `W/` dropped), if it is one.
fn opaque_tag(t: &[u8]) -> Option<&[u8]> {
    let t = t.strip_prefix(b"W/").unwrap_or(t);
    (t.len() >= 2 && t[0] == b'"' && t[t.len() - 1] == b'"').then_some(t)
}

/// The stored fields a 304 to the client carries (RFC 9110 §15.4.5): Cache-Control,
/// Content-Location, Date, ETag, Expires, Vary, and Last-Modified when there is no ETag.
pub fn not_modified_fields(entry: &Entry) -> impl Iterator<Item = &OwnedField> {
    const NAMES: &[&[u8]] = &[
        b"cache-control",
        b"content-location",
        b"date",
        b"etag",
        b"expires",
        b"vary",
    ];
    let no_etag = entry.field(b"etag").is_none();
    entry.fields.iter().filter(move |(n, _)| {
        NAMES.iter().any(|k| k.eq_ignore_ascii_case(n))
            || (no_etag && n.eq_ignore_ascii_case(b"last-modified"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Time;
    use crate::facts::Response;
    use crate::key::{Key, Variant};

    const LM: &[u8] = b"Wed, 01 Jan 2020 00:00:00 GMT";

    fn entry(fields: &[Field]) -> Entry {
        let key = Key::new(b"http", b"a", b"/").unwrap();
        let t = Timing {
            request_time: Time(10),
            response_time: Time(10),
        };
        Entry::new(
            key,
            Variant::default(),
            &Response {
                status: 200,
                fields,
            },
            b"body"[..].into(),
            t,
        )
    }

    fn names(fields: &[OwnedField], name: &str) -> Vec<String> {
        values(fields, name.as_bytes())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect()
    }

    #[test]
    fn conditional_request_carries_the_stored_validators() {
        // RFC 9111 §4.3.1.
        let e = entry(&[(b"ETag", b"\"v1\""), (b"Last-Modified", LM)]);
        assert_eq!(
            conditional_fields(&e),
            [
                (&b"if-none-match"[..], &b"\"v1\""[..]),
                (b"if-modified-since", LM)
            ]
        );
        assert!(conditional_fields(&entry(&[])).is_empty());
    }

    #[test]
    fn freshen_table() {
        // RFC 9111 §4.3.4 and §3.2, as cache-tests' update304 checks them.
        let stored = entry(&[
            (b"ETag", b"\"v1\""),
            (b"Cache-Control", b"max-age=2"),
            (b"Test-Header", b"A"),
            (b"Content-Length", b"4"),
            (b"Content-Type", b"text/plain"),
            (b"X-Kept", b"k"),
        ]);
        let t = Timing {
            request_time: Time(50),
            response_time: Time(51),
        };
        let not_modified: &[Field] = &[
            (b"ETag", b"\"v1\""),
            (b"Cache-Control", b"max-age=100"),
            (b"test-header", b"B"),
            (b"Content-Length", b"0"),
            (b"Content-Type", b"text/html"),
            (b"Connection", b"close"),
            (b"Keep-Alive", b"timeout=5"),
            (b"New", b"n"),
        ];
        let e = freshen(&stored, not_modified, t).unwrap();
        assert_eq!(names(&e.fields, "test-header"), ["B"], "§3.2: replaced");
        assert_eq!(
            names(&e.fields, "cache-control"),
            ["max-age=100"],
            "§3.2: replaced"
        );
        assert_eq!(
            names(&e.fields, "content-type"),
            ["text/html"],
            "§3.2: replaced"
        );
        assert_eq!(
            names(&e.fields, "content-length"),
            ["4"],
            "§3.2: Content-Length kept"
        );
        assert_eq!(
            names(&e.fields, "x-kept"),
            ["k"],
            "§3.2: fields the 304 omits are kept"
        );
        assert_eq!(names(&e.fields, "new"), ["n"], "§3.2: added");
        assert!(
            names(&e.fields, "keep-alive").is_empty() && names(&e.fields, "connection").is_empty(),
            "§3.1"
        );
        assert_eq!(e.timing, t, "§4.3.4: the age starts again");
        assert_eq!(
            e.facts.cc.max_age,
            crate::cache_control::Delta::Secs(100),
            "facts re-read"
        );
        assert!(
            Shared::same(&e.body, &stored.body),
            "the body is shared, not copied"
        );

        assert_eq!(
            freshen(&stored, &[(b"ETag", b"\"v2\"")], t).err(),
            Some(Mismatch::Validator),
            "§4.3.4: another representation"
        );
        assert_eq!(
            freshen(&stored, &[(b"ETag", b"W/\"v1\"")], t).err(),
            Some(Mismatch::Validator),
            "§4.3.4: strong vs weak"
        );
        assert!(
            freshen(&stored, &[(b"Date", b"x")], t).is_ok(),
            "no validator: the one asked about"
        );
        let by_lm = entry(&[(b"Last-Modified", LM)]);
        assert!(
            freshen(&by_lm, &[(b"Last-Modified", LM)], t).is_ok(),
            "§4.3.4: Last-Modified"
        );
        assert!(
            freshen(
                &by_lm,
                &[(b"Last-Modified", b"Thu, 02 Jan 2020 00:00:00 GMT")],
                t
            )
            .is_err()
        );
    }

    #[test]
    fn not_modified_table() {
        // RFC 9110 §13.2.2 and §13.1.1, §13.1.3.
        let e = entry(&[(b"ETag", b"W/\"v1\""), (b"Last-Modified", LM)]);
        let rows: &[(&[Field], bool, &str)] = &[
            (
                &[(b"If-None-Match", b"\"v1\"")],
                true,
                "§13.1.2: weak comparison",
            ),
            (
                &[(b"If-None-Match", b"\"v0\", W/\"v1\"")],
                true,
                "§13.1.2: a list",
            ),
            (
                &[(b"If-None-Match", b"\"v0\""), (b"If-None-Match", b"\"v1\"")],
                true,
                "§13.1.2: lines",
            ),
            (&[(b"If-None-Match", b"*")], true, "§13.1.2: *"),
            (&[(b"If-None-Match", b"\"v2\"")], false, "§13.1.2: no match"),
            (
                &[(b"If-None-Match", b"\"v2\""), (b"If-Modified-Since", LM)],
                false,
                "§13.2.2: INM decides",
            ),
            (
                &[(b"If-Modified-Since", LM)],
                true,
                "§13.1.3: not modified since",
            ),
            (
                &[(b"If-Modified-Since", b"Tue, 31 Dec 2019 00:00:00 GMT")],
                false,
                "§13.1.3: modified since",
            ),
            (
                &[(b"If-Modified-Since", b"yesterday")],
                false,
                "§13.1.3: invalid date ignored",
            ),
            (
                &[(b"If-Modified-Since", LM), (b"If-Modified-Since", LM)],
                false,
                "§13.1.3: more than one member",
            ),
            (&[], false, "unconditional"),
        ];
        for (req, want, rule) in rows {
            assert_eq!(not_modified(req, &e), *want, "{req:?} ({rule})");
        }
        // RFC 9111 §4.3.2: without Last-Modified, the Date; without Date, the time received
        // (Time(10) here, long before LM).
        let dated = entry(&[(b"Date", b"Thu, 02 Jan 2020 00:00:00 GMT")]);
        assert!(
            !not_modified(&[(b"If-Modified-Since", LM)], &dated),
            "Date after IMS"
        );
        let dated = entry(&[(b"Date", b"Tue, 31 Dec 2019 00:00:00 GMT")]);
        assert!(
            not_modified(&[(b"If-Modified-Since", LM)], &dated),
            "Date before IMS"
        );
        assert!(
            not_modified(&[(b"If-Modified-Since", LM)], &entry(&[])),
            "time received"
        );
    }

    #[test]
    fn not_modified_answer_fields() {
        // RFC 9110 §15.4.5.
        let e = entry(&[
            (b"ETag", b"\"v1\""),
            (b"Cache-Control", b"max-age=2"),
            (b"Content-Type", b"text/plain"),
            (b"Vary", b"Accept-Encoding"),
            (b"Last-Modified", LM),
        ]);
        let got: Vec<&[u8]> = not_modified_fields(&e).map(|(n, _)| &n[..]).collect();
        assert_eq!(got, [&b"ETag"[..], b"Cache-Control", b"Vary"]);
        let e = entry(&[(b"Last-Modified", LM)]);
        assert_eq!(
            not_modified_fields(&e).count(),
            1,
            "Last-Modified without an ETag"
        );
    }
}
