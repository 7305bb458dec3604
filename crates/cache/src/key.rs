//! The cache key (RFC 9111 §2, §4): the primary key is the target URI — scheme, host (lower
//! case, default port dropped), path and query byte for byte — for GET (a HEAD is answered
//! from the GET's entry); the secondary key is the request's values of the fields the stored
//! response's `Vary` names (§4.1), normalised. Nothing else from the request is in the key, so
//! no other field (X-Forwarded-Host, a second Host, X-Original-URL…) can change what is stored.

use crate::fields::{Field, elements, is_ows, values};

thread_local! {
    /// The scheme and authority of the last origin-form key this thread wrote, as received,
    /// and the prefix they made (`scheme://host[:port]`): a connection's requests, and most
    /// of a worker's, name one origin, which is then split, checked and lowered once, not
    /// once a request (~350 instructions a cache hit, callgrind).
    static LAST_ORIGIN: std::cell::RefCell<LastOrigin> = const {
        std::cell::RefCell::new(LastOrigin {
            scheme: Vec::new(),
            authority: Vec::new(),
            prefix: Vec::new(),
        })
    };
}

/// See [`LAST_ORIGIN`]. Empty (no prefix) at first: nothing matches it.
struct LastOrigin {
    scheme: Vec<u8>,
    authority: Vec<u8>,
    prefix: Vec<u8>,
}

/// A target byte no key takes: a space, a control byte, DEL, or a fragment's `#`.
fn bad_path(path: &[u8]) -> bool {
    path.iter().any(|&b| b <= b' ' || b == 0x7f || b == b'#')
}

/// The primary cache key: `scheme://authority` then the origin-form target, as bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Box<[u8]>);

/// A map keyed by [`Key`] is searched with the key's bytes (their hash and equality are the
/// key's): a lookup need not allocate a key.
impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        &self.0
    }
}

/// Why a request has no key: it is passed upstream and its answer never stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoKey {
    /// The scheme is neither http nor https.
    Scheme,
    /// An empty authority, or one with userinfo, a path or a character a host never has.
    Authority,
    /// An asterisk-form or authority-form target, a fragment, or anything not origin-form or
    /// absolute-form.
    Target,
    /// An absolute-form target whose scheme or authority is not the request's: the proxy may
    /// send one to upstream and the other to the key, a poisoning shape, so neither is trusted.
    Disagrees,
}

impl Key {
    /// The key of `scheme://authority` + `target`. `authority` is the request's Host (or
    /// `:authority`); `target` is origin-form (`/path?query`) or absolute-form, which must
    /// then agree with `scheme` and `authority`.
    pub fn new(scheme: &[u8], authority: &[u8], target: &[u8]) -> Result<Key, NoKey> {
        let mut k = Vec::new();
        Key::write(scheme, authority, target, &mut k)?;
        Ok(Key(k.into_boxed_slice()))
    }

