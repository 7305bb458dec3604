//! The exporter: one thread that takes the workers' span batches and posts them to the
//! collector as OTLP/HTTP protobuf (`POST /v1/traces`), every schedule delay or once a full
//! export's worth waits, over one kept-alive connection. Off the request path: workers hand
//! batches over a bounded channel and never wait; what does not fit (the channel full, the
//! queue past its size while the collector is slow or down) is dropped and counted.
//!
//! Owns the connection, the queue and the counts (`linerate_tracing_*` on /metrics).
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use super::config::TracingConfig;
use super::otlp;

/// Batches in flight from the workers before a worker's hand-off drops its batch.
const CHANNEL_BATCHES: usize = 256;
/// Most bytes of a collector's answer read (its body is an `ExportTraceServiceResponse`,
/// usually empty).
const MAX_ANSWER: usize = 64 * 1024;

/// A worker's spans, encoded, on their way.
pub(crate) struct Batch {
    /// `ScopeSpans.spans` entries, one after another.
    pub bytes: Vec<u8>,
    pub spans: usize,
}

/// What the exporter's channel carries.
enum Msg {
    Spans(Batch),
    /// The server is stopping: export what is queued and end (a handler's span may still
    /// hold a handle, so the channel's closing cannot be waited for).
    End,
}

/// What the exporter has done (shared with /metrics).
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans the collector took (a 2xx).
    pub exported: AtomicU64,
    /// Spans dropped: a worker's hand-off found the channel full, the queue was past its
    /// size, or an export failed (each such span counted once).
    pub dropped: AtomicU64,
    /// Exports that failed (no connection, a timeout, a status other than 2xx).
    pub failures: AtomicU64,
}

impl TraceStats {
    /// The `linerate_tracing_*` series (Prometheus text).
    pub fn render(&self) -> String {
        let mut o = String::new();
        for (name, help, v) in [
            (
                "linerate_tracing_spans_exported_total",
                "Spans the OpenTelemetry collector accepted.",
                &self.exported,
            ),
            (
                "linerate_tracing_spans_dropped_total",
                "Spans dropped: the exporter's queue was full (the collector slow or down) or their export failed.",
                &self.dropped,
            ),
            (
                "linerate_tracing_export_failures_total",
                "Exports to the collector that failed (no connection, a timeout, a status other than 2xx).",
                &self.failures,
            ),
        ] {
            o.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                v.load(Ordering::Relaxed)
            ));
        }
        o
    }
}

/// The workers' end: a sender and the counts.
#[derive(Clone)]
pub(crate) struct Handle {
    tx: SyncSender<Msg>,
    pub stats: Arc<TraceStats>,
}

