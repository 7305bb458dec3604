//! `--grpc` end to end: the load engine against a raw h2c gRPC server written here (frames by
//! hand, HPACK literals from linerate-hpack; a thread per connection on 127.0.0.1, an
//! OS-chosen port). The server answers HttpArena's GetSum by its stream's place on the
//! connection, in threes: a good answer (`SumReply { result: 3 }`, `grpc-status: 0`), one with
//! `grpc-status: 13`, and one with the right status but the wrong bytes; it also records what
//! the requests looked like. Every run is bounded by `--requests`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use linerate_load::report::{self, Report};
use linerate_load::{Config, LoadOptions};

/// HttpArena's prebuilt GetSum request: SumRequest { a: 1, b: 2 }, length-prefixed.
const GET_SUM: &[u8] = &[0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02];
/// The good answer's DATA: SumReply { result: 3 }.
const SUM3: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x03];
/// The wrong-bytes answer's DATA: SumReply { result: 4 }.
const SUM4: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x04];
/// How long a connection's reads wait before the server gives it up (bounds the test).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What the server saw of the requests.
#[derive(Debug, Default)]
struct Seen {
    calls: u64,
    /// Each request's header block had content-type: application/grpc and te: trailers, as
    /// literals (the load generator never indexes), and its body was GET_SUM.
    well_formed: u64,
}

struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let (s, st) = (seen.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let mut conns = Vec::new();
        // Bounded: the preflight's connection, the run's, and the stop's wake-up.
        for _ in 0..16 {
            let Ok((sock, _)) = listener.accept() else {
                break;
            };
            if st.load(Ordering::Relaxed) {
                break;
            }
            let seen = s.clone();
            conns.push(std::thread::spawn(move || {
                let _ = serve(sock, &seen);
            }));
        }
        for c in conns {
            let _ = c.join();
        }
    });
    Server {
        addr,
        seen,
        stop,
        thread: Some(thread),
    }
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let l = (payload.len() as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const SETTINGS: u8 = 4;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        linerate_hpack::field(&mut b, n.as_bytes(), v.as_bytes());
    }
    b
}

/// The answer to the connection's `nth` call (0-based) on `stream`: good, grpc-status 13, or
/// the wrong bytes, in turn.
fn answer(out: &mut Vec<u8>, stream: u32, nth: u32) {
    let head = block(&[(":status", "200"), ("content-type", "application/grpc")]);
    frame(out, HEADERS, END_HEADERS, stream, &head);
    let (body, status) = match nth % 3 {
        0 => (SUM3, "0"),
        1 => (SUM3, "13"),
        _ => (SUM4, "0"),
    };
    frame(out, DATA, 0, stream, body);
    let trailers = block(&[("grpc-status", status)]);
    frame(out, HEADERS, END_HEADERS | END_STREAM, stream, &trailers);
}

/// One connection: the preface, SETTINGS both ways, then each call answered once its body
/// has ended. Returns at EOF or on a read error.
fn serve(mut sock: TcpStream, seen: &Mutex<Seen>) -> std::io::Result<()> {
    sock.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut preface = [0u8; 24];
    if sock.read_exact(&mut preface).is_err() {
        // The preflight's connection closes without a word.
        return Ok(());
    }
    assert_eq!(&preface[..], PREFACE);
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    sock.write_all(&out)?;
    let mut calls = 0u32;
    // The open call's header block looked right, by stream.
    let mut head_ok = std::collections::HashMap::new();
    loop {
        let mut h = [0u8; 9];
        match sock.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        let mut p = vec![0u8; len];
        sock.read_exact(&mut p)?;
        let mut out = Vec::new();
        match kind {
            SETTINGS if flags & ACK == 0 => frame(&mut out, SETTINGS, ACK, 0, &[]),
            HEADERS => {
                let want = [
                    block(&[("content-type", "application/grpc")]),
                    block(&[("te", "trailers")]),
                ];
                let ok = want.iter().all(|w| p.windows(w.len()).any(|x| x == &w[..]));
                head_ok.insert(stream, ok);
            }
            DATA if flags & END_STREAM != 0 => {
                let well_formed = head_ok.remove(&stream) == Some(true) && p == GET_SUM;
                let mut s = seen.lock().unwrap();
                s.calls += 1;
                s.well_formed += u64::from(well_formed);
                drop(s);
                answer(&mut out, stream, calls);
                calls += 1;
            }
            _ => {}
        }
        if !out.is_empty() {
            sock.write_all(&out)?;
        }
    }
}