    /// [`Key::new`]'s bytes written into `k` (cleared first), so that a lookup can build
    /// its key in a buffer it keeps (no allocation per request); [`Key::from_bytes`] makes
    /// the key of them.
    pub fn write(
        scheme: &[u8],
        authority: &[u8],
        target: &[u8],
        k: &mut Vec<u8>,
    ) -> Result<(), NoKey> {
        k.clear();
        // An origin-form target under the origin the thread's last key had: its prefix is
        // that key's (the normalisation is a function of the scheme and authority alone).
        if target.first() == Some(&b'/')
            && LAST_ORIGIN.with_borrow(|o| {
                let same = !o.prefix.is_empty() && o.scheme == scheme && o.authority == authority;
                if same {
                    k.extend_from_slice(&o.prefix);
                }
                same
            })
        {
            if bad_path(target) {
                k.clear();
                return Err(NoKey::Target);
            }
            k.extend_from_slice(target);
            return Ok(());
        }
        let scheme_lower: &[u8] = if scheme.eq_ignore_ascii_case(b"http") {
            b"http"
        } else if scheme.eq_ignore_ascii_case(b"https") {
            b"https"
        } else {
            return Err(NoKey::Scheme);
        };
        let (host, port) = split_authority(authority).ok_or(NoKey::Authority)?;
        let path = match target.first() {
            Some(b'/') => target,
            Some(_) => {
                let (t_scheme, t_authority, t_path) =
                    split_absolute(target).ok_or(NoKey::Target)?;
                let agrees = t_scheme.eq_ignore_ascii_case(scheme)
                    && split_authority(t_authority).is_some_and(|(h, p)| {
                        h.eq_ignore_ascii_case(host)
                            && effective_port(scheme_lower, p) == effective_port(scheme_lower, port)
                    });
                if !agrees {
                    return Err(NoKey::Disagrees);
                }
                t_path
            }
            None => return Err(NoKey::Target),
        };
        if bad_path(path) {
            return Err(NoKey::Target);
        }
        let given = port;
        let port = match port {
            None | Some([]) => None,
            Some(p) => Some(parse_port(p).ok_or(NoKey::Authority)?),
        }
        .filter(|p| Some(*p) != default_port(scheme_lower));
        let mut digits = [0u8; 20];
        let digits = match (port, given) {
            (None, _) => &[][..],
            // Digits without a leading zero are the port's own decimal form: kept as given.
            (Some(_), Some(g @ [b'1'..=b'9', ..])) => g,
            (Some(p), _) => crate::fields::decimal(u64::from(p), &mut digits),
        };
        let len = scheme_lower.len() + 3 + host.len() + 1 + digits.len() + path.len();
        k.reserve(len);
        k.extend_from_slice(scheme_lower);
        k.extend_from_slice(b"://");
        k.extend_from_slice(host);
        k[scheme_lower.len() + 3..].make_ascii_lowercase();
        if !digits.is_empty() {
            k.push(b':');
            k.extend_from_slice(digits);
        }
        if target.first() == Some(&b'/') {
            LAST_ORIGIN.with_borrow_mut(|o| {
                o.scheme.clear();
                o.scheme.extend_from_slice(scheme);
                o.authority.clear();
                o.authority.extend_from_slice(authority);
                o.prefix.clear();
                o.prefix.extend_from_slice(k);
            });
        }
        k.extend_from_slice(path);
        Ok(())
    }

    /// The key whose bytes [`Key::write`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Key {
        Key(bytes.into())
    }

    /// The key's bytes (`https://example.com/a?b`).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The origin part (`scheme://host[:port]`), for same-origin checks (§4.4).
    pub fn origin(&self) -> &[u8] {
        let after = self
            .0
            .windows(3)
            .position(|w| w == b"://")
            .map_or(0, |i| i + 3);
        let end = self.0[after..]
            .iter()
            .position(|b| *b == b'/')
            .map_or(self.0.len(), |i| after + i);
        &self.0[..end]
    }

    /// Whether the key's scheme, host and path start with `prefix` (a purge by prefix).
    pub fn starts_with(&self, prefix: &[u8]) -> bool {
        self.0.starts_with(prefix)
    }
}

/// The bytes a host may hold (RFC 3986 §3.2.2: unreserved, sub-delims, pct-encoded, and an
/// IP literal's brackets and colons), as a table: one load per byte.
const HOST_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric();
        b += 1;
    }
    let extra = b"-._~!$&'()*+,;=%[]:";
    let mut i = 0;
    while i < extra.len() {
        t[extra[i] as usize] = true;
        i += 1;
    }
    t
};

