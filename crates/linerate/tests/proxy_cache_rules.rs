//! The proxy cache's rules as an operator sets them, over real
//! sockets, each against a real origin and, where nginx 1.22 has the feature, against nginx
//! in the same test with the same origin script: the key's parts (`key`, nginx's
//! `proxy_cache_key`), query parameters dropped and sorted (`query_drop`, `query_sort`: nginx
//! has neither), a cookie in the key, `valid` (`proxy_cache_valid`) and `ignore`
//! (`proxy_ignore_headers`). Each peer has its own origin, which counts the requests it got.
//!
//! No timing is asserted; nginx and Varnish are skipped (said on stderr) where they are not
//! installed.

mod common;

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use common::{Client, READ_TIMEOUT, eventually, free_port};

type Answer = Arc<dyn Fn(&str, &str) -> Vec<u8> + Send + Sync>;

/// Where an answer holds until [`Origin::open`]: what comes before it is written at once.
const HOLD: &[u8] = b"\0HOLD\0";

/// A gate that holds answers while shut.
type Gate = Arc<(Mutex<bool>, std::sync::Condvar)>;

/// An origin that answers `answer(target, head)` and counts the requests per target.
struct Origin {
    addr: SocketAddr,
    count: Arc<Mutex<HashMap<String, usize>>>,
    /// Each request's method and target, in order.
    lines: Arc<Mutex<Vec<String>>>,
    gate: Gate,
}

impl Origin {
    fn start(answer: Answer) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let count = Arc::new(Mutex::new(HashMap::new()));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let gate: Gate = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let (c, l, g) = (count.clone(), lines.clone(), gate.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let (c, l, g, answer) = (c.clone(), l.clone(), g.clone(), answer.clone());
                std::thread::spawn(move || serve_conn(conn, &c, &l, &g, &answer));
            }
        });
        Origin {
            addr,
            count,
            lines,
            gate,
        }
    }

    /// Lets held answers go on.
    fn open(&self) {
        *self.gate.0.lock().unwrap() = true;
        self.gate.1.notify_all();
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Requests for `target` so far.
    fn count(&self, target: &str) -> usize {
        *self.count.lock().unwrap().get(target).unwrap_or(&0)
    }

    /// Requests for every target so far.
    fn total(&self) -> usize {
        self.count.lock().unwrap().values().sum()
    }
}

fn serve_conn(
    conn: TcpStream,
    count: &Mutex<HashMap<String, usize>>,
    lines: &Mutex<Vec<String>>,
    gate: &Gate,
    answer: &Answer,
) {
    conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let Some((head, _body)) = common::read_request(&mut r) else {
            return;
        };
        let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
        *count.lock().unwrap().entry(target.clone()).or_default() += 1;
        let method = head.split_whitespace().next().unwrap_or("");
        lines.lock().unwrap().push(format!("{method} {target}"));
        let bytes = answer(&target, &head);
        let (now, later) = match bytes.windows(HOLD.len()).position(|w| w == HOLD) {
            Some(at) => (&bytes[..at], &bytes[at + HOLD.len()..]),
            None => (&bytes[..], &[][..]),
        };
        if w.write_all(now).is_err() {
            return;
        }
        if !later.is_empty() {
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
            drop(open);
            if w.write_all(later).is_err() {
                return;
            }
        }
    }
}

/// An answer with `status`, `fields` (CRLF-ended lines) and `body`.
fn answer(status: &str, fields: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\n{fields}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A cache in front of its own origin, listening on two ports: linerate or nginx.
struct Peer {
    name: &'static str,
    ports: [SocketAddr; 2],
    origin: Origin,
    admin: Option<String>,
    _child: Running,
}

/// A child process, stopped (by its PID) when dropped: killed, or sent SIGTERM when it has
/// children of its own to stop (varnishd's manager stops its worker); then its scratch
/// directory is removed.
struct Running(Child, bool, std::path::PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        if self.1 {
            let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        } else {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.2);
    }
}

