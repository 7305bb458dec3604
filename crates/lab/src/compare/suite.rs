//! The suite file: which servers to compare, on which workloads, and how to measure them.
//!
//! TOML, parsed strictly (unknown keys are errors, so a typo is not silently ignored). A default
//! suite ships inside the binary (`suites/default.toml`). This module only parses, validates and
//! expands placeholders; it starts nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};

/// The suite compiled into the binary: the first comparison's table (floor, linerate, nginx ×
/// JSON, pipelined plaintext).
pub const DEFAULT_SUITE: &str = include_str!("../../suites/default.toml");

/// The placeholders the lab fills in itself.
pub const BUILTIN_VARS: &[&str] = &[
    "linerate", "cpus", "cwd", "fixtures", "port", "tls_port", "rundir", "config",
];

/// A whole suite file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    #[serde(default)]
    pub settings: Settings,
    #[serde(rename = "server", default)]
    pub servers: Vec<ServerSpec>,
    #[serde(rename = "workload", default)]
    pub workloads: Vec<Workload>,
    /// Processes the servers under test talk to (a proxy's upstream), started once before the
    /// first sample on the load CPUs and stopped after the last. Each one's address,
    /// `127.0.0.1:PORT`, is the placeholder named after it (`{upstream}`).
    #[serde(rename = "backend", default)]
    pub backends: Vec<ServerSpec>,
}

/// How every sample is measured.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    pub rounds: usize,
    pub duration: String,
    pub warmup: String,
    pub connections: usize,
    pub server_cpus: String,
    pub load_cpus: String,
    pub load: LoadTool,
    /// The server ratios are taken against (default: `floor` when the suite has one).
    pub baseline: Option<String>,
    pub latency_duration: String,
    pub start_timeout: String,
    /// Requests per server for `--instructions` (callgrind makes each one ~50× slower).
    pub instruction_requests: u64,
    /// Placeholders for every workload (a workload's own `vars` win); values may use the
    /// built-in ones (`{fixtures}`, `{cwd}`).
    pub vars: BTreeMap<String, String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            rounds: 3,
            duration: "5s".into(),
            warmup: "1s".into(),
            connections: 64,
            server_cpus: "0".into(),
            load_cpus: "1".into(),
            load: LoadTool::Auto,
            baseline: None,
            latency_duration: "3s".into(),
            start_timeout: "5s".into(),
            instruction_requests: 20_000,
            vars: BTreeMap::new(),
        }
    }
}

/// Which program generates the load.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LoadTool {
    /// wrk when it is on PATH, else linerate load.
    Auto,
    Wrk,
    Linerate,
}

/// One server: a command line, started fresh for every sample.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    pub name: String,
    pub command: Vec<String>,
    /// A program that must be on PATH; without it the comparison refuses to run (naming it).
    pub requires: Option<String>,
    /// A config file template rendered per start into `{rundir}`; its path is `{config}`.
    pub config_template: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Only these workloads (default: all).
    pub workloads: Option<Vec<String>>,
}