/// `(host, port)` of an authority: no userinfo, a reg-name or IP literal, an optional port.
fn split_authority(a: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (host, port) = if a.first() == Some(&b'[') {
        let close = a.iter().position(|b| *b == b']')?;
        let rest = &a[close + 1..];
        match rest {
            [] => (&a[..=close], None),
            [b':', p @ ..] => (&a[..=close], Some(p)),
            _ => return None,
        }
    } else {
        // One pass: every byte a host byte (`@`, userinfo's mark, is not one), the first
        // colon the port's.
        let mut colon = None;
        for (i, &b) in a.iter().enumerate() {
            if !HOST_BYTES[b as usize] {
                return None;
            }
            if b == b':' {
                colon = Some(i);
                break;
            }
        }
        match colon {
            Some(i) => (&a[..i], Some(&a[i + 1..])),
            None => (a, None),
        }
    };
    let host_ok =
        !host.is_empty() && (host[0] != b'[' || host.iter().all(|&b| HOST_BYTES[b as usize]));
    let port_ok = port.is_none_or(|p| p.iter().all(u8::is_ascii_digit));
    (host_ok && port_ok).then_some((host, port))
}

/// `scheme`, `authority`, `path-abempty + query` (the path defaulting to `/`) of an
/// absolute-form target.
fn split_absolute(t: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
    let colon = t.windows(3).position(|w| w == b"://")?;
    let (scheme, rest) = (&t[..colon], &t[colon + 3..]);
    let end = rest
        .iter()
        .position(|b| *b == b'/' || *b == b'?')
        .unwrap_or(rest.len());
    let path: &[u8] = match &rest[end..] {
        [] => b"/",
        p if p[0] == b'?' => return None, // a query without a path: refuse rather than guess
        p => p,
    };
    Some((scheme, &rest[..end], path))
}

fn default_port(scheme: &[u8]) -> Option<u16> {
    match scheme {
        b"http" => Some(80),
        b"https" => Some(443),
        _ => None,
    }
}

/// The port an authority names (an empty port is the default, RFC 3986 §3.2.3).
fn effective_port(scheme: &[u8], port: Option<&[u8]>) -> Option<u16> {
    match port {
        None | Some([]) => default_port(scheme),
        Some(p) => parse_port(p),
    }
}

/// A port's digits as a number: `None` past 65535 (or for anything but digits).
fn parse_port(p: &[u8]) -> Option<u16> {
    let mut n: u32 = 0;
    for &b in p {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u32::from(b - b'0');
        if n > u32::from(u16::MAX) {
            return None;
        }
    }
    u16::try_from(n).ok()
}

/// Fields whose values are case-insensitive lists where order carries no meaning of its own
/// (q-values do), so they are compared lower-cased and sorted (RFC 9111 §4.1 allows it).
const UNORDERED_LISTS: &[&[u8]] = &[b"accept-encoding", b"accept-language", b"accept-charset"];

/// The most field names one `Vary` may list; more and the response is not stored (a Vary
/// naming dozens of fields is an attack on memory or a bug, never a hit).
pub const MAX_VARY_FIELDS: usize = 16;

/// The secondary key a stored response was chosen by (§4.1): for each field its `Vary` names
/// (lower case), the request's normalised value, or `None` where the request had none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Variant(Vec<Selecting>);

/// One selecting field of a [`Variant`]: its lower-case name and the request's normalised
/// value (`None`: the request had no such field).
type Selecting = (Box<[u8]>, Option<Box<[u8]>>);

/// What a response's `Vary` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vary {
    /// No `Vary`: one variant per key.
    None,
    /// `*` among its members: never matches (§4.1), so never stored.
    Star,
    /// The field names, lower case, in order, without repeats.
    Fields(Vec<Box<[u8]>>),
    /// More names than [`MAX_VARY_FIELDS`].
    TooMany,
}

impl Vary {
    /// Reads every `Vary` line of a response.
    pub fn parse<N: AsRef<[u8]>, V: AsRef<[u8]>>(fields: &[(N, V)]) -> Vary {
        let mut names: Vec<Box<[u8]>> = Vec::new();
        for name in values(fields, b"vary").flat_map(elements) {
            if name == b"*" {
                return Vary::Star;
            }
            let lower: Box<[u8]> = name.to_ascii_lowercase().into();
            if !names.contains(&lower) {
                names.push(lower);
            }
        }
        match names.len() {
            0 => Vary::None,
            n if n > MAX_VARY_FIELDS => Vary::TooMany,
            _ => Vary::Fields(names),
        }
    }
}

