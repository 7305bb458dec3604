//! The Cache-Control field (RFC 9111 §5.2), read for a response and for a request. Strict
//! where it protects: a malformed element that names a restricting directive (`no-store`,
//! `private`, `no-cache`, `must-revalidate`, `proxy-revalidate`) still restricts; a lifetime
//! that is malformed or given twice with different values reads as "stale" (§4.2.1); a
//! request's malformed freshness bound reads as its strictest. Never panics, never allocates.

use crate::fields::{element_end, is_ows, is_tchar, values};

/// The greatest delta-seconds a cache keeps: larger values (and overflows) are taken as this
/// (RFC 9111 §1.2.2, 2^31).
pub const MAX_DELTA: u32 = 1 << 31;

/// A delta-seconds argument as read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delta {
    /// The directive is not there.
    #[default]
    Absent,
    /// One valid value (repeats with the same value included), at most [`MAX_DELTA`].
    Secs(u32),
    /// Malformed, without its argument, or repeated with different values.
    Invalid,
}

impl Delta {
    /// Folds another occurrence of the same directive in: a different value makes it invalid.
    fn merge(self, next: Delta) -> Delta {
        match (self, next) {
            (Delta::Absent, n) => n,
            (Delta::Secs(a), Delta::Secs(b)) if a == b => self,
            _ => Delta::Invalid,
        }
    }
}

/// The directives of a response's Cache-Control (RFC 9111 §5.2.2) this cache acts on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseDirectives {
    pub max_age: Delta,
    pub s_maxage: Delta,
    pub no_store: bool,
    /// Qualified (`no-cache="Set-Cookie"`) or not: both are read as unqualified, which
    /// §5.2.2.4 allows and which never serves a field the origin wanted checked.
    pub no_cache: bool,
    /// Qualified or not: both keep the response out of a shared cache.
    pub private: bool,
    pub public: bool,
    pub must_revalidate: bool,
    pub proxy_revalidate: bool,
    pub must_understand: bool,
    /// RFC 5861 §3.
    pub stale_while_revalidate: Delta,
    /// RFC 5861 §4.
    pub stale_if_error: Delta,
    /// §5.2.2.6: no intermediary may transform the content (compress it, for one).
    pub no_transform: bool,
}

/// The directives of a request's Cache-Control (RFC 9111 §5.2.1), and `Pragma: no-cache`
/// where the request has no Cache-Control (§5.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// The oldest answer the client takes, in seconds; malformed reads as 0.
    pub max_age: Option<u32>,
    /// How stale an answer the client takes; `Some(MAX_DELTA)` for `max-stale` without a
    /// value, `Some(0)` when malformed.
    pub max_stale: Option<u32>,
    /// How much freshness must be left; malformed reads as [`MAX_DELTA`] (never fresh enough).
    pub min_fresh: Option<u32>,
    pub no_cache: bool,
    pub no_store: bool,
    pub only_if_cached: bool,
    /// RFC 5861 §4, asked by the client; malformed reads as 0.
    pub stale_if_error: Option<u32>,
}

/// One list element of a Cache-Control line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// `name` or `name=arg` (the argument a token, or a quoted string's content with its
    /// escapes still in).
    Directive {
        name: &'a [u8],
        arg: Option<Arg<'a>>,
    },
    /// An element that is not `token [ "=" ( token / quoted-string ) ]`; `name` is the token it
    /// starts with (perhaps empty).
    Malformed { name: &'a [u8] },
}

/// A directive's argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg<'a> {
    Token(&'a [u8]),
    /// The bytes between the quotes, backslash escapes not undone.
    Quoted(&'a [u8]),
}

/// The list elements of one Cache-Control line, in order; empty elements skipped. One pass
/// over a well-formed element's bytes (finding its end, then its name, then its argument
/// cost three, ~700 instructions for `public, max-age=3600`, callgrind); a malformed
/// element's end is found as a list's is (`fields::element_end`: a comma outside quotes).
pub fn items(line: &[u8]) -> impl Iterator<Item = Item<'_>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < line.len() && (is_ows(line[at]) || line[at] == b',') {
            at += 1;
        }
        if at >= line.len() {
            return None;
        }
        let (item, end) = item(line, at);
        at = end + 1;
        Some(item)
    })
}

/// Reads the element starting at `start` (neither OWS nor a comma): the item, and where the
/// element ends (its comma's index, or the line's length).
fn item(line: &[u8], start: usize) -> (Item<'_>, usize) {
    let tchars = |mut i: usize| {
        while i < line.len() && is_tchar(line[i]) {
            i += 1;
        }
        i
    };
    let mut i = tchars(start);
    let name = &line[start..i];
    // Its end found only when it is malformed: a well-formed element's is where it ends.
    let malformed = || {
        (
            Item::Malformed { name },
            start + element_end(&line[start..]),
        )
    };
    if name.is_empty() {
        return malformed();
    }
    let arg = if line.get(i) == Some(&b'=') {
        i += 1;
        if line.get(i) == Some(&b'"') {
            let q = &line[i + 1..];
            let Some(close) = quoted_end(q) else {
                return malformed();
            };
            i += close + 2;
            Some(Arg::Quoted(&q[..close]))
        } else {
            let from = i;
            i = tchars(i);
            if i == from {
                return malformed();
            }
            Some(Arg::Token(&line[from..i]))
        }
    } else {
        None
    };
    while i < line.len() && is_ows(line[i]) {
        i += 1;
    }
    if i == line.len() || line[i] == b',' {
        (Item::Directive { name, arg }, i)
    } else {
        malformed()
    }
}

