//! Custom access-log lines, as nginx's `log_format`: a template of text and `$fields`, parsed
//! once when the configuration is read into segments, then written in one pass per request.
//!
//! Must not let a client forge a line: every value that comes from the request is escaped as
//! in a combined line (`\xHH`), and the template itself may hold no line break. A value the
//! request does not have (no `User-Agent`, not proxied, a refused request's time) is `-`.
#![forbid(unsafe_code)]

use std::fmt::{self, Write as _};
use std::sync::Arc;

use linerate_http1::Version;

use super::{AccessEntry, Clock, Fields, RefusedEntry, escape_byte, escape_into, protocol, word};

/// A checked template: what `access_log_format` holds when it names `$fields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template(Arc<[Segment]>);

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// Written as is (`$$` already made `$`).
    Text(Box<str>),
    Field(Field),
}

/// The values a template may name: nginx's names, and only what an access entry carries.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    RemoteAddr,
    /// Always `-`: no user is logged; kept so nginx's `combined` definition reads as is.
    RemoteUser,
    TimeLocal,
    TimeIso8601,
    Request,
    RequestMethod,
    RequestUri,
    ServerProtocol,
    Status,
    BodyBytesSent,
    HttpReferer,
    HttpUserAgent,
    RequestTime,
    RequestTimeUs,
    UpstreamAddr,
    UpstreamStatus,
    /// A gRPC call's `grpc-status` (`-` for other requests and streamed calls).
    GrpcStatus,
    UpstreamResponseTime,
    UpstreamTimeUs,
    /// nginx's `$upstream_cache_status`: what the cache did (`-` where none handled it).
    UpstreamCacheStatus,
    /// nginx's `$host`: the host the request named (absolute-form target, else Host),
    /// lowercase, without port; else its site's first name.
    Host,
    /// `http` or `https`.
    Scheme,
    /// nginx's `$request_id`: the request's id (`-` where none was drawn).
    RequestId,
    /// The request's trace id (32 hex digits; `-` when not traced).
    TraceId,
    /// `$http_NAME`: the request's first field `NAME` (`_` for `-`, any case), lowercase
    /// with `-` here, as field names are compared.
    Http(Box<str>),
}

/// The prefix of `$http_NAME`.
const HTTP_PREFIX: &str = "http_";

/// Every field by its name, in the order the docs list them (`$http_NAME` besides).
const FIELDS: [(&str, Field); 24] = [
    ("remote_addr", Field::RemoteAddr),
    ("remote_user", Field::RemoteUser),
    ("time_local", Field::TimeLocal),
    ("time_iso8601", Field::TimeIso8601),
    ("request", Field::Request),
    ("request_method", Field::RequestMethod),
    ("request_uri", Field::RequestUri),
    ("server_protocol", Field::ServerProtocol),
    ("status", Field::Status),
    ("body_bytes_sent", Field::BodyBytesSent),
    ("http_referer", Field::HttpReferer),
    ("http_user_agent", Field::HttpUserAgent),
    ("request_time", Field::RequestTime),
    ("request_time_us", Field::RequestTimeUs),
    ("upstream_addr", Field::UpstreamAddr),
    ("upstream_status", Field::UpstreamStatus),
    ("grpc_status", Field::GrpcStatus),
    ("upstream_response_time", Field::UpstreamResponseTime),
    ("upstream_time_us", Field::UpstreamTimeUs),
    ("upstream_cache_status", Field::UpstreamCacheStatus),
    ("host", Field::Host),
    ("scheme", Field::Scheme),
    ("request_id", Field::RequestId),
    ("trace_id", Field::TraceId),
];

/// What is wrong with a template; `at` is the byte offset of the `$` (or line break) in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateError {
    /// `$name` or `${name}` where `name` is none of the fields.
    UnknownField { name: String, at: usize },
    /// A `$` with no name after it (the end, a space, `${}`): a literal `$` is `$$`.
    NoName { at: usize },
    /// `${` without its `}`.
    Unclosed { at: usize },
    /// A line break: each request is one line.
    LineBreak { at: usize },
}

