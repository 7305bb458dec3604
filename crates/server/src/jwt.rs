//! The edge JWT check (`[[site.jwt]]`): an `Authorization: Bearer` token (RFC 6750 §2.1) in
//! JWS compact form (RFC 7515 §7.1) signed with HS256, its `exp`, `nbf`, `iss` and `aud`
//! (RFC 7519 §4.1), verified on every request with nothing remembered, as RFC 8725 asks:
//! one algorithm only (no `none`, no confusion), a constant-time MAC compare, strict base64url.
//!
//! Owns the token's rules and the 401/400 challenges; must not route, and never sees a
//! socket or the clock (the caller passes the time, so the table tests pick it).
#![forbid(unsafe_code)]

use aws_lc_rs::hmac;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::config::{JwtAuth, JwtSecret};

/// Longest bearer token read (header, claims and signature, base64url); a longer one is
/// refused before any decoding. Tokens with a few claims are 200 to 1,000 bytes.
pub const MAX_TOKEN_BYTES: usize = 8192;
/// Shortest HS256 secret taken: RFC 7518 §3.2 says a key of at least the hash's size
/// (256 bits) MUST be used; a shorter one falls to an offline guess from any one token.
pub const MIN_SECRET_BYTES: usize = 32;

/// base64url without padding (RFC 7515 §2, "Base64url Encoding"): `=` refused, the standard
/// alphabet's `+` and `/` refused, and trailing bits that are not zero refused, so each
/// token has one spelling.
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Why a token was refused; each variant says what goes back (RFC 6750 §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JwtError {
    /// No `Authorization: Bearer` at all: 401 with a challenge and no error code.
    Missing,
    /// More than one `Authorization` field: 400 `invalid_request` (an upstream could read
    /// another one than the edge checked).
    Repeated,
    /// Longer than [`MAX_TOKEN_BYTES`]: 401 `invalid_token`.
    TooLong,
    /// Not three base64url parts of JSON objects: 401 `invalid_token`.
    Malformed,
    /// `alg` is not `HS256`, or the header has `crit` (RFC 7515 §4.1.11): 401 `invalid_token`.
    Algorithm,
    /// The MAC does not match: 401 `invalid_token`.
    Signature,
    /// Past `exp` (with the leeway), or `exp` missing where it is required: 401.
    Expired,
    /// Before `nbf` (with the leeway): 401.
    NotYetValid,
    /// `iss`, `aud` or a required claim does not match: 401.
    Claims,
}

impl JwtError {
    /// The answer's status.
    pub fn status(self) -> u16 {
        match self {
            JwtError::Repeated => 400,
            _ => 401,
        }
    }

    /// The challenge's `error` code (RFC 6750 §3.1), none for a request without a token.
    pub fn code(self) -> Option<&'static str> {
        match self {
            JwtError::Missing => None,
            JwtError::Repeated => Some("invalid_request"),
            _ => Some("invalid_token"),
        }
    }
}

impl std::fmt::Display for JwtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JwtError::Missing => "no bearer token",
            JwtError::Repeated => "more than one Authorization field",
            JwtError::TooLong => "the token is too long",
            JwtError::Malformed => "the token is not a JWS of three base64url JSON parts",
            JwtError::Algorithm => "the token's alg is not HS256 (or it has crit)",
            JwtError::Signature => "the token's signature does not match",
            JwtError::Expired => "the token expired (or has no exp)",
            JwtError::NotYetValid => "the token is not valid yet (nbf)",
            JwtError::Claims => "the token's iss, aud or required claims do not match",
        })
    }
}

/// What a token must carry besides a right signature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// `iss` must be exactly this.
    pub issuer: Option<String>,
    /// `aud` must be this, or an array holding it.
    pub audience: Option<String>,
    /// Claims that must be present (`sub`, …).
    pub require: Vec<String>,
    /// A token without `exp` is refused.
    pub require_exp: bool,
    /// Seconds of clock difference forgiven on `exp` and `nbf`.
    pub leeway_s: u64,
}

/// An HS256 key and the rules its tokens must meet.
pub struct Verifier {
    key: hmac::Key,
    rules: Rules,
}

