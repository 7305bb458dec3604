//! Test support: a throwaway PostgreSQL 15 (`scripts/pg.sh`: a seeded cluster on 127.0.0.1
//! on a free port, stopped and removed when dropped; a test that cannot start one fails
//! saying so, it never passes without a database), and [`Driven`], a pool with its futures run
//! where its driver runs them — for the worker driver, on the test's own thread exactly as a
//! worker's loop runs them (watch the fd, then `run`).
#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_postgres::{Builder, Driver, Pool};
use linerate_server::Spawn;
use linerate_server::runtime::{Installed, install_here};

/// A bound on a hang, far above any real wait: the tests assert that something happens (and
/// in which order), never how fast.
pub const EVENTUALLY: Duration = Duration::from_secs(15);

/// How long the test's worker loop waits on its fd between checks (a poll, not a deadline).
const TURN: Duration = Duration::from_millis(20);

/// Both drivers: every test runs with each.
pub const DRIVERS: [Driver; 2] = [Driver::Runtime, Driver::Worker];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A throwaway cluster; stopped and removed when dropped.
pub struct Pg {
    dir: String,
    pub url: String,
}

impl Pg {
    /// Starts one; panics, saying why, where PostgreSQL 15 cannot run (`scripts/pg.sh` exits 2
    /// with a "NOT RUN" line then).
    pub fn start() -> Pg {
        let out = Command::new(repo().join("scripts/pg.sh"))
            .arg("start")
            .output()
            .expect("run scripts/pg.sh");
        assert!(
            out.status.success(),
            "NOT RUN: this test needs PostgreSQL 15 (scripts/pg.sh start exited {:?}): {}",
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
        Pg {
            dir: field("PG_DIR="),
            url: field("DATABASE_URL="),
        }
    }

    /// Stops the server, keeping the data (an outage).
    pub fn down(&self) {
        self.pg_sh("down");
    }

    /// Starts it again on the same port.
    pub fn up(&self) {
        self.pg_sh("up");
    }

    fn pg_sh(&self, what: &str) {
        let ok = Command::new(repo().join("scripts/pg.sh"))
            .args([what, &self.dir])
            .status()
            .unwrap();
        assert!(ok.success(), "scripts/pg.sh {what}");
    }

    /// How many lines of the server's own log (`scripts/pg.sh`'s `server.log`: its warnings
    /// and errors) hold `text`.
    pub fn log_lines(&self, text: &str) -> usize {
        let log = std::fs::read_to_string(format!("{}/server.log", self.dir))
            .expect("the cluster's server.log");
        log.lines().filter(|l| l.contains(text)).count()
    }

    /// Runs `sql` with psql over TCP; its output, trimmed.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new("/usr/lib/postgresql/15/bin/psql")
            .args(["-X", "-tA", "-v", "ON_ERROR_STOP=1", &self.url, "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("scripts/pg.sh"))
            .args(["stop", &self.dir])
            .status();
    }
}

/// A pool and what drives it: the runtime's threads, or (worker driver) this test's thread
/// standing in for an HTTP worker.
pub struct Driven {
    pub pool: Arc<Pool>,
    /// The worker driver's runtime, installed on this thread as on a worker's.
    local: Option<Installed>,
    // Dropped last: it runs the runtime driver's connections.
    _runtime: tokio::runtime::Runtime,
}

impl Driven {
    /// Connects `builder` with `driver`; with the worker driver, this thread becomes the only
    /// worker and opens its connections before this returns.
    pub fn connect(builder: &mut Builder, driver: Driver) -> Driven {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        builder.driver(driver);
        let pool = Arc::new(builder.connect(runtime.handle()).expect("connect"));
        let local = pool.worker_start(1, EVENTUALLY).map(|start| {
            let installed = install_here().expect("a worker runtime");
            let _enter = installed.enter();
            start(0).expect("the worker's set-up");
            installed
        });
        Driven {
            pool,
            local,
            _runtime: runtime,
        }
    }

    /// Starts `fut` where the pool runs its futures (as a handler's would be).
    pub fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        let _enter = self.local.as_ref().map(Installed::enter);
        self.pool.spawner().spawn(Box::pin(fut));
    }

    /// Drives the worker (if any) until `done`; panics naming `what` if it never holds.
    pub fn until(&mut self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            if self.local.is_some() {
                // What is ready to run without waiting (a future just spawned).
                linerate_server::runtime::block_on(tokio::task::yield_now());
            }
            if done() {
                return;
            }
            assert!(Instant::now() < deadline, "never: {what}");
            self.turn();
        }
    }

    /// One turn of the worker's loop, as the server runs it: the worker's runtime runs for
    /// [`TURN`] (its tasks, timers and sockets). With the runtime driver, a pause of [`TURN`].
    pub fn turn(&mut self) {
        if self.local.is_none() {
            std::thread::sleep(TURN);
            return;
        }
        linerate_server::runtime::block_on(async { tokio::time::sleep(TURN).await });
    }

    /// Runs `fut` where the pool runs its futures and waits for its output.
    pub fn run<T: Send + 'static>(&mut self, fut: impl Future<Output = T> + Send + 'static) -> T {
        let out = Arc::new(Mutex::new(None));
        let put = out.clone();
        self.spawn(async move {
            let v = fut.await;
            *put.lock().unwrap() = Some(v);
        });
        self.until("the future finished", || out.lock().unwrap().is_some());
        let v = out.lock().unwrap().take();
        v.unwrap()
    }
}

/// Runs `f` on a thread of its own (each driver's part of a test gets a fresh thread: the
/// worker driver's set-up is per thread, as a worker's is).
pub fn on_thread(f: impl FnOnce() + Send) {
    std::thread::scope(|s| {
        s.spawn(f).join().expect("the test thread");
    });
}
