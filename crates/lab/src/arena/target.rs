//! The server under test: where it listens (HTTP/1.1, TLS, h2c, QUIC) and what it was given
//! (static directory, certificate, dataset), so checks can compare answers with the files.
//! Either a server the user started ([`Target::at`]), or linerate's demo started here on
//! free ports of 127.0.0.1 with fixtures of its own ([`Target::spawn_demo`]): HttpArena's 20
//! static file names and sizes (own content, text ones with .gz and .br siblings), a random
//! dataset (so no answer could be prepared), and a fresh RSA-2048 certificate; or a peer the
//! arena started on fixtures of the same kind ([`Target::peer`], from [`super::peers`]).
//!
//! A spawned server is stopped by its PID (a peer by its process group) and its files removed
//! when the target is dropped.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cpu_meter::Meter;
use super::rng::Rng;
use super::stack::Stack;
use super::wire;
use crate::compare::procfs;
use crate::compare::server::Running;

/// [`Target::cpu_source`]: a cgroup of its own.
pub const CPU_EXACT: &str = "cgroup";
/// [`Target::cpu_source`]: /proc's clock ticks.
pub const CPU_TICKS: &str = "/proc ticks";

/// How long a spawned server may take to answer its first request.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// One of HttpArena's static files: its name and size (data/static of MDA2AV/HttpArena).
pub struct StaticFile {
    pub name: &'static str,
    pub size: usize,
}

const fn f(name: &'static str, size: usize) -> StaticFile {
    StaticFile { name, size }
}

/// HttpArena's static profiles' 20 files (requests/static-h2-uris.txt).
pub const STATIC_FILES: &[StaticFile] = &[
    f("reset.css", 8192),
    f("layout.css", 25600),
    f("theme.css", 18432),
    f("components.css", 204_800),
    f("utilities.css", 61440),
    f("analytics.js", 12288),
    f("helpers.js", 22528),
    f("app.js", 204_800),
    f("vendor.js", 307_200),
    f("router.js", 35840),
    f("header.html", 122_880),
    f("footer.html", 56320),
    f("regular.woff2", 18432),
    f("bold.woff2", 22528),
    f("logo.svg", 15344),
    f("icon-sprite.svg", 71680),
    f("hero.webp", 46080),
    f("thumb1.webp", 8192),
    f("thumb2.webp", 6144),
    f("manifest.json", 2883),
];

/// What the arena is told about a server it did not start.
#[derive(Clone, Debug, Default)]
pub struct Given {
    pub h1: Option<SocketAddr>,
    pub tls: Option<SocketAddr>,
    pub h2c: Option<SocketAddr>,
    pub quic: bool,
    pub static_dir: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub dataset: Option<PathBuf>,
    pub database: bool,
    pub pid: Option<u32>,
}

/// How to start the demo.
#[derive(Clone, Debug)]
pub struct Spawn {
    /// The linerate binary.
    pub bin: PathBuf,
    /// PostgreSQL for the database profiles (`serve --database-url`).
    pub database_url: Option<String>,
    /// A Redis/memcached tier behind the demo's item cache (`serve --cache-tier`).
    pub cache_tier: Option<String>,
    /// Worker threads (`serve --workers`).
    pub workers: usize,
    /// The workers' I/O backend (`serve --io`: `epoll` or `uring`); None: serve's default.
    pub io: Option<String>,
}

/// The server under test.
pub struct Target {
    pub name: String,
    pub h1: SocketAddr,
    pub tls: Option<SocketAddr>,
    pub h2c: Option<SocketAddr>,
    /// HTTP/3 on the TLS port's UDP twin.
    pub quic: bool,
    pub static_dir: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    /// The items the server's /json/{count} answers from, when known.
    pub dataset: Option<Vec<Value>>,
    /// Its database routes are mounted.
    pub database: bool,
    /// Its process, for CPU accounting.
    pub pid: Option<u32>,
    /// production-stack's edge: a second server (TLS, h2) whose `/api` is behind a JWT rule,
    /// and a token it takes.
    pub stack: Option<Stack>,
    child: Option<Child>,
    /// A peer the arena started: its whole process group is stopped, and counted for CPU.
    group: Option<Running>,
    workdir: Option<PathBuf>,
    /// Its CPU time, exact, where a cgroup of its own could be made (dropped after the server
    /// is stopped, so the cgroup can be removed).
    meter: Option<Meter>,
}

impl Target {
    /// A server the user started, described by `g`.
    pub fn at(name: &str, g: Given) -> Result<Target, String> {
        let dataset = match &g.dataset {
            None => None,
            Some(p) => Some(read_dataset(p)?),
        };
        Ok(Target {
            name: name.to_string(),
            h1: g.h1.ok_or("no HTTP/1.1 address")?,
            tls: g.tls,
            h2c: g.h2c,
            quic: g.quic,
            static_dir: g.static_dir,
            cert: g.cert,
            dataset,
            database: g.database,
            pid: g.pid,
            stack: None,
            child: None,
            group: None,
            workdir: None,
            meter: None,
        })
    }

