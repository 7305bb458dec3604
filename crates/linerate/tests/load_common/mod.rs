//! Small test servers on 127.0.0.1:0: one thread per connection, each request answered per a
//! `Behavior`. They count requests (head ends) and connections, and stop on drop or after
//! `SERVER_LIFETIME`, so no test can leave a server running.
#![forbid(unsafe_code)]
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A test server never lives longer than this.
pub const SERVER_LIFETIME: Duration = Duration::from_secs(60);
/// How often blocked server threads look at the stop flag.
const POLL: Duration = Duration::from_millis(20);

pub const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\nContent-Type: text/plain\r\n\r\nHello, World!";
pub const CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8;x=y\r\n, World!\r\n0\r\nTrailer: t\r\n\r\n";

/// How the server answers each request.
#[derive(Clone, Copy, Debug)]
pub enum Behavior {
    /// `OK` for every request.
    Ok,
    /// `CHUNKED`, written `n` bytes at a time.
    ChunkedDribble(usize),
    /// `OK` written one byte at a time.
    OkDribble,
    /// 500 with a body.
    Status500,
    /// Half of `OK`, then close.
    CloseMidResponse,
    /// Never answers.
    Stall,
    /// Garbage instead of a status line.
    Garbage,
    /// `OK`, but the n-th request (counted over the whole server) waits `ms` first.
    StallOnce { nth: u64, ms: u64 },
    /// Every n-th response on a connection carries `Connection: close`, then the server closes.
    CloseEvery(u64),
    /// 404 with a body, for every request.
    NotFound,
    /// `OK`, but every n-th request (counted over the whole server) gets a 404.
    NotFoundEvery(u64),
    /// `OK` for the first n requests (over the whole server); then the server dies: it stops
    /// listening and closes every connection, answering nothing more.
    DieAfter(u64),
}

const NOT_FOUND: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found";

#[derive(Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    /// Request lines seen, for checking `--raw` round-robin.
    pub paths: std::sync::Mutex<Vec<String>>,
}

pub struct Server {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
}

impl Server {
    pub fn start(behavior: Behavior) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counters.clone(), stop.clone());
        std::thread::spawn(move || accept_loop(listener, behavior, c, s));
        Server {
            addr,
            counters,
            stop,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> u64 {
        self.counters.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(
    listener: TcpListener,
    behavior: Behavior,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) {
    let born = Instant::now();
    while !stop.load(Ordering::SeqCst) && born.elapsed() < SERVER_LIFETIME {
        match listener.accept() {
            Ok((sock, _)) => {
                counters.connections.fetch_add(1, Ordering::SeqCst);
                let (c, s) = (counters.clone(), stop.clone());
                std::thread::spawn(move || serve(sock, behavior, c, s, born));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(_) => return,
        }
    }
}

fn serve(
    mut sock: TcpStream,
    behavior: Behavior,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    born: Instant,
) {
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_nodelay(true);
    let _ = sock.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut on_conn = 0u64;
    loop {
        if stop.load(Ordering::SeqCst) || born.elapsed() > SERVER_LIFETIME {
            return;
        }
        let n = match sock.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        };
        pending.extend_from_slice(&buf[..n]);
        let mut out = Vec::new();
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head: Vec<u8> = pending.drain(..end + 4).collect();
            let line = String::from_utf8_lossy(
                &head[..head.iter().position(|&b| b == b'\r').unwrap_or(0)],
            )
            .to_string();
            counters.paths.lock().expect("paths").push(line);
            let nth = counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
            on_conn += 1;
            match behavior {
                Behavior::Ok => out.extend_from_slice(OK),
                Behavior::NotFound => out.extend_from_slice(NOT_FOUND),
                Behavior::NotFoundEvery(k) if nth.is_multiple_of(k) => {
                    out.extend_from_slice(NOT_FOUND)
                }
                Behavior::NotFoundEvery(_) => out.extend_from_slice(OK),
                Behavior::DieAfter(k) if nth > k => {
                    // The accept loop sees the flag and drops the listener; every connection
                    // thread returns, closing its socket.
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                Behavior::DieAfter(_) => out.extend_from_slice(OK),
                Behavior::Status500 => out.extend_from_slice(
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops",
                ),
                Behavior::Garbage => out.extend_from_slice(b"SPDY/9 what\r\n\r\n"),
                Behavior::Stall => {}
                Behavior::CloseMidResponse => {
                    let _ = sock.write_all(&OK[..OK.len() / 2]);
                    return;
                }
                Behavior::ChunkedDribble(step) => dribble(&mut sock, CHUNKED, step),
                Behavior::OkDribble => dribble(&mut sock, OK, 1),
                Behavior::StallOnce { nth: k, ms } => {
                    if nth == k {
                        let _ = sock.write_all(&out);
                        out.clear();
                        std::thread::sleep(Duration::from_millis(ms));
                    }
                    out.extend_from_slice(OK);
                }
                Behavior::CloseEvery(k) => {
                    if on_conn == k {
                        out.extend_from_slice(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        );
                        let _ = sock.write_all(&out);
                        return;
                    }
                    out.extend_from_slice(OK);
                }
            }
        }
        if !out.is_empty() && sock.write_all(&out).is_err() {
            return;
        }
    }
}

fn dribble(sock: &mut TcpStream, bytes: &[u8], step: usize) {
    for piece in bytes.chunks(step) {
        let _ = sock.write_all(piece);
        let _ = sock.flush();
    }
}

/// Builds `LoadOptions` from `linerate load`'s flags, as the binary would.
pub fn args(line: &[&str]) -> linerate_load::LoadOptions {
    linerate::cli::load::options_from(line).expect("valid test command line")
}

/// Parses the command line and runs it, returning the report.
pub fn measure(line: &[&str]) -> linerate_load::Report {
    let cfg = linerate_load::Config::from_options(&args(line)).expect("valid config");
    linerate_load::measure(&cfg).expect("run succeeds")
}

/// Exactly `n` answered requests, no failures, no errors, one latency sample each.
pub fn assert_exact(r: &linerate_load::Report, n: u64) {
    let run = &r.runs[0];
    assert_eq!(run.responses, n, "responses");
    assert_eq!(run.failed, 0, "failed");
    assert_eq!(run.errors.total(), 0, "errors {:?}", run.errors);
    assert_eq!(run.latency.count, n, "latency samples");
}
