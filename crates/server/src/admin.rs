//! The admin listener: `GET /metrics` (the Prometheus text exposition format, version 0.0.4),
//! `GET /config` (the configuration in use, secrets removed), `GET /healthz` (liveness) and
//! `GET /readyz` (readiness), answered by a thread of its own, never by the workers or a site.
//!
//! Owns the exposition: it reads the workers' counters at scrape time (`StatsHandle`), so
//! nothing on the request path is shared. One connection at a time, each answered once and
//! closed, with a read timeout: a scraper is one client polling every few seconds.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use linerate_http1::{Limits, ParseError, Parsed, RequestHead};

use crate::stats::{
    CLASSES, CONN_REFUSALS, DURATION_BUCKETS_US, KINDS, Metrics, PurgeAsk, REFUSALS, Stats,
    StatsHandle, UPSTREAM_ERRORS,
};

/// Longest an admin client may take to send its request, or to read the answer.
pub const ADMIN_IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest admin request head.
const ADMIN_HEAD_BYTES: usize = 8 * 1024;
/// How often the idle admin thread looks at the stop flag.
const ADMIN_POLL: Duration = Duration::from_millis(50);

/// Serves `listener` until `stop` is set. `draining` turns `/healthz` and `/readyz` to 503.
pub(crate) fn serve(
    listener: TcpListener,
    stats: StatsHandle,
    stop: Arc<AtomicBool>,
    draining: Arc<AtomicBool>,
) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!(error = %e, "admin listener unusable");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = answer(stream, &stats, &draining) {
                    tracing::debug!(error = %e, "admin request failed");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(ADMIN_POLL),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                std::thread::sleep(ADMIN_POLL);
            }
        }
    }
}