fn body_file(name: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("linerate-load-grpc-{}-{name}", std::process::id()));
    std::fs::write(&p, GET_SUM).unwrap();
    p
}

/// A `--grpc` run of exactly `requests` calls on one connection, `streams` in flight.
fn options(server: &Server, body: &std::path::Path, requests: u64, streams: usize) -> LoadOptions {
    LoadOptions {
        url: format!("http://{}/benchmark.BenchmarkService/GetSum", server.addr),
        grpc: true,
        body_file: Some(body.to_path_buf()),
        connections: 1,
        threads: Some(1),
        streams,
        requests: Some(requests),
        ..LoadOptions::default()
    }
}

fn measure(o: &LoadOptions) -> Report {
    let cfg = Config::from_options(o).expect("valid options");
    linerate_load::measure(&cfg).expect("the run")
}

#[test]
fn grpc_answers_are_counted_by_what_they_carry() {
    let server = start();
    let body = body_file("counted");
    // 30 calls: the server answers 10 good, 10 with grpc-status 13 and 10 with the wrong
    // bytes (SumReply { result: 4 }), all HTTP 200.
    let mut o = options(&server, &body, 30, 4);
    o.expect_body = Some("00 00 00 00 02 08 03".into());
    let r = measure(&o);
    let run = &r.runs[0];
    assert_eq!((run.responses, run.failed), (30, 0), "{run:?}");
    assert_eq!(run.status_codes.get(&200), Some(&30));
    assert_eq!(
        (run.errors.status, run.errors.grpc),
        (0, 20),
        "{:?}",
        run.errors
    );
    let g = run.grpc.as_ref().expect("a gRPC report");
    assert_eq!(g.messages, 30);
    assert_eq!(
        g.failed
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect::<Vec<_>>(),
        [
            ("body bytes not the expected ones", 10),
            ("grpc-status not 0", 10)
        ]
    );
    assert!(r.setup.grpc && r.setup.protocol == "HTTP/2");
    // They fail the run as non-2xx answers do, unless accepted.
    let v = report::verdict(&r, false);
    assert_eq!(v.exit, 1, "{}", v.line);
    assert!(
        v.line.contains("20 of 30 gRPC calls failed gRPC's checks"),
        "{}",
        v.line
    );
    assert_eq!(report::verdict(&r, true).exit, 0);
    // The JSON carries the count.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["runs"][0]["errors"]["grpc"], 20);
    let text = report::run_text(run, 0, 1, false, report::Nouns::of(&r.setup));
    assert!(text.contains("gRPC: 30 messages received"), "{text}");
    assert!(text.contains("grpc 20"), "{text}");

    let seen = server.seen.lock().unwrap();
    assert_eq!((seen.calls, seen.well_formed), (30, 30), "{seen:?}");
    drop(seen);
    let _ = std::fs::remove_file(body);
}

#[test]
fn without_expected_bytes_only_the_status_fails_a_call() {
    let server = start();
    let body = body_file("status-only");
    let r = measure(&options(&server, &body, 9, 2));
    let run = &r.runs[0];
    assert_eq!((run.responses, run.errors.grpc), (9, 3), "{run:?}");
    let _ = std::fs::remove_file(body);
}

#[test]
fn grpc_options_are_refused_in_one_line() {
    let server = start();
    let body = body_file("refused");
    let base = options(&server, &body, 1, 1);
    let cases: [(LoadOptions, &str); 5] = [
        (
            LoadOptions {
                body_file: None,
                ..base.clone()
            },
            "--grpc needs the request message",
        ),
        (
            LoadOptions {
                body_file: None,
                // A protobuf message without gRPC's length prefix.
                body: Some("\u{8}\u{1}\u{10}\u{2}".into()),
                ..base.clone()
            },
            "--body is not whole gRPC messages",
        ),
        (
            LoadOptions {
                expect_body: Some("0g".into()),
                ..base.clone()
            },
            "is not hex bytes",
        ),
        (
            LoadOptions {
                grpc: false,
                expect_body: Some("00".into()),
                ..base.clone()
            },
            "--expect-body applies to gRPC runs only",
        ),
        (
            LoadOptions {
                method: Some("GET".into()),
                ..base.clone()
            },
            "--grpc cannot be used with --method other than POST",
        ),
    ];
    for (o, want) in cases {
        let e = Config::from_options(&o).expect_err(want).to_string();
        assert!(e.contains(want), "{e:?} should say {want:?}");
        assert!(!e.contains('\n'), "{e:?}");
    }
    let _ = std::fs::remove_file(body);
}
