//! Turning a request path into a path relative to the files root, or refusing it.
//!
//! Owns percent-decoding (exactly once) and dot-segment removal (RFC 3986 §5.2.4). It never
//! touches the file system. Invariant: a [`Normalized`] path has no empty, `.` or `..`
//! segment, no NUL, no backslash, no control byte, and is valid UTF-8, so joining it under
//! the root cannot climb out lexically; the kernel (see `open.rs`) handles symlinks.
#![forbid(unsafe_code)]

/// Why a request path is refused. Every variant is answered with 400.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathError {
    /// A `%` not followed by two hex digits (RFC 3986 §2.1).
    BadEscape,
    /// `%2F` or `%5C`: a slash inside a segment would change the path's structure.
    EncodedSlash,
    /// NUL, a backslash or another control byte, raw or decoded.
    BadByte,
    /// The decoded path is not UTF-8 (this also refuses overlong forms such as `%c0%ae`).
    NotUtf8,
    /// A `..` segment would climb above the root.
    AboveRoot,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PathError::BadEscape => "invalid percent-encoding in path",
            PathError::EncodedSlash => "encoded slash or backslash in path",
            PathError::BadByte => "NUL, backslash or control byte in path",
            PathError::NotUtf8 => "path is not UTF-8 after decoding",
            PathError::AboveRoot => "path climbs above the root",
        })
    }
}

impl std::error::Error for PathError {}

/// A safe path below the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalized {
    /// Segments joined by `/`, without a leading slash; empty for the root itself.
    pub rel: String,
    /// Whether the request named a directory: the path ended in `/`, `/.` or `/..`
    /// (RFC 3986 §5.2.4 leaves a trailing slash in those cases).
    pub dir: bool,
}

/// Decodes `raw` (still percent-encoded, after the mount prefix) once and removes dot-segments.
///
/// Empty segments (`//`) are merged, so `//etc/passwd` is `etc/passwd` below the root. A
/// missing leading slash is tolerated: the integration may strip a prefix either way.
pub fn normalize(raw: &[u8]) -> Result<Normalized, PathError> {
    let decoded = percent_decode(raw, false)?;
    segments(String::from_utf8(decoded).map_err(|_| PathError::NotUtf8)?)
}

/// The path a site's rules (access, rate limits, basic auth) are matched against: as
/// [`normalize`], except that `%2F` is read as the slash it encodes instead of refused, so
/// `/projects/group%2Fproject` passes on to an upstream that takes it (GitLab's API), and a
/// rule on `/a/b/` still covers `/a%2Fb/x`, whichever way the upstream reads it. Such a
/// path must have no dot segment, raw or decoded: an upstream that keeps `%2F` inside a
/// segment reads `/a/b/..%2F..%2Fc` under `/a/b/`, one that decodes it reads `/c`, and no
/// one path could hold the rules of both.
pub fn normalize_for_rules(raw: &[u8]) -> Result<Normalized, PathError> {
    match normalize(raw) {
        Err(PathError::EncodedSlash) => {}
        other => return other,
    }
    let decoded = percent_decode(raw, true)?;
    let text = String::from_utf8(decoded).map_err(|_| PathError::NotUtf8)?;
    if text.split('/').any(|s| s == "." || s == "..") {
        return Err(PathError::EncodedSlash);
    }
    segments(text)
}

/// Removes the dot segments of a decoded path and merges its empty ones.
fn segments(text: String) -> Result<Normalized, PathError> {
    let mut segments: Vec<&str> = Vec::new();
    // A path without segments ("" or "/") names the root directory.
    let mut dir = true;
    for segment in text.split('/') {
        match segment {
            "" | "." => dir = true,
            ".." => {
                if segments.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
                dir = true;
            }
            name => {
                segments.push(name);
                dir = false;
            }
        }
    }
    // `a/` splits into ["a", ""]: the trailing empty segment set `dir` above.
    Ok(Normalized {
        rel: segments.join("/"),
        dir,
    })
}

/// Whether a normalized path names a dotfile or passes through a dot-directory, outside
/// `.well-known/` at the top (RFC 8615), which is served like any directory.
pub fn hidden(rel: &str) -> bool {
    // Most paths have no segment starting with a dot: decided by the dots alone.
    let b = rel.as_bytes();
    if !memchr::memchr_iter(b'.', b).any(|i| i == 0 || b[i - 1] == b'/') {
        return false;
    }
    let rest = rel
        .strip_prefix(".well-known/")
        .or(if rel == ".well-known" { Some("") } else { None })
        .unwrap_or(rel);
    rest.split('/').any(|s| s.starts_with('.'))
}

/// Percent-decodes once, refusing escapes that would change the path's structure (`%2F`
/// taken as a slash when `slashes`; `%5C` never).
fn percent_decode(raw: &[u8], slashes: bool) -> Result<Vec<u8>, PathError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        let byte = if b == b'%' {
            let (Some(hi), Some(lo)) = (
                raw.get(i + 1).and_then(|&h| hex(h)),
                raw.get(i + 2).and_then(|&l| hex(l)),
            ) else {
                return Err(PathError::BadEscape);
            };
            i += 3;
            let decoded = hi << 4 | lo;
            if decoded == b'/' && slashes {
                out.push(b'/');
                continue;
            }
            if decoded == b'/' || decoded == b'\\' {
                return Err(PathError::EncodedSlash);
            }
            decoded
        } else {
            i += 1;
            b
        };
        if byte == b'\\' || byte.is_ascii_control() {
            return Err(PathError::BadByte);
        }
        out.push(byte);
    }
    Ok(out)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-encodes one decoded segment for a `Location` value: everything but RFC 3986
