//! Fleet-wide rate limits: three `linerate serve` processes sharing one
//! `redis-server` through `[storage] redis`, every request from 127.0.0.1 (one client behind
//! an L4 balancer). A `scope = "fleet"` rule lets the fleet through what one node would; a
//! node rule lets each node through as much. Redis stopped (SIGSTOP): no answer other than
//! 200 and 429, each node applies its local share and says so once; Redis back: fleet mode
//! again. A script Redis forgot (`SCRIPT FLUSH`) is sent again whole. Counts are asserted,
//! never speed: where the rate refills during the test, the bound grows with the time the
//! test took.
//! Servers bind 127.0.0.1 on ports the test picks and are killed by PID when the test ends.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::bin::{BIN, Stopped, banner};
use common::tier::TierServer;
use common::{eventually, free_port};

/// The rule under test: 5 a second, 5 more at once (6 at once in all).
const INTERVAL: Duration = Duration::from_millis(200);
const BURST: u64 = 5;
/// What the fleet lets through at once: GCRA's `burst + 1`.
const AT_ONCE: u64 = BURST + 1;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "linerate-fleet-limit-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One node: its listener, its admin listener, and what it logged.
struct Node {
    _child: Stopped,
    addr: SocketAddr,
    admin: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

fn node(d: &std::path::Path, i: usize, redis: &str, scope: &str) -> Node {
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let file = d.join(format!("node{i}.toml"));
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n\
             [storage]\nredis = \"{redis}\"\nnodes = 3\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[site]]\ndefault = true\napp = \"demo\"\n\
             [[site.rate_limit]]\nprefix = \"/json\"\nrate = \"5r/s\"\nburst = {BURST}\nscope = \"{scope}\"\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--no-pin",
            "--workers",
            "1",
            "--log-level",
            "warn",
            "--config",
        ])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&log);
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            into.lock().unwrap().push(line);
        }
    });
    let lines = banner(&mut child).unwrap_or_else(|l| panic!("node {i} did not start: {l:?}"));
    let addr = lines[0]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .expect("the banner names the URL")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    Node {
        _child: Stopped(child),
        addr,
        admin,
        log,
    }
}

fn fleet(d: &std::path::Path, redis: &str, scope: &str) -> Vec<Node> {
    (0..3).map(|i| node(d, i, redis, scope)).collect()
}

/// The status of one `GET path` on a connection of its own; `None` for anything but an
/// HTTP answer (a refused connection, a reset, a timeout).
fn status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

fn metrics(admin: SocketAddr) -> String {
    let mut s = TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

/// The sample `name{rule="_ /json"}` on a node's admin listener, if it is there.
fn rule_metric(admin: SocketAddr, name: &str) -> Option<u64> {
    let sample = format!("{name}{{rule=\"_ /json\"}} ");
    metrics(admin)
        .lines()
        .find_map(|l| l.strip_prefix(sample.as_str())?.parse().ok())
}

/// `n` requests at once, spread over the nodes: the statuses, and how long they took.
fn at_once(nodes: &[Node], n: usize) -> (Vec<Option<u16>>, Duration) {
    let start = Instant::now();
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let addr = addrs[i % addrs.len()];
            std::thread::spawn(move || status(addr, "/json"))
        })
        .collect();
    let statuses = threads.into_iter().map(|t| t.join().unwrap()).collect();
    (statuses, start.elapsed())
}

fn count(statuses: &[Option<u16>], code: u16) -> u64 {
    statuses.iter().filter(|s| **s == Some(code)).count() as u64
}

/// Tokens the rate adds over `d` (one per interval, and the one under way).
fn refilled(d: Duration) -> u64 {
    (d.as_micros() / INTERVAL.as_micros()) as u64 + 1
}

