//! `lab cache`'s client against real servers: Debian's redis-server and memcached, each started
//! on a loopback port it picks by `scripts/cache-servers.sh` (and stopped by PID), and against
//! fake servers (one that speaks a little of the meta protocol, one that answers garbage). Where a server is not installed its test prints
//! "NOT RUN: …" and passes (CI installs both: scripts/test-all.sh).

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use linerate_lab::cache::admin;
use linerate_lab::cache::client::{self, Job, Mix, Protocol, Until};
use linerate_lab::cache::keys::{Keys, zipf_cdf};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cache-servers.sh")
}

/// A server started by the script, stopped by PID when dropped.
struct Started {
    pid: String,
    addr: SocketAddr,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", &self.pid]).status();
    }
}

/// Starts `kind` through the script, or says NOT RUN (and gives `None`) where its program is
/// not installed.
fn start(kind: &str, program: &str, args: &[&str]) -> Option<Started> {
    if !linerate_lab::compare::server::on_path(program) {
        println!("NOT RUN: {program} is not installed (scripts/cache-servers.sh install)");
        return None;
    }
    let out = Command::new(script())
        .arg("start")
        .arg(kind)
        .args(args)
        .output()
        .expect("run scripts/cache-servers.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cache-servers.sh start {kind}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    let port: u16 = field("PORT=").parse().unwrap();
    Some(Started {
        pid: field("PID="),
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
    })
}

fn job(addr: SocketAddr, protocol: Protocol, mix: Mix, keys: Keys, until: Until) -> Job {
    Job {
        addr,
        protocol,
        connections: 4,
        pipeline: 8,
        mix,
        keys,
        value: (0..4096)
            .map(|i| b'a' + (i % 23) as u8)
            .collect::<Vec<u8>>()
            .into(),
        until,
        rate: None,
        cpus: Vec::new(),
        seed: 3,
    }
}

const COUNT_LIMIT: Duration = Duration::from_secs(60);

/// Stores 1000 keys, reads them all back as hits, then loads past a small memory limit under
/// Zipf: the server evicts, the cache-aside GETs see misses and hits, and nothing fails but,
/// where `refusals` allows it, the server's own refusal to store at its limit (memcached's
/// `SERVER_ERROR out of memory storing object`, which it answers when the items at its
/// LRU's tail are all in use by other connections: a fact of the server the lab reports,
/// seen on 2 of 20,000 sets at an 8 MB limit), each counted, never lost, and rare.
fn stores_reads_and_evicts(
    kind: &str,
    program: &str,
    protocol: Protocol,
    limit: &[&str],
    refusals: bool,
) {
    let Some(s) = start(kind, program, limit) else {
        return;
    };
    let fill = client::run(&job(
        s.addr,
        protocol,
        Mix::Set,
        Keys::Sequential { next: 0, stride: 1 },
        Until::Count {
            requests: 1000,
            limit: COUNT_LIMIT,
        },
    ))
    .unwrap();
    assert_eq!((fill.stored, fill.errors()), (1000, 0), "{fill:?}");
    assert_eq!(admin::counters(s.addr, protocol).unwrap().items, 1000);
    let read = client::run(&job(
        s.addr,
        protocol,
        Mix::Get,
        Keys::Sequential { next: 0, stride: 1 },
        Until::Count {
            requests: 1000,
            limit: COUNT_LIMIT,
        },
    ))
    .unwrap();
    assert_eq!(
        (read.hits, read.misses, read.errors()),
        (1000, 0, 0),
        "{read:?}"
    );
    assert_eq!(read.latency.len(), 1000, "every reply timed");
    // 20,000 keys of 4 KiB (80 MB) through an 8 MB limit.
    let before = admin::counters(s.addr, protocol).unwrap();
    let aside = client::run(&job(
        s.addr,
        protocol,
        Mix::GetOrSet,
        Keys::Zipf {
            cdf: zipf_cdf(20_000, 0.99),
        },
        Until::Count {
            requests: 20_000,
            limit: COUNT_LIMIT,
        },
    ))
    .unwrap();
    let after = admin::counters(s.addr, protocol).unwrap();
    let refused = if refusals { aside.error_replies } else { 0 };
    assert_eq!(aside.errors(), refused, "{aside:?}");
    if refused > 0 {
        let why = aside.first_error.as_deref().unwrap_or_default();
        assert!(why.contains("out of memory"), "{aside:?}");
        assert!(
            refused * 100 <= aside.misses,
            "more than 1% refused: {aside:?}"
        );
    }
    assert_eq!(aside.hits + aside.misses, 20_000);
    assert_eq!(
        aside.stored + refused,
        aside.misses,
        "each miss was stored, or refused and counted"
    );
    assert!(aside.hits > 0 && aside.misses > 0, "{aside:?}");
    assert!(
        after.evictions > before.evictions,
        "the server evicted at its limit: {before:?} → {after:?}"
    );
}

#[test]
fn redis_stores_reads_and_evicts() {
    stores_reads_and_evicts(
        "redis",
        "redis-server",
        Protocol::Resp,
        &["--maxmemory", "8"],
        false,
    );
}

#[test]
fn redis_with_io_threads_stores_reads_and_evicts() {
    stores_reads_and_evicts(
        "redis",
        "redis-server",
        Protocol::Resp,
        &["--maxmemory", "8", "--io-threads", "2"],
        false,
    );
}

#[test]
fn memcached_stores_reads_and_evicts() {
    stores_reads_and_evicts(
        "memcached",
        "memcached",
        Protocol::Meta,
        &["--memory", "8", "--threads", "2"],
        true,
    );
}

/// A server whose replies cannot be read: each connection is counted as a protocol error and
/// closed, its requests unanswered; the run ends and nothing panics.
#[test]
fn an_unreadable_reply_is_counted_not_a_panic() {
    for (protocol, garbage) in [
        (Protocol::Resp, &b":1\r\n"[..]),
        (Protocol::Resp, b"$5\r\nabcdefgh\r\n"),
        (Protocol::Meta, b"VALUE k 0 1\r\nx\r\nEND\r\n"),
        (Protocol::Meta, b"VA -1\r\n"),
    ] {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut held = Vec::new();
            for _ in 0..2 {
                let (mut c, _) = l.accept().unwrap();
                let mut buf = [0u8; 256];
                let _ = c.read(&mut buf);
                let _ = c.write_all(garbage);
                held.push(c);
            }
            // Held open: the client, not the server, must end the connections.
            std::thread::sleep(Duration::from_millis(500));
        });
        let mut j = job(
            addr,
            protocol,
            Mix::Get,
            Keys::Uniform { n: 10 },
            Until::Elapsed(Duration::from_secs(30)),
        );
        j.connections = 2;
        j.pipeline = 1;
        let o = client::run(&j).unwrap();
        assert_eq!(o.proto_errors, 2, "{protocol:?} {garbage:?}: {o:?}");
        assert_eq!((o.replies, o.io_errors, o.unanswered), (0, 0, 2));
        assert!(
            o.first_error
                .as_deref()
                .unwrap()
                .starts_with("unreadable reply"),
            "{o:?}"
        );
        server.join().unwrap();
    }
}

