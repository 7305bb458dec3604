//! The fleet's Redis URL, `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (RFC 3986's userinfo,
//! percent-decoded), as `[storage] redis` and the fleet's rate limits read it: one reading,
//! used by `serve` and by `--check-config` alike.
//!
//! Owns the parse and its refusals; connects nowhere. A refusal never repeats the URL (its
//! password would go to a log).
#![forbid(unsafe_code)]

/// Redis's port when the URL names none.
pub const REDIS_PORT: u16 = 6379;

/// Where a Redis server is and who to be there.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// `HOST:PORT`.
    pub addr: String,
    /// The ACL user (`AUTH user password`); `None`: the default user.
    pub user: Option<Vec<u8>>,
    pub password: Option<Vec<u8>>,
    /// The database (`SELECT`), 0 when the URL names none.
    pub db: u32,
}

impl std::fmt::Debug for RedisUrl {
    /// Without the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisUrl")
            .field("addr", &self.addr)
            .field("user", &self.user.as_deref().map(String::from_utf8_lossy))
            .field("password", &self.password.as_ref().map(|_| "…"))
            .field("db", &self.db)
            .finish()
    }
}

/// The form every refusal names.
const FORM: &str = "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]";

/// Reads `url`; the error says what is wrong with it (without the URL).
pub fn parse(url: &str) -> Result<RedisUrl, String> {
    let Some(rest) = url.strip_prefix("redis://") else {
        return Err(match url.split_once("://") {
            Some(("rediss", _)) => "TLS to Redis (rediss://) is not supported yet".to_string(),
            Some(("redis+sentinel", _)) => {
                "Redis Sentinel (redis+sentinel://) is not supported yet".to_string()
            }
            _ => format!("not a {FORM} URL"),
        });
    };
    // The host part cannot hold an '@': the last one ends the userinfo, so a password
    // with a raw '@' still reads (percent-encoded, %40, is the standard form).
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((a, r)) => (Some(a), r),
        None => (None, rest),
    };
    let (hostport, db) = match rest.split_once('/') {
        Some((h, "")) => (h, 0),
        Some((h, d)) => (
            h,
            d.parse::<u32>()
                .map_err(|_| format!("the database {d:?} is not a number (a {FORM} URL)"))?,
        ),
        None => (rest, 0),
    };
    if hostport.is_empty() {
        return Err(format!("no host (a {FORM} URL)"));
    }
    if hostport.contains(',') {
        return Err("one host only: several (a cluster, or Sentinels) are not supported".into());
    }
    // An IPv6 literal is bracketed: `[::1]:6379`, or `[::1]` with the default port.
    let addr = match hostport.rsplit_once(':') {
        Some((h, p)) if !p.contains(']') => {
            p.parse::<u16>()
                .map_err(|_| format!("the port {p:?} is not a number"))?;
            if h.is_empty() {
                return Err(format!("no host (a {FORM} URL)"));
            }
            hostport.to_string()
        }
        _ => format!("{hostport}:{REDIS_PORT}"),
    };
    let (user, password) = match auth {
        None => (None, None),
        Some(a) => {
            let (u, p) = match a.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                // `redis://PASSWORD@host`, as redis-cli and redis-rs read it.
                None => ("", Some(a)),
            };
            let user = (!u.is_empty())
                .then(|| percent_decode(u).map_err(|e| format!("the user: {e}")))
                .transpose()?;
            let password = p
                .map(|p| percent_decode(p).map_err(|e| format!("the password: {e}")))
                .transpose()?;
            (user, password)
        }
    };
    Ok(RedisUrl {
        addr,
        user,
        password,
        db,
    })
}

/// RFC 3986's percent-decoding: `%` and two hex digits is that byte; a `%` without them is
/// refused (a password with a raw `%` must be written `%25`).
fn percent_decode(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            ) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err("a '%' not followed by two hex digits (write '%' as %25)".into()),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_read_as_redis_cli_reads_them() {
        type Want<'a> = (&'a str, Option<&'a [u8]>, Option<&'a [u8]>, u32);
        let cases: &[(&str, Want)] = &[
            (
                "redis://127.0.0.1:7000/2",
                ("127.0.0.1:7000", None, None, 2),
            ),
            ("redis://cache", ("cache:6379", None, None, 0)),
            ("redis://cache/", ("cache:6379", None, None, 0)),
            (
                "redis://u:p@cache",
                ("cache:6379", Some(b"u"), Some(b"p"), 0),
            ),
            ("redis://:p@cache:1/", ("cache:1", None, Some(b"p"), 0)),
            (
                "redis://secret@cache",
                ("cache:6379", None, Some(b"secret"), 0),
            ),
            ("redis://[::1]", ("[::1]:6379", None, None, 0)),
            ("redis://[::1]:7001/3", ("[::1]:7001", None, None, 3)),
            // Percent-encoded: '@', '/', '%', ':' and a space in the password, and a user.
            (
                "redis://linerate:s3cr%40t%2Fx%25y%3Az%20@10.0.0.5:6380/1",
                (
                    "10.0.0.5:6380",
                    Some(b"linerate"),
                    Some(b"s3cr@t/x%y:z "),
                    1,
                ),
            ),
            (
                "redis://app%2Dro:pw@h",
                ("h:6379", Some(b"app-ro"), Some(b"pw"), 0),
            ),
            // A raw '@' in the password: the last '@' ends the userinfo.
            ("redis://u:a@b@h:1", ("h:1", Some(b"u"), Some(b"a@b"), 0)),
        ];
        for (url, (addr, user, password, db)) in cases {
            let got = parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!(
                (
                    got.addr.as_str(),
                    got.user.as_deref(),
                    got.password.as_deref(),
                    got.db
                ),
                (*addr, *user, *password, *db),
                "{url}"
            );
        }
    }

    #[test]
    fn refusals_say_why_and_never_repeat_the_password() {
        let cases = [
            ("http://x", "not a redis://"),
            ("127.0.0.1:6379", "not a redis://"),
            (
                "rediss://h:6380",
                "TLS to Redis (rediss://) is not supported",
            ),
            ("redis+sentinel://s1:26379/mymaster", "Sentinel"),
            ("redis://", "no host"),
            ("redis:///0", "no host"),
            ("redis://:6379", "no host"),
            (
                "redis://x/notanumber",
                "the database \"notanumber\" is not a number",
            ),
            ("redis://h:port", "the port \"port\" is not a number"),
            ("redis://h1:1,h2:2/0", "one host only"),
            (
                "redis://u:bad%zzsecret@h",
                "the password: a '%' not followed",
            ),
            ("redis://u:secret%4@h", "the password: a '%' not followed"),
            ("redis://u%:secret@h", "the user: a '%' not followed"),
        ];
        for (url, want) in cases {
            let e = parse(url).expect_err(url);
            assert!(e.contains(want), "{url}: {e}");
            assert!(!e.contains("secret"), "{url}: {e}");
        }
        let debug = format!("{:?}", parse("redis://u:secret@h").unwrap());
        assert!(!debug.contains("secret"), "{debug}");
    }
}
