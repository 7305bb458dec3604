//! The access log: nginx `combined` lines followed by the request time in microseconds, one
//! JSON object per line, or a template of nginx-named `$fields` (`template.rs`); formatted on
//! the worker, written by a logger thread per file (`writer.rs`) so a slow disk or pipe never
//! blocks a worker; reopened on request (SIGUSR1, after logrotate renamed the file). A site
//! may have its own log, written instead of the server's.
//!
//! Owns formatting and hand-off. Each worker appends lines to its own buffer (one batch per
//! log and format) and hands the batches over bounded channels once per event-loop turn; if
//! a logger falls behind, batches are dropped and counted rather than blocking the worker.
//! Off by default.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};

use linerate_http1::{RequestHead, Version};

use crate::config::UpstreamAddr;

mod cache_status;
mod template;
mod writer;

pub(crate) use cache_status::CacheOutcome;

use template::Entry;
pub use template::{Template, TemplateError};
pub(crate) use writer::Logs;

/// Where access log lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    Stdout,
    File(PathBuf),
}

/// Batches in flight between workers and the logger before new ones are dropped.
const CHANNEL_BATCHES: usize = 1024;
/// A worker hands its batch over at the end of a loop turn or once it reaches this size.
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

/// The line format.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// nginx `combined`, then the request time in µs:
    /// `127.0.0.1 - - [10/Oct/2000:13:55:36 +0000] "GET / HTTP/1.1" 200 13 "-" "curl/8" 57`.
    #[default]
    Combined,
    /// One JSON object per line: `{"time":"2000-10-10T13:55:36+00:00",
    /// "remote_addr":"127.0.0.1","method":"GET","target":"/","version":"HTTP/1.1",
    /// "status":200,"bytes":13,"referer":null,"user_agent":"curl/8","request_time_us":57}`.
    Json,
    /// The operator's own line, as nginx's `log_format`:
    /// `$remote_addr "$request" $status $request_time`.
    Template(Template),
}

/// What is wrong with an `access_log_format` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogFormatError {
    /// Neither `combined` nor `json`, and no `$` to make it a template.
    Unknown,
    /// A template with a mistake.
    Template(TemplateError),
}

impl std::fmt::Display for LogFormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogFormatError::Unknown => f.write_str(
                "must be \"combined\", \"json\" or a template of $fields (e.g. \"$remote_addr $request $status\")",
            ),
            LogFormatError::Template(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for LogFormatError {}

impl LogFormat {
    /// `combined`, `json`, or a template: any value holding a `$`.
    pub fn parse(s: &str) -> Result<LogFormat, LogFormatError> {
        match s {
            "combined" => Ok(LogFormat::Combined),
            "json" => Ok(LogFormat::Json),
            t if t.contains('$') => Template::parse(t)
                .map(LogFormat::Template)
                .map_err(LogFormatError::Template),
            _ => Err(LogFormatError::Unknown),
        }
    }
}

/// What the logger thread receives.
pub(crate) enum LogMsg {
    /// A batch of whole lines.
    Lines(String),
    /// Close the file and open its path again (it was renamed or removed).
    Reopen,
    /// Answer once every batch sent before this is written: the server's last act, so
    /// the lines of the final requests are in the file when the process exits.
    Flush(SyncSender<()>),
}

/// One request's facts for the log line.
pub(crate) struct AccessEntry<'a> {
    pub peer: Option<SocketAddr>,
    pub method: &'a str,
    pub target: &'a str,
    pub version: Version,
    pub status: u16,
    pub bytes: usize,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// From the request head's arrival to its answer, when known.
    pub request_time_us: Option<u64>,
    /// It came over TLS (`$scheme`).
    pub tls: bool,
    /// The host it named, without port or trailing dot, as sent (`$host` writes it
    /// lowercase; see `sites::request_host_bytes`).
    pub host: Option<&'a [u8]>,
    /// Its site's first name: `$host` of a request that named no host.
    pub server_name: &'a str,
    /// Its fields, for `$http_NAME`.
    pub fields: Fields<'a>,
    /// A proxied request's upstream side: appended to a combined line (address and time in
    /// µs), `upstream_addr`, `upstream_status` and `upstream_time_us` in JSON.
    pub upstream: Option<UpstreamEntry<'a>>,
    /// A gRPC call's `grpc-status` when its answer carries it (`grpc_status` in JSON, only
    /// then; `$grpc_status`).
    pub grpc_status: Option<&'static str>,
    /// What a caching mount's cache did with it (`$upstream_cache_status`, `cache_status`
    /// in JSON); `None` where no cache handled it.
    pub cache_status: Option<CacheOutcome>,
    /// Its ids (`$request_id`, `request_id` and `trace_id` in JSON), and its spans' facts
    /// when tracing records it; `None` where the server draws no ids.
    pub trace: Option<&'a crate::trace::RequestTrace>,
}

