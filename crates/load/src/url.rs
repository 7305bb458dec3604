//! Target URL parsing: `http[s]://host[:port][/path][?query]` (or `ws[s]://`, the same with
//! WebSocket asked for), resolved to socket addresses.
//! Owns nothing else: it does not connect, and TLS settings live in `tls`.
#![forbid(unsafe_code)]

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// Port used when an `http://` URL names none.
pub const DEFAULT_HTTP_PORT: u16 = 80;
/// Port used when an `https://` URL names none.
pub const DEFAULT_HTTPS_PORT: u16 = 443;

/// Where requests go.
#[derive(Clone, Debug)]
pub struct Target {
    /// The URL as given.
    pub url: String,
    /// `https://` or `wss://`: connections speak TLS.
    pub https: bool,
    /// `ws://` or `wss://`: the URL itself asks for WebSocket.
    pub websocket: bool,
    /// The host as written, brackets of an IPv6 literal removed (TLS server name).
    pub host: String,
    /// `Host` header value (host, plus `:port` when one was written).
    pub authority: String,
    /// Request target: path and query, `/` when empty.
    pub path: String,
    /// The first address is used.
    pub addr: SocketAddr,
}

/// Why a URL was refused.
#[derive(Debug)]
pub enum UrlError {
    Scheme(String),
    NoHost,
    Port(String),
    Userinfo,
    Resolve(String, std::io::Error),
    NoAddress(String),
}

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlError::Scheme(u) => {
                write!(
                    f,
                    "bad URL {u:?}: it must start with http://, https://, ws:// or wss://"
                )
            }
            UrlError::NoHost => f.write_str("bad URL: no host"),
            UrlError::Port(p) => write!(f, "bad URL: invalid port {p:?}"),
            UrlError::Userinfo => f.write_str("bad URL: user:password@ is not supported"),
            UrlError::Resolve(h, e) => write!(f, "cannot resolve host {h:?}: {e}"),
            UrlError::NoAddress(h) => write!(f, "host {h:?} has no address"),
        }
    }
}

impl std::error::Error for UrlError {}

/// Parses and resolves `url`.
pub fn parse(url: &str) -> Result<Target, UrlError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| UrlError::Scheme(url.to_string()))?;
    let (https, websocket) = match scheme.to_ascii_lowercase().as_str() {
        "http" => (false, false),
        "https" => (true, false),
        "ws" => (false, true),
        "wss" => (true, true),
        _ => return Err(UrlError::Scheme(url.to_string())),
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    if path.bytes().any(|b| b <= b' ' || b == 0x7f || b == b'#') {
        return Err(UrlError::Scheme(url.to_string()));
    }
    if authority.contains('@') {
        return Err(UrlError::Userinfo);
    }
    let default_port = if https {
        DEFAULT_HTTPS_PORT
    } else {
        DEFAULT_HTTP_PORT
    };
    let (host, port) = split_host_port(authority, default_port)?;
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| UrlError::Resolve(host.to_string(), e))?
        .next()
        .ok_or_else(|| UrlError::NoAddress(host.to_string()))?;
    Ok(Target {
        url: url.to_string(),
        https,
        websocket,
        host: host.to_string(),
        authority: authority.to_string(),
        path,
        addr,
    })
}

/// `[::1]:8080` → ("::1", 8080); `localhost` → ("localhost", `default_port`).
fn split_host_port(authority: &str, default_port: u16) -> Result<(&str, u16), UrlError> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let close = v6.find(']').ok_or(UrlError::NoHost)?;
        let after = &v6[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(UrlError::Port(after.to_string())),
        };
        (&v6[..close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => default_port,
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| UrlError::Port(p.to_string()))?,
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_forms() {
        let t = parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (t.path.as_str(), t.authority.as_str()),
            ("/", "127.0.0.1:8080")
        );
        assert_eq!(t.addr.port(), 8080);
        let t = parse("HTTP://[::1]:81/a/b?x=1").unwrap();
        assert_eq!((t.path.as_str(), t.addr.port()), ("/a/b?x=1", 81));
        assert!(t.addr.is_ipv6());
        let t = parse("http://127.0.0.1?q").unwrap();
        assert_eq!((t.path.as_str(), t.addr.port()), ("/?q", 80));
        assert!(!t.https);
    }

    #[test]
    fn parses_https() {
        let t = parse("https://127.0.0.1/x").unwrap();
        assert!(t.https);
        assert_eq!(
            (t.addr.port(), t.host.as_str()),
            (DEFAULT_HTTPS_PORT, "127.0.0.1")
        );
        assert_eq!(t.authority, "127.0.0.1");
        let t = parse("HTTPS://[::1]:8443").unwrap();
        assert_eq!((t.addr.port(), t.host.as_str()), (8443, "::1"));
        assert_eq!((t.authority.as_str(), t.path.as_str()), ("[::1]:8443", "/"));
        assert!(matches!(parse("https:/x"), Err(UrlError::Scheme(_))));
        assert!(matches!(parse("httpx://x"), Err(UrlError::Scheme(_))));
    }

    #[test]
    fn websocket_schemes_are_http_and_https_with_websocket_asked_for() {
        let t = parse("ws://127.0.0.1:9/ws").unwrap();
        assert!(t.websocket && !t.https);
        assert_eq!((t.addr.port(), t.path.as_str()), (9, "/ws"));
        let t = parse("WSS://127.0.0.1/").unwrap();
        assert!(t.websocket && t.https);
        assert_eq!(t.addr.port(), DEFAULT_HTTPS_PORT);
        assert!(!parse("http://127.0.0.1/").unwrap().websocket);
        assert!(matches!(parse("wsx://x"), Err(UrlError::Scheme(_))));
    }

    #[test]
    fn refuses_bad_urls() {
        assert!(matches!(parse("ftp://x/"), Err(UrlError::Scheme(_))));
        assert!(matches!(parse("127.0.0.1:80"), Err(UrlError::Scheme(_))));
        assert!(matches!(parse("http://:80/"), Err(UrlError::NoHost)));
        assert!(matches!(
            parse("http://127.0.0.1:99999/"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            parse("http://127.0.0.1:0/"),
            Err(UrlError::Port(_))
        ));
        assert!(matches!(
            parse("http://u:p@127.0.0.1/"),
            Err(UrlError::Userinfo)
        ));
    }
}
