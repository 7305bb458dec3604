//! The second tier against real servers: Debian's `redis-server` and `memcached`, each started
//! by the test on 127.0.0.1 on a port it picks, with a small memory limit and nothing written
//! to disk; "NOT RUN: why" where the program is missing. Fault injection: the server killed
//! mid-run (misses, one outage), restarted (used again), stopped with SIGSTOP (each call
//! bounded by the timeout), full (evicts, sets never refused). Behaviour only: no durations
//! are asserted.

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use linerate_kv::{Cache, Endpoint, Source, Tier, TierConfig};
use rustix::process::{Pid, Signal, kill_process};

/// The timeout the tests give each call: long enough that a loaded CI machine does not turn
/// a live server's answer into a miss, short enough that a stopped server costs little.
const TIMEOUT: Duration = Duration::from_millis(500);
/// The memory limit (MB) of the servers; small, so the eviction test fills it quickly.
const MEMORY_MB: u32 = 4;
/// Bounded waits: tries, and the pause between them.
const TRIES: usize = 400;
const PAUSE: Duration = Duration::from_millis(25);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Engine {
    Redis,
    Memcached,
}

/// A server the test started, stopped by PID when dropped.
struct Server {
    engine: Engine,
    port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

impl Server {
    /// Starts `engine` on a free port, or `None` after a NOT RUN line.
    fn start(engine: Engine, test: &str) -> Option<Server> {
        let program = match engine {
            Engine::Redis => "redis-server",
            Engine::Memcached => "memcached",
        };
        if !installed(program) {
            eprintln!(
                "NOT RUN: {test}: {program} is not installed (scripts/cache-servers.sh install)"
            );
            return None;
        }
        let dir = std::env::temp_dir().join(format!(
            "linerate-kv-{}-{}-{test}",
            std::process::id(),
            program
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Some(Server::run(engine, free_port(), dir))
    }

    fn run(engine: Engine, port: u16, dir: std::path::PathBuf) -> Server {
        let child = spawn(engine, port, &dir);
        let server = Server {
            engine,
            port,
            child,
            dir,
        };
        server.wait_listening();
        server
    }

    fn wait_listening(&self) {
        for _ in 0..TRIES {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(PAUSE);
        }
        panic!("{:?} did not listen on {}", self.engine, self.port);
    }

    fn url(&self) -> String {
        match self.engine {
            Engine::Redis => format!("redis://127.0.0.1:{}", self.port),
            Engine::Memcached => format!("memcached://127.0.0.1:{}", self.port),
        }
    }

    fn config(&self) -> TierConfig {
        let mut c = TierConfig::new(Endpoint::parse(&self.url()).unwrap());
        c.timeout = TIMEOUT;
        c.retry_after = Duration::from_millis(20);
        c
    }

    fn signal(&self, s: Signal) {
        let pid = Pid::from_raw(self.child.id() as i32).unwrap();
        kill_process(pid, s).unwrap();
        if s == Signal::STOP {
            // kill(2) returns before every thread has stopped: a call sent at once could
            // still be answered by one (memcached's workers were, once in CI). Wait until
            // each thread reads as stopped (`T`), bounded.
            let tasks = format!("/proc/{}/task", self.child.id());
            for _ in 0..500 {
                if all_stopped(&tasks) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("{:?} did not stop", self.engine);
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Killed, then started again on the same port (empty).
    fn restart(&mut self) {
        self.kill();
        self.child = spawn(self.engine, self.port, &self.dir);
        self.wait_listening();
    }
}

/// Whether every thread under `tasks` (`/proc/PID/task`) is stopped: its state, the field
/// after the command's closing parenthesis in its `stat`, is `T`.
fn all_stopped(tasks: &str) -> bool {
    let Ok(dir) = std::fs::read_dir(tasks) else {
        return false;
    };
    dir.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("stat")).is_ok_and(|stat| {
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
        })
    })
}

fn spawn(engine: Engine, port: u16, dir: &std::path::Path) -> Child {
    let mut cmd = match engine {
        Engine::Redis => {
            let mut c = Command::new("redis-server");
            c.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
                .args(["--protected-mode", "no", "--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir)
                .args(["--maxmemory", &format!("{MEMORY_MB}mb")])
                .args(["--maxmemory-policy", "allkeys-lru"]);
            c
        }
        Engine::Memcached => {
            let mut c = Command::new("memcached");
            c.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"])
                .args(["-m", &MEMORY_MB.to_string()]);
            // memcached refuses to run as root unless told which user to be.
            if rustix::process::geteuid().is_root() {
                c.args(["-u", "root"]);
            }
            c
        }
    };
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server")
}

impl Drop for Server {
    fn drop(&mut self) {
        // A stopped server would not die of SIGTERM; SIGKILL does.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

const ENGINES: [Engine; 2] = [Engine::Redis, Engine::Memcached];
const LONG: Duration = Duration::from_secs(60);

/// Sets and reads `key` until the tier answers (bounded): it came back.
async fn until_used_again(tier: &Tier, key: &str) -> bool {
    for _ in 0..TRIES {
        if tier.set(key, b"again", LONG).await
            && tier.get(key).await.map(|v| v.1) == Some(b"again".to_vec())
        {
            return true;
        }
        tokio::time::sleep(PAUSE).await;
    }
    false
}

#[test]
fn get_set_delete_and_the_generation() {
    for engine in ENGINES {
        let Some(server) = Server::start(engine, "basics") else {
            continue;
        };
        block_on(async {
            let tier = Tier::start(server.config()).unwrap();
            assert_eq!(tier.get("k").await, None, "{engine:?}");
            assert!(tier.set("k", b"value", LONG).await);
            let (left, v) = tier.get("k").await.unwrap();
            assert_eq!(v, b"value");
            assert!(left <= LONG);
            // The same through the worker loop's entry, which hands the value to a callback.
            for (key, want) in [("k", Some(b"value".to_vec())), ("absent", None)] {
                let (tx, rx) = std::sync::mpsc::channel();
                tier.get_then(key, move |v| tx.send(v).unwrap());
                let got = rx.recv_timeout(LONG).expect("get_then answers");
                assert_eq!(got, want, "{engine:?} {key}");
            }
            // Many keys in one call (the worker's turn): each value in its key's place, a
            // miss where absent, and (memcached) a key it cannot take a miss, never sent.
            for i in 0..40 {
                if i % 3 != 0 {
                    let v = format!("value {i}");
                    assert!(tier.set(&format!("batch{i}"), v.as_bytes(), LONG).await);
                }
            }
            let mut keys: Vec<String> = (0..40).map(|i| format!("batch{i}")).collect();
            keys.push("a b".into());
            let (tx, rx) = std::sync::mpsc::channel();
            tier.get_many_then(keys, move |v| tx.send(v).unwrap());
            let got = rx.recv_timeout(LONG).expect("get_many_then answers");
            assert_eq!(got.len(), 41, "{engine:?}");
            for (i, v) in got[..40].iter().enumerate() {
                let want = (i % 3 != 0).then(|| format!("value {i}").into_bytes());
                assert_eq!(v, &want, "{engine:?} batch{i}");
            }
            if engine == Engine::Memcached {
                assert_eq!(got[40], None);
            }
            let (tx, rx) = std::sync::mpsc::channel();
            tier.get_many_then(Vec::new(), move |v| tx.send(v).unwrap());
            assert_eq!(
                rx.recv_timeout(LONG).unwrap(),
                Vec::<Option<Vec<u8>>>::new()
            );
            assert!(tier.delete("k").await);
            assert!(
                tier.delete("k").await,
                "{engine:?}: deleting a missing key is fine"
            );
            assert_eq!(tier.get("k").await, None);
            // A value past its TTL is a miss, whatever the server's own expiry (whole
            // seconds in memcached).
            assert!(tier.set("short", b"v", Duration::from_millis(1)).await);
            let mut expired = false;
            for _ in 0..TRIES {
                if tier.get("short").await.is_none() {
                    expired = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            assert!(expired, "{engine:?}");
            // A TTL past what the engine takes is capped, not an error (nor an outage).
            assert!(tier.set("forever", b"v", Duration::MAX).await, "{engine:?}");
            assert!(tier.get("forever").await.is_some());
            // The generation: made on first read, one more on each bump.
            let g = tier.generation("ns:gen").await.unwrap();
            assert!(g > 0);
            assert_eq!(tier.generation("ns:gen").await, Some(g));
            assert_eq!(tier.bump_generation("ns:gen").await, Some(g + 1));
            assert_eq!(tier.generation("ns:gen").await, Some(g + 1));
            // A key memcached cannot take is never sent (a space would start a command).
            if engine == Engine::Memcached {
                assert!(!tier.set("a b", b"x", LONG).await);
                assert_eq!(tier.get("a b").await, None);
            }
            let c = tier.counters();
            assert_eq!((c.errors, c.timeouts, c.outages), (0, 0, 0), "{engine:?}");
            assert!(c.sets >= 2 && c.hits >= 1);
            // With nothing failed or skipped, every miss is a real one (the
            // server had nothing): absent and misses agree.
            assert_eq!((c.absent, c.skipped), (c.misses, 0), "{engine:?}: {c:?}");
            assert!(c.absent >= 17, "{engine:?}: {c:?}");
        });
    }
}

#[test]
fn a_killed_server_is_a_miss_logged_once_and_used_again_when_back() {
    for engine in ENGINES {
        let Some(mut server) = Server::start(engine, "killed") else {
            continue;
        };
        block_on(async {
            let tier = Tier::start(server.config()).unwrap();
            assert!(tier.set("k", b"v", LONG).await);
            assert!(tier.get("k").await.is_some());
            let before = tier.counters();
            server.kill();
            // Every call goes on: a miss, not an error and not a hang.
            for i in 0..50 {
                assert_eq!(tier.get("k").await, None, "{engine:?} call {i}");
                assert!(!tier.set("k", b"v", LONG).await);
            }
            let down = tier.counters();
            assert!(!tier.is_up());
            assert_eq!(
                down.outages, 1,
                "{engine:?}: one outage, however many calls: {down:?}"
            );
            assert!(down.errors >= 1 && down.misses >= 50, "{down:?}");
            // None of those misses is a real one (the server had nothing):
            // each was a failed call or one skipped while the tier was down.
            assert_eq!(down.absent, before.absent, "{engine:?}: {down:?}");
            assert!(down.skipped >= 1, "{engine:?}: {down:?}");
            // Back: used again, by itself.
            server.restart();
            assert!(
                until_used_again(&tier, "k2").await,
                "{engine:?} not used again"
            );
            assert!(tier.is_up());
            assert_eq!(tier.counters().outages, 1);
            // Down again: a second outage, logged again.
            server.kill();
            assert_eq!(tier.get("k2").await, None);
            assert_eq!(tier.counters().outages, 2, "{engine:?}");
        });
    }
}

/// Issue 83: two warn lines for one outage, a second apart. A proxy's mounts each start a
/// tier of their own for one server; each kept its own health, so each declared (and
/// counted) the outage. One server, one health: the second handle's call is skipped, not a
/// second outage. No server is needed: nothing listens on the port (refused at once).
#[test]
fn handles_of_one_server_share_its_outage() {
    block_on(async {
        let url = format!("memcached://127.0.0.1:{}", free_port());
        let config = TierConfig::parse(&url).unwrap();
        let (a, b) = (
            Tier::start(config.clone()).unwrap(),
            Tier::start(config).unwrap(),
        );
        assert_eq!(a.get("k").await, None);
        assert!(!a.is_up() && !b.is_up(), "one health");
        assert_eq!(b.get("k").await, None);
        let (ca, cb) = (a.counters(), b.counters());
        assert_eq!((ca.errors, ca.outages), (1, 1), "{ca:?}");
        assert_eq!((cb.errors, cb.skipped, cb.outages), (0, 1, 0), "{cb:?}");
        // Another server is another health.
        let other = format!("memcached://127.0.0.1:{}", free_port());
        assert!(
            Tier::start(TierConfig::parse(&other).unwrap())
                .unwrap()
                .is_up()
        );
    });
}

#[test]
fn a_stopped_server_costs_each_call_the_timeout_not_a_hang() {
    for engine in ENGINES {
        let Some(server) = Server::start(engine, "stopped") else {
            continue;
        };
        block_on(async {
            let tier = Tier::start(server.config()).unwrap();
            assert!(tier.set("k", b"v", LONG).await);
            server.signal(Signal::STOP);
            // The connection is up and the server silent: only the timeout ends these calls
            // (without it this test never finishes). Several in a row are an outage (one
            // late answer on a busy host is not).
            for n in 1..=linerate_kv::health::TIMEOUTS_IN_A_ROW {
                assert_eq!(tier.get("k").await, None, "{engine:?}");
                let c = tier.counters();
                let down = u64::from(n == linerate_kv::health::TIMEOUTS_IN_A_ROW);
                assert_eq!(
                    (c.timeouts, c.outages),
                    (u64::from(n), down),
                    "{engine:?}: {c:?}"
                );
            }
            // Probes time out too, and the rest are skipped meanwhile.
            for _ in 0..5 {
                assert_eq!(tier.get("k").await, None);
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            server.signal(Signal::CONT);
            assert!(
                until_used_again(&tier, "k3").await,
                "{engine:?} not used again"
            );
            assert_eq!(tier.counters().outages, 1);
        });
    }
}

#[test]
fn a_full_server_evicts_and_never_refuses_a_set() {
    // Five times the memory limit, in 10 KiB values.
    let value = vec![b'x'; 10 << 10];
    let n = ((MEMORY_MB as usize * 5) << 20) / value.len();
    for engine in ENGINES {
        let Some(server) = Server::start(engine, "full") else {
            continue;
        };
        block_on(async {
            let tier = Tier::start(server.config()).unwrap();
            for i in 0..n {
                // The counters say why, should one fail: an error (the server refused), a
                // timeout (a loaded machine), or skipped (after one of those).
                assert!(
                    tier.set(&format!("k{i}"), &value, LONG).await,
                    "{engine:?} set {i} refused: {:?}",
                    tier.counters()
                );
            }
            let c = tier.counters();
            assert_eq!(
                (c.sets, c.errors, c.timeouts),
                (n as u64, 0, 0),
                "{engine:?}"
            );
            // The oldest made room; the newest is there.
            assert_eq!(tier.get("k0").await, None, "{engine:?} did not evict");
            assert!(tier.get(&format!("k{}", n - 1)).await.is_some());
        });
    }
}

#[test]
fn two_edges_share_the_tier_and_a_purge_reaches_both() {
    for engine in ENGINES {
        let Some(server) = Server::start(engine, "edges") else {
            continue;
        };
        block_on(async {
            let edge = || {
                Cache::builder("items")
                    .tier(server.config())
                    .generation_refresh(Duration::ZERO)
                    .build()
                    .unwrap()
            };
            let (a, b) = (edge(), edge());
            assert!(b.get("1").await.is_none());
            a.set("1", &b"one"[..], LONG).await;
            // Stored through A, a hit on B from the tier, then from B's memory.
            let hit = b.get("1").await.unwrap();
            assert_eq!(
                (&*hit.value, hit.source),
                (&b"one"[..], Source::Tier),
                "{engine:?}"
            );
            assert_eq!(b.get("1").await.unwrap().source, Source::Memory);
            // A purge on A: B misses (its memory's keys carry the old generation).
            assert!(a.purge().await);
            assert!(
                b.get("1").await.is_none(),
                "{engine:?}: B served a purged value"
            );
            assert!(a.get("1").await.is_none());
            // An invalidation on A reaches the tier (B's memory keeps a copy for at most its
            // memory TTL; here B never had one).
            a.set("2", &b"two"[..], LONG).await;
            assert!(a.invalidate("2").await);
            assert!(b.get("2").await.is_none());
            let s = b.stats();
            assert_eq!((s.tier_hits, s.memory_hits), (1, 1), "{s:?}");
        });
    }
}

#[test]
fn a_cache_whose_tier_is_down_still_answers_from_memory() {
    // A port nothing listens on: refused at once.
    let port = free_port();
    for url in [
        format!("redis://127.0.0.1:{port}"),
        format!("memcached://127.0.0.1:{port}"),
    ] {
        block_on(async {
            let mut config = TierConfig::parse(&url).unwrap();
            config.timeout = TIMEOUT;
            let c = Cache::builder("down").tier(config).build().unwrap();
            assert!(c.get("k").await.is_none());
            c.set("k", &b"v"[..], LONG).await;
            assert_eq!(c.get("k").await.unwrap().source, Source::Memory, "{url}");
            let t = c.tier().unwrap().counters();
            assert_eq!(t.outages, 1, "{url}: {t:?}");
            assert!(
                !c.purge().await,
                "{url}: a purge that did not reach the tier says so"
            );
            assert!(
                c.get("k").await.is_none(),
                "the local memory is purged anyway"
            );
        });
    }
}

/// The hand-written Redis client (`resp`): a password and a database from the URL, values
/// that hold CRLF and NUL or span many reads, and many calls in flight on its one pipelined
/// connection, each given its own reply.
#[test]
fn redis_with_a_password_and_a_database_pipelines_many_calls_each_getting_its_own_reply() {
    if !installed("redis-server") {
        eprintln!(
            "NOT RUN: redis auth: redis-server is not installed (scripts/cache-servers.sh install)"
        );
        return;
    }
    let port = free_port();
    let mut child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--requirepass",
            "s3cr%t",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server");
    let listening = (0..TRIES).any(|_| {
        TcpStream::connect(("127.0.0.1", port)).is_ok() || {
            std::thread::sleep(PAUSE);
            false
        }
    });
    assert!(listening, "redis-server did not listen on {port}");
    let tier_for = |url: String| {
        let mut c = TierConfig::new(Endpoint::parse(&url).unwrap());
        c.timeout = TIMEOUT;
        Tier::start(c).unwrap()
    };
    block_on(async {
        // The password percent-encoded in the URL, as the redis crate reads it.
        let db2 = tier_for(format!("redis://:s3cr%25t@127.0.0.1:{port}/2"));
        let db0 = tier_for(format!("redis://:s3cr%25t@127.0.0.1:{port}"));
        let wrong = tier_for(format!("redis://:nope@127.0.0.1:{port}"));
        let odd = b"line\r\nbreak\0nul\r\n$-1\r\n".to_vec();
        assert!(db2.set("k", &odd, LONG).await);
        assert_eq!(db2.get("k").await.map(|v| v.1), Some(odd));
        // Another database does not see it; a wrong password is a miss and an error.
        assert_eq!(db0.get("k").await, None);
        assert_eq!(wrong.get("k").await, None);
        assert!(wrong.counters().errors >= 1);
        // A value much larger than one read (1 MiB), whole.
        let big: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
        assert!(db2.set("big", &big, LONG).await);
        assert_eq!(db2.get("big").await.map(|v| v.1), Some(big));
        // 500 calls in flight at once: every one gets its own value back.
        let mut calls = tokio::task::JoinSet::new();
        for i in 0..500u32 {
            let t = db2.clone();
            calls.spawn(async move {
                let key = format!("many:{i}");
                let value = format!("value of {i}").repeat(1 + (i % 7) as usize);
                assert!(t.set(&key, value.as_bytes(), LONG).await);
                (t.get(&key).await.map(|v| v.1), value)
            });
        }
        let mut n = 0;
        while let Some(done) = calls.join_next().await {
            let (got, want) = done.unwrap();
            assert_eq!(got.as_deref(), Some(want.as_bytes()));
            n += 1;
        }
        assert_eq!(n, 500);
        let c = db2.counters();
        assert_eq!((c.errors, c.timeouts), (0, 0));
    });
    let _ = child.kill();
    let _ = child.wait();
}
