//! The arena's peers, each started by the arena (as `lab compare` starts them: free ports,
//! pinned to the server CPUs, its own process group) on fixtures of its own, and which
//! profiles each enters:
//! - nginx, h2o and caddy (a config rendered from a bench/arena-* template) on the static
//!   profiles; HAProxy, a proxy only, on none (the arena enters no gateway shape);
//! - the engines that lead HttpArena's tables, written here on their frameworks from the
//!   registries (bench/arena-peers/, built by `scripts/peers.sh arena` into target/peers),
//!   each on the profiles its HttpArena entry enters ([`Peer::entry`]);
//! - the older Rust peers (bench/actix-db: TechEmpower's routes and /fortunes;
//!   bench/axum-tokio: the async handlers of examples/tokio_handlers.rs, no route of
//!   HttpArena's).
//!
//! A peer enters only the profiles whose contract it can answer; the others are "not entered"
//! with the reason, never passed. A peer that computes its answers and fails a profile's
//! checks is "not entered" too ([`Peer::computes`]: the failure is said, and it is never
//! loaded). It owns no checks and no load: those are the same for every server.

use std::collections::BTreeMap;
use std::time::Duration;

use super::profiles::{Family, Profile};
use super::rng::Rng;
use super::target::{Target, free_addr};
use crate::compare::server::{self, on_path};
use crate::compare::suite::ServerSpec;

/// How long a peer may take to accept its first connection.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a static-file peer is not entered on the profiles that compute their answers.
const COMPUTES: &str = "a static-file server: it cannot compute /baseline's sums, the random \
                        JSON, uploads, echoes, WebSocket, gRPC or database answers";

/// Why an engine written for the arena is not entered on a profile (the report leaves these
/// rows out of its validation table).
pub const NOT_ITS_ENTRYS: &str = "HttpArena's entry for this engine does not enter this profile";

/// Where `scripts/peers.sh arena` puts the arena peers' programs (under the current directory
/// or this source tree), each named as the peer.
const PEERS_DIR: &str = "target/peers";

/// A server the arena can start beside linerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Nginx,
    H2o,
    Caddy,
    /// HAProxy: a proxy, for HttpArena's gateway shapes.
    Haproxy,
    /// bench/arena-peers/actix: actix-web 4, HttpArena's whole route set (its actix,
    /// actix-h2c and actix-websocket entries in one program).
    Actix,
    /// bench/arena-peers/hyper: hyper 1, a current-thread tokio runtime per core.
    Hyper,
    /// bench/arena-peers/may-minihttp: the `may` coroutines with httparse.
    MayMinihttp,
    /// bench/arena-peers/fasthttp: Go's fasthttp, a listener per core.
    Fasthttp,
    /// bench/arena-peers/h2o-h2c: Debian's libh2o evloop, prior-knowledge h2c only.
    H2oH2c,
    /// bench/arena-peers/caddy: Caddy 2 built with a handler module of ours for the sums
    /// (HttpArena's caddy entry), HTTP/3 on its TLS port.
    CaddyHandler,
    /// bench/arena-peers/uring-c: C on Debian's liburing, a ring and a listener per core
    /// (HttpArena's libreactorng and ringzero kind).
    UringC,
    /// bench/tonic-grpc: tonic on one current-thread runtime.
    Tonic,
    /// bench/grpc-go-sum: grpc-go.
    GrpcGo,
    /// bench/arena-peers/gobwas-ws: gobwas/ws on net/http (HttpArena's go-websocket).
    GobwasWs,
    /// bench/ws-peers/tungstenite: tokio-tungstenite on a current-thread runtime.
    Tungstenite,
    /// bench/actix-db: actix-web 4 + tokio-postgres (TechEmpower's database tests and
    /// HttpArena's /async-db and /fortunes).
    ActixDb,
    /// bench/axum-tokio: axum 0.8 on one tokio runtime (the async handlers of
    /// crates/server/examples/tokio_handlers.rs).
    Axum,
}