impl TemplateError {
    /// Where in the template the mistake is (a byte offset).
    pub fn at(&self) -> usize {
        match self {
            TemplateError::UnknownField { at, .. }
            | TemplateError::NoName { at }
            | TemplateError::Unclosed { at }
            | TemplateError::LineBreak { at } => *at,
        }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TemplateError::UnknownField { name, .. } => {
                write!(f, "unknown field ${name} (fields:")?;
                for (n, _) in FIELDS {
                    write!(f, " ${n}")?;
                }
                f.write_str(" $http_NAME)")
            }
            TemplateError::NoName { .. } => {
                f.write_str("\"$\" with no field name after it (a literal \"$\" is \"$$\")")
            }
            TemplateError::Unclosed { .. } => f.write_str("\"${\" without its \"}\""),
            TemplateError::LineBreak { .. } => {
                f.write_str("a line break in the template (each request is one line)")
            }
        }
    }
}

impl std::error::Error for TemplateError {}

/// What a line is written from: a served request, or one the connection refused on its own.
pub(crate) enum Entry<'a> {
    Served(&'a AccessEntry<'a>),
    Refused(&'a RefusedEntry<'a>),
}

impl Template {
    /// Checks `text` and splits it into segments: `$name` or `${name}` (so letters may
    /// follow), `$$` for a `$`, anything else as is.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        if let Some(at) = text.find(['\n', '\r']) {
            return Err(TemplateError::LineBreak { at });
        }
        let mut segments = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(d) = rest.find('$') {
            literal.push_str(&rest[..d]);
            let at = text.len() - rest.len() + d;
            let after = &rest[d + 1..];
            let (name, used) = if let Some(escaped) = after.strip_prefix('$') {
                literal.push('$');
                rest = escaped;
                continue;
            } else if let Some(braced) = after.strip_prefix('{') {
                let end = braced.find('}').ok_or(TemplateError::Unclosed { at })?;
                (&braced[..end], end + 2)
            } else {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            };
            if name.is_empty() {
                return Err(TemplateError::NoName { at });
            }
            let field = FIELDS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, f)| f.clone())
                .or_else(|| {
                    let field = name.strip_prefix(HTTP_PREFIX).filter(|f| !f.is_empty())?;
                    Some(Field::Http(
                        field.to_ascii_lowercase().replace('_', "-").into(),
                    ))
                })
                .ok_or_else(|| TemplateError::UnknownField {
                    name: name.to_string(),
                    at,
                })?;
            if !literal.is_empty() {
                segments.push(Segment::Text(std::mem::take(&mut literal).into()));
            }
            segments.push(Segment::Field(field));
            rest = &after[used..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            segments.push(Segment::Text(literal.into()));
        }
        Ok(Template(segments.into()))
    }

    /// Whether the template names `$host` (an answer given later keeps the host for it).
    pub(crate) fn uses_host(&self) -> bool {
        self.0.contains(&Segment::Field(Field::Host))
    }

    /// The request fields it names (`$http_NAME`), lowercase with `-`.
    pub(crate) fn fields_named(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|s| match s {
            Segment::Field(Field::Http(name)) => Some(&**name),
            _ => None,
        })
    }

    /// Appends `e`'s line and its `\n` to `out`. The times are the worker's cached texts
    /// (empty before the first is set: then `-`); `kept` names the values of
    /// [`Fields::Kept`].
    pub(crate) fn write(&self, out: &mut String, e: &Entry<'_>, clock: &Clock, kept: &[Box<str>]) {
        for s in self.0.iter() {
            match s {
                Segment::Text(t) => out.push_str(t),
                Segment::Field(f) => field(out, f, e, clock, kept),
            }
        }
        out.push('\n');
    }
}

