//! The opening handshake's server side (RFC 6455 §4.2, and RFC 8441 §5 over HTTP/2):
//! whether a request is a WebSocket opening a server can accept (an HTTP/1.1 upgrade, or an
//! HTTP/2 extended CONNECT), what it offers (subprotocols, extensions, the
//! permessage-deflate parameters a server would agree to), and the `Sec-WebSocket-Accept`
//! value. Pure: the caller renders the answer (101, or the refusal's
//! status with its fields).
#![forbid(unsafe_code)]

use base64::Engine;
use linerate_http1::{Method, RequestHead, Version};
use linerate_ws::deflate::{self, Agreed};

/// The only version this server speaks (RFC 6455 §4.1).
pub const VERSION: &str = "13";

/// Why a request is not an upgrade this server accepts, each with its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Upgrade: websocket` (a plain request to a WebSocket route): 426 with
    /// `Upgrade: websocket` (RFC 9110 §15.5.22).
    NotUpgrade,
    /// Not GET, or not HTTP/1.1 (RFC 6455 §4.1): 400.
    Method,
    /// `Connection` without the `upgrade` token: 400.
    Connection,
    /// `Sec-WebSocket-Version` missing or not 13: 426 with `Sec-WebSocket-Version: 13`
    /// (RFC 6455 §4.2.2).
    Version,
    /// `Sec-WebSocket-Key` missing, repeated, or not 16 bytes in base64: 400.
    Key,
    /// `Sec-WebSocket-Extensions` that breaks RFC 6455 §9.1's grammar: 400.
    Extensions,
}

impl Refusal {
    /// The status that answers it.
    pub fn status(self) -> u16 {
        match self {
            Refusal::NotUpgrade | Refusal::Version => 426,
            Refusal::Method | Refusal::Connection | Refusal::Key | Refusal::Extensions => 400,
        }
    }

    /// What went wrong, for the answer's body and the log.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::NotUpgrade => "this resource speaks WebSocket only (Upgrade: websocket)",
            Refusal::Method => {
                "a WebSocket handshake is a GET over HTTP/1.1 or an extended CONNECT over HTTP/2"
            }
            Refusal::Connection => "a WebSocket handshake needs Connection: upgrade",
            Refusal::Version => "WebSocket version 13 only (Sec-WebSocket-Version: 13)",
            Refusal::Key => "Sec-WebSocket-Key must be 16 bytes in base64",
            Refusal::Extensions => "Sec-WebSocket-Extensions is malformed",
        }
    }
}

/// A valid handshake request's offer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer<'a> {
    /// `Sec-WebSocket-Key`, as sent (empty over HTTP/2, which has none: RFC 8441 §5).
    pub key: &'a [u8],
    /// The opening is an HTTP/2 extended CONNECT (RFC 8441): it is answered with a 200 and
    /// no `Sec-WebSocket-Accept`.
    pub http2: bool,
    /// The subprotocols the client offers, in its order of preference.
    pub protocols: Vec<&'a str>,
    /// The `Sec-WebSocket-Extensions` values, as sent.
    pub extensions: Vec<&'a [u8]>,
    /// The first permessage-deflate offer this server can take (RFC 7692 §5), for a route
    /// that compresses.
    pub deflate: Option<Agreed>,
    /// `Origin`, as sent (browsers always send it; RFC 6455 §10.2 leaves the policy to the
    /// server).
    pub origin: Option<&'a [u8]>,
}

/// Checks a request against RFC 6455 §4.2.1, or, for an HTTP/2 CONNECT (whose `:protocol`
/// the caller found to be `websocket`), against RFC 8441 §5: the version, subprotocols and
/// extensions as over HTTP/1.1, and no key.
pub fn check<'a>(head: &RequestHead, buf: &'a [u8]) -> Result<Offer<'a>, Refusal> {
    let mut upgrade = false;
    let mut connection = false;
    let mut version = None;
    let mut key = None;
    let mut keys = 0;
    let mut protocols = Vec::new();
    let mut extensions = Vec::new();
    let mut origin = None;
    for (name, value) in head.headers(buf) {
        if name.eq_ignore_ascii_case(b"upgrade") {
            upgrade |= has_token(value, b"websocket");
        } else if name.eq_ignore_ascii_case(b"connection") {
            connection |= has_token(value, b"upgrade");
        } else if name.eq_ignore_ascii_case(b"sec-websocket-version") {
            // RFC 6455 §4.1: the client sends one version; a repeated field is refused
            // like a wrong version.
            version = Some(if version.is_some() { &b""[..] } else { value });
        } else if name.eq_ignore_ascii_case(b"sec-websocket-key") {
            keys += 1;
            key = Some(value);
        } else if name.eq_ignore_ascii_case(b"sec-websocket-protocol") {
            protocols.extend(tokens(value).filter_map(|p| std::str::from_utf8(p).ok()));
        } else if name.eq_ignore_ascii_case(b"sec-websocket-extensions") {
            extensions.push(value);
        } else if name.eq_ignore_ascii_case(b"origin") {
            origin = Some(value);
        }
    }
    let http2 = head.version() == Version::Http2 && head.method() == Method::Connect;
    if http2 {
        // RFC 8441 §5: no Upgrade, Connection or key; the version is still 13.
        if version != Some(VERSION.as_bytes()) {
            return Err(Refusal::Version);
        }
    } else {
        if !upgrade {
            return Err(Refusal::NotUpgrade);
        }
        if head.method() != Method::Get || head.version() != Version::Http11 {
            return Err(Refusal::Method);
        }
        if !connection {
            return Err(Refusal::Connection);
        }
        if version != Some(VERSION.as_bytes()) {
            return Err(Refusal::Version);
        }
    }
    let key = if http2 {
        &b""[..]
    } else {
        let key = key.filter(|_| keys == 1).ok_or(Refusal::Key)?;
        // RFC 6455 §4.2.1 item 5: base64 of a 16-byte nonce (24 characters, "==" at the end).
        let decoded = base64::engine::general_purpose::STANDARD.decode(key);
        if !matches!(decoded, Ok(ref nonce) if nonce.len() == 16) {
            return Err(Refusal::Key);
        }
        key
    };
    let deflate =
        deflate::negotiate(extensions.iter().copied()).map_err(|_| Refusal::Extensions)?;
    Ok(Offer {
        key,
        http2,
        protocols,
        extensions,
        deflate,
        origin,
    })
}

