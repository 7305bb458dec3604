//! The arena's peers, each started by the arena (as `lab compare` starts them: free ports,
//! pinned to the server CPUs, its own process group) on fixtures of its own, and which
//! profiles each can enter: nginx, h2o and caddy (a config rendered from a bench/arena-*
//! template) on the static profiles; the Rust peers bench/ builds (bench/actix-db,
//! bench/axum-tokio) where they have a route at the profile's path; HAProxy, a proxy only,
//! on none (the arena enters no gateway shape).
//!
//! A peer enters only the profiles whose contract it can answer; the others are "not entered"
//! with the reason, never passed. A Rust peer's route that fails the profile's checks is "not
//! entered" too ([`Peer::computes`]: it was not written to HttpArena's contract), and never
//! loaded. It owns no checks and no load: those are the same for every server.

use std::collections::BTreeMap;
use std::time::Duration;

use super::profiles::{Family, Profile};
use super::rng::Rng;
use super::target::Target;
use crate::compare::server::{self, on_path};
use crate::compare::suite::ServerSpec;

/// How long a peer may take to accept its first connection.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a peer is not entered on the profiles that compute their answers.
const COMPUTES: &str = "a static-file server: it cannot compute /baseline's sums, the random \
                        JSON, uploads, echoes, WebSocket, gRPC or database answers";

/// A server the arena can start beside linerate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    Nginx,
    H2o,
    Caddy,
    /// HAProxy: a proxy, for HttpArena's gateway shapes.
    Haproxy,
    /// bench/actix-db: actix-web 4 + tokio-postgres (TechEmpower's database tests and
    /// HttpArena's /async-db).
    Actix,
    /// bench/axum-tokio: axum 0.8 on one tokio runtime (issue P's handlers).
    Axum,
}

/// Why HAProxy enters no profile here.
const PROXY_ONLY: &str = "a proxy: it answers nothing of its own, and the arena enters no \
                          gateway shape (scripts/gateway.sh runs those, linerate's included)";
/// What bench/actix-db answers, against HttpArena's routes.
const ACTIX_ROUTES: &str = "bench/actix-db serves TechEmpower's /db, /queries, /updates, \
                            /plaintext and /json, and /fortunes and HttpArena's /async-db: no \
                            route at this profile's path";
/// Why bench/axum-tokio enters no profile.
const AXUM_ROUTES: &str = "bench/axum-tokio serves issue P's /sync, /none, /timer and /fetch \
                           only: no route of HttpArena's";

impl Peer {
    pub const ALL: [Peer; 6] = [
        Peer::Nginx,
        Peer::H2o,
        Peer::Caddy,
        Peer::Haproxy,
        Peer::Actix,
        Peer::Axum,
    ];