impl Verifier {
    /// Refuses a secret shorter than [`MIN_SECRET_BYTES`].
    pub fn new(secret: &[u8], rules: Rules) -> Result<Verifier, String> {
        check_secret(secret)?;
        Ok(Verifier {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
            rules,
        })
    }

    /// The claims of `token` if it is an HS256 JWS made with this key that meets the rules
    /// at `now_s` (seconds since the epoch). The header is checked before the MAC and the
    /// claims are parsed only after it (RFC 8725 §3.1, §3.4).
    pub fn verify(&self, token: &[u8], now_s: u64) -> Result<Map<String, Value>, JwtError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JwtError::TooLong);
        }
        // RFC 7515 §7.1: header '.' payload '.' signature; a JWE (five parts) or a JWS
        // with a detached or empty part is not one.
        let mut parts = token.split(|&b| b == b'.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        if header.is_empty() || payload.is_empty() || signature.is_empty() {
            return Err(JwtError::Malformed);
        }
        let header = object(header)?;
        // RFC 8725 §3.1: the one algorithm this key is for, whatever the token says; `none`
        // (RFC 7519 §6) and every other name are refused before any MAC is made.
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return Err(JwtError::Algorithm);
        }
        // RFC 7515 §4.1.11: extensions the recipient does not understand make the JWS
        // invalid; this one understands none.
        if header.contains_key("crit") {
            return Err(JwtError::Algorithm);
        }
        let tag = B64.decode(signature).map_err(|_| JwtError::Malformed)?;
        let signed = &token[..token.len() - signature.len() - 1];
        // Constant time (aws-lc-rs compares the whole tag), so the time taken does not say
        // how many bytes of a guess were right.
        hmac::verify(&self.key, signed, &tag).map_err(|_| JwtError::Signature)?;
        let claims = object(payload)?;
        self.check_claims(&claims, now_s)?;
        Ok(claims)
    }

    /// RFC 7519 §4.1: the registered claims this check knows, and the required ones.
    fn check_claims(&self, claims: &Map<String, Value>, now_s: u64) -> Result<(), JwtError> {
        let now = now_s as f64;
        let leeway = self.rules.leeway_s as f64;
        // §4.1.4: the current time MUST be before `exp` (a NumericDate, §2: a number,
        // fractions allowed).
        match claims.get("exp") {
            Some(exp) => {
                let exp = exp.as_f64().ok_or(JwtError::Malformed)?;
                if now >= exp + leeway {
                    return Err(JwtError::Expired);
                }
            }
            None if self.rules.require_exp => return Err(JwtError::Expired),
            None => {}
        }
        // §4.1.5: the current time MUST be after or equal to `nbf`.
        if let Some(nbf) = claims.get("nbf") {
            let nbf = nbf.as_f64().ok_or(JwtError::Malformed)?;
            if now + leeway < nbf {
                return Err(JwtError::NotYetValid);
            }
        }
        // §4.1.1: compared as a case-sensitive string.
        if let Some(iss) = &self.rules.issuer
            && claims.get("iss").and_then(Value::as_str) != Some(iss.as_str())
        {
            return Err(JwtError::Claims);
        }
        // §4.1.3: a principal that does not find itself in a present `aud` MUST reject the
        // token, so a token meant for someone else is refused even where no audience is
        // configured (as PyJWT does).
        match (claims.get("aud"), &self.rules.audience) {
            (None, None) => {}
            (Some(aud), Some(want)) if audience_holds(aud, want) => {}
            _ => return Err(JwtError::Claims),
        }
        if self
            .rules
            .require
            .iter()
            .any(|name| !claims.contains_key(name))
        {
            return Err(JwtError::Claims);
        }
        Ok(())
    }
}

/// `aud` is a string, or an array of strings (RFC 7519 §4.1.3).
fn audience_holds(aud: &Value, want: &str) -> bool {
    match aud {
        Value::String(s) => s == want,
        Value::Array(list) => list.iter().any(|a| a.as_str() == Some(want)),
        _ => false,
    }
}

/// A base64url part holding a JSON object (RFC 7515 §7.1; RFC 7519 §7.2 step 10). A member
/// named twice keeps its last value (RFC 7519 §4: allowed to parsers that do so).
fn object(part: &[u8]) -> Result<Map<String, Value>, JwtError> {
    let json = B64.decode(part).map_err(|_| JwtError::Malformed)?;
    serde_json::from_slice(&json).map_err(|_| JwtError::Malformed)
}

