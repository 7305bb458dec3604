//! The reverse proxy (`serve --proxy PREFIX=URL`) over real sockets, against real upstreams
//! started here: another linerate running the demo (keep-alive), `python3 -m http.server`
//! (HTTP/1.0, one connection per request), and scripted upstreams on a std `TcpListener`
//! that record every request they receive and answer with exact bytes — the fault table
//! (malformed heads, cut bodies, stale pooled connections), the forwarded request's fields
//! and framing, prefix rewriting, and the answer's framing for each kind of client.
//!
//! No timing is asserted: where an upstream must act after the client saw something (a cut
//! after the first bytes arrived), the test tells it to through a channel. Every read has a
//! timeout and every process started here is killed when its guard drops.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use common::bin::{Served, Stopped, serve};
use common::{Client, READ_TIMEOUT};

/// `linerate serve --app none` proxying each `(prefix, url)`: only the proxy answers.
fn proxy(mounts: &[(&str, String)]) -> Served {
    proxy_with(mounts, &[])
}

/// [`proxy`] with more flags.
fn proxy_with(mounts: &[(&str, String)], extra: &[&str]) -> Served {
    let specs: Vec<String> = mounts.iter().map(|(p, u)| format!("{p}={u}")).collect();
    let mut args = vec!["--app", "none"];
    for s in &specs {
        args.extend(["--proxy", s.as_str()]);
    }
    args.extend_from_slice(extra);
    serve(&args)
}

fn http(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// Bytes whose every position is distinguishable, so a reordered or shifted piece shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

/// A complete `HTTP/1.1 200` answer with `body`, framed by Content-Length.
fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

// ---------------------------------------------------------------------------------------------
// A scripted upstream: a std listener, a thread per connection, a script per request.

/// A request as a scripted upstream received it.
#[derive(Clone, Debug)]
struct Got {
    /// The accepted connection it came on (0 first) and its place there (0 first).
    conn: usize,
    nth: usize,
    /// The request line, e.g. `GET /x HTTP/1.1`.
    line: String,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn target(&self) -> &str {
        self.line.split(' ').nth(1).unwrap_or("")
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn field(&self, name: &str) -> Option<&str> {
        self.all(name).first().copied()
    }
}

/// What the connection does after the script answered a request.
enum Then {
    /// Read the next request.
    Keep,
    /// Close the connection.
    Close,
}

type Script = dyn Fn(&Got, &mut TcpStream) -> Then + Send + Sync;

/// An upstream on 127.0.0.1 that runs `script` for every request; stops accepting on drop.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Got>>>,
    /// Connections the proxy closed (EOF or reset while reading a request).
    ended: Arc<Mutex<Vec<usize>>>,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Upstream {
    fn start(script: impl Fn(&Got, &mut TcpStream) -> Then + Send + Sync + 'static) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let ended = Arc::new(Mutex::new(Vec::new()));
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (seen2, ended2) = (seen.clone(), ended.clone());
        let (accepted2, stop2) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            for s in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                let conn = accepted2.fetch_add(1, Ordering::SeqCst);
                let (seen, ended, script) = (seen2.clone(), ended2.clone(), script.clone());
                std::thread::spawn(move || {
                    if serve_conn(s, conn, &seen, &*script) == End::Closed {
                        ended.lock().unwrap().push(conn);
                    }
                });
            }
        });
        Upstream {
            addr,
            seen,
            ended,
            accepted,
            stop,
        }
    }

    /// Answers every request with `answer` and keeps the connection.
    fn answering(answer: Vec<u8>) -> Upstream {
        Upstream::start(move |_, s| {
            s.write_all(&answer).unwrap();
            Then::Keep
        })
    }

    fn url(&self) -> String {
        http(self.addr)
    }

    fn seen(&self) -> Vec<Got> {
        self.seen.lock().unwrap().clone()
    }

    fn ended(&self) -> Vec<usize> {
        self.ended.lock().unwrap().clone()
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// How a connection's reading ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The peer closed it (EOF or reset).
    Closed,
    /// Nothing came within [`READ_TIMEOUT`].
    Silent,
    /// The script closed it.
    Script,
}

fn serve_conn(mut s: TcpStream, conn: usize, seen: &Mutex<Vec<Got>>, script: &Script) -> End {
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut buf = Vec::new();
    for nth in 0.. {
        let (line, fields, body) = match read_request(&mut s, &mut buf) {
            Ok(req) => req,
            Err(end) => return end,
        };
        let got = Got {
            conn,
            nth,
            line,
            fields,
            body,
        };
        seen.lock().unwrap().push(got.clone());
        if let Then::Close = script(&got, &mut s) {
            return End::Script;
        }
    }
    unreachable!()
}

/// A request's line, fields and (decoded) body.
type Request = (String, Vec<(String, String)>, Vec<u8>);

/// One request from `s` (bytes after it stay in `buf`), or how the connection ended.
fn read_request(s: &mut impl Read, buf: &mut Vec<u8>) -> Result<Request, End> {
    let end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        fill(s, buf)?;
    };
    let (line, fields) = parse_head(&buf[..end]);
    buf.drain(..end);
    let chunked = fields
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        loop {
            if let (data, Some(used)) = dechunk(buf) {
                buf.drain(..used);
                break data;
            }
            fill(s, buf)?;
        }
    } else {
        let len: usize = fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().unwrap());
        while buf.len() < len {
            fill(s, buf)?;
        }
        buf.drain(..len).collect()
    };
    Ok((line, fields, body))
}

/// One read into `buf`.
fn fill(s: &mut impl Read, buf: &mut Vec<u8>) -> Result<(), End> {
    let mut chunk = [0u8; 65536];
    match s.read(&mut chunk) {
        Ok(0) => Err(End::Closed),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(())
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(End::Silent)
        }
        Err(_) => Err(End::Closed),
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A head's first line and its fields.
fn parse_head(head: &[u8]) -> (String, Vec<(String, String)>) {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap().to_string();
    let fields = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').expect("a field line");
            (n.to_string(), v.trim().to_string())
        })
        .collect();
    (first, fields)
}

/// A chunked body's data so far, and the bytes it took once its last chunk and trailer
/// section arrived (`None` while it is incomplete).
fn dechunk(b: &[u8]) -> (Vec<u8>, Option<usize>) {
    let mut data = Vec::new();
    let mut at = 0;
    loop {
        let Some(eol) = find(&b[at..], b"\r\n") else {
            return (data, None);
        };
        let size_text = std::str::from_utf8(&b[at..at + eol]).unwrap();
        let size_text = size_text.split(';').next().unwrap();
        let size = usize::from_str_radix(size_text, 16).expect("a chunk size");
        at += eol + 2;
        if size == 0 {
            // Trailer fields (none here), then the empty line.
            return match find(&b[at..], b"\r\n") {
                Some(0) => (data, Some(at + 2)),
                Some(_) => (data, find(&b[at..], b"\r\n\r\n").map(|p| at + p + 4)),
                None => (data, None),
            };
        }
        let have = (b.len() - at).min(size);
        data.extend_from_slice(&b[at..at + have]);
        if b.len() < at + size + 2 {
            return (data, None);
        }
        at += size + 2;
    }
}

/// Reads until the server ends the connection (FIN or reset); panics if it is still open
/// after [`READ_TIMEOUT`] without a byte.
fn read_until_closed(s: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
            Err(e) => panic!("the connection stayed open: {e}"),
        }
    }
}

