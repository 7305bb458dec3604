//! `http://` and `https://` URLs for firstflight: parsing the user's URL, resolving the references a page
//! makes against it (RFC 3986 §5.2) and the same-origin test (scheme, host, port; RFC 6454).
//!
//! Only what a first-view check needs: no userinfo, no IDNA, no percent-decoding. A target
//! always starts with `/` and holds no fragment, so it can go on the request line as is.

use std::fmt;

/// The port `http://` means when the URL names none (RFC 9110 §4.2.1).
pub const HTTP_DEFAULT_PORT: u16 = 80;
/// The port `https://` means when the URL names none (RFC 9110 §4.2.2).
pub const HTTPS_DEFAULT_PORT: u16 = 443;

/// An absolute `http://` or `https://` URL split into what a request needs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HttpUrl {
    /// `https://`: the exchange runs over TLS.
    pub tls: bool,
    /// Lower-cased host; an IPv6 literal keeps its brackets (`[::1]`).
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`, without fragment (the request-target).
    pub target: String,
}

/// Why a URL was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UrlError {
    /// A scheme other than http and https.
    Scheme(String),
    /// No `scheme://` at all.
    NotAbsolute,
    /// `http://` with nothing after it, or `http://:80/`.
    NoHost,
    /// A port that is not a number from 1 to 65535.
    BadPort(String),
    /// `user@host`: credentials in URLs are not supported.
    Userinfo,
    /// Spaces or control bytes in the URL.
    BadByte,
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Scheme(s) => {
                write!(f, "unsupported scheme {s:?}: expected http:// or https://")
            }
            UrlError::NotAbsolute => {
                f.write_str("not an absolute URL: expected http://host[:port]/path")
            }
            UrlError::NoHost => f.write_str("URL has no host: expected http://host[:port]/path"),
            UrlError::BadPort(p) => write!(f, "bad port {p:?} in URL: expected 1 to 65535"),
            UrlError::Userinfo => f.write_str("user@host URLs are not supported"),
            UrlError::BadByte => f.write_str("URL holds a space or a control byte"),
        }
    }
}

impl std::error::Error for UrlError {}

/// What a reference in a page points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    Http(HttpUrl),
    /// Another scheme (`https:`, `data:`, `javascript:` …), lower-cased, without the colon.
    OtherScheme(String),
    /// `src=""` or a bare fragment: nothing to fetch.
    Empty,
}

impl HttpUrl {
    /// Parses an absolute `http://host[:port][/path][?query][#fragment]` URL.
    pub fn parse(input: &str) -> Result<HttpUrl, UrlError> {
        let input = input.trim();
        if input.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(UrlError::BadByte);
        }
        let Some(scheme) = scheme_of(input) else {
            return Err(UrlError::NotAbsolute);
        };
        let rest = &input[scheme.len() + 1..];
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            other => return Err(UrlError::Scheme(other.to_string())),
        };
        let Some(rest) = rest.strip_prefix("//") else {
            return Err(UrlError::NotAbsolute);
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(auth_end);
        if authority.contains('@') {
            return Err(UrlError::Userinfo);
        }
        let default_port = if tls {
            HTTPS_DEFAULT_PORT
        } else {
            HTTP_DEFAULT_PORT
        };
        let (host, port) = split_host_port(authority, default_port)?;
        if host.is_empty() || host == "[]" {
            return Err(UrlError::NoHost);
        }
        let target = if target.starts_with('/') {
            let (path, query) = split_query(target);
            format!("{}{query}", remove_dot_segments(path))
        } else {
            format!("/{target}")
        };
        Ok(HttpUrl {
            tls,
            host: host.to_ascii_lowercase(),
            port,
            target,
        })
    }

    /// The `Host` field value: the host, plus `:port` unless it is the default.
    pub fn authority(&self) -> String {
        let default = if self.tls {
            HTTPS_DEFAULT_PORT
        } else {
            HTTP_DEFAULT_PORT
        };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host as the resolver wants it (IPv6 literal without brackets).
    pub fn host_for_lookup(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }

    /// Same scheme, host and port (RFC 6454 §4).
    pub fn same_origin(&self, other: &HttpUrl) -> bool {
        self.tls == other.tls && self.host == other.host && self.port == other.port
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// Resolves a reference found in a page whose URL is `self` (RFC 3986 §5.2.2), the way a
    /// browser does for `src`/`href`: surrounding whitespace trimmed, tabs and newlines
    /// dropped, the fragment dropped, spaces and non-ASCII bytes percent-encoded.
    pub fn resolve(&self, reference: &str) -> Resolved {
        let cleaned: String = reference
            .trim_matches(|c: char| c.is_ascii_whitespace())
            .chars()
            .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
            .collect();
        let cleaned = percent_encode_unsafe(&cleaned);
        let reference = cleaned.split('#').next().unwrap_or_default();
        if reference.is_empty() {
            return Resolved::Empty;
        }
        if let Some(scheme) = scheme_of(reference) {
            let scheme = scheme.to_ascii_lowercase();
            // From an http page an https reference is another origin whatever its host; from
            // an https page an http one parses, and is another origin by its scheme.
            if scheme != "http" && !(scheme == "https" && self.tls) {
                return Resolved::OtherScheme(scheme);
            }
            return match HttpUrl::parse(reference) {
                Ok(url) => Resolved::Http(url),
                // `http:foo` or `http://` with a bad authority: not fetchable.
                Err(_) => Resolved::OtherScheme(scheme),
            };
        }
        if reference.starts_with("//") {
            return match HttpUrl::parse(&format!("{}:{reference}", self.scheme())) {
                Ok(url) => Resolved::Http(url),
                Err(_) => Resolved::OtherScheme(self.scheme().to_string()),
            };
        }
        let (base_path, _) = split_query(&self.target);
        let target = if reference.starts_with('/') {
            let (path, query) = split_query(reference);
            format!("{}{query}", remove_dot_segments(path))
        } else if reference.starts_with('?') {
            format!("{base_path}{reference}")
        } else {
            // RFC 3986 §5.2.3: everything up to the base's last slash, then the reference.
            let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
            let (path, query) = split_query(reference);
            format!("{}{query}", remove_dot_segments(&format!("{dir}{path}")))
        };
        Resolved::Http(HttpUrl {
            tls: self.tls,
            host: self.host.clone(),
            port: self.port,
            target,
        })
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme(), self.authority(), self.target)
    }
}

