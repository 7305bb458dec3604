//! A request's decoded header fields, checked by RFC 9113 §8.2–8.3 and written as the
//! HTTP/1.1 head the application reads (`RequestHead` spans into it), so every route, site and
//! file rule — and the HTTP/1.1 parser's own strictness on the target and values — applies to
//! HTTP/2 requests unchanged.
//!
//! Owns what makes a request malformed at the HTTP/2 layer: pseudo-header rules, lowercase
//! token names, connection-specific fields, `te`, value bytes, Host against `:authority`,
//! Content-Length values. Cookie crumbs are joined (§8.2.3). Nothing here sees frames.
#![forbid(unsafe_code)]

/// Why a request (or trailer) block is malformed: a stream error of type PROTOCOL_ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    UppercaseName,
    InvalidName,
    InvalidValue,
    /// `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`, or a
    /// `te` other than `trailers` (§8.2.2).
    ConnectionSpecific,
    /// Unknown, repeated, response-only, or after a regular field (§8.3).
    PseudoHeader,
    /// `:method`, `:scheme` or `:path` missing, or `:path` empty (§8.3.1).
    MissingPseudo,
    /// Host names another authority than `:authority` (§8.3.1).
    HostMismatch,
    ContentLength,
}

/// Which pseudo-headers were seen.
const METHOD: u8 = 1;
const SCHEME: u8 = 2;
const AUTHORITY: u8 = 4;
const PATH: u8 = 8;
const PROTOCOL: u8 = 16;

/// The connection's buffers for [`RequestFields`], reused from request to request.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The HTTP/1.1 head being written.
    pub head: Vec<u8>,
    /// Pseudo-header values, until the request line is written.
    method: Vec<u8>,
    path: Vec<u8>,
    authority: Vec<u8>,
    cookie: Vec<u8>,
    /// `:protocol` (RFC 8441 §4): empty unless the request is an extended CONNECT.
    pub protocol: Vec<u8>,
}

impl Scratch {
    /// The bytes its buffers hold (what a header list made it keep).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        [
            &self.head,
            &self.method,
            &self.path,
            &self.authority,
            &self.cookie,
            &self.protocol,
        ]
        .iter()
        .map(|b| b.capacity())
        .sum()
    }
}

/// Collects one request's fields into the head in [`Scratch::head`].
pub(crate) struct RequestFields<'a> {
    s: &'a mut Scratch,
    pseudo: u8,
    /// The request line is written: no more pseudo-headers.
    regular: bool,
    pub content_length: Option<u64>,
    pub error: Option<Malformed>,
    /// The connection announced SETTINGS_ENABLE_CONNECT_PROTOCOL: `:protocol` is known.
    extended_connect: bool,
}

impl<'a> RequestFields<'a> {
    /// `extended_connect`: the server sent SETTINGS_ENABLE_CONNECT_PROTOCOL = 1 (RFC 8441
    /// §3); otherwise `:protocol` is an unknown pseudo-header, and malformed.
    pub(crate) fn new(s: &'a mut Scratch, extended_connect: bool) -> RequestFields<'a> {
        s.head.clear();
        s.method.clear();
        s.path.clear();
        s.authority.clear();
        s.cookie.clear();
        s.protocol.clear();
        RequestFields {
            s,
            pseudo: 0,
            regular: false,
            content_length: None,
            error: None,
            extended_connect,
        }
    }

    fn fail(&mut self, why: Malformed) {
        self.error.get_or_insert(why);
    }

    /// One decoded field (the decoder counts the list's size, and stops handing fields out
    /// past the limit). After an error the rest are ignored.
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Err(why) = check_value(value) {
            return self.fail(why);
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            return self.pseudo(pseudo, value);
        }
        if let Err(why) = check_name(name) {
            return self.fail(why);
        }
        if !self.regular && !self.request_line() {
            return;
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return self.fail(Malformed::ConnectionSpecific),
            b"te" if value != b"trailers" => return self.fail(Malformed::ConnectionSpecific),
            // Already written from :authority; it must name the same (RFC 9113 §8.3.1).
            b"host" if self.pseudo & AUTHORITY != 0 => {
                if !value.eq_ignore_ascii_case(&self.s.authority) {
                    self.fail(Malformed::HostMismatch);
                }
                return;
            }
            b"cookie" => {
                if !self.s.cookie.is_empty() {
                    self.s.cookie.extend_from_slice(b"; ");
                }
                self.s.cookie.extend_from_slice(value);
                return;
            }
            b"content-length" => {
                let n = parse_length(value);
                match (n, self.content_length) {
                    (Some(n), None) => self.content_length = Some(n),
                    (Some(n), Some(m)) if n == m => return,
                    _ => return self.fail(Malformed::ContentLength),
                }
            }
            _ => {}
        }
        write_field(&mut self.s.head, name, value);
    }