    /// Starts linerate's demo with fresh fixtures on free ports, pinned to `cpus` (as the
    /// peers are), and waits for its first answer.
    pub fn spawn_demo(s: &Spawn, cpus: &[usize], rng: &mut Rng) -> Result<Target, String> {
        let dir = Target::fixtures("linerate", rng)?;
        let mut t = Target {
            name: "linerate".into(),
            h1: free_addr()?,
            tls: Some(free_addr()?),
            h2c: Some(free_addr()?),
            quic: true,
            static_dir: Some(dir.join("static")),
            cert: Some(dir.join("cert.pem")),
            dataset: None,
            database: s.database_url.is_some(),
            pid: None,
            stack: None,
            child: None,
            group: None,
            workdir: Some(dir.clone()),
            meter: None,
        };
        t.dataset = Some(t.read_dataset()?);
        let port = |a: Option<SocketAddr>| a.expect("set above").port().to_string();
        let mut cmd = Command::new(&s.bin);
        cmd.args(["serve", "--app", "demo", "--addr", &t.h1.to_string()])
            .args([
                "--tls-port",
                &port(t.tls),
                "--h2c-port",
                &port(t.h2c),
                "--quic",
            ])
            .arg("--tls-cert")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(dir.join("key.pem"))
            .arg("--root")
            .arg(dir.join("static"))
            .args(["--root-prefix", "/static"])
            .arg("--dataset")
            .arg(dir.join("dataset.json"))
            .args([
                "--workers",
                &s.workers.to_string(),
                "--no-pin",
                "--log-level",
                "warn",
            ]);
        if let Some(url) = &s.database_url {
            cmd.args(["--database-url", url]);
        }
        if let Some(url) = &s.cache_tier {
            cmd.args(["--cache-tier", url]);
        }
        if let Some(io) = &s.io {
            cmd.args(["--io", io]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // Pinned to the server CPUs as the peers are (the spawned process inherits the mask).
        let child = crate::compare::server::on_cpus(cpus, || Ok(cmd.spawn()?))
            .map_err(|e| format!("{}: {e:#}", s.bin.display()))?;
        t.pid = Some(child.id());
        let pid = child.id();
        t.meter = Meter::attach("linerate", || vec![pid]);
        t.child = Some(child);
        t.wait_ready()?;
        if let Some(url) = &s.database_url {
            t.stack = Some(Stack::spawn(s, url, &dir, cpus)?);
        }
        Ok(t)
    }

    /// A fresh fixture directory for `tag`: HttpArena's static files (with .gz and .br
    /// siblings) in `static/`, a random dataset.json (so no answer could be prepared), and an
    /// RSA-2048 cert.pem and key.pem.
    pub fn fixtures(tag: &str, rng: &mut Rng) -> Result<PathBuf, String> {
        let dir = std::env::temp_dir().join(format!(
            "linerate-arena-{tag}-{}-{}",
            std::process::id(),
            rng.next_u64() % 1_000_000
        ));
        std::fs::create_dir_all(dir.join("static"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        write_static(&dir.join("static"), rng)?;
        std::fs::write(
            dir.join("dataset.json"),
            serde_json::to_vec(&random_dataset(rng)).expect("JSON"),
        )
        .map_err(|e| e.to_string())?;
        write_cert(&dir)?;
        Ok(dir)
    }

    /// The dataset.json of its fixtures ([`Target::fixtures`]).
    pub fn read_dataset(&self) -> Result<Vec<Value>, String> {
        let dir = self.workdir.as_ref().ok_or("no fixtures")?;
        read_dataset(&dir.join("dataset.json"))
    }

    /// A peer started on `fixtures` (from [`Target::fixtures`]): HTTP/1.1 on its port, TLS
    /// (and QUIC on its UDP twin when `quic`) on its TLS port.
    pub fn peer(name: &str, running: Running, fixtures: PathBuf, quic: bool) -> Target {
        let pgrp = running.pgrp();
        let meter = Meter::attach(name, || procfs::group_pids(pgrp));
        Target {
            name: name.to_string(),
            h1: running.addr_for(false),
            tls: Some(running.addr_for(true)),
            h2c: None,
            quic,
            static_dir: Some(fixtures.join("static")),
            cert: Some(fixtures.join("cert.pem")),
            dataset: None,
            database: false,
            pid: Some(running.pgrp() as u32),
            stack: None,
            child: None,
            group: Some(running),
            workdir: Some(fixtures),
            meter,
        }
    }

    /// The server's CPU so far, nanoseconds: its cgroup's, exact ([`Meter`]), else utime +
    /// stime in clock ticks of every process of a peer's group (nginx's master and workers),
    /// or of the one process.
    pub fn cpu_ns(&self) -> Option<u64> {
        if let Some(m) = &self.meter {
            return m.usage_ns();
        }
        let ticks = if let Some(g) = &self.group {
            procfs::group_usage(g.pgrp()).cpu
        } else {
            let pid = self.pid?;
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            procfs::parse_proc_stat(&text)?.cpu
        };
        Some((ticks as f64 * 1e9 / procfs::clock_ticks()) as u64)
    }

    /// Where [`Target::cpu_ns`] reads.
    pub fn cpu_source(&self) -> &'static str {
        if self.meter.is_some() {
            CPU_EXACT
        } else {
            CPU_TICKS
        }
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Ok(r) = wire::get(self.h1, None, "/baseline11?a=1&b=1", &[])
                && r.status == 200
            {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                let mut err = String::new();
                if let Some(mut e) = c.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("the demo exited ({status}): {}", err.trim()));
            }
            if start.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "the demo did not answer on {} within {START_TIMEOUT:?}",
                    self.h1
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// ", checked against the dataset" or why it is not.
    pub fn dataset_note(&self) -> &'static str {
        if self.dataset.is_some() {
            ", fields matched against the dataset"
        } else {
            " (dataset unknown: totals only)"
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(g) = self.group.take() {
            g.stop();
        }
        if let Some(d) = self.workdir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A free port on 127.0.0.1 (the OS picks; the server binds it right after).
pub(super) fn free_addr() -> Result<SocketAddr, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a free port: {e}"))
}

fn read_dataset(p: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    match serde_json::from_slice(&text) {
        Ok(Value::Array(items)) => Ok(items),
        _ => Err(format!("{}: not a JSON array of items", p.display())),
    }
}

/// 50 items in HttpArena's shape with random names, prices, quantities, tags and ratings.
fn random_dataset(rng: &mut Rng) -> Vec<Value> {
    const CATEGORIES: &[&str] = &[
        "electronics",
        "books",
        "garden",
        "toys",
        "sports",
        "kitchen",
    ];
    (1..=50)
        .map(|id| {
            let tags: Vec<String> = (0..rng.between(1, 3))
                .map(|_| rng.text(5).to_lowercase())
                .collect();
            serde_json::json!({
                "id": id,
                "name": format!("{} {id}", rng.text(8)),
                "category": CATEGORIES[rng.between(0, CATEGORIES.len() as u64 - 1) as usize],
                "price": rng.between(1, 500),
                "quantity": rng.between(1, 1000),
                "active": rng.next_u64().is_multiple_of(2),
                "tags": tags,
                "rating": { "score": rng.between(1, 5), "count": rng.between(0, 10_000) },
            })
        })
        .collect()
}

/// The 20 files, text ones with gzip and brotli siblings (as HttpArena's data/static has).
fn write_static(dir: &Path, rng: &mut Rng) -> Result<(), String> {
    use std::io::Write as _;
    for f in STATIC_FILES {
        let binary = f.name.ends_with(".woff2") || f.name.ends_with(".webp");
        let data: Vec<u8> = if binary {
            rng.bytes(f.size)
        } else {
            // Text that compresses, as real CSS and JS do.
            let mut t = String::new();
            while t.len() < f.size {
                t.push_str(&format!(
                    "/* {} {} */ .{} {{ margin: {}px }}\n",
                    f.name,
                    t.len(),
                    rng.text(6),
                    rng.between(0, 64)
                ));
            }
            t.truncate(f.size);
            t.into_bytes()
        };
        let path = dir.join(f.name);
        std::fs::write(&path, &data).map_err(|e| format!("{}: {e}", path.display()))?;
        if !binary {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            gz.write_all(&data).map_err(|e| e.to_string())?;
            let gz = gz.finish().map_err(|e| e.to_string())?;
            std::fs::write(dir.join(format!("{}.gz", f.name)), gz).map_err(|e| e.to_string())?;
            let mut br = Vec::new();
            {
                let mut w = brotli::CompressorWriter::new(&mut br, 4096, 9, 22);
                w.write_all(&data).map_err(|e| e.to_string())?;
            }
            std::fs::write(dir.join(format!("{}.br", f.name)), br).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

/// A self-signed RSA-2048 certificate for 127.0.0.1 and localhost (HttpArena mounts one of
/// that kind): cert.pem and key.pem in `dir`.
fn write_cert(dir: &Path) -> Result<(), String> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256)
        .map_err(|e| format!("RSA key: {e}"))?;
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(|e| format!("certificate: {e}"))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("certificate: {e}"))?;
    std::fs::write(dir.join("cert.pem"), cert.pem()).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).map_err(|e| e.to_string())?;
    Ok(())
}
