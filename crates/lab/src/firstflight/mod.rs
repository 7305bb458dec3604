//! `linerate lab firstflight URL`: does a response — and for an HTML page, the page plus the
//! same-origin resources it references — fit the initial congestion window (RFC 6928)?
//!
//! Owns the check: fetch the page counting every byte on the wire (compressed as sent),
//! read the connection's MSS, judge the bytes at the assumed Internet MSS, scan HTML for
//! resources and fetch those of the same origin. Never fetches another origin; every
//! network wait is bounded. Submodules: [`url`], [`frame`] (sans-I/O framing), [`fetch`]
//! (the socket client), [`coding`], [`html`] (the scanner), [`report`]. With `--http3`,
//! [`quic`] measures instead of computing: the datagrams a QUIC server sends for one response
//! before it needs an acknowledgement ([`check_quic`]; the page only).

pub mod coding;
pub mod fetch;
pub mod frame;
pub mod html;
pub mod quic;
pub mod report;
pub mod tls;
pub mod url;

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

pub use fetch::{FetchError, Fetched, Timeouts};
pub use quic::{QUIC_INITIAL_WINDOW, QuicFlight};
pub use report::{
    Exchange, FirstView, QuicReport, Report, Resource, Skipped, Verdict, WindowReading,
};
pub use url::{HttpUrl, UrlError};

use url::Resolved;

/// The usual Internet MSS: a 1500-byte Ethernet MTU less 20 bytes of IPv4 and 20 of TCP header.
pub const INTERNET_MSS: u32 = 1460;
/// The initial congestion window of RFC 6928, in segments.
pub const RFC6928_INITCWND: u32 = 10;
/// What `--encoding` sends by default: what browsers accept, less zstd.
pub const DEFAULT_ACCEPT_ENCODING: &str = "gzip, br";
/// Longest wait for a TCP handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for one whole request and response.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Does a response — for an HTML page, the page plus its same-origin resources — fit the
/// initial congestion window (RFC 6928)? Counts the bytes on the wire (compressed as sent),
/// reports the connection's MSS and judges at the assumed Internet MSS. Exit status 1 when
/// it does not fit.
#[derive(Debug, Clone)]
pub struct FirstflightArgs {
    /// The page to check: `http://host[:port]/path` or `https://host[:port]/path`.
    pub url: String,
    /// Accept-Encoding to send; "" sends none, "identity" asks for no compression.
    pub encoding: String,
    /// MSS the verdict assumes, in payload bytes per segment (1460 = Ethernet less IPv4+TCP
    /// headers). The connection's own MSS is reported beside it.
    pub mss: u32,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initcwnd: u32,
    /// Print the report as JSON.
    pub json: bool,
    /// Only the page: do not scan HTML for resources.
    pub no_resources: bool,
    /// https: do not verify the server's certificate.
    pub insecure: bool,
    /// https: trust only the CA certificates in this PEM file [None: the webpki roots].
    pub cacert: Option<std::path::PathBuf>,
    /// Over HTTP/3 (QUIC) instead, measured: the page's first flight of datagrams, sent
    /// without acknowledgements (see [`quic`]).
    pub http3: bool,
    /// With `http3`: the server's initial congestion window in bytes of UDP payload.
    pub initial_window: u64,
}

/// What [`check`] does.
#[derive(Clone, Debug)]
pub struct Options {
    /// Sent as Accept-Encoding; `None` sends no such field.
    pub accept_encoding: Option<String>,
    /// MSS the verdict assumes.
    pub mss: u32,
    /// Initial congestion window in segments.
    pub initcwnd: u32,
    /// Scan an HTML page and fetch its same-origin resources.
    pub resources: bool,
    pub timeouts: Timeouts,
    /// https: how the server's certificate is checked.
    pub verify: linerate_load::tls::Verify,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            accept_encoding: Some(DEFAULT_ACCEPT_ENCODING.to_string()),
            mss: INTERNET_MSS,
            initcwnd: RFC6928_INITCWND,
            resources: true,
            timeouts: Timeouts {
                connect: CONNECT_TIMEOUT,
                exchange: EXCHANGE_TIMEOUT,
            },
            verify: linerate_load::tls::Verify::WebPkiRoots,
        }
    }
}

impl From<&FirstflightArgs> for Options {
    fn from(args: &FirstflightArgs) -> Options {
        let encoding = args.encoding.trim();
        Options {
            accept_encoding: (!encoding.is_empty()).then(|| encoding.to_string()),
            mss: args.mss,
            initcwnd: args.initcwnd,
            resources: !args.no_resources,
            verify: match (&args.cacert, args.insecure) {
                (Some(p), _) => linerate_load::tls::Verify::CaFile(p.clone()),
                (None, true) => linerate_load::tls::Verify::Insecure,
                (None, false) => linerate_load::tls::Verify::WebPkiRoots,
            },
            ..Options::default()
        }
    }
}

