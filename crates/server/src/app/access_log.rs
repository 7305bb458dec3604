//! The access log: nginx `combined` lines followed by the request time in microseconds, one
//! JSON object per line, or a template of nginx-named `$fields` (`template.rs`); formatted on
//! the worker, written by a logger thread so a slow
//! disk or pipe never blocks a worker; reopened on request (SIGUSR1, after logrotate renamed
//! the file).
//!
//! Owns formatting and hand-off. Each worker appends lines to its own buffer and hands the
//! whole buffer over a bounded channel once per event-loop turn; if the logger falls behind,
//! batches are dropped and counted rather than blocking the worker. Off by default.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};

use linerate_http1::Version;

mod template;

use template::Entry;
pub use template::{Template, TemplateError};

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
    /// One JSON object per line: `{"time":"…","remote_addr":"127.0.0.1","method":"GET",
    /// "target":"/","version":"HTTP/1.1","status":200,"bytes":13,"referer":null,
    /// "user_agent":"curl/8","request_time_us":57}`.
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

/// How long a stopping server waits for its last log lines to be written.
const FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// A proxied request's upstream server and the time from sending it there to its
    /// answer (µs): appended to a combined line, `upstream_addr` and `upstream_time_us` in
    /// JSON (nginx's `$upstream_addr`, `$upstream_response_time`).
    pub upstream: Option<(&'a str, u64)>,
}

/// A worker's side of the log.
pub(crate) struct LogBuffer {
    lines: String,
    tx: SyncSender<LogMsg>,
    dropped: u64,
    format: LogFormat,
    /// `[10/Oct/2000:13:55:36 +0000]`, refreshed with the Date cache.
    time_local: String,
    /// `2000-10-10T13:55:36+00:00`, refreshed with it for a template that names it.
    time_iso8601: String,
}

impl LogBuffer {
    pub(crate) fn push(&mut self, e: &AccessEntry<'_>) {
        let version = protocol(e.version);
        match self.format {
            LogFormat::Combined => {
                let ip = e
                    .peer
                    .map(|p| p.ip().to_string())
                    .unwrap_or_else(|| "-".into());
                // The request line escaped as nginx escapes it: a target may hold `\` (in a
                // query), which a log reader would take for the start of an escape.
                let _ = write!(self.lines, "{ip} - - [{}] \"", self.time_local);
                escape_into(&mut self.lines, Some(e.method.as_bytes()));
                self.lines.push(' ');
                escape_into(&mut self.lines, Some(e.target.as_bytes()));
                let _ = write!(self.lines, " {version}\" {} {} \"", e.status, e.bytes);
                escape_into(&mut self.lines, e.referer);
                self.lines.push_str("\" \"");
                escape_into(&mut self.lines, e.user_agent);
                self.lines.push('"');
                match e.request_time_us {
                    Some(us) => {
                        let _ = write!(self.lines, " {us}");
                    }
                    None => self.lines.push_str(" -"),
                }
                if let Some((addr, us)) = e.upstream {
                    let _ = write!(self.lines, " {addr} {us}");
                }
                self.lines.push('\n');
            }
            LogFormat::Json => {
                let text = |v: Option<&[u8]>| v.map(|b| String::from_utf8_lossy(b).into_owned());
                let mut line = serde_json::json!({
                    "time": self.time_local,
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
                if let (Some((addr, us)), Some(o)) = (e.upstream, line.as_object_mut()) {
                    o.insert("upstream_addr".into(), addr.into());
                    o.insert("upstream_time_us".into(), us.into());
                }
                let _ = writeln!(self.lines, "{line}");
            }
            LogFormat::Template(ref t) => t.write(
                &mut self.lines,
                &Entry::Served(e),
                &self.time_local,
                &self.time_iso8601,
            ),
        }
        if self.lines.len() >= BATCH_BYTES {
            self.hand_off();
        }
    }

    /// A request the connection refused on its own (malformed, a limit, a timeout): its
    /// line as it arrived, escaped (nginx's `$request` is the line as sent), or `-`; in JSON
    /// (and a template's `$request_method`, `$request_uri`), the line's first two words as
    /// method and target; a template's other request fields are `-`.
    pub(crate) fn push_refusal(
        &mut self,
        peer: Option<SocketAddr>,
        request_line: &[u8],
        status: u16,
        bytes: usize,
    ) {
        let ip = peer
            .map(|p| p.ip().to_string())
            .unwrap_or_else(|| "-".into());
        let line = (!request_line.is_empty()).then_some(request_line);
        match self.format {
            LogFormat::Combined => {
                let _ = write!(self.lines, "{ip} - - [{}] \"", self.time_local);
                escape_into(&mut self.lines, line);
                let _ = writeln!(self.lines, "\" {status} {bytes} \"-\" \"-\" -");
            }
            LogFormat::Json => {
                // As for a served request: the text as sent (JSON escapes what it must).
                let text = |w: Option<&[u8]>| w.map(|w| String::from_utf8_lossy(w).into_owned());
                let method = text(word(request_line, 0));
                let target = text(word(request_line, 1));
                let line = serde_json::json!({
                    "time": self.time_local,
                    "remote_addr": peer.map(|p| p.ip().to_string()),
                    "method": method,
                    "target": target,
                    "version": serde_json::Value::Null,
                    "status": status,
                    "bytes": bytes,
                    "referer": serde_json::Value::Null,
                    "user_agent": serde_json::Value::Null,
                    "request_time_us": serde_json::Value::Null,
                });
                let _ = writeln!(self.lines, "{line}");
            }
            LogFormat::Template(ref t) => t.write(
                &mut self.lines,
                &Entry::Refused {
                    peer,
                    line: request_line,
                    status,
                    bytes,
                },
                &self.time_local,
                &self.time_iso8601,
            ),
        }
        if self.lines.len() >= BATCH_BYTES {
            self.hand_off();
        }
    }

    /// Sends the batch to the logger without blocking.
    pub(crate) fn hand_off(&mut self) {
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

    /// Sets the `$time_local` text (and `$time_iso8601` for a template that names it) from
    /// an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
    pub(crate) fn set_time(&mut self, imf: &[u8]) {
        let s = std::str::from_utf8(imf).unwrap_or("");
        if s.len() == 29 {
            self.time_local = format!(
                "{}/{}/{}:{} +0000",
                &s[5..7],
                &s[8..11],
                &s[12..16],
                &s[17..25]
            );
            if let LogFormat::Template(t) = &self.format
                && t.uses_iso8601()
                && let Some(m) = MONTHS.iter().position(|&m| m == &s[8..11])
            {
                self.time_iso8601 = format!(
                    "{}-{:02}-{}T{}+00:00",
                    &s[12..16],
                    m + 1,
                    &s[5..7],
                    &s[17..25]
                );
            }
        }
    }
}

/// The protocol as a request line names it (`$server_protocol`).
fn protocol(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
        Version::Http2 => "HTTP/2.0",
        Version::Http3 => "HTTP/3.0",
    }
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
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(b as char);
        }
    }
}

