//! The proxy's HTTP cache (`serve --proxy … --proxy-cache SIZE`, RFC 9111) over real sockets,
//! in front of a scripted upstream on a std `TcpListener` that counts the requests it gets
//! and answers each path as the test says: hits, the poisoning and deception table of
//! docs/cache-poisoning.md, refused requests that must never fill the cache, an object over
//! the size limit that streams through whole, collapsed forwarding of 1,000 concurrent
//! clients, and the admin listener's counters and purge.
//!
//! No timing is asserted: the collapsed-forwarding upstream holds its answer until the
//! server's own `/metrics` says every other client is waiting.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

use common::bin::{Served, serve};
use common::{Client, READ_TIMEOUT, eventually};

/// What the scripted upstream saw: requests per path, and each request's head.
#[derive(Default)]
struct Seen {
    count: HashMap<String, usize>,
    heads: Vec<String>,
}

type Answer = Arc<dyn Fn(&str, &str) -> Vec<u8> + Send + Sync>;

/// An upstream that answers `answer(path, head)` on keep-alive connections, and a gate that
/// holds every answer while it is shut.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Upstream {
    fn start(answer: impl Fn(&str, &str) -> Vec<u8> + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let gate = Arc::new((Mutex::new(true), Condvar::new()));
        let answer: Answer = Arc::new(answer);
        let (s, g) = (seen.clone(), gate.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (s, g, answer) = (s.clone(), g.clone(), answer.clone());
                std::thread::spawn(move || serve_conn(conn, &s, &g, &answer));
            }
        });
        Upstream { addr, seen, gate }
    }

    fn count(&self, path: &str) -> usize {
        *self.seen.lock().unwrap().count.get(path).unwrap_or(&0)
    }

    fn heads(&self) -> Vec<String> {
        self.seen.lock().unwrap().heads.clone()
    }

    fn set_open(&self, open: bool) {
        *self.gate.0.lock().unwrap() = open;
        self.gate.1.notify_all();
    }
}

fn serve_conn(conn: TcpStream, seen: &Mutex<Seen>, gate: &(Mutex<bool>, Condvar), answer: &Answer) {
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let Some((head, _body)) = common::read_request(&mut r) else {
            return;
        };
        // A chunked body (the proxy sends an HTTP/2 body without content-length so): read
        // whole, so that the next request starts where it should.
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
            && read_chunked(&mut r).is_none()
        {
            return;
        }
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        {
            let mut s = seen.lock().unwrap();
            *s.count.entry(path.clone()).or_default() += 1;
            s.heads.push(head.clone());
        }
        let (lock, cv) = gate;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        drop(open);
        if w.write_all(&answer(&path, &head)).is_err() {
            return;
        }
    }
}

/// Reads a chunked body's chunks and trailer section (RFC 9112 §7.1); `None` when the
/// connection ends or a size is not hexadecimal.
fn read_chunked(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok().filter(|&n| n > 0)?;
        let size = line.trim().split(';').next()?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            // The trailer section, to its empty line.
            loop {
                let mut line = String::new();
                r.read_line(&mut line).ok().filter(|&n| n > 0)?;
                if line == "\r\n" {
                    return Some(body);
                }
            }
        }
        let mut chunk = vec![0; size + 2];
        r.read_exact(&mut chunk).ok()?;
        body.extend_from_slice(&chunk[..size]);
    }
}

/// A 200 with `fields` (CRLF-ended lines) and `body`.
fn ok_with(fields: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "HTTP/1.1 200 OK\r\n{fields}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// `serve --app none --proxy /=UPSTREAM --proxy-cache 4MiB EXTRA…`.
fn cache_in_front(up: &Upstream, extra: &[&str]) -> Served {
    let spec = format!("/=http://{}", up.addr);
    let mut args = vec![
        "--app",
        "none",
        "--proxy",
        spec.as_str(),
        "--proxy-cache",
        "4MiB",
    ];
    args.extend_from_slice(extra);
    serve(&args)
}

fn get(addr: SocketAddr, path: &str, fields: &str) -> common::Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes());
    c.read_response()
}

#[test]
fn a_fresh_answer_is_served_from_the_cache_with_age_and_cache_status() {
    let up = Upstream::start(|_, _| ok_with("Cache-Control: max-age=60\r\n", b"stored"));
    let s = cache_in_front(&up, &[]);
    let first = get(s.addr, "/a", "");
    assert_eq!((first.status, first.text().as_str()), (200, "stored"));
    assert!(
        first
            .header("cache-status")
            .unwrap()
            .contains("fwd=uri-miss")
    );
    assert!(first.header("cache-status").unwrap().contains("stored"));
    let second = get(s.addr, "/a", "");
    assert_eq!((second.status, second.text().as_str()), (200, "stored"));
    assert!(second.header("age").is_some(), "{:?}", second.headers);
    assert!(second.header("cache-status").unwrap().contains("hit"));
    assert_eq!(up.count("/a"), 1);
    // HEAD and a range come from the stored whole.
    let mut c = Client::connect(s.addr);
    c.send(b"GET /a HTTP/1.1\r\nHost: t\r\nRange: bytes=1-3\r\n\r\n");
    let part = c.read_response();
    assert_eq!((part.status, part.text().as_str()), (206, "tor"));
    assert_eq!(part.header("content-range"), Some("bytes 1-3/6"));
    assert_eq!(up.count("/a"), 1);
}

/// RFC 5861 §3: a stale answer within `stale-while-revalidate` is served at once, and one
/// validation goes up in the background, with the stored validator.
#[test]
fn stale_while_revalidate_answers_at_once_and_validates_in_the_background() {
    // Already 10 s old on arrival: stale (max-age=1), within stale-while-revalidate.
    let up = Upstream::start(|_, head| {
        if head.to_ascii_lowercase().contains("if-none-match: \"v1\"") {
            b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nCache-Control: max-age=1, stale-while-revalidate=600\r\nAge: 10\r\n\r\n".to_vec()
        } else {
            ok_with(
                "Cache-Control: max-age=1, stale-while-revalidate=600\r\nAge: 10\r\nETag: \"v1\"\r\n",
                b"kept",
            )
        }
    });
    let s = cache_in_front(&up, &[]);
    assert_eq!(get(s.addr, "/swr", "").text(), "kept");
    let stale = get(s.addr, "/swr", "");
    assert_eq!((stale.status, stale.text().as_str()), (200, "kept"));
    let status = stale.header("cache-status").unwrap().to_string();
    assert!(
        status.contains("hit") && status.contains("ttl=-"),
        "{status}"
    );
    eventually("the background validation went up", || {
        up.count("/swr") == 2
    });
    let heads = up.heads();
    assert!(
        heads[1]
            .to_ascii_lowercase()
            .contains("if-none-match: \"v1\""),
        "{}",
        heads[1]
    );
}

/// No field outside the key changes what is stored for everyone.
#[test]
fn unkeyed_fields_never_reach_the_upstream_of_a_caching_mount() {
    // The upstream reflects every override a framework might honour into its answer.
    let up = Upstream::start(|_, head| {
        let reflected: Vec<&str> = head
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                [
                    "x-original-url",
                    "x-rewrite-url",
                    "x-forwarded-scheme",
                    "x-host",
                    "x-forwarded-host",
                ]
                .iter()
                .any(|f| l.starts_with(f))
            })
            .collect();
        ok_with(
            "Cache-Control: max-age=60\r\n",
            reflected.join("|").as_bytes(),
        )
    });
    let s = cache_in_front(&up, &[]);
    let poisoned = get(
        s.addr,
        "/page",
        "X-Original-URL: /admin\r\nX-Rewrite-URL: /admin\r\nX-Forwarded-Scheme: nothttps\r\nX-Host: evil.example\r\nX-Forwarded-Host: evil.example\r\n",
    );
    assert_eq!(poisoned.status, 200);
    let clean = get(s.addr, "/page", "");
    for body in [poisoned.text(), clean.text()] {
        assert!(
            !body.contains("admin") && !body.contains("evil") && !body.contains("nothttps"),
            "{body}"
        );
    }
    for head in up.heads() {
        let h = head.to_ascii_lowercase();
        assert!(
            !h.contains("x-original-url") && !h.contains("x-rewrite-url") && !h.contains("evil"),
            "{head}"
        );
    }
    // A second Host is refused (RFC 9112 §3.2) and never goes up or into the cache.
    let mut c = Client::connect(s.addr);
    c.send(b"GET /two HTTP/1.1\r\nHost: t\r\nHost: evil.example\r\n\r\n");
    assert_eq!(c.read_response().status, 400);
    assert_eq!(up.count("/two"), 0);
    // An absolute-form target that disagrees with Host is not keyed: it goes up alone, and
    // what it brings back is never served for the Host's URL.
    let mut c = Client::connect(s.addr);
    c.send(b"GET http://evil.example/abs HTTP/1.1\r\nHost: t\r\n\r\n");
    let _ = c.read_response();
    let before = up.count("http://evil.example/abs") + up.count("/abs");
    let _ = get(s.addr, "/abs", "");
    assert_eq!(
        up.count("http://evil.example/abs") + up.count("/abs"),
        before + 1
    );
}

/// Web cache deception: a private answer under a static-looking path is not stored
/// unless the answer says it may be; neither is one that sets a cookie; `Vary: *` never
/// matches; an answer to a request with Authorization follows RFC 9111 §3.5.
#[test]
fn private_personal_and_unmatchable_answers_are_not_stored() {
    let up = Upstream::start(|path, _| match path {
        "/account/x.css" => ok_with("Cache-Control: private, max-age=60\r\n", b"mine"),
        "/cookie.css" => ok_with("Cache-Control: max-age=60\r\nSet-Cookie: s=1\r\n", b"mine"),
        "/shared-cookie" => ok_with(
            "Cache-Control: public, max-age=60\r\nSet-Cookie: s=1\r\n",
            b"ok",
        ),
        "/vary-star" => ok_with("Cache-Control: max-age=60\r\nVary: *\r\n", b"v"),
        "/authz" => ok_with("Cache-Control: max-age=60\r\n", b"a"),
        "/authz-public" => ok_with("Cache-Control: public, max-age=60\r\n", b"a"),
        _ => ok_with("", b"?"),
    });
    let s = cache_in_front(&up, &[]);
    for path in ["/account/x.css", "/cookie.css", "/vary-star"] {
        get(s.addr, path, "");
        get(s.addr, path, "");
        assert_eq!(up.count(path), 2, "{path} was served from the cache");
    }
    get(s.addr, "/shared-cookie", "");
    get(s.addr, "/shared-cookie", "");
    assert_eq!(
        up.count("/shared-cookie"),
        2,
        "public is no consent to replaying one visitor's cookie to another"
    );
    get(s.addr, "/authz", "Authorization: Bearer x\r\n");
    get(s.addr, "/authz", "Authorization: Bearer x\r\n");
    assert_eq!(
        up.count("/authz"),
        2,
        "§3.5: max-age alone does not allow it"
    );
    get(s.addr, "/authz-public", "Authorization: Bearer x\r\n");
    get(s.addr, "/authz-public", "");
    assert_eq!(up.count("/authz-public"), 1, "§3.5: public allows it");
}

