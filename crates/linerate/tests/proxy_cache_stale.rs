//! Over real sockets: stale answers by the operator's policy
//! (`use_stale`, `stale_max`, the background refresh of `updating`) and what a client's
//! `no-cache` may force (`client_no_cache`), against a scripted origin on a std
//! `TcpListener` that counts the requests it gets, can hold its answers (a gate), fail, or
//! close without answering.
//!
//! No timing is asserted: "answered before the origin" is shown by answers read while the
//! gate still holds the origin's.

mod common;

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use common::bin::Served;
use common::{Client, READ_TIMEOUT, eventually};

/// What the origin does with its `n`th request (from 1).
enum Reply {
    /// Answer these bytes (after the gate opens).
    Bytes(Vec<u8>),
    /// Close the connection without a word.
    Close,
    /// Answer nothing for this long, then these bytes.
    Late(std::time::Duration, Vec<u8>),
}

type Script = Arc<dyn Fn(usize, &str) -> Reply + Send + Sync>;

/// A scripted origin: its requests counted, its answers held while the gate is shut.
struct Origin {
    addr: SocketAddr,
    count: Arc<AtomicUsize>,
    gate: Arc<(Mutex<bool>, Condvar)>,
}

impl Origin {
    fn start(script: impl Fn(usize, &str) -> Reply + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new((Mutex::new(true), Condvar::new()));
        let script: Script = Arc::new(script);
        let (c, g) = (count.clone(), gate.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (c, g, script) = (c.clone(), g.clone(), script.clone());
                std::thread::spawn(move || serve_conn(conn, &c, &g, &script));
            }
        });
        Origin { addr, count, gate }
    }

    fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    fn set_open(&self, open: bool) {
        *self.gate.0.lock().unwrap() = open;
        self.gate.1.notify_all();
    }
}

fn serve_conn(
    conn: TcpStream,
    count: &AtomicUsize,
    gate: &(Mutex<bool>, Condvar),
    script: &Script,
) {
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let Some(head) = common::read_head(&mut r) else {
            return;
        };
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        let reply = script(n, &head);
        let (lock, cv) = gate;
        let mut open = lock.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        drop(open);
        let bytes = match reply {
            Reply::Bytes(b) => b,
            Reply::Close => return,
            Reply::Late(wait, b) => {
                std::thread::sleep(wait);
                b
            }
        };
        if w.write_all(&bytes).is_err() {
            return;
        }
    }
}

/// An answer with `status`, `fields` (CRLF-ended lines) and `body`.
fn answer(status: u16, fields: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} X\r\n{fields}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Stale on arrival (`Age` past `max-age`), as an answer that sat in another cache.
const STALE: &str = "Cache-Control: max-age=1\r\nAge: 100\r\n";

/// linerate in front of `origin`, its cache written `cache` (a TOML inline table's inside),
/// the upstream's timeout 1 s, `workers` workers, and an admin listener; its address and the
/// admin's.
fn linerate(origin: &Origin, cache: &str, workers: usize) -> (Served, SocketAddr, String) {
    let dir = std::env::temp_dir().join(format!(
        "linerate-cache-stale-{}-{}",
        std::process::id(),
        origin.addr.port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let port = common::free_port("127.0.0.1");
    let admin = format!("127.0.0.1:{}", common::free_port("127.0.0.1"));
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "workers = {workers}\n[admin]\naddr = \"{admin}\"\n[[listen]]\naddr = \"127.0.0.1:{port}\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\ntimeout = \"1s\"\n\
             [[site]]\ndefault = true\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n\
             cache = {{ {cache} }}\n",
            origin.addr
        ),
    )
    .unwrap();
    let s = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    (s, format!("127.0.0.1:{port}").parse().unwrap(), admin)
}

fn get(addr: SocketAddr, path: &str, fields: &str) -> common::Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes());
    c.read_response()
}