pub use linerate_ws::accept::accept;

/// The comma-separated elements of a field value, trimmed, empty ones left out (RFC 9110
/// §5.6.1).
pub(crate) fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_http1::Limits;

    fn parse(fields: &str) -> (RequestHead, Vec<u8>) {
        parse_line("GET /ws HTTP/1.1", fields)
    }

    fn parse_line(line: &str, fields: &str) -> (RequestHead, Vec<u8>) {
        let raw = format!("{line}\r\nHost: a\r\n{fields}\r\n").into_bytes();
        let mut head = RequestHead::default();
        head.parse(&raw, &Limits::default()).expect("a valid head");
        (head, raw)
    }

    const GOOD: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

    /// RFC 6455 §1.3's own example.
    #[test]
    fn accept_of_the_rfc_example() {
        assert_eq!(
            accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn a_browser_handshake_is_taken_with_its_offer() {
        let fields = "Upgrade: WebSocket\r\nConnection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: http://example.com\r\nSec-WebSocket-Protocol: chat, superchat\r\nSec-WebSocket-Protocol: v2\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n";
        let (head, raw) = parse(fields);
        let offer = check(&head, &raw).unwrap();
        assert_eq!(offer.key, b"dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(offer.protocols, ["chat", "superchat", "v2"]);
        assert_eq!(
            offer.extensions,
            [&b"permessage-deflate; client_max_window_bits"[..]]
        );
        assert_eq!(
            offer.deflate,
            Some(Agreed {
                server_max_window_bits: None,
                client_no_context_takeover: false
            })
        );
        assert_eq!(offer.origin, Some(&b"http://example.com"[..]));
    }

    #[test]
    fn refusals_by_rfc_6455_4_2() {
        let without = |name: &str| {
            GOOD.split("\r\n")
                .filter(|l| !l.is_empty() && !l.starts_with(name))
                .map(|l| format!("{l}\r\n"))
                .collect::<String>()
        };
        type Row = (&'static str, (RequestHead, Vec<u8>), Refusal);
        let rows: Vec<Row> = vec![
            (
                "no Upgrade",
                parse(&without("Upgrade")),
                Refusal::NotUpgrade,
            ),
            (
                "Upgrade: h2c",
                parse(&format!("{}Upgrade: h2c\r\n", without("Upgrade"))),
                Refusal::NotUpgrade,
            ),
            (
                "POST",
                parse_line("POST /ws HTTP/1.1", &format!("{GOOD}Content-Length: 0\r\n")),
                Refusal::Method,
            ),
            (
                "HTTP/1.0",
                parse_line("GET /ws HTTP/1.0", GOOD),
                Refusal::Method,
            ),
            (
                "no Connection",
                parse(&without("Connection")),
                Refusal::Connection,
            ),
            (
                "Connection: close",
                parse(&format!("{}Connection: close\r\n", without("Connection"))),
                Refusal::Connection,
            ),
            (
                "no version",
                parse(&without("Sec-WebSocket-Version")),
                Refusal::Version,
            ),
            (
                "version 8",
                parse(&format!(
                    "{}Sec-WebSocket-Version: 8\r\n",
                    without("Sec-WebSocket-Version")
                )),
                Refusal::Version,
            ),
            (
                "two versions",
                parse(&format!("{GOOD}Sec-WebSocket-Version: 13\r\n")),
                Refusal::Version,
            ),
            ("no key", parse(&without("Sec-WebSocket-Key")), Refusal::Key),
            (
                "two keys",
                parse(&format!(
                    "{GOOD}Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                )),
                Refusal::Key,
            ),
            (
                "short key",
                parse(&format!(
                    "{}Sec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n",
                    without("Sec-WebSocket-Key")
                )),
                Refusal::Key,
            ),
            // RFC 6455 §9.1: the extensions' grammar, whatever the extension.
            (
                "malformed extensions",
                parse(&format!(
                    "{GOOD}Sec-WebSocket-Extensions: permessage-deflate;\r\n"
                )),
                Refusal::Extensions,
            ),
            (
                "not base64",
                parse(&format!(
                    "{}Sec-WebSocket-Key: !!!!!!!!!!!!!!!!!!!!!!==\r\n",
                    without("Sec-WebSocket-Key")
                )),
                Refusal::Key,
            ),
        ];
        for (name, (head, raw), want) in rows {
            assert_eq!(check(&head, &raw), Err(want), "{name}");
        }
        assert_eq!(Refusal::Version.status(), 426);
        assert_eq!(Refusal::Key.status(), 400);
    }
}
