//! HttpArena's validation, profile by profile, written from its public contract (its
//! validate.sh and the profile docs): the same requests, the same randomised anti-cheat
//! inputs (operands, bodies, counts and multipliers, GetSum pairs, ids, message payloads)
//! drawn fresh per run, and the same verdicts. A few checks are the arena's own and say so
//! in their names ("arena:").
//!
//! Owns the checks only: what the server is and where it listens is [`super::target`]; the
//! clients are [`super::wire`], [`super::h2`], [`super::ws`] and firstflight's HTTP/3 fetch.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::h2::{self, H2};
use super::profiles::{Family, Profile};
use super::rng::Rng;
use super::target::{STATIC_FILES, Target};
use super::wire::{self, ALPN_H1, ALPN_H2, Reply};
use super::ws::{self, Ws};

/// How long a replaced static file may still be served before the check fails (HttpArena's
/// window for everything but infrastructure entries).
pub const STATIC_STALE_WINDOW: Duration = Duration::from_secs(2);
/// Connections the exhaustive-fragmentation check opens at once (one batch per split point
/// would be a pause each; a batch pays the pause once).
const FRAGMENT_BATCH: usize = 64;

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail(String),
    /// Could not run here (a missing tool or listener), never counted as a pass.
    NotRun(String),
}

/// A named verdict.
pub type Check = (String, Outcome);

fn verdict(ok: bool, why: impl FnOnce() -> String) -> Outcome {
    if ok {
        Outcome::Pass
    } else {
        Outcome::Fail(why())
    }
}

/// `expected` body (trimmed) from `r`, or why not.
fn body_is(r: Result<Reply, String>, expected: &str) -> Outcome {
    match r {
        Err(why) => Outcome::Fail(why),
        Ok(r) if r.status != 200 => {
            Outcome::Fail(format!("HTTP {}, body {:?}", r.status, clip(&r.text())))
        }
        Ok(r) => verdict(r.text() == expected, || {
            format!("expected body {expected:?}, got {:?}", clip(&r.text()))
        }),
    }
}

/// `Content-Type` of `r` is `want` (bare or with parameters); text/javascript is
/// application/javascript (RFC 9239).
fn content_type_is(r: Result<Reply, String>, want: &str) -> Outcome {
    match r {
        Err(why) => Outcome::Fail(why),
        Ok(r) => {
            let got = r.field("content-type").unwrap_or("").to_string();
            let norm = |s: &str| s.replace("text/javascript", "application/javascript");
            let (g, w) = (norm(&got), norm(want));
            verdict(g == w || g.starts_with(&format!("{w};")), || {
                format!("Content-Type {got:?}, expected {want:?}")
            })
        }
    }
}

fn status_is(r: Result<Reply, String>, want: u16) -> Outcome {
    match r {
        Err(why) => Outcome::Fail(why),
        Ok(r) => verdict(r.status == want, || {
            format!("HTTP {}, expected {want}", r.status)
        }),
    }
}

fn clip(s: &str) -> String {
    if s.len() > 80 {
        format!("{}…", &s[..s.floor_char_boundary(80)])
    } else {
        s.to_string()
    }
}

/// Every check of `profile` against `t`.
pub fn validate(profile: &Profile, t: &Target, rng: &mut Rng) -> Vec<Check> {
    match profile.family {
        Family::Baseline => baseline(t, rng),
        Family::Pipelined => pipelined(t),
        Family::Json => json_h1(t, rng),
        Family::JsonComp => {
            let mut c = json_h1(t, rng);
            c.extend(json_comp(t, rng));
            c
        }
        Family::JsonTls => json_tls(t, rng),
        Family::Upload => upload(t, rng),
        Family::Static => static_h1(t, rng),
        Family::StaticTls => static_tls(t, rng),
        Family::BaselineH2 => baseline_h2(t, rng),
        Family::StaticH2 => static_h2(t),
        Family::BaselineH2c => baseline_h2c(t, rng),
        Family::JsonH2c => json_h2c(t, rng),
        Family::BaselineH3 => h3(t, rng, false),
        Family::StaticH3 => h3(t, rng, true),
        Family::Grpc => grpc(t, rng, false),
        Family::GrpcTls => grpc(t, rng, true),
        Family::EchoWs => echo_ws(t, rng),
        // HttpArena validates all three WebSocket profiles with the echo checks; the arena adds
        // each one's own shape.
        Family::EchoWsPipeline => {
            let mut c = echo_ws(t, rng);
            c.extend(echo_ws_pipeline(t, rng));
            c
        }
        Family::EchoWsLimited => {
            let mut c = echo_ws(t, rng);
            c.extend(echo_ws_limited(t, rng));
            c
        }
        Family::AsyncDb => async_db(t, rng),
        Family::Fortunes => fortunes(t),
        Family::Crud => crud(t, rng),
        Family::ProductionStack => production_stack(t, rng),
        Family::Async => async_delay(t, rng),
        Family::Echo8gbit => echo_8gbit(t, rng),
    }
}

// ---- HTTP/1.1: baseline, pipelined ---------------------------------------------------------

fn baseline(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let a = t.h1;
    let q = "/baseline11?a=13&b=42";
    let plain = [("Content-Type", "text/plain")];
    let chunked = [
        ("Content-Type", "text/plain"),
        ("Transfer-Encoding", "chunked"),
    ];
    let mut c = vec![
        (
            "GET /baseline11?a=13&b=42".into(),
            body_is(wire::get(a, None, q, &[]), "55"),
        ),
        (
            "POST /baseline11 body=20".into(),
            body_is(wire::send(a, None, "POST", q, &plain, Some(b"20")), "75"),
        ),
        (
            "POST /baseline11 chunked body=20".into(),
            body_is(wire::send(a, None, "POST", q, &chunked, Some(b"20")), "75"),
        ),
        (
            "GET /baseline11 Content-Type".into(),
            content_type_is(wire::get(a, None, q, &[]), "text/plain"),
        ),
        (
            "POST /baseline11 Content-Type".into(),
            content_type_is(
                wire::send(a, None, "POST", q, &plain, Some(b"20")),
                "text/plain",
            ),
        ),
    ];
    let (x, y) = (rng.between(100, 999), rng.between(100, 999));
    c.push((
        format!("GET /baseline11?a={x}&b={y} (random)"),
        body_is(
            wire::get(a, None, &format!("/baseline11?a={x}&b={y}"), &[]),
            &(x + y).to_string(),
        ),
    ));
    let b1 = rng.between(100, 999);
    let mut b2 = rng.between(100, 999);
    while b2 == b1 {
        b2 = rng.between(100, 999);
    }
    for (i, b) in [b1, b2].into_iter().enumerate() {
        c.push((
            format!("POST body={b} (cache check {})", i + 1),
            body_is(
                wire::send(a, None, "POST", q, &plain, Some(b.to_string().as_bytes())),
                &(55 + b).to_string(),
            ),
        ));
    }
    let post = b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n";
    let splits: [(&str, &[&[u8]], &str); 5] = [
        (
            "split request line",
            &[b"GET /baseli", b"ne11?a=13&b=42 HTTP/1.1\r\n", b"Host: localhost\r\nConnection: close\r\n\r\n"],
            "55",
        ),
        (
            "split before headers",
            &[
                b"GET /baseline11?a=13&b=42 HTTP/1.1\r\n",
                b"Host: localhost\r\n",
                b"User-Agent: arena-frag/1.0\r\n",
                b"Connection: close\r\n\r\n",
            ],
            "55",
        ),
        ("split headers/body", &[post, b"20"], "75"),
        ("split body bytes", &[post, b"2", b"0"], "75"),
        (
            "lower-cased content-length",
            &[b"POST /baseline11?a=13&b=42 HTTP/1.1\r\nhost: localhost\r\ncontent-type: text/plain\r\ncontent-length: 2\r\nconnection: close\r\n\r\n", b"20"],
            "75",
        ),
    ];
    for (name, frags, want) in splits {
        c.push((
            format!("fragmented: {name}"),
            body_is(wire::exchange(a, None, frags), want),
        ));
    }
    c.push((
        "fragmented at every byte offset".into(),
        every_offset(a, rng),
    ));
    c
}