/// The index of the closing quote of a quoted string whose opening quote was just before `s`.
fn quoted_end(s: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// A delta-seconds argument (RFC 9111 §1.2.2: `1*DIGIT`, leading zeros allowed), in token or
/// quoted form (§5.2: recipients ought to accept both), saturated at [`MAX_DELTA`].
pub fn delta(arg: Option<Arg<'_>>) -> Delta {
    let digits = match arg {
        Some(Arg::Token(t)) | Some(Arg::Quoted(t)) => t,
        None => return Delta::Invalid,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Delta::Invalid;
    }
    let mut n: u64 = 0;
    for d in digits {
        n = (n * 10 + u64::from(d - b'0')).min(u64::from(MAX_DELTA));
    }
    Delta::Secs(n as u32)
}

impl ResponseDirectives {
    /// Reads every Cache-Control line of a response's fields.
    pub fn parse<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Self {
        let mut d = ResponseDirectives::default();
        for line in values(fields, b"cache-control") {
            for item in items(line) {
                d.apply(item);
            }
        }
        d
    }

    fn apply(&mut self, item: Item<'_>) {
        let (name, arg, ok) = match item {
            Item::Directive { name, arg } => (name, arg, true),
            Item::Malformed { name } => (name, None, false),
        };
        let is = |n: &[u8]| name.eq_ignore_ascii_case(n);
        let value = || if ok { delta(arg) } else { Delta::Invalid };
        // Names told apart by length first: one compare a directive, not one a name it is
        // not (a hit read back from the second tier parses its stored Cache-Control).
        match name.len() {
            6 if is(b"public") => {
                // A grant counts only when well formed and without an argument.
                self.public |= ok && arg.is_none();
            }
            7 if is(b"max-age") => self.max_age = self.max_age.merge(value()),
            7 if is(b"private") => self.private = true,
            8 if is(b"s-maxage") => self.s_maxage = self.s_maxage.merge(value()),
            8 if is(b"no-store") => self.no_store = true,
            8 if is(b"no-cache") => self.no_cache = true,
            12 if is(b"no-transform") => self.no_transform = true,
            14 if is(b"stale-if-error") => {
                self.stale_if_error = self.stale_if_error.merge(value());
            }
            15 if is(b"must-revalidate") => self.must_revalidate = true,
            15 if is(b"must-understand") => self.must_understand |= ok && arg.is_none(),
            16 if is(b"proxy-revalidate") => self.proxy_revalidate = true,
            22 if is(b"stale-while-revalidate") => {
                self.stale_while_revalidate = self.stale_while_revalidate.merge(value());
            }
            _ => {}
        }
    }
}

impl RequestDirectives {
    /// Reads a request's Cache-Control lines, or its Pragma when it has none (§5.4).
    pub fn parse<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Self {
        let mut d = RequestDirectives::default();
        let mut any = false;
        for line in values(fields, b"cache-control") {
            any = true;
            for item in items(line) {
                d.apply(item);
            }
        }
        if !any {
            d.no_cache = values(fields, b"pragma").flat_map(items).any(|i| {
                matches!(i, Item::Directive { name, .. } if name.eq_ignore_ascii_case(b"no-cache"))
            });
        }
        d
    }

    fn apply(&mut self, item: Item<'_>) {
        let (name, arg, ok) = match item {
            Item::Directive { name, arg } => (name, arg, true),
            Item::Malformed { name } => (name, None, false),
        };
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        let secs = |strictest: u32| match (ok, delta(arg)) {
            (true, Delta::Secs(s)) => s,
            _ => strictest,
        };
        // Repeats take the strictest reading: the smallest age and staleness, the largest
        // freshness asked.
        if is("max-age") {
            let s = secs(0);
            self.max_age = Some(self.max_age.map_or(s, |m| m.min(s)));
        } else if is("max-stale") {
            // Without a value: any staleness (§5.2.1.2); malformed: none (0).
            let s = if ok && arg.is_none() {
                MAX_DELTA
            } else {
                secs(0)
            };
            self.max_stale = Some(self.max_stale.map_or(s, |m| m.min(s)));
        } else if is("min-fresh") {
            let s = secs(MAX_DELTA);
            self.min_fresh = Some(self.min_fresh.map_or(s, |m| m.max(s)));
        } else if is("no-cache") {
            self.no_cache = true;
        } else if is("no-store") {
            self.no_store = true;
        } else if is("only-if-cached") {
            self.only_if_cached = true;
        } else if is("stale-if-error") {
            let s = secs(0);
            self.stale_if_error = Some(self.stale_if_error.map_or(s, |m| m.min(s)));
        }
    }
}

#[cfg(test)]
mod tests;