/// A reference without scheme and authority: one a `<base href>` applies to in full.
pub fn is_relative(reference: &str) -> bool {
    let r = reference.trim_start_matches(|c: char| c.is_ascii_whitespace());
    scheme_of(r).is_none() && !r.starts_with("//")
}

/// The scheme of an absolute reference (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`,
/// RFC 3986 §3.1), or `None` for a relative one.
fn scheme_of(s: &str) -> Option<&str> {
    let colon = s.find(':')?;
    let scheme = &s[..colon];
    let mut bytes = scheme.bytes();
    let first_ok = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    let rest_ok = bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    (first_ok && rest_ok).then_some(scheme)
}

fn split_host_port(authority: &str, default_port: u16) -> Result<(&str, u16), UrlError> {
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let (h, rest) = authority.split_at(end + 1);
                match rest.strip_prefix(':') {
                    Some(p) => (h, Some(p)),
                    None if rest.is_empty() => (h, None),
                    None => return Err(UrlError::BadPort(rest.to_string())),
                }
            }
            None => return Err(UrlError::NoHost),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        // RFC 3986 §3.2.3: an empty port means the default.
        None | Some("") => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(UrlError::BadPort(p.to_string())),
        },
    };
    Ok((host, port))
}

/// Splits `path?query` into the path and `?query` (empty when there is none).
fn split_query(target: &str) -> (&str, &str) {
    target.split_at(target.find('?').unwrap_or(target.len()))
}

/// RFC 3986 §5.2.4 for a path that starts with `/`: `.` and `..` segments removed, a
/// trailing slash kept where the last segment was one of them.
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len() - 1;
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate().skip(1) {
        match *segment {
            "." => {}
            ".." => {
                out.pop();
            }
            s => {
                out.push(s);
                continue;
            }
        }
        if i == last {
            out.push("");
        }
    }
    format!("/{}", out.join("/"))
}