/// What a proxied request's line says of its upstream (nginx's `$upstream_addr`,
/// `$upstream_status`, `$upstream_response_time`).
#[derive(Clone, Copy)]
pub(crate) struct UpstreamEntry<'a> {
    /// The server tried last.
    pub addr: &'a UpstreamAddr,
    /// Its answer's status; when it sent none, the one the proxy answered with (502, 504),
    /// as nginx logs it.
    pub status: u16,
    /// From sending the request there to the answer's end (µs).
    pub time_us: u64,
}

/// Where `$http_NAME` finds a request's fields.
#[derive(Clone, Copy)]
pub(crate) enum Fields<'a> {
    /// The request's head in its buffer (an answer given at once).
    Head(&'a RequestHead, &'a [u8]),
    /// The values kept for an answer given later ([`LogBuffer::kept`]'s names, in order).
    Kept(&'a [Option<Box<[u8]>>]),
}

/// A request the connection refused on its own (malformed, a limit, a timeout).
pub(crate) struct RefusedEntry<'a> {
    pub peer: Option<SocketAddr>,
    /// Its request line as it arrived (empty when none did).
    pub line: &'a [u8],
    pub status: u16,
    pub bytes: usize,
    pub tls: bool,
    /// The default site's first name (`$host`: the request was not read as far as a site).
    pub server_name: &'a str,
}

/// A worker's side of the logs.
pub(crate) struct LogBuffer {
    /// One batch per log and format (`Logs`' sinks, in order).
    sinks: Box<[Sink]>,
    /// The field names (`$http_NAME`: lowercase, `-` for `_`) some template writes: an
    /// answer given later keeps their values.
    kept: Arc<[Box<str>]>,
    /// Some template writes `$host`, or a JSON log its `host`: an answer given later keeps
    /// it.
    keeps_host: bool,
    clock: Clock,
    /// The worker's spans, when tracing is on: written from the same records.
    pub(crate) spans: Option<crate::trace::spans::Spans>,
}

/// Lines on their way to one log in one format.
struct Sink {
    lines: String,
    tx: SyncSender<LogMsg>,
    dropped: u64,
    format: LogFormat,
}

/// The time texts lines carry, refreshed with the Date cache (once a second).
#[derive(Default)]
pub(crate) struct Clock {
    /// `10/Oct/2000:13:55:36 +0000`.
    local: String,
    /// `2000-10-10T13:55:36+00:00` (ISO 8601 and RFC 3339).
    iso8601: String,
    /// The time `set_time` gave, which the JSON lines use instead of the clock's (tests).
    #[cfg(test)]
    pinned: Option<std::time::SystemTime>,
}

impl Clock {
    /// Now, to the nanosecond (the JSON log's `time` has milliseconds).
    fn now(&self) -> std::time::SystemTime {
        #[cfg(test)]
        if let Some(t) = self.pinned {
            return t;
        }
        std::time::SystemTime::now()
    }
}

impl LogBuffer {
    /// A worker's buffer writing each of `sinks`.
    fn new(sinks: Vec<Sink>) -> LogBuffer {
        // The request fields a template names, kept for an answer given later.
        let mut kept: Vec<Box<str>> = Vec::new();
        let mut keeps_host = false;
        for s in &sinks {
            keeps_host |= s.format == LogFormat::Json;
            if let LogFormat::Template(t) = &s.format {
                keeps_host |= t.uses_host();
                for name in t.fields_named() {
                    if !kept.iter().any(|k| **k == *name) {
                        kept.push(name.into());
                    }
                }
            }
        }
        LogBuffer {
            sinks: sinks.into_boxed_slice(),
            kept: Arc::from(kept),
            keeps_host,
            clock: Clock::default(),
            spans: None,
        }
    }

    /// A worker's buffer for spans only (tracing on, no access log).
    pub(crate) fn spans_only() -> LogBuffer {
        LogBuffer::new(Vec::new())
    }

    /// Records a served request: its line in `sink`'s batch (its site's log, when it has
    /// one), and its spans when tracing records it.
    #[inline]
    pub(crate) fn push(&mut self, sink: Option<usize>, e: &AccessEntry<'_>) {
        if let Some(sink) = sink {
            self.line(sink, e);
        }
        if let (Some(spans), Some(t)) = (self.spans.as_mut(), e.trace)
            && t.recorded()
        {
            spans.record(e, t);
        }
    }

