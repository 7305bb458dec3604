//! Validators (ETag, Last-Modified) and conditional requests (RFC 9110 §8.8, §13).
//!
//! Owns forming the validators of a file and evaluating If-Match, If-Unmodified-Since,
//! If-None-Match, If-Modified-Since (in the order of RFC 9110 §13.2.2) and If-Range. It reads
//! only header values and file metadata. ETags are strong: size, modification time to the
//! nanosecond and the content coding identify the bytes, as nginx's size and mtime do, so
//! every node of a fleet serving the same files (copied with their times: `rsync -a`,
//! `cp -p`, an image) gives the same tag, and a revalidation that crosses nodes is a 304.
//! Neither the inode nor the ctime is in it (they differ from node to node); bytes
//! rewritten in place with their size and mtime put back keep their tag, as with nginx.
#![forbid(unsafe_code)]

use std::time::UNIX_EPOCH;

use super::encoding::Encoding;
use super::open::FileMeta;

/// The validators of one representation (one file on disk, one coding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validators {
    /// Strong entity-tag with its quotes: `"<size>-<mtime s>.<mtime ns>[-br|-gz]"` in hex.
    pub etag: String,
    /// IMF-fixdate of the mtime, truncated to the second.
    pub last_modified: String,
    /// The mtime in whole seconds since the epoch (0 for earlier times), for date comparison.
    pub mtime_secs: u64,
}

impl Validators {
    pub fn of(meta: &FileMeta, encoding: Encoding) -> Validators {
        let coding = match encoding {
            Encoding::Identity => "",
            Encoding::Brotli => "-br",
            Encoding::Gzip => "-gz",
        };
        // `"size-mtime_s.mtime_ns{coding}"` in lower-case hex (negative times as their two's
        // complement, as `{:x}` writes an i64), without `format!`'s machinery: this runs for
        // every file request. Only what a copy keeps from node to node: the ctime and the
        // inode are each node's own.
        let mut etag = String::with_capacity(2 + 3 * 16 + 2 + coding.len());
        etag.push('"');
        push_hex(&mut etag, meta.size);
        etag.push('-');
        push_hex(&mut etag, meta.mtime_s as u64);
        etag.push('.');
        push_hex(&mut etag, u64::from(meta.mtime_ns));
        etag.push_str(coding);
        etag.push('"');
        let mtime_secs = u64::try_from(meta.mtime_s).unwrap_or(0);
        let last_modified = http_date(mtime_secs);
        Validators {
            etag,
            last_modified,
            mtime_secs,
        }
    }
}

/// Appends `v` in lower-case hex, no leading zeros (`0` for zero).
fn push_hex(s: &mut String, v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    let mut v = v;
    loop {
        i -= 1;
        buf[i] = DIGITS[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    // The digits are ASCII.
    s.push_str(std::str::from_utf8(&buf[i..]).unwrap_or_default());
}

/// The outcome of the preconditions of RFC 9110 §13.2.2 for a GET or HEAD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// Go on: send the representation (or a range of it).
    Proceed,
    /// 304 Not Modified.
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Evaluates the preconditions for a GET or HEAD of an existing representation. Each
/// argument is the field's value if the request has one.
pub fn evaluate(
    v: &Validators,
    if_match: Option<&[u8]>,
    if_unmodified_since: Option<&[u8]>,
    if_none_match: Option<&[u8]>,
    if_modified_since: Option<&[u8]>,
) -> Precondition {
    // Step 1: If-Match, strong comparison (RFC 9110 §13.1.1).
    if let Some(value) = if_match {
        if !list_matches(value, &v.etag, Compare::Strong) {
            return Precondition::Failed;
        }
    } else if let Some(date) = if_unmodified_since.and_then(parse_date) {
        // Step 2: If-Unmodified-Since, only without If-Match; an invalid date is ignored.
        if v.mtime_secs > date {
            return Precondition::Failed;
        }
    }
    // Step 3: If-None-Match, weak comparison (RFC 9110 §13.1.2); it takes precedence over
    // If-Modified-Since, which is then not evaluated at all.
    if let Some(value) = if_none_match {
        if list_matches(value, &v.etag, Compare::Weak) {
            return Precondition::NotModified;
        }
    } else if let Some(date) = if_modified_since.and_then(parse_date) {
        // Step 4 (RFC 9110 §13.1.3): not modified unless Last-Modified is later.
        if v.mtime_secs <= date {
            return Precondition::NotModified;
        }
    }
    Precondition::Proceed
}

/// RFC 9110 §13.1.5: whether a Range request's If-Range still holds. An entity-tag must
/// match strongly (a weak one never does); a date must equal Last-Modified exactly.
pub fn if_range_holds(value: &[u8], v: &Validators) -> bool {
    // An entity-tag starts with a quote or `W/`; a date (even "Wed, …") never does.
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        let mut tags = EntityTags::new(value);
        return match (tags.next(), tags.next()) {
            (Some(Ok(tag)), None) => tag.matches(&v.etag, Compare::Strong),
            _ => false,
        };
    }
    parse_date(value) == Some(v.mtime_secs)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Compare {
    Strong,
    Weak,
}

/// `"*"` or `1#entity-tag`. A malformed list matches nothing, so the condition is treated as
/// false for If-None-Match (send the body) and as failed for If-Match.
fn list_matches(value: &[u8], etag: &str, how: Compare) -> bool {
    if trim(value) == b"*" {
        // The representation exists: `*` matches it (RFC 9110 §13.1.1, §13.1.2).
        return true;
    }
    let mut any = false;
    for tag in EntityTags::new(value) {
        match tag {
            Ok(tag) => any |= tag.matches(etag, how),
            Err(()) => return false,
        }
    }
    any
}

/// One entity-tag from a list: `[ "W/" ] DQUOTE *etagc DQUOTE` (RFC 9110 §8.8.3).
struct Tag<'a> {
    weak: bool,
    /// The opaque-tag including its quotes.
    opaque: &'a [u8],
}

impl Tag<'_> {
    fn matches(&self, ours: &str, how: Compare) -> bool {
        // Our own tags are always strong.
        (how == Compare::Weak || !self.weak) && self.opaque == ours.as_bytes()
    }
}

