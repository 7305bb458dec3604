//! HTTP basic authentication (RFC 7617) against an htpasswd file (nginx's `auth_basic_user_file`,
//! caddy's `basic_auth`): `user:HASH` lines, HASH a bcrypt hash (`htpasswd -B`, `$2y$`,
//! `$2b$` or `$2a$`). Other schemes (apr1 MD5, SHA-1, crypt, plain text) are refused when the
//! file is read: none of them stands up to an offline guess.
//!
//! A bcrypt check costs tens of milliseconds of CPU by design, on the worker that makes it.
//! A credential that passed is remembered (a bounded set, per rule, shared by the workers,
//! keyed by the whole `Authorization` value under the process's random hash key), so a
//! client sending the same credential on every request pays for it once; a wrong password is
//! never remembered, so a rate limit in front of an authenticated prefix is what bounds the
//! cost of guessing.
#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::sync::Mutex;

use base64::Engine as _;

/// Credentials remembered per rule after a bcrypt check passed; the set is emptied when it
/// fills (every client then pays one check again).
pub const REMEMBERED: usize = 4096;
/// Longest `Authorization` value read (user, password and the scheme, in base64).
const MAX_CREDENTIAL: usize = 1024;

/// The users of an htpasswd file.
#[derive(Debug, Default)]
pub struct Htpasswd {
    users: Vec<(String, String)>,
    /// A hash at the first user's cost, made when an unknown user first asks.
    dummy: std::sync::OnceLock<String>,
}

/// A line of an htpasswd file that cannot be used: its number (from 1) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtpasswdError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for HtpasswdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl Htpasswd {
    /// `user:$2y$…` lines; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Htpasswd, HtpasswdError> {
        let mut users: Vec<(String, String)> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let err = |message: String| HtpasswdError {
                line: i + 1,
                message,
            };
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((user, hash)) = line.split_once(':') else {
                return Err(err("not USER:HASH".to_string()));
            };
            if user.is_empty() {
                return Err(err("an empty user name".to_string()));
            }
            let bcrypt =
                ["$2y$", "$2b$", "$2a$"].iter().any(|p| hash.starts_with(p)) && hash.len() == 60;
            if !bcrypt {
                return Err(err(format!(
                    "user {user:?}: the hash is not bcrypt ($2y$…, 60 characters); make it with `htpasswd -B`"
                )));
            }
            if users.iter().any(|(u, _)| u == user) {
                return Err(err(format!("user {user:?} a second time")));
            }
            users.push((user.to_string(), hash.to_string()));
        }
        if users.is_empty() {
            return Err(HtpasswdError {
                line: 0,
                message: "no users".to_string(),
            });
        }
        Ok(Htpasswd {
            users,
            dummy: Default::default(),
        })
    }

    /// Whether `user` with `password` is in the file (a bcrypt check; an unknown user pays
    /// one too, at the same cost, so the time does not tell which users exist).
    pub fn verify(&self, user: &str, password: &[u8]) -> bool {
        match self.users.iter().find(|(u, _)| u == user) {
            Some((_, hash)) => bcrypt::verify(password, hash).unwrap_or(false),
            None => {
                let dummy = self.dummy.get_or_init(|| {
                    let cost = self.users[0].1[4..6]
                        .parse()
                        .unwrap_or(bcrypt::DEFAULT_COST);
                    bcrypt::hash_with_salt(b"", cost, [0x5a; 16])
                        .map(|h| h.to_string())
                        .unwrap_or_default()
                });
                let _ = bcrypt::verify(password, dummy);
                false
            }
        }
    }
}

/// One `[[site.auth]]` rule, ready: its users and the credentials that passed.
pub(crate) struct AuthGate {
    pub prefix: String,
    /// The htpasswd file (read again on reload, through the privilege keeper).
    pub path: std::path::PathBuf,
    /// `Basic realm="…", charset="UTF-8"`, for the 401's `WWW-Authenticate`.
    pub challenge: String,
    users: Htpasswd,
    passed: Mutex<HashSet<Box<[u8]>>>,
}