/// A smuggled or refused request never fills the cache.
#[test]
fn a_refused_request_never_fills_the_cache() {
    let up = Upstream::start(|_, _| ok_with("Cache-Control: max-age=60\r\n", b"real"));
    let s = cache_in_front(&up, &[]);
    let mut c = Client::connect(s.addr);
    // Both framings (RFC 9112 §6.1): refused with 400, connection closed.
    c.send(b"GET /s HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /s HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_response().status, 400);
    assert_eq!(up.count("/s"), 0);
    let r = get(s.addr, "/s", "");
    assert_eq!((r.status, r.text().as_str()), (200, "real"));
    assert_eq!(up.count("/s"), 1);
}

/// An object over the size limit streams through uncached, its bytes never cut —
/// declared over the limit by Content-Length, or passing it in chunks.
#[test]
fn an_object_over_the_limit_streams_whole_and_is_not_stored() {
    let big: Vec<u8> = (0..3 << 20).map(|i: usize| (i % 251) as u8).collect();
    let b2 = big.clone();
    let up = Upstream::start(move |path, _| match path {
        "/big" => ok_with("Cache-Control: max-age=60\r\n", &b2),
        _ => {
            let mut v = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for piece in b2.chunks(100_000) {
                v.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                v.extend_from_slice(piece);
                v.extend_from_slice(b"\r\n");
            }
            v.extend_from_slice(b"0\r\n\r\n");
            v
        }
    });
    let s = cache_in_front(&up, &[]);
    for path in ["/big", "/chunked"] {
        for _ in 0..2 {
            let body = get_body(s.addr, path);
            assert!(body == big, "{path}: {} bytes of {}", body.len(), big.len());
        }
        assert_eq!(
            up.count(path),
            2,
            "{path} over the 1 MiB object limit was stored"
        );
    }
}

/// 1,000 concurrent clients for one cold key make exactly one upstream request.
#[test]
fn a_thousand_concurrent_misses_make_one_upstream_request() {
    let up = Upstream::start(|_, _| ok_with("Cache-Control: max-age=60\r\n", b"once"));
    let admin_port = common::free_port("127.0.0.1");
    let admin = format!("127.0.0.1:{admin_port}");
    // Two workers: the clients' connections spread over both, so waiters on the worker that
    // does not lead are woken across threads (through their worker's inbox).
    let s = cache_in_front(&up, &["--admin", admin.as_str(), "--workers", "2"]);
    up.set_open(false);
    const CLIENTS: usize = 1000;
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::connect(s.addr)).collect();
    for c in clients.iter_mut() {
        c.send(b"GET /cold HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    // Held until every other client waits on the first one's flight.
    eventually("999 requests wait on the flight", || {
        metric(&admin, "linerate_cache_waiting") == Some(CLIENTS as u64 - 1)
    });
    assert_eq!(up.count("/cold"), 1);
    up.set_open(true);
    for c in clients.iter_mut() {
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (200, "once"));
    }
    assert_eq!(up.count("/cold"), 1);
    assert_eq!(metric(&admin, "linerate_cache_waiting"), Some(0));
}

/// The admin listener: counters by outcome, and a purge of a URL and of a prefix.
#[test]
fn metrics_count_outcomes_and_a_purge_empties_what_it_names() {
    let up = Upstream::start(|_, _| ok_with("Cache-Control: max-age=60\r\n", b"x"));
    let admin_port = common::free_port("127.0.0.1");
    let admin = format!("127.0.0.1:{admin_port}");
    let s = cache_in_front(&up, &["--admin", admin.as_str()]);
    for p in ["/p/1", "/p/2", "/q", "/p/1", "/q", "/caf%C3%A9"] {
        get(s.addr, p, "");
    }
    let line = |outcome: &str| {
        let m = scrape(&admin);
        m.lines()
            .find(|l| {
                l.starts_with("linerate_cache_requests_total")
                    && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
    };
    assert_eq!((line("hit"), line("miss")), (Some(2), Some(4)));
    assert_eq!(metric(&admin, "linerate_cache_objects"), Some(4));
    // A plain URL is taken as written, escapes and all: the key keeps the target as received.
    assert_eq!(
        post(&admin, "/purge?url=http://t/caf%C3%A9"),
        (200, "purged 1\n".to_string())
    );
    assert_eq!(
        post(&admin, "/purge?url=http%3A%2F%2Ft%2Fq"),
        (200, "purged 1\n".to_string())
    );
    assert_eq!(
        post(&admin, "/purge?prefix=http://t/p/"),
        (200, "purged 2\n".to_string())
    );
    assert_eq!(post(&admin, "/purge?url=ftp://t/q").0, 400);
    get(s.addr, "/q", "");
    get(s.addr, "/p/1", "");
    assert_eq!((up.count("/q"), up.count("/p/1")), (2, 2));
}

/// The body of a 200 to `GET path` on its own connection (closed after it), chunks decoded.
fn get_body(addr: SocketAddr, path: &str) -> Vec<u8> {
    get_whole(addr, path).1
}

/// The head (lower-cased) and body of a 200 to `GET path` on its own connection (closed
/// after it), chunks decoded.
fn get_whole(addr: SocketAddr, path: &str) -> (String, Vec<u8>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut all = Vec::new();
    c.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let mut rest = &all[end..];
    if !head.contains("transfer-encoding: chunked") {
        return (head, rest.to_vec());
    }
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
        rest = &rest[eol + 2..];
        if size == 0 {
            return (head, body);
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Whether `ask` made edge `admin` store an answer in its shared tier (it does so on the
/// tier's thread after the answer: looked for a bounded number of times).
fn stores_through(admin: &str, ask: impl FnOnce()) -> bool {
    let before = tier_stored(admin);
    ask();
    std::iter::repeat_n((), 50).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(10));
        tier_stored(admin) > before
    })
}

/// Answers edge `admin` has stored in its shared tier.
fn tier_stored(admin: &str) -> u64 {
    scrape(admin)
        .lines()
        .find(|l| {
            l.starts_with("linerate_cache_tier_requests_total") && l.contains("outcome=\"stored\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

fn scrape(admin: &str) -> String {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

/// The first sample of `name` in `/metrics`.
fn metric(admin: &str, name: &str) -> Option<u64> {
    scrape(admin)
        .lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn post(admin: &str, target: &str) -> (u16, String) {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(
        format!("POST {target} HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// A fleet: three edges on 127.0.0.2–4 share one Redis (then one memcached). An
/// answer cached through edge A is a hit on edges B and C without going upstream; a purge on
/// one edge is seen by all (the tier's generation, read each second by every edge); a tier
/// stopped (SIGSTOP) or killed mid-run leaves every request answered, and once back it is
/// shared again.
#[test]
fn three_edges_share_one_tier_and_a_purge_on_one_reaches_all() {
    for program in ["redis-server", "memcached"] {
        let Some(mut tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        let up = Upstream::start(|path, _| {
            ok_with("Cache-Control: public, max-age=600\r\n", path.as_bytes())
        });
        let spec = format!("/=http://{}", up.addr);
        let url = tier.url();
        let admin_port = common::free_port("127.0.0.1");
        let admin = format!("127.0.0.1:{admin_port}");
        let edges: Vec<Served> = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
            .iter()
            .enumerate()
            .map(|(i, ip)| {
                let addr = format!("{ip}:0");
                let mut args = vec![
                    "--addr",
                    addr.as_str(),
                    "--app",
                    "none",
                    "--proxy",
                    spec.as_str(),
                    "--proxy-cache",
                    "4MiB",
                    "--proxy-cache-tier",
                    url.as_str(),
                ];
                if i == 0 {
                    args.extend(["--admin", admin.as_str()]);
                }
                common::bin::serve_as(&args)
            })
            .collect();
        // A stores in the tier after its answer, on the tier's thread; each edge reads the
        // tier's generation first (it leaves the tier alone until then). So: until A's
        // answer is in the tier (A's `stored` count), ask nothing of B.
        let stored = || tier_stored(&admin);
        let mut n = 0;
        eventually(&format!("{program}: edge A stores in the tier"), || {
            n += 1;
            stores_through(&admin, || {
                get(edges[0].addr, &format!("/warm{n}"), "");
            })
        });
        let before = stored();
        let a = get(edges[0].addr, "/shared", "");
        assert_eq!(a.text(), "/shared");
        eventually("A's answer is in the tier", || stored() > before);
        for e in &edges[1..] {
            let r = get(e.addr, "/shared", "");
            assert_eq!(r.text(), "/shared");
            assert!(
                r.header("cache-status").unwrap().contains("hit"),
                "{:?}",
                r.headers
            );
        }
        assert_eq!(up.count("/shared"), 1, "{program}: B and C went upstream");
        // A purge on A: every edge forgets, within a generation read.
        assert_eq!(post(&admin, "/purge?url=http://t/shared").0, 200);
        eventually(&format!("{program}: the purge reached edge C"), || {
            get(edges[2].addr, "/shared", "");
            up.count("/shared") >= 2
        });
        // The tier stopped (it takes connections and never answers): each call ends at the
        // tier's timeout as a miss, and every request is answered.
        tier.signal(rustix::process::Signal::STOP);
        for (i, e) in edges.iter().enumerate() {
            let r = get(e.addr, &format!("/stopped{i}"), "");
            assert_eq!((r.status, r.text()), (200, format!("/stopped{i}")));
        }
        tier.signal(rustix::process::Signal::CONT);
        // The tier killed: every request still answered (a miss there, counted).
        tier.kill();
        for (i, e) in edges.iter().enumerate() {
            let r = get(e.addr, &format!("/down{i}"), "");
            assert_eq!((r.status, r.text()), (200, format!("/down{i}")));
        }
        // Back: shared again.
        tier.restart();
        let mut n = 0;
        eventually(&format!("{program}: shared again after a restart"), || {
            n += 1;
            let path = format!("/back{n}");
            if !stores_through(&admin, || {
                get(edges[0].addr, &path, "");
            }) {
                return false;
            }
            let c = get(edges[2].addr, &path, "");
            c.header("cache-status").is_some_and(|s| s.contains("hit")) && up.count(&path) == 1
        });
    }
}

/// An edge (one worker, admin listener) in front of `up` whose memory store (1 KiB) keeps
/// almost nothing, with the tier at `url` behind it, once it stores there (it reads the tier's
/// generation first, and leaves the tier alone until then).
fn edge_before_a_tier(up: &Upstream, url: &str) -> (Served, String) {
    let spec = format!("/=http://{}", up.addr);
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let args = [
        "--addr",
        "127.0.0.1:0",
        "--workers",
        "1",
        "--app",
        "none",
        "--proxy",
        spec.as_str(),
        "--proxy-cache",
        "1KiB",
        "--proxy-cache-tier",
        url,
        "--admin",
        admin.as_str(),
    ];
    let edge = common::bin::serve_as(&args);
    let mut n = 0;
    eventually("the edge stores in the tier", || {
        n += 1;
        stores_through(&admin, || {
            get(edge.addr, &format!("/warm{n}"), "");
        })
    });
    (edge, admin)
}

/// The worker asks a Redis tier on its own connection (`driver/tier_link.rs`), which greets
/// the server first as the tier's thread does: the database the URL names is selected, so a
/// hit through database 3 finds what the edge stored there (without the greeting's reply
/// read first, the first answer would be its `+OK` and every hit a miss; without the
/// greeting, the worker would look in database 0). A refused greeting is
/// `linerate_kv::link`'s unit test: the edge reads the tier's generation through the same
/// greeting first, and leaves a tier that refuses it alone.
#[test]
fn the_workers_own_tier_connection_selects_its_database() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let body = vec![b'y'; 2048];
    let up = Upstream::start(move |_, _| ok_with("Cache-Control: public, max-age=600\r\n", &body));
    let (edge, admin) = edge_before_a_tier(&up, &format!("{}/3", tier.url()));
    let before = tier_stored(&admin);
    assert_eq!(get(edge.addr, "/db3", "").body.len(), 2048);
    eventually("the answer is in the tier", || tier_stored(&admin) > before);
    for _ in 0..3 {
        let r = get(edge.addr, "/db3", "");
        assert_eq!(r.body.len(), 2048);
        assert!(
            r.header("cache-status").unwrap().contains("hit"),
            "{:?}",
            r.headers
        );
    }
    assert_eq!(up.count("/db3"), 1, "tier hits went upstream");
}

/// A tier hit is answered from the tier's entry even when the memory store cannot keep it
/// (a store smaller than the working set; here smaller than the one answer): before, the
/// entry went into memory, the request was planned again from memory, missed, and went
/// upstream too — every request paid the tier and the upstream.
#[test]
fn a_tier_hit_is_answered_when_memory_cannot_keep_the_entry() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let body = vec![b'x'; 4096];
    let up = Upstream::start(move |_, _| ok_with("Cache-Control: public, max-age=600\r\n", &body));
    let (edge, admin) = edge_before_a_tier(&up, &tier.url());
    let before = tier_stored(&admin);
    assert_eq!(get(edge.addr, "/big", "").body.len(), 4096);
    eventually("the answer is in the tier", || tier_stored(&admin) > before);
    for _ in 0..3 {
        let r = get(edge.addr, "/big", "");
        assert_eq!(r.body.len(), 4096);
        assert!(
            r.header("cache-status").unwrap().contains("hit"),
            "{:?}",
            r.headers
        );
    }
    assert_eq!(up.count("/big"), 1, "tier hits went upstream");
}

/// An unsafe method's answer invalidates the URL in the tier too (RFC 9111 §4.4): the next
/// GET goes upstream and gets the new representation. Before the fix only memory forgot it,
/// and the next miss brought the old answer back from the tier. The answers are larger than
/// the memory store, so every hit is the tier's.
#[test]
fn a_put_invalidates_the_url_in_the_tier_too() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let version = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let v = version.clone();
    let up = Upstream::start(move |_, head| {
        if head.starts_with("PUT ") {
            v.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            return b"HTTP/1.1 204 No Content\r\n\r\n".to_vec();
        }
        let n = v.load(std::sync::atomic::Ordering::SeqCst);
        ok_with(
            "Cache-Control: public, max-age=600\r\n",
            format!("{n}").repeat(2048).as_bytes(),
        )
    });
    let (edge, admin) = edge_before_a_tier(&up, &tier.url());
    assert!(stores_through(&admin, || {
        assert!(get(edge.addr, "/item", "").body.starts_with(b"1"));
    }));
    let r = get(edge.addr, "/item", "");
    assert!(r.header("cache-status").unwrap().contains("hit"));
    let mut c = Client::connect(edge.addr);
    c.send(b"PUT /item HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(c.read_response().status, 204);
    let r = get(edge.addr, "/item", "");
    assert!(
        r.body.starts_with(b"2"),
        "the answer from before the PUT: {:?}",
        r.headers
    );
    assert_eq!(up.count("/item"), 3, "GET, PUT, GET");
}

/// Requests that reach the edge together ask the tier together (one call for the worker's
/// turn, `Worker::tier_flush`): each still gets its own answer, as a tier hit, and none goes
/// upstream again. The answers are larger than the memory store, so every one is the tier's.
#[test]
fn requests_arriving_together_each_get_their_own_tier_hit() {
    const N: usize = 24;
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let body_of = |path: &str| path.repeat(2048 / path.len() + 1).into_bytes();
    let up = Upstream::start(move |path, _| {
        ok_with("Cache-Control: public, max-age=600\r\n", &body_of(path))
    });
    let (edge, admin) = edge_before_a_tier(&up, &tier.url());
    let before = tier_stored(&admin);
    let paths: Vec<String> = (0..N).map(|i| format!("/together{i}")).collect();
    for p in &paths {
        assert_eq!(get(edge.addr, p, "").body, body_of(p));
    }
    eventually("every answer is in the tier", || {
        tier_stored(&admin) >= before + N as u64
    });
    let start = std::sync::Arc::new(std::sync::Barrier::new(N));
    let askers: Vec<_> = paths
        .iter()
        .map(|p| {
            let (p, start, addr) = (p.clone(), start.clone(), edge.addr);
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                start.wait();
                c.send(format!("GET {p} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
                (p, c.read_response())
            })
        })
        .collect();
    for a in askers {
        let (p, r) = a.join().unwrap();
        assert_eq!(r.status, 200, "{p}");
        assert!(r.body == body_of(&p), "{p}: another request's answer");
        assert!(
            r.header("cache-status").unwrap().contains("hit"),
            "{p}: {:?}",
            r.headers
        );
        assert_eq!(up.count(&p), 1, "{p} went upstream again");
    }
}

/// Requests for one key that arrive together while memory cannot keep its answer: one leads
/// the key's flight and asks the tier, the others wait on it. When the flight lands with the
/// tier's entry, each waiter (woken, the store still without it) asks the tier too, and gets
/// the hit: none goes upstream (before, each woken waiter went up alone).
#[test]
fn waiters_on_a_tier_flight_get_the_tier_entry_not_the_upstream() {
    const N: usize = 24;
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let body = vec![b'w'; 4096];
    let up = Upstream::start(move |_, _| ok_with("Cache-Control: public, max-age=600\r\n", &body));
    let (edge, admin) = edge_before_a_tier(&up, &tier.url());
    let before = tier_stored(&admin);
    assert_eq!(get(edge.addr, "/one", "").body.len(), 4096);
    eventually("the answer is in the tier", || tier_stored(&admin) > before);
    for round in 0..3 {
        let start = std::sync::Arc::new(std::sync::Barrier::new(N));
        let askers: Vec<_> = (0..N)
            .map(|_| {
                let (start, addr) = (start.clone(), edge.addr);
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    start.wait();
                    c.send(b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n");
                    c.read_response()
                })
            })
            .collect();
        for a in askers {
            let r = a.join().unwrap();
            assert_eq!((r.status, r.body.len()), (200, 4096), "round {round}");
        }
        assert_eq!(up.count("/one"), 1, "round {round}: waiters went upstream");
    }
}

/// Tier hits are answered by the driver (after the tier's thread), for an HTTP/1.1 client as
/// the content phase's fresh hits are (`Worker::answer_job`, `Conn::complete`): pipelined
/// with a HEAD, each answer comes in order with its own body, the stored Date and fields, the
/// hit's Age, Cache-Status and Via, and the HEAD with GET's Content-Length and no body.
#[test]
fn pipelined_tier_hits_come_in_order_with_the_stored_head() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    let body_of = |path: &str| path.repeat(2048 / path.len() + 1).into_bytes();
    let up = Upstream::start(move |path, _| {
        ok_with(
            "Cache-Control: public, max-age=600\r\nDate: Thu, 01 Jan 2099 00:00:00 GMT\r\nX-Origin: kept\r\n",
            &body_of(path),
        )
    });
    let (edge, admin) = edge_before_a_tier(&up, &tier.url());
    let before = tier_stored(&admin);
    // Three keys: two requests for one key in one turn would wait on one flight, and a
    // waiter is planned again from memory, which keeps nothing here.
    for p in ["/piped-a", "/piped-b", "/piped-c"] {
        assert_eq!(get(edge.addr, p, "").body, body_of(p));
    }
    eventually("the answers are in the tier", || {
        tier_stored(&admin) >= before + 3
    });
    let mut c = Client::connect(edge.addr);
    c.send(
        b"GET /piped-a HTTP/1.1\r\nHost: t\r\n\r\n\
          HEAD /piped-b HTTP/1.1\r\nHost: t\r\n\r\n\
          GET /piped-c HTTP/1.1\r\nHost: t\r\n\r\n",
    );
    let answers = [
        (c.read_response(), "/piped-a", false),
        (
            c.read_response_opt(true).expect("the HEAD's answer"),
            "/piped-b",
            true,
        ),
        (c.read_response(), "/piped-c", false),
    ];
    for (r, p, head) in answers {
        assert_eq!(r.status, 200, "{p}");
        assert!(
            r.header("cache-status").unwrap().contains("hit"),
            "{p}: {:?}",
            r.headers
        );
        assert_eq!(
            r.header("date"),
            Some("Thu, 01 Jan 2099 00:00:00 GMT"),
            "{p}"
        );
        assert_eq!(r.header("x-origin"), Some("kept"), "{p}");
        assert!(
            r.header("age").is_some() && r.header("via").is_some(),
            "{p}"
        );
        let len = body_of(p).len().to_string();
        assert_eq!(r.header("content-length"), Some(len.as_str()), "{p}");
        if head {
            assert!(r.body.is_empty(), "a HEAD answer has no body");
        } else {
            assert!(r.body == body_of(p), "{p}: another request's answer");
        }
        assert_eq!(up.count(p), 1, "{p} went upstream again");
    }
    // Nothing more came: the HEAD's answer carried no body the next read would take.
    c.send(b"GET /piped-a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert!(c.read_response().body == body_of("/piped-a"));
}

/// A hit over HTTP/2 (h2c, curl with prior knowledge): the stored answer with its stored
/// Date, Age and Cache-Status, as over HTTP/1.1; a HEAD has the fields and no body.
#[test]
fn an_http2_client_gets_the_stored_answer_too() {
    let up = Upstream::start(|_, _| {
        ok_with(
            "Cache-Control: max-age=60\r\nDate: Thu, 01 Jan 2099 00:00:00 GMT\r\n",
            b"over h2",
        )
    });
    let h2c = common::free_port("127.0.0.1").to_string();
    let s = cache_in_front(&up, &["--h2c-port", h2c.as_str()]);
    let dir = tempfile_dir();
    let url = format!("http://127.0.0.1:{h2c}/h2");
    let first = common::curl::curl_url(&dir, &url, &["--http2-prior-knowledge"], &[]);
    let hit = common::curl::curl_url(&dir, &url, &["--http2-prior-knowledge"], &[]);
    assert_eq!(hit.version, "2");
    assert_eq!((hit.status, hit.text().as_str()), (200, "over h2"));
    assert!(
        hit.header("cache-status").unwrap().contains("hit"),
        "{:?}",
        hit.headers
    );
    // The stored Date, not the time of this answer (RFC 9110 §6.6.1, cache-tests'
    // other-date-update); the miss before it was relayed with ours, as every proxied answer.
    assert_eq!(
        first.header("cache-status").map(|s| s.contains("stored")),
        Some(true)
    );
    assert_eq!(hit.header("date"), Some("Thu, 01 Jan 2099 00:00:00 GMT"));
    assert!(hit.header("age").is_some());
    let head = common::curl::curl_url(&dir, &url, &["--http2-prior-knowledge", "-I"], &[]);
    // curl -I writes the head where the body would go: no byte of the body follows it.
    assert_eq!(head.status, 200);
    assert!(!head.text().contains("over h2"), "{}", head.text());
    assert!(head.header("cache-status").unwrap().contains("hit"));
    assert_eq!(up.count("/h2"), 1);
    drop(s);
}

/// A directory of this test process's own for curl's files.
fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-proxy-cache-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A reload (SIGHUP) keeps what a cache holds when the mount's cache settings did not change,
/// as nginx's and Varnish's caches outlive a reload; changed settings start it empty.
#[test]
fn a_reload_keeps_the_cache_unless_its_settings_changed() {
    let up = Upstream::start(|_, _| ok_with("Cache-Control: max-age=600\r\n", b"kept"));
    let dir = tempfile_dir().join("reload");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let file = dir.join("linerate.toml");
    let write = |generation: u32, size: &str| {
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:{port}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[site]]\ndefault = true\n\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\nset_response = {{ \"X-Generation\" = \"{generation}\" }}\ncache = {{ size = \"{size}\" }}\n",
                up.addr
            ),
        )
        .unwrap();
    };
    write(1, "4MiB");
    let s = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    get(addr, "/k", "");
    assert!(
        get(addr, "/k", "")
            .header("cache-status")
            .unwrap()
            .contains("hit")
    );
    // Another response field, the same cache settings: still a hit after the reload.
    write(2, "4MiB");
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the reload took effect", || {
        get(addr, "/k", "").header("x-generation") == Some("2")
    });
    assert_eq!(
        up.count("/k"),
        1,
        "the reload emptied a cache whose settings are the same"
    );
    // Another size: a cache of its own, empty.
    write(3, "8MiB");
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the second reload took effect", || {
        get(addr, "/k", "").header("x-generation") == Some("3")
    });
    assert_eq!(up.count("/k"), 2);
}

/// Requests waiting on a flight whose mount a reload replaced (its cache settings changed)
/// still go up on their own after `lock_timeout`, not only when the leader's answer ends.
/// Before the fix the worker looked for late flights on the new set's mounts only.
#[test]
fn waiters_on_a_replaced_mounts_flight_still_go_up_after_the_lock_timeout() {
    let slow = Upstream::start(|_, _| ok_with("Cache-Control: max-age=600\r\n", b"slow"));
    let fast = Upstream::start(|_, _| ok_with("", b"fast"));
    slow.set_open(false);
    let dir = tempfile_dir().join("reload-flight");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let file = dir.join("linerate.toml");
    let write = |generation: u32, size: &str| {
        std::fs::write(
            &file,
            format!(
                "[admin]\naddr = \"{admin}\"\n\n[[listen]]\naddr = \"127.0.0.1:{port}\"\n\n\
                 [[upstream]]\nname = \"slow\"\nservers = [\"{}\"]\n\n\
                 [[upstream]]\nname = \"fast\"\nservers = [\"{}\"]\n\n\
                 [[site]]\ndefault = true\n\n\
                 [[site.proxy]]\nprefix = \"/fast\"\nupstream = \"fast\"\n\
                 set_response = {{ \"X-Generation\" = \"{generation}\" }}\n\n\
                 [[site.proxy]]\nprefix = \"/\"\nupstream = \"slow\"\n\
                 cache = {{ size = \"{size}\", lock_timeout = \"1s\" }}\n",
                slow.addr, fast.addr
            ),
        )
        .unwrap();
    };
    write(1, "4MiB");
    let s = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let ask = || {
        let mut c = Client::connect(addr);
        c.send(b"GET /k HTTP/1.1\r\nHost: t\r\n\r\n");
        c
    };
    let mut leader = ask();
    eventually("the leader is upstream", || slow.count("/k") == 1);
    let mut waiter = ask();
    eventually("the second request waits on the flight", || {
        metric(&admin, "linerate_cache_waiting") == Some(1)
    });
    // Another cache size: the mount's cache is a new one, and the flight stays on the old.
    write(2, "8MiB");
    common::bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the reload took effect", || {
        get(addr, "/fast", "").header("x-generation") == Some("2")
    });
    // The gate is still shut: only the waiter's own request, sent once the lock timed out,
    // makes a second.
    eventually("the waiter went up on its own", || slow.count("/k") == 2);
    slow.set_open(true);
    assert_eq!(leader.read_response().text(), "slow");
    assert_eq!(waiter.read_response().text(), "slow");
}

/// A request asking to upgrade (WebSocket) is the upstream's to answer even when its URL is
/// cached: the cache neither answers it nor stores what comes back.
#[test]
fn an_upgrade_request_goes_upstream_past_a_cached_answer() {
    let up = Upstream::start(|_, head| {
        if head.to_ascii_lowercase().contains("upgrade: websocket") {
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n".to_vec()
        } else {
            ok_with("Cache-Control: max-age=600\r\n", b"page")
        }
    });
    let s = cache_in_front(&up, &[]);
    get(s.addr, "/ws", "");
    assert!(
        get(s.addr, "/ws", "")
            .header("cache-status")
            .unwrap()
            .contains("hit")
    );
    let mut c = Client::connect(s.addr);
    c.send(b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    let r = c.read_response_opt(true).expect("an answer");
    assert_eq!(r.status, 101);
    assert_eq!(up.count("/ws"), 2);
}

/// The fields of a raw head, each name lowercased, in order (the status line left out).
fn head_fields(r: &common::Resp) -> Vec<(String, String)> {
    r.headers
        .iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect()
}

/// How many times `name` (lowercase) is in `fields`.
fn times(fields: &[(String, String)], name: &str) -> usize {
    fields.iter().filter(|(n, _)| n == name).count()
}

/// A fresh hit to an HTTP/1.1 client is answered by the content phase from the entry's head
/// rendered once (`proxy::cache::Fresh`): its head must carry each stored field once, the
/// stored Date (not the current one, RFC 9110 §6.6.1) and the cache's own Age, Cache-Status
/// and Via once each, never the upstream's Server, Age or framing; HEAD carries GET's head,
/// Content-Length included (RFC 9110 §8.6: a HEAD hit said `Content-Length: 0` before), and
/// no body (the next answer on the connection parses); an HTTP/1.0 client that keeps the
/// connection hears `Connection: keep-alive`.
#[test]
fn a_fresh_hits_head_carries_each_stored_field_once_and_head_says_what_get_would() {
    const DATE: &str = "Tue, 01 Jan 2030 00:00:00 GMT";
    let up = Upstream::start(|_, _| {
        ok_with(
            &format!(
                "Cache-Control: max-age=600\r\nETag: \"e1\"\r\nX-One: 1\r\nDate: {DATE}\r\n\
                 Server: upstream\r\nAge: 3\r\nContent-Type: image/png\r\n"
            ),
            b"0123456789",
        )
    });
    let s = cache_in_front(&up, &[]);
    let miss = get(s.addr, "/f", "");
    assert_eq!((miss.status, miss.text().as_str()), (200, "0123456789"));
    let mut c = Client::connect(s.addr);
    c.send(b"GET /f HTTP/1.1\r\nHost: t\r\n\r\nHEAD /f HTTP/1.1\r\nHost: t\r\n\r\n");
    let hit = c.read_response();
    let head = c.read_response_opt(true).expect("the HEAD's answer");
    c.send(b"GET /f HTTP/1.1\r\nHost: t\r\n\r\n");
    let after = c.read_response();
    assert_eq!((hit.status, hit.text().as_str()), (200, "0123456789"));
    assert_eq!((after.status, after.text().as_str()), (200, "0123456789"));
    assert_eq!(up.count("/f"), 1, "every later answer came from the store");
    for (what, r) in [("GET", &hit), ("HEAD", &head)] {
        let f = head_fields(r);
        for name in [
            "cache-control",
            "etag",
            "x-one",
            "content-type",
            "date",
            "age",
            "cache-status",
            "via",
            "server",
            "content-length",
        ] {
            assert_eq!(times(&f, name), 1, "{what}: {name} once in {f:?}");
        }
        assert_eq!(r.header("date"), Some(DATE), "{what}: the stored Date");
        assert_ne!(
            r.header("server"),
            Some("upstream"),
            "{what}: this server's"
        );
        assert!(r.header("cache-status").unwrap().contains("hit"), "{what}");
        assert!(
            r.header("age").unwrap().parse::<u64>().unwrap() >= 3,
            "{what}"
        );
        assert_eq!(
            r.header("content-length"),
            Some("10"),
            "{what}: GET's length"
        );
        assert_eq!(times(&f, "transfer-encoding"), 0, "{what}");
    }
    assert!(head.body.is_empty());
    // HTTP/1.0, kept open: told so, and answered whole.
    let mut c = Client::connect(s.addr);
    c.send(b"GET /f HTTP/1.0\r\nHost: t\r\nConnection: keep-alive\r\n\r\n");
    let old = c.read_response();
    assert_eq!((old.status, old.text().as_str()), (200, "0123456789"));
    assert_eq!(old.header("connection"), Some("keep-alive"));
    assert!(old.header("cache-status").unwrap().contains("hit"));
    c.send(b"GET /f HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let last = c.read_response();
    assert_eq!(last.header("connection"), Some("close"));
    assert_eq!(last.text(), "0123456789");
    c.expect_eof();
    drop(s);
}

/// The head a fresh hit writes is rendered once per stored entry; a 304 from a validation
/// freshens the entry (RFC 9111 §4.3.4: a new entry with the 304's fields), so the next fresh
/// hit carries the new field values, each once.
#[test]
fn a_revalidation_that_changes_a_stored_field_changes_the_next_fresh_hits_head() {
    let up = Upstream::start(|_, head| {
        if head.to_ascii_lowercase().contains("if-none-match: \"v\"") {
            b"HTTP/1.1 304 Not Modified\r\nETag: \"v\"\r\nX-Version: 2\r\n\
              Cache-Control: max-age=900\r\n\r\n"
                .to_vec()
        } else {
            ok_with(
                "Cache-Control: max-age=600\r\nETag: \"v\"\r\nX-Version: 1\r\nContent-Type: image/png\r\n",
                b"body",
            )
        }
    });
    // A client's no-cache is heeded only where the mount says so.
    let s = cache_in_front(&up, &["--proxy-cache-client-no-cache", "revalidate"]);
    assert_eq!(get(s.addr, "/r", "").text(), "body");
    let first = get(s.addr, "/r", "");
    assert!(first.header("cache-status").unwrap().contains("hit"));
    assert_eq!(first.header("x-version"), Some("1"));
    assert_eq!(first.header("cache-control"), Some("max-age=600"));
    // The client asks for a validation (RFC 9111 §5.2.1.4); the upstream's 304 freshens.
    let validated = get(s.addr, "/r", "Cache-Control: no-cache\r\n");
    assert_eq!((validated.status, validated.text().as_str()), (200, "body"));
    assert_eq!(up.count("/r"), 2, "one validation went up");
    let next = get(s.addr, "/r", "");
    assert!(next.header("cache-status").unwrap().contains("hit"));
    let f = head_fields(&next);
    assert_eq!(next.header("x-version"), Some("2"), "{f:?}");
    assert_eq!(next.header("cache-control"), Some("max-age=900"), "{f:?}");
    assert_eq!((times(&f, "x-version"), times(&f, "cache-control")), (1, 1));
    assert_eq!((times(&f, "etag"), times(&f, "age")), (1, 1));
    assert_eq!(next.text(), "body");
    assert_eq!(up.count("/r"), 2);
    drop(s);
}

/// On a site that compresses, a fresh hit for a client that takes no coding is the stored
/// bytes with `Vary: Accept-Encoding` once (as the driver's hit, `send_hit`); a client that
/// takes gzip still gets it compressed.
#[test]
fn a_fresh_hit_on_a_compressing_site_says_it_varies_once_and_gzip_still_compresses() {
    let text = "compressible text ".repeat(200);
    let body = text.clone();
    let up = Upstream::start(move |_, _| {
        ok_with(
            "Cache-Control: max-age=600\r\nContent-Type: text/plain\r\n",
            body.as_bytes(),
        )
    });
    let s = cache_in_front(&up, &[]);
    assert_eq!(get(s.addr, "/t", "").text(), text);
    let plain = get(s.addr, "/t", "");
    assert!(plain.header("cache-status").unwrap().contains("hit"));
    let f = head_fields(&plain);
    assert_eq!(times(&f, "vary"), 1, "{f:?}");
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.text(), text);
    let gz = get(s.addr, "/t", "Accept-Encoding: gzip\r\n");
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(common::gunzip(&gz.body), text.as_bytes());
    assert_eq!(up.count("/t"), 1);
    drop(s);
}

/// A fresh hit pipelined behind a request that goes upstream waits its turn (RFC 9112 §9.3.2:
/// answers in request order): it is placed in the connection's queue as written bytes, and
/// goes out whole after the upstream's answer.
#[test]
fn a_fresh_hit_pipelined_behind_a_miss_is_answered_in_order() {
    let up = Upstream::start(|path, _| {
        if path == "/miss" {
            ok_with("Cache-Control: no-store\r\n", b"from upstream")
        } else {
            ok_with("Cache-Control: max-age=600\r\nX-Kept: k\r\n", b"stored")
        }
    });
    let s = cache_in_front(&up, &[]);
    assert_eq!(get(s.addr, "/h", "").text(), "stored");
    // The upstream's answer is held until both requests are in.
    up.set_open(false);
    let mut c = Client::connect(s.addr);
    c.send(b"GET /miss HTTP/1.1\r\nHost: t\r\n\r\nGET /h HTTP/1.1\r\nHost: t\r\n\r\n");
    eventually("the miss went up", || up.count("/miss") == 1);
    up.set_open(true);
    let first = c.read_response();
    let second = c.read_response();
    assert_eq!(first.text(), "from upstream");
    assert_eq!(second.text(), "stored");
    assert!(second.header("cache-status").unwrap().contains("hit"));
    assert_eq!(times(&head_fields(&second), "x-kept"), 1);
    assert_eq!(up.count("/h"), 1);
    drop(s);
}

/// The first sample of the tier counter for `outcome` in edge `admin`'s `/metrics`.
fn tier_count(admin: &str, outcome: &str) -> u64 {
    scrape(admin)
        .lines()
        .find(|l| {
            l.starts_with("linerate_cache_tier_requests_total")
                && l.contains(&format!("outcome=\"{outcome}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// `public, max-age=60` with `Set-Cookie: sid=<new>` was stored, and the
/// next visitor without cookies got the first one's `sid`, and its session. An answer that
/// sets a cookie now goes to the request that caused it only: not stored (nor with
/// `s-maxage`), a request collapsed on its flight goes up for an answer of its own, and a 304
/// that adds a cookie to a stored answer leaves nothing stored that would replay it.
#[test]
fn a_set_cookie_is_never_replayed_to_another_visitor() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let sids = AtomicUsize::new(0);
    let up = Upstream::start(move |path, head| {
        let sid = sids.fetch_add(1, Ordering::Relaxed) + 1;
        let validating = head.to_ascii_lowercase().contains("if-none-match");
        match path {
            "/page" | "/held" => ok_with(
                &format!("Cache-Control: public, max-age=60\r\nSet-Cookie: sid={sid}\r\n"),
                b"page",
            ),
            "/edge" => ok_with(
                &format!("Cache-Control: s-maxage=60\r\nSet-Cookie: sid={sid}\r\n"),
                b"edge",
            ),
            "/v" if validating => format!(
                "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nCache-Control: public, max-age=60\r\nSet-Cookie: sid={sid}\r\n\r\n"
            )
            .into_bytes(),
            "/v" => ok_with("Cache-Control: public, max-age=0\r\nETag: \"a\"\r\n", b"v"),
            _ => ok_with("", b"?"),
        }
    });
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let s = cache_in_front(&up, &["--admin", admin.as_str(), "--workers", "2"]);
    for path in ["/page", "/edge"] {
        let first = get(s.addr, path, "");
        let sid = first.header("set-cookie").unwrap().to_string();
        let status = first.header("cache-status").unwrap();
        assert!(
            !status.contains("stored") && status.contains("detail=set-cookie"),
            "{path}: {status}"
        );
        let second = get(s.addr, path, "");
        assert_ne!(
            second.header("set-cookie"),
            Some(sid.as_str()),
            "{path}: the first visitor's cookie went to the second"
        );
        assert_eq!(up.count(path), 2, "{path}");
    }
    // Two visitors at once: the second waits on the first's flight, and must not be given
    // the first one's answer.
    up.set_open(false);
    let ask = || {
        let mut c = Client::connect(s.addr);
        c.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
        c
    };
    let mut leader = ask();
    eventually("the leader is upstream", || up.count("/held") == 1);
    let mut waiter = ask();
    eventually("the second visitor waits on the flight", || {
        metric(&admin, "linerate_cache_waiting") == Some(1)
    });
    up.set_open(true);
    let (a, b) = (leader.read_response(), waiter.read_response());
    assert!(a.header("set-cookie").is_some());
    assert_ne!(
        a.header("set-cookie"),
        b.header("set-cookie"),
        "the waiter got the leader's cookie"
    );
    assert_eq!(up.count("/held"), 2);
    // A 304 that sets a cookie: its own request gets it, the next one does not.
    assert_eq!(get(s.addr, "/v", "").text(), "v");
    let validated = get(s.addr, "/v", "");
    let own = validated.header("set-cookie").map(str::to_string);
    assert!(own.is_some(), "{:?}", validated.headers);
    let next = get(s.addr, "/v", "");
    assert_eq!(next.text(), "v");
    assert_ne!(
        next.header("set-cookie").map(str::to_string),
        own,
        "the 304's cookie was replayed"
    );
}

/// The second tier: an edge that keeps Set-Cookie answers (the dangerous
/// `set_cookie = "explicit"`, or an older linerate) stores them in the shared tier; an edge
/// that does not must not serve them from there, whatever the other stored.
#[test]
fn a_tier_entry_that_sets_a_cookie_is_not_served_by_an_edge_that_keeps_none() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    let sids = AtomicUsize::new(0);
    let up = Upstream::start(move |path, _| match path {
        "/c" => {
            let sid = sids.fetch_add(1, Ordering::Relaxed) + 1;
            ok_with(
                &format!("Cache-Control: public, max-age=600\r\nSet-Cookie: sid={sid}\r\n"),
                b"c",
            )
        }
        _ => ok_with("Cache-Control: public, max-age=600\r\n", path.as_bytes()),
    });
    let dir = tempfile_dir().join("explicit-edge");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let admin_a = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin_a}\"\n\n[[listen]]\naddr = \"127.0.0.1:{port}\"\n\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[site]]\ndefault = true\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n\
             cache = {{ size = \"4MiB\", set_cookie = \"explicit\", tier = \"{}\" }}\n",
            up.addr,
            tier.url()
        ),
    )
    .unwrap();
    let _a = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut n = 0;
    eventually("edge A stores in the tier", || {
        n += 1;
        stores_through(&admin_a, || {
            get(a, &format!("/warm{n}"), "");
        })
    });
    let before = tier_stored(&admin_a);
    let first = get(a, "/c", "");
    let sid = first.header("set-cookie").unwrap().to_string();
    eventually("A's answer is in the tier", || {
        tier_stored(&admin_a) > before
    });
    // The opt-in does what it says (and docs/config.md says it is dangerous): A replays it.
    assert_eq!(get(a, "/c", "").header("set-cookie"), Some(sid.as_str()));
    let (b, _admin_b) = edge_before_a_tier(&up, &tier.url());
    let other = get(b.addr, "/c", "");
    assert_ne!(
        other.header("set-cookie"),
        Some(sid.as_str()),
        "edge B served A's visitor's cookie from the tier"
    );
    assert_eq!(
        up.count("/c"),
        2,
        "B went upstream for an answer of its own"
    );
}

/// A GET whose body the origin reads was answered from, and stored under,
/// its URL: a "fat GET" poisoned the entry for every later visitor. A GET (or HEAD) with
/// content — a Content-Length or chunks over HTTP/1.1, DATA over HTTP/2 — goes up alone, its
/// answer is not stored, and its Cache-Status says why.
#[test]
fn a_get_with_a_body_is_neither_answered_from_nor_stored_under_its_url() {
    let up = Upstream::start(|_, head| {
        let h = head.to_ascii_lowercase();
        let fat = h.contains("transfer-encoding: chunked")
            || h.lines().any(|l| {
                l.strip_prefix("content-length:")
                    .is_some_and(|v| v.trim() != "0")
            });
        ok_with(
            "Cache-Control: max-age=60\r\n",
            if fat { b"fat" } else { b"plain" },
        )
    });
    let h2c = common::free_port("127.0.0.1").to_string();
    let s = cache_in_front(&up, &["--h2c-port", h2c.as_str()]);
    let fat = |path: &str, framing: &str| {
        let mut c = Client::connect(s.addr);
        let body = match framing {
            "chunked" => "Transfer-Encoding: chunked\r\n\r\n4\r\nevil\r\n0\r\n\r\n",
            _ => "Content-Length: 4\r\n\r\nevil",
        };
        c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{body}").as_bytes());
        c.read_response()
    };
    // Stored first, then a fat GET: it is not answered from the entry.
    assert_eq!(get(s.addr, "/s", "").text(), "plain");
    for framing in ["length", "chunked"] {
        let r = fat("/s", framing);
        assert_eq!(
            r.text(),
            "fat",
            "{framing}: answered from the plain GET's entry"
        );
        let status = r.header("cache-status").unwrap();
        assert!(
            status.contains("fwd=bypass")
                && status.contains("detail=request-body")
                && !status.contains("stored"),
            "{framing}: {status}"
        );
    }
    let plain = get(s.addr, "/s", "");
    assert_eq!(plain.text(), "plain");
    assert!(plain.header("cache-status").unwrap().contains("hit"));
    assert_eq!(up.count("/s"), 3);
    // A fat GET first: its answer is stored for no one.
    for (i, framing) in ["length", "chunked"].iter().enumerate() {
        let path = format!("/t{i}");
        assert_eq!(fat(&path, framing).text(), "fat");
        assert_eq!(
            get(s.addr, &path, "").text(),
            "plain",
            "{framing}: poisoned"
        );
        assert_eq!(up.count(&path), 2);
    }
    // HTTP/2: DATA with a content-length, and DATA without one (HEADERS without END_STREAM).
    let dir = tempfile_dir();
    let url = format!("http://127.0.0.1:{h2c}/s");
    let h2 = ["--http2-prior-knowledge", "-X", "GET"];
    for body in [&["--data-binary", "evil"][..], &["-T", "-"]] {
        let r = common::curl::curl_url(&dir, &url, &h2, body);
        assert_eq!(r.version, "2");
        assert!(
            r.header("cache-status")
                .is_some_and(|s| s.contains("detail=request-body")),
            "{body:?}: {:?}",
            r.headers
        );
        assert_eq!(r.text(), "fat", "{body:?}");
    }
    assert_eq!(get(s.addr, "/s", "").text(), "plain");
    assert_eq!(up.count("/s"), 5);
}

/// A 200 with `fields` and `body` in chunks of 64 KiB.
fn chunked_with(fields: &str, body: &[u8]) -> Vec<u8> {
    let mut v =
        format!("HTTP/1.1 200 OK\r\n{fields}Transfer-Encoding: chunked\r\n\r\n").into_bytes();
    for piece in body.chunks(64 << 10) {
        v.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        v.extend_from_slice(piece);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

/// With `size = "256MiB"` and `max_object = "64MiB"`, 17 MB and 50 MB
/// answers were never stored (sixteen shards of 16 MiB held none) while Cache-Status said
/// `stored`; so did an answer declared over `max_object`. Here at a test's scale (8 MiB, 2
/// MiB objects: sixteen shards of 512 KiB before): an answer up to `max_object` is stored,
/// and Cache-Status says `stored` only for one that is.
#[test]
fn an_answer_up_to_max_object_is_stored_and_cache_status_says_only_what_was() {
    let mid: Vec<u8> = (0..1_500_000).map(|i: usize| (i % 251) as u8).collect();
    let over: Vec<u8> = (0..(2 << 20) + 1).map(|i: usize| (i % 241) as u8).collect();
    let (m, o) = (mid.clone(), over.clone());
    let up = Upstream::start(move |path, _| {
        let cc = "Cache-Control: max-age=600\r\n";
        match path {
            "/mid" => ok_with(cc, &m),
            "/over" => ok_with(cc, &o),
            "/chunked-mid" => chunked_with(cc, &m),
            _ => chunked_with(cc, &o),
        }
    });
    let dir = tempfile_dir().join("max-object");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n\n[[listen]]\naddr = \"127.0.0.1:{port}\"\n\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[site]]\ndefault = true\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n\
             cache = {{ size = \"8MiB\", max_object = \"2MiB\" }}\n",
            up.addr
        ),
    )
    .unwrap();
    let _s = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // The Cache-Status line of a head `get_whole` read, and the body.
    let ask = |path: &str| {
        let (head, body) = get_whole(addr, path);
        let status = head
            .lines()
            .find_map(|l| l.strip_prefix("cache-status:"))
            .unwrap_or("")
            .trim()
            .to_string();
        (status, body)
    };
    // Known length, under max_object: `stored`, and the next request is a hit.
    let (status, body) = ask("/mid");
    assert!(body == mid && status.contains("stored"), "{status}");
    let (status, body) = ask("/mid");
    assert!(body == mid && status.contains("hit"), "{status}");
    assert_eq!(
        up.count("/mid"),
        1,
        "a 1.5 MB answer under max_object was not stored"
    );
    // Declared over max_object: streamed whole, stored nowhere, and said so.
    for _ in 0..2 {
        let (status, body) = ask("/over");
        assert!(body == over, "{} bytes", body.len());
        assert!(
            !status.contains("stored") && status.contains("detail=too-big"),
            "{status}"
        );
    }
    assert_eq!(up.count("/over"), 2);
    // Chunked: the head goes before the length is known, so it never says `stored`; the
    // one under max_object is stored all the same, the one over it is not.
    let (status, body) = ask("/chunked-mid");
    assert!(body == mid && !status.contains("stored"), "{status}");
    assert!(ask("/chunked-mid").0.contains("hit"));
    for _ in 0..2 {
        let (status, body) = ask("/chunked-over");
        assert!(body == over && !status.contains("stored"), "{status}");
    }
    assert_eq!(
        (up.count("/chunked-mid"), up.count("/chunked-over")),
        (1, 2)
    );
    assert_eq!(metric(&admin, "linerate_cache_stored_total"), Some(2));
}

/// Two edges on one tier: A (with its admin listener) and B, each with a 4 MiB memory
/// store, once each stores in the tier (they read its generation first).
fn two_edges(up: &Upstream, url: &str) -> Vec<(Served, String)> {
    let spec = format!("/=http://{}", up.addr);
    (0..2)
        .map(|_| {
            let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
            let edge = common::bin::serve_as(&[
                "--addr",
                "127.0.0.1:0",
                "--app",
                "none",
                "--proxy",
                spec.as_str(),
                "--proxy-cache",
                "4MiB",
                "--proxy-cache-tier",
                url,
                "--admin",
                admin.as_str(),
            ]);
            let mut n = 0;
            eventually("the edge stores in the tier", || {
                n += 1;
                stores_through(&admin, || {
                    get(edge.addr, &format!("/warm{n}-{}", edge.addr.port()), "");
                })
            });
            (edge, admin)
        })
        .collect()
}

/// Purging `/product/p1` on one edge sent another edge's `/product/p2` to
/// the origin: the purge moved the tier's generation, and every edge emptied its memory. A
/// URL's purge now deletes that URL's tier entry and reaches the other edges through the
/// tier's purge log: their other answers stay. On Redis, then on memcached.
#[test]
fn a_purge_of_one_url_leaves_every_edges_other_answers_cached() {
    for program in ["redis-server", "memcached"] {
        let Some(tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        // Paths of this program's own: the upstream counts by path.
        let (p1, p2) = (
            format!("/{program}/product/p1"),
            format!("/{program}/product/p2"),
        );
        let up = Upstream::start(|path, _| {
            ok_with("Cache-Control: public, max-age=600\r\n", path.as_bytes())
        });
        let edges = two_edges(&up, &tier.url());
        let ((a, admin_a), (b, _)) = (&edges[0], &edges[1]);
        for p in [&p1, &p2] {
            let before = tier_stored(admin_a);
            get(a.addr, p, "");
            eventually(&format!("{program}: A's answer is in the tier"), || {
                tier_stored(admin_a) > before
            });
            for _ in 0..2 {
                let r = get(b.addr, p, "");
                assert!(
                    r.header("cache-status").unwrap().contains("hit"),
                    "{program}"
                );
            }
        }
        assert_eq!((up.count(&p1), up.count(&p2)), (1, 1), "{program}");
        assert_eq!(
            post(admin_a, &format!("/purge?url=http://t{p1}")),
            (200, "purged 1\n".to_string()),
            "{program}"
        );
        // B forgets p1 once it reads the purge log (each second), and then only p1.
        eventually(&format!("{program}: the purge reached edge B"), || {
            get(b.addr, &p1, "");
            up.count(&p1) == 2
        });
        for e in [a, b] {
            let r = get(e.addr, &p2, "");
            assert!(
                r.header("cache-status").unwrap().contains("hit"),
                "{program}: {:?}",
                r.headers
            );
        }
        assert_eq!(up.count(&p2), 1, "{program}: p2 went to the origin");
        assert_eq!(
            up.count(&p1),
            2,
            "{program}: A served p1 from memory or the tier"
        );
    }
}

/// With the tier stopped (SIGSTOP) and marked down, `POST /purge?url=…`
/// answered `purged 1` and the purge was lost: once the tier was back, both edges served the
/// purged page from it for its whole TTL. The purge is now kept, answered 202 with what is
/// pending, and applied when the tier is back, before any tier answer for its key is used.
#[test]
fn a_purge_while_the_tier_is_down_is_kept_and_applied_when_it_is_back() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    let versions = AtomicUsize::new(0);
    let up = Upstream::start(move |path, _| {
        let cc = "Cache-Control: public, max-age=600\r\n";
        match path {
            "/page" => {
                let v = versions.fetch_add(1, Ordering::Relaxed) + 1;
                ok_with(cc, format!("v{v}").as_bytes())
            }
            _ => ok_with(cc, path.as_bytes()),
        }
    });
    let edges = two_edges(&up, &tier.url());
    let ((a, admin_a), (b, _)) = (&edges[0], &edges[1]);
    let before = tier_stored(admin_a);
    assert_eq!(get(a.addr, "/page", "").text(), "v1");
    eventually("A's answer is in the tier", || {
        tier_stored(admin_a) > before
    });
    assert_eq!(get(b.addr, "/page", "").text(), "v1");
    // The tier stops answering; A finds out (a question past the timeout marks it down).
    tier.signal(rustix::process::Signal::STOP);
    let failed = tier_count(admin_a, "error");
    let mut n = 0;
    eventually("A marks the tier down", || {
        n += 1;
        get(a.addr, &format!("/down{n}"), "");
        tier_count(admin_a, "error") > failed
    });
    let (status, body) = post(admin_a, "/purge?url=http://t/page");
    assert_eq!(status, 202, "{body}");
    assert!(
        body.contains("purged 1") && body.contains("pending: http://t/page"),
        "{body}"
    );
    tier.signal(rustix::process::Signal::CONT);
    // A uses the tier again (it stores there), then asks it for the purged page.
    let mut n = 0;
    eventually("A stores in the tier again", || {
        n += 1;
        stores_through(admin_a, || {
            get(a.addr, &format!("/back{n}"), "");
        })
    });
    assert_ne!(
        get(a.addr, "/page", "").text(),
        "v1",
        "A served the purged page from the tier"
    );
    eventually("the purge reached edge B", || {
        get(b.addr, "/page", "").text() != "v1"
    });
    // Applied: purges answer 200 again.
    assert_eq!(post(admin_a, "/purge?url=http://t/page").0, 200);
}

/// "A purge answers 200 when it did not reach the fleet": the `PURGE`
/// method, as the admin's purge, while the tier is stopped (SIGSTOP) and marked down: 202
/// (RFC 9110 §15.3.3: accepted, not completed) with what is pending, never 200; once the tier
/// is back (SIGCONT) the kept purge is replayed there and reaches the other edge, and a
/// purge that reaches the tier answers 200 again.
#[test]
fn a_purge_method_while_the_tier_is_down_answers_202_and_is_replayed_when_it_is_back() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    use std::sync::atomic::{AtomicUsize, Ordering};
    let versions = AtomicUsize::new(0);
    let up = Upstream::start(move |path, _| {
        let cc = "Cache-Control: public, max-age=600\r\n";
        match path {
            "/page" => {
                let v = versions.fetch_add(1, Ordering::Relaxed) + 1;
                ok_with(cc, format!("v{v}").as_bytes())
            }
            _ => ok_with(cc, path.as_bytes()),
        }
    });
    let url = tier.url();
    let dir = tempfile_dir().join("purge-method-down");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:{port}\"\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[site]]\ndefault = true\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\", tier = \"{url}\", purge_from = [\"127.0.0.1\"] }}\n",
            up.addr
        ),
    )
    .unwrap();
    let admin_a = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let _a = common::bin::serve_as(&["--config", file.to_str().unwrap(), "--admin", &admin_a]);
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let edges = two_edges(&up, &url);
    let b = &edges[0].0;
    let before = tier_stored(&admin_a);
    assert_eq!(ask_as(a, "GET", "t", "/page").text(), "v1");
    eventually("A's answer is in the tier", || {
        tier_stored(&admin_a) > before
    });
    assert_eq!(ask_as(b.addr, "GET", "t", "/page").text(), "v1");
    tier.signal(rustix::process::Signal::STOP);
    let failed = tier_count(&admin_a, "error");
    let mut n = 0;
    eventually("A marks the tier down", || {
        n += 1;
        ask_as(a, "GET", "t", &format!("/down{n}"));
        tier_count(&admin_a, "error") > failed
    });
    let r = ask_as(a, "PURGE", "t", "/page");
    let body = r.text();
    assert_eq!(r.status, 202, "{body}");
    assert_eq!(body, "purged 1\npending: http://t/page\n");
    tier.signal(rustix::process::Signal::CONT);
    let mut n = 0;
    eventually("A stores in the tier again", || {
        n += 1;
        stores_through(&admin_a, || {
            ask_as(a, "GET", "t", &format!("/back{n}"));
        })
    });
    assert_ne!(
        ask_as(a, "GET", "t", "/page").text(),
        "v1",
        "A served the purged page from the tier"
    );
    eventually("the replayed purge reached edge B", || {
        ask_as(b.addr, "GET", "t", "/page").text() != "v1"
    });
    let r = ask_as(a, "PURGE", "t", "/page");
    assert_eq!(r.status, 200, "{}", r.text());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `METHOD path` with `Host: host` to `addr`.
fn ask_as(addr: SocketAddr, method: &str, host: &str, path: &str) -> common::Resp {
    let mut c = Client::connect(addr);
    c.send(format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
    c.read_response()
}

/// Whether `r` was answered from the cache.
fn is_hit(r: &common::Resp) -> bool {
    r.header("cache-status").is_some_and(|s| s.contains("hit"))
}

/// The key keeps the scheme and the Host's port, so a purge of `https://t/x`
/// left `http://t/x` and `http://t:PORT/x` (a client that names the listener's port) cached:
/// `purged 0`. A purge by URL now purges its keys under both schemes, with no port, its own
/// port and every listener's port. Another port is another origin, purged when named. nginx
/// 1.22's open-source build has no purge (`proxy_cache_purge` is NGINX Plus); Varnish keys
/// on Host and URL without the scheme by default, and its `ban`/`purge` take the Host as
/// sent, so there a purge of `t` leaves `t:8080` too.
#[test]
fn a_purge_of_a_url_purges_it_under_both_schemes_and_every_listener_port() {
    let up = Upstream::start(|path, _| ok_with("Cache-Control: max-age=600\r\n", path.as_bytes()));
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    // A port of its own, as a configuration names (`:0` is no port a client can name).
    let listen = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let spec = format!("/=http://{}", up.addr);
    let s = common::bin::serve_as(&[
        "--addr",
        listen.as_str(),
        "--app",
        "none",
        "--proxy",
        spec.as_str(),
        "--proxy-cache",
        "4MiB",
        "--admin",
        admin.as_str(),
    ]);
    let own = format!("t:{}", s.addr.port());
    let hosts = ["t", own.as_str(), "t:8080"];
    for round in 0..2 {
        for h in hosts {
            let r = ask_as(s.addr, "GET", h, "/x");
            assert_eq!(is_hit(&r), round == 1, "{h}: {:?}", r.headers);
        }
    }
    assert_eq!(up.count("/x"), 3);
    assert_eq!(
        post(&admin, "/purge?url=https://t/x"),
        (200, "purged 2\n".to_string())
    );
    assert!(!is_hit(&ask_as(s.addr, "GET", "t", "/x")));
    assert!(!is_hit(&ask_as(s.addr, "GET", &own, "/x")));
    assert!(
        is_hit(&ask_as(s.addr, "GET", "t:8080", "/x")),
        "a port no listener has is another origin"
    );
    // Named with its port: every form again.
    assert_eq!(
        post(&admin, "/purge?url=https%3A%2F%2Ft%3A8080%2Fx"),
        (200, "purged 3\n".to_string())
    );
    for h in hosts {
        assert!(!is_hit(&ask_as(s.addr, "GET", h, "/x")), "{h}");
    }
    assert_eq!(up.count("/x"), 8);
}

/// Through the tier: a purge by URL on edge A reaches edge B's answers of
/// the URL under another scheme and port (each key announced in the purge log), and
/// `POST /purge?all` (400 before: there was no purge of everything) empties every edge,
/// while answers of other URLs stay after the URL purge. On Redis, then memcached.
#[test]
fn purge_all_and_a_purge_across_ports_reach_every_edge_through_the_tier() {
    for program in ["redis-server", "memcached"] {
        let Some(tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        let (x, other) = (format!("/{program}/x"), format!("/{program}/other"));
        let up = Upstream::start(|path, _| {
            ok_with("Cache-Control: public, max-age=600\r\n", path.as_bytes())
        });
        let edges = two_edges(&up, &tier.url());
        let ((a, admin_a), (b, _)) = (&edges[0], &edges[1]);
        for h in ["t", "t:8080"] {
            for p in [&x, &other] {
                ask_as(b.addr, "GET", h, p);
                assert!(is_hit(&ask_as(b.addr, "GET", h, p)), "{program} {h} {p}");
            }
        }
        assert_eq!(
            post(admin_a, &format!("/purge?url=https://t:8080{x}")).0,
            200,
            "{program}"
        );
        eventually(
            &format!("{program}: B forgets {x} under both ports"),
            || {
                !is_hit(&ask_as(b.addr, "GET", "t", &x))
                    && !is_hit(&ask_as(b.addr, "GET", "t:8080", &x))
            },
        );
        for h in ["t", "t:8080"] {
            assert!(is_hit(&ask_as(b.addr, "GET", h, &other)), "{program} {h}");
        }
        // Everything: A's own memory at once, B's when it sees the generation move.
        ask_as(a.addr, "GET", "t", &other);
        assert!(is_hit(&ask_as(a.addr, "GET", "t", &other)), "{program}");
        let (status, body) = post(admin_a, "/purge?all");
        assert!(
            status == 200 && body.starts_with("purged "),
            "{program}: {body}"
        );
        assert_ne!(body, "purged 0\n", "{program}: A held answers");
        assert!(!is_hit(&ask_as(a.addr, "GET", "t", &other)), "{program}");
        eventually(&format!("{program}: B forgets everything"), || {
            !is_hit(&ask_as(b.addr, "GET", "t:8080", &other))
        });
        assert_eq!(post(admin_a, "/purge?everything").0, 400, "{program}");
    }
}

/// `PURGE /path` on a caching mount (Varnish's habit) purges the URL on this
/// edge and, through the tier, on every edge, answered `200 purged N`, from the addresses
/// `purge_from` names only: 405 (with `Allow`) for another address and for every address
/// where the mount names none, the answer still cached. Never forwarded upstream from a
/// caching mount (before, every PURGE went upstream and the config's `purge_from` was
/// refused); a mount without a cache forwards it as any other method. Varnish 7.1 does the
/// same with `acl purge` and `return (purge)` in `vcl_recv` (its `synth(405)` for others);
/// nginx 1.22's open-source build has no PURGE.
#[test]
fn purge_method_purges_from_allowed_addresses_on_every_edge_and_is_405_for_others() {
    let Some(tier) = common::tier::TierServer::start("redis-server") else {
        return;
    };
    // Each answer numbered: a purged one is never seen again.
    let answers = std::sync::atomic::AtomicUsize::new(0);
    let up = Upstream::start(move |path, _| {
        let n = answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ok_with(
            "Cache-Control: public, max-age=600\r\n",
            format!("{path} #{n}").as_bytes(),
        )
    });
    let dir = tempfile_dir().join("purge-method");
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let file = dir.join("linerate.toml");
    let url = tier.url();
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:{port}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n\
             [[site]]\ndefault = true\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\", tier = \"{url}\", purge_from = [\"10.0.0.0/8\", \"127.0.0.1\"] }}\n\n\
             [[site.proxy]]\nprefix = \"/elsewhere/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\", purge_from = [\"10.0.0.0/8\"] }}\n\n\
             [[site.proxy]]\nprefix = \"/closed/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\" }}\n\n\
             [[site.proxy]]\nprefix = \"/plain/\"\nupstream = \"app\"\n\n\
             [[site.proxy]]\nprefix = \"/local/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\", purge_from = [\"127.0.0.0/8\"] }}\n",
            up.addr
        ),
    )
    .unwrap();
    let admin_a = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let _a = common::bin::serve_as(&["--config", file.to_str().unwrap(), "--admin", &admin_a]);
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let edges = two_edges(&up, &url);
    let b = &edges[0].0;
    // A stores in the tier once it has read its generation.
    let mut n = 0;
    eventually("A stores /p in the tier", || {
        n += 1;
        let p = format!("/warm-a{n}");
        ask_as(a, "GET", "t", &p);
        is_hit(&ask_as(b.addr, "GET", "t", &p))
    });
    // A's answer goes to the tier after it reaches the client: B asks once it is there.
    let mut first = Vec::new();
    assert!(
        stores_through(&admin_a, || first = ask_as(a, "GET", "t", "/p").body),
        "A stores /p in the tier"
    );
    assert!(is_hit(&ask_as(a, "GET", "t", "/p")));
    assert!(is_hit(&ask_as(b.addr, "GET", "t", "/p")), "B from the tier");
    assert_eq!(up.count("/p"), 1);
    let r = ask_as(a, "PURGE", "t", "/p");
    assert_eq!((r.status, &r.body[..]), (200, &b"purged 1\n"[..]));
    eventually("the PURGE reached edge B", || {
        !is_hit(&ask_as(b.addr, "GET", "t", "/p"))
    });
    assert_eq!(up.count("/p"), 2, "only B went upstream");
    for e in [a, b.addr] {
        assert_ne!(
            ask_as(e, "GET", "t", "/p").body,
            first,
            "{e}: the purged answer"
        );
    }
    // Not from an address purge_from names, or no purge_from: 405, still cached.
    for p in ["/elsewhere/e", "/closed/c"] {
        ask_as(a, "GET", "t", p);
        let r = ask_as(a, "PURGE", "t", p);
        assert_eq!(r.status, 405, "{p}");
        assert!(
            r.header("allow").is_some_and(|m| !m.contains("PURGE")),
            "{p}"
        );
        assert!(is_hit(&ask_as(a, "GET", "t", p)), "{p}");
        assert_eq!(up.count(p), 1, "{p}");
    }
    let heads = up.heads();
    assert!(
        !heads.iter().any(|h| h.starts_with("PURGE")),
        "a caching mount forwarded a PURGE: {heads:?}"
    );
    // A cache without a tier answers at once, on the worker's own thread.
    ask_as(a, "GET", "t", "/local/l");
    assert!(is_hit(&ask_as(a, "GET", "t", "/local/l")));
    let r = ask_as(a, "PURGE", "t", "/local/l");
    assert_eq!((r.status, &r.body[..]), (200, &b"purged 1\n"[..]));
    assert!(!is_hit(&ask_as(a, "GET", "t", "/local/l")));
    // A mount without a cache forwards it, as any other method.
    ask_as(a, "PURGE", "t", "/plain/q");
    assert!(up.heads().iter().any(|h| h.starts_with("PURGE /plain/q")));
}

/// An origin's `Surrogate-Key` (space-separated) and `Cache-Tag`
/// (comma-separated) tag its answer; `POST /purge?tag=T` on edge A purges every answer
/// tagged T on A and, through the tier's purge log, on B, and neither takes the tier's old
/// entry back (the tier cannot list a tag's keys: each edge refuses an entry with a tag
/// purged since it was stored). Other answers stay. The fields never reach a client, on a
/// miss or a hit, as Fastly strips `Surrogate-Key`. Before: 400, and both fields were sent.
/// nginx 1.22 has no purge; Varnish 7.1 does this with `ban("obj.http.Surrogate-Key ~ …")`
/// (or the xkey vmod) and leaves the field unless VCL unsets it. On Redis, then memcached.
#[test]
fn a_tag_purge_reaches_every_tagged_answer_on_every_edge_and_tags_never_reach_clients() {
    for program in ["redis-server", "memcached"] {
        let Some(tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        let answers = std::sync::atomic::AtomicUsize::new(0);
        let up = Upstream::start(move |path, _| {
            let n = answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let tags = if path.ends_with("/a") {
                "Surrogate-Key: product-1 list\r\n"
            } else if path.ends_with("/b") {
                "Cache-Tag: product-2,product-1\r\n"
            } else {
                "Cache-Tag: product-10\r\n"
            };
            ok_with(
                &format!("Cache-Control: public, max-age=600\r\n{tags}"),
                format!("{path} #{n}").as_bytes(),
            )
        });
        let edges = two_edges(&up, &tier.url());
        let ((a, admin_a), (b, _)) = (&edges[0], &edges[1]);
        let paths: Vec<String> = ["a", "b", "c"]
            .iter()
            .map(|p| format!("/{program}/{p}"))
            .collect();
        let untagged = |r: &common::Resp| {
            r.header("surrogate-key").is_none() && r.header("cache-tag").is_none()
        };
        let mut first = Vec::new();
        for p in &paths {
            let before = tier_stored(admin_a);
            let r = ask_as(a.addr, "GET", "t", p);
            assert!(
                untagged(&r),
                "{program}: a miss carried tags: {:?}",
                r.headers
            );
            first.push(r.body);
            eventually(&format!("{program}: {p} in the tier"), || {
                tier_stored(admin_a) > before
            });
            for e in [a, b] {
                let r = ask_as(e.addr, "GET", "t", p);
                assert!(is_hit(&r) && untagged(&r), "{program}: {:?}", r.headers);
            }
        }
        assert_eq!(
            post(admin_a, "/purge?tag=product-1"),
            (200, "purged 2\n".to_string()),
            "{program}"
        );
        for (p, old) in paths.iter().zip(&first).take(2) {
            let r = ask_as(a.addr, "GET", "t", p);
            assert!(!is_hit(&r) && &r.body != old, "{program}: A kept {p}");
            eventually(&format!("{program}: B forgets {p}"), || {
                &ask_as(b.addr, "GET", "t", p).body != old
            });
        }
        for e in [a, b] {
            let r = ask_as(e.addr, "GET", "t", &paths[2]);
            assert!(
                is_hit(&r) && r.body == first[2],
                "{program}: product-10 went"
            );
        }
        assert_eq!(up.count(&paths[2]), 1, "{program}");
        assert_eq!(post(admin_a, "/purge?tag=").0, 400, "{program}");
    }
}

/// A soft purge (Fastly's; `POST /purge?url=URL&soft`, `?tag=T&soft`)
/// marks the answers stale, not gone: the next request on this edge and, through the tier's
/// purge log, on every other edge revalidates (`If-None-Match`), and a 304 keeps the stored
/// body. Before, `&soft` was read as part of the URL and nothing was purged. nginx 1.22 has
/// no purge; Varnish 7.1's soft purge is the `purge.soft()` of vmod_purge (varnish-modules),
/// not in its core. On Redis, then memcached.
#[test]
fn a_soft_purge_makes_answers_stale_on_every_edge_and_they_revalidate() {
    for program in ["redis-server", "memcached"] {
        let Some(tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        let answers = std::sync::atomic::AtomicUsize::new(0);
        let up = Upstream::start(move |path, head| {
            let fields =
                "Cache-Control: public, max-age=600\r\nETag: \"v1\"\r\nSurrogate-Key: soft-tag\r\n";
            if head.to_ascii_lowercase().contains("if-none-match: \"v1\"") {
                return format!("HTTP/1.1 304 Not Modified\r\n{fields}\r\n").into_bytes();
            }
            let n = answers.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ok_with(fields, format!("{path} #{n}").as_bytes())
        });
        let conditional = |path: &str| {
            up.heads()
                .iter()
                .filter(|h| h.contains(path) && h.to_ascii_lowercase().contains("if-none-match"))
                .count()
        };
        let edges = two_edges(&up, &tier.url());
        let ((a, admin_a), (b, _)) = (&edges[0], &edges[1]);
        let (p, q) = (format!("/{program}/s"), format!("/{program}/tagged"));
        let mut first = Vec::new();
        for path in [&p, &q] {
            let before = tier_stored(admin_a);
            first.push(ask_as(a.addr, "GET", "t", path).body);
            eventually(&format!("{program}: {path} in the tier"), || {
                tier_stored(admin_a) > before
            });
            for e in [a, b] {
                assert!(
                    is_hit(&ask_as(e.addr, "GET", "t", path)),
                    "{program} {path}"
                );
            }
        }
        assert_eq!(
            post(admin_a, &format!("/purge?url=http://t{p}&soft")),
            (200, "purged 1\n".to_string()),
            "{program}"
        );
        let r = ask_as(a.addr, "GET", "t", &p);
        assert!(
            !is_hit(&r) && r.body == first[0],
            "{program}: {:?}",
            r.headers
        );
        assert_eq!(conditional(&p), 1, "{program}: A revalidated");
        assert!(
            is_hit(&ask_as(a.addr, "GET", "t", &p)),
            "{program}: refreshed"
        );
        eventually(&format!("{program}: B revalidates"), || {
            let r = ask_as(b.addr, "GET", "t", &p);
            assert_eq!(r.body, first[0], "{program}: B's body went");
            conditional(&p) == 2
        });
        // By tag: the same, and the origin never sent the whole answer again.
        assert_eq!(
            post(admin_a, "/purge?tag=soft-tag&soft").0,
            200,
            "{program}"
        );
        for e in [a, b] {
            eventually(&format!("{program}: {} revalidates {q}", e.addr), || {
                let before = conditional(&q);
                let r = ask_as(e.addr, "GET", "t", &q);
                assert_eq!(r.body, first[1], "{program}");
                conditional(&q) > before
            });
        }
        assert_eq!(up.count(&p), 3, "{program}: one whole answer, two 304s");
    }
}
