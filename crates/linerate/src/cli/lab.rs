//! `linerate lab …`: every tool's flags (clap) and their mapping onto the lab's plain argument
//! structs; the floor's wiring. The lab library takes data, never a command line.
#![forbid(unsafe_code)]

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use linerate_lab::c2c::{C2cArgs, DEFAULT_BUDGET, DEFAULT_OUT, DEFAULT_SAMPLES, MIN_SAMPLES};
use linerate_lab::cache::CacheArgs;
use linerate_lab::compare::CompareArgs;
use linerate_lab::compare::suite::LoadTool;
use linerate_lab::doctor::DoctorArgs;
use linerate_lab::firstflight::{
    DEFAULT_ACCEPT_ENCODING, FirstflightArgs, INTERNET_MSS, QUIC_INITIAL_WINDOW, RFC6928_INITCWND,
};
use linerate_load::units;

/// Options of `linerate lab compare`; every suite setting can be overridden here.
#[derive(Args, Debug, Clone)]
pub(crate) struct CompareFlags {
    /// Suite file (TOML) [default: the built-in suite: floor, linerate, nginx on JSON and
    /// pipelined plaintext].
    #[arg(long)]
    suite: Option<PathBuf>,
    /// Print the built-in suite (to copy and edit) and exit.
    #[arg(long)]
    print_suite: bool,
    /// Only these servers (comma-separated names from the suite).
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// Only these workloads (comma-separated names from the suite).
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Interleaved rounds.
    #[arg(long)]
    rounds: Option<usize>,
    /// Measured load per sample, e.g. 5s.
    #[arg(long)]
    duration: Option<String>,
    /// Load before each sample, not counted.
    #[arg(long)]
    warmup: Option<String>,
    /// CPUs the servers are pinned to, e.g. 0 or 0-3.
    #[arg(long)]
    server_cpus: Option<String>,
    /// CPUs the load generator is pinned to (one thread each).
    #[arg(long)]
    load_cpus: Option<String>,
    /// Connections.
    #[arg(short = 'c', long)]
    connections: Option<usize>,
    /// Load generator.
    #[arg(long, value_enum)]
    load: Option<LoadToolFlag>,
    /// Server the ratios are taken against.
    #[arg(long)]
    baseline: Option<String>,
    /// Skip the fixed-rate latency runs.
    #[arg(long)]
    no_latency: bool,
    /// Also count user-space instructions per request under valgrind callgrind.
    #[arg(long)]
    instructions: bool,
    /// Output directory [default: lab-out/compare-<UTC date-time>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Splice the report into this Markdown file between the lab's markers (appended if absent).
    #[arg(long)]
    update_docs: Option<PathBuf>,
}