/// One request mix.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: String,
    pub title: Option<String>,
    pub path: String,
    #[serde(default = "one")]
    pub pipeline: usize,
    pub method: Option<String>,
    pub body: Option<String>,
    /// Fixed request rate of the latency run (none: no latency run).
    pub latency_rate: Option<f64>,
    /// Several paths instead of `path`: connections take them round-robin (linerate load).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Connections for this workload (default: the settings').
    pub connections: Option<usize>,
    /// Extra request fields, `Name: value`.
    #[serde(default)]
    pub headers: Vec<String>,
    /// HTTPS to the server's `{tls_port}` (certificates are not verified: `load -k`).
    #[serde(default)]
    pub tls: bool,
    /// HTTP/2: over TLS with ALPN `h2`, or cleartext with prior knowledge to `{port}` (so an
    /// h2c workload's servers listen for HTTP/2 there). Always measured with linerate load.
    #[serde(default)]
    pub http2: bool,
    /// HTTP/3 over QUIC to the server's `{tls_port}`, as a UDP port (`linerate load
    /// --http3`; certificates are not verified). Needs `tls = true`; always measured with
    /// linerate load.
    #[serde(default)]
    pub http3: bool,
    /// Concurrent streams per connection with `http2` or `http3` (h2load's `-m`).
    #[serde(default = "one")]
    pub streams: usize,
    /// WebSocket echo round trips on `path` (`linerate load --ws`), `pipeline` messages in
    /// flight per connection; one echoed message counts as one request in the report.
    #[serde(default)]
    pub websocket: bool,
    /// With `websocket`: each message's payload in bytes (default: load's, 32).
    pub message_size: Option<usize>,
    /// With `websocket`: binary messages (default: text).
    #[serde(default)]
    pub binary: bool,
    /// A new connection after this many requests (1: every request pays a handshake).
    pub reconnect: Option<u64>,
    /// With `tls`: the client never resumes a session, so every handshake is a full one
    /// (`linerate load --tls-no-resume`); without it, reconnects resume where the server
    /// allows.
    #[serde(default)]
    pub tls_no_resume: bool,
    /// The server this workload's ratios are taken against, when not the suite's (a workload
    /// the floor cannot serve, such as files or HTTPS, compares with nginx).
    pub baseline: Option<String>,
    /// Requests for `--instructions` on this workload (default: the settings'); fewer for
    /// large responses, whose every byte callgrind runs slowly.
    pub instruction_requests: Option<u64>,
    /// Unary gRPC calls (`linerate load --grpc`): HTTP/2 (cleartext to `{port}`, or ALPN h2
    /// with `tls`), POST of `body_file`, every answer checked (HTTP 200, application/grpc,
    /// `grpc-status: 0`, and `expect_body_file`'s bytes where given); a failed check counts
    /// as an error. Always measured with linerate load.
    #[serde(default)]
    pub grpc: bool,
    /// The request body read from this file (relative to where the lab runs), e.g. a
    /// prebuilt gRPC frame (`bench/grpc_frames.py`).
    pub body_file: Option<String>,
    /// With `grpc`: each answer's DATA bytes must be exactly this file's.
    pub expect_body_file: Option<String>,
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
}

fn one() -> usize {
    1
}

impl Workload {
    pub fn title(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

impl ServerSpec {
    pub fn runs(&self, workload: &str) -> bool {
        self.workloads
            .as_ref()
            .is_none_or(|w| w.iter().any(|n| n == workload))
    }
}

/// Settings turned into values (durations, CPU lists), checked once.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub rounds: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub latency_duration: Duration,
    pub start_timeout: Duration,
    pub connections: usize,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
}

impl Suite {
    /// The baseline server: the one named in the settings, else `floor` if present.
    pub fn baseline(&self) -> Option<&str> {
        match &self.settings.baseline {
            Some(b) => Some(b),
            None => self
                .servers
                .iter()
                .find(|s| s.name == "floor")
                .map(|s| s.name.as_str()),
        }
    }

    /// The baseline of one workload: its own, else the suite's; `None` when that server is not
    /// being compared.
    pub fn baseline_for<'a>(&'a self, w: &'a Workload) -> Option<&'a str> {
        w.baseline
            .as_deref()
            .or(self.baseline())
            .filter(|b| self.servers.iter().any(|s| s.name == *b))
    }