#[test]
fn a_fleet_rule_lets_a_burst_through_once_across_three_nodes_where_node_rules_let_it_through_on_each()
 {
    let Some(redis) = TierServer::start("redis-server") else {
        return;
    };
    let d = dir("burst");
    let nodes = fleet(&d, &redis.url(), "fleet");
    let (statuses, took) = at_once(&nodes, 60);
    let (ok, limited) = (count(&statuses, 200), count(&statuses, 429));
    eprintln!("fleet rule: {ok} × 200 of 60 at once in {took:?}");
    assert_eq!(ok + limited, 60, "only 200 and 429: {statuses:?}");
    // burst + 1 = 6 at once for the fleet, in leases of (5 + 1) / 3 = 2 tokens; plus what the
    // rate refilled while the test ran; plus, at worst, each node's local share at once (2):
    // what a node lets through while its key's first lease is on its way is charged in Redis
    // only when the ask arrives, and may find the fleet's burst spent by then (seen: 6 alone,
    // up to 10 beside this file's other tests on a busy machine).
    // Fewer, by at most one lease less the token its ask was for on each node: a lease can
    // only under-admit (ratelimit_lease.rs). A node whose local share let a request through
    // and asked, and refused the rest of its requests before the answer came, holds the
    // granted token unused (seen: 5, once in 15 runs with both CPUs busy).
    // Each node alone lets 6 through (below): 18.
    const LOCAL_AT_ONCE: u64 = 2;
    const LEASE: u64 = 2;
    assert!(
        (AT_ONCE - 3 * (LEASE - 1)..=AT_ONCE + refilled(took) + 3 * LOCAL_AT_ONCE).contains(&ok),
        "{ok} × 200 in {took:?}"
    );
    // Each node counts its 429s under the rule's label (the default site `_` and its prefix),
    // and says the rule is counted in Redis.
    let counted: u64 = nodes
        .iter()
        .map(|n| rule_metric(n.admin, "linerate_rate_limited_total").expect("a rule label"))
        .sum();
    assert_eq!(counted, limited);
    for n in &nodes {
        assert_eq!(
            rule_metric(n.admin, "linerate_rate_limit_fleet_mode"),
            Some(1)
        );
    }
    drop(nodes);

    // The same rule on each node alone: 6 per node.
    let nodes = fleet(&d, &redis.url(), "node");
    let (statuses, took) = at_once(&nodes, 60);
    let ok = count(&statuses, 200);
    eprintln!("node rules: {ok} × 200 of 60 at once in {took:?}");
    assert!(
        (3 * AT_ONCE..=3 * (BURST + refilled(took))).contains(&ok),
        "{ok} × 200 in {took:?}"
    );
    let counted: u64 = nodes
        .iter()
        .map(|n| rule_metric(n.admin, "linerate_rate_limited_total").expect("a rule label"))
        .sum();
    assert_eq!(counted, count(&statuses, 429));
    // A node rule has no fleet mode.
    assert_eq!(
        rule_metric(nodes[0].admin, "linerate_rate_limit_fleet_mode"),
        None
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_fleet_rule_holds_the_fleet_to_the_rate_within_ten_percent_over_a_steady_window() {
    let Some(redis) = TierServer::start("redis-server") else {
        return;
    };
    let d = dir("steady");
    let nodes = fleet(&d, &redis.url(), "fleet");
    let addrs: Vec<SocketAddr> = nodes.iter().map(|n| n.addr).collect();
    // A client per node, each a request every 20 ms for 10 s: far more
    // than the rate.
    let window = Duration::from_secs(10);
    let start = Instant::now();
    let threads: Vec<_> = (0..3)
        .map(|i| {
            let addr = addrs[i];
            std::thread::spawn(move || {
                let mut got = Vec::new();
                let mut last = Instant::now();
                for _ in 0..1000 {
                    if start.elapsed() >= window {
                        break;
                    }
                    last = Instant::now();
                    got.push(status(addr, "/json"));
                    std::thread::sleep(Duration::from_millis(20));
                }
                (got, last)
            })
        })
        .collect();
    let mut statuses = Vec::new();
    let mut last = start;
    for t in threads {
        let (got, l) = t.join().unwrap();
        statuses.extend(got);
        last = last.max(l);
    }
    let ok = count(&statuses, 200);
    assert_eq!(
        ok + count(&statuses, 429),
        statuses.len() as u64,
        "{statuses:?}"
    );
    // The window is the time from the first request to the last one sent.
    let span = last - start;
    let allowed = span.as_secs_f64() / INTERVAL.as_secs_f64() + BURST as f64;
    eprintln!(
        "steady: {ok} × 200 of {} over {span:?}; the limit allows {allowed:.1}",
        statuses.len()
    );
    assert!(
        (ok as f64) >= allowed * 0.9 && (ok as f64) <= allowed * 1.1,
        "{ok} × 200 over {span:?}: the limit allows {allowed:.1}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn redis_stopped_makes_each_node_apply_its_local_share_and_say_so_once_then_fleet_mode_again() {
    let Some(redis) = TierServer::start("redis-server") else {
        return;
    };
    let d = dir("outage");
    let nodes = fleet(&d, &redis.url(), "fleet");
    let (statuses, _) = at_once(&nodes, 30);
    assert_eq!(count(&statuses, 200) + count(&statuses, 429), 30);

    // A Redis that takes connections and never answers.
    redis.signal(rustix::process::Signal::STOP);
    let mut errors = Vec::new();
    for n in &nodes {
        eventually("the node falls back to its local share", || {
            let s = status(n.addr, "/json");
            if !matches!(s, Some(200 | 429)) {
                errors.push(s);
            }
            rule_metric(n.admin, "linerate_rate_limit_fleet_mode") == Some(0)
        });
    }
    assert!(
        errors.is_empty(),
        "answers other than 200 and 429: {errors:?}"
    );
    // The local share: 5r/s over 3 nodes, one per 600 ms and 2 at once on each node. Once its
    // bucket has refilled, 20 requests at once on each node let through 2 (and what refilled).
    std::thread::sleep(Duration::from_millis(1300));
    for n in &nodes {
        let (statuses, took) = at_once(std::slice::from_ref(n), 20);
        let ok = count(&statuses, 200);
        assert_eq!(ok + count(&statuses, 429), 20, "{statuses:?}");
        let refilled = (took.as_millis() / 600) as u64 + 1;
        eprintln!("local share: {ok} × 200 of 20 at once in {took:?}");
        assert!(ok >= 2 && ok <= 2 + refilled, "{ok} × 200 in {took:?}");
    }
    let went_down = |n: &Node| {
        n.log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("applies its local share"))
            .count()
    };
    for n in &nodes {
        assert_eq!(went_down(n), 1, "{:?}", n.log.lock().unwrap());
    }

    redis.signal(rustix::process::Signal::CONT);
    for n in &nodes {
        eventually("the node counts in Redis again", || {
            let _ = status(n.addr, "/json");
            rule_metric(n.admin, "linerate_rate_limit_fleet_mode") == Some(1)
        });
        let back = n
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("answers again"))
            .count();
        assert_eq!(back, 1, "{:?}", n.log.lock().unwrap());
        assert_eq!(went_down(n), 1);
    }
    // Counted in Redis again: the fleet's key is there.
    let mut r = TcpStream::connect(("127.0.0.1", redis.port)).unwrap();
    r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    r.write_all(b"*2\r\n$4\r\nKEYS\r\n$13\r\nlinerate:rl:*\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    let k = r.read(&mut buf).unwrap();
    let keys = String::from_utf8_lossy(&buf[..k]);
    assert!(
        keys.contains("linerate:rl:_ /json:200000:5:client:127.0.0.1"),
        "{keys}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// One command to the test's Redis, its reply's bytes.
fn redis_command(port: u16, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    let mut r = TcpStream::connect(("127.0.0.1", port)).unwrap();
    r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    r.write_all(out.as_bytes()).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let k = r.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..k]).into_owned()
}

/// `calls=N` of `cmdstat_NAME` in Redis's `INFO commandstats`.
fn redis_calls(port: u16, name: &str) -> u64 {
    let info = redis_command(port, &["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{name}:calls=")))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_script_redis_forgot_is_sent_again_whole_and_the_fleet_count_goes_on() {
    let Some(redis) = TierServer::start("redis-server") else {
        return;
    };
    let d = dir("noscript");
    let n = node(&d, 0, &redis.url(), "fleet");
    assert_eq!(status(n.addr, "/json"), Some(200));
    eventually("the first lease was asked by EVALSHA", || {
        redis_calls(redis.port, "evalsha") > 0
    });
    assert_eq!(redis_calls(redis.port, "eval"), 0);
    // A failover or an operator empties the script cache.
    assert!(redis_command(redis.port, &["SCRIPT", "FLUSH"]).starts_with("+OK"));
    // Once the leases have expired, the next ask meets NOSCRIPT and goes again as EVAL.
    std::thread::sleep(Duration::from_millis(1100));
    let mut seen = Vec::new();
    eventually("an ask sent again as EVAL", || {
        seen.push(status(n.addr, "/json"));
        redis_calls(redis.port, "eval") > 0
    });
    assert!(
        seen.iter().all(|s| matches!(s, Some(200 | 429))),
        "{seen:?}"
    );
    // Not an outage: still counted in Redis, nothing logged.
    assert_eq!(
        rule_metric(n.admin, "linerate_rate_limit_fleet_mode"),
        Some(1)
    );
    assert!(
        !n.log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("local share")),
        "{:?}",
        n.log.lock().unwrap()
    );
    let _ = std::fs::remove_dir_all(&d);
}