/// Writes one field's value.
fn field(out: &mut String, f: &Field, e: &Entry<'_>, clock: &Clock, kept: &[Box<str>]) {
    let served = match e {
        Entry::Served(s) => Some(*s),
        Entry::Refused(_) => None,
    };
    match f {
        Field::RemoteAddr => match e {
            Entry::Served(AccessEntry { peer: Some(p), .. })
            | Entry::Refused(RefusedEntry { peer: Some(p), .. }) => {
                let _ = write!(out, "{}", p.ip());
            }
            _ => out.push('-'),
        },
        Field::RemoteUser => out.push('-'),
        Field::TimeLocal => text_or_dash(out, &clock.local),
        Field::TimeIso8601 => text_or_dash(out, &clock.iso8601),
        Field::Request => match e {
            // As a combined line writes it.
            Entry::Served(s) => {
                escape_into(out, Some(s.method.as_bytes()));
                out.push(' ');
                escape_into(out, Some(s.target.as_bytes()));
                out.push(' ');
                out.push_str(protocol(s.version));
            }
            Entry::Refused(r) => escape_into(out, (!r.line.is_empty()).then_some(r.line)),
        },
        // A refused request's first two words, as the JSON format takes them.
        Field::RequestMethod => match e {
            Entry::Served(s) => escape_into(out, Some(s.method.as_bytes())),
            Entry::Refused(r) => escape_into(out, word(r.line, 0)),
        },
        Field::RequestUri => match e {
            Entry::Served(s) => escape_into(out, Some(s.target.as_bytes())),
            Entry::Refused(r) => escape_into(out, word(r.line, 1)),
        },
        Field::ServerProtocol => {
            text_or_dash(out, served.map_or("", |s| protocol(s.version)));
        }
        Field::Status => {
            let status = match e {
                Entry::Served(s) => s.status,
                Entry::Refused(r) => r.status,
            };
            let _ = write!(out, "{status}");
        }
        Field::BodyBytesSent => {
            let bytes = match e {
                Entry::Served(s) => s.bytes,
                Entry::Refused(r) => r.bytes,
            };
            let _ = write!(out, "{bytes}");
        }
        Field::HttpReferer => escape_into(out, served.and_then(|s| s.referer)),
        Field::HttpUserAgent => escape_into(out, served.and_then(|s| s.user_agent)),
        Field::RequestTime => seconds(out, served.and_then(|s| s.request_time_us)),
        Field::RequestTimeUs => micros(out, served.and_then(|s| s.request_time_us)),
        Field::UpstreamAddr => match served.and_then(|s| s.upstream) {
            // The operator's own text (the configured address), not the client's.
            Some(u) => {
                let _ = write!(out, "{}", u.addr);
            }
            None => out.push('-'),
        },
        Field::UpstreamStatus => match served.and_then(|s| s.upstream) {
            Some(u) => {
                let _ = write!(out, "{}", u.status);
            }
            None => out.push('-'),
        },
        Field::GrpcStatus => out.push_str(served.and_then(|s| s.grpc_status).unwrap_or("-")),
        Field::UpstreamResponseTime => {
            seconds(out, served.and_then(|s| s.upstream).map(|u| u.time_us))
        }
        Field::UpstreamTimeUs => micros(out, served.and_then(|s| s.upstream).map(|u| u.time_us)),
        Field::UpstreamCacheStatus => out.push_str(
            served
                .and_then(|s| s.cache_status)
                .map_or("-", |c| c.as_str()),
        ),
        Field::Host => {
            let (host, name) = match e {
                Entry::Served(s) => (s.host, s.server_name),
                Entry::Refused(r) => (None, r.server_name),
            };
            match host.filter(|h| !h.is_empty()) {
                Some(h) => h
                    .iter()
                    .for_each(|b| escape_byte(out, b.to_ascii_lowercase())),
                None => escape_into(out, (!name.is_empty()).then_some(name.as_bytes())),
            }
        }
        Field::Scheme => {
            let tls = match e {
                // QUIC is always TLS (its connections are not marked as TLS ones are).
                Entry::Served(s) => s.tls || s.version == Version::Http3,
                Entry::Refused(r) => r.tls,
            };
            out.push_str(if tls { "https" } else { "http" });
        }
        Field::RequestId => match served.and_then(|s| s.trace?.request_id_text()) {
            Some(id) => escape_into(out, Some(id.as_bytes())),
            None => out.push('-'),
        },
        Field::TraceId => match served.and_then(|s| s.trace?.trace_id_hex()) {
            Some(id) => out.push_str(&id),
            None => out.push('-'),
        },
        Field::Http(name) => {
            let value = served.and_then(|s| match s.fields {
                Fields::Head(head, buf) => head.header(buf, name),
                Fields::Kept(values) => kept
                    .iter()
                    .position(|k| k == name)
                    .and_then(|i| values.get(i)?.as_deref()),
            });
            escape_into(out, value);
        }
    }
}

fn text_or_dash(out: &mut String, t: &str) {
    out.push_str(if t.is_empty() { "-" } else { t });
}

