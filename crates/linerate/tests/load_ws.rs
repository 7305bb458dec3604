//! `linerate load --ws`: WebSocket echo round trips against a small raw WebSocket server (one
//! thread per connection, each behaviour chosen by the test) and against `linerate serve`'s own
//! `/ws` echo. Every run is bounded by `--requests` (or `--duration`); every server thread
//! by its socket's read timeout and `LIFETIME`.
#![forbid(unsafe_code)]

mod common;
mod load_common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use load_common::{assert_exact, measure};

/// A test server never lives longer than this.
const LIFETIME: Duration = Duration::from_secs(30);

/// How the raw server answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behavior {
    /// A correct 101; each message echoed in two frames with a ping between them, the
    /// first echo of a connection written one byte at a time.
    Echo,
    /// `404 Not Found` to the upgrade.
    Refuse,
    /// A 101 with a wrong `Sec-WebSocket-Accept`.
    BadAccept,
    /// A correct 101; each echo one byte short.
    Short,
}

#[derive(Default)]
struct Counts {
    messages: AtomicU64,
    pongs: AtomicU64,
    upgrades: AtomicU64,
}

struct Server {
    addr: std::net::SocketAddr,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Server {
    fn start(b: Behavior) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (counts.clone(), stop.clone());
        std::thread::spawn(move || {
            let born = Instant::now();
            while !s.load(Ordering::Relaxed) && born.elapsed() < LIFETIME {
                match l.accept() {
                    Ok((sock, _)) => {
                        let (c, s) = (c.clone(), s.clone());
                        std::thread::spawn(move || serve(sock, b, &c, &s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Server { addr, counts, stop }
    }

    fn url(&self) -> String {
        format!("http://{}/ws", self.addr)
    }
}

/// Reads exactly `n` bytes, or None when the client went away, the test ended or time ran out.
fn read_n(sock: &mut TcpStream, n: usize, stop: &AtomicBool) -> Option<Vec<u8>> {
    let mut out = vec![0; n];
    let mut at = 0;
    while at < n {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        match sock.read(&mut out[at..]) {
            Ok(0) => return None,
            Ok(k) => at += k,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return None,
        }
    }
    Some(out)
}

/// One client frame: (opcode, unmasked payload).
fn read_frame(sock: &mut TcpStream, stop: &AtomicBool) -> Option<(u8, Vec<u8>)> {
    let h = read_n(sock, 2, stop)?;
    assert!(h[1] & 0x80 != 0, "a client frame must be masked");
    let len = match h[1] & 0x7f {
        126 => u16::from_be_bytes(read_n(sock, 2, stop)?.try_into().unwrap()) as usize,
        127 => u64::from_be_bytes(read_n(sock, 8, stop)?.try_into().unwrap()) as usize,
        n => n as usize,
    };
    let mask = read_n(sock, 4, stop)?;
    let mut payload = read_n(sock, len, stop)?;
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    Some((h[0] & 0x0f, payload))
}

fn server_frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![first];
    if payload.len() < 126 {
        out.push(payload.len() as u8);
    } else {
        out.push(126);
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

fn serve(mut sock: TcpStream, b: Behavior, c: &Counts, stop: &AtomicBool) {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let Some(byte) = read_n(&mut sock, 1, stop) else {
            return;
        };
        head.push(byte[0]);
    }
    let text = String::from_utf8(head).unwrap();
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .expect("the upgrade has a key");
    assert!(text.starts_with("GET /ws HTTP/1.1\r\n"), "{text}");
    assert!(text.contains("\r\nUpgrade: websocket\r\n"), "{text}");
    assert!(text.contains("\r\nSec-WebSocket-Version: 13\r\n"), "{text}");
    let accept = match b {
        Behavior::BadAccept => "AAAAAAAAAAAAAAAAAAAAAAAAAAA=".to_string(),
        _ => linerate_load::ws::accept(key.as_bytes()),
    };
    let answer = match b {
        Behavior::Refuse => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
        _ => format!(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
        ),
    };
    if sock.write_all(answer.as_bytes()).is_err() || b != Behavior::Echo && b != Behavior::Short {
        return;
    }
    c.upgrades.fetch_add(1, Ordering::Relaxed);
    let mut first = true;
    while let Some((op, payload)) = read_frame(&mut sock, stop) {
        match op {
            0x1 | 0x2 => {
                c.messages.fetch_add(1, Ordering::Relaxed);
                let out = if b == Behavior::Short {
                    server_frame(0x80 | op, &payload[1..])
                } else {
                    let half = payload.len() / 2;
                    let mut out = server_frame(op, &payload[..half]);
                    out.extend(server_frame(0x89, b"are you there"));
                    out.extend(server_frame(0x80, &payload[half..]));
                    out
                };
                let step = if first { 1 } else { out.len() };
                first = false;
                for piece in out.chunks(step) {
                    if sock.write_all(piece).is_err() {
                        return;
                    }
                }
            }
            0xa => {
                assert_eq!(payload, b"are you there", "a pong echoes its ping");
                c.pongs.fetch_add(1, Ordering::Relaxed);
            }
            other => panic!("unexpected opcode {other}"),
        }
    }
}

#[test]
fn echoes_are_counted_through_fragments_interleaved_pings_and_split_reads() {
    let s = Server::start(Behavior::Echo);
    let url = s.url();
    let r = measure(&[
        "--ws",
        "-t",
        "1",
        "-c",
        "4",
        "-p",
        "3",
        "-n",
        "300",
        "--message-size",
        "200",
        &url,
    ]);
    assert_exact(&r, 300);
    assert_eq!(r.setup.protocol, "WebSocket");
    assert_eq!(r.setup.message.as_deref(), Some("200-byte text"));
    assert_eq!(s.counts.upgrades.load(Ordering::Relaxed), 4);
    // Each answered message was sent once; a pipelined one may be in flight at the end.
    let sent = s.counts.messages.load(Ordering::Relaxed);
    assert!((300..=300 + 4 * 3).contains(&sent), "{sent}");
    // Every echo carried a ping, and each answered echo came after its ping was read.
    assert!(s.counts.pongs.load(Ordering::Relaxed) >= 1);
    assert_eq!(r.runs[0].status_codes.len(), 0, "no status for echoes");
}

#[test]
fn binary_messages_of_4_kib_via_a_ws_url() {
    let s = Server::start(Behavior::Echo);
    let url = format!("ws://{}/ws", s.addr);
    let r = measure(&[
        "-t",
        "1",
        "-c",
        "2",
        "-n",
        "50",
        "--message-size",
        "4KiB",
        "--binary",
        &url,
    ]);
    assert_exact(&r, 50);
    assert_eq!(r.setup.message.as_deref(), Some("4096-byte binary"));
}

#[test]
fn a_refused_upgrade_counts_its_status_and_answers_nothing() {
    let s = Server::start(Behavior::Refuse);
    let url = s.url();
    let r = measure(&["--ws", "-t", "1", "-c", "1", "-d", "300ms", &url]);
    let run = &r.runs[0];
    assert_eq!(run.responses, 0);
    assert!(run.errors.status >= 1, "{:?}", run.errors);
    assert_eq!(run.status_codes.get(&404), Some(&run.errors.status));
    assert_eq!(s.counts.messages.load(Ordering::Relaxed), 0);
}

#[test]
fn a_wrong_accept_is_malformed_and_no_message_is_sent() {
    let s = Server::start(Behavior::BadAccept);
    let url = s.url();
    let r = measure(&["--ws", "-t", "1", "-c", "1", "-d", "300ms", &url]);
    let run = &r.runs[0];
    assert_eq!(run.responses, 0);
    assert!(run.errors.malformed >= 1, "{:?}", run.errors);
    assert_eq!(s.counts.messages.load(Ordering::Relaxed), 0);
}

#[test]
fn an_echo_of_the_wrong_length_is_malformed() {
    let s = Server::start(Behavior::Short);
    let url = s.url();
    let r = measure(&["--ws", "-t", "1", "-c", "1", "-n", "5", &url]);
    let run = &r.runs[0];
    assert_eq!(run.responses, 0);
    assert_eq!(run.errors.malformed, 5, "{:?}", run.errors);
}

#[test]
fn linerate_serves_its_own_load_generator() {
    let served = common::bin::serve(&[]);
    let url = format!("http://{}/ws", served.addr);
    for flags in [
        &["-n", "2000", "-p", "4"][..],
        &["-n", "300", "--message-size", "70000", "--binary"][..],
    ] {
        let mut line = vec!["--ws", "-t", "1", "-c", "8"];
        line.extend_from_slice(flags);
        line.push(&url);
        let n: u64 = flags[1].parse().unwrap();
        assert_exact(&measure(&line), n);
    }
}

#[test]
fn ws_options_are_checked() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--ws", "--http2", "http://127.0.0.1:1/"],
            "--ws cannot be used with --http2",
        ),
        (
            &["--ws", "-b", "x", "http://127.0.0.1:1/"],
            "--ws cannot be used with --body",
        ),
        (
            &["--binary", "http://127.0.0.1:1/"],
            "--binary applies to WebSocket runs only",
        ),
        (
            &["--message-size", "64", "http://127.0.0.1:1/"],
            "--message-size applies to WebSocket",
        ),
        (
            &["--ws", "--message-size", "17MiB", "http://127.0.0.1:1/"],
            "--message-size must be at most",
        ),
        (
            &["--ws", "-H", "Upgrade: h2c", "http://127.0.0.1:1/"],
            "part of the WebSocket upgrade",
        ),
    ];
    for (line, want) in cases {
        let err = linerate_load::Config::from_options(&load_common::args(line))
            .expect_err("refused")
            .to_string();
        assert!(err.contains(want), "{line:?}: {err}");
    }
}
