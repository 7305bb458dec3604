//! Which server a second tier talks to, from its URL (`redis://`, `valkey://`,
//! `memcached://`), and the tier's settings. Parsing only: no connection is made here.

use std::fmt;
use std::time::Duration;

/// How long one call to the tier may take (connect included) before it is a miss.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
/// How long a tier that failed is left alone before one call probes it again.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_millis(500);
/// memcached's port when the URL names none.
pub const MEMCACHED_PORT: u16 = 11211;

/// The server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Redis or Valkey: the URL as the `redis` crate takes it (`redis://host:port/db`).
    Redis(String),
    /// memcached: `host:port`.
    Memcached(String),
}

/// A URL this crate cannot use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadUrl(pub String);

impl fmt::Display for BadUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadUrl {}

impl Endpoint {
    /// `redis://HOST[:PORT][/DB]`, `valkey://…` (the same protocol), `memcached://HOST[:PORT]`.
    pub fn parse(url: &str) -> Result<Endpoint, BadUrl> {
        let bad = |why: &str| BadUrl(format!("cache URL {url:?}: {why}"));
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("expected redis://HOST:PORT or memcached://HOST:PORT"))?;
        if rest.is_empty() || rest.starts_with('/') {
            return Err(bad("no host"));
        }
        match scheme.to_ascii_lowercase().as_str() {
            "redis" | "valkey" => {
                let url = format!("redis://{rest}");
                // The crate's own reading, so that what it refuses is refused at start.
                redis::Client::open(url.as_str()).map_err(|e| bad(&e.to_string()))?;
                Ok(Endpoint::Redis(url))
            }
            "memcached" | "memcache" => {
                let rest = rest.strip_suffix('/').unwrap_or(rest);
                if rest.contains(['/', '@', '?']) {
                    return Err(bad("memcached takes HOST:PORT only"));
                }
                let has_port = match rest.rsplit_once(':') {
                    // An IPv6 literal without a port is `[::1]`.
                    Some((host, port)) if !port.contains(']') => {
                        port.parse::<u16>()
                            .map_err(|_| bad("the port is not a number"))?;
                        !host.is_empty() || return Err(bad("no host"))
                    }
                    _ => false,
                };
                Ok(Endpoint::Memcached(if has_port {
                    rest.to_string()
                } else {
                    format!("{rest}:{MEMCACHED_PORT}")
                }))
            }
            "rediss" => Err(bad("TLS to the tier (rediss://) is not supported")),
            _ => Err(bad(
                "the scheme must be redis://, valkey:// or memcached://",
            )),
        }
    }

    /// The engine's name, for logs.
    pub fn engine(&self) -> &'static str {
        match self {
            Endpoint::Redis(_) => "redis",
            Endpoint::Memcached(_) => "memcached",
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Without a password, for logs.
            Endpoint::Redis(url) => match (url.find("://"), url.rfind('@')) {
                (Some(s), Some(at)) if at > s => write!(f, "redis://{}", &url[at + 1..]),
                _ => f.write_str(url),
            },
            Endpoint::Memcached(addr) => write!(f, "memcached://{addr}"),
        }
    }
}

/// A tier's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierConfig {
    pub endpoint: Endpoint,
    /// Bounds every call, connect included ([`DEFAULT_TIMEOUT`]).
    pub timeout: Duration,
    /// How long a failed tier is skipped before a probe ([`DEFAULT_RETRY_AFTER`]).
    pub retry_after: Duration,
}

impl TierConfig {
    pub fn new(endpoint: Endpoint) -> TierConfig {
        TierConfig {
            endpoint,
            timeout: DEFAULT_TIMEOUT,
            retry_after: DEFAULT_RETRY_AFTER,
        }
    }

    /// [`Endpoint::parse`] with the default settings.
    pub fn parse(url: &str) -> Result<TierConfig, BadUrl> {
        Endpoint::parse(url).map(TierConfig::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let ok = [
            (
                "redis://127.0.0.1:6379",
                Endpoint::Redis("redis://127.0.0.1:6379".into()),
            ),
            (
                "valkey://127.0.0.1:7000/2",
                Endpoint::Redis("redis://127.0.0.1:7000/2".into()),
            ),
            (
                "memcached://127.0.0.1:11311",
                Endpoint::Memcached("127.0.0.1:11311".into()),
            ),
            (
                "memcached://localhost",
                Endpoint::Memcached("localhost:11211".into()),
            ),
            (
                "memcached://[::1]",
                Endpoint::Memcached("[::1]:11211".into()),
            ),
            (
                "memcached://[::1]:7/",
                Endpoint::Memcached("[::1]:7".into()),
            ),
        ];
        for (url, want) in ok {
            assert_eq!(Endpoint::parse(url), Ok(want), "{url}");
        }
        for url in [
            "127.0.0.1:6379",
            "http://127.0.0.1",
            "redis://",
            "memcached://",
            "memcached://h:port",
            "memcached://:11211",
            "memcached://h:1/x",
            "rediss://h:1",
        ] {
            assert!(Endpoint::parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn a_password_is_not_shown() {
        let e = Endpoint::parse("redis://u:secret@127.0.0.1:6379").unwrap();
        assert_eq!(e.to_string(), "redis://127.0.0.1:6379");
    }
}