/// Options of `linerate lab cache`: Redis against memcached with the same client and objects.
#[derive(Args, Debug, Clone)]
pub(crate) struct CacheFlags {
    /// Only these servers (comma-separated: memcached-tN, redis, redis-ioN).
    #[arg(long, value_delimiter = ',')]
    servers: Vec<String>,
    /// Value sizes of the GET and SET workloads, bytes (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = linerate_lab::cache::DEFAULT_SIZES)]
    sizes: Vec<usize>,
    /// Objects stored for memory per object, and keys of the memory-limit run.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    objects: u64,
    /// Keys of the GET and SET workloads (each GET run stores them all first).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Measured load per sample, e.g. 5s.
    #[arg(long, default_value = "5s", value_parser = units::duration)]
    duration: Duration,
    /// Load before each sample, not counted.
    #[arg(long, default_value = "1s", value_parser = units::duration)]
    warmup: Duration,
    /// Requests per second of the latency runs (timed from the intended send); values over
    /// 4 KiB get the same bytes per second instead; 0: no latency runs.
    #[arg(long, default_value_t = 20_000.0)]
    latency_rate: f64,
    /// Connections (shared by the load CPUs).
    #[arg(short = 'c', long, default_value_t = 32)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// memcached's threads (-t) and Redis's I/O threads [default: the server CPUs; at most
    /// as many; with one, Redis with I/O threads is left out].
    #[arg(long)]
    threads: Option<usize>,
    /// CPUs the servers are pinned to.
    #[arg(long, default_value = "0", value_parser = units::cpus)]
    server_cpus: super::CpuList,
    /// CPUs of the load client (one thread each).
    #[arg(long, default_value = "1", value_parser = units::cpus)]
    load_cpus: super::CpuList,
    /// Memory limit of the GET/SET and memory runs, MB.
    #[arg(long, default_value_t = 1024)]
    memory_mb: u64,
    /// Memory limit of the run at the limit (evictions, hit ratio), MB.
    #[arg(long, default_value_t = 64)]
    limit_mb: u64,
    /// Zipf exponent of the keys in the run at the limit.
    #[arg(long, default_value_t = 0.99)]
    zipf: f64,
    /// Value size of the run at the limit, bytes.
    #[arg(long, default_value_t = 4096)]
    evict_value_bytes: usize,
    /// The redis-server program.
    #[arg(long, default_value = "redis-server")]
    redis_server: String,
    /// The memcached program.
    #[arg(long, default_value = "memcached")]
    memcached: String,
    /// Output directory [default: lab-out/cache-<UTC date-time>].
    #[arg(long)]
    out: Option<PathBuf>,
}

impl From<CacheFlags> for CacheArgs {
    fn from(f: CacheFlags) -> CacheArgs {
        CacheArgs {
            servers: f.servers,
            sizes: f.sizes,
            objects: f.objects,
            keys: f.keys,
            rounds: f.rounds,
            duration: f.duration,
            warmup: f.warmup,
            latency_rate: (f.latency_rate > 0.0).then_some(f.latency_rate),
            connections: f.connections,
            pipeline: f.pipeline,
            threads: f.threads,
            server_cpus: f.server_cpus,
            load_cpus: f.load_cpus,
            memory_mb: f.memory_mb,
            limit_mb: f.limit_mb,
            zipf: f.zipf,
            evict_value_bytes: f.evict_value_bytes,
            programs: linerate_lab::cache::servers::Programs {
                redis: f.redis_server,
                memcached: f.memcached,
            },
            out: f.out,
        }
    }
}

/// `linerate lab doctor`: audit this host (read-only) against the nine tuning steps.
#[derive(Args, Debug, Clone)]
pub(crate) struct DoctorFlags {
    /// Print the findings as JSON instead of a text report.
    #[arg(long)]
    json: bool,
    /// Audit a captured tree instead of this host: DIR/proc, DIR/sys, DIR/lib/modules stand in for
    /// the real ones and DIR/commands/<argv joined by '_'> for command outputs (tests, fixtures).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// The CPUs the server would use, e.g. 0-3,8 (default: this process's allowed CPUs).
    #[arg(long, value_name = "LIST", value_parser = units::cpus)]
    cpus: Option<super::CpuList>,
}

/// Measure core-to-core latency: compare-and-swap ping-pong between every pair of CPUs.
#[derive(Args, Debug, Clone)]
pub(crate) struct C2cFlags {
    /// CPUs to measure, e.g. `0-3,8` (default: every CPU this process may run on).
    #[arg(long, value_parser = units::cpus)]
    cores: Option<super::CpuList>,
    /// Round trips per sample (default: chosen to fit --budget, at most 20000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    round_trips: Option<u64>,
    /// Samples per pair; the first is a warm-up and is discarded.
    #[arg(long, default_value_t = DEFAULT_SAMPLES,
          value_parser = clap::value_parser!(u32).range(i64::from(MIN_SAMPLES)..))]
    samples: u32,
    /// Time the whole run should fit in; picks the round trips per sample when --round-trips is
    /// not given (e.g. 60s, 2m).
    #[arg(long, default_value = DEFAULT_BUDGET, value_parser = units::duration)]
    budget: Duration,
    /// Directory for c2c.csv, c2c-err.csv, c2c.json, c2c.png and c2c.svg.
    #[arg(long, default_value = DEFAULT_OUT)]
    out: PathBuf,
    /// Print the matrix as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// Does a response — for an HTML page, the page plus its same-origin resources — fit the
