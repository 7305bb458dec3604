//! The firstflight report: the initial-window arithmetic (RFC 6928), the serializable
//! report, and its text rendering.
//!
//! Segments are `ceil(bytes / mss)`: the MSS is TCP payload, so IP and TCP headers are not
//! counted against it. Rendering never computes; every number printed is a report field.

use std::fmt::Write as _;

use serde::Serialize;

/// How a response (or a whole first view) fares against an initial congestion window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// Payload bytes per segment assumed.
    pub mss: u32,
    /// Initial congestion window in segments.
    pub initcwnd: u32,
    /// `mss × initcwnd`: what the first flight can carry.
    pub window_bytes: u64,
    /// Bytes on the wire being judged.
    pub bytes: u64,
    /// `ceil(bytes / mss)`.
    pub segments: u64,
    /// `bytes <= window_bytes`: all of it can arrive in the first round trip.
    pub fits: bool,
    /// `window_bytes - bytes` when it fits, else 0.
    pub spare_bytes: u64,
    /// `bytes - window_bytes` when it misses, else 0.
    pub over_bytes: u64,
    /// Round trips of slow start (the window doubling each one, no loss) to send it all.
    pub round_trips: u32,
}

impl Verdict {
    /// Judges `bytes` at `mss` and `initcwnd` (both at least 1).
    pub fn new(bytes: u64, mss: u32, initcwnd: u32) -> Verdict {
        let (mss, initcwnd) = (mss.max(1), initcwnd.max(1));
        let window_bytes = u64::from(mss) * u64::from(initcwnd);
        let segments = bytes.div_ceil(u64::from(mss));
        let mut round_trips = 1;
        let (mut cwnd, mut sent) = (u64::from(initcwnd), u64::from(initcwnd));
        while sent < segments {
            cwnd *= 2;
            sent += cwnd;
            round_trips += 1;
        }
        Verdict {
            mss,
            initcwnd,
            window_bytes,
            bytes,
            segments,
            fits: bytes <= window_bytes,
            spare_bytes: window_bytes.saturating_sub(bytes),
            over_bytes: bytes.saturating_sub(window_bytes),
            round_trips,
        }
    }

    /// `1 of 10 segments — fits the initial window (14442 bytes to spare)`.
    fn describe(&self) -> String {
        let head = format!("{} of {} segments", self.segments, self.initcwnd);
        if self.fits {
            format!(
                "{head} — fits the initial window ({} bytes to spare)",
                self.spare_bytes
            )
        } else {
            format!(
                "{head} — misses the initial window by {} bytes ({} round trips in slow start)",
                self.over_bytes, self.round_trips
            )
        }
    }
}

/// One response, counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Exchange {
    pub url: String,
    pub status: u16,
    /// Head plus framed body: every byte received for this response.
    pub wire_bytes: u64,
    /// Status line, fields and the empty line (plus any 1xx interim responses).
    pub head_bytes: u64,
    /// The body as framed on the wire (chunk framing included), content-coding as sent.
    pub body_bytes: u64,
    /// `identity`, `gzip`, `br` …: the Content-Encoding as sent.
    pub encoding: String,
    pub content_type: Option<String>,
    /// `content-length`, `chunked`, `close` or `none`.
    pub framing: &'static str,
    /// https: the TLS records after the handshake; `wire_bytes` is then their bytes, not
    /// `head_bytes + body_bytes` (see [`super::tls`]).
    pub tls: Option<super::tls::TlsFlight>,
}

/// A referenced resource and how fetching it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Resource {
    pub url: String,
    /// `stylesheet`, `script`, `image`, `icon` or `preload`.
    pub kind: &'static str,
    /// The response, whatever its status (a 404 still crossed the wire).
    pub exchange: Option<Exchange>,
    /// Why there is no response (connection refused, timeout, bad framing …).
    pub error: Option<String>,
}

/// A reference that was not fetched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub url: String,
    /// `other origin`, `not http (https)`, `duplicate` …
    pub reason: String,
}

/// The page and its same-origin resources: what the first view costs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FirstView {
    pub resources: Vec<Resource>,
    pub skipped: Vec<Skipped>,
    /// The page referenced more than the scan keeps; the rest are not counted.
    pub truncated: bool,
    /// Why the page could not be scanned (e.g. an unknown content-coding), if it could not.
    pub scan_error: Option<String>,
    /// Page plus every resource response received.
    pub total_bytes: u64,
    /// `total_bytes` at the assumed MSS.
    pub verdict: Verdict,
}