/// A fake memcached that knows nothing: every `mg` misses (`EN`), every `ms` is stored (`HD`).
/// Serves `conns` connections, each until the client closes it; returns the requests seen.
fn forgetful_memcached(conns: usize) -> (SocketAddr, std::thread::JoinHandle<u64>) {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut handles = Vec::new();
        for _ in 0..conns {
            let (mut c, _) = l.accept().unwrap();
            handles.push(std::thread::spawn(move || {
                let mut seen = 0u64;
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                loop {
                    let n = match c.read(&mut chunk) {
                        Ok(0) | Err(_) => return seen,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let mut out = Vec::new();
                    let mut at = 0;
                    while let Some(end) = buf[at..].windows(2).position(|w| w == b"\r\n") {
                        let line = std::str::from_utf8(&buf[at..at + end]).unwrap().to_string();
                        let words: Vec<&str> = line.split(' ').collect();
                        let take = match words[0] {
                            "mg" => {
                                out.extend_from_slice(b"EN\r\n");
                                end + 2
                            }
                            "ms" => {
                                let size: usize = words[2].parse().unwrap();
                                if buf.len() - at < end + 2 + size + 2 {
                                    break;
                                }
                                out.extend_from_slice(b"HD\r\n");
                                end + 2 + size + 2
                            }
                            other => panic!("unexpected {other}"),
                        };
                        at += take;
                        seen += 1;
                    }
                    buf.drain(..at);
                    if c.write_all(&out).is_err() {
                        return seen;
                    }
                }
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    (addr, h)
}

/// Cache-aside against a cache that never hits: every GET misses and is followed by exactly
/// one SET of its key, the count mode answers exactly the requests asked for, pipelined on
/// several connections, at a fixed rate as in a closed loop.
#[test]
fn cache_aside_sets_once_per_miss_and_counts_exactly() {
    for rate in [None, Some(5000.0)] {
        let (addr, server) = forgetful_memcached(3);
        let mut j = job(
            addr,
            Protocol::Meta,
            Mix::GetOrSet,
            Keys::Uniform { n: 50 },
            Until::Count {
                requests: 500,
                limit: COUNT_LIMIT,
            },
        );
        j.connections = 3;
        j.rate = rate;
        let o = client::run(&j).unwrap();
        assert_eq!(
            (o.hits, o.misses, o.stored),
            (0, 500, 500),
            "{rate:?}: {o:?}"
        );
        assert_eq!((o.replies, o.errors()), (1000, 0), "{rate:?}: {o:?}");
        assert_eq!(o.latency.len(), 1000, "every reply timed");
        assert_eq!(o.hit_ratio(), Some(0.0));
        assert_eq!(
            server.join().unwrap(),
            1000,
            "the server saw each request once"
        );
    }
}