fn answer(mut stream: TcpStream, stats: &StatsHandle, draining: &AtomicBool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(ADMIN_IO_TIMEOUT))?;
    stream.set_write_timeout(Some(ADMIN_IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut head = RequestHead::new();
    let limits = Limits {
        max_head_bytes: ADMIN_HEAD_BYTES,
        ..Limits::default()
    };
    let (status, ctype, body) = loop {
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        match head.parse(&buf, &limits) {
            Ok(Parsed::Partial) => continue,
            Ok(Parsed::Complete(_)) => break route(&head, &buf, stats, draining),
            Err(e) => break (e.status(), "text/plain", format!("{e}\n")),
        }
    };
    let bodyless = head.method() == linerate_http1::Method::Head;
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    if !bodyless {
        out.push_str(&body);
    }
    stream.write_all(out.as_bytes())
}

fn route(
    head: &RequestHead,
    buf: &[u8],
    stats: &StatsHandle,
    draining: &AtomicBool,
) -> (u16, &'static str, String) {
    use linerate_http1::Method;
    if head.method() == Method::Post && head.path(buf) == "/purge" {
        return purge(head.query(buf).unwrap_or(""), stats);
    }
    if !matches!(head.method(), Method::Get | Method::Head) {
        return (405, "text/plain", "GET or HEAD (POST for /purge)\n".into());
    }
    match head.path(buf) {
        "/metrics" => (
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            render(&stats.metrics(), &stats.snapshot())
                + &render_caches(&stats.caches())
                + &stats.grpc_metrics()
                + &stats.info.render()
                + &crate::process_metrics::Process::read().render()
                + &stats
                    .tracing
                    .as_deref()
                    .map_or_else(String::new, crate::trace::TraceStats::render)
                + &render_dependencies(stats)
                + &crate::node_info::render_certs(
                    &stats
                        .certs
                        .iter()
                        .flat_map(|c| c.expiries())
                        .collect::<Vec<_>>(),
                ),
        ),
        "/cache" => list_caches(head.query(buf).unwrap_or(""), stats),
        // The configuration in use, secrets removed (`config_view`).
        "/config" => (200, "application/json", stats.info.effective()),
        "/healthz" if draining.load(Ordering::Relaxed) => (503, "text/plain", "draining\n".into()),
        "/healthz" => (200, "text/plain", "ok\n".into()),
        "/readyz" => readiness(stats, draining),
        _ => (
            404,
            "text/plain",
            "/metrics, /cache, /config, /healthz or /readyz\n".into(),
        ),
    }
}

/// `/readyz`: whether a balancer should send this node traffic. 503 while it
/// drains, or while a site's managed certificate (ACME, the local CA) is not obtained yet (a
/// TLS handshake for that name would be refused); the body says why. `/healthz` stays
/// liveness: 200 while the process serves at all.
fn readiness(stats: &StatsHandle, draining: &AtomicBool) -> (u16, &'static str, String) {
    if draining.load(Ordering::Relaxed) {
        return (503, "text/plain", "not ready: draining\n".into());
    }
    let missing: Vec<String> = stats
        .certs
        .iter()
        .flat_map(|c| c.missing_managed())
        .collect();
    let mut why = String::new();
    if !missing.is_empty() {
        let _ = writeln!(
            why,
            "not ready: no certificate yet for {}",
            missing.join(", ")
        );
    }
    // A `[storage]` that has not answered since start: a fleet node without
    // the fleet's certificates and ticket keys.
    #[cfg(feature = "storage")]
    if let Some(storage) = crate::storage::health::health().and_then(|h| h.not_ready()) {
        let _ = writeln!(why, "not ready: {storage}");
    }
    if !why.is_empty() {
        return (503, "text/plain", why);
    }
    (200, "text/plain", "ready\n".into())
}

/// What a node depends on beside its workers, each only where it runs: the
/// shared storage's errors by operation, ACME orders by outcome, the age of the session
/// ticket key sealing now; and whether a reload left keys for a restart (always).
fn render_dependencies(stats: &StatsHandle) -> String {
    let mut o = String::new();
    // (`acme` brings both.)
    #[cfg(any(feature = "storage", feature = "tls"))]
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
    };
    #[cfg(feature = "storage")]
    if let Some(h) = crate::storage::health::health() {
        family(
            &mut o,
            "linerate_storage_errors_total",
            "counter",
            "Calls to the shared storage ([storage]) that failed, by operation (probe: the readiness probe's, until the storage first answers).",
        );
        for (op, n) in crate::storage::health::OPS.iter().zip(h.errors) {
            let _ = writeln!(o, "linerate_storage_errors_total{{op=\"{op}\"}} {n}");
        }
    }
    #[cfg(feature = "acme")]
    if let Some(counts) = crate::acme::orders::counts() {
        family(
            &mut o,
            "linerate_acme_orders_total",
            "counter",
            "ACME orders this node placed, by outcome: issued (obtained and stored), failed (retried after a backoff).",
        );
        for (outcome, n) in counts {
            let _ = writeln!(o, "linerate_acme_orders_total{{outcome=\"{outcome}\"}} {n}");
        }
    }
    #[cfg(feature = "tls")]
    {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let ages = crate::driver::ticket_keys::key_ages(now);
        if !ages.is_empty() {
            family(
                &mut o,
                "linerate_tls_ticket_key_age_seconds",
                "gauge",
                "Age of the key sealing new TLS session tickets, by where the keys come from (files: ticket_keys, dated by the first file's modification time; storage: the fleet's); the oldest where several listeners have their own.",
            );
            for (source, age) in ages {
                let _ = writeln!(
                    o,
                    "linerate_tls_ticket_key_age_seconds{{source=\"{source}\"}} {age}"
                );
            }
        }
    }
    o.push_str(&stats.info.render_restart_pending());
    o
}