/// Refuses an HS256 secret shorter than [`MIN_SECRET_BYTES`].
pub fn check_secret(secret: &[u8]) -> Result<(), String> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "the secret is {} bytes; HS256 needs at least {MIN_SECRET_BYTES} (RFC 7518 §3.2)",
            secret.len()
        ));
    }
    Ok(())
}

/// The secret's bytes: the file's (through the privilege keeper, so a reload after a drop
/// still reads a root-only file) or the environment variable's, without one trailing
/// newline (`echo` and editors end a file with one; a secret never does). The error names
/// the file or the variable, never the secret.
pub fn read_secret(secret: &JwtSecret) -> Result<Vec<u8>, String> {
    let mut bytes = match secret {
        JwtSecret::File(path) => crate::privsep::read(path)
            .map_err(|e| format!("cannot read the JWT secret {}: {e}", path.display()))?,
        JwtSecret::Env(name) => std::env::var_os(name)
            .ok_or_else(|| format!("the JWT secret's variable {name} is not set"))?
            .into_encoded_bytes(),
    };
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    Ok(bytes)
}

/// A compact HS256 JWS of `header` and `claims` (JSON texts, taken as they are) made with
/// `secret`: for tests and tools that need a token this check takes.
pub fn sign_hs256(header: &str, claims: &str, secret: &[u8]) -> String {
    let signed = format!("{}.{}", B64.encode(header), B64.encode(claims));
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, secret),
        signed.as_bytes(),
    );
    format!("{signed}.{}", B64.encode(tag.as_ref()))
}

/// One `[[site.jwt]]` rule, ready: its prefix, its verifier, its challenges.
pub(crate) struct JwtGate {
    pub prefix: String,
    /// The secret's file, read again on reload through the privilege keeper.
    pub secret_file: Option<std::path::PathBuf>,
    verifier: Verifier,
    /// `Bearer realm="…"`, then with `error="invalid_token"`, then `error="invalid_request"`.
    challenges: [String; 3],
}

impl JwtGate {
    pub(crate) fn new(conf: &JwtAuth, secret: &[u8]) -> Result<JwtGate, String> {
        let rules = Rules {
            issuer: conf.issuer.clone(),
            audience: conf.audience.clone(),
            require: conf.require.clone(),
            require_exp: conf.require_exp,
            leeway_s: conf.leeway_s,
        };
        let realm = conf.realm.replace(['"', '\\'], "");
        let bearer = format!("Bearer realm=\"{realm}\"");
        Ok(JwtGate {
            prefix: conf.prefix.clone(),
            secret_file: match &conf.secret {
                JwtSecret::File(p) => Some(p.clone()),
                JwtSecret::Env(_) => None,
            },
            verifier: Verifier::new(secret, rules)?,
            challenges: [
                bearer.clone(),
                format!("{bearer}, error=\"invalid_token\""),
                format!("{bearer}, error=\"invalid_request\""),
            ],
        })
    }

    /// Whether a request with this `Authorization` value (the first, when `repeated` says
    /// there are more) is let in at `now_s`; else the status and the `WWW-Authenticate`.
    pub(crate) fn admits(
        &self,
        authorization: Option<&[u8]>,
        repeated: bool,
        now_s: u64,
    ) -> Result<(), (u16, &str)> {
        let checked = if repeated {
            Err(JwtError::Repeated)
        } else {
            match authorization.and_then(bearer) {
                Some(token) => self.verifier.verify(token, now_s).map(drop),
                None => Err(JwtError::Missing),
            }
        };
        checked.map_err(|e| {
            let challenge = match e.code() {
                None => &self.challenges[0],
                Some("invalid_request") => &self.challenges[2],
                Some(_) => &self.challenges[1],
            };
            (e.status(), challenge.as_str())
        })
    }
}

/// The token of `Bearer TOKEN` (RFC 6750 §2.1: the scheme without case, RFC 9110 §11.1;
/// one or more spaces); `None` for another scheme, which is a request without a token
/// (RFC 6750 §3.1: no error code).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    Some(rest.trim_ascii_start())
}

#[cfg(test)]
mod tests;
