//! The TSIG key DNS-01's updates are signed with (RFC 8945): its name, its HMAC algorithm
//! and its secret, read from BIND's key file (`key "NAME" { algorithm hmac-sha256; secret
//! "BASE64"; };`, what `tsig-keygen` writes) or given as a base64 secret and an algorithm.
//!
//! No crypto here (the config parser reads keys in builds without the `acme` feature); the
//! secret never reaches a `Debug` or `Display`.
#![forbid(unsafe_code)]

use base64::Engine;

use super::message::{NameError, encode_name};

/// The longest key file read (a BIND key file is under 200 bytes; a file with several keys
/// still fits).
pub const MAX_KEY_FILE: usize = 64 * 1024;

/// A TSIG HMAC algorithm (RFC 8945 §6: HMAC-SHA256 is mandatory; SHA-384 and SHA-512 cost
/// nothing more here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsigAlgorithm {
    HmacSha256,
    HmacSha384,
    HmacSha512,
}

impl TsigAlgorithm {
    /// The names known, as BIND spells them.
    pub const NAMES: &'static str = "hmac-sha256, hmac-sha384, hmac-sha512";

    /// The algorithm BIND and RFC 8945 §6 call `name` (case-insensitive, a final dot
    /// allowed).
    pub fn from_name(name: &str) -> Option<TsigAlgorithm> {
        match name
            .strip_suffix('.')
            .unwrap_or(name)
            .to_ascii_lowercase()
            .as_str()
        {
            "hmac-sha256" => Some(TsigAlgorithm::HmacSha256),
            "hmac-sha384" => Some(TsigAlgorithm::HmacSha384),
            "hmac-sha512" => Some(TsigAlgorithm::HmacSha512),
            _ => None,
        }
    }

    /// Its name (the TSIG RR's algorithm name, RFC 8945 §6).
    pub fn name(self) -> &'static str {
        match self {
            TsigAlgorithm::HmacSha256 => "hmac-sha256",
            TsigAlgorithm::HmacSha384 => "hmac-sha384",
            TsigAlgorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// The length of its MAC.
    pub fn mac_len(self) -> usize {
        match self {
            TsigAlgorithm::HmacSha256 => 32,
            TsigAlgorithm::HmacSha384 => 48,
            TsigAlgorithm::HmacSha512 => 64,
        }
    }
}

/// A TSIG key.
#[derive(Clone, PartialEq, Eq)]
pub struct TsigKey {
    /// Its name, lowercase, without the final dot (`linerate`, BIND's `key "linerate."`).
    pub name: String,
    pub algorithm: TsigAlgorithm,
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for TsigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TsigKey")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

/// Why a key could not be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The file is not BIND's `key` syntax; what was expected.
    Syntax(String),
    /// No `key` statement in the file.
    NoKey,
    /// Several keys, and no `key_name` to pick one.
    Several,
    /// No key of that name in the file.
    NoSuchKey(String),
    /// A key without its `algorithm` or `secret`.
    Missing { key: String, what: &'static str },
    /// An algorithm other than [`TsigAlgorithm::NAMES`].
    UnknownAlgorithm(String),
    /// A secret that is not base64, or is empty.
    BadSecret(String),
    /// A key name that is not a domain name.
    BadName(NameError),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::Syntax(what) => write!(f, "not a BIND key file: {what}"),
            KeyError::NoKey => f.write_str("no key \"NAME\" { … }; statement"),
            KeyError::Several => f.write_str("several keys: name one with key_name"),
            KeyError::NoSuchKey(name) => write!(f, "no key named {name:?}"),
            KeyError::Missing { key, what } => write!(f, "key {key:?} has no {what}"),
            KeyError::UnknownAlgorithm(a) => write!(
                f,
                "unknown TSIG algorithm {a:?} (known: {})",
                TsigAlgorithm::NAMES
            ),
            KeyError::BadSecret(why) => write!(f, "the secret is not base64: {why}"),
            KeyError::BadName(e) => write!(f, "the key's name: {e}"),
        }
    }
}

