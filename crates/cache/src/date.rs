//! HTTP dates read (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime
//! forms a recipient must accept. Strict on layout (one space, fixed digits, GMT only), lenient
//! where nothing is at stake: names in any case, and a day name that does not match the date
//! is not checked (cache-tests' expires-parse rows ask for both). Dates before 1970 are `None`.

use crate::Time;

/// Two-digit RFC 850 years at or below this are 20xx, above it 19xx: RFC 9110 §5.6.7 reads a
/// year "more than 50 years in the future" as the past century's, fixed here for years
/// around 2026 (the reader has no clock).
const RFC850_PIVOT: u32 = 76;

const MONTHS: [&[u8; 3]; 12] = [
    b"jan", b"feb", b"mar", b"apr", b"may", b"jun", b"jul", b"aug", b"sep", b"oct", b"nov", b"dec",
];
const DAYS: [&[u8; 3]; 7] = [b"mon", b"tue", b"wed", b"thu", b"fri", b"sat", b"sun"];
const DAYS_LONG: [&[u8]; 7] = [
    b"monday",
    b"tuesday",
    b"wednesday",
    b"thursday",
    b"friday",
    b"saturday",
    b"sunday",
];

/// Reads an HTTP date (already trimmed of OWS).
pub fn parse(s: &[u8]) -> Option<Time> {
    if let Some(comma) = s.iter().position(|b| *b == b',') {
        let (name, rest) = (&s[..comma], &s[comma + 1..]);
        if let &[a, b, c] = name
            && is_short_name([a, b, c], &DAYS)
        {
            return imf_fixdate(rest);
        }
        if is_name(name, &DAYS_LONG) {
            return rfc850(rest);
        }
        return None;
    }
    asctime(s)
}

fn is_name(s: &[u8], names: &[&[u8]]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(s))
}

/// A three-letter name's bytes as one word, ASCII letters folded to lower case. Only a
/// letter folds onto a letter (`b | 0x20` is `a`..`z` only for `A`..`Z` and `a`..`z`), so
/// comparing folded words is comparing names without regard to case: one compare a name
/// instead of a loop a letter (a Date read back from the second tier on every hit).
fn folded(s: [u8; 3]) -> u32 {
    u32::from_le_bytes([s[0] | 0x20, s[1] | 0x20, s[2] | 0x20, 0])
}

/// Whether `s` is one of `names` (lower case), in any case.
fn is_short_name(s: [u8; 3], names: &[&[u8; 3]]) -> bool {
    let s = folded(s);
    names.iter().any(|n| folded(**n) == s)
}

/// ` DD Mon YYYY HH:MM:SS GMT`
fn imf_fixdate(s: &[u8]) -> Option<Time> {
    let [
        b' ',
        d1,
        d2,
        b' ',
        m1,
        m2,
        m3,
        b' ',
        y1,
        y2,
        y3,
        y4,
        b' ',
        time @ ..,
        b' ',
        g,
        m,
        t,
    ] = s
    else {
        return None;
    };
    gmt(*g, *m, *t)?;
    let day = digits(&[*d1, *d2])?;
    let month = month(&[*m1, *m2, *m3])?;
    let year = digits(&[*y1, *y2, *y3, *y4])?;
    at(year, month, day, time)
}

/// ` DD-Mon-YY HH:MM:SS GMT`
fn rfc850(s: &[u8]) -> Option<Time> {
    let [
        b' ',
        d1,
        d2,
        b'-',
        m1,
        m2,
        m3,
        b'-',
        y1,
        y2,
        b' ',
        time @ ..,
        b' ',
        g,
        m,
        t,
    ] = s
    else {
        return None;
    };
    gmt(*g, *m, *t)?;
    let day = digits(&[*d1, *d2])?;
    let month = month(&[*m1, *m2, *m3])?;
    let yy = digits(&[*y1, *y2])?;
    let year = if yy <= RFC850_PIVOT {
        2000 + yy
    } else {
        1900 + yy
    };
    at(year, month, day, time)
}

/// `Day Mon DD HH:MM:SS YYYY`, the day padded with a space (`Nov  6`).
fn asctime(s: &[u8]) -> Option<Time> {
    let [
        w1,
        w2,
        w3,
        b' ',
        m1,
        m2,
        m3,
        b' ',
        d1,
        d2,
        b' ',
        time @ ..,
        b' ',
        y1,
        y2,
        y3,
        y4,
    ] = s
    else {
        return None;
    };
    if !is_short_name([*w1, *w2, *w3], &DAYS) {
        return None;
    }
    let day = match (d1, d2) {
        (b' ', d) => digits(&[*d])?,
        (a, b) => digits(&[*a, *b])?,
    };
    let month = month(&[*m1, *m2, *m3])?;
    let year = digits(&[*y1, *y2, *y3, *y4])?;
    at(year, month, day, time)
}

fn gmt(g: u8, m: u8, t: u8) -> Option<()> {
    (folded([g, m, t]) == folded(*b"gmt")).then_some(())
}

fn month(m: &[u8; 3]) -> Option<u32> {
    let m = folded(*m);
    MONTHS
        .iter()
        .position(|n| folded(**n) == m)
        .map(|i| i as u32 + 1)
}