/// Iterates a comma-separated list of entity-tags. Commas may appear inside an opaque-tag,
/// so the list is scanned tag by tag rather than split.
struct EntityTags<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> EntityTags<'a> {
    fn new(value: &'a [u8]) -> EntityTags<'a> {
        EntityTags {
            rest: value,
            failed: false,
        }
    }
}

impl<'a> Iterator for EntityTags<'a> {
    type Item = Result<Tag<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let start = self
            .rest
            .iter()
            .position(|&b| !matches!(b, b' ' | b'\t' | b','))?;
        let mut s = &self.rest[start..];
        let weak = s.starts_with(b"W/");
        if weak {
            s = &s[2..];
        }
        let close = match s.split_first() {
            Some((b'"', body)) => body.iter().position(|&b| b == b'"'),
            _ => None,
        };
        let Some(close) = close else {
            self.failed = true;
            return Some(Err(()));
        };
        let (opaque, after) = s.split_at(close + 2);
        // After a tag: OWS, then a comma or the end.
        let after = trim_start(after);
        if !(after.is_empty() || after[0] == b',') {
            self.failed = true;
            return Some(Err(()));
        }
        self.rest = after;
        Some(Ok(Tag { weak, opaque }))
    }
}

/// An HTTP-date in any of the three forms a recipient must accept (RFC 9110 §5.6.7), as
/// seconds since the epoch; `None` when invalid (the condition is then ignored).
fn parse_date(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(trim(value)).ok()?;
    let time = httpdate::parse_http_date(text).ok()?;
    Some(time.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

/// Formats seconds since the epoch as an IMF-fixdate (tests and callers building dates).
pub fn http_date(secs: u64) -> String {
    String::from_utf8_lossy(&linerate_http1::fmt_http_date(secs)).into_owned()
}

fn trim_start(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|&c| c != b' ' && c != b'\t')
        .unwrap_or(b.len());
    &b[start..]
}

fn trim(b: &[u8]) -> &[u8] {
    let b = trim_start(b);
    let end = b
        .iter()
        .rposition(|&c| c != b' ' && c != b'\t')
        .map_or(0, |e| e + 1);
    &b[..end]
}

#[cfg(test)]
mod tests {
    use super::Precondition::{Failed, NotModified, Proceed};
    use super::*;

    const MTIME: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT
    const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    fn validators() -> Validators {
        Validators::of(
            &FileMeta {
                dev: 1,
                ino: 0xabc,
                size: 1000,
                mtime_s: MTIME as i64,
                mtime_ns: 5,
                ctime_s: MTIME as i64,
                ctime_ns: 5,
            },
            Encoding::Identity,
        )
    }

    #[test]
    fn hex_is_what_format_writes() {
        for v in [
            0u64,
            1,
            9,
            0xa,
            0xf,
            0x10,
            0xabc,
            u32::MAX as u64,
            (-1i64) as u64,
            u64::MAX,
        ] {
            let mut s = String::new();
            push_hex(&mut s, v);
            assert_eq!(s, format!("{v:x}"));
        }
        // A time before 1970 is written as `{:x}` writes an i64: its two's complement.
        let mut s = String::new();
        push_hex(&mut s, -5i64 as u64);
        assert_eq!(s, format!("{:x}", -5i64));
    }

    #[test]
    fn validator_forms() {
        let v = validators();
        assert_eq!(v.etag, "\"3e8-2ebc98a1.5\"");
        assert_eq!(v.last_modified, LM);
        let meta = FileMeta {
            dev: 1,
            ino: 0xabc,
            size: 1000,
            mtime_s: MTIME as i64,
            mtime_ns: 5,
            ctime_s: MTIME as i64 - 1,
            ctime_ns: 7,
        };
        assert_eq!(
            Validators::of(&meta, Encoding::Brotli).etag,
            "\"3e8-2ebc98a1.5-br\""
        );
        assert_eq!(
            Validators::of(&meta, Encoding::Gzip).etag,
            "\"3e8-2ebc98a1.5-gz\""
        );
        assert_eq!(http_date(MTIME), LM);
        // The same file on another node of a fleet (copied with its times): another inode,
        // another ctime, the same tag, so a revalidation that crosses
        // nodes is a 304.
        let elsewhere = FileMeta {
            dev: 7,
            ino: 0x5151,
            ctime_s: MTIME as i64 + 60,
            ctime_ns: 9,
            ..meta
        };
        let v = Validators::of(&elsewhere, Encoding::Identity);
        assert_eq!(v.etag, validators().etag);
        assert_eq!(v.last_modified, LM);
        // Another mtime or size is another tag.
        let touched = FileMeta {
            mtime_ns: 6,
            ..meta
        };
        assert_ne!(Validators::of(&touched, Encoding::Identity).etag, v.etag);
        let grown = FileMeta { size: 1001, ..meta };
        assert_ne!(Validators::of(&grown, Encoding::Identity).etag, v.etag);
    }

    #[test]
    fn preconditions_table() {
        let v = validators();
        let tag = v.etag.as_str();
        let weak = format!("W/{tag}");
        let list = format!("\"x\", {tag}");
        let comma_tag = "\"a,b\", ".to_string() + tag;
        let junk = format!("{tag} junk");
        let later = "Sun, 06 Nov 1994 08:49:38 GMT";
        let earlier = "Sun, 06 Nov 1994 08:49:36 GMT";
        // (If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since, expected)
        type Row<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            Precondition,
        );
        let rows: Vec<Row> = vec![
            (None, None, None, None, Proceed),
            // RFC 9110 §13.1.2: If-None-Match uses weak comparison; `*` matches.
            (None, None, Some(tag), None, NotModified),
            (None, None, Some(&weak), None, NotModified),
            (None, None, Some(&list), None, NotModified),
            (None, None, Some(&comma_tag), None, NotModified),
            (None, None, Some("*"), None, NotModified),
            (None, None, Some("\"other\""), None, Proceed),
            (None, None, Some("garbage"), None, Proceed),
            (None, None, Some(&junk), None, Proceed),
            // RFC 9110 §13.1.3: If-Modified-Since.
            (None, None, None, Some(LM), NotModified),
            (None, None, None, Some(later), NotModified),
            (None, None, None, Some(earlier), Proceed),
            (None, None, None, Some("not a date"), Proceed),
            // RFC 9110 §5.6.7: obsolete date forms are accepted.
            (
                None,
                None,
                None,
                Some("Sunday, 06-Nov-94 08:49:37 GMT"),
                NotModified,
            ),
            (
                None,
                None,
                None,
                Some("Sun Nov  6 08:49:37 1994"),
                NotModified,
            ),
            // RFC 9110 §13.1.2: If-None-Match takes precedence; If-Modified-Since ignored.
            (None, None, Some("\"other\""), Some(LM), Proceed),
            (None, None, Some(tag), Some(earlier), NotModified),
            // RFC 9110 §13.1.1: If-Match uses strong comparison.
            (Some(tag), None, None, None, Proceed),
            (Some("*"), None, None, None, Proceed),
            (Some(&weak), None, None, None, Failed),
            (Some("\"other\""), None, None, None, Failed),
            // RFC 9110 §13.1.4: If-Unmodified-Since, ignored when If-Match is present.
            (None, Some(LM), None, None, Proceed),
            (None, Some(earlier), None, None, Failed),
            (Some(tag), Some(earlier), None, None, Proceed),
            (None, Some("bogus"), None, None, Proceed),
            // RFC 9110 §13.2.2: If-Match is evaluated before If-None-Match.
            (Some("\"other\""), None, Some(tag), None, Failed),
        ];
        for (im, ius, inm, ims, want) in rows {
            let got = evaluate(
                &v,
                im.map(str::as_bytes),
                ius.map(str::as_bytes),
                inm.map(str::as_bytes),
                ims.map(str::as_bytes),
            );
            assert_eq!(got, want, "{im:?} {ius:?} {inm:?} {ims:?}");
        }
    }

    #[test]
    fn if_range_table() {
        let v = validators();
        let rows: Vec<(String, bool)> = vec![
            // RFC 9110 §13.1.5: strong comparison; a weak tag never matches.
            (v.etag.clone(), true),
            (format!("W/{}", v.etag), false),
            ("\"other\"".into(), false),
            (format!("{}, \"x\"", v.etag), false),
            // A date must be an exact match.
            (LM.into(), true),
            ("Sun, 06 Nov 1994 08:49:38 GMT".into(), false),
            ("Wed, 09 Nov 1994 08:49:37 GMT".into(), false),
            ("yesterday".into(), false),
        ];
        for (value, want) in rows {
            assert_eq!(if_range_holds(value.as_bytes(), &v), want, "{value}");
        }
    }
}
