//! `linerate lab arena`'s validation can fail and does pass: against a server that answers
//! one constant to everything (the cheat HttpArena's random inputs exist to catch) every
//! profile with inputs fails, each on its randomised check; against linerate's demo, started
//! by the arena itself with its own fixtures, every profile it enters passes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use linerate_lab::arena::target::{Given, Spawn};
use linerate_lab::arena::{ArenaArgs, Server, validate};

/// A server on 127.0.0.1 that answers every request on every connection `200 text/plain 55`
/// (the right answer to /baseline11?a=13&b=42) and closes. Runs until the test process ends.
fn constant_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // Up to the end of the head (a body, if any, is left unread: the answer does
                // not depend on it, which is the point).
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n55",
                );
            });
        }
    });
    addr
}

fn args(server: Server, profiles: &[&str]) -> ArenaArgs {
    ArenaArgs {
        server,
        profiles: profiles.iter().map(|p| p.to_string()).collect(),
        seed: None,
        peers: Vec::new(),
        cpus: Vec::new(),
    }
}

#[test]
fn a_constant_server_fails_every_profile_with_inputs() {
    let addr = constant_server();
    let given = Given {
        h1: Some(addr),
        // The constant server answers on this port too, whatever the protocol.
        h2c: Some(addr),
        ..Given::default()
    };
    let profiles = [
        "baseline",
        "pipelined",
        "json",
        "json-comp",
        "upload",
        "baseline-h2c",
        "json-h2c",
        "unary-grpc",
        "echo-ws",
        "echo-ws-pipeline",
        "echo-ws-limited",
        "latency-10k",
    ];
    let (_, rows) = validate(&args(Server::Given("constant".into(), given), &profiles)).unwrap();
    assert_eq!(rows.len(), profiles.len());
    for r in &rows {
        assert_eq!(r.result, "FAILED", "{}: {r:?}", r.profile);
    }
    // The fixed-input check passes (the constant is its answer); the random ones fail.
    let baseline = &rows[0];
    let check = |name: &str| {
        baseline
            .checks
            .iter()
            .find(|c| c.name.starts_with(name))
            .unwrap_or_else(|| panic!("no check {name}"))
            .outcome
    };
    assert_eq!(check("GET /baseline11?a=13&b=42"), "pass");
    let random = baseline
        .checks
        .iter()
        .find(|c| c.name.ends_with("(random)"))
        .unwrap();
    assert_eq!(random.outcome, "FAIL", "{random:?}");
    assert_eq!(check("POST body="), "FAIL");
    assert_eq!(check("fragmented at every byte offset"), "FAIL");
}

#[test]
fn not_entered_profiles_are_never_passed() {
    let addr = constant_server();
    let given = Given {
        h1: Some(addr),
        ..Given::default()
    };
    let (_, rows) = validate(&args(
        Server::Given("constant".into(), given),
        &["fortunes", "crud", "json-tls", "8gbit"],
    ))
    .unwrap();
    let results: Vec<_> = rows.iter().map(|r| (r.profile, r.result)).collect();
    assert_eq!(
        results,
        [
            // No database, no TLS listener: nothing to check, and said so.
            ("fortunes", "NOT RUN"),
            ("crud", "NOT RUN"),
            ("json-tls", "NOT RUN"),
            ("8gbit", "NOT RUN"),
        ]
    );
    assert!(rows.iter().all(|r| r.passed == 0 && r.reason.is_some()));
}

#[test]
fn the_demo_passes_every_profile_it_enters() {
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: None,
        cache_tier: None,
        workers: 1,
        io: None,
    };
    let (seed, rows) = validate(&args(Server::Demo(spawn), &[])).unwrap();
    let mut passed = 0;
    for r in &rows {
        match r.result {
            "passed" => passed += 1,
            // Without a database the database profiles cannot run; the rest the demo does not
            // serve yet.
            "NOT RUN" => assert!(
                ["async-db", "fortunes", "crud", "production-stack"].contains(&r.profile),
                "{r:?}"
            ),
            "not entered" => assert!(r.reason.is_some()),
            _ => panic!("seed {seed}: {}: {r:?}", r.profile),
        }
        assert_eq!(r.failed, 0, "seed {seed}: {r:?}");
    }
    assert!(passed >= 20, "{passed} profiles passed");
}

