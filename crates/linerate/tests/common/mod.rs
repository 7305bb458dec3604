//! Test support: start a server on 127.0.0.1 with an OS-chosen port, and a raw-socket client
//! that reads responses framed by Content-Length. Every read has a timeout so no test hangs.
#![allow(dead_code)]

pub mod acme;
pub mod bin;
pub mod bind;
pub mod curl;
pub mod h3;
pub mod pebble;
pub mod tier;

/// A test origin's read of one request head, its empty line included, from `r`; `None` at
/// the end of the connection or on an error (a read timeout among them).
pub fn read_head(r: &mut impl std::io::BufRead) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        let end = line == "\r\n";
        head.push_str(&line);
        if end {
            return Some(head);
        }
    }
}

/// [`read_head`], then the body its Content-Length says (none without one); `None` where the
/// connection ends first.
pub fn read_request(r: &mut impl std::io::BufRead) -> Option<(String, Vec<u8>)> {
    let head = read_head(r)?;
    let len = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// How long [`eventually`] waits before it calls an effect lost: a bound on a hang, far
/// above any real wait (the tests assert that an effect happens, never how fast).
pub const EVENTUALLY: Duration = Duration::from_secs(15);

/// Polls `done` every 20 ms until it holds; panics naming `what` if it never does within
/// [`EVENTUALLY`] (an asynchronous effect: a signal handled, a file revalidated, a log line).
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + EVENTUALLY;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free port on `ip` for a server the test starts: free for TCP and UDP now (bound, then
/// released for the server to take).
///
/// It is taken below the kernel's ephemeral range (32768 and up on Linux), from a run of
/// ports this process walks: a port bound to 0 comes from that range, where any client
/// socket of any test may take it between the check and the server's bind (an ACME test
/// once lost its listener that way). Processes start their walks at different places.
pub fn free_port(ip: &str) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let start = std::process::id().wrapping_mul(2_654_435_761) % SPAN;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let port = (LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        let tcp = std::net::TcpListener::bind((ip, port));
        let udp = std::net::UdpSocket::bind((ip, port));
        if tcp.is_ok() && udp.is_ok() {
            return port;
        }
    }
    panic!("no free port on {ip} between {LOW} and {}", LOW + SPAN)
}

/// A gzip body decoded.
pub fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

/// A br body decoded.
pub fn unbrotli(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(b, 4096)
        .read_to_end(&mut out)
        .expect("valid br");
    out
}

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_server::{Config, Router, Server, ShutdownHandle, StatsHandle};

/// Longest any single read waits.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Running {
    pub addr: SocketAddr,
    pub handle: ShutdownHandle,
    pub stats: StatsHandle,
    pub thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// Graceful shutdown and wait for the workers.
    pub fn stop(mut self) {
        self.handle.shutdown();
        if let Some(t) = self.thread.take() {
            t.join().expect("server thread").expect("server run");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// A one-worker config on 127.0.0.1:0, unpinned (tests share the machine).
pub fn config() -> Config {
    Config {
        addr: "127.0.0.1:0".parse().unwrap(),
        workers: 1,
        pin: false,
        // Clients in tests often stay open until the end of the test: do not wait long for
        // their EOF after a close or on shutdown.
        linger_timeout: Duration::from_millis(200),
        ..Config::default()
    }
}

pub fn start(config: Config, router: Router) -> Running {
    let server = Server::bind(config, router).expect("bind");
    let addr = server.local_addr();
    let handle = server.handle();
    let stats = server.stats();
    let thread = std::thread::spawn(move || server.run());
    Running {
        addr,
        handle,
        stats,
        thread: Some(thread),
    }
}

pub fn start_demo() -> Running {
    start(config(), linerate::demo::router())
}

#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// One read, again where a signal interrupted it (as `read_exact` does): with a read
    /// timeout set, Linux returns EINTR rather than restart the call (signal(7)). One such
    /// read failed in a local `.ci/run` (2026-11-29); which signal it was was not found.
    fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 65536];
        let n = loop {
            match self.stream.read(&mut chunk) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }

    /// Reads one response (`head_only` for responses to HEAD). `None` on a clean EOF before
    /// any byte of it; panics on a reset, a timeout or a truncated response.
    pub fn read_response_opt(&mut self, head_only: bool) -> Option<Resp> {
        let head_end = loop {
            if let Some(p) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            match self.fill() {
                Ok(0) if self.buf.is_empty() => return None,
                Ok(0) => panic!(
                    "EOF inside a response head: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Ok(_) => {}
                Err(e) => panic!(
                    "read failed: {e} (have {:?})",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).expect("ASCII head");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(
            status_line.starts_with("HTTP/1.1 "),
            "status line {status_line:?}"
        );
        let status: u16 = status_line[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(':').expect("field line");
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let len = if head_only || status == 100 || status == 204 || status == 304 {
            0
        } else {
            len
        };
        while self.buf.len() < head_end + len {
            match self.fill() {
                Ok(0) => panic!("EOF inside a response body"),
                Ok(_) => {}
                Err(e) => panic!("read failed in body: {e}"),
            }
        }
        let body = self.buf[head_end..head_end + len].to_vec();
        self.buf.drain(..head_end + len);
        Some(Resp {
            status,
            headers,
            body,
        })
    }

    pub fn read_response(&mut self) -> Resp {
        self.read_response_opt(false).expect("a response, got EOF")
    }

    /// Asserts the server closed the connection cleanly (FIN, not a reset) with no more bytes.
    pub fn expect_eof(&mut self) {
        match self.fill() {
            Ok(0) => assert!(
                self.buf.is_empty(),
                "leftover bytes: {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Ok(_) => panic!("expected EOF, got {:?}", String::from_utf8_lossy(&self.buf)),
            Err(e) => panic!("expected clean EOF, got {e}"),
        }
    }

    /// One request, one response.
    pub fn get(&mut self, path: &str) -> Resp {
        self.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes());
        self.read_response()
    }
}

/// An upstream that answers every request 200 and hands its head to the test.
pub fn recording_upstream() -> (SocketAddr, std::sync::mpsc::Receiver<String>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut r = std::io::BufReader::new(s.try_clone().unwrap());
                let mut w = s;
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push_str(&line);
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let _ = tx.send(head);
                    if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}
