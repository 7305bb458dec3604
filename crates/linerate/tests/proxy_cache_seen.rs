//! Seeing the proxy cache over real sockets: `$upstream_cache_status` in the
//! access log, compared with Debian's nginx 1.22 in front of the same kind of origin with the
//! same requests, `cache_status` in the JSON log, and `Cache-Status` on the proxy's own
//! 502/504.
//!
//! One wait is a real one: entries stored with `max-age=1` are asked for again once they are
//! stale, after [`STALE_AFTER`]; what is asserted is what each server logged, never how fast.

mod common;

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::bin::serve;
use common::{Client, READ_TIMEOUT, eventually, free_port};

/// Past `max-age=1` for both servers (each counts whole seconds).
const STALE_AFTER: Duration = Duration::from_millis(2500);

/// An origin that answers each path as `answer(path, head, nth)` says (`nth`: how many
/// requests for that path came before), one connection per thread.
struct Origin {
    addr: SocketAddr,
}

type Answer = Arc<dyn Fn(&str, &str, usize) -> Vec<u8> + Send + Sync>;

impl Origin {
    fn start(answer: impl Fn(&str, &str, usize) -> Vec<u8> + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let answer: Answer = Arc::new(answer);
        let seen = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (answer, seen) = (answer.clone(), seen.clone());
                std::thread::spawn(move || origin_conn(conn, &answer, &seen));
            }
        });
        Origin { addr }
    }
}

fn origin_conn(conn: TcpStream, answer: &Answer, seen: &Mutex<HashMap<String, usize>>) {
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let Some((head, _body)) = common::read_request(&mut r) else {
            return;
        };
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let nth = {
            let mut s = seen.lock().unwrap();
            let n = s.entry(path.clone()).or_default();
            *n += 1;
            *n - 1
        };
        let bytes = answer(&path, &head, nth);
        // Nothing to say: the connection is dropped (an origin that fails).
        if bytes.is_empty() || w.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// A `status` answer with `fields` (CRLF-ended lines) and `body`.
fn answer(status: &str, fields: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!(
        "HTTP/1.1 {status}\r\n{fields}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    v.extend_from_slice(body);
    v
}

/// The origin both servers stand in front of: one path for each outcome. `/u`'s
/// validations wait while `held` is set (bounded by [`common::EVENTUALLY`]).
fn outcomes_origin(held: Arc<AtomicBool>) -> Origin {
    Origin::start(move |path, head, nth| {
        let lower = head.to_ascii_lowercase();
        match path {
            // Fresh for a minute, no validator: a miss, then hits.
            "/a" => answer("200 OK", "Cache-Control: max-age=60\r\n", b"a"),
            // Stale after a second, with an ETag: validated, and still the same (304).
            "/b" if lower.contains("if-none-match: \"b\"") => answer(
                "304 Not Modified",
                "ETag: \"b\"\r\nCache-Control: max-age=1\r\n",
                b"",
            ),
            "/b" => answer(
                "200 OK",
                "ETag: \"b\"\r\nCache-Control: max-age=1\r\n",
                b"b",
            ),
            // Stale after a second, no validator: fetched whole again.
            "/c" => answer("200 OK", "Cache-Control: max-age=1\r\n", b"c"),
            // Usable stale when the origin fails (RFC 5861 §4); it fails after the first.
            "/s" | "/s5" if nth == 0 => answer(
                "200 OK",
                "Cache-Control: max-age=1, stale-if-error=600\r\n",
                b"s",
            ),
            // The connection dropped without an answer.
            "/s" => Vec::new(),
            // A 500 (an error for RFC 5861 §4 too).
            "/s5" => answer("500 Internal Server Error", "", b"down"),
            // Usable stale while it is validated in the background (RFC 5861 §3).
            "/u" => {
                let until = Instant::now() + common::EVENTUALLY;
                while nth > 0 && held.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(10));
                }
                answer(
                    "200 OK",
                    "Cache-Control: max-age=1, stale-while-revalidate=600\r\n",
                    b"u",
                )
            }
            _ => answer("404 Not Found", "", b""),
        }
    })
}