/// Everything `linerate lab firstflight` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The Accept-Encoding sent, if any.
    pub accept_encoding: Option<String>,
    pub page: Exchange,
    /// The connection's MSS (TCP_MAXSEG after the response), when the kernel gave one.
    pub connection_mss: Option<u32>,
    /// The page at the connection's own MSS.
    pub connection_verdict: Option<Verdict>,
    /// The page at the assumed MSS (`--mss`, default 1460): the verdict that matters on the
    /// Internet, and the one the exit status follows.
    pub verdict: Verdict,
    /// For an HTML page, unless resources were turned off.
    pub first_view: Option<FirstView>,
}

impl Report {
    /// Whether what was measured fits the initial window: the whole first view when there
    /// is one, else the page.
    pub fn fits(&self) -> bool {
        self.first_view
            .as_ref()
            .map_or(self.verdict.fits, |v| v.verdict.fits)
    }
}

/// The human-readable report.
pub fn render(report: &Report) -> String {
    let p = &report.page;
    let mut out = format!(
        "GET {} → {}, {} bytes on the wire (headers {} + body {}, {}{})",
        p.url,
        p.status,
        p.wire_bytes,
        p.head_bytes,
        p.body_bytes,
        p.encoding,
        if p.framing == "chunked" {
            ", chunked"
        } else {
            ""
        },
    );
    match (&report.connection_mss, &report.connection_verdict) {
        (Some(mss), Some(v)) => {
            let s = if v.segments == 1 { "" } else { "s" };
            let _ = write!(out, "; connection MSS {mss} → {} segment{s}", v.segments);
        }
        _ => out.push_str("; connection MSS unknown"),
    }
    let _ = writeln!(
        out,
        "; at MSS {}: {}",
        report.verdict.mss,
        report.verdict.describe()
    );
    if let Some(t) = &p.tls {
        let _ = write!(
            out,
            "  https: the {} bytes are what the server sent after the TLS handshake ({}, {}): \
             {} TLS record{} carrying the {} bytes of HTTP above, each with its 5-byte header and \
             its tag, plus any session tickets sent in the same flight; the handshake's own bytes \
             are not counted",
            p.wire_bytes,
            t.version,
            t.cipher,
            t.records,
            if t.records == 1 { "" } else { "s" },
            p.head_bytes + p.body_bytes
        );
        out.push('\n');
    }
    if let Some(view) = &report.first_view {
        render_first_view(&mut out, report, view);
    }
    out
}

fn render_first_view(out: &mut String, report: &Report, view: &FirstView) {
    if let Some(e) = &view.scan_error {
        let _ = writeln!(out, "page not scanned for resources: {e}");
    }
    let _ = writeln!(
        out,
        "first view: page + {} same-origin resource{}",
        view.resources.len(),
        if view.resources.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "  {:>6}  {:>9}  {:<10}  {:<11}  url",
        "status", "bytes", "kind", "encoding"
    );
    let row = |out: &mut String, kind: &str, e: &Exchange| {
        let _ = writeln!(
            out,
            "  {:>6}  {:>9}  {:<10}  {:<11}  {}",
            e.status, e.wire_bytes, kind, e.encoding, e.url
        );
    };
    row(out, "page", &report.page);
    for r in &view.resources {
        match (&r.exchange, &r.error) {
            (Some(e), _) => row(out, r.kind, e),
            (None, error) => {
                let why = error.as_deref().unwrap_or("no response");
                let _ = writeln!(
                    out,
                    "  {:>6}  {:>9}  {:<10}  {:<11}  {}  ({why})",
                    "-", "-", r.kind, "-", r.url
                );
            }
        }
    }
    let v = &view.verdict;
    let _ = writeln!(
        out,
        "  total {} bytes on the wire; at MSS {}: {}",
        view.total_bytes,
        v.mss,
        v.describe()
    );
    if view.truncated {
        let _ = writeln!(
            out,
            "  (only the first {} references were counted)",
            super::html::MAX_REFERENCES
        );
    }
    for s in &view.skipped {
        let _ = writeln!(out, "  skipped {} ({})", s.url, s.reason);
    }
}