#[test]
fn the_load_runs_and_scores_a_short_smoke() {
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: None,
        cache_tier: None,
        workers: 1,
        io: None,
    };
    let sizing = linerate_lab::arena::load::Sizing {
        cpus: 2,
        load_cpus: Vec::new(),
        duration: std::time::Duration::from_millis(300),
        warmup: std::time::Duration::ZERO,
        connections: Some(4),
        rounds: 1,
    };
    let args = args(
        Server::Demo(spawn),
        &[
            "baseline",
            "unary-grpc",
            "static",
            "latency-10k",
            "fortunes",
        ],
    );
    let sizing = linerate_lab::arena::load::Sizing {
        rounds: 2,
        ..sizing
    };
    let mut heard = Vec::new();
    let run = linerate_lab::arena::run(&args, Some(sizing), |l| heard.push(l.to_string())).unwrap();
    assert_eq!(
        heard[..2],
        [
            "load: baseline on linerate (round 1 of 2)",
            "load: baseline on linerate (round 2 of 2)"
        ]
    );
    // The profile not run (no database) is not loaded; the others are, each with answers, the
    // server's CPU read from /proc, and the paced one scored; each row the median of its
    // two rounds, within their spread.
    let loaded: Vec<_> = run.load.iter().map(|s| s.measured.profile).collect();
    assert_eq!(loaded, ["baseline", "unary-grpc", "static", "latency-10k"]);
    for s in &run.load {
        assert_eq!(s.error, None, "{s:?}");
        assert!(s.measured.responses > 0, "{s:?}");
        assert!(s.measured.cpu_us_per_request.is_some(), "{s:?}");
        assert_eq!(s.composite.is_some(), s.measured.profile == "latency-10k");
        let m = &s.measured;
        assert_eq!((m.rounds, m.round_errors.as_ref()), (2, None), "{s:?}");
        assert!(
            m.rps_min_max[0] <= m.rps && m.rps <= m.rps_min_max[1],
            "{s:?}"
        );
        let [lo, hi] = m.cpu_us_min_max.unwrap();
        let cpu = m.cpu_us_per_request.unwrap();
        assert!(lo <= cpu && cpu <= hi, "{s:?}");
    }
    // The report and its charts.
    let machine = linerate_lab::compare::machine::describe(&[]);
    let md = linerate_lab::arena::report::markdown(&run, &machine);
    assert!(md.contains("| fortunes | linerate | NOT RUN |"), "{md}");
    // One table per profile: its shape in the heading, a row per server.
    assert!(
        md.contains("### latency-10k (4 connections, depth 1, paced at 312 req/s)"),
        "{md}"
    );
    let table = &md[md.find("### latency-10k").unwrap()..];
    // The row's shape, not its rate: the rate a paced run reaches on a loaded machine is
    // below the offered one (302 of 312 once), and that the run was paced is asserted below.
    let row = table
        .lines()
        .find(|l| l.starts_with("| linerate | "))
        .unwrap_or_else(|| panic!("no linerate row: {md}"));
    let rate: f64 = row
        .split('|')
        .nth(2)
        .unwrap()
        .trim()
        .replace(',', "")
        .parse()
        .unwrap();
    assert!(rate > 0.0, "{row}");
    let dir = std::env::temp_dir().join(format!("lab-arena-charts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let charts = linerate_lab::arena::report::charts(&dir, &run.load).unwrap();
    assert_eq!(charts.len(), 2);
    assert!(
        charts
            .iter()
            .all(|c| std::fs::metadata(c).unwrap().len() > 0)
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let paced = &run.load[3];
    // 10,000 req/s on HttpArena's 64 CPUs is 312.5 on two.
    assert_eq!(paced.measured.offered_rps, Some(312.5));
}

/// A thread-per-connection server for `/delay/{ms}`: sleeps `ms`, then answers it (a correct,
/// if blocking, implementation: HttpArena allows one).
fn delay_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut s) = conn else { continue };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&seen)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .to_string();
                let ms: u64 = line
                    .split(' ')
                    .nth(1)
                    .and_then(|p| p.strip_prefix("/delay/"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                std::thread::sleep(std::time::Duration::from_millis(ms));
                let body = ms.to_string();
                let _ = s.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
            });
        }
    });
    addr
}