/// `POST /purge?url=URL` removes that URL's answers (every variant, under both schemes and
/// every port the server listens on) from every proxy cache; `POST /purge?prefix=URL`,
/// every answer whose URL starts with it; `POST /purge?all`, every answer; `POST
/// /purge?tag=TAG`, every answer its origin tagged TAG (`Surrogate-Key`, `Cache-Tag`; the
/// tag percent-encoded where it must be).
/// The URL is percent-encoded in the query (`http%3A%2F%2Fexample.com%2Fa`), or plain,
/// escapes and all (`http://example.com/caf%C3%A9`). 200 `purged N` when done everywhere;
/// 202 `purged N` and a `pending: …` line per cache whose shared tier was not reached (the
/// purge is kept and done there when it is back).
fn purge(query: &str, stats: &StatsHandle) -> (u16, &'static str, String) {
    // A soft purge says `&soft` last; a plain URL whose own query ends in
    // `&soft` is percent-encoded.
    if let Some(rest) = query.strip_suffix("&soft") {
        return soft_purge(rest, stats);
    }
    let (name, value) = query.split_once('=').unwrap_or((query, ""));
    let prefix = match name {
        "url" => false,
        "prefix" => true,
        "all" if value.is_empty() => return purged(stats.purge(&PurgeAsk::All), ""),
        "tag" if !value.is_empty() => {
            return purged(stats.purge(&PurgeAsk::Tag(percent_decode(value))), "");
        }
        _ => {
            return (
                400,
                "text/plain",
                "POST /purge?url=URL, ?prefix=URL, ?tag=TAG or ?all\n".into(),
            );
        }
    };
    // Encoded whole, the value has no `://` of its own; a plain URL is taken as it is, its
    // `%XX` escapes the stored key's own (keys keep the target as received).
    let url = if value.contains("://") {
        value.to_string()
    } else {
        percent_decode(value)
    };
    let ask = if prefix {
        PurgeAsk::Prefix(url.clone())
    } else {
        PurgeAsk::Url(url.clone())
    };
    purged(stats.purge(&ask), &url)
}

/// `POST /purge?url=URL&soft` or `?tag=TAG&soft`: the answers made stale (their freshness
/// ends now), not removed, here and on every edge sharing the tier (Fastly's soft purge).
fn soft_purge(query: &str, stats: &StatsHandle) -> (u16, &'static str, String) {
    let (name, value) = query.split_once('=').unwrap_or((query, ""));
    let ask = match name {
        "url" => PurgeAsk::Soft {
            url: Some(if value.contains("://") {
                value.to_string()
            } else {
                percent_decode(value)
            }),
            tag: None,
        },
        "tag" if !value.is_empty() => PurgeAsk::Soft {
            url: None,
            tag: Some(percent_decode(value)),
        },
        _ => {
            return (
                400,
                "text/plain",
                "POST /purge?url=URL&soft or ?tag=TAG&soft\n".into(),
            );
        }
    };
    purged(stats.purge(&ask), value)
}

/// A purge's answer: `done` from [`StatsHandle::purge`] for `url` (empty: every answer).
fn purged(done: Option<crate::stats::Purged>, url: &str) -> (u16, &'static str, String) {
    match done {
        Some(p) if p.pending.is_empty() => (200, "text/plain", format!("purged {}\n", p.removed)),
        // A shared tier was not reached: the purge is kept there and done when it is back,
        // which is not done yet (RFC 9110 §15.3.3: accepted, not completed).
        Some(p) => {
            let mut body = format!("purged {}\n", p.removed);
            for what in &p.pending {
                let _ = writeln!(body, "pending: {what}");
            }
            (202, "text/plain", body)
        }
        None => (400, "text/plain", format!("not an http(s) URL: {url:?}\n")),
    }
}