/// The logger: one thread that writes batches to the target.
#[derive(Clone)]
pub(crate) struct Logger {
    tx: SyncSender<LogMsg>,
    format: LogFormat,
    target: LogTarget,
}

impl Logger {
    /// Opens the target (an error names the path) and starts the writer thread.
    pub(crate) fn start(target: &LogTarget, format: LogFormat) -> std::io::Result<Logger> {
        let mut sink = open(target)?;
        let path = target.clone();
        let (tx, rx): (SyncSender<LogMsg>, Receiver<LogMsg>) = sync_channel(CHANNEL_BATCHES);
        std::thread::Builder::new()
            .name("linerate-log".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        LogMsg::Lines(batch) => {
                            if let Err(e) =
                                sink.write_all(batch.as_bytes()).and_then(|_| sink.flush())
                            {
                                tracing::error!(error = %e, "access log write failed");
                            }
                        }
                        LogMsg::Flush(done) => {
                            let _ = done.send(());
                        }
                        LogMsg::Reopen => match open(&path) {
                            Ok(s) => {
                                sink = s;
                                tracing::info!("access log reopened");
                            }
                            Err(e) => tracing::error!(
                                error = %e,
                                "access log not reopened; still writing to the old file"
                            ),
                        },
                    }
                }
            })?;
        Ok(Logger {
            tx,
            format,
            target: target.clone(),
        })
    }

    /// The file it writes, if it writes one.
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        match &self.target {
            LogTarget::File(p) => Some(p),
            LogTarget::Stdout => None,
        }
    }

    /// Asks the writer to reopen the file once the batches before this call are written.
    pub(crate) fn reopen(&self) {
        let _ = self.tx.send(LogMsg::Reopen);
    }

    /// Waits (at most `FLUSH_WAIT`) until the batches sent before this call are written.
    pub(crate) fn flush(&self) {
        let (done, wait) = sync_channel(1);
        if self.tx.send(LogMsg::Flush(done)).is_ok() && wait.recv_timeout(FLUSH_WAIT).is_err() {
            tracing::warn!("access log: the last lines were not written in time");
        }
    }

    /// A buffer for one worker.
    pub(crate) fn buffer(&self) -> LogBuffer {
        LogBuffer {
            lines: String::new(),
            tx: self.tx.clone(),
            dropped: 0,
            format: self.format.clone(),
            time_local: String::new(),
            time_iso8601: String::new(),
        }
    }
}