/// Seconds with milliseconds, as nginx writes `$request_time` (`0.057`); the rest of a
/// millisecond is dropped, so a request under one is `0.000`, as in nginx.
fn seconds(out: &mut String, us: Option<u64>) {
    match us {
        Some(us) => {
            let ms = us / 1000;
            let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
        }
        None => out.push('-'),
    }
}

fn micros(out: &mut String, us: Option<u64>) {
    match us {
        Some(us) => {
            let _ = write!(out, "{us}");
        }
        None => out.push('-'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(t: &Template) -> Vec<Segment> {
        t.0.to_vec()
    }

    #[test]
    fn templates_split_into_text_and_fields() {
        use Segment::{Field as F, Text as T};
        for (text, want) in [
            ("$status", vec![F(Field::Status)]),
            (
                "${status}x $$ a$$b",
                vec![F(Field::Status), T("x $ a$b".into())],
            ),
            (
                "[$time_local] $request_time_us-$upstream_addr",
                vec![
                    T("[".into()),
                    F(Field::TimeLocal),
                    T("] ".into()),
                    F(Field::RequestTimeUs),
                    T("-".into()),
                    F(Field::UpstreamAddr),
                ],
            ),
            ("$$", vec![T("$".into())]),
            // nginx's `$http_NAME`: the field's name with `-` for `_`, compared without case.
            (
                "$http_X_Request_Id;$http_accept",
                vec![
                    F(Field::Http("x-request-id".into())),
                    T(";".into()),
                    F(Field::Http("accept".into())),
                ],
            ),
            ("$host$scheme", vec![F(Field::Host), F(Field::Scheme)]),
            (
                "\t$status;",
                vec![T("\t".into()), F(Field::Status), T(";".into())],
            ),
        ] {
            assert_eq!(fields(&Template::parse(text).unwrap()), want, "{text}");
        }
    }

    #[test]
    fn a_template_mistake_names_its_place() {
        for (text, want) in [
            (
                "$status $bogus",
                TemplateError::UnknownField {
                    name: "bogus".into(),
                    at: 8,
                },
            ),
            // nginx's names are lowercase; `$status_x` is one name, not `$status` and `_x`.
            (
                "$Status",
                TemplateError::UnknownField {
                    name: "Status".into(),
                    at: 0,
                },
            ),
            (
                "$status_x",
                TemplateError::UnknownField {
                    name: "status_x".into(),
                    at: 0,
                },
            ),
            (
                "a ${ status }",
                TemplateError::UnknownField {
                    name: " status ".into(),
                    at: 2,
                },
            ),
            (
                "$http_",
                TemplateError::UnknownField {
                    name: "http_".into(),
                    at: 0,
                },
            ),
            ("$status $", TemplateError::NoName { at: 8 }),
            ("100$ ", TemplateError::NoName { at: 3 }),
            ("x ${}", TemplateError::NoName { at: 2 }),
            ("$-", TemplateError::NoName { at: 0 }),
            ("${status", TemplateError::Unclosed { at: 0 }),
            ("$status\n$status", TemplateError::LineBreak { at: 7 }),
            ("$status\r", TemplateError::LineBreak { at: 7 }),
        ] {
            let got = Template::parse(text).unwrap_err();
            assert_eq!(got, want, "{text:?}");
            assert_eq!(got.at(), want.at());
        }
        let listed = Template::parse("$bogus").unwrap_err().to_string();
        assert!(
            listed.starts_with("unknown field $bogus (fields: $remote_addr $remote_user"),
            "{listed}"
        );
    }

    /// docs/config.md lists every field a template may name.
    #[test]
    fn every_field_is_in_the_docs() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/config.md"))
                .unwrap();
        for (name, _) in FIELDS {
            assert!(docs.contains(&format!("`${name}`")), "${name} not in docs");
        }
    }

    #[test]
    fn seconds_have_milliseconds_as_nginx_writes_them() {
        for (us, want) in [
            (Some(57_000), "0.057"),
            (Some(57), "0.000"),
            (Some(1_234_567), "1.234"),
            (Some(12_000_000), "12.000"),
            (None, "-"),
        ] {
            let mut out = String::new();
            seconds(&mut out, us);
            assert_eq!(out, want);
        }
    }
}