/// `GET /cache?prefix=URL&limit=N`: what each proxy cache holds under `URL` (every answer
/// without `prefix`), at most `N` answers per cache (and never more than the cache's own
/// bound, `proxy::cache_list::LIST_LIMIT`), as JSON. The URL is taken as `/purge` takes it;
/// one holding `&` is sent percent-encoded.
fn list_caches(query: &str, stats: &StatsHandle) -> (u16, &'static str, String) {
    let (mut prefix, mut limit) = (None, usize::MAX);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("prefix", v) if v.contains("://") => prefix = Some(v.to_string()),
            ("prefix", v) => prefix = Some(percent_decode(v)),
            ("limit", v) if v.parse::<usize>().is_ok() => limit = v.parse().unwrap_or(0),
            _ => {
                return (
                    400,
                    "text/plain",
                    "GET /cache, ?prefix=URL, &limit=N\n".into(),
                );
            }
        }
    }
    match stats.list_caches(prefix.as_deref(), limit) {
        Some(v) => (200, "application/json", format!("{v}\n")),
        None => (
            400,
            "text/plain",
            format!("not an http(s) URL: {:?}\n", prefix.unwrap_or_default()),
        ),
    }
}

/// `%XX` decoded (an invalid escape stays as it is).
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The proxy caches' families: answers by outcome, and what each holds.
fn render_caches(caches: &[(String, crate::stats::CacheCounts)]) -> String {
    let mut o = String::new();
    if caches.is_empty() {
        return o;
    }
    let quote = |l: &str| l.replace('\\', "\\\\").replace('"', "\\\"");
    let _ = writeln!(
        o,
        "# HELP linerate_cache_encoded_bodies_total Stored bodies the caches' hits compressed (gzip, br): once per stored answer and coding, then kept with it.\n# TYPE linerate_cache_encoded_bodies_total counter\nlinerate_cache_encoded_bodies_total {}",
        crate::proxy::cache::bodies_encoded()
    );
    let _ = writeln!(
        o,
        "# HELP linerate_cache_requests_total Proxied requests by what the cache did: hit, stale (served stale), miss (forwarded), revalidated (a 304 freshened a stored answer), bypass (not cacheable)."
    );
    let _ = writeln!(o, "# TYPE linerate_cache_requests_total counter");
    for (label, c) in caches {
        for (outcome, n) in [
            ("hit", c.hits),
            ("stale", c.stale),
            ("miss", c.misses),
            ("revalidated", c.revalidated),
            ("bypass", c.bypass),
        ] {
            let _ = writeln!(
                o,
                "linerate_cache_requests_total{{cache=\"{}\",outcome=\"{outcome}\"}} {n}",
                quote(label)
            );
        }
    }
    if caches.iter().any(|(_, c)| c.tier.is_some()) {
        let _ = writeln!(
            o,
            "# HELP linerate_cache_tier_requests_total Calls to the shared second tier (Redis, memcached) by outcome: hit, miss (the tier had nothing), skipped (a miss without asking: the tier was down), error (failed or timed out: its gets are misses too), stored."
        );
        let _ = writeln!(o, "# TYPE linerate_cache_tier_requests_total counter");
        for (label, c) in caches {
            if let Some(t) = c.tier {
                for (outcome, n) in [
                    ("hit", t.hits),
                    ("miss", t.misses),
                    ("skipped", t.skipped),
                    ("error", t.errors),
                    ("stored", t.stored),
                ] {
                    let _ = writeln!(
                        o,
                        "linerate_cache_tier_requests_total{{cache=\"{}\",outcome=\"{outcome}\"}} {n}",
                        quote(label)
                    );
                }
            }
        }
        for (name, help, get) in [
            (
                "linerate_cache_tier_timeouts_total",
                "Calls to the shared second tier that ran past its timeout (counted as errors too).",
                (|t: &crate::stats::TierCounts| t.timeouts) as fn(&crate::stats::TierCounts) -> u64,
            ),
            (
                "linerate_cache_tier_outages_total",
                "Times the shared second tier went down (each logged once; its calls are skipped until a probe finds it back).",
                |t| t.outages,
            ),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}");
            let _ = writeln!(o, "# TYPE {name} counter");
            for (label, c) in caches {
                if let Some(t) = &c.tier {
                    let _ = writeln!(o, "{name}{{cache=\"{}\"}} {}", quote(label), get(t));
                }
            }
        }
    }
    for (name, kind, help, get) in [
        (
            "linerate_cache_stored_total",
            "counter",
            "Answers stored.",
            (|c: &crate::stats::CacheCounts| c.stored) as fn(&crate::stats::CacheCounts) -> u64,
        ),
        (
            "linerate_cache_evictions_total",
            "counter",
            "Answers evicted for room (S3-FIFO).",
            |c| c.evictions,
        ),
        (
            "linerate_cache_bytes",
            "gauge",
            "Memory the stored answers take.",
            |c| c.bytes,
        ),
        (
            "linerate_cache_objects",
            "gauge",
            "Answers stored now.",
            |c| c.objects,
        ),
        (
            "linerate_cache_waiting",
            "gauge",
            "Requests waiting on another request's upstream answer for the same key (collapsed forwarding).",
            |c| c.waiting,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
        for (label, c) in caches {
            let _ = writeln!(o, "{name}{{cache=\"{}\"}} {}", quote(label), get(c));
        }
    }
    o
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    }
}