/// Requests split in two at every byte offset (GET, a Content-Length body, a chunked body),
/// each answered with its own sum: the parser must join them whatever the split.
fn every_offset(a: SocketAddr, rng: &mut Rng) -> Outcome {
    let (x, y, b) = (
        rng.between(1, 999),
        rng.between(1, 999),
        rng.between(10, 99),
    );
    let get = format!(
        "GET /baseline11?a={x}&b={y} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let cl = format!(
        "POST /baseline11?a={x}&b={y} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{b}"
    );
    let chunked = format!(
        "POST /baseline11?a={x}&b={y} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{b}\r\n0\r\n\r\n"
    );
    let mut cases: Vec<(Vec<u8>, usize, String)> = Vec::new();
    for (req, want) in [(get, x + y), (cl, x + y + b), (chunked, x + y + b)] {
        for at in 1..req.len() {
            cases.push((req.clone().into_bytes(), at, want.to_string()));
        }
    }
    for batch in cases.chunks(FRAGMENT_BATCH) {
        let mut open = Vec::new();
        for (req, at, want) in batch {
            match wire::connect(a, None) {
                Ok(mut s) => {
                    if let Err(e) = s.write_all(&req[..*at]).and_then(|()| s.flush()) {
                        return Outcome::Fail(format!("split at byte {at}: write: {e}"));
                    }
                    open.push((s, req, *at, want));
                }
                Err(why) => return Outcome::Fail(why),
            }
        }
        std::thread::sleep(wire::FRAGMENT_PAUSE);
        for (mut s, req, at, want) in open {
            let got = s
                .write_all(&req[at..])
                .map_err(|e| format!("write: {e}"))
                .and_then(|()| s.flush().map_err(|e| format!("write: {e}")))
                .and_then(|()| wire::read_reply(&mut s));
            match got {
                Ok(r) if r.status == 200 && r.text() == *want => {}
                Ok(r) => {
                    return Outcome::Fail(format!(
                        "split at byte {at} of {:?}: HTTP {} {:?}, expected {want}",
                        clip(&String::from_utf8_lossy(&req[..at])),
                        r.status,
                        clip(&r.text())
                    ));
                }
                Err(why) => return Outcome::Fail(format!("split at byte {at}: {why}")),
            }
        }
    }
    Outcome::Pass
}