/// `unreserved` and a few `sub-delims` is escaped, so the value is always a valid field value.
pub fn encode_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for &b in segment.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=@".contains(&b) {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b >> 4)]));
            out.push(char::from(b"0123456789ABCDEF"[usize::from(b & 0xf)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names() {
        let cases = [
            (".env", true),
            (".git/config", true),
            ("a/.htpasswd", true),
            ("a/.hidden/b.txt", true),
            (".well-known", false),
            (".well-known/acme-challenge/x", false),
            (".well-known/.x", true),
            ("a/.well-known/x", true),
            ("index.html", false),
            ("a.b/c..d", false),
            ("", false),
        ];
        for (rel, want) in cases {
            assert_eq!(hidden(rel), want, "{rel}");
        }
    }

    fn ok(rel: &str, dir: bool) -> Result<Normalized, PathError> {
        Ok(Normalized {
            rel: rel.to_string(),
            dir,
        })
    }

    #[test]
    fn normalize_table() {
        let rows: &[(&[u8], Result<Normalized, PathError>)] = &[
            (b"/", ok("", true)),
            (b"", ok("", true)),
            (b"/a.css", ok("a.css", false)),
            (b"a.css", ok("a.css", false)),
            (b"/d/", ok("d", true)),
            (b"/d", ok("d", false)),
            // RFC 3986 §5.2.4: `.` and `..` segments are removed, leaving a trailing slash.
            (b"/a/./b", ok("a/b", false)),
            (b"/a/b/..", ok("a", true)),
            (b"/a/b/.", ok("a/b", true)),
            (b"/a/../b", ok("b", false)),
            (b"/a/%2e%2e/b", ok("b", false)),
            (b"//etc/passwd", ok("etc/passwd", false)),
            (b"/a//b", ok("a/b", false)),
            (b"/sp%20ace", ok("sp ace", false)),
            (b"/caf%C3%A9", ok("caf\u{e9}", false)),
            // RFC 3986 §2.4: decode exactly once: `%252e` is the literal name `%2e`.
            (b"/%252e%252e/x", ok("%2e%2e/x", false)),
            (b"/a+b", ok("a+b", false)),
            (b"/..", Err(PathError::AboveRoot)),
            (b"/../canary", Err(PathError::AboveRoot)),
            (b"/%2e%2e/canary", Err(PathError::AboveRoot)),
            (b"/%2E./canary", Err(PathError::AboveRoot)),
            (b"/a/../../canary", Err(PathError::AboveRoot)),
            (b"/..%2fcanary", Err(PathError::EncodedSlash)),
            (b"/..%2Fcanary", Err(PathError::EncodedSlash)),
            (b"/..%5ccanary", Err(PathError::EncodedSlash)),
            (b"/..\\canary", Err(PathError::BadByte)),
            (b"/a%00b", Err(PathError::BadByte)),
            (b"/a\0b", Err(PathError::BadByte)),
            (b"/a%0ab", Err(PathError::BadByte)),
            (b"/a%7f", Err(PathError::BadByte)),
            (b"/a%", Err(PathError::BadEscape)),
            (b"/a%2", Err(PathError::BadEscape)),
            (b"/a%zz", Err(PathError::BadEscape)),
            (b"/a%+1", Err(PathError::BadEscape)),
            (b"/%c0%ae%c0%ae/canary", Err(PathError::NotUtf8)),
            (b"/%ff", Err(PathError::NotUtf8)),
        ];
        for (raw, want) in rows {
            assert_eq!(&normalize(raw), want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    /// Any site rule once made `%2F` a 400 for the whole site. The rules'
    /// path reads it as a slash; every spelling of a path still means that path.
    #[test]
    fn the_rules_path_reads_an_encoded_slash_as_one() {
        let rows: &[(&[u8], Result<Normalized, PathError>)] = &[
            (
                b"/projects/group%2Fproject",
                ok("projects/group/project", false),
            ),
            (
                b"/projects/group%2fproject/",
                ok("projects/group/project", true),
            ),
            (b"/private%2Fx", ok("private/x", false)),
            (b"/%2Fprivate", ok("private", false)),
            (b"/a%2F%2Fb", ok("a/b", false)),
            // As `normalize` without an encoded slash.
            (b"/%70rivate", ok("private", false)),
            (b"//private", ok("private", false)),
            (b"/x/../private", ok("private", false)),
            (b"/..", Err(PathError::AboveRoot)),
            // A dot segment beside an encoded slash: upstreams disagree on what it climbs.
            (b"/a/b/..%2F..%2Fc", Err(PathError::EncodedSlash)),
            (b"/a%2F../b", Err(PathError::EncodedSlash)),
            (b"/a%2F%2e%2e/b", Err(PathError::EncodedSlash)),
            (b"/a%2F./b", Err(PathError::EncodedSlash)),
            // A backslash is a separator to some upstreams: still refused.
            (b"/a%5Cb", Err(PathError::EncodedSlash)),
            (b"/a%2Fb%00", Err(PathError::BadByte)),
            (b"/a%2Fb%", Err(PathError::BadEscape)),
        ];
        for (raw, want) in rows {
            let got = normalize_for_rules(raw);
            assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn encode_segment_escapes_everything_unsafe() {
        assert_eq!(encode_segment("dir"), "dir");
        assert_eq!(encode_segment("a b:c?#%"), "a%20b%3Ac%3F%23%25");
        assert_eq!(encode_segment("caf\u{e9}"), "caf%C3%A9");
    }
}