    /// Its name on the command line and in the tables (also its program, for the installed
    /// ones).
    pub fn name(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Caddy => "caddy",
            Peer::Haproxy => "haproxy",
            Peer::Actix => "actix",
            Peer::Axum => "axum",
        }
    }

    /// A server that computes its answers (a Rust peer): a profile whose checks it fails is
    /// one it was not written for, "not entered" with the failure as why, never loaded.
    pub fn computes(self) -> bool {
        matches!(self, Peer::Actix | Peer::Axum)
    }

    pub fn parse(name: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it can answer `p`'s contract here, or why not.
    pub fn enters(self, p: &Profile) -> Result<(), &'static str> {
        match self {
            Peer::Haproxy => return Err(PROXY_ONLY),
            Peer::Axum => return Err(AXUM_ROUTES),
            // Its /fortunes reads the `fortune` of the database it is given, as the demo's.
            Peer::Actix if matches!(p.family, Family::AsyncDb | Family::Fortunes) => {
                return Ok(());
            }
            Peer::Actix => return Err(ACTIX_ROUTES),
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
            Peer::Caddy | Peer::Haproxy | Peer::Actix | Peer::Axum => "",
        }
    }

    /// Its config template (None: configured by its command line).
    fn template(self) -> Option<&'static str> {
        match self {
            Peer::Nginx => Some(include_str!("../../../../bench/arena-nginx.conf.in")),
            Peer::H2o => Some(include_str!("../../../../bench/arena-h2o.conf.in")),
            Peer::Caddy => Some(include_str!("../../../../bench/arena-caddy.Caddyfile.in")),
            Peer::Haproxy | Peer::Actix | Peer::Axum => None,
        }
    }

    /// A Rust peer's binary, as `scripts/peers.sh rust` builds it (under bench/, from the
    /// current directory or this source tree); None for the installed ones.
    fn built(self) -> Option<&'static str> {
        match self {
            Peer::Actix => Some("bench/actix-db/target/release/actix-db"),
            Peer::Axum => Some("bench/axum-tokio/target/release/axum-tokio"),
            _ => None,
        }
    }

    /// Where its program is, or why it is not there.
    fn program(self) -> Result<String, String> {
        let Some(rel) = self.built() else {
            return if on_path(self.name()) {
                Ok(self.name().to_string())
            } else {
                Err(format!("{} is not installed (not on PATH)", self.name()))
            };
        };
        let tree = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        [std::path::PathBuf::from(rel), tree.join(rel)]
            .into_iter()
            .find(|p| p.is_file())
            .map(|p| p.display().to_string())
            .ok_or_else(|| format!("{rel} is not built (scripts/peers.sh rust)"))
    }

    fn spec(self, program: &str) -> ServerSpec {
        let argv: &[&str] = match self {
            Peer::Nginx => &[
                "nginx",
                "-p",
                "{rundir}",
                "-e",
                "{rundir}/error.log",
                "-c",
                "{config}",
            ],
            Peer::H2o => &["h2o", "-c", "{config}"],
            Peer::Caddy => &[
                "caddy",
                "run",
                "--adapter",
                "caddyfile",
                "--config",
                "{config}",
            ],
            Peer::Actix => &[
                "actix-db",
                "--addr",
                "127.0.0.1:{port}",
                "--workers",
                "{workers}",
            ],
            Peer::Axum => &["axum-tokio", "127.0.0.1:{port}"],
            Peer::Haproxy => &["haproxy"],
        };
        let mut argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        argv[0] = program.to_string();
        let mut env = BTreeMap::new();
        if self == Peer::Caddy {
            env.insert("GOMAXPROCS".into(), "{workers}".into());
            for k in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
                env.insert(k.into(), "{rundir}".into());
            }
        }
        if self == Peer::Actix {
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

    /// Starts it on fresh fixtures, pinned to `cpus` with one worker each (actix-db on
    /// `database_url`); `Err` says why it could not (not installed or built, no database, or
    /// it did not start).
    pub fn spawn(
        self,
        cpus: &[usize],
        database_url: Option<&str>,
        rng: &mut Rng,
    ) -> Result<Target, String> {
        let program = self.program()?;
        if self == Peer::Actix && database_url.is_none() {
            return Err("needs PostgreSQL (--database-url), not given".into());
        }
        let fixtures = Target::fixtures(self.name(), rng)?;
        let spec = self.spec(&program);
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
                let mut t = Target::peer(self.name(), running, fixtures, self == Peer::Caddy);
                t.database = self == Peer::Actix;
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
        // The Rust peers where they have a route at the profile's path (actix-db's
        // /async-db), HAProxy nowhere; each "not entered" says why.
        assert_eq!(entered(Peer::Actix), ["async-db", "fortunes"]);
        assert!(entered(Peer::Axum).is_empty());
        assert!(entered(Peer::Haproxy).is_empty());
        let why = |peer: Peer, name: &str| peer.enters(find(name).unwrap()).unwrap_err();
        assert!(why(Peer::Actix, "baseline").contains("/plaintext"));
        assert!(why(Peer::Axum, "json").contains("/timer"));
        assert!(why(Peer::Haproxy, "gateway-64").contains("gateway"));
        assert!(Peer::Actix.computes() && Peer::Axum.computes() && !Peer::Nginx.computes());
        assert_eq!(Peer::parse("h2o"), Some(Peer::H2o));
        assert_eq!(Peer::parse("actix"), Some(Peer::Actix));
        assert_eq!(Peer::parse("apache"), None);
    }
}