/// initial congestion window (RFC 6928)? Counts the bytes on the wire (compressed as sent),
/// reports the connection's MSS and judges at the assumed Internet MSS. Exit status 1 when
/// it does not fit.
#[derive(Args, Debug, Clone)]
pub(crate) struct FirstflightFlags {
    /// The page to check: http://host[:port]/path or https://host[:port]/path (for https the
    /// bytes counted are the TLS records the server sends after the handshake).
    url: String,
    /// Accept-Encoding to send; "" sends none, "identity" asks for no compression.
    #[arg(long, default_value = DEFAULT_ACCEPT_ENCODING)]
    encoding: String,
    /// MSS the verdict assumes, in payload bytes per segment (1460 = Ethernet less IPv4+TCP
    /// headers). The connection's own MSS is reported beside it.
    #[arg(long, default_value_t = INTERNET_MSS, value_parser = clap::value_parser!(u32).range(1..))]
    mss: u32,
    /// Initial congestion window in segments (RFC 6928: 10).
    #[arg(long, default_value_t = RFC6928_INITCWND, value_parser = clap::value_parser!(u32).range(1..))]
    initcwnd: u32,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Only the page: do not scan HTML for resources.
    #[arg(long)]
    no_resources: bool,
    /// https: do not verify the server's certificate (self-signed test servers), like curl -k.
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    insecure: bool,
    /// https: trust only the CA certificates in this PEM file [default: the webpki roots].
    #[arg(long, value_name = "FILE")]
    cacert: Option<std::path::PathBuf>,
    /// Over HTTP/3 instead (https:// URLs; the page only), measured rather than computed:
    /// complete the QUIC handshake, send the GET, then acknowledge nothing and count the
    /// datagrams the server sends until 10 ms of quiet, against --initial-window. The window
    /// may have grown by the handshake's acknowledged bytes; the report says how much it could.
    #[arg(long, conflicts_with_all = ["mss", "initcwnd"])]
    http3: bool,
    /// With --http3: the server's initial congestion window in bytes of UDP payload
    /// (RFC 9002 §7.2; what linerate serve --quic uses).
    #[arg(long, value_name = "BYTES", default_value_t = QUIC_INITIAL_WINDOW, requires = "http3")]
    initial_window: u64,
}

/// Which program generates the load (`--load`).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum LoadToolFlag {
    /// wrk when it is on PATH, else linerate load.
    Auto,
    Wrk,
    Linerate,
}

impl From<CompareFlags> for CompareArgs {
    fn from(f: CompareFlags) -> CompareArgs {
        CompareArgs {
            suite: f.suite,
            print_suite: f.print_suite,
            servers: f.servers,
            workloads: f.workloads,
            rounds: f.rounds,
            duration: f.duration,
            warmup: f.warmup,
            server_cpus: f.server_cpus,
            load_cpus: f.load_cpus,
            connections: f.connections,
            load: f.load.map(|l| match l {
                LoadToolFlag::Auto => LoadTool::Auto,
                LoadToolFlag::Wrk => LoadTool::Wrk,
                LoadToolFlag::Linerate => LoadTool::Linerate,
            }),
            baseline: f.baseline,
            no_latency: f.no_latency,
            instructions: f.instructions,
            out: f.out,
            update_docs: f.update_docs,
        }
    }
}

impl From<DoctorFlags> for DoctorArgs {
    fn from(f: DoctorFlags) -> DoctorArgs {
        DoctorArgs {
            json: f.json,
            root: f.root,
            cpus: f.cpus,
        }
    }
}

impl From<C2cFlags> for C2cArgs {
    fn from(f: C2cFlags) -> C2cArgs {
        C2cArgs {
            cores: f.cores,
            round_trips: f.round_trips,
            samples: f.samples,
            budget: f.budget,
            out: f.out,
            json: f.json,
        }
    }
}