impl Handle {
    /// Hands `batch` over without waiting; counts it dropped when it cannot go.
    pub(crate) fn send(&self, batch: Batch) {
        let n = batch.spans as u64;
        match self.tx.try_send(Msg::Spans(batch)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.stats.dropped.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Tells the exporter to send what it holds and end (after every batch sent before).
    pub(crate) fn end(&self) {
        let _ = self.tx.send(Msg::End);
    }
}

/// A handle whose batches land in the returned receiver (tests).
#[cfg(test)]
pub(crate) fn test_handle() -> (Handle, std::sync::mpsc::Receiver<Batch>) {
    let (tx, rx) = sync_channel(16);
    let (out, batches) = sync_channel(16);
    std::thread::spawn(move || {
        while let Ok(Msg::Spans(b)) = rx.recv() {
            if out.send(b).is_err() {
                return;
            }
        }
    });
    (
        Handle {
            tx,
            stats: Arc::default(),
        },
        batches,
    )
}

/// Starts the exporter thread for `config`; it ends when every handle is gone, after a last
/// export of what it holds.
pub(crate) fn start(
    config: &TracingConfig,
    stats: Arc<TraceStats>,
) -> std::io::Result<(Handle, std::thread::JoinHandle<()>)> {
    let (tx, rx) = sync_channel(CHANNEL_BATCHES);
    let exporter = Exporter::new(config, stats.clone());
    let thread = std::thread::Builder::new()
        .name("linerate-otlp".into())
        .spawn(move || exporter.run(rx))?;
    Ok((Handle { tx, stats }, thread))
}

struct Exporter {
    config: TracingConfig,
    stats: Arc<TraceStats>,
    /// `Resource` and `InstrumentationScope`, encoded once.
    resource: Vec<u8>,
    scope: Vec<u8>,
    /// The request head up to `Content-Length: ` (the length and the body follow).
    head: Vec<u8>,
    /// Spans waiting: entries and their count.
    queue: Vec<u8>,
    queued: usize,
    conn: Option<TcpStream>,
    body: Vec<u8>,
}

impl Exporter {
    fn new(config: &TracingConfig, stats: Arc<TraceStats>) -> Exporter {
        let mut attrs: Vec<(&str, &str)> = vec![
            ("service.name", config.service_name.as_str()),
            ("telemetry.sdk.name", "linerate"),
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ];
        attrs.extend(
            config
                .resource
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: linerate/{}\r\nContent-Type: application/x-protobuf\r\n",
            config.endpoint.path,
            config.endpoint.authority(),
            env!("CARGO_PKG_VERSION")
        );
        for (n, v) in &config.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("Content-Length: ");
        Exporter {
            resource: otlp::resource(&attrs),
            scope: otlp::scope("linerate", env!("CARGO_PKG_VERSION")),
            head: head.into_bytes(),
            config: config.clone(),
            stats,
            queue: Vec::new(),
            queued: 0,
            conn: None,
            body: Vec::new(),
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        let delay = self.config.schedule_delay.max(Duration::from_millis(1));
        let mut due = Instant::now() + delay;
        loop {
            let wait = due.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(Msg::End) => {
                    self.export();
                    return;
                }
                Ok(Msg::Spans(batch)) => {
                    self.take(batch);
                    if self.queued >= self.config.max_export_batch {
                        self.export();
                        due = Instant::now() + delay;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.export();
                    due = Instant::now() + delay;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.export();
                    return;
                }
            }
        }
    }

    /// Queues `batch`, or drops it when the queue is full.
    fn take(&mut self, batch: Batch) {
        if self.queued + batch.spans > self.config.max_queue_spans {
            self.stats
                .dropped
                .fetch_add(batch.spans as u64, Ordering::Relaxed);
            return;
        }
        self.queue.extend_from_slice(&batch.bytes);
        self.queued += batch.spans;
    }

    /// Posts what is queued (one request; a queue bigger than an export's worth goes whole:
    /// it is bounded by the queue's size). A failure drops it, counted.
    fn export(&mut self) {
        if self.queued == 0 {
            return;
        }
        let spans = std::mem::take(&mut self.queued) as u64;
        otlp::export_prefix(
            &mut self.body,
            &self.resource,
            &self.scope,
            self.queue.len(),
        );
        // A kept connection the collector closed meanwhile fails at once: one more try on a
        // new one.
        let sent = match self.post() {
            Ok(status) => Ok(status),
            Err(_) if self.conn.is_none() => self.post(),
            Err(e) => Err(e),
        };
        self.queue.clear();
        match sent {
            Ok(200..=299) => {
                self.stats.exported.fetch_add(spans, Ordering::Relaxed);
            }
            other => {
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                self.stats.dropped.fetch_add(spans, Ordering::Relaxed);
                let why = match other {
                    Ok(s) => format!("status {s}"),
                    Err(e) => e.to_string(),
                };
                crate::log_limit::warn_limited!(
                    "tracing export failed",
                    "",
                    endpoint = %self.config.endpoint.authority(),
                    error = %why,
                    spans,
                    "tracing: export failed; its spans are dropped"
                );
            }
        }
    }

    /// One POST of `self.body` (the request's envelope) and `self.queue` (its spans, written
    /// from where they wait) on the kept connection (or a new one); the answer's status.
    /// The connection is kept only after a whole answer with a length.
    fn post(&mut self) -> std::io::Result<u16> {
        let reused = self.conn.is_some();
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => self.connect()?,
        };
        let mut req = self.head.clone();
        let len = self.body.len() + self.queue.len();
        req.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        req.extend_from_slice(b"\r\n\r\n");
        req.extend_from_slice(&self.body);
        let answer = conn
            .write_all(&req)
            .and_then(|()| conn.write_all(&self.queue))
            .and_then(|()| read_answer(&mut conn));
        match answer {
            Ok((status, keep)) => {
                if keep {
                    self.conn = Some(conn);
                }
                Ok(status)
            }
            // A reused connection that failed: the caller tries once more on a new one.
            Err(e) if reused => {
                self.conn = None;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let ep = &self.config.endpoint;
        let timeout = self.config.timeout.max(Duration::from_millis(1));
        let mut last = None;
        for addr in (ep.host.as_str(), ep.port).to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, timeout) {
                Ok(s) => {
                    s.set_read_timeout(Some(timeout))?;
                    s.set_write_timeout(Some(timeout))?;
                    s.set_nodelay(true)?;
                    return Ok(s);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("the endpoint's host has no address")))
    }
}

/// Reads an HTTP/1.1 answer's head and its `Content-Length` body: its status, and whether
/// the connection may carry the next request.
fn read_answer(conn: &mut TcpStream) -> std::io::Result<(u16, bool)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the collector closed the connection",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut fields = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut fields);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(head_len)) => {
                let status = resp.code.unwrap_or(0);
                let field = |name: &str| {
                    resp.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .map(|h| h.value)
                };
                let close = field("connection").is_some_and(|v| v.eq_ignore_ascii_case(b"close"));
                let Some(len) = field("content-length")
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.trim().parse::<usize>().ok())
                else {
                    // No length (chunked, or to the close): not kept.
                    return Ok((status, false));
                };
                if len > MAX_ANSWER {
                    return Ok((status, false));
                }
                let mut have = buf.len() - head_len;
                while have < len {
                    let n = conn.read(&mut chunk)?;
                    if n == 0 {
                        return Ok((status, false));
                    }
                    have += n;
                }
                return Ok((status, !close && have == len));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_ANSWER => continue,
            _ => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "the collector's answer is not HTTP/1.1",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn config(port: u16) -> TracingConfig {
        crate::trace::config::TracingSettings {
            endpoint: Some(format!("http://127.0.0.1:{port}")),
            schedule_delay: Some("10".into()),
            max_queue_size: Some("4".into()),
            ..Default::default()
        }
        .build()
        .unwrap()
        .unwrap()
    }

    fn batch(spans: usize) -> Batch {
        Batch {
            bytes: [0x12, 0x00].repeat(spans),
            spans,
        }
    }

    /// A collector that answers every request 200 and keeps what it was sent.
    #[test]
    fn posts_protobuf_and_counts() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stats = Arc::new(TraceStats::default());
        let (handle, _thread) = start(&config(port), stats.clone()).unwrap();
        handle.send(batch(3));
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = c.read(&mut chunk).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&chunk[..n]);
        }
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("POST /v1/traces HTTP/1.1\r\n"), "{text}");
        assert!(
            text.contains("Content-Type: application/x-protobuf\r\n"),
            "{text}"
        );
        c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .unwrap();
        drop(handle);
        // The exporter ends once the last handle is gone; the count is then final.
        for _ in 0..200 {
            if stats.exported.load(Ordering::Relaxed) == 3 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stats.exported.load(Ordering::Relaxed), 3);
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 0);
    }

    /// Nobody listening: the export fails, its spans are counted dropped, nothing waits.
    #[test]
    fn collector_down_drops_and_counts() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let stats = Arc::new(TraceStats::default());
        let (handle, _thread) = start(&config(port), stats.clone()).unwrap();
        handle.send(batch(2));
        // Past the queue's size (4): dropped on arrival.
        handle.send(batch(2));
        handle.send(batch(3));
        drop(handle);
        for _ in 0..500 {
            if stats.dropped.load(Ordering::Relaxed) == 7 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 7);
        assert!(stats.failures.load(Ordering::Relaxed) >= 1);
        assert_eq!(stats.exported.load(Ordering::Relaxed), 0);
    }
}