    pub fn parse(text: &str) -> anyhow::Result<Suite> {
        let suite: Suite = toml::from_str(text).context("invalid suite file")?;
        suite.validate()?;
        Ok(suite)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.servers.is_empty() {
            bail!("the suite has no [[server]]");
        }
        if self.workloads.is_empty() {
            bail!("the suite has no [[workload]]");
        }
        let mut seen = std::collections::HashSet::new();
        for s in &self.servers {
            if !seen.insert(&s.name) {
                bail!("server {:?} is defined twice", s.name);
            }
            if s.command.is_empty() {
                bail!("server {:?} has an empty command", s.name);
            }
        }
        let mut seen = std::collections::HashSet::new();
        for b in &self.backends {
            if !seen.insert(&b.name) {
                bail!("backend {:?} is defined twice", b.name);
            }
            if b.command.is_empty() {
                bail!("backend {:?} has an empty command", b.name);
            }
            if b.workloads.is_some() {
                bail!(
                    "backend {:?}: a backend runs for every workload (no `workloads`)",
                    b.name
                );
            }
            if self.settings.vars.contains_key(&b.name) || BUILTIN_VARS.contains(&b.name.as_str()) {
                bail!("backend {:?}: its name is already a placeholder", b.name);
            }
        }
        let mut seen = std::collections::HashSet::new();
        for w in &self.workloads {
            if !seen.insert(&w.name) {
                bail!("workload {:?} is defined twice", w.name);
            }
            if !w.path.starts_with('/') || w.paths.iter().any(|p| !p.starts_with('/')) {
                bail!("workload {:?}: paths must start with '/'", w.name);
            }
            if w.pipeline == 0 {
                bail!("workload {:?}: pipeline must be at least 1", w.name);
            }
            if w.websocket
                && (w.http2 || w.body.is_some() || w.method.is_some() || !w.paths.is_empty())
            {
                bail!(
                    "workload {:?}: websocket goes without http2, body, method and paths",
                    w.name
                );
            }
            if !w.websocket && (w.message_size.is_some() || w.binary) {
                bail!(
                    "workload {:?}: message_size and binary go with websocket = true",
                    w.name
                );
            }
            if w.grpc && (w.body_file.is_none() || w.body.is_some() || w.websocket || w.http3) {
                bail!(
                    "workload {:?}: grpc needs body_file (one length-prefixed request) and goes \
                     without body, websocket and http3",
                    w.name
                );
            }
            if w.expect_body_file.is_some() && !w.grpc {
                bail!(
                    "workload {:?}: expect_body_file goes with grpc = true",
                    w.name
                );
            }
            if w.body.is_some() && w.body_file.is_some() {
                bail!("workload {:?}: body and body_file, not both", w.name);
            }
            if w.streams == 0 || (w.streams > 1 && !w.http2 && !w.http3 && !w.grpc) {
                bail!(
                    "workload {:?}: streams (at least 1) go with http2 = true or http3 = true",
                    w.name
                );
            }
            if w.http3 && (!w.tls || w.http2 || w.websocket || w.pipeline > 1) {
                bail!(
                    "workload {:?}: http3 needs tls = true (QUIC is always TLS) and goes \
                     without http2, websocket and pipeline",
                    w.name
                );
            }
        }
        let baselines = self.settings.baseline.iter().map(|b| ("settings", b));
        for (owner, b) in baselines.chain(
            self.workloads
                .iter()
                .filter_map(|w| Some((w.name.as_str(), w.baseline.as_ref()?))),
        ) {
            if !self.servers.iter().any(|s| &s.name == b) {
                bail!("{owner}: baseline {b:?} is not one of the suite's servers");
            }
        }
        self.resolve().map(|_| ())
    }