/// The first sample of `name` in the admin listener's `/metrics`.
fn metric(admin: &str, name: &str) -> Option<u64> {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out.lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn status_of(r: &common::Resp) -> String {
    r.header("cache-status").unwrap_or_default().to_string()
}

/// The origin answering 500, closing without an answer, or too slow, got
/// linerate's 500, 502 and 504 where nginx (`proxy_cache_use_stale error timeout http_500`)
/// serves the stale page. Each failure serves stale only when `use_stale` names it, its
/// Cache-Status saying which; never for an answer with `must-revalidate` (RFC 9111 §4.2.4,
/// where nginx serves it anyway), nor past `stale_max`.
#[test]
fn use_stale_serves_the_stale_page_on_each_failure_it_names_and_only_those() {
    // The first request of each path fills it stale; every later one fails as the path says.
    let origin = Origin::start(|n, head| {
        let path = head.split_whitespace().nth(1).unwrap_or("");
        let fill = |cc: &str| Reply::Bytes(answer(200, cc, "old page"));
        // Each path is asked once to fill, then fails; the count is the origin's, shared.
        match path {
            "/500" | "/503" if !FILLED.fill(path) => fill(STALE),
            "/500" => Reply::Bytes(answer(500, "", "origin error")),
            "/503" => Reply::Bytes(answer(503, "", "origin busy")),
            "/down" if !FILLED.fill(path) => fill(STALE),
            "/down" => Reply::Close,
            "/slow" if !FILLED.fill(path) => fill(STALE),
            "/slow" => Reply::Late(std::time::Duration::from_secs(3), answer(200, "", "late")),
            "/mr" if !FILLED.fill(path) => {
                fill("Cache-Control: max-age=1, must-revalidate\r\nAge: 100\r\n")
            }
            "/mr" => Reply::Bytes(answer(500, "", "origin error")),
            "/old" if !FILLED.fill(path) => fill("Cache-Control: max-age=1\r\nAge: 7200\r\n"),
            "/old" => Reply::Bytes(answer(500, "", "origin error")),
            _ => Reply::Bytes(answer(404, "", &format!("{n}"))),
        }
    });
    let (_s, addr, _) = linerate(
        &origin,
        "use_stale = [\"error\", \"timeout\", \"http_500\"], stale_max = \"1h\"",
        1,
    );
    for path in ["/500", "/503", "/down", "/slow", "/mr", "/old"] {
        assert_eq!(get(addr, path, "").text(), "old page", "{path} filled");
    }
    // (path, the status and body the client gets, what its Cache-Status says)
    let rows = [
        (
            "/500",
            200,
            "old page",
            "fwd=stale; fwd-status=500; detail=stale-http-500",
        ),
        ("/503", 503, "origin busy", "fwd-status=503"),
        ("/down", 200, "old page", "fwd=stale; detail=stale-error"),
        ("/slow", 200, "old page", "fwd=stale; detail=stale-timeout"),
        ("/mr", 500, "origin error", "fwd-status=500"),
        ("/old", 500, "origin error", "fwd-status=500"),
    ];
    let mut wrong = Vec::new();
    for (path, status, body, says) in rows {
        let r = get(addr, path, "");
        let cs = status_of(&r);
        if (r.status, r.text().as_str()) != (status, body) || !cs.contains(says) {
            wrong.push(format!(
                "{path}: want {status} {body:?} ({says}), got {} {:?} ({cs})\n",
                r.status,
                r.text()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.concat());
}

/// Which paths the origin filled once (a script's memory, shared by its threads).
struct Filled(Mutex<Vec<String>>);

impl Filled {
    /// Whether `path` was filled before; marks it filled.
    fn fill(&self, path: &str) -> bool {
        let mut f = self.0.lock().unwrap();
        let was = f.iter().any(|p| p == path);
        if !was {
            f.push(path.to_string());
        }
        was
    }
}

static FILLED: Filled = Filled(Mutex::new(Vec::new()));

/// `updating`: for an expired page with no `stale-while-revalidate` from the
/// origin, 100 concurrent clients waited on the 2 s origin (2.01 s); nginx (`updating` and
/// `proxy_cache_background_update on`) answers them from stale at once. Here all 100 are
/// answered from stale while the origin still holds its answer (the gate), with exactly one
/// request to it; the refreshed answer then replaces the entry.
#[test]
fn updating_answers_100_concurrent_clients_from_stale_with_one_origin_request() {
    let origin = Origin::start(|n, _| match n {
        1 => Reply::Bytes(answer(200, STALE, "old page")),
        _ => Reply::Bytes(answer(200, "Cache-Control: max-age=60\r\n", "new page")),
    });
    let (_s, addr, _) = linerate(&origin, "use_stale = [\"updating\"], stale_max = \"1h\"", 2);
    assert_eq!(get(addr, "/u", "").text(), "old page");
    assert_eq!(origin.count(), 1);
    origin.set_open(false);
    const CLIENTS: usize = 100;
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::connect(addr)).collect();
    for c in clients.iter_mut() {
        c.send(b"GET /u HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    // Every answer is read while the origin's is held: none waited on it.
    for c in clients.iter_mut() {
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (200, "old page"));
        let cs = status_of(&r);
        assert!(
            cs.contains("hit") && cs.contains("ttl=-") && cs.contains("detail=stale-updating"),
            "{cs}"
        );
    }
    eventually("the background refresh went up", || origin.count() == 2);
    assert_eq!(origin.count(), 2, "one refresh for 100 clients");
    origin.set_open(true);
    eventually("the refreshed answer replaced the entry", || {
        get(addr, "/u", "").text() == "new page"
    });
    assert_eq!(origin.count(), 2);
}

/// A background refresh the origin fails (500) keeps the stale entry: the
/// next clients are still answered from it, and another refresh goes up. Before, the 500
/// removed the entry and the next client got the origin's 500.
#[test]
fn a_failed_background_refresh_keeps_the_stale_entry() {
    let origin = Origin::start(|n, _| match n {
        1 => Reply::Bytes(answer(200, STALE, "old page")),
        _ => Reply::Bytes(answer(500, "", "origin error")),
    });
    let (_s, addr, _) = linerate(&origin, "use_stale = [\"updating\"]", 1);
    assert_eq!(get(addr, "/f", "").text(), "old page");
    assert_eq!(get(addr, "/f", "").text(), "old page");
    eventually("the refresh went up and failed", || origin.count() == 2);
    for _ in 0..3 {
        let r = get(addr, "/f", "");
        assert_eq!((r.status, r.text().as_str()), (200, "old page"));
    }
    eventually("another refresh went up", || origin.count() >= 3);
}

/// A background refresh that gets no answer at all (the origin closes),
/// with `use_stale = ["updating", "error"]`, answers no client (it has none) and keeps the
/// stale entry: the next clients are still answered from it.
#[test]
fn a_background_refresh_with_no_answer_keeps_the_stale_entry() {
    let origin = Origin::start(|n, _| match n {
        1 => Reply::Bytes(answer(200, STALE, "old page")),
        _ => Reply::Close,
    });
    let (_s, addr, _) = linerate(&origin, "use_stale = [\"updating\", \"error\"]", 1);
    assert_eq!(get(addr, "/c", "").text(), "old page");
    assert_eq!(get(addr, "/c", "").text(), "old page");
    eventually("the refresh went up and got nothing", || {
        origin.count() >= 2
    });
    for _ in 0..3 {
        let r = get(addr, "/c", "");
        assert_eq!((r.status, r.text().as_str()), (200, "old page"));
        assert!(
            status_of(&r).contains("detail=stale-updating"),
            "{}",
            status_of(&r)
        );
    }
}

/// 100 concurrent requests with `Cache-Control: no-cache` all went to the
/// 2 s origin (nginx: 100 hits). By default a request's `no-cache`, `max-age=0` and
/// `Pragma: no-cache` do not bypass the cache.
#[test]
fn a_clients_no_cache_does_not_bypass_the_cache_by_default() {
    let origin = Origin::start(|_, _| {
        Reply::Bytes(answer(
            200,
            "Cache-Control: max-age=60\r\nETag: \"v\"\r\n",
            "page",
        ))
    });
    let (_s, addr, _) = linerate(&origin, "", 1);
    assert_eq!(get(addr, "/n", "").text(), "page");
    for fields in [
        "Cache-Control: no-cache\r\n",
        "Cache-Control: max-age=0\r\n",
        "Pragma: no-cache\r\n",
    ] {
        let r = get(addr, "/n", fields);
        assert_eq!(r.text(), "page");
        assert!(status_of(&r).contains("hit"), "{fields}: {}", status_of(&r));
    }
    assert_eq!(origin.count(), 1);
}

/// With `client_no_cache = "revalidate"` a request's `no-cache` validates
/// the stored answer first (RFC 9111 §5.2.1.4), and 100 concurrent ones collapse into one
/// conditional request: before, each went up on its own ("its answer is its own").
#[test]
fn concurrent_no_cache_revalidations_of_one_key_collapse_into_one_origin_request() {
    let origin = Origin::start(|_, head| {
        if head.to_ascii_lowercase().contains("if-none-match: \"v\"") {
            Reply::Bytes(
                b"HTTP/1.1 304 Not Modified\r\nETag: \"v\"\r\nCache-Control: max-age=60\r\n\r\n"
                    .to_vec(),
            )
        } else {
            Reply::Bytes(answer(
                200,
                "Cache-Control: max-age=60\r\nETag: \"v\"\r\n",
                "page",
            ))
        }
    });
    let (_s, addr, admin) = linerate(&origin, "client_no_cache = \"revalidate\"", 2);
    assert_eq!(get(addr, "/r", "").text(), "page");
    origin.set_open(false);
    const CLIENTS: usize = 100;
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::connect(addr)).collect();
    for c in clients.iter_mut() {
        c.send(b"GET /r HTTP/1.1\r\nHost: t\r\nCache-Control: no-cache\r\n\r\n");
    }
    eventually("99 revalidations wait on the first one's", || {
        metric(&admin, "linerate_cache_waiting") == Some(CLIENTS as u64 - 1)
    });
    assert_eq!(origin.count(), 2);
    origin.set_open(true);
    for c in clients.iter_mut() {
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (200, "page"));
    }
    assert_eq!(
        origin.count(),
        2,
        "one validation for 100 no-cache requests"
    );
}

/// A peer cache in front of an origin, stopped (by its PID) when dropped.
struct Peer {
    child: std::process::Child,
    addr: SocketAddr,
    dir: std::path::PathBuf,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether `program` is on the PATH (a peer that is not is left out, saying so).
fn installed(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn peer_dir(name: &str, origin: &Origin) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "linerate-cache-stale-{name}-{}-{}",
        std::process::id(),
        origin.addr.port()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    dir
}

/// Waits (bounded) until something answers HTTP on `addr`.
fn wait_listening(addr: SocketAddr, what: &str) {
    eventually(what, || TcpStream::connect(addr).is_ok());
}

/// nginx 1.22 in front of `origin`, as operators run it: `proxy_cache_use_stale
/// error timeout updating http_500`, `proxy_cache_background_update on`, `proxy_cache_lock
/// on`, a 1 s read timeout.
fn nginx(origin: &Origin) -> Peer {
    let dir = peer_dir("nginx", origin);
    let port = common::free_port("127.0.0.1");
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n access_log off;\n client_body_temp_path {d}/tmp;\n proxy_temp_path {d}/tmp;\n\
         fastcgi_temp_path {d}/tmp;\n uwsgi_temp_path {d}/tmp;\n scgi_temp_path {d}/tmp;\n\
         proxy_cache_path {d}/cache keys_zone=c:1m;\n\
         server {{\n  listen 127.0.0.1:{port};\n  location / {{\n   proxy_pass http://{};\n\
         proxy_http_version 1.1;\n   proxy_set_header Connection \"\";\n   proxy_read_timeout 1s;\n\
         proxy_cache c;\n   proxy_cache_use_stale error timeout updating http_500;\n\
         proxy_cache_background_update on;\n   proxy_cache_lock on;\n\
         add_header X-Cache $upstream_cache_status;\n  }}\n }}\n}}\n",
        origin.addr
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = std::process::Command::new("nginx")
        .args(["-p", &d.to_string(), "-c", &format!("{d}/nginx.conf")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr, "nginx listens");
    Peer { child, addr, dir }
}

/// Varnish 7.1 in front of `origin` with its builtin VCL and an hour of grace (Varnish's
/// stale window: answered from stale while one background fetch refreshes).
fn varnish(origin: &Origin) -> Peer {
    let dir = peer_dir("varnish", origin);
    let port = common::free_port("127.0.0.1");
    let child = std::process::Command::new("varnishd")
        .args([
            "-F",
            "-j",
            "none",
            "-n",
            &dir.display().to_string(),
            "-a",
            &format!("127.0.0.1:{port}"),
            "-b",
            &origin.addr.to_string(),
            "-s",
            "malloc,16m",
            "-p",
            "default_grace=3600",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_listening(addr, "varnishd listens");
    Peer { child, addr, dir }
}

/// `CLIENTS` concurrent GETs of `path` with `fields` while the origin holds its answers:
/// how many were answered before it let them go (waiting at most until all are, bounded),
/// then every answer's status and body.
fn burst(
    addr: SocketAddr,
    origin: &Origin,
    path: &str,
    fields: &str,
) -> (usize, Vec<(u16, String)>) {
    const CLIENTS: usize = 100;
    const HOLD: std::time::Duration = std::time::Duration::from_secs(5);
    origin.set_open(false);
    let done = Arc::new(AtomicUsize::new(0));
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{fields}\r\n");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (done, request) = (done.clone(), request.clone());
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                c.send(request.as_bytes());
                let r = c.read_response();
                done.fetch_add(1, Ordering::SeqCst);
                (r.status, r.text())
            })
        })
        .collect();
    let until = std::time::Instant::now() + HOLD;
    while done.load(Ordering::SeqCst) < CLIENTS && std::time::Instant::now() < until {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let before = done.load(Ordering::SeqCst);
    origin.set_open(true);
    let answers = clients.into_iter().map(|c| c.join().unwrap()).collect();
    (before, answers)
}

/// What one cache did with the three sequences: (answered from stale before the
/// origin, origin requests) for an expired page under 100 clients; the status and body of a
/// request while the origin answers 500; origin requests for 100 `no-cache` requests on a
/// fresh page.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    updating: (usize, usize),
    on_500: (u16, String),
    no_cache_origin_requests: usize,
}

/// A cache started in front of an origin: what keeps it running, and its address.
type Front<'a> = &'a dyn Fn(&Origin) -> (Box<dyn std::any::Any>, SocketAddr);

/// A peer's program and how to start it.
type PeerStart = (&'static str, fn(&Origin) -> Peer);

/// Runs the sequences against the cache `front` starts in front of each origin.
fn sequences(front: Front) -> Outcome {
    let fresh_then = |later: &'static str| {
        move |n: usize, _: &str| match n {
            1 => Reply::Bytes(answer(200, "Cache-Control: max-age=1\r\n", "old page")),
            _ if later == "500" => Reply::Bytes(answer(500, "", "origin error")),
            _ => Reply::Bytes(answer(200, "Cache-Control: max-age=60\r\n", "new page")),
        }
    };
    // An expired page (max-age=1, two seconds later), 100 clients at once.
    let origin = Origin::start(fresh_then("new"));
    let (_keep, addr) = front(&origin);
    assert_eq!(get(addr, "/u", "").text(), "old page");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (before, answers) = burst(addr, &origin, "/u", "");
    let stale = answers
        .iter()
        .filter(|(s, b)| (*s, b.as_str()) == (200, "old page"))
        .count();
    let updating = (before.min(stale), origin.count() - 1);
    drop(_keep);
    // The origin answering 500 for an expired page.
    let origin = Origin::start(fresh_then("500"));
    let (_keep, addr) = front(&origin);
    assert_eq!(get(addr, "/e", "").text(), "old page");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let r = get(addr, "/e", "");
    let on_500 = (r.status, r.text());
    drop(_keep);
    // 100 clients asking no-cache of a fresh page.
    let origin =
        Origin::start(|_, _| Reply::Bytes(answer(200, "Cache-Control: max-age=600\r\n", "page")));
    let (_keep, addr) = front(&origin);
    assert_eq!(get(addr, "/n", "").text(), "page");
    burst(addr, &origin, "/n", "Cache-Control: no-cache\r\n");
    let no_cache_origin_requests = origin.count() - 1;
    Outcome {
        updating,
        on_500,
        no_cache_origin_requests,
    }
}

/// Each sequence against linerate (`use_stale = ["error", "timeout",
/// "updating", "http_500"]`, the default `client_no_cache`), nginx 1.22 (`updating`,
/// `proxy_cache_background_update`, `proxy_cache_lock`) and Varnish 7.1 (builtin VCL, an
/// hour of grace), the same origin script for each: all 100 clients of an expired page
/// answered from stale before the origin's one refresh, the stale page for an origin that
/// answers 500 (Varnish: by its grace, the 500 going to the background fetch), and no
/// origin request for 100 `no-cache` requests. A peer that is not installed is left out,
/// saying so.
#[test]
fn linerate_nginx_and_varnish_answer_issue_us_sequences_alike() {
    let linerate_front = |o: &Origin| {
        let (s, addr, _) = linerate(
            o,
            "use_stale = [\"error\", \"timeout\", \"updating\", \"http_500\"], stale_max = \"1h\"",
            2,
        );
        (Box::new(s) as Box<dyn std::any::Any>, addr)
    };
    let expected = Outcome {
        updating: (100, 1),
        on_500: (200, "old page".to_string()),
        no_cache_origin_requests: 0,
    };
    assert_eq!(sequences(&linerate_front), expected, "linerate");
    let peers: [PeerStart; 2] = [("nginx", nginx), ("varnishd", varnish)];
    for (program, start) in peers {
        if !installed(program) {
            println!("NOT RUN: {program} is not installed");
            continue;
        }
        let front = |o: &Origin| {
            let p = start(o);
            let addr = p.addr;
            (Box::new(p) as Box<dyn std::any::Any>, addr)
        };
        let got = sequences(&front);
        println!("{program}: {got:?}");
        assert_eq!(got, expected, "{program}");
    }
}