/// Why HAProxy enters no profile here.
const PROXY_ONLY: &str = "a proxy: it answers nothing of its own, and the arena enters no \
                          gateway shape (scripts/gateway.sh runs those, linerate's included)";
/// Why bench/axum-tokio enters no profile.
const AXUM_ROUTES: &str = "bench/axum-tokio serves tokio_handlers.rs's /sync, /none, /timer and \
                           /fetch only: no route of HttpArena's";

/// Every paced profile: one route and contract (baseline's), so an entry on latency-1m
/// enters them all.
const PACED: [&str; 3] = ["latency-1m", "latency-10k", "latency-500k-8cpu"];
/// The three WebSocket profiles share `/ws`'s contract.
const WS: [&str; 3] = ["echo-ws", "echo-ws-pipeline", "echo-ws-limited"];

impl Peer {
    pub const ALL: [Peer; 17] = [
        Peer::Nginx,
        Peer::H2o,
        Peer::Caddy,
        Peer::Haproxy,
        Peer::Actix,
        Peer::Hyper,
        Peer::MayMinihttp,
        Peer::Fasthttp,
        Peer::H2oH2c,
        Peer::CaddyHandler,
        Peer::UringC,
        Peer::Tonic,
        Peer::GrpcGo,
        Peer::GobwasWs,
        Peer::Tungstenite,
        Peer::ActixDb,
        Peer::Axum,
    ];