/// Opens a log target for appending; the error names the path.
fn open(target: &LogTarget) -> std::io::Result<Box<dyn std::io::Write + Send>> {
    Ok(match target {
        LogTarget::Stdout => Box::new(std::io::stdout()),
        // Through the privilege keeper: after a drop to another user, SIGUSR1 still reopens a
        // log in root's directory.
        LogTarget::File(p) => Box::new(crate::privsep::open_append(p).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot open access log {}: {e}", p.display()),
            )
        })?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's buffer writing `format`, and the logger's end of its channel.
    fn buffer(format: LogFormat) -> (LogBuffer, Receiver<LogMsg>) {
        let (tx, rx) = sync_channel(4);
        let b = LogBuffer {
            lines: String::new(),
            tx,
            dropped: 0,
            format,
            time_local: String::new(),
            time_iso8601: String::new(),
        };
        (b, rx)
    }

    #[test]
    fn combined_format_line() {
        let (mut b, rx) = buffer(LogFormat::Combined);
        b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
        b.push(&AccessEntry {
            peer: Some("127.0.0.1:5000".parse().unwrap()),
            method: "GET",
            target: "/json",
            version: Version::Http11,
            status: 200,
            bytes: 27,
            referer: None,
            user_agent: Some(b"curl/8 \"x\""),
            request_time_us: Some(57),
            upstream: None,
        });
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
                "{\"bytes\":2,\"method\":\"GET\",\"referer\":null,\"remote_addr\":\"127.0.0.1\",\"request_time_us\":57,\"status\":200,\"target\":\"/api\",\"time\":\"06/Nov/1994:08:49:37 +0000\",\"upstream_addr\":\"10.0.0.2:9000\",\"upstream_time_us\":41,\"user_agent\":null,\"version\":\"HTTP/1.1\"}\n",
            ),
        ] {
            let (mut b, rx) = buffer(format);
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
            b.push(&AccessEntry {
                peer: Some("127.0.0.1:5000".parse().unwrap()),
                method: "GET",
                target: "/api",
                version: Version::Http11,
                status: 200,
                bytes: 2,
                referer: None,
                user_agent: None,
                request_time_us: Some(57),
                upstream: Some(("10.0.0.2:9000", 41)),
            });
            b.hand_off();
            let LogMsg::Lines(batch) = rx.recv().unwrap() else {
                panic!("a batch")
            };
            assert_eq!(batch, want);
        }
    }
    /// Issue 24: a refused request's access line had `"-"` for its request, so an operator
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
                r#"{"bytes":11,"method":"GET","referer":null,"remote_addr":"127.0.0.1","request_time_us":null,"status":400,"target":"/a\"b","time":"06/Nov/1994:08:49:37 +0000","user_agent":null,"version":null}"#,
            ),
        ] {
            let (mut b, rx) = buffer(format);
            b.set_time(b"Sun, 06 Nov 1994 08:49:37 GMT");
            let status = if line.is_empty() { 408 } else { 400 };
            b.push_refusal(Some("127.0.0.1:5000".parse().unwrap()), line, status, 11);
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
            upstream: Some(("10.0.0.2:9000", 41_000)),
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
        b.push(e);
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
            b.push_refusal(Some("127.0.0.1:5000".parse().unwrap()), line, status, 11);
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

    /// A query may hold `\` now (browsers send it raw): written as nginx writes it, `\x5C`,
    /// so no target can forge an escape (`\x22`, a quote) for whoever decodes the log.
    #[test]
    fn a_backslash_in_a_served_target_is_escaped() {
        let (mut b, rx) = buffer(LogFormat::Combined);
        b.push(&AccessEntry {
            peer: None,
            method: "GET",
            target: "/?a=\\x22",
            version: Version::Http11,
            status: 200,
            bytes: 1,
            referer: None,
            user_agent: None,
            request_time_us: None,
            upstream: None,
        });
        b.hand_off();
        let LogMsg::Lines(batch) = rx.recv().unwrap() else {
            panic!("a batch")
        };
        assert!(batch.contains("\"GET /?a=\\x5Cx22 HTTP/1.1\""), "{batch}");
    }
}