fn pipelined(t: &Target) -> Vec<Check> {
    let a = t.h1;
    let mut c = vec![
        (
            "GET /pipeline".into(),
            body_is(wire::get(a, None, "/pipeline", &[]), "ok"),
        ),
        (
            "GET /pipeline Content-Type".into(),
            content_type_is(wire::get(a, None, "/pipeline", &[]), "text/plain"),
        ),
    ];
    // The profile's shape: 16 requests written before any answer is read.
    let outcome = (|| -> Result<(), String> {
        let mut s = wire::connect(a, None)?;
        let one = b"GET /pipeline HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let mut all = one.repeat(15);
        all.extend_from_slice(
            b"GET /pipeline HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        );
        s.write_all(&all).map_err(|e| format!("write: {e}"))?;
        s.flush().map_err(|e| format!("write: {e}"))?;
        let mut wire_bytes = Vec::new();
        s.read_to_end(&mut wire_bytes)
            .map_err(|e| format!("read: {e}"))?;
        let answers = wire::split_replies(&wire_bytes)?;
        if answers.len() != 16 {
            return Err(format!("{} answers to 16 requests", answers.len()));
        }
        for (i, r) in answers.iter().enumerate() {
            if r.status != 200 || r.text() != "ok" {
                return Err(format!(
                    "answer {}: HTTP {} {:?}",
                    i + 1,
                    r.status,
                    r.text()
                ));
            }
        }
        Ok(())
    })();
    c.push((
        "arena: 16 requests pipelined on one connection, 16 answers".into(),
        outcome.map_or_else(Outcome::Fail, |()| Outcome::Pass),
    ));
    c
}

// ---- /json/{count} ---------------------------------------------------------------------------

/// Checks one `/json/{count}?m=` body: `count`, the item shape, and (with the dataset the
/// server was given) every field equal to the dataset's first `count` items, `total` computed
/// on `m`; without it, `total = price × quantity × m` alone.
fn json_body(body: &[u8], count: u64, m: u64, dataset: Option<&[Value]>) -> Result<(), String> {
    let d: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let items = d["items"].as_array().ok_or("no items array")?;
    if d["count"].as_u64() != Some(count) || items.len() as u64 != count {
        return Err(format!(
            "count {} and {} items, expected {count}",
            d["count"],
            items.len()
        ));
    }
    for (i, it) in items.iter().enumerate() {
        let shaped = ["id", "name", "category", "price", "quantity", "total"]
            .iter()
            .all(|k| !it[k].is_null())
            && it["tags"].is_array()
            && it["active"].is_boolean()
            && !it["rating"]["score"].is_null()
            && !it["rating"]["count"].is_null();
        if !shaped {
            return Err(format!("item {i} lacks a field of the schema"));
        }
        let num = |k: &str| it[k].as_i64().unwrap_or(i64::MIN);
        if num("total")
            != num("price")
                .saturating_mul(num("quantity"))
                .saturating_mul(m as i64)
        {
            return Err(format!(
                "item {i}: total {} is not price × quantity × {m}",
                it["total"]
            ));
        }
        if let Some(src) = dataset.and_then(|ds| ds.get(i)) {
            for k in [
                "id", "name", "category", "price", "quantity", "active", "tags",
            ] {
                if it[k] != src[k] {
                    return Err(format!(
                        "item {i}: {k} {} is not the dataset's {}",
                        it[k], src[k]
                    ));
                }
            }
        }
    }
    Ok(())
}

fn json_pairs(rng: &mut Rng, n: usize, counts: (u64, u64), ms: (u64, u64)) -> Vec<(u64, u64)> {
    (0..n)
        .map(|_| (rng.between(counts.0, counts.1), rng.between(ms.0, ms.1)))
        .collect()
}

/// `name`: the random pairs fetched with `fetch` and checked against the dataset.
fn json_random(
    name: &str,
    pairs: &[(u64, u64)],
    t: &Target,
    mut fetch: impl FnMut(&str) -> Result<Reply, String>,
) -> Check {
    for &(count, m) in pairs {
        let target = format!("/json/{count}?m={m}");
        let outcome = fetch(&target).and_then(|r| {
            if r.status != 200 {
                return Err(format!("HTTP {}", r.status));
            }
            json_body(&r.body, count, m, t.dataset.as_deref())
        });
        if let Err(why) = outcome {
            return (name.into(), Outcome::Fail(format!("GET {target}: {why}")));
        }
    }
    (name.into(), Outcome::Pass)
}

fn json_h1(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let pairs = json_pairs(rng, 4, (1, 50), (2, 97));
    vec![
        json_random(
            &format!(
                "GET /json/{{count}}?m=X, 4 random pairs{}",
                t.dataset_note()
            ),
            &pairs,
            t,
            |p| wire::get(t.h1, None, p, &[]),
        ),
        (
            "GET /json Content-Type".into(),
            content_type_is(
                wire::get(t.h1, None, "/json/50?m=1", &[]),
                "application/json",
            ),
        ),
    ]
}

/// The body of `r` decoded by its `Content-Encoding` (gzip or br), or as it came.
fn decoded(r: &Reply) -> Result<Vec<u8>, String> {
    crate::firstflight::coding::decode(r.field("content-encoding"), &r.body)
        .map_err(|e| e.to_string())
}

fn json_comp(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let ae = [("Accept-Encoding", "gzip, br")];
    let enc = wire::get(t.h1, None, "/json/50?m=1", &ae).map(|r| {
        r.field("content-encoding")
            .unwrap_or("")
            .to_ascii_lowercase()
    });
    let mut c = vec![(
        "json-comp Content-Encoding gzip or br".into(),
        match enc {
            Err(why) => Outcome::Fail(why),
            Ok(e) => verdict(e == "gzip" || e == "br", || {
                format!("Content-Encoding {e:?}")
            }),
        },
    )];
    let pairs = json_pairs(rng, 3, (5, 50), (2, 89));
    c.push(json_random(
        "json-comp: 3 random pairs, compressed",
        &pairs,
        t,
        |p| {
            // As HttpArena's curl --compressed: whatever coding came is decoded (a small body
            // may come uncompressed); /json/50 above must be compressed.
            let r = wire::get(t.h1, None, p, &ae)?;
            Ok(Reply {
                body: decoded(&r)?,
                ..r
            })
        },
    ));
    c.push((
        "json-comp per request: no Content-Encoding without Accept-Encoding".into(),
        match wire::get(t.h1, None, "/json/50?m=1", &[]) {
            Err(why) => Outcome::Fail(why),
            Ok(r) => verdict(r.field("content-encoding").is_none(), || {
                format!("Content-Encoding {:?}", r.field("content-encoding"))
            }),
        },
    ));
    c
}

fn need<T: Copy>(v: Option<T>, what: &str) -> Result<T, Vec<Check>> {
    v.ok_or_else(|| {
        vec![(
            what.to_string(),
            Outcome::NotRun(format!("the server under test has no {what}")),
        )]
    })
}

fn json_tls(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = super::tls_posture::check(tls, ALPN_H1, t.cert.as_deref());
    c.push((
        "json-tls negotiates HTTP/1.1".into(),
        match wire::get(tls, Some(ALPN_H1), "/json/1?m=1", &[]) {
            Err(why) => Outcome::Fail(why),
            Ok(r) => verdict(r.status == 200 && r.version == "1.1", || {
                format!("HTTP {}", r.status)
            }),
        },
    ));
    let pairs = json_pairs(rng, 4, (1, 50), (2, 89));
    c.push(json_random(
        "json-tls: 4 random pairs over TLS",
        &pairs,
        t,
        |p| wire::get(tls, Some(ALPN_H1), p, &[]),
    ));
    c.push((
        "json-tls Content-Type".into(),
        content_type_is(
            wire::get(tls, Some(ALPN_H1), "/json/1?m=1", &[]),
            "application/json",
        ),
    ));
    c
}

// ---- upload ----------------------------------------------------------------------------------

fn upload(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let octets = [("Content-Type", "application/octet-stream")];
    let post = |body: &[u8]| wire::send(t.h1, None, "POST", "/upload", &octets, Some(body));
    let small = b"Hello, HttpArena!";
    let random = rng.text(48);
    let mut c = vec![
        (
            "POST /upload small body".into(),
            body_is(post(small), &small.len().to_string()),
        ),
        (
            "POST /upload random body".into(),
            body_is(post(random.as_bytes()), &random.len().to_string()),
        ),
    ];
    let mut outcome = Outcome::Pass;
    for (label, size) in [
        ("500K", 512_000usize),
        ("2M", 2_097_152),
        ("10M", 10_485_760),
        ("20M", 20_971_520),
    ] {
        if let o @ Outcome::Fail(_) = body_is(post(&rng.bytes(size)), &size.to_string()) {
            outcome = match o {
                Outcome::Fail(why) => Outcome::Fail(format!("{label}: {why}")),
                o => o,
            };
            break;
        }
    }
    c.push(("POST /upload 500K, 2M, 10M, 20M".into(), outcome));
    c
}

// ---- static files ----------------------------------------------------------------------------

type Fetch<'a> = &'a dyn Fn(&str, &[(&str, &str)]) -> Result<Reply, String>;

/// The checks HttpArena makes of /static over any protocol.
fn static_common(t: &Target, fetch: Fetch<'_>, sizes_and_coding: bool) -> Vec<Check> {
    let mut c = Vec::new();
    for (file, ct) in [
        ("reset.css", "text/css"),
        ("app.js", "application/javascript"),
        ("manifest.json", "application/json"),
    ] {
        c.push((
            format!("GET /static/{file} Content-Type"),
            content_type_is(fetch(&format!("/static/{file}"), &[]), ct),
        ));
    }
    let Some(dir) = t.static_dir.as_deref() else {
        c.push((
            "static file sizes".into(),
            Outcome::NotRun("the arena does not know the server's static directory".into()),
        ));
        return c;
    };
    let mut sizes = Outcome::Pass;
    let mut coding = Outcome::Pass;
    let mut compressed = 0;
    for f in STATIC_FILES {
        let want = std::fs::metadata(dir.join(f.name))
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        match fetch(&format!("/static/{}", f.name), &[]) {
            Ok(r) if r.status == 200 && r.body.len() == want => {}
            Ok(r) => {
                sizes = Outcome::Fail(format!(
                    "{}: HTTP {}, {} bytes, expected {want}",
                    f.name,
                    r.status,
                    r.body.len()
                ));
                break;
            }
            Err(why) => {
                sizes = Outcome::Fail(format!("{}: {why}", f.name));
                break;
            }
        }
        if !sizes_and_coding {
            continue;
        }
        match fetch(
            &format!("/static/{}", f.name),
            &[("Accept-Encoding", "br, gzip")],
        ) {
            Ok(r) if r.field("content-encoding").is_some() => match decoded(&r) {
                Ok(body) if body.len() == want => compressed += 1,
                Ok(body) => {
                    coding = Outcome::Fail(format!(
                        "{}: decoded to {} bytes, expected {want}",
                        f.name,
                        body.len()
                    ));
                }
                Err(why) => coding = Outcome::Fail(format!("{}: {why}", f.name)),
            },
            Ok(_) => {}
            Err(why) => coding = Outcome::Fail(format!("{}: {why}", f.name)),
        }
    }
    c.push((
        format!("static file sizes ({} files)", STATIC_FILES.len()),
        sizes,
    ));
    if sizes_and_coding {
        if coding == Outcome::Pass && compressed == 0 {
            coding = Outcome::NotRun("no file was served compressed".into());
        }
        c.push((
            format!("static compression ({compressed} files compressed, decoded to their size)"),
            coding,
        ));
    }
    c.push((
        "GET /static/nonexistent.txt is 404".into(),
        status_is(fetch("/static/nonexistent.txt", &[]), 404),
    ));
    c
}

/// Replaces `target` (and its .br/.gz siblings) with same-length random bytes while the
/// server runs; the answer to `accept` must change within [`STATIC_STALE_WINDOW`], and come
/// back once the originals are restored.
fn staleness(t: &Target, fetch: Fetch<'_>, target: &str, accept: &str, rng: &mut Rng) -> Outcome {
    let Some(dir) = t.static_dir.as_deref() else {
        return Outcome::NotRun("the arena does not know the server's static directory".into());
    };
    let path = format!("/static/{target}");
    let served = || fetch(&path, &[("Accept-Encoding", accept)]).map(|r| r.body);
    let before = match served() {
        Ok(b) if !b.is_empty() => b,
        Ok(_) => return Outcome::Fail(format!("{target}: empty before the probe")),
        Err(why) => return Outcome::Fail(why),
    };
    let files: Vec<_> = ["", ".br", ".gz"]
        .iter()
        .map(|s| dir.join(format!("{target}{s}")))
        .filter(|p| p.exists())
        .collect();
    let mut saved = Vec::new();
    for f in &files {
        let Ok(orig) = std::fs::read(f) else { continue };
        let new = rng.bytes(orig.len());
        if replace(f, &new).is_err() {
            restore(&saved);
            return Outcome::NotRun(format!("cannot write {}", f.display()));
        }
        saved.push((f.clone(), orig));
    }
    let changed = poll(STATIC_STALE_WINDOW, || served().is_ok_and(|b| b != before));
    restore(&saved);
    let back = poll(STATIC_STALE_WINDOW, || served().is_ok_and(|b| b == before));
    match (changed, back) {
        (Some(_), Some(_)) => Outcome::Pass,
        (None, _) => Outcome::Fail(format!(
            "{target} and its siblings were replaced on disk and the same bytes were served for {STATIC_STALE_WINDOW:?}"
        )),
        (Some(_), None) => Outcome::Fail(format!(
            "the original {target} did not come back within {STATIC_STALE_WINDOW:?}"
        )),
    }
}

/// Writes `bytes` to a new file beside `path` and renames it over `path` (as a deploy does).
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("arena-tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn restore(saved: &[(std::path::PathBuf, Vec<u8>)]) {
    for (p, orig) in saved {
        let _ = replace(p, orig);
    }
}

/// Calls `ok` until it holds or `window` has passed (a last try at the end); the time it took.
fn poll(window: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if ok() {
            return Some(start.elapsed());
        }
        if start.elapsed() >= window {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn static_h1(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let fetch = |p: &str, f: &[(&str, &str)]| wire::get(t.h1, None, p, f);
    let mut c = static_common(t, &fetch, true);
    c.push((
        "static freshness: reset.css replaced on disk".into(),
        staleness(t, &fetch, "reset.css", "identity", rng),
    ));
    c.push((
        "static freshness: reset.css .br/.gz replaced".into(),
        staleness(t, &fetch, "reset.css", "br, gzip", rng),
    ));
    c
}

fn static_tls(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = super::tls_posture::check(tls, ALPN_H1, t.cert.as_deref());
    let fetch = |p: &str, f: &[(&str, &str)]| wire::get(tls, Some(ALPN_H1), p, f);
    c.push((
        "static-tls negotiates HTTP/1.1".into(),
        match fetch("/static/reset.css", &[]) {
            Err(why) => Outcome::Fail(why),
            Ok(r) => verdict(r.status == 200 && r.version == "1.1", || {
                format!("HTTP {}", r.status)
            }),
        },
    ));
    c.extend(static_common(t, &fetch, true));
    c.push((
        "static-tls file follows the disk (hero.webp)".into(),
        staleness(t, &fetch, "hero.webp", "identity", rng),
    ));
    c.push((
        "static-tls variant follows the disk (app.js, br/gzip)".into(),
        staleness(t, &fetch, "app.js", "br;q=1, gzip;q=0.8", rng),
    ));
    c
}

fn static_h2(t: &Target) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = super::tls_posture::check(tls, ALPN_H2, t.cert.as_deref());
    let fetch = |p: &str, f: &[(&str, &str)]| h2::request(H2::Tls(tls), "GET", p, f, None);
    c.extend(static_common(t, &fetch, false));
    c
}

// ---- HTTP/2 ----------------------------------------------------------------------------------

fn sums_h2(to: H2, rng: &mut Rng, over: &str) -> Vec<Check> {
    let get = |p: &str| h2::request(to, "GET", p, &[], None);
    let (x, y) = (rng.between(100, 999), rng.between(100, 999));
    vec![
        (
            format!("{over} protocol is HTTP/2"),
            match get("/baseline2?a=1&b=1") {
                Err(why) => Outcome::Fail(why),
                Ok(r) => verdict(r.status == 200, || format!("HTTP {}", r.status)),
            },
        ),
        (
            format!("GET /baseline2?a=13&b=42 over {over}"),
            body_is(get("/baseline2?a=13&b=42"), "55"),
        ),
        (
            format!("GET /baseline2?a={x}&b={y} over {over} (random)"),
            body_is(
                get(&format!("/baseline2?a={x}&b={y}")),
                &(x + y).to_string(),
            ),
        ),
        (
            format!("GET /baseline2 Content-Type over {over}"),
            content_type_is(get("/baseline2?a=1&b=1"), "text/plain"),
        ),
    ]
}

fn baseline_h2(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = super::tls_posture::check(tls, ALPN_H2, t.cert.as_deref());
    c.extend(sums_h2(H2::Tls(tls), rng, "HTTP/2"));
    c
}

fn baseline_h2c(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let h2c = match need(t.h2c, "h2c listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = sums_h2(H2::Clear(h2c), rng, "h2c");
    c.insert(
        1,
        (
            "the h2c port refuses HTTP/1.1".into(),
            match wire::get(h2c, None, "/baseline2?a=1&b=1", &[]) {
                Ok(r) if r.status == 200 => {
                    Outcome::Fail("the h2c port answered HTTP/1.1 with 200".into())
                }
                _ => Outcome::Pass,
            },
        ),
    );
    c
}

fn json_h2c(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let h2c = match need(t.h2c, "h2c listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let get = |p: &str| h2::request(H2::Clear(h2c), "GET", p, &[], None);
    let pairs = json_pairs(rng, 4, (1, 50), (2, 97));
    vec![
        (
            "/json over HTTP/2 cleartext".into(),
            match get("/json/1?m=1") {
                Err(why) => Outcome::Fail(why),
                Ok(r) => verdict(r.status == 200, || format!("HTTP {}", r.status)),
            },
        ),
        (
            "GET /json Content-Type (h2c)".into(),
            content_type_is(get("/json/1?m=1"), "application/json"),
        ),
        json_random(
            "GET /json/{count}?m=X over h2c, 4 random pairs",
            &pairs,
            t,
            get,
        ),
    ]
}

// ---- HTTP/3 ----------------------------------------------------------------------------------

fn h3(t: &Target, rng: &mut Rng, files: bool) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    if !t.quic {
        return vec![(
            "HTTP/3".into(),
            Outcome::NotRun("the server under test does not serve QUIC".into()),
        )];
    }
    let timeouts = crate::firstflight::Timeouts {
        connect: wire::IO_TIMEOUT,
        exchange: wire::IO_TIMEOUT,
    };
    let verify = linerate_load::tls::Verify::Insecure;
    let mut outcome = Outcome::Pass;
    for _ in 0..4 {
        let (path, want) = if files {
            let size = t
                .static_dir
                .as_deref()
                .and_then(|d| std::fs::metadata(d.join("reset.css")).ok())
                .map(|m| m.len());
            ("/static/reset.css".to_string(), size)
        } else {
            let (x, y) = (rng.between(100, 999), rng.between(100, 999));
            (
                format!("/baseline2?a={x}&b={y}"),
                Some((x + y).to_string().len() as u64),
            )
        };
        let url = match crate::firstflight::HttpUrl::parse(&format!("https://{tls}{path}")) {
            Ok(u) => u,
            Err(e) => return vec![("HTTP/3".into(), Outcome::Fail(e.to_string()))],
        };
        match crate::firstflight::quic::get(&url, None, timeouts, &verify) {
            Ok(f) if f.status == 200 && want.is_none_or(|w| w == f.body_bytes) => {}
            Ok(f) => {
                outcome = Outcome::Fail(format!(
                    "GET {path}: HTTP {}, {} body bytes, expected {want:?}",
                    f.status, f.body_bytes
                ));
                break;
            }
            Err(e) => {
                outcome = Outcome::Fail(format!("GET {path}: {e}"));
                break;
            }
        }
    }
    let name = if files {
        "static-h3: 4 × /static/reset.css over QUIC, its size"
    } else {
        "baseline-h3: 4 random sums over QUIC (2xx, the sum's length)"
    };
    vec![(name.into(), outcome)]
}

// ---- gRPC ------------------------------------------------------------------------------------

fn varint(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A length-prefixed `SumRequest{a, b}` (fields 1 and 2, varints).
pub fn sum_request(a: u64, b: u64) -> Vec<u8> {
    let mut msg = vec![0x08];
    varint(&mut msg, a);
    msg.push(0x10);
    varint(&mut msg, b);
    let mut out = vec![0];
    out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    out.extend_from_slice(&msg);
    out
}

/// `SumReply.result` from a length-prefixed answer.
fn sum_reply(data: &[u8]) -> Result<u64, String> {
    if data.len() < 5 {
        return Err(format!(
            "a {}-byte answer, shorter than a message prefix",
            data.len()
        ));
    }
    if data[0] != 0 {
        return Err(format!("compressed flag {}", data[0]));
    }
    let n = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    let msg = data.get(5..5 + n).ok_or("a truncated message")?;
    if msg.is_empty() {
        return Ok(0);
    }
    if msg[0] != 0x08 {
        return Err(format!("field tag {:#04x}, expected result (0x08)", msg[0]));
    }
    let (mut v, mut shift) = (0u64, 0);
    for &b in &msg[1..] {
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
    }
    Err("a bad varint".into())
}

fn grpc(t: &Target, rng: &mut Rng, tls: bool) -> Vec<Check> {
    let (to, over, mut c) = if tls {
        let a = match need(t.tls, "TLS listener") {
            Ok(a) => a,
            Err(c) => return c,
        };
        (
            H2::Tls(a),
            "h2+TLS",
            super::tls_posture::check(a, ALPN_H2, t.cert.as_deref()),
        )
    } else {
        (H2::Clear(t.h1), "h2c", Vec::new())
    };
    for which in ["", " (second random pair)"] {
        let (a, b) = (rng.between(100, 999), rng.between(100, 999));
        let outcome = h2::request(
            to,
            "POST",
            "/benchmark.BenchmarkService/GetSum",
            &[("content-type", "application/grpc"), ("te", "trailers")],
            Some(&sum_request(a, b)),
        )
        .and_then(|r| {
            if let Some(s) = r.field("grpc-status").filter(|s| *s != "0") {
                return Err(format!(
                    "grpc-status {s} ({})",
                    r.field("grpc-message").unwrap_or("")
                ));
            }
            let got = sum_reply(&r.body)?;
            if got == a + b {
                Ok(())
            } else {
                Err(format!("GetSum({a}, {b}) returned {got}"))
            }
        });
        c.push((
            format!("GetSum over {over}{which}"),
            outcome.map_or_else(Outcome::Fail, |()| Outcome::Pass),
        ));
    }
    c
}

// ---- WebSocket -------------------------------------------------------------------------------

fn ws_check(name: &str, f: impl FnOnce() -> Result<(), String>) -> Check {
    (
        name.into(),
        f().map_or_else(Outcome::Fail, |()| Outcome::Pass),
    )
}

fn expect_echo(got: ws::Message, opcode: u8, payload: &[u8]) -> Result<(), String> {
    if got.opcode == opcode && got.payload == payload {
        Ok(())
    } else {
        Err(format!(
            "sent opcode {opcode} with {} bytes, got opcode {} with {} bytes",
            payload.len(),
            got.opcode,
            got.payload.len()
        ))
    }
}

/// HttpArena's echo checks (validate-ws.py, as its echo validation page lists them), run for
/// all three WebSocket profiles; the arena adds the ping's pong.
fn echo_ws(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let a = t.h1;
    let mut seed = Rng::new(rng.next_u64());
    let mut c = vec![
        ws_check(
            "upgrade: 101 and the right Sec-WebSocket-Accept; random text echoed",
            || {
                let mut w = Ws::open(a, "/ws", &mut seed)?;
                let m = format!("HttpArena-validate-{:016x}", seed.next_u64());
                w.send(ws::TEXT, m.as_bytes())?;
                expect_echo(w.recv()?, ws::TEXT, m.as_bytes())
            },
        ),
        ws_check("256 random bytes echoed as binary", || {
            let mut w = Ws::open(a, "/ws", &mut seed)?;
            let m = seed.bytes(256);
            w.send(ws::BINARY, &m)?;
            expect_echo(w.recv()?, ws::BINARY, &m)
        }),
        ws_check("5 messages sent at once, echoed in order", || {
            let mut w = Ws::open(a, "/ws", &mut seed)?;
            let msgs: Vec<String> = (0..5).map(|_| seed.text(24)).collect();
            for m in &msgs {
                w.send(ws::TEXT, m.as_bytes())?;
            }
            for m in &msgs {
                expect_echo(w.recv()?, ws::TEXT, m.as_bytes())?;
            }
            Ok(())
        }),
        ws_check(
            "close 1000 \"validate done\" answered with close 1000",
            || {
                let mut w = Ws::open(a, "/ws", &mut seed)?;
                let mut payload = 1000u16.to_be_bytes().to_vec();
                payload.extend_from_slice(b"validate done");
                w.send(ws::CLOSE, &payload)?;
                let got = w.recv()?;
                if got.opcode == ws::CLOSE
                    && got.payload.get(..2) == Some(&1000u16.to_be_bytes()[..])
                {
                    Ok(())
                } else {
                    Err(format!("opcode {} payload {:?}", got.opcode, got.payload))
                }
            },
        ),
        (
            "GET /ws without the upgrade: 400 or 426".into(),
            match wire::get(a, None, "/ws", &[]) {
                Err(why) => Outcome::Fail(why),
                Ok(r) => verdict(r.status == 400 || r.status == 426, || {
                    format!("HTTP {}", r.status)
                }),
            },
        ),
        ws_check("arena: a ping answered with its payload", || {
            let mut w = Ws::open(a, "/ws", &mut seed)?;
            let m = seed.bytes(8);
            w.send(ws::PING, &m)?;
            expect_echo(w.recv()?, ws::PONG, &m)
        }),
    ];
    c.push(ws_check(
        "still serving afterwards: \"health\" echoed, closed cleanly",
        || {
            let mut w = Ws::open(a, "/ws", &mut seed)?;
            w.send(ws::TEXT, b"health")?;
            expect_echo(w.recv()?, ws::TEXT, b"health")?;
            w.send(ws::CLOSE, &1000u16.to_be_bytes())?;
            match w.recv()?.opcode {
                ws::CLOSE => Ok(()),
                op => Err(format!("opcode {op} for the close")),
            }
        },
    ));
    c
}

fn echo_ws_pipeline(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let mut seed = Rng::new(rng.next_u64());
    vec![ws_check(
        "arena: 16 messages in flight, echoed in order",
        || {
            let mut w = Ws::open(t.h1, "/ws", &mut seed)?;
            let msgs: Vec<String> = (0..16).map(|i| format!("{i}:{}", seed.text(32))).collect();
            for m in &msgs {
                w.send(ws::TEXT, m.as_bytes())?;
            }
            for m in &msgs {
                expect_echo(w.recv()?, ws::TEXT, m.as_bytes())?;
            }
            Ok(())
        },
    )]
}

fn echo_ws_limited(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let mut seed = Rng::new(rng.next_u64());
    vec![ws_check(
        "arena: 3 connections of 10 messages each, closed and reopened",
        || {
            for _ in 0..3 {
                let mut w = Ws::open(t.h1, "/ws", &mut seed)?;
                for _ in 0..10 {
                    let m = seed.text(24);
                    w.send(ws::TEXT, m.as_bytes())?;
                    expect_echo(w.recv()?, ws::TEXT, m.as_bytes())?;
                }
                w.send(ws::CLOSE, &1000u16.to_be_bytes())?;
                if w.recv()?.opcode != ws::CLOSE {
                    return Err("no close answered".into());
                }
            }
            Ok(())
        },
    )]
}

// ---- database profiles -----------------------------------------------------------------------

fn json_of(r: Result<Reply, String>) -> Result<(u16, Value, Reply), String> {
    let r = r?;
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    Ok((r.status, v, r))
}

fn async_db(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let a = t.h1;
    let mut outcome = Outcome::Pass;
    for _ in 0..4 {
        let min = rng.between(1, 120);
        let max = min + rng.between(20, 300);
        let limit = rng.between(1, 50);
        let q = format!("/async-db?min={min}&max={max}&limit={limit}");
        let ok = json_of(wire::get(a, None, &q, &[])).and_then(|(s, v, _)| {
            let items = v["items"].as_array().cloned().unwrap_or_default();
            let shaped = !items.is_empty()
                && items.iter().all(|i| {
                    !i["rating"]["score"].is_null()
                        && i["tags"].is_array()
                        && i["active"].is_boolean()
                });
            if s == 200 && v["count"].as_u64() == Some(limit) && shaped {
                Ok(())
            } else {
                Err(format!(
                    "GET {q}: HTTP {s}, count {}, items shaped {shaped}",
                    v["count"]
                ))
            }
        });
        if let Err(why) = ok {
            outcome = Outcome::Fail(why);
            break;
        }
    }
    vec![
        ("GET /async-db, 4 random ranges and limits".into(), outcome),
        (
            "GET /async-db Content-Type".into(),
            content_type_is(
                wire::get(a, None, "/async-db?min=10&max=50&limit=50", &[]),
                "application/json",
            ),
        ),
        (
            "GET /async-db empty range: count 0".into(),
            match json_of(wire::get(
                a,
                None,
                "/async-db?min=9999&max=9999&limit=50",
                &[],
            )) {
                Ok((_, v, _)) => verdict(v["count"].as_u64() == Some(0), || {
                    format!("count {}", v["count"])
                }),
                Err(why) => Outcome::Fail(why),
            },
        ),
    ]
}

/// HttpArena's fortunes page: `<tr` rows, the 201 data rows (200 seeded and the runtime one)
/// and up to 9 of scaffolding (a header row, a footer).
pub const FORTUNES_ROWS: std::ops::RangeInclusive<usize> = 201..=210;
/// Its body size band: 18 KiB (a stripped page is smaller) to 64,000 bytes (a layout loop is
/// larger); HttpArena says "18 KB and 64 KB", read here on the strict side of each.
pub const FORTUNES_BYTES: std::ops::RangeInclusive<usize> = 18 * 1024..=64_000;

/// HttpArena's fortunes checks (feature-based, not byte-exact): text/html, a DOCTYPE, 201–210
/// `<tr`, the runtime row, row 11's `<script>` escaped and never raw, the size band.
fn fortunes(t: &Target) -> Vec<Check> {
    let r = wire::get(t.h1, None, "/fortunes", &[]);
    let body = |r: &Result<Reply, String>| match r {
        Ok(r) if r.status == 200 => Ok(String::from_utf8_lossy(&r.body).into_owned()),
        Ok(r) => Err(format!("HTTP {}", r.status)),
        Err(why) => Err(why.clone()),
    };
    let on_body = |f: &dyn Fn(&str) -> Outcome| match body(&r) {
        Ok(b) => f(&b),
        Err(why) => Outcome::Fail(why),
    };
    vec![
        (
            "GET /fortunes Content-Type".into(),
            content_type_is(r.clone(), "text/html"),
        ),
        (
            "DOCTYPE present".into(),
            on_body(&|b| {
                verdict(b.to_ascii_lowercase().contains("<!doctype html>"), || {
                    "no <!DOCTYPE html>".into()
                })
            }),
        ),
        (
            format!(
                "{}–{} <tr (200 seeded rows and the runtime one)",
                FORTUNES_ROWS.start(),
                FORTUNES_ROWS.end()
            ),
            on_body(&|b| {
                let n = b.matches("<tr").count();
                verdict(FORTUNES_ROWS.contains(&n), || {
                    format!(
                        "{n} <tr (a fortune table of 12 is TechEmpower's: give the arena scripts/pg.sh's ARENA_DATABASE_URL)"
                    )
                })
            }),
        ),
        (
            "runtime-injected row present".into(),
            on_body(&|b| {
                verdict(
                    b.contains("Additional fortune added at request time."),
                    || "no \"Additional fortune added at request time.\"".into(),
                )
            }),
        ),
        (
            "row 11's <script> escaped, never raw".into(),
            on_body(&|b| {
                verdict(
                    b.contains("&lt;script&gt;") && !b.contains("<script>alert"),
                    || "no &lt;script&gt;, or a raw <script>alert".into(),
                )
            }),
        ),
        (
            format!(
                "body {}–{} bytes",
                FORTUNES_BYTES.start(),
                FORTUNES_BYTES.end()
            ),
            on_body(&|b| {
                verdict(FORTUNES_BYTES.contains(&b.len()), || {
                    format!("{} bytes", b.len())
                })
            }),
        ),
    ]
}

fn x_cache(r: &Result<Reply, String>) -> String {
    match r {
        Ok(r) => r.field("x-cache").unwrap_or("").to_string(),
        Err(why) => format!("({why})"),
    }
}

fn crud(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let a = t.h1;
    let get = |p: &str| wire::get(a, None, p, &[]);
    let json = [("Content-Type", "application/json")];
    let mut c = vec![(
        "GET /crud/items?category=electronics&page=1&limit=5".into(),
        match json_of(get("/crud/items?category=electronics&page=1&limit=5")) {
            Err(why) => Outcome::Fail(why),
            Ok((s, v, _)) => {
                let items = v["items"].as_array().cloned().unwrap_or_default();
                let ok = s == 200
                    && items.len() == 5
                    && v["total"].as_u64().unwrap_or(0) > 0
                    && v["page"].as_u64() == Some(1)
                    && items.iter().all(|i| !i["rating"].is_null());
                verdict(ok, || {
                    format!(
                        "HTTP {s}, {} items, total {}, page {}",
                        items.len(),
                        v["total"],
                        v["page"]
                    )
                })
            }
        },
    )];
    c.push((
        "GET /crud/items/1".into(),
        match json_of(get("/crud/items/1")) {
            Err(why) => Outcome::Fail(why),
            Ok((_, v, _)) => verdict(v["id"].as_u64() == Some(1), || format!("id {}", v["id"])),
        },
    ));
    // A random id (HttpArena uses a fixed one, which a second run against the same server
    // would find cached already).
    let id = rng.between(2, 100_000);
    let first = x_cache(&get(&format!("/crud/items/{id}")));
    let second = x_cache(&get(&format!("/crud/items/{id}")));
    c.push((
        format!("crud cache-aside: /crud/items/{id} MISS then HIT"),
        verdict(first == "MISS" && second == "HIT", || {
            format!("X-Cache {first:?} then {second:?}")
        }),
    ));
    c.push((
        "GET /crud/items/999999 is 404".into(),
        status_is(get("/crud/items/999999"), 404),
    ));
    let new = rng.between(200_001, 299_999);
    let price = rng.between(1, 500);
    let body = format!(
        r#"{{"id":{new},"name":"ValidateItem","category":"test","price":{price},"quantity":7}}"#
    );
    c.push((
        "POST /crud/items is 201".into(),
        status_is(
            wire::send(a, None, "POST", "/crud/items", &json, Some(body.as_bytes())),
            201,
        ),
    ));
    c.push((
        format!("GET /crud/items/{new}: the created item"),
        match json_of(get(&format!("/crud/items/{new}"))) {
            Err(why) => Outcome::Fail(why),
            Ok((_, v, _)) => verdict(
                v["id"].as_u64() == Some(new) && v["price"].as_u64() == Some(price),
                || format!("id {} price {}", v["id"], v["price"]),
            ),
        },
    ));
    let _ = get(&format!("/crud/items/{new}"));
    let put = wire::send(
        a,
        None,
        "PUT",
        &format!("/crud/items/{new}"),
        &json,
        Some(br#"{"name":"UpdatedItem","category":"test","price":99,"quantity":1}"#),
    );
    let after = x_cache(&get(&format!("/crud/items/{new}")));
    c.push((
        format!("PUT /crud/items/{new}: 200, the cached copy dropped"),
        match put {
            Err(why) => Outcome::Fail(why),
            Ok(r) => verdict(r.status == 200 && after == "MISS", || {
                format!("HTTP {}, then X-Cache {after:?}", r.status)
            }),
        },
    ));
    c
}

// ---- async (/delay) and 8gbit (/echo) --------------------------------------------------------

/// One timed `GET /delay/{ms}`: 200, the parameter echoed, and at least `min` waited.
fn delay_once(a: SocketAddr, ms: u64, min: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let r = wire::get(a, None, &format!("/delay/{ms}"), &[])?;
    let took = start.elapsed();
    if r.status != 200 {
        return Err(format!("/delay/{ms}: HTTP {}", r.status));
    }
    if r.text() != ms.to_string() {
        return Err(format!("/delay/{ms}: body {:?}", clip(&r.text())));
    }
    if took < min {
        return Err(format!(
            "/delay/{ms} answered in {took:?}, short of the {ms} ms asked"
        ));
    }
    Ok(took)
}

/// HttpArena's async checks: the delay drawn at random and honoured (at least 0.9 of it), its
/// Content-Type, 0 as a delay, 500 ms taking longer than 10 ms, 10 ms not a constant long sleep,
/// and 32 overlapping requests with 32 different delays each answered with its own.
fn async_delay(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let a = t.h1;
    let ms = rng.between(10, 90);
    let tenths = |ms: u64| Duration::from_micros(ms * 900);
    let short = delay_once(a, 10, tenths(10));
    let long = delay_once(a, 500, tenths(500));
    let mut c = vec![
        (
            format!("GET /delay/{ms} (random)"),
            delay_once(a, ms, tenths(ms)).map_or_else(Outcome::Fail, |_| Outcome::Pass),
        ),
        (
            format!("GET /delay/{ms} Content-Type"),
            content_type_is(
                wire::get(a, None, &format!("/delay/{ms}"), &[]),
                "text/plain",
            ),
        ),
        (
            "GET /delay/0".into(),
            body_is(wire::get(a, None, "/delay/0", &[]), "0"),
        ),
        (
            "/delay/500 waits longer than /delay/10".into(),
            match (&short, &long) {
                (Ok(s), Ok(l)) => {
                    verdict(l.saturating_sub(*s) >= Duration::from_millis(300), || {
                        format!("{s:?} against {l:?}")
                    })
                }
                (Err(why), _) | (_, Err(why)) => Outcome::Fail(why.clone()),
            },
        ),
        (
            "/delay/10 is not a constant long sleep".into(),
            match &short {
                Ok(s) => verdict(*s <= Duration::from_secs(2), || format!("{s:?} for 10 ms")),
                Err(why) => Outcome::Fail(why.clone()),
            },
        ),
    ];
    let threads: Vec<_> = (1..=32u64)
        .map(|i| {
            let ms = 100 + (i * 13) % 400;
            std::thread::spawn(move || delay_once(a, ms, tenths(ms)))
        })
        .collect();
    let mut overlapping = Outcome::Pass;
    for th in threads {
        if let Err(why) = th
            .join()
            .unwrap_or_else(|_| Err("a probe thread panicked".into()))
        {
            overlapping = Outcome::Fail(why);
        }
    }
    c.push((
        "32 overlapping requests, 32 different delays".into(),
        overlapping,
    ));
    c
}

/// HttpArena's 8gbit checks over HTTP/1.1 and TLS: random bodies of 1 B to 100 KB echoed byte
/// for byte, with a Content-Length and chunked, and an empty body answered 200.
fn echo_8gbit(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let tls = match need(t.tls, "TLS listener") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut c = super::tls_posture::check(tls, ALPN_H1, t.cert.as_deref());
    let octets = [("Content-Type", "application/octet-stream")];
    let chunked = [
        ("Content-Type", "application/octet-stream"),
        ("Transfer-Encoding", "chunked"),
    ];
    let echo = |fields: &[(&str, &str)], body: &[u8]| -> Outcome {
        match wire::send(tls, Some(ALPN_H1), "POST", "/echo", fields, Some(body)) {
            Err(why) => Outcome::Fail(why),
            Ok(r) => verdict(r.status == 200 && r.body == body, || {
                format!(
                    "HTTP {}, {} bytes back for {} sent (or different bytes)",
                    r.status,
                    r.body.len(),
                    body.len()
                )
            }),
        }
    };
    for size in [1usize, 1024, 10_240, 102_400] {
        c.push((
            format!("POST /echo {size} B, byte for byte"),
            echo(&octets, &rng.bytes(size)),
        ));
    }
    for size in [10_240usize, 102_400] {
        c.push((
            format!("POST /echo chunked {size} B"),
            echo(&chunked, &rng.bytes(size)),
        ));
    }
    c.push((
        "POST /echo empty body: 200".into(),
        status_is(
            wire::send(tls, Some(ALPN_H1), "POST", "/echo", &octets, Some(b"")),
            200,
        ),
    ));
    c
}

// ---- production-stack ------------------------------------------------------------------------

/// HttpArena's production-stack checks over h2 at the edge: static files, `/public/*` without
/// a token, `/api/*` refused without one or with a bad one (GET and POST), the item cache
/// (MISS then HIT, a POST's 204 dropping the cached copy), and `/api/me` for the token's `sub`.
fn production_stack(t: &Target, rng: &mut Rng) -> Vec<Check> {
    let Some(stack) = &t.stack else {
        return vec![(
            "production-stack's edge".into(),
            Outcome::NotRun(
                "the arena starts the edge only for its own demo, with a database".into(),
            ),
        )];
    };
    let to = H2::Tls(stack.tls);
    let bearer = format!("Bearer {}", stack.token);
    let get = |p: &str| h2::request(to, "GET", p, &[], None);
    let authed = |m: &str, p: &str, body: Option<&[u8]>| {
        let fields = [
            ("authorization", bearer.as_str()),
            ("content-type", "application/json"),
        ];
        h2::request(to, m, p, &fields, body)
    };
    let bad = [
        ("authorization", "Bearer invalid.token.here"),
        ("content-type", "application/json"),
    ];
    let post_body: &[u8] = br#"{"name":"unauth","price":1,"quantity":1}"#;
    let (x, y) = (rng.between(100, 999), rng.between(100, 999));
    let mut c = vec![
        (
            "HTTP/2 at the edge".into(),
            match get("/static/reset.css") {
                Err(why) => Outcome::Fail(why),
                Ok(r) => verdict(r.status == 200, || format!("HTTP {}", r.status)),
            },
        ),
        (
            "/static/reset.css Content-Type".into(),
            content_type_is(get("/static/reset.css"), "text/css"),
        ),
        (
            "/static/app.js is not empty".into(),
            match get("/static/app.js") {
                Err(why) => Outcome::Fail(why),
                Ok(r) => verdict(r.status == 200 && !r.body.is_empty(), || {
                    format!("HTTP {}, {} bytes", r.status, r.body.len())
                }),
            },
        ),
        (
            "/public/baseline?a=13&b=42".into(),
            body_is(get("/public/baseline?a=13&b=42"), "55"),
        ),
        (
            format!("/public/baseline?a={x}&b={y} (random)"),
            body_is(
                get(&format!("/public/baseline?a={x}&b={y}")),
                &(x + y).to_string(),
            ),
        ),
        (
            "/public/json/25: 25 items, schema, totals".into(),
            match get("/public/json/25") {
                Err(why) => Outcome::Fail(why),
                Ok(r) => {
                    json_body(&r.body, 25, 1, None).map_or_else(Outcome::Fail, |()| Outcome::Pass)
                }
            },
        ),
        (
            "GET /api/items/1 without a token: 401".into(),
            status_is(get("/api/items/1"), 401),
        ),
        (
            "GET /api/items/1 with a bad token: 401".into(),
            status_is(h2::request(to, "GET", "/api/items/1", &bad[..1], None), 401),
        ),
        (
            "POST /api/items/1 without a token: 401".into(),
            status_is(
                h2::request(to, "POST", "/api/items/1", &bad[1..], Some(post_body)),
                401,
            ),
        ),
        (
            "POST /api/items/1 with a bad token: 401".into(),
            status_is(
                h2::request(to, "POST", "/api/items/1", &bad, Some(post_body)),
                401,
            ),
        ),
        (
            "/api/items/1 with the token".into(),
            match json_of(authed("GET", "/api/items/1", None)) {
                Err(why) => Outcome::Fail(why),
                Ok((_, v, _)) => verdict(v["id"].as_u64() == Some(1), || format!("id {}", v["id"])),
            },
        ),
    ];
    // Random ids (HttpArena's fixed 7, 2 and 3 would be cached already on a second run).
    let id = rng.between(10, 100_000);
    let first = x_cache(&authed("GET", &format!("/api/items/{id}"), None));
    let second = x_cache(&authed("GET", &format!("/api/items/{id}"), None));
    c.push((
        format!("cache-aside: /api/items/{id} MISS then HIT"),
        verdict(first == "MISS" && second == "HIT", || {
            format!("X-Cache {first:?} then {second:?}")
        }),
    ));
    let (w, price) = (rng.between(10, 100_000), rng.between(1, 999));
    let body = format!(r#"{{"name":"validate-updated","price":{price},"quantity":99}}"#);
    c.push((
        format!("POST /api/items/{w}: 204"),
        status_is(
            authed("POST", &format!("/api/items/{w}"), Some(body.as_bytes())),
            204,
        ),
    ));
    let _ = authed("GET", &format!("/api/items/{w}"), None);
    let _ = authed("POST", &format!("/api/items/{w}"), Some(body.as_bytes()));
    let after = x_cache(&authed("GET", &format!("/api/items/{w}"), None));
    c.push((
        format!("POST /api/items/{w} drops the cached copy: MISS"),
        verdict(after == "MISS", || format!("X-Cache {after:?}")),
    ));
    c.push((
        "/api/me: user 42 (the token's sub)".into(),
        match json_of(authed("GET", "/api/me", None)) {
            Err(why) => Outcome::Fail(why),
            Ok((_, v, _)) => verdict(v["id"].as_u64() == Some(42), || format!("id {}", v["id"])),
        },
    ));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HttpArena's GetSum bytes: SumRequest{a=1, b=2} is 08 01 10 02 after the prefix.
    #[test]
    fn sum_request_bytes() {
        assert_eq!(sum_request(1, 2), [0, 0, 0, 0, 4, 0x08, 1, 0x10, 2]);
        assert_eq!(
            sum_request(300, 1),
            [0, 0, 0, 0, 5, 0x08, 0xac, 0x02, 0x10, 1]
        );
    }

    #[test]
    fn sum_reply_reads_result() {
        assert_eq!(sum_reply(&[0, 0, 0, 0, 3, 0x08, 0xac, 0x02]), Ok(300));
        assert_eq!(sum_reply(&[0, 0, 0, 0, 0]), Ok(0));
        assert!(sum_reply(&[1, 0, 0, 0, 0]).is_err());
        assert!(sum_reply(&[0, 0, 0, 0, 9, 0x08]).is_err());
    }

    #[test]
    fn json_body_needs_dataset_fields_and_totals() {
        let ds: Vec<Value> = serde_json::from_str(
            r#"[{"id":1,"name":"a","category":"c","price":3,"quantity":4,"active":true,"tags":["x"],"rating":{"score":1,"count":2}}]"#,
        )
        .unwrap();
        let good = br#"{"count":1,"items":[{"id":1,"name":"a","category":"c","price":3,"quantity":4,"active":true,"tags":["x"],"rating":{"score":1,"count":2},"total":24}]}"#;
        assert_eq!(json_body(good, 1, 2, Some(&ds)), Ok(()));
        // A self-consistent total on made-up fields passes only without the dataset.
        let made_up = br#"{"count":1,"items":[{"id":1,"name":"b","category":"c","price":3,"quantity":4,"active":true,"tags":["x"],"rating":{"score":1,"count":2},"total":24}]}"#;
        assert_eq!(json_body(made_up, 1, 2, None), Ok(()));
        assert!(json_body(made_up, 1, 2, Some(&ds)).is_err());
        assert!(json_body(good, 1, 3, Some(&ds)).is_err());
        assert!(json_body(good, 2, 2, Some(&ds)).is_err());
    }
}