    /// Its name on the command line and in the tables (also its program, for the installed
    /// ones, and its file in target/peers for the arena's).
    pub fn name(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Caddy => "caddy",
            Peer::Haproxy => "haproxy",
            Peer::Actix => "actix",
            Peer::Hyper => "hyper",
            Peer::MayMinihttp => "may-minihttp",
            Peer::Fasthttp => "fasthttp",
            Peer::H2oH2c => "h2o-h2c",
            Peer::CaddyHandler => "caddy-handler",
            Peer::UringC => "uring-c",
            Peer::Tonic => "tonic",
            Peer::GrpcGo => "grpc-go",
            Peer::GobwasWs => "gobwas-ws",
            Peer::Tungstenite => "tungstenite",
            Peer::ActixDb => "actix-db",
            Peer::Axum => "axum",
        }
    }

    /// A server that computes its answers: a profile whose checks it fails is one it was not
    /// written for, "not entered" with the failure as why, never loaded.
    pub fn computes(self) -> bool {
        !matches!(self, Peer::Nginx | Peer::H2o | Peer::Caddy | Peer::Haproxy)
    }

    pub fn parse(name: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The profiles an engine written for the arena enters: those its HttpArena entry
    /// enters (its meta.json's `tests`, docs/research/httparena-peers.md), with the paced
    /// and WebSocket siblings of one it enters; and, on the profiles no HttpArena entry
    /// enters (async, fortunes; baseline-h3 has only entries that cannot be built here),
    /// the leader that serves their contract: actix, and caddy's entry on its own HTTP/3.
    /// None for the other peers.
    pub fn entry(self) -> Option<&'static [&'static str]> {
        const H1: [&str; 3] = ["baseline", "pipelined", "limited-conn"];
        Some(match self {
            Peer::Actix => &[
                "baseline",
                "pipelined",
                "limited-conn",
                "json",
                "json-comp",
                "json-tls",
                "upload",
                "8gbit",
                "static",
                "static-tls",
                "async-db",
                "crud",
                "baseline-h2",
                "static-h2",
                "baseline-h2c",
                "json-h2c",
                WS[0],
                WS[1],
                WS[2],
                PACED[0],
                PACED[1],
                PACED[2],
                "fortunes",
                "async",
            ],
            Peer::Hyper => &[
                H1[0],
                H1[1],
                H1[2],
                "baseline-h2",
                "static-h2",
                PACED[0],
                PACED[1],
                PACED[2],
            ],
            Peer::MayMinihttp => &[H1[0], H1[1], H1[2], PACED[0], PACED[1], PACED[2]],
            Peer::Fasthttp => &[
                H1[0],
                H1[1],
                H1[2],
                "json",
                "json-comp",
                "json-tls",
                "upload",
                "8gbit",
                "static",
                "static-tls",
                "async-db",
                "crud",
                PACED[0],
                PACED[1],
                PACED[2],
            ],
            Peer::H2oH2c => &["baseline-h2c", "json-h2c"],
            Peer::CaddyHandler => &[H1[0], H1[1], H1[2], "baseline-h3"],
            Peer::UringC => &H1,
            // h2c on the HTTP/1.1 port, TLS on the TLS port, from one process.
            Peer::Tonic | Peer::GrpcGo => &["unary-grpc", "unary-grpc-tls"],
            Peer::GobwasWs | Peer::Tungstenite => &WS,
            _ => return None,
        })
    }

    /// Whether it can answer `p`'s contract here, or why not.
    pub fn enters(self, p: &Profile) -> Result<(), &'static str> {
        if let Some(entered) = self.entry() {
            return if entered.contains(&p.name) {
                Ok(())
            } else {
                Err(NOT_ITS_ENTRYS)
            };
        }
        match self {
            Peer::Haproxy => return Err(PROXY_ONLY),
            Peer::Axum => return Err(AXUM_ROUTES),
            // Its /fortunes reads the `fortune` of the database it is given, as the demo's.
            Peer::ActixDb if matches!(p.family, Family::AsyncDb | Family::Fortunes) => {
                return Ok(());
            }
            Peer::ActixDb => {
                return Err(
                    "bench/actix-db serves TechEmpower's /db, /queries, /updates, \
                            /plaintext and /json, and /fortunes and HttpArena's /async-db: \
                            no route at this profile's path",
                );
            }
            _ => {}
        }
        if p.name.starts_with("gateway") {
            return Err("a proxy in front of a server: scripts/gateway.sh runs its checks");
        }
        match (p.family, self) {
            (Family::Static | Family::StaticTls | Family::StaticH2, _) => Ok(()),
            (Family::StaticH3, Peer::Caddy) => Ok(()),
            (Family::StaticH3, Peer::Nginx) => {
                Err("nginx 1.22 here has no HTTP/3 (1.25+ built --with-http_v3_module serves it)")
            }
            (Family::StaticH3, Peer::H2o) => Err("h2o 2.2 here has no HTTP/3 (2.3+ serves it)"),
            _ => Err(COMPUTES),
        }
    }

    /// What its static configuration lacks against HttpArena's fixtures (said in the docs and
    /// docs/lab.md; nginx's missing brotli shows as fewer files compressed).
    pub fn lacks(self) -> &'static str {
        match self {
            Peer::Nginx => "no brotli_static (ngx_brotli is not installed): .gz siblings only",
            Peer::H2o => "no HTTP/3",
            _ => "",
        }
    }

    /// Its config template (None: configured by its command line).
    fn template(self) -> Option<&'static str> {
        match self {
            Peer::Nginx => Some(include_str!("../../../../bench/arena-nginx.conf.in")),
            Peer::H2o => Some(include_str!("../../../../bench/arena-h2o.conf.in")),
            Peer::Caddy => Some(include_str!("../../../../bench/arena-caddy.Caddyfile.in")),
            _ => None,
        }
    }

    /// A built peer's program, relative to the current directory or this source tree, and
    /// the command that builds it; None for the installed ones.
    fn built(self) -> Option<(String, &'static str)> {
        Some(match self {
            Peer::ActixDb => (
                "bench/actix-db/target/release/actix-db".into(),
                "scripts/peers.sh rust",
            ),
            Peer::Axum => (
                "bench/axum-tokio/target/release/axum-tokio".into(),
                "scripts/peers.sh rust",
            ),
            Peer::Nginx | Peer::H2o | Peer::Caddy | Peer::Haproxy => return None,
            _ => (
                format!("{PEERS_DIR}/{}", self.name()),
                "scripts/peers.sh arena",
            ),
        })
    }

    /// Where its program is, or why it is not there.
    fn program(self) -> Result<String, String> {
        let Some((rel, how)) = self.built() else {
            return if on_path(self.name()) {
                Ok(self.name().to_string())
            } else {
                Err(format!("{} is not installed (not on PATH)", self.name()))
            };
        };
        let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        [std::path::PathBuf::from(&rel), tree.join(&rel)]
            .into_iter()
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
            .ok_or_else(|| format!("{rel} is not built ({how})"))
    }

    /// Whether it has database routes (given `{database_url}` when there is one).
    fn has_database(self) -> bool {
        matches!(self, Peer::Actix | Peer::Fasthttp | Peer::ActixDb)
    }

    /// Its command line: the arena peers' common flags (bench/arena-peers/README.md), or
    /// the older peers' own.
    fn argv(self, database: bool) -> Vec<&'static str> {
        let mut argv = match self {
            Peer::Nginx => vec![
                "nginx",
                "-p",
                "{rundir}",
                "-e",
                "{rundir}/error.log",
                "-c",
                "{config}",
            ],
            Peer::H2o => vec!["h2o", "-c", "{config}"],
            Peer::Caddy => vec![
                "caddy",
                "run",
                "--adapter",
                "caddyfile",
                "--config",
                "{config}",
            ],
            Peer::Haproxy => vec!["haproxy"],
            Peer::ActixDb => vec![
                "actix-db",
                "--addr",
                "127.0.0.1:{port}",
                "--workers",
                "{workers}",
            ],
            Peer::Axum => vec!["axum-tokio", "127.0.0.1:{port}"],
            Peer::Tonic => vec![
                "tonic",
                "--addr",
                "127.0.0.1:{port}",
                "--tls",
                "{cert}",
                "{key}",
                "--tls-addr",
                "127.0.0.1:{tls_port}",
            ],
            Peer::GrpcGo => vec![
                "grpc-go",
                "-addr",
                "127.0.0.1:{port}",
                "-tls-cert",
                "{cert}",
                "-tls-key",
                "{key}",
                "-tls-addr",
                "127.0.0.1:{tls_port}",
            ],
            Peer::Tungstenite => vec!["tungstenite", "127.0.0.1:{port}"],
            // Prior-knowledge h2c only: its one listener is the one the arena waits on.
            Peer::H2oH2c => vec![
                "h2o-h2c",
                "--h2c",
                "127.0.0.1:{port}",
                "--dataset",
                "{fixtures}/dataset.json",
                "--workers",
                "{workers}",
            ],
            Peer::Actix
            | Peer::Hyper
            | Peer::MayMinihttp
            | Peer::Fasthttp
            | Peer::GobwasWs
            | Peer::CaddyHandler
            | Peer::UringC => {
                vec![
                    "peer",
                    "--h1",
                    "127.0.0.1:{port}",
                    "--tls",
                    "127.0.0.1:{tls_port}",
                    "--cert",
                    "{cert}",
                    "--key",
                    "{key}",
                    "--h2c",
                    "127.0.0.1:{h2c_port}",
                    "--static",
                    "{fixtures}/static",
                    "--dataset",
                    "{fixtures}/dataset.json",
                    "--workers",
                    "{workers}",
                ]
            }
        };
        if database && self.has_database() && self != Peer::ActixDb {
            argv.extend(["--database-url", "{database_url}"]);
        }
        argv
    }

    fn spec(self, program: &str, database: bool) -> ServerSpec {
        let mut argv: Vec<String> = self.argv(database).iter().map(|s| s.to_string()).collect();
        argv[0] = program.to_string();
        let mut env = BTreeMap::new();
        if matches!(self, Peer::Caddy | Peer::GrpcGo) {
            env.insert("GOMAXPROCS".into(), "{workers}".into());
        }
        if matches!(self, Peer::Caddy | Peer::CaddyHandler) {
            for k in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
                env.insert(k.into(), "{rundir}".into());
            }
        }
        if self == Peer::ActixDb {
            env.insert("DATABASE_URL".into(), "{database_url}".into());
        }
        ServerSpec {
            name: self.name().into(),
            command: argv,
            requires: Some(program.into()),
            config_template: None,
            env,
            workloads: None,
        }
    }

    /// Starts it on fresh fixtures, pinned to `cpus` with one worker each (its database
    /// routes on `database_url`); `Err` says why it could not (not installed or built, no
    /// database for actix-db, or it did not start).
    pub fn spawn(
        self,
        cpus: &[usize],
        database_url: Option<&str>,
        rng: &mut Rng,
    ) -> Result<Target, String> {
        let program = self.program()?;
        if self == Peer::ActixDb && database_url.is_none() {
            return Err("needs PostgreSQL (--database-url), not given".into());
        }
        let fixtures = Target::fixtures(self.name(), rng)?;
        let spec = self.spec(&program, database_url.is_some());
        let h2c = free_addr()?;
        let mut vars = BTreeMap::new();
        vars.insert(
            "database_url".to_string(),
            database_url.unwrap_or("").to_string(),
        );
        vars.insert("fixtures".to_string(), fixtures.display().to_string());
        vars.insert(
            "cert".to_string(),
            fixtures.join("cert.pem").display().to_string(),
        );
        vars.insert(
            "key".to_string(),
            fixtures.join("key.pem").display().to_string(),
        );
        vars.insert("h2c_port".to_string(), h2c.port().to_string());
        vars.insert("workers".to_string(), cpus.len().max(1).to_string());
        // The config is rendered here (its template is carried in the binary), then named as
        // the spec's template file so `server::start` renders it again with the ports.
        let spec = match self.template() {
            Some(text) => {
                let tpl = fixtures.join(format!("{}.in", self.name()));
                std::fs::write(&tpl, text).map_err(|e| format!("{}: {e}", tpl.display()))?;
                ServerSpec {
                    config_template: Some(tpl.display().to_string()),
                    ..spec
                }
            }
            None => spec,
        };
        match server::start(&spec, &vars, cpus, PEER_START_TIMEOUT) {
            Ok(running) => {
                let quic = matches!(self, Peer::Caddy | Peer::CaddyHandler);
                let mut t = Target::peer(self.name(), running, fixtures, quic);
                t.database = self.has_database() && database_url.is_some();
                if self.entry().is_some() {
                    t.dataset = Some(t.read_dataset()?);
                    t.h2c = Some(if self == Peer::H2oH2c { t.h1 } else { h2c });
                }
                Ok(t)
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&fixtures);
                Err(format!("{e:#}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::profiles::{PROFILES, find};

    /// Peers enter the static profiles (h3 only where they serve it) and nothing that computes
    /// an answer; each "not entered" says why.
    #[test]
    fn which_profiles_each_peer_enters() {
        let entered = |peer: Peer| -> Vec<&str> {
            PROFILES
                .iter()
                .filter(|p| peer.enters(p).is_ok())
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(entered(Peer::Nginx), ["static", "static-tls", "static-h2"]);
        assert_eq!(entered(Peer::H2o), ["static", "static-tls", "static-h2"]);
        assert_eq!(
            entered(Peer::Caddy),
            ["static", "static-tls", "static-h2", "static-h3"]
        );
        for name in [
            "baseline",
            "json",
            "latency-10k",
            "unary-grpc",
            "echo-ws",
            "crud",
        ] {
            for peer in [Peer::Nginx, Peer::H2o, Peer::Caddy] {
                assert_eq!(peer.enters(find(name).unwrap()), Err(COMPUTES), "{name}");
            }
        }
        assert!(
            Peer::Nginx
                .enters(find("static-h3").unwrap())
                .unwrap_err()
                .contains("HTTP/3")
        );
        assert!(
            Peer::Nginx
                .enters(find("gateway-64").unwrap())
                .unwrap_err()
                .contains("proxy")
        );
        // The older Rust peers where they have a route at the profile's path (actix-db's
        // /async-db and /fortunes), HAProxy nowhere; each "not entered" says why.
        assert_eq!(entered(Peer::ActixDb), ["async-db", "fortunes"]);
        assert!(entered(Peer::Axum).is_empty());
        assert!(entered(Peer::Haproxy).is_empty());
        let why = |peer: Peer, name: &str| peer.enters(find(name).unwrap()).unwrap_err();
        assert!(why(Peer::ActixDb, "baseline").contains("/plaintext"));
        assert!(why(Peer::Axum, "json").contains("/timer"));
        assert!(why(Peer::Haproxy, "gateway-64").contains("gateway"));
        assert!(Peer::ActixDb.computes() && Peer::Hyper.computes() && !Peer::Nginx.computes());
        assert_eq!(Peer::parse("h2o"), Some(Peer::H2o));
        assert_eq!(Peer::parse("actix"), Some(Peer::Actix));
        assert_eq!(Peer::parse("may-minihttp"), Some(Peer::MayMinihttp));
        assert_eq!(Peer::parse("apache"), None);
    }

    /// The engines written for the arena enter what their HttpArena entries enter (with the
    /// paced and WebSocket siblings), every name a profile of the arena's; every profile but
    /// the gateway shapes, production-stack and static-h3 (caddy, a file server, enters it)
    /// has one of HttpArena's leaders entered.
    #[test]
    fn the_engines_enter_their_entries_profiles() {
        let entered = |peer: Peer| -> Vec<&str> {
            PROFILES
                .iter()
                .filter(|p| peer.enters(p).is_ok())
                .map(|p| p.name)
                .collect()
        };
        for peer in Peer::ALL {
            for name in peer.entry().unwrap_or(&[]) {
                assert!(find(name).is_some(), "{}: {name}", peer.name());
            }
        }
        assert_eq!(
            entered(Peer::Hyper),
            [
                "baseline",
                "pipelined",
                "limited-conn",
                "baseline-h2",
                "static-h2",
                "latency-1m",
                "latency-10k",
                "latency-500k-8cpu"
            ]
        );
        assert_eq!(entered(Peer::H2oH2c), ["baseline-h2c", "json-h2c"]);
        assert_eq!(
            entered(Peer::CaddyHandler),
            ["baseline", "pipelined", "limited-conn", "baseline-h3"]
        );
        assert_eq!(
            entered(Peer::UringC),
            ["baseline", "pipelined", "limited-conn"]
        );
        let actix = entered(Peer::Actix);
        assert!(actix.contains(&"fortunes") && actix.contains(&"async"));
        assert_eq!(entered(Peer::Tonic), ["unary-grpc", "unary-grpc-tls"]);
        assert_eq!(
            entered(Peer::GobwasWs),
            ["echo-ws", "echo-ws-pipeline", "echo-ws-limited"]
        );
        assert!(
            Peer::MayMinihttp
                .enters(find("json").unwrap())
                .unwrap_err()
                .contains("HttpArena's entry")
        );
        let engines = [
            Peer::Actix,
            Peer::Hyper,
            Peer::MayMinihttp,
            Peer::Fasthttp,
            Peer::H2oH2c,
            Peer::CaddyHandler,
            Peer::UringC,
            Peer::Tonic,
            Peer::GrpcGo,
            Peer::GobwasWs,
        ];
        let without: Vec<&str> = PROFILES
            .iter()
            .filter(|p| engines.iter().all(|e| e.enters(p).is_err()))
            .map(|p| p.name)
            .collect();
        assert_eq!(
            without,
            ["static-h3", "gateway-64", "gateway-h3", "production-stack"]
        );
    }
}