/// async is not entered by the demo yet; its checks are ready for the day it is: a server
/// that waits and echoes passes them all, a constant fails them.
#[test]
fn the_async_checks_pass_a_delay_server_and_fail_a_constant() {
    use linerate_lab::arena::checks::{Outcome, validate};
    use linerate_lab::arena::rng::Rng;
    use linerate_lab::arena::target::Target;
    let mut p = *linerate_lab::arena::profiles::find("async").unwrap();
    p.entry = Ok(());
    let at = |addr| {
        Target::at(
            "t",
            Given {
                h1: Some(addr),
                ..Given::default()
            },
        )
        .unwrap()
    };
    let good = validate(&p, &at(delay_server()), &mut Rng::new(7));
    assert!(good.iter().all(|(_, o)| *o == Outcome::Pass), "{good:?}");
    let bad = validate(&p, &at(constant_server()), &mut Rng::new(7));
    let failed = bad
        .iter()
        .filter(|(_, o)| matches!(o, Outcome::Fail(_)))
        .count();
    // Only the Content-Type check can pass a constant text/plain answer.
    assert_eq!(failed, bad.len() - 1, "{bad:?}");
}

/// A peer beside linerate: nginx, started by the arena on fixtures of its own, is validated
/// with the same static checks and loaded for a short smoke; its rows are there with their
/// results, its CPU is read from its processes, and the ratios are to the best of the two.
/// No figure is asserted.
#[test]
fn nginx_enters_static_beside_linerate() {
    use linerate_lab::arena::peers::Peer;
    if !linerate_lab::compare::server::on_path("nginx") {
        eprintln!("NOT RUN: nginx is not installed (not on PATH)");
        return;
    }
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: None,
        cache_tier: None,
        workers: 1,
        io: None,
    };
    let sizing = linerate_lab::arena::load::Sizing {
        cpus: 2,
        load_cpus: Vec::new(),
        duration: std::time::Duration::from_millis(300),
        warmup: std::time::Duration::ZERO,
        connections: Some(4),
        rounds: 1,
    };
    let mut args = args(Server::Demo(spawn), &["static", "baseline"]);
    args.peers = vec![Peer::Nginx];
    let sizing = linerate_lab::arena::load::Sizing {
        rounds: 2,
        ..sizing
    };
    let mut heard = Vec::new();
    let run = linerate_lab::arena::run(&args, Some(sizing), |l| heard.push(l.to_string())).unwrap();
    let row = |profile: &str, server: &str| {
        run.validation
            .iter()
            .find(|v| v.profile == profile && v.server == server)
            .unwrap_or_else(|| panic!("no {profile} row for {server}: {:?}", run.validation))
    };
    let static_nginx = row("static", "nginx");
    // The same checks as linerate's, each with a result (a failure is reported, not hidden).
    assert_eq!(
        static_nginx.checks.len(),
        row("static", "linerate").checks.len()
    );
    assert!(static_nginx.passed > 0, "{static_nginx:?}");
    assert!(
        ["passed", "FAILED"].contains(&static_nginx.result),
        "{static_nginx:?}"
    );
    let baseline_nginx = row("baseline", "nginx");
    assert_eq!(baseline_nginx.result, "not entered");
    assert!(baseline_nginx.reason.as_deref().unwrap().contains("sums"));
    // Loaded where it passed, beside linerate, with its CPU from /proc.
    if static_nginx.result == "passed" {
        let loaded: Vec<_> = run
            .load
            .iter()
            .filter(|s| s.measured.profile == "static")
            .collect();
        assert_eq!(loaded.len(), 2, "{loaded:?}");
        assert_eq!(loaded[1].measured.server, "nginx");
        // The rounds interleave the two servers.
        assert_eq!(
            heard[..4],
            [
                "load: static on linerate (round 1 of 2)",
                "load: static on nginx (round 1 of 2)",
                "load: static on linerate (round 2 of 2)",
                "load: static on nginx (round 2 of 2)",
            ]
        );
        assert!(loaded.iter().all(|s| s.measured.rounds == 2), "{loaded:?}");
        for s in &loaded {
            assert_eq!(s.error, None, "{s:?}");
            assert!(s.measured.responses > 0, "{s:?}");
            // nginx's work is in its worker, not the master whose PID the arena started: a
            // CPU of zero would mean only the master was counted.
            assert!(s.measured.cpu_us_per_request.unwrap_or(0.0) > 0.0, "{s:?}");
        }
        // One of the two is the best on each ratio.
        assert!(loaded.iter().any(|s| s.rps_ratio == 1.0), "{loaded:?}");
        assert!(
            loaded.iter().any(|s| s.cpu_ratio == Some(1.0)),
            "{loaded:?}"
        );
        let machine = linerate_lab::compare::machine::describe(&[]);
        let md = linerate_lab::arena::report::markdown(&run, &machine);
        assert!(md.contains("| static | nginx | passed |"), "{md}");
        assert!(md.contains("| baseline | nginx | not entered |"), "{md}");
    }
}

