//! The access log: nginx `combined` lines, formatted on the worker, written by a logger
//! thread so a slow disk or pipe never blocks a worker.
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
}

/// A worker's side of the log.
pub(crate) struct LogBuffer {
    lines: String,
    tx: SyncSender<String>,
    dropped: u64,
    /// `[10/Oct/2000:13:55:36 +0000]`, refreshed with the Date cache.
    time_local: String,
}

impl LogBuffer {
    pub(crate) fn push(&mut self, e: &AccessEntry<'_>) {
        let ip = e
            .peer
            .map(|p| p.ip().to_string())
            .unwrap_or_else(|| "-".into());
        let version = match e.version {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        };
        let _ = write!(self.lines, "{ip} - - [{}] \"", self.time_local);
        if e.method == "-" {
            self.lines.push('-');
        } else {
            let _ = write!(self.lines, "{} {} {version}", e.method, e.target);
        }
        let _ = write!(self.lines, "\" {} {} \"", e.status, e.bytes);
        escape_into(&mut self.lines, e.referer);
        self.lines.push_str("\" \"");
        escape_into(&mut self.lines, e.user_agent);
        self.lines.push_str("\"\n");
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
        match self.tx.try_send(batch) {
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

    /// Sets the `$time_local` text from an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
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
        }
    }
}

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
pub(crate) struct Logger {
    tx: SyncSender<String>,
}

impl Logger {
    /// Opens the target and starts the writer thread.
    pub(crate) fn start(target: &LogTarget) -> std::io::Result<Logger> {
        let mut sink: Box<dyn std::io::Write + Send> = match target {
            LogTarget::Stdout => Box::new(std::io::stdout()),
            LogTarget::File(p) => Box::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            ),
        };
        let (tx, rx): (SyncSender<String>, Receiver<String>) = sync_channel(CHANNEL_BATCHES);
        std::thread::Builder::new()
            .name("linerate-log".into())
            .spawn(move || {
                for batch in rx {
                    if sink
                        .write_all(batch.as_bytes())
                        .and_then(|_| sink.flush())
                        .is_err()
                    {
                        tracing::error!("access log write failed");
                    }
                }
            })?;
        Ok(Logger { tx })
    }

    /// A buffer for one worker.
    pub(crate) fn buffer(&self) -> LogBuffer {
        LogBuffer {
            lines: String::new(),
            tx: self.tx.clone(),
            dropped: 0,
            time_local: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_format_line() {
        let (tx, rx) = sync_channel(4);
        let mut b = LogBuffer {
            lines: String::new(),
            tx,
            dropped: 0,
            time_local: String::new(),
        };
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
        });
        b.hand_off();
        assert_eq!(
            rx.recv().unwrap(),
            "127.0.0.1 - - [06/Nov/1994:08:49:37 +0000] \"GET /json HTTP/1.1\" 200 27 \"-\" \"curl/8 \\x22x\\x22\"\n"
        );
    }
}