/// Percent-encodes spaces, controls and non-ASCII bytes (as UTF-8), as a browser does
/// before it puts a reference on the request line.
fn percent_encode_unsafe(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b <= b' ' || b >= 0x7f || b == b'"' || b == b'<' || b == b'>' {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> HttpUrl {
        HttpUrl::parse(s).unwrap()
    }

    #[test]
    fn parse_table() {
        // (input, host, port, target)
        let rows: &[(&str, &str, u16, &str)] = &[
            ("http://127.0.0.1:8080/json", "127.0.0.1", 8080, "/json"),
            ("http://Example.COM", "example.com", 80, "/"),
            ("HTTP://h/a?b=1#frag", "h", 80, "/a?b=1"),
            ("http://h?x", "h", 80, "/?x"),
            // RFC 3986 §3.2.3: empty port is the default.
            ("http://h:/p", "h", 80, "/p"),
            ("http://[::1]:9000/x/../y", "[::1]", 9000, "/y"),
            ("  http://h/a/./b  ", "h", 80, "/a/b"),
        ];
        for &(input, host, port, target) in rows {
            let u = url(input);
            assert_eq!(
                (u.host.as_str(), u.port, u.target.as_str()),
                (host, port, target),
                "{input}"
            );
        }
    }

    #[test]
    fn https_urls_parse_with_their_own_default_port_and_origin() {
        for (input, port, authority, shown) in [
            ("https://h/x", 443, "h", "https://h/x"),
            ("HTTPS://H:8443/x", 8443, "h:8443", "https://h:8443/x"),
            ("https://h:80/", 80, "h:80", "https://h:80/"),
        ] {
            let u = HttpUrl::parse(input).unwrap();
            assert!(u.tls, "{input}");
            assert_eq!(
                (u.port, u.authority().as_str()),
                (port, authority),
                "{input}"
            );
            assert_eq!(u.to_string(), shown);
        }
        let page = HttpUrl::parse("https://h/dir/page").unwrap();
        let plain = HttpUrl::parse("http://h:443/dir/page").unwrap();
        assert!(
            !page.same_origin(&plain),
            "the scheme is part of the origin"
        );
        for (reference, want) in [
            ("a.css", Some("https://h/dir/a.css")),
            ("//h/b.js", Some("https://h/b.js")),
            ("https://h/c.png", Some("https://h/c.png")),
            ("http://h/d.png", Some("http://h/d.png")),
            ("data:,x", None),
        ] {
            match (page.resolve(reference), want) {
                (Resolved::Http(u), Some(w)) => assert_eq!(u.to_string(), w, "{reference}"),
                (Resolved::OtherScheme(_), None) => {}
                (got, _) => panic!("{reference}: {got:?}"),
            }
        }
        // From an http page, an https reference stays another origin, unfetched.
        let http_page = HttpUrl::parse("http://h/").unwrap();
        assert_eq!(
            http_page.resolve("https://h/x"),
            Resolved::OtherScheme("https".into())
        );
    }

    #[test]
    fn parse_errors_table() {
        let rows: &[(&str, UrlError)] = &[
            ("ftp://h/", UrlError::Scheme("ftp".into())),
            ("h:8080/x", UrlError::Scheme("h".into())),
            ("/just/a/path", UrlError::NotAbsolute),
            ("http:/h", UrlError::NotAbsolute),
            ("http://", UrlError::NoHost),
            ("http://:80/", UrlError::NoHost),
            ("http://h:0/", UrlError::BadPort("0".into())),
            ("http://h:70000/", UrlError::BadPort("70000".into())),
            ("http://h:+80/", UrlError::BadPort("+80".into())),
            ("http://u:p@h/", UrlError::Userinfo),
            ("http://h/a b", UrlError::BadByte),
        ];
        for (input, want) in rows {
            assert_eq!(HttpUrl::parse(input).as_ref(), Err(want), "{input}");
        }
    }

    #[test]
    fn resolve_table() {
        let base = url("http://h:8080/site/dir/index.html?q=1");
        // (reference, resolved target on the same origin, or the other scheme)
        let rows: &[(&str, Result<&str, &str>)] = &[
            ("/a.css", Ok("/a.css")),
            ("c.png", Ok("/site/dir/c.png")),
            ("./c.png", Ok("/site/dir/c.png")),
            ("../up.js", Ok("/site/up.js")),
            ("../../../../x", Ok("/x")),
            ("sub/", Ok("/site/dir/sub/")),
            ("..", Ok("/site/")),
            ("?v=2", Ok("/site/dir/index.html?v=2")),
            ("img.png?v=1#top", Ok("/site/dir/img.png?v=1")),
            ("  \n/trim.js\t ", Ok("/trim.js")),
            ("a b.png", Ok("/site/dir/a%20b.png")),
            ("é.png", Ok("/site/dir/%C3%A9.png")),
            ("https://cdn.example/x.js", Err("https")),
            ("data:image/png;base64,AAAA", Err("data")),
            ("JavaScript:void(0)", Err("javascript")),
        ];
        for &(reference, want) in rows {
            let got = base.resolve(reference);
            match want {
                Ok(target) => assert_eq!(
                    got,
                    Resolved::Http(HttpUrl {
                        tls: false,
                        host: "h".into(),
                        port: 8080,
                        target: target.into()
                    }),
                    "{reference}"
                ),
                Err(scheme) => assert_eq!(got, Resolved::OtherScheme(scheme.into()), "{reference}"),
            }
        }
        assert_eq!(base.resolve(""), Resolved::Empty);
        assert_eq!(base.resolve("#only"), Resolved::Empty);
    }

    #[test]
    fn origin_of_absolute_references() {
        let base = url("http://h:8080/");
        let rows: &[(&str, bool)] = &[
            ("http://h:8080/x", true),
            ("http://H:8080/x", true),
            ("//h:8080/x", true),
            ("http://h/x", false),
            ("http://h:8081/x", false),
            ("//other:8080/x", false),
        ];
        for &(reference, same) in rows {
            let Resolved::Http(u) = base.resolve(reference) else {
                panic!("{reference}")
            };
            assert_eq!(base.same_origin(&u), same, "{reference}");
        }
    }

    #[test]
    fn is_relative_table() {
        let rows: &[(&str, bool)] = &[
            ("a.css", true),
            ("/a.css", true),
            ("?q", true),
            (" x", true),
            ("//h/a", false),
            ("http://h/", false),
            ("data:,", false),
        ];
        for &(reference, want) in rows {
            assert_eq!(is_relative(reference), want, "{reference}");
        }
    }

    #[test]
    fn display_and_authority() {
        assert_eq!(url("http://h:80/a").to_string(), "http://h/a");
        assert_eq!(url("http://h:81/a").authority(), "h:81");
        assert_eq!(url("http://[::1]:81/").host_for_lookup(), "::1");
    }
}