impl std::error::Error for KeyError {}

/// `name` as a key's name: checked as a domain name, lowercase, no final dot.
pub fn key_name(name: &str) -> Result<String, KeyError> {
    encode_name(name).map_err(KeyError::BadName)?;
    Ok(name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase())
}

/// A key from its parts, as the config gives them (`key_secret`, `algorithm`).
pub fn from_parts(name: &str, algorithm: &str, secret_b64: &str) -> Result<TsigKey, KeyError> {
    let algorithm = TsigAlgorithm::from_name(algorithm)
        .ok_or_else(|| KeyError::UnknownAlgorithm(algorithm.to_string()))?;
    let secret = base64::engine::general_purpose::STANDARD
        .decode(secret_b64.trim())
        .map_err(|e| KeyError::BadSecret(e.to_string()))?;
    if secret.is_empty() {
        return Err(KeyError::BadSecret("empty".into()));
    }
    Ok(TsigKey {
        name: key_name(name)?,
        algorithm,
        secret,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    Quoted(&'a str),
    Open,
    Close,
    Semi,
}

/// BIND's tokens: words, quoted strings, braces and semicolons; `#`, `//` and `/* */`
/// comments skipped.
fn tokens(text: &str) -> Result<Vec<Token<'_>>, KeyError> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        let Some(c) = rest.chars().next() else {
            return Ok(out);
        };
        if c == '#' || rest.starts_with("//") {
            rest = rest.find('\n').map_or("", |n| &rest[n..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after
                .find("*/")
                .ok_or_else(|| KeyError::Syntax("a /* comment without its */".into()))?;
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix('"') {
            let end = after
                .find('"')
                .ok_or_else(|| KeyError::Syntax("a quote without its end".into()))?;
            out.push(Token::Quoted(&after[..end]));
            rest = &after[end + 1..];
        } else if c == '{' || c == '}' || c == ';' {
            out.push(match c {
                '{' => Token::Open,
                '}' => Token::Close,
                _ => Token::Semi,
            });
            rest = &rest[1..];
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || "{};\"#".contains(c))
                .unwrap_or(rest.len());
            out.push(Token::Word(&rest[..end]));
            rest = &rest[end..];
        }
    }
}

/// The key named `wanted` (or the file's only key when `None`) from BIND's key file text.
pub fn parse_bind_key(text: &str, wanted: Option<&str>) -> Result<TsigKey, KeyError> {
    let tokens = tokens(text)?;
    let mut keys = Vec::new();
    let mut i = 0;
    let expect = |i: usize, want: Token<'_>, what: &str| {
        if tokens.get(i) == Some(&want) {
            Ok(())
        } else {
            Err(KeyError::Syntax(format!("{what} expected")))
        }
    };
    while i < tokens.len() {
        if tokens[i] != Token::Word("key") {
            return Err(KeyError::Syntax(format!(
                "`key` expected, found {:?}",
                tokens[i]
            )));
        }
        let name = match tokens.get(i + 1) {
            Some(Token::Quoted(n) | Token::Word(n)) => *n,
            _ => {
                return Err(KeyError::Syntax(
                    "the key's name expected after `key`".into(),
                ));
            }
        };
        expect(i + 2, Token::Open, "`{` after the key's name")?;
        i += 3;
        let (mut algorithm, mut secret) = (None, None);
        while tokens.get(i) != Some(&Token::Close) {
            let (Some(Token::Word(option)), Some(Token::Quoted(v) | Token::Word(v))) =
                (tokens.get(i), tokens.get(i + 1))
            else {
                return Err(KeyError::Syntax(format!(
                    "`algorithm NAME;` or `secret \"BASE64\";` in key {name:?}"
                )));
            };
            expect(i + 2, Token::Semi, "`;` after an option")?;
            match *option {
                "algorithm" => algorithm = Some(*v),
                "secret" => secret = Some(*v),
                other => {
                    return Err(KeyError::Syntax(format!(
                        "unknown option {other:?} in key {name:?}"
                    )));
                }
            }
            i += 3;
        }
        expect(i + 1, Token::Semi, "`;` after the key's `}`")?;
        i += 2;
        keys.push((name, algorithm, secret));
    }
    let (name, algorithm, secret) = match wanted {
        Some(w) => {
            let w = key_name(w)?;
            keys.into_iter()
                .find(|(n, ..)| key_name(n).is_ok_and(|n| n == w))
                .ok_or(KeyError::NoSuchKey(w))?
        }
        None if keys.len() > 1 => return Err(KeyError::Several),
        None => keys.into_iter().next().ok_or(KeyError::NoKey)?,
    };
    let missing = |what| KeyError::Missing {
        key: name.to_string(),
        what,
    };
    from_parts(
        name,
        algorithm.ok_or_else(|| missing("algorithm"))?,
        secret.ok_or_else(|| missing("secret"))?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `tsig-keygen -a hmac-sha256 linerate.` writes (this secret is a test's).
    const KEYGEN: &str = "key \"linerate.\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0MTI=\";\n};\n";

    #[test]
    fn a_tsig_keygen_file_is_read() {
        let k = parse_bind_key(KEYGEN, None).unwrap();
        assert_eq!(k.name, "linerate");
        assert_eq!(k.algorithm, TsigAlgorithm::HmacSha256);
        assert_eq!(k.secret, b"secretsecretsecretsecretsecret12");
        assert_eq!(parse_bind_key(KEYGEN, Some("Linerate")).unwrap(), k);
        assert!(!format!("{k:?}").contains("secret12"));
    }

    #[test]
    fn comments_and_several_keys_pick_by_name() {
        let text = format!(
            "# made by hand\n// two keys\n/* a\nblock */ key other {{ algorithm hmac-sha512; secret \"AAAA\"; }};\n{KEYGEN}"
        );
        assert_eq!(parse_bind_key(&text, None), Err(KeyError::Several));
        let k = parse_bind_key(&text, Some("other.")).unwrap();
        assert_eq!(k.algorithm, TsigAlgorithm::HmacSha512);
        assert_eq!(k.secret, [0, 0, 0]);
        assert_eq!(
            parse_bind_key(&text, Some("third")),
            Err(KeyError::NoSuchKey("third".into()))
        );
    }

    #[test]
    fn a_bad_key_file_says_what_is_wrong() {
        assert_eq!(parse_bind_key("", None), Err(KeyError::NoKey));
        assert!(matches!(
            parse_bind_key("secret \"AAAA\";", None),
            Err(KeyError::Syntax(_))
        ));
        assert!(matches!(
            parse_bind_key("key k { algorithm hmac-sha256; secret \"AAAA\" };", None),
            Err(KeyError::Syntax(_))
        ));
        assert!(matches!(
            parse_bind_key("key k { secret \"AAAA\"; }", None),
            Err(KeyError::Syntax(_))
        ));
        assert_eq!(
            parse_bind_key("key k { secret \"AAAA\"; };", None),
            Err(KeyError::Missing {
                key: "k".into(),
                what: "algorithm"
            })
        );
        assert_eq!(
            parse_bind_key("key k { algorithm hmac-md5; secret \"AAAA\"; };", None),
            Err(KeyError::UnknownAlgorithm("hmac-md5".into()))
        );
        assert!(matches!(
            parse_bind_key("key k { algorithm hmac-sha256; secret \"!!\"; };", None),
            Err(KeyError::BadSecret(_))
        ));
        assert!(matches!(
            parse_bind_key(
                "key \"a b\" { algorithm hmac-sha256; secret \"AAAA\"; };",
                None
            ),
            Err(KeyError::BadName(_))
        ));
    }
}