/// `--http3`: one response's first flight over QUIC, measured (see [`super::quic`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QuicReport {
    /// The Accept-Encoding sent, if any.
    pub accept_encoding: Option<String>,
    #[serde(flatten)]
    pub flight: super::quic::QuicFlight,
    /// The server's initial congestion window assumed, in bytes of UDP payload.
    pub initial_window: u64,
    /// `burst.bytes - initial_window` when the burst was larger, else 0.
    pub burst_over_window: u64,
    /// `initial_window + before_request.bytes`: the window if every acknowledged byte sent
    /// before the request grew it (slow start does unless the sender was application-limited).
    pub grown_window_bound: u64,
    /// What the burst says about the window at the request.
    pub window: WindowReading,
    /// The whole response came in the first flight; the exit status follows it.
    pub fits: bool,
}

/// What a burst says about the server's congestion window when the request came.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reading")]
pub enum WindowReading {
    /// The response ended before the window did: it says nothing of the window's size.
    NotReached,
    /// The burst stopped within the initial window: the handshake's acknowledged bytes had
    /// not grown it (by less than the next datagram, if at all).
    NotGrown,
    /// The burst went past the initial window by this many bytes: the window had grown.
    Grown { by_at_least: u64 },
}

impl QuicReport {
    pub fn new(
        flight: super::quic::QuicFlight,
        initial_window: u64,
        accept_encoding: Option<String>,
    ) -> QuicReport {
        QuicReport {
            accept_encoding,
            initial_window,
            burst_over_window: flight.burst.bytes.saturating_sub(initial_window),
            grown_window_bound: initial_window + flight.before_request.bytes,
            window: match flight.burst.bytes.checked_sub(initial_window) {
                _ if flight.complete_in_burst => WindowReading::NotReached,
                Some(over) if over > 0 => WindowReading::Grown { by_at_least: over },
                _ => WindowReading::NotGrown,
            },
            fits: flight.complete_in_burst,
            flight,
        }
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The human-readable `--http3` report.
pub fn render_quic(r: &QuicReport) -> String {
    let f = &r.flight;
    let mut out = format!(
        "GET {} over HTTP/3 → {}, body {} bytes; the response took {}, {} bytes of UDP \
         payload ({} bytes of its stream: HEADERS and DATA frames)\n",
        f.url,
        f.status,
        f.body_bytes,
        plural(f.response.datagrams, "datagram", "datagrams"),
        f.response.bytes,
        f.stream_bytes,
    );
    let _ = writeln!(
        out,
        "first flight (from the request until {} ms of quiet, nothing acknowledged): {}, {} \
         bytes (largest {}), carrying {} stream bytes, {} of body — {}",
        f.gap_ms,
        plural(f.burst.datagrams, "datagram", "datagrams"),
        f.burst.bytes,
        f.burst.largest,
        f.burst_stream_bytes,
        f.burst_body_bytes,
        if r.fits {
            "the whole response".to_string()
        } else {
            format!(
                "{} of {} body bytes, the rest waits for acknowledgements",
                f.burst_body_bytes, f.body_bytes
            )
        }
    );
    let against = if r.burst_over_window > 0 {
        format!("{} bytes over it", r.burst_over_window)
    } else {
        format!("{} bytes to spare", r.initial_window - f.burst.bytes)
    };
    let _ = writeln!(
        out,
        "  against an initial window of {} bytes: {against}",
        r.initial_window
    );
    let _ = writeln!(
        out,
        "  before the request the server sent {}, {} bytes (handshake, HANDSHAKE_DONE, session \
         tickets, control and QPACK streams, MTU probes), and the client acknowledged them \
         ({} ms of quiet first): slow start adds acknowledged bytes to the window unless the \
         sender was application-limited, so from {} bytes it could have grown to {} by the \
         request",
        plural(f.before_request.datagrams, "datagram", "datagrams"),
        f.before_request.bytes,
        f.settle_ms,
        r.initial_window,
        r.grown_window_bound,
    );
    let reading = match r.window {
        WindowReading::NotReached => {
            "the response ended first, so the burst does not show the window's size".to_string()
        }
        WindowReading::NotGrown => format!(
            "the burst stopped within the initial window, so those acknowledgements had not \
             grown it (by less than one more {}-byte datagram, if at all)",
            f.burst.largest
        ),
        WindowReading::Grown { by_at_least } => format!(
            "the burst went {by_at_least} bytes past the initial window, so the window had \
             grown by at least that, or this server starts with a larger one (--initial-window)"
        ),
    };
    let _ = writeln!(out, "  measured: {reading}");
    let _ = writeln!(
        out,
        "verdict: {}",
        if r.fits {
            "the whole response came in the first flight"
        } else {
            "the response did not fit the first flight"
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_table() {
        /// (bytes, mss, initcwnd, segments, fits, spare, over, round trips)
        type Row = (u64, u32, u32, u64, bool, u64, u64, u32);
        let rows: &[Row] = &[
            (158, 1460, 10, 1, true, 14442, 0, 1),
            (14600, 1460, 10, 10, true, 0, 0, 1),
            (14601, 1460, 10, 11, false, 0, 1, 2),
            (14590, 1460, 10, 10, true, 10, 0, 1),
            (14610, 1460, 10, 11, false, 0, 10, 2),
            // 10 + 20 segments in two round trips, the 31st needs a third.
            (30 * 1460, 1460, 10, 30, false, 0, 20 * 1460, 2),
            (30 * 1460 + 1, 1460, 10, 31, false, 0, 20 * 1460 + 1, 3),
            (158, 65483, 10, 1, true, 654672, 0, 1),
            (5000, 1000, 4, 5, false, 0, 1000, 2),
            (0, 1460, 10, 0, true, 14600, 0, 1),
        ];
        for &(bytes, mss, initcwnd, segments, fits, spare, over, rtts) in rows {
            let v = Verdict::new(bytes, mss, initcwnd);
            assert_eq!(
                (
                    v.segments,
                    v.fits,
                    v.spare_bytes,
                    v.over_bytes,
                    v.round_trips
                ),
                (segments, fits, spare, over, rtts),
                "{bytes} bytes at mss {mss} × {initcwnd}"
            );
            assert_eq!(v.window_bytes, u64::from(mss) * u64::from(initcwnd));
        }
    }

    #[test]
    fn render_one_line_for_a_plain_response() {
        let report = Report {
            accept_encoding: Some("gzip, br".into()),
            page: Exchange {
                tls: None,
                url: "http://127.0.0.1:8080/json".into(),
                status: 200,
                wire_bytes: 158,
                head_bytes: 132,
                body_bytes: 26,
                encoding: "identity".into(),
                content_type: Some("application/json".into()),
                framing: "content-length",
            },
            connection_mss: Some(65483),
            connection_verdict: Some(Verdict::new(158, 65483, 10)),
            verdict: Verdict::new(158, 1460, 10),
            first_view: None,
        };
        assert_eq!(
            render(&report),
            "GET http://127.0.0.1:8080/json → 200, 158 bytes on the wire (headers 132 + body 26, \
             identity); connection MSS 65483 → 1 segment; at MSS 1460: 1 of 10 segments — fits \
             the initial window (14442 bytes to spare)\n"
        );
        assert!(report.fits());
    }

    #[test]
    fn quic_report_states_the_window_and_what_grew_it() {
        let d = |datagrams, bytes, largest| super::super::quic::Datagrams {
            datagrams,
            bytes,
            largest,
        };
        let flight = super::super::quic::QuicFlight {
            url: "https://127.0.0.1:8443/big".into(),
            status: 200,
            body_bytes: 200_000,
            stream_bytes: 200_050,
            before_request: d(6, 5000, 1452),
            burst: d(14, 19_000, 1452),
            burst_stream_bytes: 18_500,
            burst_body_bytes: 18_450,
            complete_in_burst: false,
            response: d(150, 210_000, 1452),
            gap_ms: 10,
            settle_ms: 100,
        };
        let r = QuicReport::new(flight, 14_720, None);
        assert_eq!(
            (r.burst_over_window, r.grown_window_bound, r.fits),
            (4280, 19_720, false)
        );
        let text = render_quic(&r);
        assert!(
            text.contains("14 datagrams, 19000 bytes (largest 1452)"),
            "{text}"
        );
        assert!(text.contains("4280 bytes over it"), "{text}");
        assert!(
            text.contains("from 14720 bytes it could have grown to 19720"),
            "{text}"
        );
        assert_eq!(r.window, WindowReading::Grown { by_at_least: 4280 });
        assert!(text.contains("had grown by at least that"), "{text}");
        assert!(text.ends_with("verdict: the response did not fit the first flight\n"));
    }
}