    /// Formats a served request's line into `sink`'s batch.
    fn line(&mut self, sink: usize, e: &AccessEntry<'_>) {
        let Some(s) = self.sinks.get_mut(sink) else {
            return;
        };
        let version = protocol(e.version);
        match s.format {
            LogFormat::Combined => {
                let ip = e
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_else(|| "-".into());
                // The request line escaped as nginx escapes it: a target may hold `\` (in a
                // query), which a log reader would take for the start of an escape.
                let _ = write!(s.lines, "{ip} - - [{}] \"", self.clock.local);
                escape_into(&mut s.lines, Some(e.method.as_bytes()));
                s.lines.push(' ');
                escape_into(&mut s.lines, Some(e.target.as_bytes()));
                let _ = write!(s.lines, " {version}\" {} {} \"", e.status, e.bytes);
                escape_into(&mut s.lines, e.referer);
                s.lines.push_str("\" \"");
                escape_into(&mut s.lines, e.user_agent);
                s.lines.push('"');
                match e.request_time_us {
                    Some(us) => {
                        let _ = write!(s.lines, " {us}");
                    }
                    None => s.lines.push_str(" -"),
                }
                if let Some(u) = e.upstream {
                    let _ = write!(s.lines, " {} {}", u.addr, u.time_us);
                }
                s.lines.push('\n');
            }
            LogFormat::Json => {
                let text = |v: Option<&[u8]>| v.map(|b| String::from_utf8_lossy(b).into_owned());
                let mut line = serde_json::json!({
                    "time": iso8601_ms(self.clock.now()),
                    "remote_addr": e.peer.map(|p| p.ip().to_string()),
                    "method": e.method,
                    "target": e.target,
                    "version": version,
                    "status": e.status,
                    "bytes": e.bytes,
                    "referer": text(e.referer),
                    "user_agent": text(e.user_agent),
                    "request_time_us": e.request_time_us,
                });
                if let Some(o) = line.as_object_mut() {
                    // As `$host`: the request's, else its site's first name.
                    let host = match e.host {
                        Some(h) => Some(String::from_utf8_lossy(h).to_ascii_lowercase()),
                        None => (!e.server_name.is_empty()).then(|| e.server_name.to_string()),
                    };
                    o.insert("host".into(), host.into());
                    if let Some(t) = e.trace
                        && let Some(id) = t.request_id_text()
                    {
                        o.insert("request_id".into(), id.into());
                        if let Some(id) = t.trace_id_hex() {
                            o.insert("trace_id".into(), id.into());
                        }
                    }
                }
                if let (Some(u), Some(o)) = (e.upstream, line.as_object_mut()) {
                    o.insert("upstream_addr".into(), u.addr.to_string().into());
                    o.insert("upstream_status".into(), u.status.into());
                    o.insert("upstream_time_us".into(), u.time_us.into());
                }
                if let (Some(g), Some(o)) = (e.grpc_status, line.as_object_mut()) {
                    // The number as a number, as `status` is.
                    o.insert("grpc_status".into(), g.parse::<u32>().unwrap_or(2).into());
                }
                if let (Some(c), Some(o)) = (e.cache_status, line.as_object_mut()) {
                    o.insert("cache_status".into(), c.as_str().into());
                }
                let _ = writeln!(s.lines, "{line}");
            }
            LogFormat::Template(ref t) => {
                t.write(&mut s.lines, &Entry::Served(e), &self.clock, &self.kept)
            }
        }
        if s.lines.len() >= BATCH_BYTES {
            s.hand_off();
        }
    }

    /// A request the connection refused on its own: its line as it arrived, escaped
    /// (nginx's `$request` is the line as sent), or `-`; in JSON (and a template's
    /// `$request_method`, `$request_uri`), the line's first two words as method and target;
    /// a template's other request fields are `-`.
    pub(crate) fn push_refusal(&mut self, sink: usize, r: &RefusedEntry<'_>) {
        let Some(s) = self.sinks.get_mut(sink) else {
            return;
        };
        let line = (!r.line.is_empty()).then_some(r.line);
        match s.format {
            LogFormat::Combined => {
                let ip = r
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_else(|| "-".into());
                let _ = write!(s.lines, "{ip} - - [{}] \"", self.clock.local);
                escape_into(&mut s.lines, line);
                let _ = writeln!(s.lines, "\" {} {} \"-\" \"-\" -", r.status, r.bytes);
            }
            LogFormat::Json => {
                // As for a served request: the text as sent (JSON escapes what it must).
                let text = |w: Option<&[u8]>| w.map(|w| String::from_utf8_lossy(w).into_owned());
                let line = serde_json::json!({
                    "time": iso8601_ms(self.clock.now()),
                    "remote_addr": r.peer.map(|p| p.ip().to_string()),
                    "method": text(word(r.line, 0)),
                    "target": text(word(r.line, 1)),
                    "version": serde_json::Value::Null,
                    "status": r.status,
                    "bytes": r.bytes,
                    "referer": serde_json::Value::Null,
                    "user_agent": serde_json::Value::Null,
                    "request_time_us": serde_json::Value::Null,
                });
                let _ = writeln!(s.lines, "{line}");
            }
            LogFormat::Template(ref t) => {
                t.write(&mut s.lines, &Entry::Refused(r), &self.clock, &self.kept)
            }
        }
        if s.lines.len() >= BATCH_BYTES {
            s.hand_off();
        }
    }

    /// Sends every batch to its logger without blocking.
    pub(crate) fn hand_off(&mut self) {
        for s in self.sinks.iter_mut() {
            s.hand_off();
        }
    }

    /// The field names whose values an answer given later keeps ([`Fields::Kept`]).
    pub(crate) fn kept(&self) -> &[Box<str>] {
        &self.kept
    }

    /// Whether an answer given later keeps its request's host.
    pub(crate) fn keeps_host(&self) -> bool {
        self.keeps_host
    }