impl Variant {
    /// The secondary key of `request_fields` for the names `vary` lists (empty for none).
    pub fn of(vary: &Vary, request_fields: &[Field<'_>]) -> Variant {
        let Vary::Fields(names) = vary else {
            return Variant::default();
        };
        Variant(
            names
                .iter()
                .map(|n| (n.clone(), normalise(n, request_fields)))
                .collect(),
        )
    }

    /// Whether a request selects this stored variant (§4.1): every listed field's normalised
    /// value equal, absent matching only absent.
    pub fn matches(&self, request_fields: &[Field<'_>]) -> bool {
        self.0
            .iter()
            .all(|(name, want)| same_value(name, want.as_deref(), request_fields))
    }

    /// Each selecting field's lower-case name and the normalised value the stored answer was
    /// chosen by (`None`: the request had none).
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.0.iter().map(|(n, v)| (&n[..], v.as_deref()))
    }

    /// The bytes this variant holds, for the store's accounting.
    pub fn size(&self) -> usize {
        self.0
            .iter()
            .map(|(n, v)| n.len() + v.as_ref().map_or(0, |v| v.len()))
            .sum()
    }
}

/// The value of `name` in `fields` normalised (§4.1): lines combined, elements trimmed of OWS
/// and joined by `,`; for [`UNORDERED_LISTS`], lower-cased, inner whitespace removed and sorted.
fn normalise(name: &[u8], fields: &[Field<'_>]) -> Option<Box<[u8]>> {
    let mut lines = values(fields, name).peekable();
    lines.peek()?;
    let unordered = UNORDERED_LISTS.contains(&name);
    let mut parts: Vec<Vec<u8>> = lines
        .flat_map(elements)
        .map(|e| {
            if unordered {
                e.iter()
                    .filter(|b| !is_ows(**b))
                    .map(u8::to_ascii_lowercase)
                    .collect()
            } else {
                e.to_vec()
            }
        })
        .collect();
    if unordered {
        parts.sort_unstable();
    }
    Some(parts.join(&b","[..]).into_boxed_slice())
}

/// Whether `normalise(name, fields)` equals `want`, without building it: this runs on every
/// lookup of a Vary'd entry (Accept-Encoding on most compressed answers), so it allocates
/// nothing. Lists with quoted strings take the building path (a comma inside quotes would
/// make the stored form's pieces differ from the elements).
fn same_value(name: &[u8], want: Option<&[u8]>, fields: &[Field<'_>]) -> bool {
    let present = values(fields, name).next().is_some();
    let Some(want) = want else {
        return !present;
    };
    if !present {
        return false;
    }
    if !UNORDERED_LISTS.contains(&name) {
        // The elements, in order, each followed by a comma but the last.
        let mut rest = want;
        for (i, e) in values(fields, name).flat_map(elements).enumerate() {
            if i > 0 {
                match rest.split_first() {
                    Some((b',', r)) => rest = r,
                    _ => return false,
                }
            }
            match rest.strip_prefix(e) {
                Some(r) => rest = r,
                None => return false,
            }
        }
        return rest.is_empty();
    }
    let pieces = || want.split(|b| *b == b',').filter(|_| !want.is_empty());
    let n = pieces().count();
    if n > 64 || want.contains(&b'"') || values(fields, name).any(|v| v.contains(&b'"')) {
        return normalise(name, fields).as_deref() == Some(want);
    }
    // The same elements in any order: each request element takes one unused equal piece.
    let mut used = 0u64;
    let mut count = 0;
    for e in values(fields, name).flat_map(elements) {
        count += 1;
        let free = pieces()
            .enumerate()
            .position(|(i, p)| used & (1 << i) == 0 && folded_eq(e, p));
        match free {
            Some(i) => used |= 1 << i,
            None => return false,
        }
    }
    count == n
}

/// Whether element `e`, lower-cased and without OWS, is `piece`.
fn folded_eq(e: &[u8], piece: &[u8]) -> bool {
    let mut folded = e
        .iter()
        .filter(|b| !is_ows(**b))
        .map(u8::to_ascii_lowercase);
    piece.iter().all(|b| folded.next() == Some(*b)) && folded.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_key_table() {
        type Row<'a> = (&'a str, &'a str, &'a str, Result<&'a str, NoKey>, &'a str);
        let rows: &[Row] = &[
            (
                "http",
                "example.com",
                "/a?b=1",
                Ok("http://example.com/a?b=1"),
                "§2",
            ),
            (
                "https",
                "EXAMPLE.com",
                "/",
                Ok("https://example.com/"),
                "RFC 3986 §6.2.2.1: host case",
            ),
            (
                "http",
                "example.com:80",
                "/",
                Ok("http://example.com/"),
                "RFC 3986 §6.2.3: default port",
            ),
            (
                "https",
                "example.com:443",
                "/",
                Ok("https://example.com/"),
                "RFC 3986 §6.2.3",
            ),
            (
                "http",
                "example.com:",
                "/",
                Ok("http://example.com/"),
                "RFC 3986 §3.2.3: empty port",
            ),
            (
                "http",
                "example.com:8080",
                "/",
                Ok("http://example.com:8080/"),
                "§2: port kept",
            ),
            (
                "http",
                "example.com:08080",
                "/",
                Ok("http://example.com:8080/"),
                "RFC 3986 §6.2.2: leading zeros are the same port",
            ),
            (
                "http",
                "example.com:080",
                "/",
                Ok("http://example.com/"),
                "RFC 3986 §6.2.3: the default port, written long",
            ),
            (
                "http",
                "example.com:65536",
                "/",
                Err(NoKey::Authority),
                "a port past 65535 is no port: never keyed as the default one",
            ),
            (
                "http",
                "a:b:c",
                "/",
                Err(NoKey::Authority),
                "RFC 3986 §3.2.3: a port is digits",
            ),
            (
                "http",
                "user@example.com",
                "/",
                Err(NoKey::Authority),
                "RFC 9110 §4.2.4: no userinfo",
            ),
            (
                "http",
                "example.com:80@evil",
                "/",
                Err(NoKey::Authority),
                "RFC 9110 §4.2.4: no userinfo, after the colon either",
            ),
            (
                "http",
                "[::1]:8080",
                "/x",
                Ok("http://[::1]:8080/x"),
                "IP literal",
            ),
            (
                "http",
                "example.com",
                "/A%2f?Q",
                Ok("http://example.com/A%2f?Q"),
                "path and query byte for byte",
            ),
            (
                "HTTP",
                "example.com",
                "http://EXAMPLE.com:80/p",
                Ok("http://example.com/p"),
                "RFC 9112 §3.2.2: absolute-form",
            ),
            (
                "http",
                "example.com",
                "http://example.com",
                Ok("http://example.com/"),
                "RFC 9110 §4.2.3: empty path is /",
            ),
            (
                "http",
                "example.com",
                "http://evil.com/p",
                Err(NoKey::Disagrees),
                "poisoning: target vs Host",
            ),
            (
                "http",
                "example.com",
                "https://example.com/p",
                Err(NoKey::Disagrees),
                "poisoning: scheme",
            ),
            (
                "http",
                "example.com",
                "*",
                Err(NoKey::Target),
                "asterisk-form",
            ),
            (
                "http",
                "example.com",
                "example.com:80",
                Err(NoKey::Target),
                "authority-form",
            ),
            (
                "http",
                "example.com",
                "/a#b",
                Err(NoKey::Target),
                "no fragment on the wire",
            ),
            (
                "http",
                "example.com",
                "",
                Err(NoKey::Target),
                "empty target",
            ),
            (
                "http",
                "u@example.com",
                "/",
                Err(NoKey::Authority),
                "no userinfo",
            ),
            ("http", "", "/", Err(NoKey::Authority), "no authority"),
            (
                "http",
                "a/b",
                "/",
                Err(NoKey::Authority),
                "a path in the authority",
            ),
            ("http", "a:8x", "/", Err(NoKey::Authority), "a bad port"),
            (
                "ftp",
                "example.com",
                "/",
                Err(NoKey::Scheme),
                "only http(s)",
            ),
        ];
        // The key `Key::new` makes of a row, as text.
        let key = |scheme: &str, authority: &str, target: &str| {
            Key::new(scheme.as_bytes(), authority.as_bytes(), target.as_bytes())
                .map(|k| String::from_utf8(k.as_bytes().to_vec()).unwrap())
        };
        for (scheme, authority, target, want, rule) in rows {
            assert_eq!(
                key(scheme, authority, target).as_deref(),
                want.as_ref().copied(),
                "{scheme} {authority} {target} ({rule})"
            );
            // Written into a buffer that held an earlier key: the same bytes, or the same
            // refusal.
            let mut buf = b"https://earlier.example/a/much/longer/path?q=1".to_vec();
            let wrote = Key::write(
                scheme.as_bytes(),
                authority.as_bytes(),
                target.as_bytes(),
                &mut buf,
            )
            .map(|()| std::str::from_utf8(&buf).unwrap());
            assert_eq!(
                wrote.as_ref().ok(),
                want.as_ref().ok(),
                "write: {target} ({rule})"
            );
            assert_eq!(wrote.err(), want.err(), "write: {target} ({rule})");
        }
        // Each row right after each other row: the thread's last origin (`LAST_ORIGIN`) is
        // then the other's, whose prefix must serve only the same scheme and authority.
        for (s1, a1, t1, _, _) in rows {
            for (scheme, authority, target, want, rule) in rows {
                let _ = key(s1, a1, t1);
                assert_eq!(
                    key(scheme, authority, target).as_deref(),
                    want.as_ref().copied(),
                    "after {s1} {a1} {t1}: {scheme} {authority} {target} ({rule})"
                );
            }
        }
    }

    #[test]
    fn origin_and_prefix() {
        let k = Key::new(b"https", b"a.example:8443", b"/x/y?z").unwrap();
        assert_eq!(k.origin(), b"https://a.example:8443");
        assert!(k.starts_with(b"https://a.example:8443/x/"));
        assert!(!k.starts_with(b"https://a.example:8443/y"));
    }

    #[test]
    fn vary_table() {
        // RFC 9111 §4.1.
        let f = |v: &str| Vary::parse(&[(&b"Vary"[..], v.as_bytes())]);
        assert_eq!(f("*"), Vary::Star);
        assert_eq!(f("*, *"), Vary::Star);
        assert_eq!(f(", *"), Vary::Star);
        assert_eq!(f("Foo, *"), Vary::Star);
        assert_eq!(
            Vary::parse(&[(&b"Vary"[..], &b"Foo"[..]), (b"vary", b"*")]),
            Vary::Star
        );
        assert_eq!(
            f("Foo, ACCEPT-encoding, foo"),
            Vary::Fields(vec![b"foo"[..].into(), b"accept-encoding"[..].into()])
        );
        assert_eq!(Vary::parse::<&[u8], &[u8]>(&[]), Vary::None);
        assert_eq!(f(" , "), Vary::None);
        let many: Vec<String> = (0..=MAX_VARY_FIELDS).map(|i| format!("x{i}")).collect();
        assert_eq!(f(&many.join(",")), Vary::TooMany);
    }

    #[test]
    fn variant_matching_table() {
        let vary = Vary::Fields(vec![b"foo"[..].into(), b"accept-language"[..].into()]);
        let stored: &[Field] = &[(b"Foo", b"1, 2"), (b"Accept-Language", b"en, de")];
        let v = Variant::of(&vary, stored);
        let rows: &[(&[Field], bool, &str)] = &[
            (
                &[(b"foo", b"1, 2"), (b"accept-language", b"en, de")],
                true,
                "§4.1: same values",
            ),
            (
                &[
                    (b"foo", b"1"),
                    (b"foo", b"2"),
                    (b"accept-language", b"en,de"),
                ],
                true,
                "§4.1: lines combined",
            ),
            (
                &[(b"foo", b"1,2"), (b"accept-language", b" de ,  EN")],
                true,
                "§4.1: order, case, OWS of a language list",
            ),
            (
                &[(b"foo", b"2, 1"), (b"accept-language", b"en, de")],
                false,
                "order kept for unknown fields",
            ),
            (&[(b"foo", b"1, 2")], false, "§4.1: present vs absent"),
            (
                &[(b"foo", b"1, 2"), (b"accept-language", b"en")],
                false,
                "different value",
            ),
            (
                &[
                    (b"foo", b"1, 2"),
                    (b"accept-language", b"en, de"),
                    (b"bar", b"x"),
                ],
                true,
                "fields not in Vary ignored",
            ),
        ];
        for (fields, want, rule) in rows {
            assert_eq!(v.matches(fields), *want, "{fields:?} ({rule})");
        }
        // Absent in the stored request matches only absent.
        let none = Variant::of(&vary, &[(b"Accept-Language", b"en")]);
        assert!(none.matches(&[(b"Accept-Language", b"en")]));
        assert!(!none.matches(&[(b"Accept-Language", b"en"), (b"foo", b"")]));
    }

    #[test]
    fn element_boundaries_are_part_of_the_value() {
        // §4.1: "a b" (one element) is not "a, b" (two), nor "axb" "a,b".
        type Row<'a> = (&'a [u8], &'a [u8], &'a [u8], bool);
        let rows: &[Row] = &[
            (b"x-foo", b"a b", b"a, b", false),
            (b"x-foo", b"axb", b"a,b", false),
            (b"x-foo", b"a, b", b"a,b", true),
            (b"accept-language", b"a b", b"a, b", false),
            (b"accept-language", b"en,de", b"de , EN", true),
            (b"accept-language", b"en,en", b"en", false),
            (b"accept-language", b"en", b"en,en", false),
        ];
        for (name, stored, request, want) in rows {
            let stored = normalise(name, &[(name, stored)]);
            assert_eq!(
                same_value(name, stored.as_deref(), &[(name, request)]),
                *want,
                "{stored:?} / {request:?}"
            );
        }
    }

    #[test]
    fn property_matching_without_allocation_agrees_with_normalising() {
        // `same_value` must say exactly what comparing the normalised forms says, for any
        // pair of requests, on both the ordered and the unordered path.
        const PIECES: &[&str] = &[
            "en", "EN", "de", " ", ",", "\t", "\"", "gzip", "br;q=0.5", "a b", "a", "b", "axb", "",
        ];
        let mut g: u64 = 0x5eed;
        let mut next = move |n: usize| {
            g ^= g << 13;
            g ^= g >> 7;
            g ^= g << 17;
            (g % n as u64) as usize
        };
        let (mut equal, mut differ) = (0, 0);
        for _ in 0..30_000 {
            let lines = |next: &mut dyn FnMut(usize) -> usize| -> Vec<String> {
                let count = next(3);
                (0..count)
                    .map(|_| (0..next(6)).map(|_| PIECES[next(PIECES.len())]).collect())
                    .collect()
            };
            let a = lines(&mut next);
            // Half the time the second request is the first one's lines, rejoined: often
            // equal after normalising, sometimes not.
            let b = if next(2) == 0 {
                lines(&mut next)
            } else {
                vec![a.concat()]
            };
            for name in [&b"accept-language"[..], b"x-foo"] {
                let fa: Vec<Field> = a.iter().map(|v| (name, v.as_bytes())).collect();
                let fb: Vec<Field> = b.iter().map(|v| (name, v.as_bytes())).collect();
                let stored = normalise(name, &fa);
                let want = normalise(name, &fb) == stored;
                if want {
                    equal += 1
                } else {
                    differ += 1
                }
                assert_eq!(
                    same_value(name, stored.as_deref(), &fb),
                    want,
                    "{a:?} vs {b:?}"
                );
            }
        }
        assert!(
            equal > 5_000 && differ > 5_000,
            "both outcomes exercised: {equal} / {differ}"
        );
    }
}