/// Why a check could not be made. Failures of resources are not errors: they are listed in
/// the report.
#[derive(Debug)]
pub enum CheckError {
    Url(UrlError),
    Fetch(FetchError),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Url(e) => e.fmt(f),
            CheckError::Fetch(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CheckError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CheckError::Url(e) => Some(e),
            CheckError::Fetch(e) => e.source(),
        }
    }
}

/// `--http3`: GETs `url` over QUIC and measures the response's first flight against
/// `initial_window` (bytes). Only the page: resources are not fetched.
pub fn check_quic(
    url: &str,
    opts: &Options,
    initial_window: u64,
) -> Result<QuicReport, CheckError> {
    let url = HttpUrl::parse(url).map_err(CheckError::Url)?;
    let ae = opts.accept_encoding.as_deref();
    let flight = quic::get(&url, ae, opts.timeouts, &opts.verify).map_err(CheckError::Fetch)?;
    Ok(QuicReport::new(
        flight,
        initial_window,
        opts.accept_encoding.clone(),
    ))
}

/// Fetches `url` and, for HTML, its same-origin resources, and judges the bytes.
pub fn check(url: &str, opts: &Options) -> Result<Report, CheckError> {
    let url = HttpUrl::parse(url).map_err(CheckError::Url)?;
    let ae = opts.accept_encoding.as_deref();
    let page = fetch::get(&url, ae, opts.timeouts, &opts.verify).map_err(CheckError::Fetch)?;
    let exchange = exchange(&url, &page);
    let verdict = Verdict::new(exchange.wire_bytes, opts.mss, opts.initcwnd);
    let first_view = (opts.resources && is_html(page.field("content-type")))
        .then(|| first_view(&url, &page, &exchange, opts));
    Ok(Report {
        accept_encoding: opts.accept_encoding.clone(),
        connection_mss: page.mss,
        connection_verdict: page
            .mss
            .map(|mss| Verdict::new(exchange.wire_bytes, mss, opts.initcwnd)),
        verdict,
        page: exchange,
        first_view,
    })
}

fn exchange(url: &HttpUrl, f: &Fetched) -> Exchange {
    Exchange {
        url: url.to_string(),
        status: f.status,
        wire_bytes: f.wire_bytes(),
        head_bytes: f.head_bytes,
        body_bytes: f.body_bytes,
        encoding: coding::label(f.field("content-encoding")),
        content_type: f.field("content-type").map(str::to_string),
        framing: f.framing.name(),
        tls: f.tls.clone(),
    }
}

/// `text/html` or `application/xhtml+xml`, parameters ignored.
fn is_html(content_type: Option<&str>) -> bool {
    let media = content_type
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    media.eq_ignore_ascii_case("text/html") || media.eq_ignore_ascii_case("application/xhtml+xml")
}