    /// Sets the `$time_local` and `$time_iso8601` texts from an IMF-fixdate
    /// (`Sun, 06 Nov 1994 08:49:37 GMT`).
    pub(crate) fn set_time(&mut self, imf: &[u8]) {
        let s = std::str::from_utf8(imf).unwrap_or("");
        if s.len() == 29
            && let Some(m) = MONTHS.iter().position(|&m| m == &s[8..11])
        {
            let (day, month, year, time) = (&s[5..7], &s[8..11], &s[12..16], &s[17..25]);
            self.clock.local.clear();
            let _ = write!(self.clock.local, "{day}/{month}/{year}:{time} +0000");
            self.clock.iso8601.clear();
            let _ = write!(self.clock.iso8601, "{year}-{:02}-{day}T{time}+00:00", m + 1);
            #[cfg(test)]
            {
                self.clock.pinned = httpdate::parse_http_date(s).ok();
            }
        }
    }
}

impl Sink {
    /// Sends the batch to the logger without blocking.
    fn hand_off(&mut self) {
        if self.lines.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.lines);
        match self.tx.try_send(LogMsg::Lines(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped += 1;
                if self.dropped.is_power_of_two() {
                    tracing::warn!(
                        dropped_batches = self.dropped,
                        "access log falling behind; batches dropped"
                    );
                }
            }
        }
    }
}

/// `2000-10-10T13:55:36.123+00:00`: RFC 3339 in UTC to the millisecond (the JSON log's
/// `time`).
pub(crate) fn iso8601_ms(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = linerate_http1::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// The protocol as a request line names it (`$server_protocol`).
fn protocol(v: Version) -> &'static str {
    v.as_str()
}

/// The `n`th space-separated word of a request line, if it has one (a refused request's
/// method and target).
fn word(line: &[u8], n: usize) -> Option<&[u8]> {
    line.splitn(3, |&b| b == b' ')
        .nth(n)
        .filter(|w| !w.is_empty())
}

/// The month names of an IMF-fixdate, in order.
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// nginx escapes `"`, `\` and bytes outside printable ASCII as `\xHH`; absent fields are `-`.
fn escape_into(out: &mut String, v: Option<&[u8]>) {
    let Some(v) = v else {
        out.push('-');
        return;
    };
    for &b in v {
        escape_byte(out, b);
    }
}