/// A throwaway PostgreSQL (scripts/pg.sh) and a Redis on a free loopback port, both stopped
/// (by the script, by PID) when dropped.
struct Backends {
    pg_dir: String,
    database_url: String,
    /// The copy whose `fortune` is HttpArena's 200 rows.
    arena_url: String,
    redis: std::process::Child,
    redis_port: u16,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

impl Backends {
    fn start() -> Option<Backends> {
        use std::process::{Command, Stdio};
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            eprintln!("NOT RUN: redis-server is not installed (scripts/cache-servers.sh install)");
            return None;
        }
        let out = Command::new(repo().join("scripts/pg.sh"))
            .arg("start")
            .output()
            .expect("run scripts/pg.sh");
        assert!(
            out.status.success(),
            "this test needs PostgreSQL 15 (scripts/pg.sh start exited {:?}): {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in {text}"))
                .to_string()
        };
        let redis_port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let redis = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &redis_port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let b = Backends {
            pg_dir: field("PG_DIR="),
            database_url: field("DATABASE_URL="),
            arena_url: field("ARENA_DATABASE_URL="),
            redis,
            redis_port,
        };
        // A bounded wait (400 tries 50 ms apart), not a timing assertion.
        let up = (0..400).any(|_| {
            b.redis_commands().is_some() || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                false
            }
        });
        assert!(up, "redis-server did not start");
        Some(b)
    }

    /// Redis's `total_commands_processed` (INFO stats), over RESP.
    fn redis_commands(&self) -> Option<u64> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.redis_port)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .ok()?;
        s.write_all(b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n").ok()?;
        let mut text = String::new();
        let mut buf = [0u8; 8192];
        while !text.contains("total_commands_processed:") || !text.ends_with("\r\n\r\n") {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        text.lines()
            .find_map(|l| l.strip_prefix("total_commands_processed:"))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        let _ = self.redis.kill();
        let _ = self.redis.wait();
        let _ = std::process::Command::new(repo().join("scripts/pg.sh"))
            .args(["stop", &self.pg_dir])
            .status();
    }
}

/// production-stack is loaded through its edge as HttpArena's mix: h2 over TLS to the edge's
/// `/api/*` with the bearer token (every answer 2xx: a token refused would be 401s), the
/// item cache going to Redis under the load, and the CPU of the edge and its Redis counted.
/// No figure is asserted.
#[test]
fn production_stack_loads_its_edge_with_the_token() {
    use linerate_lab::arena::{checks, load, rng::Rng, target::Target};
    let Some(b) = Backends::start() else { return };
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: Some(b.database_url.clone()),
        cache_tier: Some(format!("redis://127.0.0.1:{}", b.redis_port)),
        workers: 1,
        io: None,
    };
    let mut rng = Rng::new(11);
    let t = Target::spawn_demo(&spawn, &[0], &mut rng).unwrap();
    let p = linerate_lab::arena::profiles::find("production-stack").unwrap();
    let v = checks::validate(p, &t, &mut rng);
    assert!(v.iter().all(|(_, o)| *o == checks::Outcome::Pass), "{v:?}");
    let sizing = load::Sizing {
        cpus: 2,
        load_cpus: Vec::new(),
        duration: std::time::Duration::from_millis(500),
        warmup: std::time::Duration::ZERO,
        connections: Some(4),
        rounds: 1,
    };
    let before = b.redis_commands().unwrap();
    let m = load::measure(p, &t, &sizing).unwrap();
    let after = b.redis_commands().unwrap();
    assert!(m.responses > 0, "{m:?}");
    assert_eq!(m.failed, 0, "every answer 2xx: {m:?}");
    assert_eq!(m.depth, load::STACK_READ_STREAMS);
    assert!(m.cpu_us_per_request.unwrap_or(0.0) > 0.0, "{m:?}");
    assert_eq!(
        m.cpu_of,
        Some("the edge (with the app in it) and its Redis"),
        "{m:?}"
    );
    // The item cache-aside behind the edge went to Redis during the load (the old load,
    // /public/baseline on the demo's own port, never did).
    assert!(after > before + 10, "Redis commands {before} -> {after}");
}