/// Varnish 7.1 (`varnishd -F`, no jail) with `VCL` after the backend, on two listeners;
/// `None` (said on stderr) when varnishd is not installed.
fn varnish(name: &str, vcl: &str, origin: Answer) -> Option<Peer> {
    if Command::new("varnishd").arg("-V").output().is_err() {
        eprintln!("varnishd is not installed: the comparison is skipped");
        return None;
    }
    let origin = Origin::start(origin);
    let ports = two_ports();
    let dir = scratch(&format!("varnish-{name}"));
    let file = dir.join("test.vcl");
    std::fs::write(
        &file,
        format!(
            "vcl 4.1;\nbackend default {{ .host = \"127.0.0.1\"; .port = \"{}\"; }}\n{vcl}\n",
            origin.addr.port()
        ),
    )
    .unwrap();
    let child = Command::new("varnishd")
        .args(["-F", "-j", "none", "-T", "none", "-s", "malloc,32m"])
        .args(["-n", dir.join("n").to_str().unwrap()])
        .args(["-a", &ports[0].to_string(), "-a", &ports[1].to_string()])
        .args(["-f", file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = Running(child, true, dir);
    listening(ports[0]);
    listening(ports[1]);
    Some(Peer {
        name: "varnish",
        ports,
        origin,
        admin: None,
        _child: child,
    })
}

fn two_ports() -> [SocketAddr; 2] {
    [0, 1].map(|_| {
        format!("127.0.0.1:{}", free_port("127.0.0.1"))
            .parse()
            .unwrap()
    })
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "linerate-cache-rules-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits until `addr` takes connections.
fn listening(addr: SocketAddr) {
    eventually(&format!("{addr} listens"), || {
        TcpStream::connect(addr).is_ok()
    });
}

/// linerate with `cache = { CACHE }` on a proxy mount, on two listeners.
fn linerate(name: &str, cache: &str, origin: Answer) -> Peer {
    let origin = Origin::start(origin);
    let ports = two_ports();
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let dir = scratch(&format!("linerate-{name}"));
    let file = dir.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n\n[[listen]]\naddr = \"{}\"\n\n[[listen]]\naddr = \"{}\"\n\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n[[site]]\ndefault = true\n\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\ncache = {{ {cache} }}\n",
            ports[0], ports[1], origin.addr
        ),
    )
    .unwrap();
    let child = Command::new(common::bin::BIN)
        .args(["serve", "--no-pin", "--log-level", "warn", "--workers", "1"])
        .args(["--config", file.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let child = Running(child, false, dir);
    listening(ports[0]);
    listening(ports[1]);
    Peer {
        name: "linerate",
        ports,
        origin,
        admin: Some(admin),
        _child: child,
    }
}

/// nginx 1.22 with `proxy_cache` and `DIRECTIVES` in its location, on two listeners; `None`
/// (said on stderr) when nginx is not installed.
fn nginx(name: &str, directives: &str, origin: Answer) -> Option<Peer> {
    nginx_with(name, "", directives, origin)
}

/// [`nginx`] with `http` in its http block (a `map`).
fn nginx_with(name: &str, http: &str, directives: &str, origin: Answer) -> Option<Peer> {
    if Command::new("nginx").arg("-v").output().is_err() {
        eprintln!("nginx is not installed: the comparison is skipped");
        return None;
    }
    let origin = Origin::start(origin);
    let ports = two_ports();
    let dir = scratch(&format!("nginx-{name}"));
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\nerror_log {d}/error.log;\n\
         pid {d}/nginx.pid;\nevents {{ worker_connections 64; }}\nhttp {{\n\
         access_log off;\nclient_body_temp_path {d}/body;\nproxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fcgi;\nuwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
         proxy_cache_path {d}/cache keys_zone=z:1m;\n{http}\n\
         server {{\nlisten {};\nlisten {};\nlocation / {{\nproxy_pass http://{};\n\
         proxy_http_version 1.1;\nproxy_cache z;\n{directives}\n}}\n}}\n}}\n",
        ports[0], ports[1], origin.addr
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new("nginx")
        .args(["-p", dir.to_str().unwrap(), "-c", "nginx.conf"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let child = Running(child, false, dir);
    listening(ports[0]);
    listening(ports[1]);
    Some(Peer {
        name: "nginx",
        ports,
        origin,
        admin: None,
        _child: child,
    })
}

impl Peer {
    /// `HEAD target` on the first listener: the answer's head.
    fn head(&self, target: &str) -> common::Resp {
        let mut c = Client::connect(self.ports[0]);
        c.send(format!("HEAD {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        c.read_response_opt(true).expect("an answer")
    }

    /// `GET target` on listener `port` (0 or 1) with `Host: HOST` and `fields`.
    fn get(&self, port: usize, host: &str, target: &str, fields: &str) -> common::Resp {
        let mut c = Client::connect(self.ports[port]);
        c.send(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{fields}\r\n").as_bytes());
        c.read_response()
    }
}

/// Item 4: a key without the port (nor the scheme) is one entry for a URL reached through
/// either listener; the default key keeps the port, so it is two.
#[test]
fn a_key_without_the_port_folds_both_listeners_into_one_entry() {
    let origin: Answer = Arc::new(|_, _| answer("200 OK", "Cache-Control: max-age=60\r\n", "a"));
    let mut peers = vec![linerate(
        "fold",
        "key = [\"host\", \"path\", \"query\"]",
        origin.clone(),
    )];
    peers.extend(nginx(
        "fold",
        "proxy_cache_key $host$request_uri;",
        origin.clone(),
    ));
    peers.extend(varnish(
        "fold",
        "sub vcl_hash { hash_data(regsub(req.http.host, \":[0-9]+$\", \"\")); \
         hash_data(req.url); return (lookup); }",
        origin.clone(),
    ));
    for p in &peers {
        for (i, port) in p.ports.iter().enumerate() {
            let r = p.get(i, &format!("t:{}", port.port()), "/a?x=1", "");
            assert_eq!((r.status, r.text().as_str()), (200, "a"), "{}", p.name);
        }
        assert_eq!(p.origin.count("/a?x=1"), 1, "{}: one entry", p.name);
    }
    // linerate's default key keeps the port: two entries.
    let default = linerate("fold-default", "", origin);
    for (i, port) in default.ports.iter().enumerate() {
        default.get(i, &format!("t:{}", port.port()), "/a?x=1", "");
    }
    assert_eq!(default.origin.count("/a?x=1"), 2, "the default key");
}

/// Item 4: tracking parameters dropped and the rest sorted make one entry of three URLs,
/// and a purge of the URL (as the origin links it) finds it. nginx 1.22 has no equivalent
/// (its key is a string of variables; sorting or dropping needs njs or a map per name).
#[test]
fn dropped_and_sorted_query_parameters_share_one_entry_and_its_purge() {
    let origin: Answer = Arc::new(|_, _| answer("200 OK", "Cache-Control: max-age=60\r\n", "p"));
    let p = linerate(
        "query",
        "query_drop = [\"utm_*\", \"fbclid\"], query_sort = true",
        origin,
    );
    for target in [
        "/p?b=2&a=1",
        "/p?utm_source=news&a=1&b=2",
        "/p?a=1&fbclid=x&b=2&utm_medium=mail",
    ] {
        assert_eq!(p.get(0, "t", target, "").text(), "p", "{target}");
    }
    assert_eq!(p.origin.total(), 1, "one entry for the three");
    // Another value is another entry.
    p.get(0, "t", "/p?a=2&b=2", "");
    assert_eq!(p.origin.total(), 2);
    // A purge of one spelling of the URL removes the entry the others share.
    let admin = p.admin.as_deref().unwrap();
    // Encoded whole (admin.rs): `http://t/p?a=1&utm_id=3&b=2`.
    let (status, body) = post(
        admin,
        "/purge?url=http%3A%2F%2Ft%2Fp%3Fa%3D1%26utm_id%3D3%26b%3D2",
    );
    assert_eq!((status, body.as_str()), (200, "purged 1\n"));
    p.get(0, "t", "/p?b=2&a=1", "");
    assert_eq!(p.origin.total(), 3, "purged, so fetched again");
}

/// Item 4: a cookie's value in the key: one entry per value, each answering its own
/// visitors (nginx: `$cookie_NAME` in `proxy_cache_key`); a purge of the URL removes every
/// value's entry (linerate).
#[test]
fn a_cookie_in_the_key_keeps_one_entry_per_value() {
    let origin: Answer = Arc::new(|_, head| {
        let lang = if head.contains("lang=fr") { "fr" } else { "en" };
        answer("200 OK", "Cache-Control: max-age=60\r\n", lang)
    });
    let mut peers = vec![linerate(
        "cookie",
        "key = [\"host\", \"path\", \"query\", \"cookie:lang\"]",
        origin.clone(),
    )];
    peers.extend(nginx(
        "cookie",
        "proxy_cache_key $host$request_uri$cookie_lang;",
        origin.clone(),
    ));
    peers.extend(varnish(
        "cookie",
        "sub vcl_recv { return (hash); }\n\
         sub vcl_hash { hash_data(req.http.host); hash_data(req.url);\n\
         if (req.http.cookie ~ \"(^|;\\s*)lang=\") {\n\
         hash_data(regsub(req.http.cookie, \"^(.*;\\s*)?lang=([^;]*).*$\", \"\\2\")); }\n\
         return (lookup); }",
        origin.clone(),
    ));
    for p in &peers {
        let en = "Cookie: a=1; lang=en\r\n";
        let fr = "Cookie: lang=fr\r\n";
        assert_eq!(p.get(0, "t", "/home", en).text(), "en", "{}", p.name);
        assert_eq!(p.get(0, "t", "/home", fr).text(), "fr", "{}", p.name);
        assert_eq!(p.get(0, "t", "/home", en).text(), "en", "{}", p.name);
        assert_eq!(p.get(0, "t", "/home", fr).text(), "fr", "{}", p.name);
        assert_eq!(
            p.origin.count("/home"),
            2,
            "{}: one entry per value",
            p.name
        );
    }
    let p = &peers[0];
    let (status, body) = post(p.admin.as_deref().unwrap(), "/purge?url=http://t/home");
    assert_eq!((status, body.as_str()), (200, "purged 2\n"));
    p.get(0, "t", "/home", "Cookie: lang=fr\r\n");
    assert_eq!(p.origin.count("/home"), 3);
}

/// Issue 83: a soft purge on a mount whose key adds a cookie was a purge (`purged 1`, then
/// `fwd=uri-miss` and a whole answer from the origin, no conditional request). Every
/// value's entry is now made stale and kept: the next request for each goes up with its
/// validator (`If-None-Match`) and the 304 keeps the stored body.
#[test]
fn a_soft_purge_on_a_mount_keyed_by_a_cookie_keeps_every_value_to_revalidate() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let (whole, conditional) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (w, c) = (whole.clone(), conditional.clone());
    let origin: Answer = Arc::new(move |_, head| {
        let lang = if head.contains("lang=fr") { "fr" } else { "en" };
        let fields = format!("Cache-Control: max-age=600\r\nETag: \"{lang}\"\r\n");
        let asked = format!("if-none-match: \"{lang}\"");
        if head.to_ascii_lowercase().contains(&asked) {
            c.fetch_add(1, Relaxed);
            return format!("HTTP/1.1 304 Not Modified\r\n{fields}\r\n").into_bytes();
        }
        w.fetch_add(1, Relaxed);
        answer("200 OK", &fields, lang)
    });
    let p = linerate(
        "cookie-soft",
        "key = [\"host\", \"path\", \"query\", \"cookie:lang\"]",
        origin,
    );
    let values = [("Cookie: lang=en\r\n", "en"), ("Cookie: lang=fr\r\n", "fr")];
    for (cookie, lang) in values {
        assert_eq!(p.get(0, "t", "/home", cookie).text(), lang);
        assert_eq!(p.get(0, "t", "/home", cookie).text(), lang, "a hit");
    }
    assert_eq!(whole.load(Relaxed), 2, "one entry per value");
    let (status, body) = post(p.admin.as_deref().unwrap(), "/purge?url=http://t/home&soft");
    assert_eq!((status, body.as_str()), (200, "purged 2\n"));
    for (cookie, lang) in values {
        let r = p.get(0, "t", "/home", cookie);
        assert_eq!((r.status, r.text()), (200, lang.to_string()));
        let status = r.header("cache-status").unwrap_or_default();
        assert!(!status.contains("uri-miss"), "{status}");
    }
    assert_eq!(
        (whole.load(Relaxed), conditional.load(Relaxed)),
        (2, 2),
        "each value revalidated, none fetched whole"
    );
    for (cookie, lang) in values {
        assert_eq!(p.get(0, "t", "/home", cookie).text(), lang, "fresh again");
    }
    assert_eq!((whole.load(Relaxed), conditional.load(Relaxed)), (2, 2));
}

/// Item 5: `valid` gives a lifetime to answers the origin gave none, by status (nginx's
/// `proxy_cache_valid`); the origin's own freshness wins, and an unnamed status (500) is
/// not stored.
#[test]
fn valid_gives_answers_without_freshness_their_lifetime_by_status() {
    let origin: Answer = Arc::new(|target, _| match target {
        "/ok" => answer("200 OK", "", "ok"),
        "/gone" => answer("404 Not Found", "", "gone"),
        "/moved" => answer("302 Found", "Location: /ok\r\n", ""),
        "/err" => answer("500 Internal Server Error", "", "err"),
        "/own" => answer("200 OK", "Cache-Control: max-age=0\r\n", "own"),
        _ => answer("404 Not Found", "", ""),
    });
    let mut peers = vec![linerate(
        "valid",
        "valid = { \"200 302\" = \"10m\", \"404\" = \"1m\" }",
        origin.clone(),
    )];
    peers.extend(nginx(
        "valid",
        "proxy_cache_valid 200 302 10m;\nproxy_cache_valid 404 1m;",
        origin.clone(),
    ));
    // Varnish: beresp.ttl set in VCL where the origin said nothing, the rest uncacheable.
    peers.extend(varnish(
        "valid",
        "sub vcl_backend_response {\n\
         if (!beresp.http.cache-control && !beresp.http.expires) {\n\
         if (beresp.status == 200 || beresp.status == 302) { set beresp.ttl = 10m; }\n\
         elsif (beresp.status == 404) { set beresp.ttl = 1m; }\n\
         else { set beresp.ttl = 0s; set beresp.uncacheable = true; }\n\
         return (deliver); } }",
        origin.clone(),
    ));
    let expect = [
        ("/ok", 1),
        ("/gone", 1),
        ("/moved", 1),
        ("/err", 2),
        ("/own", 2),
    ];
    for p in &peers {
        for (target, upstream) in expect {
            let a = p.get(0, "t", target, "");
            let b = p.get(0, "t", target, "");
            assert_eq!(a.status, b.status, "{}: {target}", p.name);
            assert_eq!(p.origin.count(target), upstream, "{}: {target}", p.name);
        }
    }
    // Without `valid`, none of them is stored (no explicit freshness, no validator).
    let plain = linerate("valid-none", "", origin);
    for (target, _) in expect {
        plain.get(0, "t", target, "");
        plain.get(0, "t", target, "");
        assert_eq!(plain.origin.count(target), 2, "{target}");
    }
}

/// Item 5: `ignore` (nginx's `proxy_ignore_headers`): Cache-Control's `private, no-store`
/// not obeyed (`valid` decides), Vary not obeyed (one variant), and Set-Cookie not obeyed
/// for storing. linerate deliberately differs from nginx on Set-Cookie: nginx replays the
/// first visitor's cookie to every later one; linerate stores the answer without it.
#[test]
fn ignored_origin_fields_store_the_answer_and_never_replay_its_cookie() {
    let sid = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let origin: Answer = Arc::new(move |target, _| {
        let n = sid.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        match target {
            "/private" => answer(
                "200 OK",
                &format!("Cache-Control: private, no-store\r\nSet-Cookie: sid={n}\r\n"),
                "mine",
            ),
            _ => answer(
                "200 OK",
                "Cache-Control: max-age=60\r\nVary: Accept-Language\r\n",
                "varied",
            ),
        }
    });
    let linerate_peer = linerate(
        "ignore",
        "valid = { \"200\" = \"10m\" }, ignore = [\"Cache-Control\", \"Set-Cookie\", \"Vary\"]",
        origin.clone(),
    );
    let nginx_peer = nginx(
        "ignore",
        "proxy_cache_valid 200 10m;\nproxy_ignore_headers Cache-Control Set-Cookie Vary;",
        origin.clone(),
    );
    for p in std::iter::once(&linerate_peer).chain(nginx_peer.as_ref()) {
        let first = p.get(0, "t", "/private", "");
        let cookie = first.header("set-cookie").map(str::to_string);
        assert!(cookie.is_some(), "{}", p.name);
        let second = p.get(0, "t", "/private", "");
        assert_eq!(second.text(), "mine", "{}", p.name);
        assert_eq!(p.origin.count("/private"), 1, "{}: stored", p.name);
        let replayed = second.header("set-cookie");
        match p.name {
            "nginx" => assert_eq!(replayed, cookie.as_deref(), "nginx replays the cookie"),
            _ => assert_eq!(
                replayed, None,
                "the first visitor's cookie went to the next"
            ),
        }
        p.get(0, "t", "/v", "Accept-Language: en\r\n");
        p.get(0, "t", "/v", "Accept-Language: fr\r\n");
        assert_eq!(p.origin.count("/v"), 1, "{}: one variant", p.name);
    }
    // Without `ignore`, neither is stored twice over.
    let plain = linerate("ignore-none", "valid = { \"200\" = \"10m\" }", origin);
    plain.get(0, "t", "/private", "");
    plain.get(0, "t", "/private", "");
    plain.get(0, "t", "/v", "Accept-Language: en\r\n");
    plain.get(0, "t", "/v", "Accept-Language: fr\r\n");
    assert_eq!(
        (plain.origin.count("/private"), plain.origin.count("/v")),
        (2, 2)
    );
}

/// Item 6: a HEAD on a cold key goes up as GET and fills the cache (nginx's
/// `proxy_cache_convert_head`, on by default in both); the HEAD client gets the GET's head
/// (its Content-Length) and no body; the next GET and HEAD are hits.
#[test]
fn a_head_on_a_cold_key_fills_the_cache_as_get() {
    let origin: Answer = Arc::new(|_, head| {
        let body = if head.starts_with("HEAD") {
            ""
        } else {
            "hello"
        };
        format!("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\n{body}")
            .into_bytes()
    });
    let mut peers = vec![linerate("head", "", origin.clone())];
    peers.extend(nginx("head", "", origin.clone()));
    peers.extend(varnish("head", "", origin.clone()));
    for p in &peers {
        let h = p.head("/h");
        assert_eq!(
            (h.status, h.header("content-length"), h.body.len()),
            (200, Some("5"), 0),
            "{}",
            p.name
        );
        let g = p.get(0, "t", "/h", "");
        assert_eq!(g.text(), "hello", "{}", p.name);
        let h = p.head("/h");
        assert_eq!(h.header("content-length"), Some("5"), "{}", p.name);
        assert_eq!(p.origin.lines(), ["GET /h"], "{}", p.name);
    }
    // Off: the HEAD goes up as HEAD and nothing is stored (nginx's off keys HEAD apart,
    // with `$request_method` in its key; linerate stores GET answers only).
    let off = linerate("head-off", "convert_head = false", origin);
    off.head("/h");
    assert_eq!(off.get(0, "t", "/h", "").text(), "hello");
    assert_eq!(off.origin.lines(), ["HEAD /h", "GET /h"]);
}

/// Item 6: the HEAD client never waits on the body it does not get. Over `max_object`, the
/// answer is not stored, the head is answered at once and the body is not read (the
/// connection upstream is closed); under it, the head is answered at once too, while the
/// body is read on for the store (even once the HEAD client has gone), and the next GET is
/// a hit.
#[test]
fn a_head_filled_as_get_is_answered_before_the_body_arrives() {
    let origin: Answer = Arc::new(|target, _| {
        let mut v = match target {
            // 2 MiB declared, over the default max_object (1 MiB): never all sent.
            "/big" => {
                b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2097152\r\n\r\n"
                    .to_vec()
            }
            _ => b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10\r\n\r\nfirst"
                .to_vec(),
        };
        v.extend_from_slice(HOLD);
        v.extend_from_slice(if target == "/big" { b"x" } else { b"-last" });
        v
    });
    let p = linerate("head-held", "", origin);
    // Each answered while the origin holds the rest of its body, one after the other on
    // one connection: the first HEAD's answer is over with its head.
    let mut c = Client::connect(p.ports[0]);
    c.send(b"HEAD /big HTTP/1.1\r\nHost: t\r\n\r\n");
    let big = c.read_response_opt(true).expect("an answer");
    assert_eq!(
        (big.status, big.header("content-length")),
        (200, Some("2097152"))
    );
    c.send(b"HEAD /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    let slow = c.read_response_opt(true).expect("an answer");
    assert_eq!(
        (slow.status, slow.header("content-length")),
        (200, Some("10"))
    );
    // The HEAD client leaves before the body comes: the fill is the store's, it goes on.
    drop(c);
    let admin = p.admin.as_deref().unwrap();
    eventually("the server saw the client leave", || {
        scrape(admin).contains("linerate_connections{state=\"open\"} 0")
    });
    p.origin.open();
    eventually("the held answer is stored", || {
        scrape(admin)
            .lines()
            .any(|l| l.starts_with("linerate_cache_stored_total{") && l.ends_with(" 1"))
    });
    assert_eq!(p.get(0, "t", "/slow", "").text(), "first-last");
    assert_eq!(p.origin.count("/slow"), 1);
}

/// Item 3: `bypass` (nginx's `proxy_cache_bypass`): a request with the session cookie or
/// `X-Debug: 1` is not answered from the cache, and its answer replaces the stored one;
/// `no_store` (`proxy_no_cache`): answers under `/admin/` are never stored.
#[test]
fn bypass_and_no_store_rules_act_as_nginx_cache_bypass_and_no_cache() {
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let origin: Answer = Arc::new(move |_, _| {
        let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        answer("200 OK", "Cache-Control: max-age=60\r\n", &n.to_string())
    });
    let mut peers = vec![linerate(
        "bypass",
        "bypass = [{ cookie = \"sessionid\" }, { header = \"X-Debug\", value = \"1\" }], \
         no_store = [{ path = \"/admin/\" }]",
        origin.clone(),
    )];
    peers.extend(nginx_with(
        "bypass",
        "map $uri $admin { default \"\"; ~^/admin/ 1; }",
        "proxy_cache_bypass $cookie_sessionid $http_x_debug;\nproxy_no_cache $admin;",
        origin.clone(),
    ));
    // Varnish: `hash_always_miss` is the bypass that stores; `uncacheable` the no-store.
    peers.extend(varnish(
        "bypass",
        "sub vcl_recv {\n\
         if (req.http.cookie ~ \"(^|;\\s*)sessionid=\" || req.http.x-debug == \"1\") {\n\
         set req.hash_always_miss = true; }\n\
         return (hash); }\n\
         sub vcl_backend_response { if (bereq.url ~ \"^/admin/\") {\n\
         set beresp.uncacheable = true; set beresp.ttl = 120s; return (deliver); } }",
        origin,
    ));
    for p in &peers {
        let body = |target: &str, fields: &str| {
            let r = p.get(0, "t", target, fields);
            (r.text(), r.header("cache-status").map(str::to_string))
        };
        let first = body("/p", "").0;
        assert_eq!(body("/p", "").0, first, "{}: a hit", p.name);
        let (bypassed, status) = body("/p", "Cookie: a=1; sessionid=abc\r\n");
        assert_ne!(bypassed, first, "{}: the session went up", p.name);
        if p.name == "linerate" {
            let status = status.unwrap_or_default();
            assert!(status.contains("fwd=bypass"), "{status}");
        }
        // Its answer was stored: the next plain request gets it.
        assert_eq!(body("/p", "").0, bypassed, "{}", p.name);
        let debug = body("/p", "X-Debug: 1\r\n").0;
        assert_ne!(debug, bypassed, "{}", p.name);
        assert_eq!(
            body("/p", "X-Debug: 0\r\n").0,
            debug,
            "{}: not the rule's value",
            p.name
        );
        assert_eq!(p.origin.count("/p"), 3, "{}", p.name);
        body("/admin/x", "");
        body("/admin/x", "");
        assert_eq!(p.origin.count("/admin/x"), 2, "{}: never stored", p.name);
    }
}

/// Item 3: the `hardened` preset, for an origin that personalises by cookie (or
/// credentials) without `Vary` or `private`: by default the first visitor's page is stored
/// for everyone; hardened, a request with a Cookie or Authorization is neither answered from
/// the cache nor stored (nginx: `proxy_cache_bypass` and `proxy_no_cache` on `$http_cookie
/// $http_authorization`; Varnish's builtin VCL passes them so). The measured cost, on 20
/// requests alternating a cookied (first) and an anonymous visitor: 9 hits instead of 19
/// (docs/cache.md).
#[test]
fn the_hardened_preset_keeps_a_cookied_page_from_everyone_at_its_cost_in_hits() {
    let origin: Answer = Arc::new(|_, head| {
        let who = match head.to_ascii_lowercase().contains("cookie: sid=") {
            true => "yours, alice",
            false => "anyone's",
        };
        answer("200 OK", "Cache-Control: max-age=60\r\n", who)
    });
    let run = |p: &Peer| {
        let mut anonymous = Vec::new();
        for i in 0..20 {
            let fields = if i % 2 == 0 {
                "Cookie: sid=alice\r\n"
            } else {
                ""
            };
            let r = p.get(0, "t", "/page", fields);
            if i % 2 == 1 {
                anonymous.push(r.text());
            }
        }
        (p.origin.count("/page"), anonymous)
    };
    let plain = linerate("preset-none", "", origin.clone());
    let (upstream, anonymous) = run(&plain);
    assert_eq!(upstream, 1, "19 hits of 20");
    assert_eq!(
        anonymous[0], "yours, alice",
        "the default's risk, as the review says"
    );
    let mut peers = vec![linerate("preset", "preset = \"hardened\"", origin.clone())];
    peers.extend(nginx(
        "preset",
        "proxy_cache_bypass $http_cookie $http_authorization;\n\
         proxy_no_cache $http_cookie $http_authorization;",
        origin.clone(),
    ));
    // Varnish's builtin VCL passes a request with a Cookie or Authorization: hardened.
    peers.extend(varnish("preset", "", origin));
    for p in &peers {
        let (upstream, anonymous) = run(p);
        assert_eq!(upstream, 11, "{}: 9 hits of 20", p.name);
        assert!(
            anonymous.iter().all(|a| a == "anyone's"),
            "{}: {anonymous:?}",
            p.name
        );
        let auth = p.get(0, "t", "/page", "Authorization: Basic YTpi\r\n");
        assert_eq!(auth.text(), "anyone's", "{}", p.name);
        assert_eq!(
            p.origin.count("/page"),
            12,
            "{}: Authorization goes up",
            p.name
        );
    }
}

/// The admin listener's `/metrics`.
fn scrape(admin: &str) -> String {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

/// A malformed rule is refused at load with FILE:LINE:COLUMN.
#[test]
fn malformed_key_valid_and_ignore_rules_are_refused_where_they_are() {
    let dir = scratch("refused");
    for (cache, says) in [
        ("key = [\"host\", \"query\"]", "must hold \"path\""),
        ("key = [\"path\", \"cookie:\"]", "cookie:NAME"),
        ("valid = { \"200 abc\" = \"1m\" }", "\"abc\""),
        ("valid = { \"206\" = \"1m\" }", "\"206\""),
        ("ignore = [\"X-Accel-Expires\"]", "x-accel-expires"),
        (
            "bypass = [{ cookie = \"a\", path = \"/b\" }]",
            "a cache rule is one of",
        ),
        (
            "no_store = [{ path = \"admin\" }]",
            "a cache rule is one of",
        ),
        (
            "bypass = [{ cookie = \"a\", value = \"1\" }]",
            "a cache rule is one of",
        ),
        ("preset = \"paranoid\"", "\"hardened\""),
    ] {
        let file = dir.join("linerate.toml");
        std::fs::write(
            &file,
            format!(
                "[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n\n[[site]]\n\
                 default = true\n\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n\
                 cache = {{ {cache} }}\n\n[[listen]]\naddr = \"127.0.0.1:0\"\n"
            ),
        )
        .unwrap();
        let (code, err) =
            common::bin::run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_ne!(code, 0, "{cache}");
        assert!(err.contains("linerate.toml:11:"), "{cache}: {err}");
        assert!(err.contains(says), "{cache}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
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