    fn pseudo(&mut self, name: &[u8], value: &[u8]) {
        if self.regular {
            return self.fail(Malformed::PseudoHeader);
        }
        let bit = match name {
            b"method" => METHOD,
            b"scheme" => SCHEME,
            b"authority" => AUTHORITY,
            b"path" => PATH,
            _ => return self.other_pseudo(name, value),
        };
        if self.pseudo & bit != 0 {
            return self.fail(Malformed::PseudoHeader);
        }
        match bit {
            METHOD => self.s.method.extend_from_slice(value),
            AUTHORITY => self.s.authority.extend_from_slice(value),
            PATH => self.s.path.extend_from_slice(value),
            _ => {}
        }
        self.pseudo |= bit;
        if bit == SCHEME && !matches!(value, b"http" | b"https") {
            // A scheme this server does not serve: the HTTP/1.1 parser would never see it.
            self.fail(Malformed::MissingPseudo);
        }
    }

    /// A pseudo-header other than the four of every request: `:protocol` where the
    /// connection announced extended CONNECT (RFC 8441 §4), else malformed. Out of line: the
    /// common request never reaches it.
    #[cold]
    #[inline(never)]
    fn other_pseudo(&mut self, name: &[u8], value: &[u8]) {
        if name != b"protocol" || !self.extended_connect || value.is_empty() {
            return self.fail(Malformed::PseudoHeader);
        }
        if self.pseudo & PROTOCOL != 0 {
            return self.fail(Malformed::PseudoHeader);
        }
        self.s.protocol.extend_from_slice(value);
        self.pseudo |= PROTOCOL;
    }

    /// Writes the request line (and Host from `:authority`) once the pseudo-headers are in.
    /// `false` when they do not make a request.
    fn request_line(&mut self) -> bool {
        self.regular = true;
        let s = &mut *self.s;
        let connect = s.method == b"CONNECT";
        let extended = self.pseudo & PROTOCOL != 0;
        let needed = if extended {
            // RFC 8441 §4: `:protocol` only with CONNECT, which then names its target with
            // :scheme, :path and :authority, all present.
            connect
                && self.pseudo == METHOD | SCHEME | AUTHORITY | PATH | PROTOCOL
                && !s.path.is_empty()
        } else if connect {
            // §8.5: CONNECT has :authority and neither :scheme nor :path.
            self.pseudo == METHOD | AUTHORITY
        } else {
            self.pseudo & (METHOD | SCHEME | PATH) == METHOD | SCHEME | PATH && !s.path.is_empty()
        };
        if !needed {
            self.fail(Malformed::MissingPseudo);
            return false;
        }
        let h = &mut s.head;
        h.extend_from_slice(&s.method);
        h.push(b' ');
        // An extended CONNECT's target is its path (origin-form): the routes see it as any
        // request's.
        h.extend_from_slice(if connect && !extended {
            &s.authority
        } else {
            &s.path
        });
        h.extend_from_slice(b" HTTP/1.1\r\n");
        if self.pseudo & AUTHORITY != 0 {
            write_field(h, b"host", &s.authority);
        }
        true
    }

    /// The head is complete (`\r\n` after the last field). `Err` when it is malformed.
    pub(crate) fn finish(mut self) -> Result<Option<u64>, Malformed> {
        if !self.regular && self.error.is_none() {
            self.request_line();
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        let s = &mut *self.s;
        if !s.cookie.is_empty() {
            write_field(&mut s.head, b"cookie", &s.cookie);
        }
        s.head.extend_from_slice(b"\r\n");
        Ok(self.content_length)
    }
}

/// Checks a trailer block's fields (§8.1: no pseudo-headers; the field rules of §8.2).
#[derive(Default)]
pub(crate) struct TrailerFields {
    pub size: usize,
    pub error: Option<Malformed>,
}

impl TrailerFields {
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        self.size += name.len() + value.len() + 32;
        if self.error.is_some() {
            return;
        }
        if let Err(e) = check_regular(name, value) {
            self.error = Some(e);
        }
    }
}