/// bench/actix-db (`--servers actix-db`) beside linerate on async-db, where it has HttpArena's route: validated with
/// the same checks, and loaded where it passed (a failure would make it "not entered" with
/// why, never loaded); on baseline it is "not entered" with the routes it has. NOT RUN when
/// it is not built (scripts/peers.sh rust). No figure is asserted.
#[test]
fn actix_db_enters_async_db_beside_linerate() {
    use linerate_lab::arena::peers::Peer;
    let bin = repo().join("bench/actix-db/target/release/actix-db");
    if !bin.is_file() {
        eprintln!(
            "NOT RUN: {} is not built (scripts/peers.sh rust)",
            bin.display()
        );
        return;
    }
    let Some(b) = Backends::start() else { return };
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: Some(b.database_url.clone()),
        cache_tier: None,
        workers: 1,
        io: None,
    };
    let sizing = linerate_lab::arena::load::Sizing {
        cpus: 2,
        load_cpus: Vec::new(),
        duration: std::time::Duration::from_millis(300),
        warmup: std::time::Duration::ZERO,
        connections: Some(4),
        rounds: 1,
    };
    let mut args = args(Server::Demo(spawn), &["async-db", "baseline"]);
    args.peers = vec![Peer::ActixDb, Peer::Axum];
    let run = linerate_lab::arena::run(&args, Some(sizing), |_| {}).unwrap();
    let row = |profile: &str, server: &str| {
        run.validation
            .iter()
            .find(|v| v.profile == profile && v.server == server)
            .unwrap_or_else(|| panic!("no {profile} row for {server}: {:?}", run.validation))
    };
    let actix = row("async-db", "actix-db");
    assert_eq!(actix.checks.len(), row("async-db", "linerate").checks.len());
    assert_eq!(actix.result, "passed", "{actix:?}");
    assert_eq!(row("baseline", "actix-db").result, "not entered");
    assert_eq!(row("async-db", "axum").result, "not entered");
    let loaded: Vec<_> = run
        .load
        .iter()
        .filter(|s| s.measured.profile == "async-db")
        .map(|s| {
            (
                s.measured.server.as_str(),
                s.error.clone(),
                s.measured.responses > 0,
            )
        })
        .collect();
    assert_eq!(
        loaded,
        [("linerate", None, true), ("actix-db", None, true)],
        "{:?}",
        run.load
    );
}

/// `lab arena --io uring` runs the demo on io_uring (`serve --io uring`, its ring really open),
/// where it passes every profile it passes on epoll, and the report names the backend.
#[test]
fn the_demo_on_io_uring_passes_what_it_passes_on_epoll() {
    use linerate_lab::arena::{rng::Rng, target::Target};
    let spawn = |io: Option<&str>| Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: None,
        cache_tier: None,
        workers: 1,
        io: io.map(str::to_string),
    };
    // A worker whose kernel refuses a ring runs on epoll: NOT RUN there.
    let t = Target::spawn_demo(&spawn(Some("uring")), &[0], &mut Rng::new(9)).unwrap();
    let fds = format!("/proc/{}/fd", t.pid.unwrap());
    let rings = std::fs::read_dir(fds)
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().contains("io_uring"))
        })
        .count();
    drop(t);
    // Where the kernel says io_uring is enabled, the demo must have opened a ring.
    let enabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .is_ok_and(|s| s.trim() == "0");
    assert!(rings > 0 || !enabled, "--io uring did not reach the demo");
    if rings == 0 {
        eprintln!("NOT RUN: the demo found no io_uring ring (this kernel refuses one)");
        return;
    }
    let run =
        |io| linerate_lab::arena::run(&args(Server::Demo(spawn(io)), &[]), None, |_| {}).unwrap();
    let (epoll, uring) = (run(None), run(Some("uring")));
    let results = |r: &linerate_lab::arena::Run| -> Vec<(&str, &str)> {
        r.validation.iter().map(|v| (v.profile, v.result)).collect()
    };
    assert_eq!(results(&uring), results(&epoll));
    let passed = results(&uring).iter().filter(|r| r.1 == "passed").count();
    assert!(passed >= 20, "{passed} profiles passed on io_uring");
    let machine = linerate_lab::compare::machine::describe(&[]);
    let md = linerate_lab::arena::report::markdown(&uring, &machine);
    assert!(md.contains(" on io_uring (`serve --io uring`)"), "{md}");
    let md = linerate_lab::arena::report::markdown(&epoll, &machine);
    assert!(!md.contains("io_uring"), "{md}");
}