    pub fn resolve(&self) -> anyhow::Result<Resolved> {
        let s = &self.settings;
        let dur = |name: &str, v: &str| {
            linerate_load::units::duration(v).map_err(|e| anyhow::anyhow!("settings.{name}: {e}"))
        };
        let cpus = |name: &str, v: &str| {
            linerate_load::units::cpus(v).map_err(|e| anyhow::anyhow!("settings.{name}: {e}"))
        };
        if s.rounds == 0 {
            bail!("settings.rounds must be at least 1");
        }
        if s.connections == 0 {
            bail!("settings.connections must be at least 1");
        }
        let r = Resolved {
            rounds: s.rounds,
            duration: dur("duration", &s.duration)?,
            warmup: dur("warmup", &s.warmup)?,
            latency_duration: dur("latency_duration", &s.latency_duration)?,
            start_timeout: dur("start_timeout", &s.start_timeout)?,
            connections: s.connections,
            server_cpus: cpus("server_cpus", &s.server_cpus)?,
            load_cpus: cpus("load_cpus", &s.load_cpus)?,
        };
        if r.duration.is_zero() {
            bail!("settings.duration must be more than 0");
        }
        Ok(r)
    }
}

/// Replaces every `{key}` of `vars` in `text`; an unknown `{name}` is an error (a typo would
/// otherwise reach the server's command line).
pub fn expand(text: &str, vars: &BTreeMap<String, String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            bail!("unclosed '{{' in {text:?}");
        };
        let key = &after[..close];
        match vars.get(key) {
            Some(v) => out.push_str(v),
            None => bail!("unknown placeholder {{{key}}} in {text:?}"),
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Replaces every `@KEY@` (the upper-cased var name) in a config template.
pub fn render_template(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("@{}@", k.to_ascii_uppercase()), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_suite_parses() {
        let s = Suite::parse(DEFAULT_SUITE).unwrap();
        assert_eq!(s.settings.baseline.as_deref(), Some("floor"));
        let names: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["floor", "linerate", "nginx"]);
        assert_eq!(s.workloads[1].pipeline, 16);
        let r = s.resolve().unwrap();
        assert_eq!((r.server_cpus, r.load_cpus), (vec![0], vec![1]));
    }

    #[test]
    fn shipped_static_suite_parses() {
        let s = Suite::parse(include_str!("../../../../bench/static.toml")).unwrap();
        let arena = s.workloads.iter().find(|w| w.name == "arena20").unwrap();
        assert_eq!(arena.paths.len(), 20);
        assert_eq!(s.workloads[2].connections, Some(8));
    }

    #[test]
    fn shipped_tls_suites_parse() {
        for text in [
            include_str!("../../../../bench/tls.toml"),
            include_str!("../../../../bench/tls-unbuffered.toml"),
        ] {
            Suite::parse(text).unwrap().resolve().unwrap();
        }
        let s = Suite::parse(include_str!("../../../../bench/tls-unbuffered.toml")).unwrap();
        let big = s.workloads.iter().find(|w| w.name == "https_f1m").unwrap();
        assert_eq!(big.instruction_requests, Some(500));
        assert_eq!(s.workloads[0].instruction_requests, None);
    }

    #[test]
    fn mistakes_are_errors() {
        let base = "[[server]]\nname='a'\ncommand=['x']\n[[workload]]\nname='w'\npath='/'\n";
        assert!(Suite::parse(base).is_ok());
        for (bad, why) in [
            ("[settings]\nrunds = 3\n", "unknown key"),
            ("[settings]\nduration = 'soon'\n", "bad duration"),
            ("[settings]\nbaseline = 'nope'\n", "unknown baseline"),
            ("[settings]\nrounds = 0\n", "zero rounds"),
            ("[[server]]\nname='a'\ncommand=['y']\n", "duplicate server"),
            (
                "[[backend]]\nname='up'\ncommand=[]\n",
                "empty backend command",
            ),
            (
                "[[backend]]\nname='up'\ncommand=['y']\n[[backend]]\nname='up'\ncommand=['z']\n",
                "duplicate backend",
            ),
            (
                "[[backend]]\nname='up'\ncommand=['y']\nworkloads=['w']\n",
                "a backend for some workloads",
            ),
            (
                "[[backend]]\nname='port'\ncommand=['y']\n",
                "a backend named as a placeholder",
            ),
            (
                "[settings]\nvars={up='x'}\n[[backend]]\nname='up'\ncommand=['y']\n",
                "a backend named as a var",
            ),
        ] {
            assert!(Suite::parse(&format!("{bad}{base}")).is_err(), "{why}");
        }
        assert!(Suite::parse("[[workload]]\nname='w'\npath='/'\n").is_err());
        let server = "[[server]]\nname='a'\ncommand=['x']\n[[workload]]\nname='w'\npath='/ws'\n";
        for (bad, why) in [
            ("websocket = true\nhttp2 = true\n", "websocket over http2"),
            ("websocket = true\nbody = 'x'\n", "websocket with a body"),
            ("message_size = 64\n", "a message size without websocket"),
            ("binary = true\n", "binary without websocket"),
            ("http3 = true\n", "http3 without tls"),
            (
                "http3 = true\ntls = true\nhttp2 = true\n",
                "http3 with http2",
            ),
            (
                "http3 = true\ntls = true\npipeline = 2\n",
                "http3 pipelined",
            ),
            ("grpc = true\n", "grpc without a body file"),
            (
                "grpc = true\nbody_file = 'a'\nbody = 'x'\n",
                "grpc with a body string",
            ),
            (
                "grpc = true\nbody_file = 'a'\nwebsocket = true\n",
                "grpc over websocket",
            ),
            ("expect_body_file = 'a'\n", "expected bytes without grpc"),
            ("body = 'x'\nbody_file = 'a'\n", "two bodies"),
        ] {
            assert!(Suite::parse(&format!("{server}{bad}")).is_err(), "{why}");
        }
    }

    #[test]
    fn shipped_h3_suite_parses() {
        let s = Suite::parse(include_str!("../../../../bench/h3.toml")).unwrap();
        let r = s.resolve().unwrap();
        assert_eq!((r.server_cpus, r.load_cpus), (vec![0], vec![1]));
        let h3: Vec<_> = s.workloads.iter().filter(|w| w.http3).collect();
        assert!(h3.len() >= 2 && h3.iter().all(|w| w.tls && w.streams >= 1));
        assert!(s.workloads.iter().any(|w| w.http2 && w.tls));
        let caddy = s.servers.iter().find(|s| s.name == "caddy").unwrap();
        assert!(!caddy.runs("baseline2_h3") && caddy.runs("file64k_h3"));
    }

    #[test]
    fn shipped_ws_suite_parses() {
        let s = Suite::parse(include_str!("../../../../bench/ws.toml")).unwrap();
        assert!(s.workloads.iter().all(|w| w.websocket));
        let servers: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert!(servers.contains(&"linerate") && servers.contains(&"actix"));
    }

    #[test]
    fn shipped_proxy_suite_parses_with_its_backend() {
        let s = Suite::parse(include_str!("../../../../bench/proxy_peers.toml")).unwrap();
        let names: Vec<_> = s.backends.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["upstream"]);
        let servers: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            servers,
            [
                "floor",
                "linerate",
                "linerate_max64",
                "nginx",
                "haproxy",
                "caddy",
                "h2o"
            ]
        );
        assert_eq!(s.baseline(), Some("floor"));
        // The floor speaks no TLS: the TLS h2 workload compares with nginx, without it.
        let h2tls = s.workloads.iter().find(|w| w.name == "json_h2tls").unwrap();
        assert_eq!(s.baseline_for(h2tls), Some("nginx"));
        let floor = s.servers.iter().find(|s| s.name == "floor").unwrap();
        assert!(floor.runs("json") && !floor.runs("json_h2tls"));
    }

    #[test]
    fn shipped_grpc_suites_parse() {
        let s = Suite::parse(include_str!("../../../../bench/grpc.toml")).unwrap();
        let servers: Vec<_> = s.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(servers, ["tonic", "grpc-go", "linerate"]);
        assert_eq!(s.baseline(), Some("tonic"));
        assert!(
            s.workloads
                .iter()
                .all(|w| w.grpc && w.expect_body_file.is_some())
        );
        let unary = s.workloads.iter().find(|w| w.name == "unary").unwrap();
        assert_eq!(unary.streams, 100);
        let r = s.resolve().unwrap();
        assert_eq!(
            (r.server_cpus, r.load_cpus, r.connections),
            (vec![0], vec![1], 64)
        );

        let p = Suite::parse(include_str!("../../../../bench/grpc_proxy.toml")).unwrap();
        let names: Vec<_> = p.backends.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["upstream"]);
        assert_eq!(p.baseline(), Some("haproxy"));
        assert!(p.workloads.iter().all(|w| w.grpc && w.streams == 100));
    }

    #[test]
    fn placeholders_expand_strictly() {
        let vars: BTreeMap<String, String> = [("port".to_string(), "80".to_string())]
            .into_iter()
            .collect();
        assert_eq!(expand("127.0.0.1:{port}", &vars).unwrap(), "127.0.0.1:80");
        assert!(expand("{prot}", &vars).is_err());
        assert!(expand("{port", &vars).is_err());
        assert_eq!(render_template("listen @PORT@;", &vars), "listen 80;");
    }
}