impl From<FirstflightFlags> for FirstflightArgs {
    fn from(f: FirstflightFlags) -> FirstflightArgs {
        FirstflightArgs {
            url: f.url,
            encoding: f.encoding,
            mss: f.mss,
            initcwnd: f.initcwnd,
            json: f.json,
            no_resources: f.no_resources,
            insecure: f.insecure,
            cacert: f.cacert,
            http3: f.http3,
            initial_window: f.initial_window,
        }
    }
}

#[derive(Args)]
pub(crate) struct FloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Canned response to send.
    #[arg(long, value_enum, default_value_t = FloorBody::Json)]
    response: FloorBody,
    /// The proxy floor instead: relay every client, byte for byte, to this upstream over a
    /// connection of its own, kept for the client's life (the least a proxy can cost).
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "response")]
    proxy: Option<SocketAddr>,
    /// Pin the thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FloorBody {
    Json,
    Plaintext,
}

/// `linerate lab doctor`: prints the audit. Exits 0 whatever the findings: an audit, not a gate.
pub(crate) fn doctor(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let text = linerate_lab::doctor::report(&args)?;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the report to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// `linerate lab firstflight`: prints the report (text or JSON). Exit status 0 when what was
/// measured fits the initial window at the assumed MSS, 1 when it does not.
pub(crate) fn firstflight(args: FirstflightArgs) -> anyhow::Result<ExitCode> {
    let options = linerate_lab::firstflight::Options::from(&args);
    if args.http3 {
        let report =
            linerate_lab::firstflight::check_quic(&args.url, &options, args.initial_window)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!(
                "{}",
                linerate_lab::firstflight::report::render_quic(&report)
            );
        }
        return Ok(if report.fits {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let report = linerate_lab::firstflight::check(&args.url, &options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", linerate_lab::firstflight::report::render(&report));
    }
    Ok(if report.fits() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `linerate lab floor`.
pub(crate) fn floor(a: &FloorArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("info");
    if let Some(upstream) = a.proxy {
        linerate_lab::relay::run(&linerate_lab::relay::RelayConfig {
            addr: a.addr,
            upstream,
            cpu: a.cpu,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    linerate_lab::floor::run(&linerate_lab::floor::FloorConfig {
        addr: a.addr,
        response: match a.response {
            FloorBody::Json => linerate_lab::floor::FloorResponse::Json,
            FloorBody::Plaintext => linerate_lab::floor::FloorResponse::Plaintext,
        },
        cpu: a.cpu,
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `lab arena`'s rounds by default: 29 loaded rows (linerate alone: every profile but the two
/// gateway shapes) × 3 rounds × 6 s (1 s warm-up, 5 s measured) is 9 minutes of load; with
/// every peer (HttpArena's engines of bench/arena-peers, nginx, h2o and caddy) 99 rows, under
/// 30 minutes on 2 cores with the starts and the validation (docs/lab/arena.md).
const DEFAULT_ARENA_ROUNDS: u64 = 3;

/// Options of `linerate lab arena`: HttpArena's profiles validated (and, later, loaded and
/// scored) against linerate's demo or a server you started.
#[derive(Args, Debug, Clone)]
pub(crate) struct ArenaFlags {
    /// Validate only (HttpArena's checks with fresh random inputs); no load.
    #[arg(long)]
    validate_only: bool,
    /// Only these profiles (comma-separated HttpArena names, e.g. baseline,json-comp).
    #[arg(long, value_delimiter = ',')]
    profile: Vec<String>,
    /// `linerate` (the demo, started here on free ports with fixtures of its own) or the
    /// http://HOST:PORT of a server you started (describe its other listeners below).
    #[arg(long, default_value = "linerate")]
    server: String,
    /// A given server's TLS port (HTTP/1.1 and h2 by ALPN), on the --server host.
    #[arg(long, value_name = "PORT")]
    tls_port: Option<u16>,
    /// A given server's h2c (prior knowledge only) port.
    #[arg(long, value_name = "PORT")]
    h2c_port: Option<u16>,
    /// A given server serves HTTP/3 on the TLS port's UDP twin.
    #[arg(long)]
    quic: bool,
    /// A given server's static directory (served under /static): sizes and freshness (its
    /// checks replace reset.css, app.js, hero.webp and their .br/.gz siblings there for up
    /// to 2 s each, then put the originals back).
    #[arg(long, value_name = "DIR")]
    static_dir: Option<PathBuf>,
    /// A given server's certificate (PEM): the TLS posture checks it is the one served.
    #[arg(long, value_name = "FILE")]
    cert: Option<PathBuf>,
    /// A given server's /json dataset (HttpArena's dataset.json): items checked field by field.
    #[arg(long, value_name = "FILE")]
    dataset: Option<PathBuf>,
    /// A given server has the database routes (async-db, crud).
    #[arg(long)]
    database: bool,
    /// The demo's PostgreSQL (`scripts/pg.sh start` makes one); without it the database
    /// profiles are NOT RUN.
    #[arg(long, value_name = "URL")]
    database_url: Option<String>,
    /// The demo's Redis or memcached tier behind its item cache (redis://HOST:PORT).
    #[arg(long, value_name = "URL")]
    cache_tier: Option<String>,
    /// The demo's worker threads (and each peer's workers); the servers are pinned to as many
    /// CPUs.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// The demo's I/O backend (`serve --io`) [default: serve's, epoll].
    #[arg(long, value_name = "BACKEND", value_enum)]
    io: Option<super::serve::IoBackend>,
    /// Seed of the random inputs (printed by every run, to repeat one).
    #[arg(long)]
    seed: Option<u64>,
    /// Also write the validation (and the load's figures) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Servers of the run: `linerate` (the --server above, always in it) and peers the arena
    /// starts on fixtures of their own, each on the profiles it can enter: nginx, h2o, caddy
    /// (static files); HttpArena's leading engines written here (`scripts/peers.sh arena`):
    /// actix, hyper, may-minihttp, fasthttp, h2o-h2c, caddy-handler, uring-c, tonic, grpc-go,
    /// gobwas-ws, tungstenite; actix-db (async-db, fortunes), axum and haproxy (each "not
    /// entered" with why where it has no route of HttpArena's).
    #[arg(long, value_delimiter = ',', default_value = "linerate")]
    servers: Vec<String>,
    /// Measured load per profile and round, e.g. 5s. 4 s (1 s of warm-up before each) keeps
    /// the whole run with every peer (108 loaded rows, 3 rounds each) under 30 minutes on a
    /// 2-core machine, where 5 s (18.4 s a row, as measured with 97 rows) would take 33.
    #[arg(long, default_value = "4s", value_parser = units::duration)]
    duration: Duration,
    /// Interleaved rounds of each server per profile (the report gives each figure's median
    /// and the req/s and CPU min–max); the default keeps the whole run on a 2-core machine
    /// under 30 minutes with every peer.
    #[arg(long, default_value_t = DEFAULT_ARENA_ROUNDS, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// Load before each measured run, not counted.
    #[arg(long, default_value = "1s", value_parser = units::duration)]
    warmup: Duration,
    /// Every profile at this many connections [default: HttpArena's, scaled by CPUs / 64].
    #[arg(short = 'c', long)]
    connections: Option<usize>,
    /// Write report.md, arena.json and the load's charts into this directory.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Splice the Markdown report into this file between the arena's markers (appended if
    /// absent), e.g. docs/lab/arena.md.
    #[arg(long, value_name = "FILE")]
    update_docs: Option<PathBuf>,
}

impl ArenaFlags {
    fn args(self) -> anyhow::Result<linerate_lab::arena::ArenaArgs> {
        use linerate_lab::arena::{
            ArenaArgs, Server,
            peers::Peer,
            target::{Given, Spawn},
        };
        let mut peers = Vec::new();
        for name in self.servers.iter().filter(|s| s.as_str() != "linerate") {
            let peer = Peer::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Peer::ALL.iter().map(|p| p.name()).collect();
                anyhow::anyhow!(
                    "--servers {name}: expected linerate or a peer: {}",
                    known.join(", ")
                )
            })?;
            if !peers.contains(&peer) {
                peers.push(peer);
            }
        }
        let workers = self.workers;
        let server = if self.server == "linerate" {
            Server::Demo(Spawn {
                bin: std::env::current_exe().context("the path of this linerate binary")?,
                database_url: self.database_url,
                cache_tier: self.cache_tier,
                workers: self.workers,
                // serve's own name for it.
                io: self.io.map(|b| {
                    clap::ValueEnum::to_possible_value(&b)
                        .expect("no backend is hidden")
                        .get_name()
                        .to_string()
                }),
            })
        } else {
            let host = self
                .server
                .trim_start_matches("http://")
                .trim_end_matches('/');
            let h1: SocketAddr = host.parse().map_err(|_| {
                anyhow::anyhow!(
                    "--server {}: expected linerate or http://IP:PORT",
                    self.server
                )
            })?;
            let on = |p: Option<u16>| p.map(|p| SocketAddr::new(h1.ip(), p));
            Server::Given(
                host.to_string(),
                Given {
                    h1: Some(h1),
                    tls: on(self.tls_port),
                    h2c: on(self.h2c_port),
                    quic: self.quic,
                    static_dir: self.static_dir,
                    cert: self.cert,
                    dataset: self.dataset,
                    database: self.database,
                    pid: None,
                },
            )
        };
        Ok(ArenaArgs {
            server,
            profiles: self.profile,
            seed: self.seed,
            peers,
            cpus: linerate_lab::arena::server_cpus(workers),
        })
    }
}

/// `linerate lab arena`: the validation table, then (unless --validate-only) the load and
/// its table.
pub(crate) fn arena(f: ArenaFlags) -> anyhow::Result<ExitCode> {
    use linerate_lab::arena::{load::Sizing, report};
    let (json, out_dir, docs) = (f.json.clone(), f.out.clone(), f.update_docs.clone());
    let validate_only = f.validate_only;
    let (duration, warmup, connections, rounds) = (f.duration, f.warmup, f.connections, f.rounds);
    let args = f.args()?;
    // The load on the CPUs the servers are not pinned to (MEASURING.md).
    let allowed = linerate_lab::c2c::measure::allowed_cpus();
    let sizing = (!validate_only).then(|| Sizing {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_cpus: linerate_lab::arena::load::load_cpus(&allowed, &args.cpus),
        duration,
        warmup,
        connections,
        rounds: rounds as usize,
    });
    let run = linerate_lab::arena::run(&args, sizing.clone(), |line| eprintln!("{line}"))
        .map_err(|e| anyhow::anyhow!(e))?;
    let rows = &run.validation;
    let mut text = format!("HttpArena validation (seed {})\n", run.seed);
    text += &report::table(rows);
    text += &report::failures(rows);
    if sizing.is_some() {
        text += "\nLoad (HttpArena's shapes scaled to this machine's CPUs; server CPU from its cgroup, or /proc's ticks where none could be made; medians of the rounds)\n";
        text += &report::load_table(&run.load);
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{text}")?;
    if let Some(path) = json {
        std::fs::write(&path, serde_json::to_string_pretty(&run)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let machine = || linerate_lab::compare::machine::describe(&[]);
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("report.md"), report::markdown(&run, &machine()))
            .with_context(|| format!("writing {}", dir.display()))?;
        std::fs::write(dir.join("arena.json"), serde_json::to_string_pretty(&run)?)
            .with_context(|| format!("writing {}", dir.display()))?;
        report::charts(&dir, &run.load)?;
        writeln!(out, "report, JSON and charts in {}", dir.display())?;
    }
    if let Some(path) = docs {
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let (begin, end) = report::docs_markers();
        let text = linerate_lab::compare::report::splice_between(
            &doc,
            begin,
            end,
            &report::markdown(&run, &machine()),
        );
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    // A peer's failure is a finding about the peer, reported above; only the server under
    // test's failures make the exit status (CI validates linerate).
    let is_peer =
        |r: &&report::Validation| linerate_lab::arena::peers::Peer::parse(&r.server).is_some();
    let peer_failed = rows
        .iter()
        .filter(|r| r.result == "FAILED" && is_peer(r))
        .count();
    if peer_failed > 0 {
        writeln!(out, "{peer_failed} peer profile(s) FAILED validation")?;
    }
    let failed = rows
        .iter()
        .filter(|r| r.result == "FAILED" && !is_peer(r))
        .count();
    if failed > 0 {
        writeln!(out, "{failed} profile(s) FAILED validation")?;
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct C2c {
        #[command(flatten)]
        args: C2cFlags,
    }

    #[derive(Parser)]
    struct Arena {
        #[command(flatten)]
        args: ArenaFlags,
    }

    #[test]
    fn arena_command_line_parses() {
        use linerate_lab::arena::Server;
        let parse = |argv: &[&str]| Arena::try_parse_from(argv).map(|a| a.args);
        let a = parse(&[
            "arena",
            "--validate-only",
            "--profile",
            "baseline,json-comp",
        ])
        .unwrap();
        assert_eq!(a.profile, ["baseline", "json-comp"]);
        assert_eq!(a.rounds, DEFAULT_ARENA_ROUNDS);
        assert_eq!(parse(&["arena", "--rounds", "5"]).unwrap().rounds, 5);
        assert!(parse(&["arena", "--rounds", "0"]).is_err());
        let args = a.args().unwrap();
        assert!(matches!(args.server, Server::Demo(_)));
        let given = parse(&[
            "arena",
            "--server",
            "http://127.0.0.1:8080/",
            "--tls-port",
            "8443",
        ])
        .unwrap()
        .args()
        .unwrap();
        let Server::Given(_, g) = given.server else {
            panic!("a given server")
        };
        assert_eq!(g.h1, Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(g.tls, Some("127.0.0.1:8443".parse().unwrap()));
        let err = parse(&["arena", "--server", "nginx"])
            .unwrap()
            .args()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--server nginx: expected linerate or http://IP:PORT"
        );
        assert!(parse(&["arena", "--duration", "x"]).is_err());
        let a = parse(&["arena", "--servers", "linerate,nginx,caddy,nginx"])
            .unwrap()
            .args()
            .unwrap();
        use linerate_lab::arena::peers::Peer;
        assert_eq!(a.peers, [Peer::Nginx, Peer::Caddy]);
        let err = parse(&["arena", "--servers", "apache"])
            .unwrap()
            .args()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "--servers apache: expected linerate or a peer: nginx, h2o, caddy, haproxy, \
             actix, hyper, may-minihttp, fasthttp, h2o-h2c, caddy-handler, uring-c, tonic, \
             grpc-go, gobwas-ws, tungstenite, actix-db, axum"
        );
    }

    #[test]
    fn c2c_command_line_parses() {
        let parse = |argv: &[&str]| C2c::try_parse_from(argv).map(|c| C2cArgs::from(c.args));
        let args = parse(&["c2c", "--cores", "0-3,8", "--round-trips", "100"]).unwrap();
        assert_eq!(args.cores, Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(args.round_trips, Some(100));
        assert_eq!(args.samples, DEFAULT_SAMPLES);
        assert_eq!(args.budget, Duration::from_secs(60));
        assert_eq!(args.out, PathBuf::from(DEFAULT_OUT));
        assert!(parse(&["c2c", "--samples", "2"]).is_err());
        assert!(parse(&["c2c", "--round-trips", "0"]).is_err());
        assert!(parse(&["c2c", "--cores", "3-1"]).is_err());
    }
}