/// Scans the page and fetches each same-origin resource once, in document order.
fn first_view(
    url: &HttpUrl,
    page: &Fetched,
    page_exchange: &Exchange,
    opts: &Options,
) -> FirstView {
    let mut view = FirstView {
        resources: Vec::new(),
        skipped: Vec::new(),
        truncated: false,
        scan_error: None,
        total_bytes: page_exchange.wire_bytes,
        verdict: Verdict::new(page_exchange.wire_bytes, opts.mss, opts.initcwnd),
    };
    let html = match coding::decode(page.field("content-encoding"), &page.content) {
        Ok(html) => html,
        Err(e) => {
            view.scan_error = Some(e.to_string());
            return view;
        }
    };
    let scan = html::scan(&html);
    view.truncated = scan.truncated;
    // `<base href>` changes what relative references mean: an off-origin base makes them
    // off-origin too, and a base that is not http:// (https, data:) makes them unfetchable.
    let (base, base_scheme) = match scan.base.as_deref().map(|b| url.resolve(b)) {
        Some(Resolved::Http(base)) => (base, None),
        Some(Resolved::OtherScheme(s)) => (url.clone(), Some(s)),
        Some(Resolved::Empty) | None => (url.clone(), None),
    };
    let mut seen: HashSet<HttpUrl> = HashSet::from([url.clone()]);
    for reference in scan.references {
        let skip = |why: String| Skipped {
            url: reference.url.clone(),
            reason: why,
        };
        if let Some(scheme) = base_scheme
            .as_deref()
            .filter(|_| url::is_relative(&reference.url))
        {
            view.skipped
                .push(skip(format!("relative to a {scheme}: <base href>")));
            continue;
        }
        let target = match base.resolve(&reference.url) {
            Resolved::Http(t) if !url.same_origin(&t) => {
                view.skipped.push(skip("other origin".into()));
                continue;
            }
            Resolved::Http(t) => t,
            Resolved::OtherScheme(s) if s == "https" => {
                view.skipped.push(skip("other origin (https)".into()));
                continue;
            }
            Resolved::OtherScheme(s) => {
                view.skipped.push(skip(format!("not fetched ({s}: URL)")));
                continue;
            }
            Resolved::Empty => {
                view.skipped.push(skip("empty reference".into()));
                continue;
            }
        };
        if !seen.insert(target.clone()) {
            view.skipped.push(Skipped {
                url: target.to_string(),
                reason: "duplicate".into(),
            });
            continue;
        }
        let fetched = fetch::get(
            &target,
            opts.accept_encoding.as_deref(),
            opts.timeouts,
            &opts.verify,
        );
        let kind = reference.kind.name();
        view.resources.push(match fetched {
            Ok(f) => Resource {
                url: target.to_string(),
                kind,
                exchange: Some(exchange(&target, &f)),
                error: None,
            },
            Err(e) => Resource {
                url: target.to_string(),
                kind,
                exchange: None,
                error: Some(e.to_string()),
            },
        });
    }
    view.total_bytes += view
        .resources
        .iter()
        .filter_map(|r| r.exchange.as_ref())
        .map(|e| e.wire_bytes)
        .sum::<u64>();
    view.verdict = Verdict::new(view.total_bytes, opts.mss, opts.initcwnd);
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_html_table() {
        let rows: &[(Option<&str>, bool)] = &[
            (Some("text/html"), true),
            (Some("text/html; charset=utf-8"), true),
            (Some("TEXT/HTML"), true),
            (Some("application/xhtml+xml"), true),
            (Some("text/plain"), false),
            (Some("application/json"), false),
            (None, false),
        ];
        for &(ct, want) in rows {
            assert_eq!(is_html(ct), want, "{ct:?}");
        }
    }

    #[test]
    fn options_from_args() {
        let args = FirstflightArgs {
            url: "http://h/".into(),
            encoding: " ".into(),
            mss: 1400,
            initcwnd: 4,
            json: false,
            no_resources: true,
            insecure: false,
            cacert: None,
            http3: false,
            initial_window: QUIC_INITIAL_WINDOW,
        };
        let o = Options::from(&args);
        assert_eq!(
            (o.accept_encoding, o.mss, o.initcwnd, o.resources),
            (None, 1400, 4, false)
        );
    }

    #[test]
    fn base_href_table() {
        // (base element, reference, fetched target or skip reason)
        let rows: &[(&str, &str, Result<&str, &str>)] = &[
            ("<base href=/static/>", "a.css", Ok("/static/a.css")),
            ("<base href=/static/>", "/root.css", Ok("/root.css")),
            (
                "<base href=http://cdn.example/>",
                "a.css",
                Err("other origin"),
            ),
            (
                "<base href=https://cdn.example/>",
                "a.css",
                Err("relative to a https: <base href>"),
            ),
            (
                "<base href=https://cdn.example/>",
                "/a.css",
                Err("relative to a https: <base href>"),
            ),
        ];
        let page = HttpUrl::parse("http://127.0.0.1:9/index.html").unwrap();
        // Whether or not port 9 answers, a fetched row names its target; fetches fail fast.
        let opts = Options {
            timeouts: Timeouts {
                connect: Duration::from_millis(200),
                exchange: Duration::from_millis(200),
            },
            ..Options::default()
        };
        for &(base, reference, want) in rows {
            let html = format!("{base}<link rel=stylesheet href={reference}>");
            let fetched = Fetched {
                status: 200,
                fields: vec![("Content-Type".into(), "text/html".into())],
                head_bytes: 0,
                body_bytes: html.len() as u64,
                framing: frame::Framing::Length(html.len() as u64),
                content: html.into_bytes(),
                mss: None,
                tls: None,
            };
            let view = first_view(&page, &fetched, &exchange(&page, &fetched), &opts);
            match want {
                Ok(target) => {
                    assert_eq!(view.resources.len(), 1, "{base} {reference}");
                    assert_eq!(view.resources[0].url, format!("http://127.0.0.1:9{target}"));
                }
                Err(reason) => {
                    assert!(view.resources.is_empty(), "{base} {reference}");
                    assert_eq!(view.skipped[0].reason, reason, "{base} {reference}");
                }
            }
        }
    }

    #[test]
    fn bad_urls_fail_before_connecting() {
        let rows: &[(&str, &str)] = &[
            ("ftp://example.com/", "expected http:// or https://"),
            ("example.com", "not an absolute URL"),
            ("http://", "no host"),
        ];
        for &(input, msg) in rows {
            let e = check(input, &Options::default()).unwrap_err();
            assert!(e.to_string().contains(msg), "{input}: {e}");
        }
    }
}