/// fortunes: the demo's /fortunes over scripts/pg.sh's ARENA_DATABASE_URL (HttpArena's 200
/// rows) passes HttpArena's checks; over DATABASE_URL (TechEmpower's 12) it fails them, on the
/// row count and the size band, so the checks can fail.
#[test]
fn fortunes_passes_over_httparenas_table_and_fails_over_techempowers() {
    use linerate_lab::arena::{checks, rng::Rng, target::Target};
    let Some(b) = Backends::start() else { return };
    let p = linerate_lab::arena::profiles::find("fortunes").unwrap();
    let check = |url: &str| {
        let spawn = Spawn {
            bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
            database_url: Some(url.to_string()),
            cache_tier: None,
            workers: 1,
            io: None,
        };
        let mut rng = Rng::new(5);
        let t = Target::spawn_demo(&spawn, &[0], &mut rng).unwrap();
        checks::validate(p, &t, &mut rng)
    };
    let good = check(&b.arena_url);
    assert!(
        good.iter().all(|(_, o)| *o == checks::Outcome::Pass),
        "{good:?}"
    );
    assert_eq!(good.len(), 6);
    let twelve = check(&b.database_url);
    let failed: Vec<&str> = twelve
        .iter()
        .filter(|(_, o)| matches!(o, checks::Outcome::Fail(_)))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "201–210 <tr (200 seeded rows and the runtime one)",
            "body 18432–64000 bytes"
        ],
        "{twelve:?}"
    );
}

/// HttpArena's leading engines written here (bench/arena-peers, `scripts/peers.sh arena`),
/// started by the arena on fixtures of their own with the common command line: each passes
/// the same checks as linerate on the profiles its entry enters (hyper on baseline and h2
/// over TLS, h2o-h2c on h2c with the dataset, may-minihttp on pipelined, gobwas-ws on
/// /ws, grpc-go on GetSum, caddy-handler on HTTP/3, uring-c on baseline and pipelined), is
/// "not entered" elsewhere, and is loaded where it passed.
/// NOT RUN for each one that is not built. No figure is asserted.
#[test]
fn the_engines_written_here_pass_the_profiles_their_entries_enter() {
    use linerate_lab::arena::peers::Peer;
    let built: Vec<Peer> = [
        Peer::Hyper,
        Peer::H2oH2c,
        Peer::MayMinihttp,
        Peer::GobwasWs,
        Peer::GrpcGo,
        Peer::CaddyHandler,
        Peer::UringC,
    ]
    .into_iter()
    .filter(|p| {
        let bin = repo().join("target/peers").join(p.name());
        let there = bin.is_file();
        if !there {
            eprintln!(
                "NOT RUN: {} is not built (scripts/peers.sh arena)",
                bin.display()
            );
        }
        there
    })
    .collect();
    if built.is_empty() {
        return;
    }
    let spawn = Spawn {
        bin: PathBuf::from(env!("CARGO_BIN_EXE_linerate")),
        database_url: None,
        cache_tier: None,
        workers: 1,
        io: None,
    };
    let sizing = linerate_lab::arena::load::Sizing {
        cpus: 2,
        load_cpus: Vec::new(),
        duration: std::time::Duration::from_millis(300),
        warmup: std::time::Duration::ZERO,
        connections: Some(4),
        rounds: 1,
    };
    let profiles = [
        "baseline",
        "pipelined",
        "baseline-h2",
        "json-h2c",
        "echo-ws",
        "unary-grpc",
        "baseline-h3",
    ];
    let mut args = args(Server::Demo(spawn), &profiles);
    args.peers = built.clone();
    let run = linerate_lab::arena::run(&args, Some(sizing), |_| {}).unwrap();
    for peer in &built {
        for name in profiles {
            let v = run
                .validation
                .iter()
                .find(|v| v.profile == name && v.server == peer.name())
                .unwrap_or_else(|| panic!("no {name} row for {}", peer.name()));
            let enters = peer
                .enters(linerate_lab::arena::profiles::find(name).unwrap())
                .is_ok();
            if !enters {
                assert_eq!(v.result, "not entered", "{v:?}");
                continue;
            }
            let ours = run
                .validation
                .iter()
                .find(|v| v.profile == name && v.server == "linerate")
                .unwrap();
            assert_eq!(v.result, "passed", "{v:?}");
            assert_eq!(v.checks.len(), ours.checks.len(), "{v:?}");
            let loaded = run
                .load
                .iter()
                .find(|s| s.measured.profile == name && s.measured.server == peer.name())
                .unwrap_or_else(|| panic!("{} not loaded on {name}", peer.name()));
            assert!(
                loaded.error.is_none() && loaded.measured.responses > 0,
                "{loaded:?}"
            );
        }
    }
}
