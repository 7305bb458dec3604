//! The admin's `GET /config`: the configuration the server runs with (after
//! defaults, flags and the last good reload), as JSON, secrets removed.
//!
//! Owns the view only. It is read from [`Config`]'s `Debug` form, which every field already
//! has (no second description of the configuration to keep in step with it): structs become
//! objects keyed by their fields' names, `Some(x)` is `x`, `None` is `null`, enum variants
//! are their names (`{"Variant": value}` with a value), numbers and booleans stay JSON's,
//! anything else (addresses, durations as `10s`) is a string. Then every secret is replaced
//! by [`REDACTED`] (see [`redact`]); a secret must never leave through it.
#![forbid(unsafe_code)]

use serde_json::{Map, Value};

use crate::config::Config;

/// What stands in for a secret.
pub const REDACTED: &str = "<redacted>";
/// Enum variants that say where a secret is, not what it is (`JwtSecret`'s): kept.
const REFERENCES: [&str; 3] = ["File", "Env", "Path"];

/// The JSON view of `config`, secrets removed, pretty-printed.
pub fn render(config: &Config) -> String {
    let mut v = from_debug(&format!("{config:?}"));
    redact(&mut v, None);
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// `text`, a `Debug` form, as JSON (never fails: what is not understood is kept as a string).
pub fn from_debug(text: &str) -> Value {
    let mut p = Parser {
        b: text.as_bytes(),
        at: 0,
    };
    p.value()
}

/// Replaces every secret under `v` (the value of field `name`) with [`REDACTED`]:
/// - a field whose name says password, passwd, secret, token, hmac or tsig, unless its value is
///   a reference to the secret (a path with a `/`, or an enum such as `{"File": path}`,
///   `{"Env": name}`): basic-auth passwords, JWT, EAB and TSIG secrets;
/// - a list of bytes in a field whose name says key or secret (ticket keys, MAC keys);
/// - a string holding a PEM block (`-----BEGIN`): a private key's contents;
/// - the password of a URL (`redis://user:PASSWORD@host`), the rest of the URL kept.
pub fn redact(v: &mut Value, name: Option<&str>) {
    let name = name.map(str::to_ascii_lowercase).unwrap_or_default();
    let secret_name = ["password", "passwd", "secret", "token", "hmac", "tsig"]
        .iter()
        .any(|s| name.contains(s));
    let key_name = secret_name || name.contains("key");
    match v {
        Value::String(s) if secret_name && !s.contains('/') => *v = REDACTED.into(),
        Value::String(s) if s.contains("-----BEGIN") => *v = REDACTED.into(),
        Value::String(s) => {
            if let Some(clean) = url_without_password(s) {
                *s = clean;
            }
        }
        Value::Number(_) if secret_name => *v = REDACTED.into(),
        Value::Array(items) if key_name && !items.is_empty() && items.iter().all(is_byte) => {
            *v = REDACTED.into()
        }
        Value::Array(items) => {
            for i in items {
                redact(i, Some(&name));
            }
        }
        Value::Object(fields) => {
            for (k, f) in fields.iter_mut() {
                // An enum's variant (`{"Inline": …}`) is the field's own value: the field's
                // name still applies, unless the variant says where the secret is.
                let variant = k.starts_with(|c: char| c.is_ascii_uppercase());
                match k.as_str() {
                    k if variant && REFERENCES.contains(&k) => redact(f, None),
                    _ if variant => redact(f, Some(&name)),
                    k => redact(f, Some(k)),
                }
            }
        }
        _ => {}
    }
}

fn is_byte(v: &Value) -> bool {
    v.as_u64().is_some_and(|n| n <= 255)
}

/// `s` with its URL password replaced, when it is a URL with one.
fn url_without_password(s: &str) -> Option<String> {
    let (scheme, rest) = s.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let (user, _password) = rest[..at].split_once(':')?;
    Some(format!("{scheme}://{user}:{REDACTED}{}", &rest[at..]))
}

/// A reader of `Debug` output: `Name { f: v, .. }`, `Name(v, …)`, `[…]`, `{k: v}`, strings,
/// characters, and bare words (numbers, booleans, unit variants, addresses, durations).
struct Parser<'a> {
    b: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&mut self) -> Option<u8> {
        while self.b.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
        self.b.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Value {
        match self.peek() {
            Some(b'"') => Value::String(self.string(b'"')),
            Some(b'\'') => Value::String(self.string(b'\'')),
            Some(b'[') if self.ipv6_socket() => {
                let start = self.at;
                while self.b.get(self.at).is_some_and(|&c| c != b']') {
                    self.at += 1;
                }
                self.at += 1;
                let host = String::from_utf8_lossy(&self.b[start..self.at]).into_owned();
                Value::String(host + &self.word())
            }
            Some(b'[') => {
                self.at += 1;
                Value::Array(self.items(b']'))
            }
            Some(b'{') => {
                self.at += 1;
                self.map()
            }
            Some(b'(') => {
                self.at += 1;
                tuple(self.items(b')'))
            }
            None => Value::Null,
            _ => self.word_value(),
        }
    }

    /// `[::1]:8080`, a socket address's `Debug`, not a list.
    fn ipv6_socket(&mut self) -> bool {
        let rest = &self.b[self.at..];
        let Some(end) = rest.iter().position(|&c| c == b']') else {
            return false;
        };
        rest[1..end]
            .iter()
            .all(|c| c.is_ascii_hexdigit() || b":.%".contains(c))
            && rest.get(end + 1) == Some(&b':')
    }

    /// A bare word, and what follows it: `Name { … }`, `Name(…)`, or the word alone.
    fn word_value(&mut self) -> Value {
        let word = self.word();
        match self.peek() {
            Some(b'{') if is_ident(&word) => {
                self.at += 1;
                self.fields()
            }
            Some(b'(') if is_ident(&word) => {
                self.at += 1;
                let inner = tuple(self.items(b')'));
                if word == "Some" {
                    inner
                } else {
                    let mut m = Map::new();
                    m.insert(word, inner);
                    Value::Object(m)
                }
            }
            _ => scalar(&word),
        }
    }

    /// Characters up to a delimiter at this depth (`,` `:` followed by a space, a bracket).
    fn word(&mut self) -> String {
        self.peek();
        let start = self.at;
        while let Some(&c) = self.b.get(self.at) {
            let ends = match c {
                b',' | b'}' | b')' | b']' | b'{' | b'(' => true,
                b':' => self.b.get(self.at + 1).is_none_or(u8::is_ascii_whitespace),
                c if c.is_ascii_whitespace() => true,
                _ => false,
            };
            if ends {
                break;
            }
            self.at += 1;
        }
        if self.at == start && self.at < self.b.len() {
            // A delimiter where a value was expected: take it, so parsing moves on.
            self.at += 1;
        }
        String::from_utf8_lossy(&self.b[start..self.at]).into_owned()
    }

    /// `f: v, …, ..}` after `Name {`.
    fn fields(&mut self) -> Value {
        let mut m = Map::new();
        loop {
            match self.peek() {
                None => break,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                Some(b',') => self.at += 1,
                Some(b'.') if self.b[self.at..].starts_with(b"..") => self.at += 2,
                _ => {
                    let key = self.word();
                    let v = if self.eat(b':') {
                        self.value()
                    } else {
                        Value::Null
                    };
                    m.insert(key, v);
                }
            }
        }
        Value::Object(m)
    }

    /// `{k: v, …}` (a map's `Debug`; keys as strings) or `{a, b}` (a set's: a list).
    fn map(&mut self) -> Value {
        let mut m = Map::new();
        let mut set = Vec::new();
        loop {
            match self.peek() {
                None => break,
                Some(b'}') => {
                    self.at += 1;
                    break;
                }
                Some(b',') => self.at += 1,
                _ => {
                    let k = self.value();
                    if self.eat(b':') {
                        let key = match k {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        m.insert(key, self.value());
                    } else {
                        set.push(k);
                    }
                }
            }
        }
        if m.is_empty() && !set.is_empty() {
            Value::Array(set)
        } else {
            Value::Object(m)
        }
    }

    /// Values separated by commas up to `close`.
    fn items(&mut self, close: u8) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => break,
                Some(c) if c == close => {
                    self.at += 1;
                    break;
                }
                Some(b',') => self.at += 1,
                _ => out.push(self.value()),
            }
        }
        out
    }

    /// A quoted string or character with Rust's escapes.
    fn string(&mut self, quote: u8) -> String {
        self.at += 1;
        let mut out = Vec::new();
        while let Some(&c) = self.b.get(self.at) {
            self.at += 1;
            match c {
                c if c == quote => break,
                b'\\' => {
                    let e = self.b.get(self.at).copied().unwrap_or(b'\\');
                    self.at += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0' => out.push(0),
                        b'u' => {
                            // `\u{XXXX}`
                            let rest = &self.b[self.at..];
                            let end = rest.iter().position(|&c| c == b'}').unwrap_or(0);
                            let ch = std::str::from_utf8(rest.get(1..end).unwrap_or(b""))
                                .ok()
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .unwrap_or('\u{fffd}');
                            let mut buf = [0; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            self.at += end + 1;
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// `(a)` is `a`; `(a, b)` a list.
fn tuple(mut items: Vec<Value>) -> Value {
    if items.len() == 1 {
        items.remove(0)
    } else {
        Value::Array(items)
    }
}

fn is_ident(w: &str) -> bool {
    !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// A bare word: `None` null, booleans and numbers as JSON's, the rest a string.
fn scalar(w: &str) -> Value {
    match w {
        "None" => Value::Null,
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => {
            if let Ok(n) = w.parse::<i64>() {
                return n.into();
            }
            if let Ok(n) = w.parse::<u64>() {
                return n.into();
            }
            match w.parse::<f64>() {
                Ok(f) if f.is_finite() && w.contains('.') => f.into(),
                _ => Value::String(w.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Inner {
        addr: std::net::SocketAddr,
        v6: std::net::SocketAddr,
        took: std::time::Duration,
        path: Option<std::path::PathBuf>,
        nothing: Option<u8>,
        word: Kind,
        tuple: (u8, String),
        map: std::collections::BTreeMap<String, u32>,
        quote: String,
    }
    #[derive(Debug)]
    #[allow(dead_code)]
    enum Kind {
        Unit,
        Field(String),
    }
    #[derive(Debug)]
    #[allow(dead_code)]
    struct Outer {
        inner: Vec<Inner>,
        ratio: f64,
        on: bool,
        secret: Kind,
        password: String,
        hmac_key: Vec<u8>,
        tier: Option<String>,
        pem: String,
    }

    #[test]
    fn debug_reads_as_json_and_secrets_go() {
        let o = Outer {
            inner: vec![Inner {
                addr: "127.0.0.1:80".parse().unwrap(),
                v6: "[::1]:443".parse().unwrap(),
                took: std::time::Duration::from_millis(1500),
                path: Some("/etc/a b".into()),
                nothing: None,
                word: Kind::Unit,
                tuple: (1, "x, y".into()),
                map: [("k: v".to_string(), 2)].into(),
                quote: "a\"b\\c\u{7}é".into(),
            }],
            ratio: 0.5,
            on: true,
            secret: Kind::Field("inline".into()),
            password: "hunter2".into(),
            hmac_key: vec![1, 2, 3],
            tier: Some("redis://u:pw@10.0.0.5:6379/0".into()),
            pem: "-----BEGIN PRIVATE KEY-----\nMII".into(),
        };
        let mut v = from_debug(&format!("{o:?}"));
        let plain = serde_json::json!({
            "inner": [{
                "addr": "127.0.0.1:80",
                "v6": "[::1]:443",
                "took": "1.5s",
                "path": "/etc/a b",
                "nothing": null,
                "word": "Unit",
                "tuple": [1, "x, y"],
                "map": {"k: v": 2},
                "quote": "a\"b\\c\u{7}é",
            }],
            "ratio": 0.5,
            "on": true,
            "secret": {"Field": "inline"},
            "password": "hunter2",
            "hmac_key": [1, 2, 3],
            "tier": "redis://u:pw@10.0.0.5:6379/0",
            "pem": "-----BEGIN PRIVATE KEY-----\nMII",
        });
        assert_eq!(v, plain);
        redact(&mut v, None);
        assert_eq!(v["password"], REDACTED);
        assert_eq!(v["hmac_key"], REDACTED);
        assert_eq!(v["pem"], REDACTED);
        assert_eq!(v["tier"], format!("redis://u:{REDACTED}@10.0.0.5:6379/0"));
        assert_eq!(v["secret"], serde_json::json!({"Field": REDACTED}));
        // Where a secret is, is not one.
        let mut env = from_debug(r#"X { secret: Env("JWT_KEY"), key: "/k.pem" }"#);
        redact(&mut env, None);
        assert_eq!(
            env,
            serde_json::json!({"secret": {"Env": "JWT_KEY"}, "key": "/k.pem"})
        );
        assert_eq!(v["inner"], plain["inner"]);
    }
}
