//! The arena's peers: nginx, h2o and caddy, each started by the arena (as `lab compare` starts
//! them: a config rendered from a bench/arena-* template, free ports, pinned to the server
//! CPUs, its own process group) on fixtures of its own, and which profiles each can enter.
//!
//! A peer enters only the profiles whose contract it can answer (static files); the others are
//! "not entered" with the reason, never passed. It owns no checks and no load: those are the
//! same for every server.

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
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::Nginx, Peer::H2o, Peer::Caddy];

    /// Its name on the command line and in the tables (also its program).
    pub fn name(self) -> &'static str {
        match self {
            Peer::Nginx => "nginx",
            Peer::H2o => "h2o",
            Peer::Caddy => "caddy",
        }
    }

    pub fn parse(name: &str) -> Option<Peer> {
        Peer::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it can answer `p`'s contract here, or why not.
    pub fn enters(self, p: &Profile) -> Result<(), &'static str> {
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
    /// the README; nginx's missing brotli shows as fewer files compressed).
    pub fn lacks(self) -> &'static str {
        match self {
            Peer::Nginx => "no brotli_static (ngx_brotli is not installed): .gz siblings only",
            Peer::H2o => "no HTTP/3",
            Peer::Caddy => "",
        }
    }

    fn template(self) -> &'static str {
        match self {
            Peer::Nginx => include_str!("../../../../bench/arena-nginx.conf.in"),
            Peer::H2o => include_str!("../../../../bench/arena-h2o.conf.in"),
            Peer::Caddy => include_str!("../../../../bench/arena-caddy.Caddyfile.in"),
        }
    }

    fn spec(self) -> ServerSpec {
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
        };
        let mut env = BTreeMap::new();
        if self == Peer::Caddy {
            env.insert("GOMAXPROCS".into(), "{workers}".into());
            for k in ["XDG_DATA_HOME", "XDG_CONFIG_HOME", "HOME"] {
                env.insert(k.into(), "{rundir}".into());
            }
        }
        ServerSpec {
            name: self.name().into(),
            command: argv.iter().map(|s| s.to_string()).collect(),
            requires: Some(self.name().into()),
            config_template: None,
            env,
            workloads: None,
        }
    }

    /// Starts it on fresh fixtures, pinned to `cpus` with one worker each; `Err` says why it
    /// could not (not installed, or it did not start).
    pub fn spawn(self, cpus: &[usize], rng: &mut Rng) -> Result<Target, String> {
        if !on_path(self.name()) {
            return Err(format!("{} is not installed (not on PATH)", self.name()));
        }
        let fixtures = Target::fixtures(self.name(), rng)?;
        let spec = self.spec();
        let mut vars = BTreeMap::new();
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
        let tpl = fixtures.join(format!("{}.in", self.name()));
        std::fs::write(&tpl, self.template()).map_err(|e| format!("{}: {e}", tpl.display()))?;
        let spec = ServerSpec {
            config_template: Some(tpl.display().to_string()),
            ..spec
        };
        match server::start(&spec, &vars, cpus, PEER_START_TIMEOUT) {
            Ok(running) => Ok(Target::peer(
                self.name(),
                running,
                fixtures,
                self == Peer::Caddy,
            )),
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
            for peer in Peer::ALL {
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
        assert_eq!(Peer::parse("h2o"), Some(Peer::H2o));
        assert_eq!(Peer::parse("apache"), None);
    }
}