/// The Prometheus text exposition of `m` and `s`.
pub fn render(m: &Metrics, s: &Stats) -> String {
    let mut o = String::with_capacity(4096);
    let family = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
    };
    family(
        &mut o,
        "linerate_requests_total",
        "counter",
        "Requests answered, by status class and by what answered (route, file, server).",
    );
    for class in 0..CLASSES {
        for (k, kind) in KINDS.iter().enumerate() {
            let _ = writeln!(
                o,
                "linerate_requests_total{{class=\"{}xx\",kind=\"{kind}\"}} {}",
                class + 1,
                m.requests[class][k]
            );
        }
    }
    family(
        &mut o,
        "linerate_refused_requests_total",
        "counter",
        "Requests the connection answered by itself (parse errors, limits, timeouts), by status.",
    );
    for (i, n) in m.refusals.iter().enumerate() {
        let status = REFUSALS
            .get(i)
            .map_or("other".to_string(), |s| s.to_string());
        let _ = writeln!(
            o,
            "linerate_refused_requests_total{{status=\"{status}\"}} {n}"
        );
    }
    family(
        &mut o,
        "linerate_parse_errors_total",
        "counter",
        "Malformed requests refused, by what was wrong (each also counts in refused_requests).",
    );
    for (e, n) in ParseError::ALL.iter().zip(&m.parse_errors) {
        let _ = writeln!(
            o,
            "linerate_parse_errors_total{{kind=\"{}\"}} {n}",
            e.name()
        );
    }
    family(
        &mut o,
        "linerate_refused_connections_total",
        "counter",
        "Connections closed before their first request: no valid PROXY header, or over the per-client limit.",
    );
    for (why, n) in CONN_REFUSALS.iter().zip(&m.connections_refused) {
        let _ = writeln!(
            o,
            "linerate_refused_connections_total{{reason=\"{why}\"}} {n}"
        );
    }
    for (name, help, v) in [
        (
            "linerate_received_bytes_total",
            "Bytes received on client connections (TLS records included).",
            m.bytes_in,
        ),
        (
            "linerate_sent_bytes_total",
            "Bytes sent on client connections (heads, bodies, files).",
            m.bytes_out,
        ),
        (
            "linerate_rate_limit_full_total",
            "Requests a rate limit let through uncounted: its table of keys was full.",
            m.rate_limit_full,
        ),
        (
            "linerate_tls_handshakes_total",
            "TLS connections closed after a completed handshake.",
            m.tls_handshakes,
        ),
        (
            "linerate_tls_handshake_failures_total",
            "TLS connections closed before their handshake completed.",
            m.tls_handshake_failures,
        ),
        (
            "linerate_quic_handshakes_total",
            "QUIC (HTTP/3) connections ended after a completed handshake.",
            m.quic_handshakes,
        ),
        (
            "linerate_quic_handshake_failures_total",
            "QUIC connections ended before their handshake completed.",
            m.quic_handshake_failures,
        ),
        (
            "linerate_quic_retries_total",
            "QUIC Retry packets sent to validate client addresses under load.",
            m.quic_retries,
        ),
        (
            "linerate_quic_routed_total",
            "QUIC datagrams that reached another worker than their connection's, routed to it.",
            m.quic_routed,
        ),
        (
            "linerate_quic_packets_sent_total",
            "QUIC packets sent by connections that ended.",
            m.quic_packets_sent,
        ),
        (
            "linerate_quic_packets_lost_total",
            "QUIC packets declared lost (RFC 9002) by connections that ended.",
            m.quic_packets_lost,
        ),
        (
            "linerate_deferred_refused_total",
            "Deferred requests answered 503 at the per-worker cap.",
            s.deferred_refused,
        ),
        (
            "linerate_deferred_timed_out_total",
            "Deferred requests answered 503 at the deferred timeout.",
            s.deferred_timed_out,
        ),
        (
            "linerate_deferred_abandoned_total",
            "Deferred requests whose client left first.",
            s.deferred_abandoned,
        ),
        (
            "linerate_late_answers_dropped_total",
            "Deferred answers that came too late to send.",
            s.late_answers_dropped,
        ),
    ] {
        family(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    // 429s by rule, and the fleet rules' modes.
    crate::ratelimit_metrics::render(&mut o);
    // Handlers that panicked, by kind.
    crate::app::panics::render(&mut o);
    family(
        &mut o,
        "linerate_connections",
        "gauge",
        "Client connections now: open, and idle between requests.",
    );
    let _ = writeln!(
        o,
        "linerate_connections{{state=\"open\"}} {}",
        m.connections_open
    );
    let _ = writeln!(
        o,
        "linerate_connections{{state=\"idle\"}} {}",
        m.connections_idle
    );
    family(
        &mut o,
        "linerate_deferred_outstanding",
        "gauge",
        "Deferred requests whose answer has not come back.",
    );
    let _ = writeln!(
        o,
        "linerate_deferred_outstanding {}",
        s.deferred_outstanding
    );
    family(
        &mut o,
        "linerate_request_duration_seconds",
        "histogram",
        "Time from a request's complete head to its answer being handed to the connection.",
    );
    let mut cumulative = 0;
    for (i, le) in DURATION_BUCKETS_US.iter().enumerate() {
        cumulative += m.duration_buckets[i];
        let _ = writeln!(
            o,
            "linerate_request_duration_seconds_bucket{{le=\"{}\"}} {cumulative}",
            *le as f64 / 1e6
        );
    }
    cumulative += m.duration_buckets[DURATION_BUCKETS_US.len()];
    let _ = writeln!(
        o,
        "linerate_request_duration_seconds_bucket{{le=\"+Inf\"}} {cumulative}"
    );
    let _ = writeln!(
        o,
        "linerate_request_duration_seconds_sum {}",
        m.duration_sum_us as f64 / 1e6
    );
    let _ = writeln!(o, "linerate_request_duration_seconds_count {cumulative}");
    if !m.sites.is_empty() {
        render_sites(&mut o, m);
    }
    if !m.upstreams.is_empty() {
        render_upstreams(&mut o, m);
    }
    o
}

/// The per-site families.
fn render_sites(o: &mut String, m: &Metrics) {
    let label = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
    let _ = writeln!(
        o,
        "# HELP linerate_site_requests_total Requests a site answered, by status class (site: its first name, _ for none)."
    );
    let _ = writeln!(o, "# TYPE linerate_site_requests_total counter");
    for s in &m.sites {
        for (c, n) in s.requests.iter().enumerate() {
            let _ = writeln!(
                o,
                "linerate_site_requests_total{{site=\"{}\",class=\"{}xx\"}} {n}",
                label(&s.site),
                c + 1
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP linerate_site_sent_bytes_total Body bytes of a site's answers."
    );
    let _ = writeln!(o, "# TYPE linerate_site_sent_bytes_total counter");
    for s in &m.sites {
        let _ = writeln!(
            o,
            "linerate_site_sent_bytes_total{{site=\"{}\"}} {}",
            label(&s.site),
            s.bytes_out
        );
    }
}

/// The per-upstream-server families (only when upstreams are configured).
fn render_upstreams(o: &mut String, m: &Metrics) {
    let head = |o: &mut String, name: &str, kind: &str, help: &str| {
        let _ = writeln!(o, "# HELP {name} {help}");
        let _ = writeln!(o, "# TYPE {name} {kind}");
    };
    // Names and addresses come from the configuration; quote them as the format asks.
    let label = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
    let who = |u: &crate::stats::UpstreamMetrics| {
        format!(
            "upstream=\"{}\",server=\"{}\"",
            label(&u.upstream),
            label(&u.server)
        )
    };
    head(
        o,
        "linerate_upstream_requests_total",
        "counter",
        "Exchanges an upstream server answered, by its status class.",
    );
    for u in &m.upstreams {
        for (c, n) in u.requests.iter().enumerate() {
            let _ = writeln!(
                o,
                "linerate_upstream_requests_total{{{},class=\"{}xx\"}} {n}",
                who(u),
                c + 1
            );
        }
    }
    head(
        o,
        "linerate_upstream_errors_total",
        "counter",
        "Exchanges with an upstream server that failed, by cause.",
    );
    for u in &m.upstreams {
        for (cause, n) in UPSTREAM_ERRORS.iter().zip(&u.errors) {
            let _ = writeln!(
                o,
                "linerate_upstream_errors_total{{{},cause=\"{cause}\"}} {n}",
                who(u)
            );
        }
    }
    head(
        o,
        "linerate_upstream_connections",
        "gauge",
        "Connections to an upstream server: busy with an exchange, and pooled.",
    );
    for u in &m.upstreams {
        for (state, n) in [("active", u.active), ("idle", u.idle)] {
            let _ = writeln!(
                o,
                "linerate_upstream_connections{{{},state=\"{state}\"}} {n}",
                who(u)
            );
        }
    }
    head(
        o,
        "linerate_upstream_down",
        "gauge",
        "Workers whose passive health has the server taken out now.",
    );
    for u in &m.upstreams {
        let _ = writeln!(o, "linerate_upstream_down{{{}}} {}", who(u), u.down_workers);
    }
    head(
        o,
        "linerate_upstream_duration_seconds",
        "histogram",
        "Time from a request sent to an upstream server to its answer's end.",
    );
    for u in &m.upstreams {
        let w = who(u);
        let mut cumulative = 0;
        for (i, le) in DURATION_BUCKETS_US.iter().enumerate() {
            cumulative += u.duration_buckets[i];
            let _ = writeln!(
                o,
                "linerate_upstream_duration_seconds_bucket{{{w},le=\"{}\"}} {cumulative}",
                *le as f64 / 1e6
            );
        }
        cumulative += u.duration_buckets[DURATION_BUCKETS_US.len()];
        let _ = writeln!(
            o,
            "linerate_upstream_duration_seconds_bucket{{{w},le=\"+Inf\"}} {cumulative}"
        );
        let _ = writeln!(
            o,
            "linerate_upstream_duration_seconds_sum{{{w}}} {}",
            u.duration_sum_us as f64 / 1e6
        );
        let _ = writeln!(
            o,
            "linerate_upstream_duration_seconds_count{{{w}}} {cumulative}"
        );
    }
}