fn escape_byte(out: &mut String, b: u8) {
    if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
        let _ = write!(out, "\\x{b:02X}");
    } else {
        out.push(b as char);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::sync::mpsc::{Receiver, sync_channel};

    use super::*;

    /// A worker's buffer writing `format`, and the logger's end of its channel.
    fn buffer(format: LogFormat) -> (LogBuffer, Receiver<LogMsg>) {
        let (tx, rx) = sync_channel(4);
        let b = LogBuffer::new(vec![Sink {
            lines: String::new(),
            tx,
            dropped: 0,
            format,
        }]);
        (b, rx)
    }

    /// The upstream server of the proxied entries.
    static UP: UpstreamAddr = UpstreamAddr::Tcp(SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::new(10, 0, 0, 2),
        9000,
    )));

    /// A request that `entry()`'s fields say nothing more of.
    const PLAIN: AccessEntry<'static> = AccessEntry {
        peer: None,
        method: "GET",
        target: "/",
        version: Version::Http11,
        status: 200,
        bytes: 0,
        referer: None,
        user_agent: None,
        request_time_us: None,
        tls: false,
        host: None,
        server_name: "",
        fields: Fields::Kept(&[]),
        upstream: None,
        grpc_status: None,
        cache_status: None,
        trace: None,
    };

    /// The one batch `b` hands off.
    fn batch(mut b: LogBuffer, rx: &Receiver<LogMsg>) -> String {
        b.hand_off();
        let LogMsg::Lines(batch) = rx.recv().unwrap() else {
            panic!("a batch")
        };
        batch
    }

    #[test]
    fn combined_format_line() {
        let (mut b, rx) = buffer(LogFormat::Combined);
        b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
        b.push(
            Some(0),
            &AccessEntry {
                peer: Some("127.0.0.1:5000".parse().unwrap()),
                method: "GET",
                target: "/json",
                version: Version::Http11,
                status: 200,
                bytes: 27,
                referer: None,
                user_agent: Some(b"curl/8 \"x\""),
                request_time_us: Some(57),
                ..PLAIN
            },
        );
        b.hand_off();
        let LogMsg::Lines(batch) = rx.recv().unwrap() else {
            panic!("a batch")
        };
        assert_eq!(
            batch,
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /json HTTP/1.1\" 200 27 \"-\" \"curl/8 \\x22x\\x22\" 57\n"
        );
    }

    #[test]
    fn a_proxied_request_names_its_upstream_server_and_time() {
        for (format, want) in [
            (
                LogFormat::Combined,
                "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /api HTTP/1.1\" 200 2 \"-\" \"-\" 57 10.0.0.2:9000 41\n",
            ),
            (
                LogFormat::Json,
                "{\"bytes\":2,\"host\":null,\"method\":\"GET\",\"referer\":null,\"remote_addr\":\"127.0.0.1\",\"request_time_us\":57,\"status\":200,\"target\":\"/api\",\"time\":\"1994-11-06T08:49:37.000+00:00\",\"upstream_addr\":\"10.0.0.2:9000\",\"upstream_status\":200,\"upstream_time_us\":41,\"user_agent\":null,\"version\":\"HTTP/1.1\"}\n",
            ),
        ] {
            let (mut b, rx) = buffer(format);
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
            b.push(
                Some(0),
                &AccessEntry {
                    peer: Some("127.0.0.1:5000".parse().unwrap()),
                    method: "GET",
                    target: "/api",
                    version: Version::Http11,
                    status: 200,
                    bytes: 2,
                    referer: None,
                    user_agent: None,
                    request_time_us: Some(57),
                    upstream: Some(UpstreamEntry {
                        addr: &UP,
                        status: 200,
                        time_us: 41,
                    }),
                    ..PLAIN
                },
            );
            b.hand_off();
            let LogMsg::Lines(batch) = rx.recv().unwrap() else {
                panic!("a batch")
            };
            assert_eq!(batch, want);
        }
    }
    /// A refused request's access line once had `"-"` for its request, so an operator
    /// could not see what was refused (a browser's `?a|b` got 400). The line as it arrived is
    /// logged, escaped as nginx escapes `$request`; a refusal without one is `"-"`.
    #[test]
    fn a_refused_request_is_logged_with_its_line_escaped() {
        for (format, line, want) in [
            (
                LogFormat::Combined,
                &b"GET /a\"b\x01\xc3\xa9 HTTP/1.1"[..],
                "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /a\\x22b\\x01\\xC3\\xA9 HTTP/1.1\" 400 11 \"-\" \"-\" -\n",
            ),
            (
                LogFormat::Combined,
                b"",
                "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"-\" 408 11 \"-\" \"-\" -\n",
            ),
            (
                LogFormat::Json,
                b"GET /a\"b HTTP/1.1",
                r#"{"bytes":11,"method":"GET","referer":null,"remote_addr":"127.0.0.1","request_time_us":null,"status":400,"target":"/a\"b","time":"1994-11-06T08:49:37.000+00:00","user_agent":null,"version":null}"#,
            ),
        ] {
            let (mut b, rx) = buffer(format);
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
            let status = if line.is_empty() { 408 } else { 400 };
            b.push_refusal(
                0,
                &RefusedEntry {
                    peer: Some("127.0.0.1:5000".parse().unwrap()),
                    line,
                    status,
                    bytes: 11,
                    tls: false,
                    server_name: "",
                },
            );
            b.hand_off();
            let LogMsg::Lines(batch) = rx.recv().unwrap() else {
                panic!("a batch")
            };
            assert_eq!(batch.trim_end(), want.trim_end());
        }
    }

    /// A served request of `entry()`'s kind: a proxied GET from 127.0.0.1.
    fn entry() -> AccessEntry<'static> {
        AccessEntry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            method: "GET",
            target: "/api",
            version: Version::Http11,
            status: 200,
            bytes: 2,
            referer: Some(b"http://r/"),
            user_agent: Some(b"curl/8"),
            request_time_us: Some(57_431),
            upstream: Some(UpstreamEntry {
                addr: &UP,
                status: 504,
                time_us: 41_000,
            }),
            ..PLAIN
        }
    }

    /// The line `template` writes for `e` (after the worker's clock was set, when `time`).
    fn template_line(template: &str, e: &AccessEntry<'_>, time: bool) -> String {
        let format = LogFormat::parse(template).unwrap();
        assert!(matches!(format, LogFormat::Template(_)), "{template}");
        let (mut b, rx) = buffer(format);
        if time {
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
        }
        b.push(Some(0), e);
        b.hand_off();
        let LogMsg::Lines(batch) = rx.recv().unwrap() else {
            panic!("a batch")
        };
        batch
    }

    /// A template's fields written for a served request: values escaped as a combined line
    /// escapes them (a user agent cannot end the line and forge the next), missing values
    /// `-`, `$$` a `$`, `${name}` followed by letters.
    #[test]
    fn a_template_writes_its_fields_escaped_and_missing_ones_as_dashes() {
        const EXAMPLE: &str = r#"$remote_addr [$time_local] "$request" $status $body_bytes_sent $request_time_us "$http_user_agent" $upstream_addr"#;
        let hostile = AccessEntry {
            user_agent: Some(b"x\" 200\n10.0.0.1 - - [06/Nov/1994] \"GET /admin"),
            target: "/a\"b\\c",
            upstream: None,
            ..entry()
        };
        let bare = AccessEntry {
            peer: None,
            referer: None,
            user_agent: None,
            request_time_us: None,
            upstream: None,
            ..entry()
        };
        for (template, e, time, want) in [
            (
                EXAMPLE,
                entry(),
                true,
                r#"127.0.0.1 [06/Nov/1994:08:49:37 +0000] "GET /api HTTP/1.1" 200 2 57431 "curl/8" 10.0.0.2:9000"#,
            ),
            (
                EXAMPLE,
                hostile,
                true,
                r#"127.0.0.1 [06/Nov/1994:08:49:37 +0000] "GET /a\x22b\x5Cc HTTP/1.1" 200 2 57431 "x\x22 200\x0A10.0.0.1 - - [06/Nov/1994] \x22GET /admin" -"#,
            ),
            (
                "$remote_addr $remote_user [$time_local] $time_iso8601 $http_referer $http_user_agent $request_time $request_time_us $upstream_addr $upstream_response_time $upstream_time_us",
                bare,
                false,
                "- - [-] - - - - - - - -",
            ),
            (
                "$time_iso8601 $request_time $upstream_response_time $upstream_time_us $request_method $request_uri $server_protocol $http_referer",
                entry(),
                true,
                "1994-11-06T08:49:37+00:00 0.057 0.041 41000 GET /api HTTP/1.1 http://r/",
            ),
            (
                "cost: $$5, ${status}x, ${body_bytes_sent}B $$$status",
                entry(),
                true,
                "cost: $5, 200x, 2B $200",
            ),
            (
                "$server_protocol $request",
                AccessEntry {
                    version: Version::Http2,
                    method: "POST",
                    ..entry()
                },
                true,
                "HTTP/2.0 POST /api HTTP/2.0",
            ),
        ] {
            let line = template_line(template, &e, time);
            assert_eq!(line, format!("{want}\n"), "{template}");
        }
    }

    /// A refusal through a template: its line as it arrived, escaped, its first two words as
    /// method and URI, and `-` for what a refused request does not have.
    #[test]
    fn a_refused_request_goes_through_the_template() {
        let template = r#"$remote_addr [$time_local] "$request" $request_method $request_uri $server_protocol $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_time $upstream_addr"#;
        for (line, status, want) in [
            (
                &b"GET /a\"b\x01 HTTP/1.1"[..],
                400,
                r#"127.0.0.1 [06/Nov/1994:08:49:37 +0000] "GET /a\x22b\x01 HTTP/1.1" GET /a\x22b\x01 - 400 11 "-" "-" - -"#,
            ),
            (
                b"",
                408,
                r#"127.0.0.1 [06/Nov/1994:08:49:37 +0000] "-" - - - 408 11 "-" "-" - -"#,
            ),
            (
                b"BREW",
                501,
                r#"127.0.0.1 [06/Nov/1994:08:49:37 +0000] "BREW" BREW - - 501 11 "-" "-" - -"#,
            ),
        ] {
            let (mut b, rx) = buffer(LogFormat::parse(template).unwrap());
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
            b.push_refusal(
                0,
                &RefusedEntry {
                    peer: Some("127.0.0.1:5000".parse().unwrap()),
                    line,
                    status,
                    bytes: 11,
                    tls: false,
                    server_name: "",
                },
            );
            b.hand_off();
            let LogMsg::Lines(batch) = rx.recv().unwrap() else {
                panic!("a batch")
            };
            assert_eq!(batch, format!("{want}\n"));
        }
    }

    /// `combined` and `json` keep their meaning; a value with a `$` is a template; anything
    /// else is refused.
    #[test]
    fn a_format_is_combined_json_or_a_template() {
        assert_eq!(LogFormat::parse("combined"), Ok(LogFormat::Combined));
        assert_eq!(LogFormat::parse("json"), Ok(LogFormat::Json));
        assert!(matches!(
            LogFormat::parse("$status"),
            Ok(LogFormat::Template(_))
        ));
        for (value, want) in [
            ("xml", LogFormatError::Unknown),
            ("", LogFormatError::Unknown),
            ("JSON", LogFormatError::Unknown),
            (
                "$status $bogus",
                LogFormatError::Template(TemplateError::UnknownField {
                    name: "bogus".into(),
                    at: 8,
                }),
            ),
            (
                "$status $",
                LogFormatError::Template(TemplateError::NoName { at: 8 }),
            ),
        ] {
            assert_eq!(LogFormat::parse(value), Err(want), "{value:?}");
        }
    }

    /// The JSON log's `time` was once `06/Nov/1994:08:49:37 +0000` (nginx's
    /// `$time_local`), which no JSON consumer reads as a time. It is ISO 8601 / RFC 3339
    /// now, for served and refused requests, in every month.
    #[test]
    fn the_json_time_is_rfc_3339() {
        for (imf, want) in [
            (
                &b"Sun, 06 Nov 1994 08:49:37 GMT"[..],
                "1994-11-06T08:49:37.000+00:00",
            ),
            (
                b"Thu, 01 Jan 2026 00:00:00 GMT",
                "2026-01-01T00:00:00.000+00:00",
            ),
            (
                b"Thu, 31 Dec 2026 23:59:59 GMT",
                "2026-12-31T23:59:59.000+00:00",
            ),
        ] {
            let (mut b, rx) = buffer(LogFormat::Json);
            b.set_time(imf);
            b.push(Some(0), &PLAIN);
            b.push_refusal(
                0,
                &RefusedEntry {
                    peer: None,
                    line: b"",
                    status: 408,
                    bytes: 0,
                    tls: false,
                    server_name: "",
                },
            );
            let lines = batch(b, &rx);
            for line in lines.lines() {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                assert_eq!(v["time"], want, "{line}");
            }
            assert_eq!(lines.lines().count(), 2);
        }
    }

    /// `$host`, `$scheme`, `$http_NAME` and `$upstream_status` were once unknown
    /// fields. `$host` is nginx's: the target's or Host's name without port, lowercase, else
    /// the site's name; `$http_NAME` any request field (`_` for `-`, any case). An answer
    /// given later (deferred, proxied) writes the same line from what it kept.
    #[test]
    fn a_template_writes_host_scheme_request_fields_and_the_upstream_status() {
        const TEMPLATE: &str = "$scheme://$host $http_x_request_id $http_X_REQUEST_ID $http_accept $http_missing $upstream_status $upstream_response_time";
        for (req, tls, proxied, want) in [
            (
                &b"GET /api HTTP/1.1\r\nHost: API.Example.COM:8443\r\nX-Request-ID: a\"1\r\nAccept: */*\r\n\r\n"[..],
                true,
                true,
                r#"https://api.example.com a\x221 a\x221 */* - 504 0.041"#,
            ),
            // The absolute-form target's host wins over Host (RFC 9112 §3.2.2).
            (
                b"GET http://Abs.Test:81/x HTTP/1.1\r\nHost: other.test\r\n\r\n",
                false,
                false,
                "http://abs.test - - - - - -",
            ),
            // No host named: the site's name.
            (
                b"GET / HTTP/1.0\r\n\r\n",
                false,
                false,
                "http://site.test - - - - - -",
            ),
        ] {
            let mut head = RequestHead::new();
            head.parse(req, &Default::default()).unwrap();
            let upstream = proxied.then_some(UpstreamEntry {
                addr: &UP,
                status: 504,
                time_us: 41_000,
            });
            let now = AccessEntry {
                tls,
                host: crate::app::sites::request_host_bytes(&head, req),
                server_name: "site.test",
                fields: Fields::Head(&head, req),
                upstream,
                ..PLAIN
            };
            assert_eq!(template_line(TEMPLATE, &now, true), format!("{want}\n"));
            // Kept for later, by the buffer that writes it.
            let (mut b, rx) = buffer(LogFormat::parse(TEMPLATE).unwrap());
            let meta = crate::app::deferred::LogMeta::keep(&b, None, tls, &head, req, &Default::default());
            b.push(Some(0), &meta.entry(200, 0, 1, "site.test", upstream));
            assert_eq!(batch(b, &rx), format!("{want}\n"));
        }
        // A refused request: its connection's scheme, the default site's name.
        let (mut b, rx) = buffer(LogFormat::parse(TEMPLATE).unwrap());
        b.push_refusal(
            0,
            &RefusedEntry {
                peer: None,
                line: b"GET / HTTP/1.1",
                status: 400,
                bytes: 0,
                tls: true,
                server_name: "",
            },
        );
        assert_eq!(batch(b, &rx), "https://- - - - - - -\n");
        // HTTP/3 is https, on a connection not marked as TLS.
        let h3 = AccessEntry {
            version: Version::Http3,
            ..PLAIN
        };
        assert_eq!(template_line("$scheme", &h3, false), "https\n");
    }

    /// The JSON log's time to the millisecond, across days, months, leap days and
    /// years.
    #[test]
    fn iso8601_ms_table() {
        use std::time::{Duration, UNIX_EPOCH};
        for (secs, ms, want) in [
            (0, 0, "1970-01-01T00:00:00.000+00:00"),
            (784_111_777, 5, "1994-11-06T08:49:37.005+00:00"),
            (951_782_400, 999, "2000-02-29T00:00:00.999+00:00"),
            (1_798_761_599, 120, "2026-12-31T23:59:59.120+00:00"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000+00:00"),
        ] {
            let t = UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(ms);
            assert_eq!(iso8601_ms(t), want);
        }
    }

    /// The JSON line's request id, trace id and host.
    #[test]
    fn the_json_line_has_the_request_and_trace_ids() {
        let (mut b, rx) = buffer(LogFormat::Json);
        let mut ids = crate::trace::context::Ids::new();
        let req = b"GET / HTTP/1.1\r\nHost: Shop.Example\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\r\n";
        let mut head = RequestHead::new();
        head.parse(req, &Default::default()).unwrap();
        let sampler = crate::trace::Sampler::parse(None, None).unwrap();
        let mut traced = crate::trace::RequestTrace::default();
        traced.begin(&mut ids, &head, req, false, Some(&sampler));
        let mut plain = crate::trace::RequestTrace::default();
        plain.begin(&mut ids, &head, req, false, None);
        b.push(
            Some(0),
            &AccessEntry {
                host: Some(b"Shop.Example"),
                trace: Some(&traced),
                ..PLAIN
            },
        );
        b.push(
            Some(0),
            &AccessEntry {
                trace: Some(&plain),
                server_name: "site.test",
                ..PLAIN
            },
        );
        let lines = batch(b, &rx);
        let v: Vec<serde_json::Value> = lines
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(v[0]["host"], "shop.example");
        assert_eq!(v[0]["request_id"], traced.request_id.to_text());
        assert_eq!(v[0]["request_id"].as_str().unwrap().len(), 32);
        assert_eq!(v[0]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(v[1]["host"], "site.test");
        assert_ne!(v[1]["request_id"], v[0]["request_id"]);
        assert!(v[1].get("trace_id").is_none());
        // The template's `$request_id` and `$trace_id`; `-` where none.
        let (mut b, rx) = buffer(LogFormat::parse("$request_id $trace_id").unwrap());
        b.push(
            Some(0),
            &AccessEntry {
                trace: Some(&traced),
                ..PLAIN
            },
        );
        b.push(
            Some(0),
            &AccessEntry {
                trace: Some(&plain),
                ..PLAIN
            },
        );
        b.push(Some(0), &PLAIN);
        let lines = batch(b, &rx);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{} 4bf92f3577b34da6a3ce929d0e0e4736",
                traced.request_id.to_text()
            )
        );
        assert_eq!(lines[1], format!("{} -", plain.request_id.to_text()));
        assert_eq!(lines[2], "- -");
    }

    /// A buffer keeps, for an answer given later, only what its templates write.
    #[test]
    fn only_the_fields_a_template_writes_are_kept() {
        let req = b"GET / HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\nX-B: 2\r\n\r\n";
        let mut head = RequestHead::new();
        head.parse(req, &Default::default()).unwrap();
        for (format, host, fields) in [
            (LogFormat::Combined, None, vec![]),
            // The JSON line writes `host`.
            (LogFormat::Json, Some(&b"a.test"[..]), vec![]),
            (
                LogFormat::parse("$host $http_x_b $http_x_B $http_x_c").unwrap(),
                Some(&b"a.test"[..]),
                vec![Some(&b"2"[..]), None],
            ),
        ] {
            let (b, _rx) = buffer(format);
            let meta = crate::app::deferred::LogMeta::keep(
                &b,
                None,
                false,
                &head,
                req,
                &Default::default(),
            );
            assert_eq!(meta.host(), host);
            let kept: Vec<Option<&[u8]>> = meta.fields.iter().map(|f| f.as_deref()).collect();
            assert_eq!(kept, fields);
        }
    }

    /// A query may hold `\` now (browsers send it raw): written as nginx writes it, `\x5C`,
    /// so no target can forge an escape (`\x22`, a quote) for whoever decodes the log.
    #[test]
    fn a_backslash_in_a_served_target_is_escaped() {
        let (mut b, rx) = buffer(LogFormat::Combined);
        b.push(
            Some(0),
            &AccessEntry {
                peer: None,
                method: "GET",
                target: "/?a=\\x22",
                version: Version::Http11,
                status: 200,
                bytes: 1,
                referer: None,
                user_agent: None,
                request_time_us: None,
                ..PLAIN
            },
        );
        b.hand_off();
        let LogMsg::Lines(batch) = rx.recv().unwrap() else {
            panic!("a batch")
        };
        assert!(batch.contains("\"GET /?a=\\x5Cx22 HTTP/1.1\""), "{batch}");
    }

    /// A gRPC call's `grpc-status` in JSON (only for gRPC answers, a number) and
    /// as `$grpc_status` (`-` when there is none).
    #[test]
    fn a_grpc_call_logs_its_grpc_status() {
        let call = AccessEntry {
            method: "POST",
            target: "/test.Sum/Fail",
            grpc_status: Some("5"),
            ..PLAIN
        };
        let (mut b, rx) = buffer(LogFormat::Json);
        b.push(Some(0), &call);
        b.push(Some(0), &PLAIN);
        let lines = batch(b, &rx);
        let mut lines = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
        assert_eq!(lines.next().unwrap()["grpc_status"], 5);
        assert!(
            lines.next().unwrap().get("grpc_status").is_none(),
            "not a gRPC call"
        );
        let t = "$request_uri $status $grpc_status";
        assert_eq!(template_line(t, &call, false), "/test.Sum/Fail 200 5\n");
        assert_eq!(template_line(t, &PLAIN, false), "/ 200 -\n");
    }

    /// What the cache did, as nginx's `$upstream_cache_status` (`-` where no
    /// cache handled the request) and the JSON log's `cache_status` (absent then).
    #[test]
    fn a_cached_request_logs_what_the_cache_did() {
        let hit = AccessEntry {
            cache_status: Some(CacheOutcome::Hit),
            ..PLAIN
        };
        let revalidated = AccessEntry {
            cache_status: Some(CacheOutcome::Revalidated),
            ..PLAIN
        };
        let (mut b, rx) = buffer(LogFormat::Json);
        b.push(Some(0), &hit);
        b.push(Some(0), &PLAIN);
        let lines = batch(b, &rx);
        let mut lines = lines
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap());
        assert_eq!(lines.next().unwrap()["cache_status"], "HIT");
        assert!(lines.next().unwrap().get("cache_status").is_none());
        let t = "$status $upstream_cache_status";
        assert_eq!(template_line(t, &hit, false), "200 HIT\n");
        assert_eq!(template_line(t, &revalidated, false), "200 REVALIDATED\n");
        assert_eq!(template_line(t, &PLAIN, false), "200 -\n");
    }
}