fn digits(d: &[u8]) -> Option<u32> {
    d.iter().try_fold(0u32, |n, b| {
        b.is_ascii_digit().then(|| n * 10 + u32::from(b - b'0'))
    })
}

/// The instant of a checked calendar date and `HH:MM:SS`.
fn at(year: u32, month: u32, day: u32, time: &[u8]) -> Option<Time> {
    let [h1, h2, b':', n1, n2, b':', s1, s2] = time else {
        return None;
    };
    let (h, min, sec) = (
        digits(&[*h1, *h2])?,
        digits(&[*n1, *n2])?,
        digits(&[*s1, *s2])?,
    );
    // A leap second (60) is allowed by the grammar; it is read as 59.
    if year < 1970 || h > 23 || min > 59 || sec > 60 || day == 0 || day > days_in(year, month) {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(Time(
        days * 86_400 + u64::from(h * 3600 + min * 60 + sec.min(59)),
    ))
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date on or after it (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: u32, month: u32, day: u32) -> u64 {
    let y = u64::from(if month <= 2 { year - 1 } else { year });
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = u64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + u64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_letter_folds_onto_a_letter() {
        // Every byte in every place of a three-letter name: the folded word matches only where
        // the byte is the name's letter in either case.
        for (place, name) in [(0, *b"gmt"), (1, *b"nov"), (2, *b"sun")].iter().copied() {
            for b in 0..=255u8 {
                let mut s = name;
                s[place] = b;
                let same = b.eq_ignore_ascii_case(&name[place]);
                assert_eq!(folded(s) == folded(name), same, "{s:?}");
            }
        }
    }

    #[test]
    fn expires_parse_table() {
        // RFC 9110 §5.6.7, row by row as cache-tests' expires-parse checks it.
        let rows: &[(&str, Option<u64>, &str)] = &[
            (
                "Sun, 06 Nov 1994 08:49:37 GMT",
                Some(784_111_777),
                "IMF-fixdate",
            ),
            (
                "Sunday, 06-Nov-94 08:49:37 GMT",
                Some(784_111_777),
                "RFC 850",
            ),
            ("Sun Nov  6 08:49:37 1994", Some(784_111_777), "asctime"),
            (
                "Tue, 19 Jan 2038 14:14:08 GMT",
                Some(2_147_523_248),
                "past 32 bits",
            ),
            (
                "Sun, 21 Nov 2286 04:46:39 GMT",
                Some(10_000_039_599),
                "far future",
            ),
            (
                "Thursday, 18-Aug-50 02:01:18 GMT",
                Some(2_544_400_878),
                "RFC 850: 50 is 2050",
            ),
            (
                "Thu Aug  8 02:01:18 2050",
                Some(2_543_536_878),
                "asctime; the day name is not checked",
            ),
            (
                "THU, 18 Aug 2050 02:01:18 GMT",
                Some(2_544_400_878),
                "day name case",
            ),
            (
                "Thu, 18 AUG 2050 02:01:18 GMT",
                Some(2_544_400_878),
                "month case",
            ),
            (
                "Thu, 18 Aug 2050 02:01:18 gMT",
                Some(2_544_400_878),
                "GMT case",
            ),
            ("Thu, 18 Aug 2050 02:01:18 UTC", None, "only GMT"),
            ("Thu, 18 Aug 2050 02:01:18 AEST", None, "only GMT"),
            (
                "Thu, 18 Aug 50 02:01:18 GMT",
                None,
                "IMF-fixdate needs 4 digits",
            ),
            ("Thu 18 Aug 2050 02:01:18 GMT", None, "missing comma"),
            ("Thu, 18  Aug  2050 02:01:18 GMT", None, "multiple spaces"),
            (
                "Thu, 18-Aug-2050 02:01:18 GMT",
                None,
                "dashes in IMF-fixdate",
            ),
            ("Thu, 18 Aug 2050 02.01.18 GMT", None, "time periods"),
            ("Thu, 18 Aug 2050 2:01:18 GMT", None, "1-digit hour"),
            ("Thu, 31 Feb 2050 02:01:18 GMT", None, "no such day"),
            (
                "Thu, 29 Feb 2048 02:01:18 GMT",
                Some(2_466_554_478),
                "leap year",
            ),
            ("Thu, 18 Aug 2050 24:00:00 GMT", None, "hour 24"),
            (
                "Thu, 18 Aug 2050 23:59:60 GMT",
                Some(2_544_479_999),
                "leap second read as 59",
            ),
            ("Thu, 01 Jan 1960 00:00:00 GMT", None, "before 1970"),
            ("Xyz, 18 Aug 2050 02:01:18 GMT", None, "not a day name"),
            ("0", None, "RFC 9111 §5.3: 0"),
            ("", None, "empty"),
        ];
        for (s, want, rule) in rows {
            assert_eq!(parse(s.as_bytes()).map(|t| t.0), *want, "{s} ({rule})");
        }
    }

    #[test]
    fn property_reads_back_what_httpdate_writes() {
        // Every second's IMF-fixdate, as the httpdate crate formats it, reads back as itself.
        let mut t: u64 = 0;
        while t < 20_000_000_000 {
            let s =
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t));
            assert_eq!(parse(s.as_bytes()), Some(Time(t)), "{s}");
            t += 86_399 * 7 + 12_345;
        }
    }
}