/// A field that is neither a pseudo-header nor allowed only in requests (`te`): a trailer's,
/// or a response's (`h2u` reads the upstream's with it). §8.2.1 names and values, §8.2.2 no
/// connection-specific field.
pub(crate) fn check_regular(name: &[u8], value: &[u8]) -> Result<(), Malformed> {
    check_value(value)?;
    if name.starts_with(b":") {
        return Err(Malformed::PseudoHeader);
    }
    check_name(name)?;
    match name {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
        | b"te" => Err(Malformed::ConnectionSpecific),
        _ => Ok(()),
    }
}

fn write_field(h: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    h.extend_from_slice(name);
    h.extend_from_slice(b": ");
    h.extend_from_slice(value);
    h.extend_from_slice(b"\r\n");
}

/// §8.2.1: a name is a token (RFC 9110 §5.1) in lowercase.
fn check_name(name: &[u8]) -> Result<(), Malformed> {
    if name.is_empty() {
        return Err(Malformed::InvalidName);
    }
    if name.iter().all(|&b| NAME[b as usize] == OK) {
        return Ok(());
    }
    if name.iter().any(|&b| NAME[b as usize] == UPPER) {
        return Err(Malformed::UppercaseName);
    }
    Err(Malformed::InvalidName)
}

const BAD: u8 = 0;
const OK: u8 = 1;
const UPPER: u8 = 2;

/// Each byte's class in a field name: a lowercase token character, an uppercase letter, or
/// anything else.
static NAME: [u8; 256] = {
    let mut t = [BAD; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = if c.is_ascii_uppercase() {
            UPPER
        } else if c.is_ascii_alphanumeric() {
            OK
        } else {
            match c {
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^'
                | b'_' | b'`' | b'|' | b'~' => OK,
                _ => BAD,
            }
        };
        b += 1;
    }
    t
};

/// §8.2.1: no NUL, CR or LF, and no whitespace at either end.
fn check_value(v: &[u8]) -> Result<(), Malformed> {
    let edge = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    // A plain loop: values are short, and memchr3's setup cost more than it saved here.
    if edge(v.first()) || edge(v.last()) || v.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(Malformed::InvalidValue);
    }
    Ok(())
}