/// One step of the sequence both servers get.
enum Step {
    /// A request on its own connection: method, path, extra fields.
    Ask(&'static str, &'static str, &'static str),
    /// Until the stored answers are stale.
    Wait,
    /// The origin answers the validations it holds.
    Release,
}

/// The requests, in order.
const SEQUENCE: &[Step] = &[
    Step::Ask("GET", "/a", ""),
    Step::Ask("GET", "/a", ""),
    // A client's no-cache does not bypass either cache by default; both
    // are told to here (linerate's `bypass = [{ header = "Cache-Control" }]`, nginx's
    // `proxy_cache_bypass $http_cache_control` below), and both say BYPASS.
    Step::Ask("GET", "/a", "Cache-Control: no-cache\r\n"),
    Step::Ask("GET", "/b", ""),
    Step::Ask("GET", "/c", ""),
    Step::Ask("GET", "/s", ""),
    Step::Ask("GET", "/s5", ""),
    Step::Ask("GET", "/u", ""),
    Step::Wait,
    Step::Ask("GET", "/b", ""),
    Step::Ask("GET", "/c", ""),
    Step::Ask("GET", "/s", ""),
    Step::Ask("GET", "/s5", ""),
    // The first starts the background validation (held at the origin), the second finds
    // it on its way.
    Step::Ask("GET", "/u", ""),
    Step::Ask("GET", "/u", ""),
    Step::Release,
    // A method no cache keeps: no cache status at all.
    Step::Ask("POST", "/a", "Content-Length: 0\r\n"),
];

/// What linerate must log, in order, as nginx's documentation names it.
const WANT: &[&str] = &[
    "GET /a MISS",
    "GET /a HIT",
    "GET /a BYPASS",
    "GET /b MISS",
    "GET /c MISS",
    "GET /s MISS",
    "GET /s5 MISS",
    "GET /u MISS",
    "GET /b REVALIDATED",
    "GET /c EXPIRED",
    "GET /s STALE",
    "GET /s5 STALE",
    // nginx's names: STALE for the answer whose request starts the background update,
    // UPDATING for one served while it is on its way.
    "GET /u STALE",
    "GET /u UPDATING",
    "POST /a -",
];

/// Where nginx 1.22 differs, deliberately on linerate's side: a 500 is an error for
/// `stale-if-error` (RFC 5861 §4 names 500, 502, 503 and 504), so linerate answers the
/// stale entry; nginx relays the 500 unless `proxy_cache_use_stale http_500` is set, and logs
/// EXPIRED.
const NGINX_DIFFERS: (&str, &str) = ("GET /s5 STALE", "GET /s5 EXPIRED");

const TEMPLATE: &str = "$request_method $request_uri $upstream_cache_status";

/// Sends [`SEQUENCE`] to `addr`, one connection each, releasing `held` where it says;
/// the statuses answered.
fn run_sequence(addr: SocketAddr, held: &AtomicBool) -> Vec<u16> {
    let mut statuses = Vec::new();
    for step in SEQUENCE {
        let (method, path, fields) = match step {
            Step::Ask(m, p, f) => (m, p, f),
            Step::Wait => {
                std::thread::sleep(STALE_AFTER);
                continue;
            }
            Step::Release => {
                held.store(false, Ordering::Relaxed);
                continue;
            }
        };
        let mut c = Client::connect(addr);
        c.send(
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{fields}\r\n")
                .as_bytes(),
        );
        statuses.push(c.read_response().status);
    }
    statuses
}

/// The lines of the log at `path` once it has `n` of them.
fn log_lines(path: &Path, n: usize) -> Vec<String> {
    let mut lines = Vec::new();
    eventually("the access log has every request's line", || {
        lines = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        lines.len() >= n
    });
    lines
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Debian's nginx, one process in the foreground, stopped by PID on drop.
struct Nginx {
    child: Child,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx's `proxy_cache` in front of `origin` on `port`, logging [`TEMPLATE`] to
/// `dir/access.log`; `None` when nginx is not installed.
fn start_nginx(dir: &Path, port: u16, origin: SocketAddr) -> Option<Nginx> {
    if Command::new("nginx").arg("-v").output().is_err() {
        return None;
    }
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log warn;\nevents {{ worker_connections 64; }}\n\
         http {{\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           proxy_cache_path {d}/cache keys_zone=z:1m;\n\
           log_format st '{TEMPLATE}';\n\
           server {{\n\
             listen 127.0.0.1:{port};\n\
             access_log {d}/access.log st;\n\
             location / {{\n\
               proxy_pass http://{origin};\n\
               proxy_http_version 1.1;\n\
               proxy_cache z;\n\
               proxy_cache_revalidate on;\n\
               proxy_cache_background_update on;\n\
               proxy_cache_bypass $http_cache_control;\n\
             }}\n\
           }}\n\
         }}\n"
    );
    let file = dir.join("nginx.conf");
    std::fs::write(&file, conf).unwrap();
    let child = Command::new("nginx")
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .ok()?;
    let nginx = Nginx { child };
    eventually("nginx listens", || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    Some(nginx)
}

/// linerate's `$upstream_cache_status` had no such field; it now logs nginx's
/// values for the same outcomes, checked against nginx 1.22 itself in the same test: a miss,
/// a hit, a bypass, a stale answer revalidated (304) and one fetched again (EXPIRED), stale
/// on the origin's error and while updating, and `-` for a method no cache keeps.
#[test]
fn the_access_log_says_what_the_cache_did_as_nginx_says_it() {
    let dir = tempdir("cache-status-log");
    // linerate.
    let held = Arc::new(AtomicBool::new(true));
    let origin = outcomes_origin(held.clone());
    let log = dir.join("linerate.log");
    let conf = dir.join("linerate.toml");
    std::fs::write(
        &conf,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[[upstream]]\nname = \"origin\"\n\
             servers = [\"{}\"]\n\n[[site]]\ndefault = true\napp = \"none\"\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"origin\"\n\
             cache = {{ size = \"4MiB\", bypass = [{{ header = \"Cache-Control\" }}] }}\n",
            origin.addr
        ),
    )
    .unwrap();
    let s = serve(&[
        "--config",
        conf.to_str().unwrap(),
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        TEMPLATE,
    ]);
    // nginx, alongside, when it is there (Debian's is installed on the team's machines).
    let nginx_dir = dir.join("nginx");
    std::fs::create_dir_all(&nginx_dir).unwrap();
    let nginx_held = Arc::new(AtomicBool::new(true));
    let nginx_origin = outcomes_origin(nginx_held.clone());
    let port = free_port("127.0.0.1");
    let nginx = start_nginx(&nginx_dir, port, nginx_origin.addr);
    // Both run the sequence together, so that one wait makes both stale.
    let (ours, theirs) = std::thread::scope(|sc| {
        let theirs = nginx.as_ref().map(|_| {
            let held = &nginx_held;
            sc.spawn(move || run_sequence(SocketAddr::from(([127, 0, 0, 1], port)), held))
        });
        let ours = run_sequence(s.addr, &held);
        (ours, theirs.map(|t| t.join().unwrap()))
    });
    assert_eq!(ours, [200; 15]);
    let lines = log_lines(&log, WANT.len());
    assert_eq!(lines, WANT, "linerate's log");
    match theirs {
        Some(statuses) => {
            // The one difference: nginx relays /s5's 500 (the 12th answer).
            let mut want = ours.clone();
            want[11] = 500;
            assert_eq!(statuses, want, "nginx's answers");
            // nginx writes a line when the request is finalized: one that started a
            // background update waits for it, so its line comes later. Compared in order
            // of the requests' targets and statuses, not of writing.
            let mut theirs = log_lines(&nginx_dir.join("access.log"), WANT.len());
            let mut want: Vec<&str> = WANT
                .iter()
                .map(|l| {
                    if *l == NGINX_DIFFERS.0 {
                        NGINX_DIFFERS.1
                    } else {
                        l
                    }
                })
                .collect();
            theirs.sort();
            want.sort();
            assert_eq!(theirs, want, "nginx's log");
        }
        None => eprintln!("NOT COMPARED: nginx is not installed"),
    }
    drop(nginx);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The proxy's own 502 and 504 in front of a caching mount carried no
/// Cache-Status, though the cache had planned the request (RFC 9211 §2): now they say why
/// it went forward, no `fwd-status` (nothing came back), and what failed in `detail`; the
/// access log says MISS for them, as nginx does for a miss its upstream failed.
#[test]
fn the_proxys_own_502_and_504_carry_cache_status() {
    let dir = tempdir("cache-status-errors");
    // Nothing listens on the first (its port was taken, then let go); the second takes
    // requests and never answers.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        for conn in silent.incoming().take(8) {
            kept.push(conn);
        }
    });
    for (upstream, status, detail) in [
        (closed, 502, "connect-failed"),
        (silent_addr, 504, "timeout"),
    ] {
        let log = dir.join(format!("{status}.log"));
        let spec = format!("/=http://{upstream}");
        let s = serve(&[
            "--app",
            "none",
            "--proxy",
            &spec,
            "--proxy-cache",
            "4MiB",
            "--proxy-timeout",
            "300ms",
            "--access-log",
            log.to_str().unwrap(),
            "--access-log-format",
            "$status $upstream_cache_status",
        ]);
        let mut c = Client::connect(s.addr);
        c.send(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, status);
        let cs = r
            .header("cache-status")
            .unwrap_or_else(|| panic!("{status}: {:?}", r.headers));
        assert!(cs.contains("; fwd=uri-miss"), "{cs}");
        assert!(cs.contains(&format!("; detail={detail}")), "{cs}");
        assert!(!cs.contains("fwd-status") && !cs.contains("stored"), "{cs}");
        assert_eq!(log_lines(&log, 1), [format!("{status} MISS")]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `/metrics` from the admin listener at `admin`.
fn scrape(admin: &str) -> String {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

/// The value of the first sample of `name` whose labels hold `label` (0 when none).
fn sample(admin: &str, name: &str, label: &str) -> u64 {
    scrape(admin)
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} {label} sample"))
}

fn tier_outcome(admin: &str, outcome: &str) -> u64 {
    sample(
        admin,
        "linerate_cache_tier_requests_total",
        &format!("outcome=\"{outcome}\""),
    )
}

/// /metrics counted every get the tier did not answer with a value as a
/// miss, and a timeout as an error, with no outage count: a tier that is down looked like a
/// cold one. Now a real miss (the tier had nothing), a get skipped while the tier is down,
/// the timeouts and the outages are told apart, on Redis (the worker's own connection) and
/// memcached (the tier's thread).
#[test]
fn metrics_tell_real_tier_misses_from_calls_skipped_while_it_is_down() {
    let origin = Origin::start(|_, _, _| answer("200 OK", "Cache-Control: max-age=600\r\n", b"x"));
    for program in ["redis-server", "memcached"] {
        let Some(tier) = common::tier::TierServer::start(program) else {
            continue;
        };
        let spec = format!("/=http://{}", origin.addr);
        let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
        let url = tier.url();
        let edge = serve(&[
            "--app",
            "none",
            "--proxy",
            &spec,
            "--proxy-cache",
            "4MiB",
            "--proxy-cache-tier",
            &url,
            "--admin",
            &admin,
        ]);
        // A cold tier: a real miss, nothing skipped.
        let mut n = 0;
        eventually("the tier answers a miss", || {
            n += 1;
            Client::connect(edge.addr).get(&format!("/cold{n}"));
            tier_outcome(&admin, "miss") >= 1
        });
        assert_eq!(tier_outcome(&admin, "skipped"), 0, "{program}");
        let misses = tier_outcome(&admin, "miss");
        // The tier stops answering: a timeout marks it down (one outage), and the gets
        // after are skipped, none of them a real miss.
        tier.signal(rustix::process::Signal::STOP);
        eventually("the edge marks the tier down", || {
            n += 1;
            Client::connect(edge.addr).get(&format!("/down{n}"));
            sample(&admin, "linerate_cache_tier_outages_total", "cache=") >= 1
        });
        assert!(
            sample(&admin, "linerate_cache_tier_timeouts_total", "cache=") >= 1,
            "{program}"
        );
        eventually("gets are skipped while the tier is down", || {
            n += 1;
            Client::connect(edge.addr).get(&format!("/skipped{n}"));
            tier_outcome(&admin, "skipped") >= 1
        });
        assert_eq!(tier_outcome(&admin, "miss"), misses, "{program}");
        assert_eq!(
            sample(&admin, "linerate_cache_tier_outages_total", "cache="),
            1,
            "{program}"
        );
        tier.signal(rustix::process::Signal::CONT);
    }
}

/// `GET target` on the admin listener at `admin`: status and body.
fn admin_get(admin: &str, target: &str) -> (u16, String) {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(
        format!("GET {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// An operator could count the cache's hits but not see what it held. The
/// admin listener's `GET /cache?prefix=URL` lists each stored answer under the prefix: its
/// key, variant (the Vary-selecting values), the key's variants, status, age, TTL left, size,
/// the hits it served and its tags; bounded by `limit`, saying when more matched.
#[test]
fn the_admin_listener_lists_what_the_cache_holds_by_prefix() {
    let origin = Origin::start(|path, _, _| match path {
        "/docs/a" => answer(
            "200 OK",
            "Cache-Control: max-age=60\r\nVary: Accept-Language\r\n",
            b"a",
        ),
        "/docs/b" => answer(
            "200 OK",
            "Cache-Control: max-age=60\r\nSurrogate-Key: docs b-page\r\nCache-Tag: shop\r\n",
            b"b",
        ),
        _ => answer("200 OK", "Cache-Control: max-age=60\r\n", b"other"),
    });
    let spec = format!("/=http://{}", origin.addr);
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let s = serve(&[
        "--app",
        "none",
        "--proxy",
        &spec,
        "--proxy-cache",
        "4MiB",
        "--admin",
        &admin,
    ]);
    let ask = |path: &str, lang: &str| {
        let mut c = Client::connect(s.addr);
        c.send(
            format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept-Language: {lang}\r\n\r\n").as_bytes(),
        );
        c.read_response().status
    };
    for (path, lang) in [
        ("/docs/a", "en"),
        ("/docs/a", "fr"),
        ("/docs/a", "fr"),
        ("/docs/a", "fr"),
        ("/docs/a", "fr"),
        ("/docs/b", "en"),
        ("/other", "en"),
    ] {
        assert_eq!(ask(path, lang), 200);
    }
    let (status, body) = admin_get(&admin, "/cache?prefix=http%3A%2F%2Ft%2Fdocs%2F");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let caches = v["caches"].as_array().unwrap();
    assert_eq!(caches.len(), 1, "{body}");
    assert_eq!(caches[0]["truncated"], false);
    let mut rows: Vec<(String, String, u64, u64, Vec<String>)> = caches[0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["status"], 200, "{e}");
            let (age, ttl) = (e["age"].as_u64().unwrap(), e["ttl"].as_i64().unwrap());
            assert!(age <= 60 && ttl > 0 && ttl <= 60, "{e}");
            assert!(e["size"].as_u64().unwrap() > 0, "{e}");
            let lang = e["variant"]["accept-language"].as_str().unwrap_or("-");
            (
                e["key"].as_str().unwrap().to_string(),
                lang.to_string(),
                e["variants"].as_u64().unwrap(),
                e["hits"].as_u64().unwrap(),
                serde_json::from_value(e["tags"].clone()).unwrap(),
            )
        })
        .collect();
    rows.sort();
    let row = |k: &str, l: &str, n, h, t: &[&str]| {
        let tags = t.iter().map(|t| t.to_string()).collect();
        (k.to_string(), l.to_string(), n, h, tags)
    };
    assert_eq!(
        rows,
        [
            row("http://t/docs/a", "en", 2, 0, &[]),
            row("http://t/docs/a", "fr", 2, 3, &[]),
            // The tags a tag purge names, both fields', in order.
            row("http://t/docs/b", "-", 1, 0, &["docs", "b-page", "shop"]),
        ]
    );
    // Bounded, and it says so; every answer without a prefix; a prefix that is no URL.
    let (_, body) = admin_get(&admin, "/cache?prefix=http://t/docs/&limit=1");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["caches"][0]["entries"].as_array().unwrap().len(),
        1,
        "{body}"
    );
    assert_eq!(v["caches"][0]["truncated"], true, "{body}");
    let (_, body) = admin_get(&admin, "/cache");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["caches"][0]["entries"].as_array().unwrap().len(),
        4,
        "{body}"
    );
    assert_eq!(admin_get(&admin, "/cache?prefix=ftp://t/").0, 400);
    assert_eq!(admin_get(&admin, "/cache?bogus=1").0, 400);
}

/// The JSON log's `cache_status`, with the same values as
/// `$upstream_cache_status`, and no such member for a request no cache handled.
#[test]
fn the_json_log_carries_cache_status() {
    let dir = tempdir("cache-status-json");
    let origin = Origin::start(|_, _, _| answer("200 OK", "Cache-Control: max-age=60\r\n", b"j"));
    let log = dir.join("json.log");
    let conf = dir.join("linerate.toml");
    std::fs::write(
        &conf,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\n[[upstream]]\nname = \"origin\"\n\
             servers = [\"{}\"]\n\n[[site]]\ndefault = true\napp = \"none\"\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"origin\"\n\
             cache = {{ size = \"4MiB\", bypass = [{{ header = \"Cache-Control\" }}] }}\n",
            origin.addr
        ),
    )
    .unwrap();
    let s = serve(&[
        "--config",
        conf.to_str().unwrap(),
        "--access-log",
        log.to_str().unwrap(),
        "--access-log-format",
        "json",
    ]);
    for (method, path) in [("GET", "/j"), ("GET", "/j"), ("POST", "/j")] {
        let mut c = Client::connect(s.addr);
        c.send(
            format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        );
        assert_eq!(c.read_response().status, 200);
    }
    let got: Vec<Option<String>> = log_lines(&log, 3)
        .iter()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.get("cache_status")
                .map(|c| c.as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(got, [Some("MISS".into()), Some("HIT".into()), None]);
    let _ = std::fs::remove_dir_all(&dir);
}