impl AuthGate {
    pub(crate) fn new(
        prefix: String,
        realm: &str,
        path: std::path::PathBuf,
        users: Htpasswd,
    ) -> AuthGate {
        let realm = realm.replace(['"', '\\'], "");
        AuthGate {
            prefix,
            challenge: format!("Basic realm=\"{realm}\", charset=\"UTF-8\""),
            path,
            users,
            passed: Mutex::default(),
        }
    }

    /// Whether a request with this `Authorization` value (if any) is let in.
    pub(crate) fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization.filter(|v| v.len() <= MAX_CREDENTIAL) else {
            return false;
        };
        if self
            .passed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(value)
        {
            return true;
        }
        let Some((user, password)) = credentials(value) else {
            return false;
        };
        if !self.users.verify(&user, &password) {
            return false;
        }
        let mut passed = self.passed.lock().unwrap_or_else(|e| e.into_inner());
        if passed.len() >= REMEMBERED {
            passed.clear();
        }
        passed.insert(value.into());
        true
    }
}

/// `Basic BASE64(user:password)` (the scheme without case, RFC 7617 §2) as the user and the
/// password; `None` for any other scheme or a value that does not decode.
fn credentials(value: &[u8]) -> Option<(String, Vec<u8>)> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim_ascii())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_pass: &str) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
        format!("Basic {b64}").into_bytes()
    }

    /// A cost-4 bcrypt hash of `password` (the cheapest cost, for tests).
    fn hash(password: &str) -> String {
        bcrypt::hash_with_salt(password, 4, [7; 16])
            .unwrap()
            .format_for_version(bcrypt::Version::TwoY)
    }

    #[test]
    fn files_that_cannot_be_used_say_which_line() {
        let good = hash("pw");
        let cases = [
            ("alice\n".to_string(), 1, "not USER:HASH"),
            (format!(":{good}\n"), 1, "an empty user name"),
            (
                "bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n".to_string(),
                1,
                "not bcrypt",
            ),
            ("bob:$apr1$x$abc\n".to_string(), 1, "not bcrypt"),
            ("bob:secret\n".to_string(), 1, "not bcrypt"),
            (
                format!("# admins\n\na:{good}\na:{good}\n"),
                4,
                "a second time",
            ),
            ("# nobody\n".to_string(), 0, "no users"),
        ];
        for (text, line, says) in cases {
            let e = Htpasswd::parse(&text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}");
            assert!(e.message.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_right_password_passes_and_a_wrong_one_does_not() {
        let users =
            Htpasswd::parse(&format!("alice:{}\r\nbob:{}\n", hash("s3cret"), hash("pw"))).unwrap();
        let gate = AuthGate::new("/admin".into(), "Admin \"area\"", "h".into(), users);
        assert_eq!(
            gate.challenge,
            "Basic realm=\"Admin area\", charset=\"UTF-8\""
        );
        assert!(gate.admits(Some(&basic("alice:s3cret"))));
        // Remembered: the same value passes without a check (and again after).
        assert!(gate.admits(Some(&basic("alice:s3cret"))));
        assert!(gate.admits(Some(&basic("bob:pw"))));
        // The scheme is case-insensitive; a password may hold a colon.
        let users = Htpasswd::parse(&format!("carol:{}\n", hash("a:b"))).unwrap();
        let colon = AuthGate::new("/".into(), "x", "h".into(), users);
        let mut v = basic("carol:a:b");
        v[..5].copy_from_slice(b"bASIC");
        assert!(colon.admits(Some(&v)));
        for wrong in [
            basic("alice:S3cret"),
            basic("alice:"),
            basic("mallory:s3cret"),
            basic("alice"),
            b"Bearer abc".to_vec(),
            b"Basic !!!".to_vec(),
            b"Basic".to_vec(),
        ] {
            assert!(
                !gate.admits(Some(&wrong)),
                "{:?}",
                String::from_utf8_lossy(&wrong)
            );
        }
        assert!(!gate.admits(None));
    }
}