/// A Content-Length value: digits only.
pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(fields: &[(&str, &str)]) -> Result<String, Malformed> {
        let mut s = Scratch::default();
        let mut f = RequestFields::new(&mut s, false);
        for (n, v) in fields {
            f.field(n.as_bytes(), v.as_bytes());
        }
        f.finish()?;
        Ok(String::from_utf8(s.head).unwrap())
    }

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut v = GET.to_vec();
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn a_request_becomes_its_http11_head() {
        assert_eq!(
            head(&with(&[
                ("accept", "*/*"),
                ("cookie", "a=1"),
                ("cookie", "b=2")
            ]))
            .unwrap(),
            "GET /a?b HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\ncookie: a=1; b=2\r\n\r\n"
        );
        assert_eq!(
            head(&GET).unwrap(),
            "GET /a?b HTTP/1.1\r\nhost: example.com\r\n\r\n"
        );
        assert_eq!(
            head(&[(":method", "CONNECT"), (":authority", "example.com:443")]).unwrap(),
            "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n"
        );
    }

    // One row per rule of RFC 9113 §8.2–8.3.
    #[test]
    fn malformed_requests() {
        use Malformed::*;
        let rows: Vec<(Vec<(&str, &str)>, Malformed)> = vec![
            (with(&[("Accept", "x")]), UppercaseName), // §8.2.1
            (with(&[("a b", "x")]), InvalidName),      // §8.2.1
            (with(&[("x", "a\nb")]), InvalidValue),    // §8.2.1
            (with(&[("x", " a")]), InvalidValue),      // §8.2.1
            (with(&[("x", "a\t")]), InvalidValue),     // §8.2.1
            (with(&[("x", "a\0")]), InvalidValue),     // §8.2.1
            (with(&[("connection", "keep-alive")]), ConnectionSpecific), // §8.2.2
            (
                with(&[("transfer-encoding", "chunked")]),
                ConnectionSpecific,
            ), // §8.2.2
            (with(&[("upgrade", "h2c")]), ConnectionSpecific), // §8.2.2
            (with(&[("keep-alive", "5")]), ConnectionSpecific), // §8.2.2
            (with(&[("proxy-connection", "x")]), ConnectionSpecific), // §8.2.2
            (with(&[("te", "gzip")]), ConnectionSpecific), // §8.2.2
            (with(&[("x", "1"), (":path", "/")]), PseudoHeader), // §8.3
            (with(&[(":status", "200")]), PseudoHeader), // §8.3.2
            (with(&[(":foo", "x")]), PseudoHeader),    // §8.3
            (with(&[(":path", "/again")]), PseudoHeader), // §8.3.1
            (
                vec![(":method", "GET"), (":scheme", "https")],
                MissingPseudo,
            ), // §8.3.1
            (vec![(":method", "GET"), (":path", "/")], MissingPseudo), // §8.3.1
            (vec![(":scheme", "http"), (":path", "/")], MissingPseudo), // §8.3.1
            (
                vec![(":method", "GET"), (":scheme", "http"), (":path", "")],
                MissingPseudo,
            ), // §8.3.1
            (with(&[("host", "other.example")]), HostMismatch), // §8.3.1
            (with(&[("content-length", "1x")]), ContentLength),
            (
                with(&[("content-length", "1"), ("content-length", "2")]),
                ContentLength,
            ),
        ];
        for (fields, want) in rows {
            assert_eq!(head(&fields), Err(want), "{fields:?}");
        }
        assert!(head(&with(&[("te", "trailers"), ("host", "EXAMPLE.com")])).is_ok());
    }

    fn extended(fields: &[(&str, &str)], enabled: bool) -> Result<(String, String), Malformed> {
        let mut s = Scratch::default();
        let mut f = RequestFields::new(&mut s, enabled);
        for (n, v) in fields {
            f.field(n.as_bytes(), v.as_bytes());
        }
        f.finish()?;
        Ok((
            String::from_utf8(s.head).unwrap(),
            String::from_utf8(s.protocol).unwrap(),
        ))
    }

    const WS: [(&str, &str); 5] = [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":path", "/chat?room=1"),
        (":authority", "example.com"),
    ];

    /// RFC 8441 §4: an extended CONNECT names its target like a GET, and its `:protocol`
    /// is kept beside the head.
    #[test]
    fn an_extended_connect_becomes_a_connect_to_its_path() {
        let mut fields = WS.to_vec();
        fields.push(("sec-websocket-version", "13"));
        assert_eq!(
            extended(&fields, true),
            Ok((
                "CONNECT /chat?room=1 HTTP/1.1\r\nhost: example.com\r\nsec-websocket-version: 13\r\n\r\n"
                    .into(),
                "websocket".into()
            ))
        );
        // A plain CONNECT stays in authority-form, with no protocol.
        let plain = [(":method", "CONNECT"), (":authority", "example.com:443")];
        assert_eq!(
            extended(&plain, true),
            Ok((
                "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n".into(),
                String::new()
            ))
        );
    }

    /// One row per rule of RFC 8441 §3–4.
    #[test]
    fn malformed_extended_connects() {
        use Malformed::*;
        let without = |name: &str| -> Vec<(&str, &str)> {
            WS.iter().copied().filter(|(n, _)| *n != name).collect()
        };
        let replaced = |name: &str, value: &'static str| -> Vec<(&str, &str)> {
            WS.iter()
                .map(|&(n, v)| if n == name { (n, value) } else { (n, v) })
                .collect()
        };
        // The fields, whether the setting was sent, and the error.
        type Row<'a> = (Vec<(&'a str, &'a str)>, bool, Malformed);
        let rows: Vec<Row> = vec![
            // §3: `:protocol` is unknown where the setting was not sent.
            (WS.to_vec(), false, PseudoHeader),
            // §4: only with CONNECT.
            (replaced(":method", "GET"), true, MissingPseudo),
            // §4: :scheme, :path and :authority are all needed.
            (without(":scheme"), true, MissingPseudo),
            (without(":path"), true, MissingPseudo),
            (without(":authority"), true, MissingPseudo),
            (replaced(":path", ""), true, MissingPseudo),
            (replaced(":protocol", ""), true, PseudoHeader),
            // RFC 9113 §8.3: once, like every pseudo-header.
            (
                [WS.as_slice(), &[(":protocol", "websocket")]].concat(),
                true,
                PseudoHeader,
            ),
        ];
        for (fields, enabled, want) in rows {
            assert_eq!(extended(&fields, enabled), Err(want), "{fields:?}");
        }
    }

    #[test]
    fn trailers_take_no_pseudo_headers() {
        let mut t = TrailerFields::default();
        t.field(b"x-sum", b"1");
        assert_eq!(t.error, None);
        t.field(b":path", b"/");
        assert_eq!(t.error, Some(Malformed::PseudoHeader));
    }
}