/// Reads until `buf` holds a whole head and at least `body` bytes after it.
fn read_at_least(s: &mut TcpStream, buf: &mut Vec<u8>, body: usize) {
    let mut chunk = [0u8; 65536];
    while find(buf, b"\r\n\r\n").is_none_or(|p| buf.len() < p + 4 + body) {
        let n = s.read(&mut chunk).expect("the answer's first bytes");
        assert!(n > 0, "EOF too early: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A raw client connection with a read timeout.
/// Holds a scripted upstream's answer until the test sets `flag` (30 s at most: a test that
/// failed before setting it leaves no thread spinning).
fn hold_until(flag: &AtomicBool) {
    for _ in 0..6_000 {
        if flag.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s
}

/// An address where nothing listens (a listener bound, then closed).
fn dead_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The demo as the upstream: a keep-alive linerate.

#[test]
fn demo_endpoints_answer_through_the_proxy() {
    let demo = serve(&[]);
    let px = proxy(&[("/", http(demo.addr))]);
    let mut c = Client::connect(px.addr);
    let r = c.get("/json");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), r#"{"message":"Hello, World!"}"#);
    assert_eq!(r.header("content-type"), Some("application/json"));
    // RFC 9110 §7.6.3: the answer names the hop it took.
    assert_eq!(r.header("via"), Some("1.1 linerate"));
    let r = c.get("/plaintext");
    assert_eq!((r.status, r.text().as_str()), (200, "Hello, World!"));
    let r = c.get("/baseline11?a=13&b=42");
    assert_eq!(r.text(), "55");
    // The demo's own 404 comes through as it is.
    assert_eq!(c.get("/nowhere").status, 404);
}

#[test]
fn a_posted_body_reaches_the_demo_echo_and_comes_back_whole() {
    let demo = serve(&[]);
    let px = proxy(&[("/", http(demo.addr))]);
    let mut c = Client::connect(px.addr);
    let body = pattern(300_000);
    c.send(
        format!(
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    c.send(&body);
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert!(r.body == body, "the echoed body differs");
    // A chunked body is read whole here and echoed the same.
    c.send(b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
    assert_eq!(c.read_response().text(), "hello world");
    // HttpArena's body integer.
    c.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n39");
    assert_eq!(c.read_response().text(), "42");
}

#[test]
fn requests_on_one_client_connection_reuse_one_upstream_connection() {
    let up = Upstream::answering(ok("pong"));
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    for i in 0..50 {
        assert_eq!(c.get(&format!("/ping/{i}")).text(), "pong");
    }
    assert_eq!(up.seen().len(), 50);
    assert_eq!(up.accepted(), 1, "the pooled connection is reused");
}

#[test]
fn two_hundred_concurrent_clients_all_get_200_from_the_demo() {
    let demo = serve(&[]);
    let px = proxy(&[("/", http(demo.addr))]);
    // Every request is sent before any answer is read: all 200 are in flight at once.
    let mut clients: Vec<Client> = (0..200).map(|_| Client::connect(px.addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(format!("GET /baseline11?a={i}&b=1 HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(r.status, 200, "client {i}");
        assert_eq!(r.text(), (i + 1).to_string(), "client {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// python3 -m http.server: an HTTP/1.0 upstream that closes after every answer.

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `python3 -m http.server` on 127.0.0.1 with an OS-chosen port serving `dir`: its guard and
/// its address; `None` when there is no python3.
fn python_server(dir: &std::path::Path) -> Option<(Stopped, SocketAddr)> {
    let mut child = Command::new("python3")
        .args([
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let out = child.stdout.take().unwrap();
    let guard = Stopped(child);
    // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(common::EVENTUALLY)
        .expect("python3 -m http.server printed its port");
    let port: u16 = line
        .split_whitespace()
        .skip_while(|w| *w != "port")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    Some((guard, SocketAddr::from(([127, 0, 0, 1], port))))
}

#[test]
fn python_http_server_files_pass_through_byte_exact() {
    if Command::new("python3").arg("--version").output().is_err() {
        println!("NOT RUN: python3 missing");
        return;
    }
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-py-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let big = pattern(3_000_000);
    std::fs::write(dir.0.join("big.bin"), &big).unwrap();
    let (_python, addr) = python_server(&dir.0).expect("python3 starts");
    let px = proxy(&[("/", http(addr))]);
    let mut c = Client::connect(px.addr);

    let r = c.get("/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("3000000"));
    assert!(r.body == big, "the 3 MB file differs");
    // The upstream spoke HTTP/1.0 (RFC 9110 §7.6.3: Via names the received protocol).
    assert_eq!(r.header("via"), Some("1.0 linerate"));

    // HEAD: GET's length, no body (the next answer on the connection would be garbled).
    c.send(b"HEAD /big.bin HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response_opt(true).expect("an answer to HEAD");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), Some("3000000"));

    // The upstream's own 404 page.
    let r = c.get("/missing.txt");
    assert_eq!(r.status, 404);
    assert!(
        r.text().contains("404"),
        "python's error page: {:?}",
        r.text()
    );
    assert_eq!(r.header("via"), Some("1.0 linerate"));
}

// ---------------------------------------------------------------------------------------------
// Faults.

#[test]
fn a_dead_upstream_is_502_and_the_client_connection_goes_on() {
    let px = proxy(&[("/", http(dead_addr()))]);
    let mut c = Client::connect(px.addr);
    assert_eq!(c.get("/a").status, 502);
    assert_eq!(c.get("/b").status, 502);
}

/// (rule, the upstream's answer): each is malformed in its head and must never reach the
/// client; RFC 9112 as a proxy reads it strictly.
#[rustfmt::skip]
const MALFORMED: &[(&str, &[u8])] = &[
    ("bare LF line ends (§2.2)", b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"),
    ("obs-fold (§5.2)", b"HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\nok"),
    ("a transfer coding other than chunked (§6.1)", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nok"),
    ("Content-Length with Transfer-Encoding (§6.3)", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"),
    ("two different Content-Lengths (§6.3)", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!"),
    ("a two-digit status (§4)", b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok"),
    ("no version in the status line (§4)", b"200 OK\r\nContent-Length: 2\r\n\r\nok"),
    ("a field name with a space (§5.1)", b"HTTP/1.1 200 OK\r\nX A: b\r\nContent-Length: 2\r\n\r\nok"),
    ("a 101 no upgrade asked for (RFC 9110 §15.2.2)", b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"),
];

#[test]
fn malformed_upstream_answers_are_502_and_the_client_connection_goes_on() {
    // `/bad/{i}` gets row i's answer; `/ok` a good one.
    let up = Upstream::start(|got, s| {
        if let Some(i) = got.target().strip_prefix("/bad/") {
            s.write_all(MALFORMED[i.parse::<usize>().unwrap()].1)
                .unwrap();
            // The proxy drops this connection; nothing more is read on it.
            return Then::Close;
        }
        if got.target() == "/huge" {
            // A head over MAX_RESPONSE_HEAD_BYTES (64 KiB).
            let pad = "a".repeat(70_000);
            let head = format!("HTTP/1.1 200 OK\r\nX-Pad: {pad}\r\nContent-Length: 2\r\n\r\nok");
            s.write_all(head.as_bytes()).unwrap();
            return Then::Close;
        }
        s.write_all(&ok("fine")).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    let targets = (0..MALFORMED.len()).map(|i| (MALFORMED[i].0, format!("/bad/{i}")));
    for (rule, target) in targets.chain([("a head over 64 KiB", "/huge".to_string())]) {
        let r = c.get(&target);
        assert_eq!(r.status, 502, "{rule}");
        let r = c.get("/ok");
        assert_eq!((r.status, r.text().as_str()), (200, "fine"), "after {rule}");
    }
}

#[test]
fn a_malformed_chunk_after_the_head_cuts_the_client_off_without_a_last_chunk() {
    // The head went to the client before the bad chunk size was read: only the cut is left.
    let up = Upstream::start(|_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\nno\r\n0\r\n\r\n")
            .unwrap();
        Then::Close
    });
    let px = proxy(&[("/", up.url())]);
    let mut s = connect(px.addr);
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    read_until_closed(&mut s, &mut raw);
    let end = find(&raw, b"\r\n\r\n").expect("a head") + 4;
    let (line, fields) = parse_head(&raw[..end]);
    if line.starts_with("HTTP/1.1 502") {
        return; // Also right: the whole answer was judged before its head went out.
    }
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert!(
        fields
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked"),
        "{fields:?}"
    );
    let (data, complete) = dechunk(&raw[end..]);
    assert_eq!(complete, None, "the cut answer ended as if whole");
    assert!(
        !data.windows(2).any(|w| w == b"no"),
        "bytes after the bad chunk size went out"
    );
}

#[test]
fn an_upstream_closing_mid_body_leaves_the_client_short_of_its_content_length() {
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Upstream::start(move |_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            .unwrap();
        s.write_all(&[b'a'; 1000]).unwrap();
        let _ = wait.lock().unwrap().recv_timeout(READ_TIMEOUT);
        Then::Close
    });
    let px = proxy(&[("/", up.url())]);
    let mut s = connect(px.addr);
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    read_at_least(&mut s, &mut raw, 1000);
    release.send(()).unwrap();
    read_until_closed(&mut s, &mut raw);
    let end = find(&raw, b"\r\n\r\n").unwrap() + 4;
    let (line, fields) = parse_head(&raw[..end]);
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let declared: usize = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .expect("the upstream's length is kept")
        .1
        .parse()
        .unwrap();
    assert_eq!(declared, 100_000);
    assert_eq!(
        raw.len() - end,
        1000,
        "the bytes that came, and then the close"
    );
}

#[test]
fn an_upstream_closing_mid_chunked_body_never_sends_the_last_chunk() {
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Upstream::start(move |_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        s.write_all(b"400\r\n").unwrap();
        s.write_all(&[b'a'; 0x400]).unwrap();
        s.write_all(b"\r\n").unwrap();
        let _ = wait.lock().unwrap().recv_timeout(READ_TIMEOUT);
        Then::Close
    });
    let px = proxy(&[("/", up.url())]);
    let mut s = connect(px.addr);
    s.write_all(b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    read_at_least(&mut s, &mut raw, 0x400);
    release.send(()).unwrap();
    read_until_closed(&mut s, &mut raw);
    let end = find(&raw, b"\r\n\r\n").unwrap() + 4;
    let (line, fields) = parse_head(&raw[..end]);
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert!(
        fields
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked"),
        "{fields:?}"
    );
    let (data, complete) = dechunk(&raw[end..]);
    assert_eq!(data, vec![b'a'; 0x400]);
    assert_eq!(complete, None, "a last chunk reached the client");
}

#[test]
fn a_pooled_connection_the_upstream_closed_after_its_answer_is_not_an_error() {
    // The first connection answers once and closes; later ones keep going.
    let up = Upstream::start(|got, s| {
        s.write_all(&ok(&format!("conn {}", got.conn))).unwrap();
        if got.conn == 0 {
            Then::Close
        } else {
            Then::Keep
        }
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    assert_eq!(c.get("/a").text(), "conn 0");
    let r = c.get("/b");
    assert_eq!((r.status, r.text().as_str()), (200, "conn 1"));
    assert_eq!(c.get("/c").text(), "conn 1");
}

#[test]
fn a_pooled_connection_closed_before_answering_is_retried_once_for_get_and_not_for_post() {
    // Connection 0 answers its first request, then closes on reading its second without a
    // byte (an upstream's keep-alive timeout racing the request, here made certain).
    let up = Upstream::start(|got, s| {
        if got.conn == 0 && got.nth == 1 {
            return Then::Close;
        }
        s.write_all(&ok(&format!("conn {}", got.conn))).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    assert_eq!(c.get("/first").text(), "conn 0");
    let r = c.get("/again");
    assert_eq!((r.status, r.text().as_str()), (200, "conn 1"));
    let again: Vec<(usize, usize)> = up
        .seen()
        .iter()
        .filter(|g| g.target() == "/again")
        .map(|g| (g.conn, g.nth))
        .collect();
    assert_eq!(
        again,
        [(0, 1), (1, 0)],
        "sent on the stale one, then on a fresh one"
    );

    // The same with a POST (RFC 9110 §9.2.2: not idempotent): never sent twice.
    let up = Upstream::start(|got, s| {
        if got.conn == 0 && got.nth == 1 {
            return Then::Close;
        }
        s.write_all(&ok("done")).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    assert_eq!(c.get("/first").text(), "done");
    c.send(b"POST /pay HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n100");
    assert_eq!(c.read_response().status, 502);
    let posts = up.seen().iter().filter(|g| g.target() == "/pay").count();
    assert_eq!(posts, 1, "a POST went upstream twice");
}

#[test]
fn a_client_gone_mid_answer_takes_its_upstream_connection_with_it() {
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Upstream::start(move |got, s| {
        if got.conn > 0 {
            s.write_all(&ok("next")).unwrap();
            return Then::Keep;
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            .unwrap();
        s.write_all(&[b'a'; 1000]).unwrap();
        let _ = wait.lock().unwrap().recv_timeout(READ_TIMEOUT);
        // More of the body, not all: the answer is still unfinished when the proxy learns
        // that its client is gone (a whole one could go back to the pool).
        let _ = s.write_all(&[b'a'; 10_000]);
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut s = connect(px.addr);
    s.write_all(b"GET /long HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    read_at_least(&mut s, &mut Vec::new(), 1000);
    drop(s);
    release.send(()).unwrap();
    // The half-read answer cannot go back to the pool: the proxy closes that connection.
    common::eventually("the proxy closes the abandoned upstream connection", || {
        up.ended().contains(&0)
    });
    let r = Client::connect(px.addr).get("/next");
    assert_eq!((r.status, r.text().as_str()), (200, "next"));
}

#[test]
fn pipelined_requests_are_answered_in_order_whatever_order_the_upstream_answers() {
    // `/slow` is answered only when the test says so; the others at once.
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Upstream::start(move |got, s| {
        if got.target() == "/slow" {
            let _ = wait.lock().unwrap().recv_timeout(READ_TIMEOUT);
        }
        s.write_all(&ok(got.target())).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    c.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /two HTTP/1.1\r\nHost: t\r\n\r\nGET /three HTTP/1.1\r\nHost: t\r\n\r\n");
    common::eventually("the later requests reach the upstream", || {
        up.seen().len() == 3
    });
    release.send(()).unwrap();
    for target in ["/slow", "/two", "/three"] {
        assert_eq!(c.read_response().text(), target);
    }
}

#[test]
fn expect_100_continue_is_answered_here_and_not_forwarded() {
    let up = Upstream::answering(ok("stored"));
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    c.send(b"PUT /f HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    // RFC 9110 §10.1.1: the client waits for the 100 before it sends the body.
    assert_eq!(c.read_response().status, 100);
    c.send(b"hello");
    assert_eq!(c.read_response().text(), "stored");
    let seen = up.seen();
    assert_eq!(seen[0].field("expect"), None);
    assert_eq!(seen[0].body, b"hello");
}

/// RFC 9110 §15.2: a proxy forwards the upstream's 1xx answers (103 Early Hints) ahead of
/// the final one, but not a 100 Continue (the client's own came from this server), and an
/// HTTP/1.0 client gets none.
#[test]
fn interim_answers_from_the_upstream_are_forwarded_but_100_and_to_http10_clients() {
    let up = Upstream::answering(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\
Connection: x-hop\r\nX-Hop: 1\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            .to_vec(),
    );
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    let early = c.get("/x");
    assert_eq!(early.status, 103);
    assert_eq!(early.header("link"), Some("</a.css>; rel=preload"));
    // Hop-by-hop fields (and those `Connection` names) are this hop's, as on final answers.
    assert_eq!(
        (early.header("connection"), early.header("x-hop")),
        (None, None)
    );
    let r = c.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    // The next request on the connection gets its own 103, then its answer.
    assert_eq!(c.get("/y").status, 103);
    assert_eq!(c.read_response().text(), "ok");

    let mut old = Client::connect(px.addr);
    old.send(b"GET /z HTTP/1.0\r\nHost: t\r\n\r\n");
    let r = old.read_response();
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
}

/// (rule, an answer after which the upstream connection cannot carry another request). The
/// upstream keeps the socket open: reusing it would hang or misread.
#[rustfmt::skip]
const NOT_POOLED: &[(&str, &[u8])] = &[
    ("Connection: close (RFC 9112 §9.6)", b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"),
    ("HTTP/1.0 without keep-alive (RFC 9112 §9.3)", b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"),
    ("bytes after the body", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra"),
];

#[test]
fn an_upstream_connection_that_cannot_carry_another_request_is_not_pooled() {
    for (rule, answer) in NOT_POOLED {
        let up = Upstream::answering(answer.to_vec());
        let px = proxy(&[("/", up.url())]);
        let mut c = Client::connect(px.addr);
        assert_eq!(c.get("/a").text(), "ok", "{rule}");
        assert_eq!(c.get("/b").text(), "ok", "{rule}");
        let conns: Vec<usize> = up.seen().iter().map(|g| g.conn).collect();
        assert_eq!(conns, [0, 1], "{rule}");
    }
}

#[test]
fn a_unix_socket_upstream_is_served() {
    use std::os::unix::net::UnixListener;
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-unix-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let path = dir.0.join("app.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut buf = Vec::new();
        while let Ok((line, _, _)) = read_request(&mut s, &mut buf) {
            let target = line.split(' ').nth(1).unwrap_or("").to_string();
            s.write_all(&ok(&target)).unwrap();
            let _ = tx.send(line);
        }
    });
    let px = proxy(&[("/app", format!("unix:{}", path.display()))]);
    let mut c = Client::connect(px.addr);
    let r = c.get("/app/x?y=1");
    assert_eq!((r.status, r.text().as_str()), (200, "/app/x?y=1"));
    assert_eq!(c.get("/app/z").text(), "/app/z", "on the pooled connection");
    assert_eq!(
        rx.recv_timeout(READ_TIMEOUT).unwrap(),
        "GET /app/x?y=1 HTTP/1.1"
    );
}

/// `linerate serve --config` with one listener on 127.0.0.1:0 whose default site proxies
/// everything to `up` with the upstream's `timeout` (send, first byte, between reads) set.
fn proxy_with_timeout(up: &Upstream, timeout: &str, dir: &TempDir) -> Served {
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[[listen]]
addr = "127.0.0.1:0"
[[upstream]]
name = "app"
servers = ["{}"]
timeout = "{timeout}"
tries = 1
[[site]]
default = true
app = "none"
[[site.proxy]]
prefix = "/"
upstream = "app"
"#,
            up.addr
        ),
    )
    .unwrap();
    common::bin::serve_as(&["--config", file.to_str().unwrap()])
}

#[test]
fn an_upstream_silent_past_its_timeout_is_504_and_one_stalling_mid_body_is_cut() {
    // The upstream answers `/silent` never and `/stall` in part; then it waits for the
    // proxy to give up and close the connection (a read bounded by READ_TIMEOUT).
    let closed = Arc::new(AtomicUsize::new(0));
    let closed_here = closed.clone();
    let up = Upstream::start(move |got, s| {
        match got.target() {
            "/silent" => {}
            "/stall" => {
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                    .unwrap();
                s.write_all(&[b'a'; 1000]).unwrap();
            }
            _ => {
                s.write_all(&ok("ok")).unwrap();
                return Then::Keep;
            }
        }
        if let Ok(0) = s.read(&mut [0u8; 1]) {
            closed_here.fetch_add(1, Ordering::SeqCst);
        }
        Then::Close
    });
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-timeout-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let px = proxy_with_timeout(&up, "1s", &dir);
    let mut c = Client::connect(px.addr);
    assert_eq!(c.get("/silent").status, 504);
    assert_eq!(
        c.get("/after").text(),
        "ok",
        "the client connection goes on"
    );

    let mut s = connect(px.addr);
    s.write_all(b"GET /stall HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut raw = Vec::new();
    read_until_closed(&mut s, &mut raw);
    let end = find(&raw, b"\r\n\r\n").expect("the head went out") + 4;
    assert!(
        raw.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&raw[..end])
    );
    assert_eq!(
        raw.len() - end,
        1000,
        "cut short of its Content-Length of 100000"
    );
    // The upstream saw the proxy close both connections.
    common::eventually("the proxy closes the timed-out connections", || {
        closed.load(Ordering::SeqCst) == 2
    });
}

// ---------------------------------------------------------------------------------------------
// The request the upstream receives.

#[test]
fn hop_by_hop_fields_are_removed_and_forwarding_fields_are_ours() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    c.send(
        b"GET /cap?x=1 HTTP/1.1\r\n\
Host: example.test:8080\r\n\
Connection: foo, keep-alive\r\n\
Foo: named-by-connection\r\n\
Keep-Alive: timeout=5\r\n\
TE: trailers\r\n\
Proxy-Authorization: Basic c2VjcmV0\r\n\
X-Forwarded-For: 6.6.6.6\r\n\
X-Forwarded-Proto: https\r\n\
X-Forwarded-Host: evil.test\r\n\
X-Kept: yes\r\n\
\r\n",
    );
    assert_eq!(c.read_response().status, 200);
    let seen = up.seen();
    let got = &seen[0];
    assert_eq!(got.line, "GET /cap?x=1 HTTP/1.1");
    // RFC 9110 §7.6.1: connection-specific fields, and those Connection names, stop here.
    for name in [
        "connection",
        "foo",
        "keep-alive",
        "te",
        "proxy-authorization",
    ] {
        assert_eq!(got.field(name), None, "{name} was forwarded: {got:?}");
    }
    assert_eq!(got.field("host"), Some("example.test:8080"));
    assert_eq!(got.field("x-kept"), Some("yes"));
    // A client cannot claim another address: the forwarding fields are this hop's.
    assert_eq!(got.all("x-forwarded-for"), ["127.0.0.1"]);
    assert_eq!(got.all("x-forwarded-proto"), ["http"]);
    assert_eq!(got.all("x-forwarded-host"), ["example.test:8080"]);
    // RFC 9110 §7.6.3.
    assert_eq!(got.all("via"), ["1.1 linerate"]);

    // An absolute-form target goes in origin-form (RFC 9112 §3.2.2); a Via is extended.
    c.send(
        b"GET http://example.test/abs?q=1 HTTP/1.1\r\nHost: example.test\r\nVia: 1.1 front\r\n\r\n",
    );
    assert_eq!(c.read_response().status, 200);
    let seen = up.seen();
    assert_eq!(seen[1].line, "GET /abs?q=1 HTTP/1.1");
    assert_eq!(seen[1].all("via"), ["1.1 front, 1.1 linerate"]);
}

#[test]
fn a_chunked_request_body_goes_upstream_with_a_content_length_when_buffered() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy_with(&[("/", up.url())], &["--proxy-request-buffering"]);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    // An HTTP/1.0 client's body by length, too.
    c.send(b"PUT /up HTTP/1.0\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(c.read_response().status, 200);
    let seen = up.seen();
    assert_eq!(seen[0].field("content-length"), Some("11"));
    assert_eq!(seen[0].field("transfer-encoding"), None);
    assert_eq!(seen[0].body, b"hello world");
    assert_eq!(seen[1].line, "PUT /up HTTP/1.1");
    assert_eq!(seen[1].field("content-length"), Some("4"));
    assert_eq!(seen[1].all("via"), ["1.0 linerate"]);
    assert_eq!(seen[1].body, b"abcd");
}

#[test]
fn a_body_over_max_body_bytes_is_413_and_never_goes_upstream() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy_with(&[("/", up.url())], &["--max-body-bytes", "1KiB"]);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n");
    c.send(&[b'x'; 2000]);
    assert_eq!(c.read_response().status, 413);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n");
    c.send(&[b'x'; 2000]);
    c.send(b"\r\n0\r\n\r\n");
    assert_eq!(c.read_response().status, 413);
    assert_eq!(Client::connect(px.addr).get("/after").status, 200);
    let targets: Vec<String> = up.seen().iter().map(|g| g.target().to_string()).collect();
    assert_eq!(targets, ["/after"]);
}

#[test]
fn a_buffered_slow_uploader_holds_its_own_connection_and_no_upstream_one() {
    // The body is read whole before the upstream is chosen (nginx's request buffering):
    // while it trickles in, the upstream has seen nothing of it, and other clients are served
    // on the one connection the worker may open (--proxy-max-conns 1).
    let up = Upstream::answering(ok("ok"));
    let px = proxy_with(
        &[("/", up.url())],
        &["--proxy-max-conns", "1", "--proxy-request-buffering"],
    );
    let mut slow = Client::connect(px.addr);
    slow.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 3000\r\n\r\n");
    let body = pattern(3000);
    for piece in body[..2000].chunks(500) {
        slow.send(piece);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(Client::connect(px.addr).get("/meanwhile").status, 200);
    }
    assert!(up.seen().iter().all(|g| g.target() == "/meanwhile"));
    slow.send(&body[2000..]);
    assert_eq!(slow.read_response().status, 200);
    let seen = up.seen();
    let got = seen.iter().find(|g| g.target() == "/upload").unwrap();
    assert_eq!(got.field("content-length"), Some("3000"));
    assert_eq!(got.body, body);
    assert_eq!(
        up.accepted(),
        1,
        "every request took the one pooled connection"
    );
}

#[test]
fn a_chunked_body_goes_up_chunked_as_it_arrives_without_buffering() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy_with(&[("/", up.url())], &["--no-proxy-request-buffering"]);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    // A length body that came whole with its head still goes with its length.
    c.send(b"PUT /up HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(c.read_response().status, 200);
    let seen = up.seen();
    // Framed by us: chunked again (the extension is not passed on), never the client's.
    assert_eq!(seen[0].field("transfer-encoding"), Some("chunked"));
    assert_eq!(seen[0].field("content-length"), None);
    assert_eq!(seen[0].body, b"hello world");
    assert_eq!(seen[1].field("content-length"), Some("4"));
    assert_eq!(seen[1].body, b"abcd");
}

/// An upstream for one connection that the test drives by hand.
fn raw_upstream() -> (TcpListener, String) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let url = http(l.local_addr().unwrap());
    (l, url)
}

/// The next connection to a [`raw_upstream`], waited for at most 10 s.
fn accept(l: &TcpListener) -> TcpStream {
    for _ in 0..1000 {
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return s;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
    panic!("the proxy never connected");
}

/// Reads from `s` until `buf` holds `n` bytes after the head's end; returns the head.
fn read_head_and(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> String {
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n")
            && buf.len() >= end + 4 + n
        {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            buf.drain(..end + 4);
            return head;
        }
        fill(s, buf).expect("the proxy sent less than expected");
    }
}

#[test]
fn without_buffering_a_slow_uploaders_bytes_reach_the_upstream_before_its_body_ends() {
    let (l, url) = raw_upstream();
    let px = proxy_with(&[("/", url)], &["--no-proxy-request-buffering"]);
    let mut c = Client::connect(px.addr);
    let body = pattern(3000);
    c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 3000\r\n\r\n");
    c.send(&body[..1000]);
    // The upstream sees the head and the first 1000 bytes while 2000 are still to come.
    let mut up = accept(&l);
    let mut got = Vec::new();
    let head = read_head_and(&mut up, &mut got, 1000);
    assert!(head.starts_with("POST /upload HTTP/1.1\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-length: 3000\r\n"),
        "{head}"
    );
    c.send(&body[1000..]);
    while got.len() < 3000 {
        fill(&mut up, &mut got).unwrap();
    }
    assert!(got == body, "the body arrived changed");
    up.write_all(&ok("stored")).unwrap();
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"stored");
}

#[test]
fn a_large_upload_to_a_slow_upstream_arrives_whole_through_bounded_room() {
    // 8 MiB against 64 KiB of room between the two connections: the client is read only as
    // the upstream takes the body, many times over, and every byte arrives in order.
    let (l, url) = raw_upstream();
    let px = proxy_with(&[("/", url)], &["--max-body-bytes", "16MiB"]);
    let body = pattern(8 << 20);
    let sender = {
        let body = body.clone();
        let addr = px.addr;
        std::thread::spawn(move || {
            let mut c = Client::connect(addr);
            c.send(
                format!(
                    "POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            c.send(&body);
            c.read_response()
        })
    };
    let mut up = accept(&l);
    let mut got = Vec::new();
    read_head_and(&mut up, &mut got, 0);
    while got.len() < body.len() {
        // A slow reader: small reads with pauses at first.
        if got.len() < 1 << 20 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        fill(&mut up, &mut got).unwrap();
    }
    assert!(got == body, "the body arrived changed");
    up.write_all(&ok("done")).unwrap();
    let r = sender.join().unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn an_upstream_answering_before_the_body_ends_is_passed_on_and_the_connection_goes_on() {
    let (l, url) = raw_upstream();
    let px = proxy_with(&[("/", url.clone())], &["--no-proxy-request-buffering"]);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /early HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    c.send(&pattern(100));
    let mut up = accept(&l);
    let mut got = Vec::new();
    read_head_and(&mut up, &mut got, 100);
    // A refusal before reading the rest, then the upstream closes.
    up.write_all(
        b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!",
    )
    .unwrap();
    drop(up);
    let r = c.read_response();
    assert_eq!(r.status, 413);
    assert_eq!(r.body, b"big!");
    // The rest of the body is read and dropped; the client's connection goes on.
    c.send(&pattern(4900));
    c.send(b"GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
    let mut up = accept(&l);
    let mut got = Vec::new();
    let head = read_head_and(&mut up, &mut got, 0);
    assert!(head.starts_with("GET /after HTTP/1.1\r\n"), "{head}");
    up.write_all(&ok("after")).unwrap();
    assert_eq!(c.read_response().body, b"after");
}

#[test]
fn a_client_that_stops_mid_body_takes_its_upstream_exchange_with_it() {
    let (l, url) = raw_upstream();
    let px = proxy_with(&[("/", url)], &["--no-proxy-request-buffering"]);
    let mut c = Client::connect(px.addr);
    c.send(b"POST /cut HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
    c.send(&pattern(100));
    let mut up = accept(&l);
    let mut got = Vec::new();
    read_head_and(&mut up, &mut got, 100);
    drop(c);
    // The upstream connection is closed: never left waiting for the rest.
    up.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut rest = [0u8; 64];
    match up.read(&mut rest) {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!("{n} more bytes after the client went"),
    }
}

#[test]
fn an_http2_body_goes_up_as_it_arrives_and_whole() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy_with(
        &[("/", up.url())],
        &["--h2c-port", "0", "--no-proxy-request-buffering"],
    );
    let mut c = H2::open(h2c_addr(&px));
    // Over the 64 KiB of room: its window is held until the upstream took the body.
    let body = pattern(300_000);
    let a = c.request(1, "POST", "/h2up", &body);
    assert_eq!(a.field(":status"), Some("200"));
    let seen = up.seen();
    assert_eq!(seen[0].field("transfer-encoding"), Some("chunked"));
    assert!(seen[0].body == body, "the body arrived changed");
}

/// (rule, a request smuggling another behind it). RFC 9112 §6.1, §6.3.
#[rustfmt::skip]
const SMUGGLING: &[(&str, &[u8])] = &[
    ("Content-Length with Transfer-Encoding", b"POST /front HTTP/1.1\r\nHost: t\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"),
    ("two different Content-Lengths", b"POST /front HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nContent-Length: 37\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n"),
];

#[test]
fn smuggling_attempts_are_refused_at_the_edge_and_never_reach_the_upstream() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy(&[("/", up.url())]);
    for (rule, bytes) in SMUGGLING {
        let mut c = Client::connect(px.addr);
        c.send(bytes);
        let r = c.read_response();
        assert_eq!(r.status, 400, "{rule}");
        c.expect_eof();
    }
    // A request after them: once it is seen, anything forwarded before it was seen too.
    assert_eq!(Client::connect(px.addr).get("/after").status, 200);
    let targets: Vec<String> = up.seen().iter().map(|g| g.target().to_string()).collect();
    assert_eq!(targets, ["/after"]);
}

#[test]
fn a_prefix_url_with_a_path_replaces_the_prefix_and_one_without_keeps_it() {
    let up = Upstream::start(|got, s| {
        s.write_all(&ok(got.target())).unwrap();
        Then::Keep
    });
    // (mount URL, request target, target upstream)
    let rows = [
        (format!("{}/", up.url()), "/api/x?q=1", "/x?q=1"),
        (format!("{}/", up.url()), "/api", "/"),
        (format!("{}/v2", up.url()), "/api/x?q=1", "/v2/x?q=1"),
        (up.url(), "/api/x?q=1", "/api/x?q=1"),
        (up.url(), "/api", "/api"),
    ];
    for (url, target, upstream_target) in &rows {
        let px = proxy(&[("/api", url.clone())]);
        let mut c = Client::connect(px.addr);
        let r = c.get(target);
        assert_eq!(
            (r.status, r.text().as_str()),
            (200, *upstream_target),
            "/api={url} {target}"
        );
        // A path that only starts with the prefix's letters is not below it.
        assert_eq!(c.get("/apix/y").status, 404, "/api={url}");
    }
}

/// The path as an origin server resolves it: `%2e` is `.` (RFC 3986 §2.3: unreserved, so
/// equivalent), then the dot segments removed (§5.2.4).
fn resolved(path: &str) -> String {
    let path = path.split('?').next().unwrap();
    let decoded = path.replace("%2e", ".").replace("%2E", ".");
    let mut out: Vec<&str> = Vec::new();
    for seg in decoded.split('/').skip(1) {
        match seg {
            "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    format!("/{}", out.join("/"))
}

#[test]

fn dot_segments_never_take_a_request_out_of_its_mounts_rewritten_path() {
    // `/api=…/v1/` exposes the upstream's /v1 only (nginx merges dot segments before it
    // matches a location and rewrites the normalized path; RFC 3986 §5.2.4).
    let up = Upstream::start(|got, s| {
        s.write_all(&ok(got.target())).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/api", format!("{}/v1/", up.url()))]);
    for target in [
        "/api/../admin",
        "/api/%2e%2e/admin",
        "/api/x/../../admin",
        "/api/..",
    ] {
        let before = up.seen().len();
        let r = Client::connect(px.addr).get(target);
        // Refused here, or sent up inside /v1.
        if let Some(got) = up.seen().get(before) {
            let path = resolved(got.target());
            assert!(
                path == "/v1" || path.starts_with("/v1/"),
                "{target} reached the upstream as {} ({path}), status {}",
                got.target(),
                r.status
            );
        }
    }
}

#[test]

fn a_trailing_slash_after_the_prefix_is_kept_by_a_path_rewrite() {
    let up = Upstream::start(|got, s| {
        s.write_all(&ok(got.target())).unwrap();
        Then::Keep
    });
    for url in [format!("{}/v1/", up.url()), format!("{}/v1", up.url())] {
        let px = proxy(&[("/api", url.clone())]);
        let mut c = Client::connect(px.addr);
        assert_eq!(c.get("/api/x/").text(), "/v1/x/", "/api={url}");
        // The client's slash names the directory, as it does one level down.
        assert_eq!(c.get("/api/").text(), "/v1/", "/api={url}");
    }
}

#[test]

fn an_absolute_form_request_goes_up_with_its_authority_as_host() {
    let up = Upstream::answering(ok("ok"));
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    c.send(b"GET http://other.test/x HTTP/1.1\r\nHost: example.test\r\n\r\n");
    assert_eq!(c.read_response().status, 200);
    let got = &up.seen()[0];
    // RFC 9112 §3.2.2: a proxy MUST generate Host from the target, not forward the field.
    assert_eq!(got.all("host"), ["other.test"], "{got:?}");
    assert_eq!(got.all("x-forwarded-host"), ["other.test"], "{got:?}");
}

#[test]

fn an_http10_request_without_host_goes_up_with_a_host() {
    // The demo (like any strict server) refuses an HTTP/1.1 request without Host.
    let demo = serve(&[]);
    let px = proxy(&[("/", http(demo.addr))]);
    let mut s = connect(px.addr);
    s.write_all(b"GET /plaintext HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    read_until_closed(&mut s, &mut raw);
    // RFC 9112 §3.2: an HTTP/1.1 request MUST carry Host (empty, or the upstream's name,
    // when the client gave none).
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.ends_with("Hello, World!"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// The answer the client receives.

#[test]
fn the_answer_loses_hop_by_hop_fields_and_gets_our_server_and_date() {
    let up = Upstream::answering(
        b"HTTP/1.1 200 OK\r\nServer: upstream/1.0\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
Connection: x-up\r\nX-Up: named-by-connection\r\nKeep-Alive: timeout=1\r\n\
X-Kept: 1\r\nContent-Length: 2\r\n\r\nok"
            .to_vec(),
    );
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    let r = c.get("/x");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    for name in ["connection", "x-up", "keep-alive"] {
        assert_eq!(r.header(name), None, "{name} came through: {:?}", r.headers);
    }
    assert_eq!(r.header("x-kept"), Some("1"));
    assert_eq!(r.header("server"), Some("linerate"));
    assert!(
        !r.header("date").unwrap().contains("1970"),
        "{:?}",
        r.header("date")
    );
    assert_eq!(r.header("via"), Some("1.1 linerate"));
}

#[test]
fn a_chunked_answer_is_chunked_for_http11_and_delimited_by_the_close_for_http10() {
    let body = pattern(200_000);
    let answer = {
        let mut a = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in body.chunks(70_000) {
            a.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            a.extend_from_slice(piece);
            a.extend_from_slice(b"\r\n");
        }
        a.extend_from_slice(b"0\r\n\r\n");
        a
    };
    let up = Upstream::answering(answer);
    let px = proxy(&[("/", up.url())]);

    let mut s = connect(px.addr);
    s.write_all(b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let (end, data) = loop {
        let mut chunk = [0u8; 65536];
        let n = s.read(&mut chunk).expect("the chunked answer");
        assert!(n > 0, "EOF inside the chunked answer");
        raw.extend_from_slice(&chunk[..n]);
        if let Some(p) = find(&raw, b"\r\n\r\n")
            && let (data, Some(used)) = dechunk(&raw[p + 4..])
        {
            break (p + 4 + used, data);
        }
    };
    assert!(data == body, "the HTTP/1.1 body differs");
    assert_eq!(end, raw.len(), "bytes after the last chunk");
    // The connection goes on.
    s.write_all(b"GET /again HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut rest = Vec::new();
    read_until_closed(&mut s, &mut rest);
    assert!(rest.starts_with(b"HTTP/1.1 200"));

    let mut s = connect(px.addr);
    s.write_all(b"GET /c HTTP/1.0\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    read_until_closed(&mut s, &mut raw);
    let end = find(&raw, b"\r\n\r\n").unwrap() + 4;
    let (line, fields) = parse_head(&raw[..end]);
    assert!(line.ends_with("200 OK"), "{line}");
    for name in ["content-length", "transfer-encoding"] {
        assert!(
            !fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)),
            "{name} in an HTTP/1.0 answer of unknown length: {fields:?}"
        );
    }
    assert!(raw[end..] == body[..], "the HTTP/1.0 body differs");
}

#[test]
fn answers_without_a_body_leave_nothing_behind_on_the_connection() {
    let up = Upstream::start(|got, s| {
        let answer: &[u8] = match got.target() {
            // RFC 9110 §9.3.2: a HEAD answer carries GET's fields and no body.
            "/length" => b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
            "/chunked" => b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            // RFC 9110 §15.3.5, §15.4.5.
            "/204" => b"HTTP/1.1 204 No Content\r\n\r\n",
            "/304" => b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        };
        s.write_all(answer).unwrap();
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let mut c = Client::connect(px.addr);
    c.send(b"HEAD /length HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response_opt(true).unwrap();
    assert_eq!((r.status, r.header("content-length")), (200, Some("1234")));
    c.send(b"HEAD /chunked HTTP/1.1\r\nHost: t\r\n\r\n");
    let r = c.read_response_opt(true).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-length"), None);
    assert_eq!(c.get("/204").status, 204);
    let r = c.get("/304");
    assert_eq!((r.status, r.header("etag")), (304, Some("\"x\"")));
    // Had any of them left a byte behind, this answer would be garbled.
    assert_eq!(c.get("/ok").text(), "ok");
}

#[test]
fn a_client_that_reads_nothing_stops_the_upstream_instead_of_filling_memory() {
    // 64 MiB: more than every buffer between the two ends can hold (the client's receive
    // buffer is made small; the proxy's sockets autotune to at most 32 + 4 MiB here), so the
    // upstream's writes stall unless the proxy keeps what its client does not take.
    const LEN: usize = 64 << 20;
    let body = Arc::new(pattern(LEN));
    let (told, stalled) = mpsc::channel::<usize>();
    let told = Mutex::new(told);
    let body_up = body.clone();
    let up = Upstream::start(move |_, s| {
        s.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {LEN}\r\n\r\n").as_bytes())
            .unwrap();
        socket2::SockRef::from(&*s)
            .set_send_buffer_size(64 << 10)
            .unwrap();
        // A write that waits this long has stalled (a slow one only makes the test weaker).
        s.set_write_timeout(Some(std::time::Duration::from_secs(1)))
            .unwrap();
        let (mut at, mut reported) = (0, false);
        while at < LEN {
            match s.write(&body_up[at..]) {
                Ok(n) => at += n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if !reported {
                        reported = true;
                        let _ = told.lock().unwrap().send(at);
                    }
                }
                Err(e) => panic!("upstream write: {e}"),
            }
        }
        if !reported {
            let _ = told.lock().unwrap().send(LEN);
        }
        Then::Keep
    });
    let px = proxy(&[("/", up.url())]);
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(64 << 10).unwrap();
    s.connect(&px.addr.into()).unwrap();
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let written = stalled
        .recv_timeout(common::EVENTUALLY)
        .expect("the upstream stalls or finishes");
    assert!(
        written < LEN,
        "the proxy took the whole 64 MiB answer while its client read nothing"
    );
    // Then the client reads, and all of it arrives.
    let mut raw = Vec::with_capacity(LEN + 4096);
    read_at_least(&mut s, &mut raw, LEN);
    let end = find(&raw, b"\r\n\r\n").unwrap() + 4;
    assert_eq!(raw.len() - end, LEN);
    assert!(raw[end..] == body[..], "the 64 MiB body differs");
}

// ---------------------------------------------------------------------------------------------
// HTTP/2 (h2c, prior knowledge) in front, HTTP/1.1 behind.

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// A frame's bytes (RFC 9113 §4.1).
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Literal fields without indexing, new names, no Huffman (RFC 7541 §6.2.2); every length
/// here is under 127.
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// The static table's names (RFC 7541 Appendix A), index 1 first; of its values only the
/// statuses (8 to 14) can appear in an answer.
const STATIC_NAMES: &str = ":authority :method :method :path :path :scheme :scheme :status \
:status :status :status :status :status :status accept-charset accept-encoding \
accept-language accept-ranges accept access-control-allow-origin age allow authorization \
cache-control content-disposition content-encoding content-language content-length \
content-location content-range content-type cookie date etag expect expires from host \
if-match if-modified-since if-none-match if-range if-unmodified-since last-modified link \
location max-forwards proxy-authenticate proxy-authorization range referer refresh \
retry-after server set-cookie strict-transport-security transfer-encoding user-agent vary \
via www-authenticate";
const STATIC_STATUSES: [&str; 7] = ["200", "204", "206", "304", "400", "404", "500"];

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn hpack_int(b: &[u8], at: &mut usize, n: u32) -> usize {
    let max = (1usize << n) - 1;
    let mut v = b[*at] as usize & max;
    *at += 1;
    if v < max {
        return v;
    }
    let mut shift = 0;
    loop {
        let c = b[*at];
        *at += 1;
        v += ((c & 0x7f) as usize) << shift;
        shift += 7;
        if c & 0x80 == 0 {
            return v;
        }
    }
}

fn hpack_string(b: &[u8], at: &mut usize) -> String {
    assert!(
        b[*at] & 0x80 == 0,
        "a Huffman string: the server sends raw ones"
    );
    let len = hpack_int(b, at, 7);
    let s = String::from_utf8(b[*at..*at + len].to_vec()).unwrap();
    *at += len;
    s
}

/// An answer's header block decoded with the connection's dynamic table (newest first).
fn decode_block(table: &mut Vec<(String, String)>, b: &[u8]) -> Vec<(String, String)> {
    let entry = |table: &[(String, String)], i: usize| -> (String, String) {
        let names: Vec<&str> = STATIC_NAMES.split_whitespace().collect();
        if (1..=names.len()).contains(&i) {
            let value = if (8..=14).contains(&i) {
                STATIC_STATUSES[i - 8]
            } else {
                ""
            };
            return (names[i - 1].to_string(), value.to_string());
        }
        table[i - names.len() - 1].clone()
    };
    let (mut at, mut out) = (0, Vec::new());
    while at < b.len() {
        let first = b[at];
        if first & 0x80 != 0 {
            let i = hpack_int(b, &mut at, 7);
            out.push(entry(table, i));
        } else if first & 0xe0 == 0x20 {
            hpack_int(b, &mut at, 5); // a table size update
        } else {
            let (prefix, index) = if first & 0x40 != 0 {
                (6, true)
            } else {
                (4, false)
            };
            let i = hpack_int(b, &mut at, prefix);
            let name = if i == 0 {
                hpack_string(b, &mut at)
            } else {
                entry(table, i).0
            };
            let value = hpack_string(b, &mut at);
            if index {
                table.insert(0, (name.clone(), value.clone()));
            }
            out.push((name, value));
        }
    }
    out
}

/// The h2c address in a banner.
fn h2c_addr(px: &Served) -> SocketAddr {
    let line = px
        .banner
        .iter()
        .find(|l| l.contains("h2c"))
        .expect("the banner names the h2c listener");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap();
    url.trim_start_matches("http://").parse().unwrap()
}

/// A raw HTTP/2 client connection that opens the window again for every DATA it gets, so
/// an answer of any size arrives.
struct H2 {
    s: TcpStream,
    buf: Vec<u8>,
    table: Vec<(String, String)>,
}

/// How a stream's body ended.
#[derive(Debug, PartialEq, Eq)]
enum H2End {
    /// END_STREAM.
    Whole,
    /// RST_STREAM with this error code.
    Reset(u32),
}

/// An answer on one stream: its fields (`:status` among them) and body.
struct H2Answer {
    fields: Vec<(String, String)>,
    body: Vec<u8>,
}

impl H2Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl H2 {
    fn open(addr: SocketAddr) -> H2 {
        let mut s = connect(addr);
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        s.write_all(&hello).unwrap();
        H2 {
            s,
            buf: Vec::new(),
            table: Vec::new(),
        }
    }

    /// `method path` on `stream` with `body` (DATA frames of at most 16 KiB, the default
    /// maximum); its answer.
    fn request(&mut self, stream: u32, method: &str, path: &str, body: &[u8]) -> H2Answer {
        self.send_request(stream, method, path, body);
        self.answer(stream)
    }

    fn send_request(&mut self, stream: u32, method: &str, path: &str, body: &[u8]) {
        let fields = [
            (":method", method),
            (":scheme", "http"),
            (":authority", "t"),
            (":path", path),
        ];
        let flags = END_HEADERS | if body.is_empty() { END_STREAM } else { 0 };
        let mut out = frame(HEADERS, flags, stream, &block(&fields));
        let pieces: Vec<&[u8]> = body.chunks(16_384).collect();
        for (i, piece) in pieces.iter().enumerate() {
            let last = if i + 1 == pieces.len() { END_STREAM } else { 0 };
            out.extend(frame(DATA, last, stream, piece));
        }
        self.s.write_all(&out).unwrap();
    }

    /// The answer on `stream`, whole (a reset fails the test).
    fn answer(&mut self, stream: u32) -> H2Answer {
        let (fields, ended) = self.head(stream);
        let body = if ended {
            Vec::new()
        } else {
            let (body, end) = self.body(stream);
            assert_eq!(end, H2End::Whole, "the answer on stream {stream} was reset");
            body
        };
        H2Answer { fields, body }
    }

    /// The answer's fields on `stream`, and whether they ended the stream.
    fn head(&mut self, stream: u32) -> (Vec<(String, String)>, bool) {
        let (kind, flags, payload) = self.next_on(stream);
        assert_eq!(
            kind, HEADERS,
            "expected HEADERS on stream {stream}: {payload:?}"
        );
        assert!(flags & END_HEADERS != 0, "the answer's head fits one frame");
        (
            decode_block(&mut self.table, &payload),
            flags & END_STREAM != 0,
        )
    }

    /// The body on `stream` after its head, and how it ended.
    fn body(&mut self, stream: u32) -> (Vec<u8>, H2End) {
        let mut body = Vec::new();
        loop {
            let (kind, flags, payload) = self.next_on(stream);
            match kind {
                DATA => {
                    body.extend_from_slice(&payload);
                    if flags & END_STREAM != 0 {
                        return (body, H2End::Whole);
                    }
                }
                RST_STREAM => {
                    let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
                    return (body, H2End::Reset(code));
                }
                _ => panic!("frame {kind} on stream {stream} inside a body"),
            }
        }
    }

    /// The next frame on `stream`: SETTINGS are acknowledged, DATA's room given back at
    /// once, and the rest of the connection's frames skipped (a GOAWAY fails the test).
    fn next_on(&mut self, stream: u32) -> (u8, u8, Vec<u8>) {
        loop {
            let (kind, flags, id, payload) = self.frame();
            match kind {
                SETTINGS if flags & ACK == 0 => self.send(&frame(SETTINGS, ACK, 0, &[])),
                GOAWAY => panic!("GOAWAY: {payload:?}"),
                DATA if !payload.is_empty() => {
                    let n = (payload.len() as u32).to_be_bytes();
                    let mut more = frame(WINDOW_UPDATE, 0, 0, &n);
                    more.extend(frame(WINDOW_UPDATE, 0, id, &n));
                    self.send(&more);
                }
                _ => {}
            }
            if id == stream && matches!(kind, HEADERS | DATA | RST_STREAM) {
                return (kind, flags, payload);
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// The next frame: (type, flags, stream, payload).
    fn frame(&mut self) -> (u8, u8, u32, Vec<u8>) {
        loop {
            if self.buf.len() >= 9 {
                let b = &self.buf;
                let len = u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize;
                if b.len() >= 9 + len {
                    let id = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
                    let f = (b[3], b[4], id, b[9..9 + len].to_vec());
                    self.buf.drain(..9 + len);
                    return f;
                }
            }
            let mut chunk = [0u8; 65536];
            let n = self.s.read(&mut chunk).expect("a frame");
            assert!(n > 0, "EOF before the answer ended");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[test]
fn an_http2_client_gets_the_demo_through_the_proxy() {
    let demo = serve(&[]);
    let px = proxy_with(&[("/", http(demo.addr))], &["--h2c-port", "0"]);
    let mut c = H2::open(h2c_addr(&px));
    let a = c.request(1, "GET", "/plaintext", b"");
    assert_eq!(a.field(":status"), Some("200"));
    assert_eq!(a.field("via"), Some("1.1 linerate"));
    assert_eq!(a.body, b"Hello, World!");
    // A body in DATA frames goes upstream whole and is echoed.
    let body = pattern(40_000);
    let a = c.request(3, "POST", "/", &body);
    assert_eq!(a.field(":status"), Some("200"));
    assert!(a.body == body, "the echoed body differs");
}

#[test]
fn an_http2_client_gets_large_and_chunked_upstream_answers_whole_under_flow_control() {
    // Larger than the initial 64 KiB window: the DATA go out as the client opens it.
    let big = pattern(500_000);
    let chunked = {
        let mut a = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in big.chunks(100_000) {
            a.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            a.extend_from_slice(piece);
            a.extend_from_slice(b"\r\n");
        }
        a.extend_from_slice(b"0\r\n\r\n");
        a
    };
    let mut by_length =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", big.len()).into_bytes();
    by_length.extend_from_slice(&big);
    let up = Upstream::start(move |got, s| {
        let answer = if got.target() == "/chunked" {
            &chunked
        } else {
            &by_length
        };
        s.write_all(answer).unwrap();
        Then::Keep
    });
    let px = proxy_with(&[("/", up.url())], &["--h2c-port", "0"]);
    let mut c = H2::open(h2c_addr(&px));
    let a = c.request(1, "GET", "/length", b"");
    assert_eq!(a.field(":status"), Some("200"));
    assert_eq!(a.field("content-length"), Some("500000"));
    assert!(a.body == big, "the Content-Length answer differs");
    let a = c.request(3, "GET", "/chunked", b"");
    assert_eq!(a.field(":status"), Some("200"));
    assert!(a.body == big, "the chunked answer differs");
}

#[test]
fn an_upstream_dying_mid_body_resets_the_http2_stream_and_the_connection_goes_on() {
    let (release, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let up = Upstream::start(move |got, s| {
        if got.target() != "/cut" {
            s.write_all(&ok("ok")).unwrap();
            return Then::Keep;
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            .unwrap();
        s.write_all(&[b'a'; 1000]).unwrap();
        let _ = wait.lock().unwrap().recv_timeout(READ_TIMEOUT);
        Then::Close
    });
    let px = proxy_with(&[("/", up.url())], &["--h2c-port", "0"]);
    let mut c = H2::open(h2c_addr(&px));
    c.send_request(1, "GET", "/cut", b"");
    let (fields, ended) = c.head(1);
    assert!(!ended, "{fields:?}");
    assert!(
        fields.contains(&(":status".into(), "200".into())),
        "{fields:?}"
    );
    release.send(()).unwrap();
    // RFC 9113 §8.1: a stream that ends without END_STREAM is incomplete, never whole.
    let (body, end) = c.body(1);
    assert!(matches!(end, H2End::Reset(_)), "{end:?}");
    assert_eq!(body.len(), 1000);
    let a = c.request(3, "GET", "/next", b"");
    assert_eq!(a.field(":status"), Some("200"));
    assert_eq!(a.body, b"ok");
}

// Balancing, from a config file: two scripted servers that say who they are.

/// A proxy in front of `servers` with `balance` lines added to the upstream.
fn proxy_balanced(servers: &[&Upstream], balance: &str, dir: &TempDir) -> Served {
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    let list: Vec<String> = servers.iter().map(|u| format!("\"{}\"", u.addr)).collect();
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{}]\n\
             {balance}\n[[site]]\ndefault = true\napp = \"none\"\n[[site.proxy]]\nprefix = \"/\"\n\
             upstream = \"app\"\n",
            list.join(", ")
        ),
    )
    .unwrap();
    common::bin::serve_as(&["--config", file.to_str().unwrap()])
}

#[test]
fn a_hash_on_a_field_sends_each_key_to_one_server_and_uses_both() {
    let (a, b) = (Upstream::answering(ok("a")), Upstream::answering(ok("b")));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-hash-{}", std::process::id())));
    let proxy = proxy_balanced(
        &[&a, &b],
        "balance = \"hash\"\nhash_key = \"header:X-User\"",
        &dir,
    );
    let mut c = Client::connect(proxy.addr);
    let mut by_user = std::collections::HashMap::new();
    for round in 0..3 {
        // An odd count: round-robin would move every key between rounds.
        for user in 0..15 {
            c.send(format!("GET / HTTP/1.1\r\nHost: t\r\nX-User: u{user}\r\n\r\n").as_bytes());
            let server = c.read_response().text();
            let first = by_user.entry(user).or_insert_with(|| server.clone());
            assert_eq!(*first, server, "user {user} moved in round {round}");
        }
    }
    let used: std::collections::HashSet<_> = by_user.values().collect();
    assert_eq!(used.len(), 2, "15 keys all on one server: {by_user:?}");
}

/// Regression: one malformed answer took its server out for `fail_timeout` with
/// `max_fails = 1`, so a client that could make one path answer badly took healthy servers
/// out one by one. A malformed answer is the client's 502, and no failure of the server's
/// (nginx's default `proxy_next_upstream error timeout`, without `invalid_header`).
#[test]
fn a_client_cannot_take_servers_out_with_a_path_that_answers_malformed() {
    let bad = |name: &'static str| {
        Upstream::start(move |got, s| {
            if got.target() == "/bad" {
                s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
                )
                .unwrap();
                return Then::Close;
            }
            s.write_all(&ok(name)).unwrap();
            Then::Keep
        })
    };
    let (a, b, c) = (bad("a"), bad("b"), bad("c"));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-malformed-{}", std::process::id())),
    );
    let proxy = proxy_balanced(&[&a, &b, &c], "max_fails = 1\nfail_timeout = \"1h\"", &dir);
    let mut client = Client::connect(proxy.addr);
    // The attack: one bad answer from each of two servers (round-robin's first two turns).
    for _ in 0..2 {
        assert_eq!(client.get("/bad").status, 502);
    }
    let served: std::collections::HashSet<String> =
        (0..6).map(|_| client.get("/good").text()).collect();
    assert_eq!(served.len(), 3, "every server still serves: {served:?}");
}

#[test]
fn least_conn_sends_a_request_past_a_server_still_busy_with_one() {
    // Server a holds its first request until told; with it busy, the next requests (from
    // another client) go to b, whatever round-robin would say.
    let (release, hold) = mpsc::channel::<()>();
    let hold = Mutex::new(hold);
    let a = Upstream::start(move |got, s| {
        if got.nth == 0 && got.conn == 0 {
            let _ = hold.lock().unwrap().recv_timeout(READ_TIMEOUT);
        }
        s.write_all(&ok("a")).unwrap();
        Then::Keep
    });
    let b = Upstream::answering(ok("b"));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-lc-{}", std::process::id())));
    let proxy = proxy_balanced(&[&a, &b], "balance = \"least_conn\"", &dir);
    // Round-robin would send the first request to a: so does least_conn (a tie).
    let mut slow = Client::connect(proxy.addr);
    slow.send(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    common::eventually("a has the first request", || a.seen().len() == 1);
    let mut c = Client::connect(proxy.addr);
    for _ in 0..4 {
        assert_eq!(c.get("/").text(), "b", "a is busy: b has fewer in flight");
    }
    release.send(()).unwrap();
    assert_eq!(slow.read_response().text(), "a");
    // Both idle again: a gets its turn.
    let servers: Vec<String> = (0..4).map(|_| c.get("/").text()).collect();
    assert!(servers.iter().any(|s| s == "a"), "{servers:?}");
}

// Observability: per-server metrics on the admin listener, and the upstream in the log.

/// Regression: a template could not name `$upstream_status`, `$scheme`,
/// `$host` or a request field (`$http_NAME`), and a request whose only server refused the
/// connection was not logged at all. Each proxied line names its server, that server's
/// status (the proxy's 502 when none came), its time in seconds with milliseconds, and the
/// fields kept from the request for the answer that came later.
#[test]
fn the_access_log_names_the_upstream_status_and_the_request_fields() {
    let up = Upstream::answering(ok("a"));
    let dead = dead_addr();
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-log-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let log = dir.0.join("access.log");
    // A socket file that is not there: the connection fails before the connect returns.
    let nowhere = format!("unix:{}", dir.0.join("missing.sock").display());
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "access_log = \"{}\"\naccess_log_format = '$request_uri $status $upstream_addr \
             $upstream_status $upstream_response_time $http_x_request_id $scheme $host'\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[upstream]]\nname = \"gone\"\nservers = [\"{dead}\"]\n\
             [[upstream]]\nname = \"nowhere\"\nservers = [\"{nowhere}\"]\n\
             [[site]]\nnames = [\"app.test\"]\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/gone/\"\nupstream = \"gone\"\n\
             [[site.proxy]]\nprefix = \"/nowhere/\"\nupstream = \"nowhere\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            log.display(),
            up.addr
        ),
    )
    .unwrap();
    let mut proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(proxy.addr);
    c.send(b"GET /x HTTP/1.1\r\nHost: App.Test:81\r\nX-Request-ID: q-1\r\n\r\n");
    assert_eq!(c.read_response().text(), "a");
    c.send(b"GET /gone/y HTTP/1.1\r\nHost: app.test\r\n\r\n");
    assert_eq!(c.read_response().status, 502);
    c.send(b"GET /nowhere/z HTTP/1.1\r\nHost: app.test\r\n\r\n");
    assert_eq!(c.read_response().status, 502);
    // Stopped gracefully, the server writes every line before it exits.
    common::bin::signal(&proxy.child, rustix::process::Signal::TERM);
    assert!(common::bin::wait_exit(&mut proxy.child, common::EVENTUALLY).success());
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 3, "{text}");
    let (live, gone) = (up.addr.to_string(), dead.to_string());
    for (line, want) in lines.iter().zip([
        ["/x", "200", &live, "200", "q-1", "http", "app.test"],
        ["/gone/y", "502", &gone, "502", "-", "http", "app.test"],
        [
            "/nowhere/z",
            "502",
            &nowhere,
            "502",
            "-",
            "http",
            "app.test",
        ],
    ]) {
        // Seconds with milliseconds, as nginx writes them.
        let time = line[4];
        assert!(
            time.len() >= 5
                && time.split_once('.').is_some_and(|(s, ms)| !s.is_empty()
                    && ms.len() == 3
                    && (s.to_string() + ms).bytes().all(|b| b.is_ascii_digit())),
            "{text}"
        );
        let rest: Vec<&str> = line[..4].iter().chain(&line[5..]).copied().collect();
        assert_eq!(rest, want, "{text}");
    }
}

#[test]
fn upstream_servers_have_their_own_metrics_and_the_log_names_the_server() {
    let up = Upstream::answering(ok("a"));
    let dead = dead_addr();
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-obs-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let admin = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let log = dir.0.join("access.log");
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "access_log = \"{}\"\naccess_log_format = \"json\"\n[admin]\naddr = \"{admin}\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\n\
             servers = [\"{}\", \"{dead}\"]\ntries = 2\nmax_fails = 1\n[[site]]\ndefault = true\n\
             app = \"none\"\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            log.display(),
            up.addr
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(proxy.addr);
    for _ in 0..6 {
        assert_eq!(c.get("/x").text(), "a");
    }
    let (live, gone) = (up.addr.to_string(), dead.to_string());
    let mut scrape = None;
    common::eventually("the scrape counts six answers", || {
        let parsed = scrape_metrics(admin);
        let done = metric(
            &parsed,
            "linerate_upstream_requests_total",
            &[("server", &live), ("class", "2xx")],
        ) == 6.0;
        scrape = Some(parsed);
        done
    });
    let scrape = scrape.unwrap();
    let at = |name: &str, server: &str, extra: &[(&str, &str)]| {
        let mut labels = vec![("upstream", "app"), ("server", server)];
        labels.extend_from_slice(extra);
        metric(&scrape, name, &labels)
    };
    assert_eq!(
        at(
            "linerate_upstream_requests_total",
            &gone,
            &[("class", "2xx")]
        ),
        0.0
    );
    // The dead server was tried once (round-robin's turn), refused, and taken out.
    assert_eq!(
        at(
            "linerate_upstream_errors_total",
            &gone,
            &[("cause", "connect")]
        ),
        1.0
    );
    assert_eq!(
        at(
            "linerate_upstream_errors_total",
            &live,
            &[("cause", "connect")]
        ),
        0.0
    );
    assert_eq!(at("linerate_upstream_down", &gone, &[]), 1.0);
    assert_eq!(at("linerate_upstream_down", &live, &[]), 0.0);
    assert_eq!(
        at("linerate_upstream_connections", &live, &[("state", "idle")]),
        1.0
    );
    assert_eq!(
        at(
            "linerate_upstream_connections",
            &live,
            &[("state", "active")]
        ),
        0.0
    );
    assert_eq!(
        at("linerate_upstream_duration_seconds_count", &live, &[]),
        6.0
    );

    let mut lines = Vec::new();
    common::eventually("six lines logged", || {
        lines = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
            .collect();
        lines.len() == 6
    });
    for l in &lines {
        assert_eq!(l["status"], 200);
        assert_eq!(l["upstream_addr"], live.as_str(), "{l}");
        assert!(l["upstream_time_us"].as_u64().is_some(), "{l}");
    }
}

/// Regression: passive health logged the upstream without the server, active checks
/// the server without the upstream. Both name both.
#[test]
fn passive_and_active_health_log_the_upstream_and_the_server() {
    let (dead_p, dead_p2, dead_a) = (dead_addr(), dead_addr(), dead_addr());
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-hlog-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    // "p" has passive health only, "a" active checks only: each line comes from one of them.
    // "p" has two servers: passive health never takes out the last one in the rotation, so
    // the first to fail (the first picked, round-robin) is what goes out and is logged.
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"p\"\nservers = [\"{dead_p}\", \"{dead_p2}\"]\ntries = 1\nmax_fails = 1\n\
             [[upstream]]\nname = \"a\"\nservers = [\"{dead_a}\"]\nmax_fails = 0\n\
             health_check = {{ path = \"/health\", interval = \"50ms\", fails = 1 }}\n\
             [[site]]\ndefault = true\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/p\"\nupstream = \"p\"\n\
             [[site.proxy]]\nprefix = \"/a\"\nupstream = \"a\"\n"
        ),
    )
    .unwrap();
    let mut child = common::bin::serve_config_logged(&file);
    let stderr = std::io::BufReader::new(child.0.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stderr) {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let banner = common::bin::banner(&mut child.0).expect("the server starts");
    let addr: SocketAddr = banner[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .expect("banner has the URL")
        .parse()
        .unwrap();
    assert_eq!(Client::connect(addr).get("/p").status, 502);
    let (mut passive, mut active) = (None, None);
    while passive.is_none() || active.is_none() {
        let line = rx
            .recv_timeout(common::EVENTUALLY)
            .unwrap_or_else(|e| panic!("no health line ({e}): {passive:?} {active:?}"));
        if line.contains("passive health") {
            passive = Some(line);
        } else if line.contains("active health check failed") {
            active = Some(line);
        }
    }
    let (passive, active) = (passive.unwrap(), active.unwrap());
    assert!(
        passive.contains("upstream=p") && passive.contains(&format!("server={dead_p}")),
        "{passive}"
    );
    assert!(
        active.contains("upstream=a") && active.contains(&format!("server={dead_a}")),
        "{active}"
    );
}

/// The admin listener's `/metrics`, parsed.
fn scrape_metrics(admin: SocketAddr) -> prometheus_parse::Scrape {
    let mut s = TcpStream::connect(admin).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let body = out.split_once("\r\n\r\n").unwrap().1.to_string();
    prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string())))
        .expect("valid exposition")
}

/// Regression: every `linerate_upstream_*` counter and histogram went back to 0 on
/// SIGHUP, even for a server the new file still names (site counters survived).
#[test]
fn a_reload_keeps_the_counts_of_an_upstream_server_that_is_still_there() {
    let (a, b) = (Upstream::answering(ok("a")), Upstream::answering(ok("b")));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-hup-metrics-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let admin = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let file = dir.0.join("linerate.toml");
    let write = |servers: &[&Upstream]| {
        let list: Vec<String> = servers.iter().map(|u| format!("\"{}\"", u.addr)).collect();
        std::fs::write(
            &file,
            format!(
                "[admin]\naddr = \"{admin}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n\
                 [[upstream]]\nname = \"app\"\nservers = [{}]\n\
                 [[site]]\ndefault = true\napp = \"none\"\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
                list.join(", ")
            ),
        )
        .unwrap();
    };
    write(&[&a]);
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(px.addr);
    for _ in 0..3 {
        assert_eq!(c.get("/").text(), "a");
    }
    // The same server, and a second one: b answering shows the new file is in use.
    write(&[&a, &b]);
    common::bin::signal(&px.child, rustix::process::Signal::HUP);
    common::eventually("b joins", || c.get("/").text() == "b");
    let live = a.addr.to_string();
    let answered = a.seen().len() as f64;
    assert!(answered >= 3.0);
    let mut scrape = None;
    common::eventually("every answer of a counted", || {
        let s = scrape_metrics(admin);
        let done = metric(
            &s,
            "linerate_upstream_duration_seconds_count",
            &[("server", &live)],
        ) == answered;
        scrape = Some(s);
        done
    });
    let scrape = scrape.unwrap();
    assert_eq!(
        metric(
            &scrape,
            "linerate_upstream_requests_total",
            &[("server", &live), ("class", "2xx")]
        ),
        answered,
        "a's answers before the reload are still counted"
    );
}

/// The value of `name` with exactly these labels.
fn metric(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let want: Vec<(&str, &str)> = if labels.iter().any(|(k, _)| *k == "upstream") {
        labels.to_vec()
    } else {
        [&[("upstream", "app")], labels].concat()
    };
    scrape
        .samples
        .iter()
        .find(|s| {
            s.metric == name
                && s.labels.len() == want.len()
                && want.iter().all(|(k, v)| s.labels.get(k) == Some(v))
        })
        .map_or(f64::NAN, |s| match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            _ => f64::NAN,
        })
}

// Forward auth: a check per request against an auth upstream before forwarding.

fn proxy_with_auth(app: &Upstream, auth: SocketAddr, dir: &TempDir) -> Served {
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[upstream]]\nname = \"jwt\"\nservers = [\"{auth}\"]\ntries = 1\n\
             [[site]]\ndefault = true\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/api\"\nupstream = \"app\"\n\
             auth = {{ upstream = \"jwt\", path = \"/verify\", pass = [\"Authorization\"], copy = [\"X-User-Id\"] }}\n",
            app.addr
        ),
    )
    .unwrap();
    common::bin::serve_as(&["--config", file.to_str().unwrap()])
}

#[test]
fn forward_auth_checks_every_request_and_passes_only_what_it_allows() {
    let app = Upstream::answering(ok("from app"));
    let auth = Upstream::start(|got, s| {
        let token = got
            .fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.as_str());
        let answer: &[u8] = match token {
            Some("Bearer good") => b"HTTP/1.1 200 OK\r\nX-User-Id: 7\r\nContent-Length: 2\r\n\r\nok",
            Some("Bearer weird") => b"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n",
            _ => b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 6\r\n\r\nno way",
        };
        s.write_all(answer).unwrap();
        Then::Keep
    });
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-auth-{}", std::process::id())));
    let proxy = proxy_with_auth(&app, auth.addr, &dir);
    let mut c = Client::connect(proxy.addr);

    // Allowed: the answer's X-User-Id reaches the app, never the client's own.
    for _ in 0..3 {
        c.send(b"GET /api/me?x=1 HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer good\r\nX-User-Id: 1\r\n\r\n");
        let r = c.read_response();
        assert_eq!((r.status, r.text().as_str()), (200, "from app"));
    }
    let seen = app.seen();
    assert_eq!(seen.len(), 3);
    for got in &seen {
        let ids: Vec<&str> = got
            .fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("x-user-id"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(ids, ["7"], "{:?}", got.fields);
        assert_eq!(got.line, "GET /api/me?x=1 HTTP/1.1");
    }
    let checks = auth.seen();
    assert_eq!(checks.len(), 3, "every request is checked, nothing cached");
    let field = |g: &Got, name: &str| {
        g.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(checks[0].line, "GET /verify HTTP/1.1");
    assert_eq!(
        field(&checks[0], "x-forwarded-uri").as_deref(),
        Some("/api/me?x=1")
    );
    assert_eq!(
        field(&checks[0], "x-forwarded-method").as_deref(),
        Some("GET")
    );
    assert_eq!(
        field(&checks[0], "x-user-id"),
        None,
        "only the passed fields"
    );

    // Refused: the auth answer is the client's, and the app never hears of it.
    c.send(b"POST /api/orders HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer bad\r\nContent-Length: 3\r\n\r\nabc");
    let r = c.read_response();
    assert_eq!((r.status, r.text().as_str()), (401, "no way"));
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    // Anything else from the auth upstream is a 500.
    c.send(b"GET /api/me HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer weird\r\n\r\n");
    assert_eq!(c.read_response().status, 500);
    assert_eq!(app.seen().len(), 3, "no refused request reached the app");
    // Outside the mount, no check.
    c.send(b"GET /other HTTP/1.1\r\nHost: shop\r\n\r\n");
    assert_eq!(c.read_response().status, 404);
    assert_eq!(auth.seen().len(), 5);
}

#[test]
fn a_reload_that_moves_the_upstreams_sends_a_request_allowed_after_it_to_its_own() {
    // The auth answer of a request comes after a reload that put a new upstream first: the
    // guarded request goes to the app (by name), with the copied field, not to whichever
    // upstream took the app's old place. Before the fix it went to the auth upstream, and
    // the client got the auth's answer.
    let release = Arc::new(AtomicBool::new(false));
    let flag = release.clone();
    let auth = Upstream::start(move |_, s| {
        hold_until(&flag);
        s.write_all(b"HTTP/1.1 200 OK\r\nX-User-Id: 7\r\nContent-Length: 4\r\n\r\nauth")
            .unwrap();
        Then::Keep
    });
    let app = Upstream::answering(ok("app"));
    let other = Upstream::answering(ok("other"));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-auth-hup-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    let write = |first: &str| {
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n{first}\
                 [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
                 [[upstream]]\nname = \"jwt\"\nservers = [\"{}\"]\n\
                 [[site]]\ndefault = true\napp = \"none\"\n\
                 [[site.proxy]]\nprefix = \"/other\"\nupstream = \"{}\"\n\
                 [[site.proxy]]\nprefix = \"/api\"\nupstream = \"app\"\n\
                 auth = {{ upstream = \"jwt\", path = \"/verify\", copy = [\"X-User-Id\"] }}\n",
                app.addr,
                auth.addr,
                if first.is_empty() { "app" } else { "other" },
            ),
        )
        .unwrap();
    };
    write("");
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(px.addr);
    c.send(b"GET /api/me HTTP/1.1\r\nHost: t\r\n\r\n");
    common::eventually("the auth upstream has the check", || auth.seen().len() == 1);
    // The new set: `other` first, so `app` is at the index `jwt` had.
    write(&format!(
        "[[upstream]]\nname = \"other\"\nservers = [\"{}\"]\n",
        other.addr
    ));
    common::bin::signal(&px.child, rustix::process::Signal::HUP);
    let mut probe = Client::connect(px.addr);
    common::eventually("the reload took", || {
        probe.get("/other/x").text() == "other"
    });
    release.store(true, Ordering::SeqCst);
    let r = c.read_response();
    assert_eq!((r.status, r.text()), (200, "app".to_string()));
    let got = app.seen();
    let me: Vec<&Got> = got.iter().filter(|g| g.target() == "/api/me").collect();
    assert_eq!(me.len(), 1, "the guarded request reached the app once");
    assert_eq!(me[0].field("x-user-id"), Some("7"));
    assert_eq!(
        auth.seen().len(),
        1,
        "only the check went to the auth upstream"
    );
}

#[test]
fn a_caching_mount_with_forward_auth_varies_on_the_fields_the_auth_set() {
    // The origin keys its page on the user the auth names (`Vary: X-User-Id`; `public`, as
    // §3.5 asks of an answer to a request with `Authorization`). The cache must
    // read the field the upstream read: before the fix it read the client's request, where
    // the field is absent (or claimed), and gave Alice the page stored for Bob.
    let auth = Upstream::start(|got, s| {
        let user = match got.field("authorization") {
            Some("Bearer bob") => "bob",
            _ => "alice",
        };
        let answer = format!("HTTP/1.1 200 OK\r\nX-User-Id: {user}\r\nContent-Length: 0\r\n\r\n");
        s.write_all(answer.as_bytes()).unwrap();
        Then::Keep
    });
    let app = Upstream::start(|got, s| {
        let body = format!("me:{}", got.field("x-user-id").unwrap_or("-"));
        let answer = format!(
            "HTTP/1.1 200 OK\r\nCache-Control: public, max-age=600\r\nVary: X-User-Id\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(answer.as_bytes()).unwrap();
        Then::Keep
    });
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-auth-cache-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[upstream]]\nname = \"jwt\"\nservers = [\"{}\"]\n\
             [[site]]\ndefault = true\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\ncache = {{ size = \"4MiB\" }}\n\
             auth = {{ upstream = \"jwt\", path = \"/verify\", pass = [\"Authorization\"], copy = [\"X-User-Id\"] }}\n",
            app.addr, auth.addr
        ),
    )
    .unwrap();
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(px.addr);
    let mut me = |fields: &str| {
        c.send(format!("GET /me HTTP/1.1\r\nHost: t\r\n{fields}\r\n").as_bytes());
        c.read_response().text()
    };
    assert_eq!(me("Authorization: Bearer bob\r\n"), "me:bob");
    assert_eq!(me("Authorization: Bearer bob\r\n"), "me:bob");
    assert_eq!(app.seen().len(), 1, "Bob's second is a hit");
    assert_eq!(me("Authorization: Bearer alice\r\n"), "me:alice");
    // A client's own claim is never the key: Alice claiming Bob's id is still Alice.
    assert_eq!(
        me("Authorization: Bearer alice\r\nX-User-Id: bob\r\n"),
        "me:alice"
    );
    assert_eq!(
        app.seen().len(),
        2,
        "Alice's variant, stored once, answered her claim"
    );
}

#[test]
fn forward_auth_that_cannot_be_reached_is_a_500() {
    let app = Upstream::answering(ok("from app"));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-auth-down-{}", std::process::id())),
    );
    let proxy = proxy_with_auth(&app, dead_addr(), &dir);
    let mut c = Client::connect(proxy.addr);
    c.send(b"GET /api/me HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer good\r\n\r\n");
    assert_eq!(c.read_response().status, 500);
    assert!(app.seen().is_empty());
}

#[test]
fn proxy_timeout_flags_set_the_flag_upstreams_timeouts() {
    // Silent until the proxy gives up; with the default 60 s the answer would not come
    // within this test's read timeout.
    let up = Upstream::start(|_, s| {
        let _ = s.read(&mut [0u8; 1]);
        Then::Close
    });
    let proxy = proxy_with(
        &[("/", up.url())],
        &["--proxy-timeout", "200ms", "--proxy-connect-timeout", "1s"],
    );
    let mut c = Client::connect(proxy.addr);
    assert_eq!(c.get("/").status, 504);
    // They belong to --proxy's upstreams: a file says its own.
    let (code, err) = common::bin::run_err(&[
        "serve",
        "--config",
        "/nonexistent.toml",
        "--proxy-timeout",
        "1s",
    ]);
    assert_ne!(code, 0);
    assert!(
        err.contains("--proxy-timeout cannot be combined with --config"),
        "{err}"
    );
}

#[test]
fn pool_flags_bound_and_keep_the_flag_upstreams_connections() {
    // --proxy-keepalive 0: every exchange's connection is closed after it.
    let up = Upstream::answering(ok("k"));
    let proxy = proxy_with(&[("/", up.url())], &["--proxy-keepalive", "0"]);
    let mut c = Client::connect(proxy.addr);
    for _ in 0..3 {
        assert_eq!(c.get("/").text(), "k");
    }
    assert_eq!(up.accepted(), 3);
    common::eventually("the proxy closes every upstream connection", || {
        up.ended().len() == 3
    });

    // --proxy-max-conns 1: eight requests in flight at once share one connection, in turn.
    let up = Upstream::answering(ok("m"));
    let proxy = proxy_with(&[("/", up.url())], &["--proxy-max-conns", "1"]);
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(proxy.addr)).collect();
    for c in &mut clients {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    for c in &mut clients {
        assert_eq!(c.read_response().text(), "m");
    }
    assert_eq!(up.accepted(), 1);
    assert_eq!(up.seen().len(), 8);
    assert!(up.ended().is_empty(), "the one connection stays pooled");
}

#[test]
fn requests_waiting_for_a_connection_go_on_when_the_busy_one_closes() {
    // --proxy-max-conns 1 and an upstream that closes after every answer: the one
    // connection is never given back, so each request in the line needs the room its
    // closing leaves. Before the fix the line waited for a connection that never came.
    let up = Upstream::start(|_, s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close\r\n\r\nc")
            .unwrap();
        Then::Close
    });
    let proxy = proxy_with(&[("/", up.url())], &["--proxy-max-conns", "1"]);
    let mut clients: Vec<Client> = (0..6).map(|_| Client::connect(proxy.addr)).collect();
    for c in &mut clients {
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    }
    for c in &mut clients {
        let r = c.read_response();
        assert_eq!((r.status, r.text()), (200, "c".to_string()));
    }
    assert_eq!(up.seen().len(), 6);
    assert_eq!(up.accepted(), 6, "one connection a request, in turn");
    // The clients' connections go on.
    for c in &mut clients {
        assert_eq!(c.get("/").text(), "c");
    }
}

#[test]
fn a_request_waiting_past_the_connect_timeout_is_503() {
    // The one connection allowed is held by a request the upstream answers late: the next
    // request waits in the line for the connect timeout, then is answered 503, and the
    // held one still gets its answer.
    let release = Arc::new(AtomicBool::new(false));
    let flag = release.clone();
    let up = Upstream::start(move |got, s| {
        if got.target() == "/held" {
            hold_until(&flag);
        }
        s.write_all(&ok(got.target())).unwrap();
        Then::Keep
    });
    let proxy = proxy_with(
        &[("/", up.url())],
        &["--proxy-max-conns", "1", "--proxy-connect-timeout", "300ms"],
    );
    let mut held = Client::connect(proxy.addr);
    held.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
    common::eventually("the upstream has the held request", || up.seen().len() == 1);
    let mut waiting = Client::connect(proxy.addr);
    let r = waiting.get("/waits");
    assert_eq!(r.status, 503);
    assert!(
        !up.seen().iter().any(|g| g.target() == "/waits"),
        "the refused request never went upstream"
    );
    release.store(true, Ordering::SeqCst);
    assert_eq!(held.read_response().text(), "/held");
    // The connection is free again: the refused client's next request goes through.
    assert_eq!(waiting.get("/after").text(), "/after");
}

// Active health checks.

#[test]
fn an_active_check_takes_a_failing_server_out_and_brings_it_back() {
    let healthy = Arc::new(AtomicBool::new(true));
    let flag = healthy.clone();
    let a = Upstream::start(move |got, s| {
        let answer = match got.target() {
            "/health" if flag.load(Ordering::SeqCst) => ok("up"),
            "/health" => b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".to_vec(),
            _ => ok("a"),
        };
        s.write_all(&answer).unwrap();
        Then::Keep
    });
    let b = Upstream::answering(ok("b"));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-hc-{}", std::process::id())));
    let proxy = proxy_balanced(
        &[&a, &b],
        "health_check = { path = \"/health\", interval = \"50ms\", timeout = \"1s\", passes = 2, fails = 1 }",
        &dir,
    );
    let mut c = Client::connect(proxy.addr);
    let answers = |c: &mut Client| (0..6).map(|_| c.get("/").text()).collect::<Vec<_>>();
    common::eventually("the check probes a", || {
        a.seen().iter().any(|g| g.target() == "/health")
    });
    assert!(answers(&mut c).contains(&"a".to_string()));

    healthy.store(false, Ordering::SeqCst);
    common::eventually("a is taken out", || {
        answers(&mut c).iter().all(|s| s == "b")
    });
    let checks_then = a.seen().iter().filter(|g| g.target() == "/health").count();
    assert!(
        answers(&mut c).iter().all(|s| s == "b"),
        "a stays out while it fails"
    );

    healthy.store(true, Ordering::SeqCst);
    common::eventually("a is back after two passes", || {
        answers(&mut c).contains(&"a".to_string())
    });
    assert!(a.seen().iter().filter(|g| g.target() == "/health").count() >= checks_then + 2);
    // Checks are GETs of the path on their own connections, never the clients'.
    assert!(
        a.seen()
            .iter()
            .filter(|g| g.target() == "/health")
            .all(|g| g.line == "GET /health HTTP/1.1")
    );
}

// Scale and reloads.

#[test]
fn a_thousand_clients_share_eight_upstream_connections() {
    let demo = serve(&[]);
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-1000-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             max_conns = 8\nkeepalive = 8\n[[site]]\ndefault = true\napp = \"none\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            demo.addr
        ),
    )
    .unwrap();
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    // Every request is in flight before any answer is read: 992 wait for one of the 8.
    let mut clients: Vec<Client> = (0..1000).map(|_| Client::connect(px.addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(format!("GET /baseline11?a={i}&b=1 HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text()),
            (200, (i + 1).to_string()),
            "client {i}"
        );
    }
    // The demo saw at most 8 connections from the proxy (one worker).
    let conns = std::fs::read_to_string(format!("/proc/{}/net/tcp", demo.child.id()))
        .map(|t| {
            let port = format!(":{:04X} ", demo.addr.port());
            t.lines()
                .filter(|l| {
                    l.split_whitespace()
                        .nth(1)
                        .is_some_and(|a| a.ends_with(port.trim_end()))
                })
                .count()
        })
        .unwrap_or(0);
    assert!(
        conns <= 8 + 1,
        "{conns} sockets on the demo's port (8 at most, and its listener)"
    );
}

#[test]
fn sighup_adds_and_removes_servers_under_load_without_a_failed_request() {
    let (a, b) = (Upstream::answering(ok("a")), Upstream::answering(ok("b")));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-hup-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    let write = |servers: &[&Upstream]| {
        let list: Vec<String> = servers.iter().map(|u| format!("\"{}\"", u.addr)).collect();
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [{}]\n\
                 [[site]]\ndefault = true\napp = \"none\"\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
                list.join(", ")
            ),
        )
        .unwrap();
    };
    write(&[&a]);
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let addr = px.addr;
    let stop = Arc::new(AtomicBool::new(false));
    // Four clients in a loop (bounded in count), counting what each server answered.
    let load: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut seen = Vec::new();
                for _ in 0..20_000 {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let r = c.get("/");
                    assert_eq!(r.status, 200, "a request failed during a reload");
                    seen.push(r.text());
                }
                seen
            })
        })
        .collect();
    let answered_by = |who: &Upstream| who.seen().len();
    common::eventually("load through a", || answered_by(&a) > 100);
    write(&[&a, &b]);
    common::bin::signal(&px.child, rustix::process::Signal::HUP);
    common::eventually("b joins", || answered_by(&b) > 100);
    write(&[&b]);
    common::bin::signal(&px.child, rustix::process::Signal::HUP);
    common::eventually("a leaves", || {
        let before = answered_by(&a);
        let b_before = answered_by(&b);
        std::thread::sleep(std::time::Duration::from_millis(100));
        answered_by(&a) == before && answered_by(&b) > b_before
    });
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for t in load {
        total += t.join().expect("no client saw a failure").len();
    }
    assert!(total > 200, "{total} requests in all");
}

#[test]
fn a_request_waiting_for_its_hashed_server_is_503_after_the_connect_timeout() {
    // Two servers, one connection each, requests hashed on a field: the key's server holds
    // a request; the other server is idle. A second request with that key waits for its
    // server, not the idle one, and is answered 503 once the connect timeout passed in all.
    // Before the fix, every tick that saw room on the idle server sent it back to the
    // line's end with a fresh time: it waited for as long as its server stayed busy.
    let release = Arc::new(AtomicBool::new(false));
    let script = |name: &'static str, flag: Arc<AtomicBool>| {
        move |got: &Got, s: &mut TcpStream| {
            if got.target() == "/held" {
                hold_until(&flag);
            }
            s.write_all(&ok(name)).unwrap();
            Then::Keep
        }
    };
    let a = Upstream::start(script("a", release.clone()));
    let b = Upstream::start(script("b", release.clone()));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-line-hash-{}", std::process::id())),
    );
    let proxy = proxy_balanced(
        &[&a, &b],
        "balance = \"hash\"\nhash_key = \"header:X-K\"\nmax_conns = 1\nconnect_timeout = \"300ms\"",
        &dir,
    );
    let mut held = Client::connect(proxy.addr);
    held.send(b"GET /held HTTP/1.1\r\nHost: t\r\nX-K: one\r\n\r\n");
    common::eventually("a server has the held request", || {
        a.seen().len() + b.seen().len() == 1
    });
    let mut waiting = Client::connect(proxy.addr);
    waiting.send(b"GET /waits HTTP/1.1\r\nHost: t\r\nX-K: one\r\n\r\n");
    assert_eq!(waiting.read_response().status, 503);
    release.store(true, Ordering::SeqCst);
    assert_eq!(held.read_response().status, 200);
    assert!(
        !(a.seen().iter().chain(&b.seen())).any(|g| g.target() == "/waits"),
        "the waiting request went to no server"
    );
}

#[test]
fn a_reload_sends_the_requests_waiting_for_a_connection_to_the_new_servers() {
    // max_conns = 1: a request the upstream holds takes the one connection, the next waits
    // in the line. A reload that replaces the upstream's server sends the waiting one to the
    // new server; the held one still gets its answer on its old connection.
    let release = Arc::new(AtomicBool::new(false));
    let flag = release.clone();
    let a = Upstream::start(move |_, s| {
        hold_until(&flag);
        s.write_all(&ok("a")).unwrap();
        Then::Keep
    });
    let b = Upstream::answering(ok("b"));
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-hup-line-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    let write = |server: &Upstream| {
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
                 max_conns = 1\nconnect_timeout = \"30s\"\n[[site]]\ndefault = true\napp = \"none\"\n\
                 [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
                server.addr
            ),
        )
        .unwrap();
    };
    write(&a);
    let px = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut held = Client::connect(px.addr);
    held.send(b"GET /held HTTP/1.1\r\nHost: t\r\n\r\n");
    common::eventually("a has the held request", || a.seen().len() == 1);
    let mut waiting = Client::connect(px.addr);
    waiting.send(b"GET /waits HTTP/1.1\r\nHost: t\r\n\r\n");
    write(&b);
    common::bin::signal(&px.child, rustix::process::Signal::HUP);
    let r = waiting.read_response();
    assert_eq!((r.status, r.text()), (200, "b".to_string()));
    assert!(b.seen().iter().any(|g| g.target() == "/waits"));
    release.store(true, Ordering::SeqCst);
    assert_eq!(held.read_response().text(), "a");
    assert_eq!(a.seen().len(), 1, "only the held request went to a");
}

#[test]
fn an_active_check_takes_out_a_server_that_refuses_connections() {
    let b = Upstream::answering(ok("b"));
    let dead = dead_addr();
    let dir = TempDir(
        std::env::temp_dir().join(format!("linerate-proxy-hc-dead-{}", std::process::id())),
    );
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    // Passive health off (max_fails = 0) and one try: only the active check can keep
    // requests away from the dead server.
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n[[upstream]]\nname = \"app\"\nservers = [\"{dead}\", \"{}\"]\n\
             tries = 1\nmax_fails = 0\n\
             health_check = {{ path = \"/health\", interval = \"50ms\", timeout = \"1s\", fails = 1 }}\n\
             [[site]]\ndefault = true\napp = \"none\"\n[[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            b.addr
        ),
    )
    .unwrap();
    let proxy = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(proxy.addr);
    common::eventually("the dead server is out", || {
        (0..6).all(|_| c.get("/").status == 200)
    });
}

/// A proxy at `/` beside a root at `/static`: the longest prefix wins, as between nginx's
/// `location`s (HttpArena's gateway shape: files from disk, the rest to the application).
#[test]
fn a_longer_static_root_wins_over_a_proxy_mount() {
    let app = Upstream::answering(ok("from app"));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-static-{}", std::process::id())));
    let www = dir.0.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("reset.css"), "body{margin:0}").unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[site]]\ndefault = true\n\
             [[site.root]]\nprefix = \"/static\"\ndir = \"{}\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            app.addr,
            www.display()
        ),
    )
    .unwrap();
    let edge = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(edge.addr);
    let r = c.get("/static/reset.css");
    assert_eq!((r.status, r.text().as_str()), (200, "body{margin:0}"));
    assert_eq!(r.header("content-type"), Some("text/css; charset=utf-8"));
    assert_eq!(
        c.get("/static/missing.css").status,
        404,
        "a root's miss is its own"
    );
    for path in ["/json/50", "/staticx", "/"] {
        let r = c.get(path);
        assert_eq!((r.status, r.text().as_str()), (200, "from app"), "{path}");
    }
    let seen: Vec<String> = app.seen().into_iter().map(|g| g.line).collect();
    assert_eq!(
        seen,
        [
            "GET /json/50 HTTP/1.1",
            "GET /staticx HTTP/1.1",
            "GET / HTTP/1.1"
        ]
    );
}

/// Regression: any `[[site.access]]`, `[[site.rate_limit]]` or `[[site.basic_auth]]`,
/// even on an unrelated prefix, made `%2F` (GitLab's project paths) a 400 for the whole
/// site. It goes up exactly as sent; the rules still hold against every spelling of a path.
#[test]
fn an_encoded_slash_passes_a_site_with_rules_and_the_rules_still_hold() {
    let app = Upstream::answering(ok("from app"));
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-slash-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[site]]\ndefault = true\n\
             [[site.access]]\nprefix = \"/private\"\nrules = [\"deny all\"]\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            app.addr
        ),
    )
    .unwrap();
    let edge = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let mut c = Client::connect(edge.addr);
    for path in ["/projects/group%2Fproject", "/api/v4/projects/a%2fb/issues"] {
        let r = c.get(path);
        assert_eq!((r.status, r.text().as_str()), (200, "from app"), "{path}");
    }
    for path in [
        "/private",
        "/%70rivate",
        "//private",
        "/private%2Fx",
        "/%2Fprivate/x",
        "/x%2F..%2Fprivate",
    ] {
        let r = c.get(path);
        assert!(matches!(r.status, 400 | 403), "{path}: {}", r.status);
    }
    let seen: Vec<String> = app.seen().into_iter().map(|g| g.line).collect();
    assert_eq!(
        seen,
        [
            "GET /projects/group%2Fproject HTTP/1.1",
            "GET /api/v4/projects/a%2fb/issues HTTP/1.1"
        ]
    );
}

/// Regression: proxied answers got none of the site's `[[site.headers]]` (HSTS) and
/// no `Alt-Svc` from a QUIC listener, so an application-only site never sent HSTS and never
/// advertised HTTP/3. Both are on every answer now (the site's field replacing the
/// upstream's, as on static answers), the proxy's own 502 included; a rule with
/// `proxied = false` stays off proxied answers.
#[test]
fn proxied_answers_carry_the_sites_fields_and_alt_svc() {
    let app = Upstream::answering(
        b"HTTP/1.1 200 OK\r\nStrict-Transport-Security: max-age=1\r\nContent-Length: 8\r\n\r\nfrom app"
            .to_vec(),
    );
    let dir =
        TempDir(std::env::temp_dir().join(format!("linerate-proxy-fields-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.0.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.0.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let file = dir.0.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\nquic = true\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\
             [[upstream]]\nname = \"dead\"\nservers = [\"{}\"]\n\
             [[site]]\ndefault = true\n\
             [[site.headers]]\nfields = {{ \"Strict-Transport-Security\" = \"max-age=63072000\" }}\n\
             [[site.headers]]\nprefix = \"/assets/\"\nproxied = false\n\
             fields = {{ \"Cache-Control\" = \"public, max-age=31536000, immutable\" }}\n\
             [[site.proxy]]\nprefix = \"/dead\"\nupstream = \"dead\"\n\
             [[site.proxy]]\nprefix = \"/\"\nupstream = \"app\"\n",
            app.addr,
            dead_addr()
        ),
    )
    .unwrap();
    let edge = common::bin::serve_as(&["--config", file.to_str().unwrap()]);
    let hsts = "max-age=63072000";
    let mut c = Client::connect(edge.addr);
    let r = c.get("/x");
    assert_eq!((r.status, r.text().as_str()), (200, "from app"));
    let all: Vec<&str> = r
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("strict-transport-security"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(all, [hsts], "the site's field replaces the upstream's");
    assert_eq!(
        r.header("alt-svc"),
        None,
        "a plain listener announces nothing"
    );
    let r = c.get("/assets/app.js");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("cache-control"), None, "proxied = false");
    assert_eq!(r.header("strict-transport-security"), Some(hsts));
    let r = c.get("/dead/x");
    assert_eq!(r.status, 502);
    assert_eq!(r.header("strict-transport-security"), Some(hsts));

    // Over the TLS listener with quic, HTTP/1.1 and HTTP/2 both announce HTTP/3.
    let tls: SocketAddr = edge
        .banner
        .iter()
        .find_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("https://"))
        })
        .expect("an https listener in the banner")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let alt_svc = format!("alt-svc: h3=\":{}\"; ma=86400", tls.port());
    for (version, path) in [
        ("--http1.1", "/x"),
        ("--http2", "/x"),
        ("--http2", "/dead/x"),
    ] {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "10",
                "-k",
                "-D",
                "-",
                "-o",
                "/dev/null",
            ])
            .arg(version)
            .arg(format!("https://localhost:{}{path}", tls.port()))
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", tls.port())])
            .output()
            .unwrap();
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        assert!(head.contains(&alt_svc), "{version} {path}: {head}");
        assert!(
            head.contains(&format!("strict-transport-security: {hsts}")),
            "{version} {path}: {head}"
        );
    }
}
