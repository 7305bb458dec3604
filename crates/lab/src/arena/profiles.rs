//! HttpArena's profiles as data: each one's load shape (from its scripts/lib/profiles.sh:
//! connections per run, pipeline depth, requests per connection, a paced rate for the latency
//! profiles), the checks that validate it ([`Family`]), what it needs beside the server, and
//! whether linerate's demo enters it today, or why not.
//!
//! A profile the demo does not serve is "not entered" with its reason, never validated.

/// Which checks validate a profile (several profiles share one, as HttpArena's do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Baseline,
    Pipelined,
    Json,
    JsonComp,
    JsonTls,
    Upload,
    Static,
    StaticTls,
    BaselineH2,
    StaticH2,
    BaselineH2c,
    JsonH2c,
    BaselineH3,
    StaticH3,
    Grpc,
    GrpcTls,
    EchoWs,
    EchoWsPipeline,
    EchoWsLimited,
    AsyncDb,
    /// `/fortunes` over HttpArena's 200-row table.
    Fortunes,
    Crud,
    ProductionStack,
    /// `/delay/{ms}`.
    Async,
    /// `POST /echo` over TLS.
    Echo8gbit,
}

/// What a profile needs beside the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// The demo's database routes: `--database-url`.
    Postgres,
}

/// How HttpArena's generator drives the profile (the load part of the arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Http1,
    Http1Tls,
    H2Tls,
    H2c,
    H3,
    Grpc,
    GrpcTls,
    Ws,
}

/// One HttpArena profile.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
    pub name: &'static str,
    /// The checks that validate it.
    pub family: Family,
    /// `Err(reason)`: the demo does not enter it yet (never validated, never loaded).
    pub entry: Result<(), &'static str>,
    pub needs: Needs,
    /// The load: what is requested, over what, how.
    pub wire: Wire,
    pub path: &'static str,
    /// Connections of each run (HttpArena runs each count separately).
    pub connections: &'static [usize],
    /// Requests written before an answer is read (HTTP/1.1) or streams per connection (h2's
    /// `-m`); WebSocket messages in flight.
    pub depth: usize,
    /// Requests per connection before it is closed (0: no limit).
    pub per_conn: usize,
    /// Paced offered load, requests per second (latency profiles); `None`: closed loop.
    pub rate: Option<f64>,
    /// CPUs HttpArena gives the server (its cpuset): the arena scales connections and rates
    /// by this machine's CPUs over these.
    pub cpus: usize,
}

/// HttpArena's usual cpuset (0-31,64-95: 64 CPUs).
pub const HTTPARENA_CPUS: usize = 64;

const fn p(
    name: &'static str,
    family: Family,
    wire: Wire,
    path: &'static str,
    connections: &'static [usize],
) -> Profile {
    Profile {
        name,
        family,
        entry: Ok(()),
        needs: Needs::Nothing,
        wire,
        path,
        connections,
        depth: 1,
        per_conn: 0,
        rate: None,
        cpus: HTTPARENA_CPUS,
    }
}

const fn not_entered(mut pr: Profile, why: &'static str) -> Profile {
    pr.entry = Err(why);
    pr
}

const fn depth(mut pr: Profile, d: usize) -> Profile {
    pr.depth = d;
    pr
}

const fn db(mut pr: Profile) -> Profile {
    pr.needs = Needs::Postgres;
    pr
}

/// Every profile, in HttpArena's order (its PROFILE_ORDER, with the older HTTP/1.1 profiles
/// the demo still serves — json, upload, static — after their families).
pub const PROFILES: &[Profile] = &[
    p(
        "baseline",
        Family::Baseline,
        Wire::Http1,
        "/baseline11?a=13&b=42",
        &[4096],
    ),
    depth(
        p(
            "pipelined",
            Family::Pipelined,
            Wire::Http1,
            "/pipeline",
            &[4096],
        ),
        16,
    ),
    Profile {
        per_conn: 10,
        ..p(
            "limited-conn",
            Family::Baseline,
            Wire::Http1,
            "/baseline11?a=13&b=42",
            &[4096],
        )
    },
    p("json", Family::Json, Wire::Http1, "/json/50?m=3", &[4096]),
    p(
        "json-comp",
        Family::JsonComp,
        Wire::Http1,
        "/json/50?m=3",
        &[4096, 16384],
    ),
    p(
        "json-tls",
        Family::JsonTls,
        Wire::Http1Tls,
        "/json/50?m=3",
        &[4096],
    ),
    p("upload", Family::Upload, Wire::Http1, "/upload", &[256]),
    p("8gbit", Family::Echo8gbit, Wire::Http1Tls, "/echo", &[512]),
    p(
        "static",
        Family::Static,
        Wire::Http1,
        "/static/reset.css",
        &[1024],
    ),
    Profile {
        per_conn: 200,
        ..p(
            "static-tls",
            Family::StaticTls,
            Wire::Http1Tls,
            "/static/reset.css",
            &[1024],
        )
    },
    db(p(
        "async-db",
        Family::AsyncDb,
        Wire::Http1,
        "/async-db?min=10&max=50&limit=20",
        &[1024],
    )),
    // The demo's /fortunes reads whichever `fortune` its database has: HttpArena's 200 rows in
    // scripts/pg.sh's ARENA_DATABASE_URL, TechEmpower's 12 in DATABASE_URL (which fails).
    db(p(
        "fortunes",
        Family::Fortunes,
        Wire::Http1,
        "/fortunes",
        &[1024],
    )),
    db(p(
        "crud",
        Family::Crud,
        Wire::Http1,
        "/crud/items/1",
        &[1024],
    )),
    p(
        "baseline-h2",
        Family::BaselineH2,
        Wire::H2Tls,
        "/baseline2?a=1&b=1",
        &[256, 1024],
    ),
    p(
        "static-h2",
        Family::StaticH2,
        Wire::H2Tls,
        "/static/reset.css",
        &[256, 1024],
    ),
    p(
        "baseline-h2c",
        Family::BaselineH2c,
        Wire::H2c,
        "/baseline2?a=1&b=1",
        &[256, 1024, 4096],
    ),
    p(
        "json-h2c",
        Family::JsonH2c,
        Wire::H2c,
        "/json/50?m=3",
        &[1024, 4096],
    ),
    p(
        "baseline-h3",
        Family::BaselineH3,
        Wire::H3,
        "/baseline2?a=1&b=1",
        &[64],
    ),
    p(
        "static-h3",
        Family::StaticH3,
        Wire::H3,
        "/static/reset.css",
        &[64],
    ),
    not_entered(
        p(
            "gateway-64",
            Family::StaticH2,
            Wire::H2Tls,
            "/static/reset.css",
            &[512, 1024],
        ),
        "a proxy in front of the server: scripts/gateway.sh runs its checks",
    ),
    not_entered(
        p(
            "gateway-h3",
            Family::StaticH3,
            Wire::H3,
            "/static/reset.css",
            &[64, 256],
        ),
        "a proxy in front of the server: scripts/gateway.sh runs its checks (over h2)",
    ),
    // Loaded through its edge with HttpArena's reads and writes mix (`load::stack_reads`),
    // not this one path.
    db(p(
        "production-stack",
        Family::ProductionStack,
        Wire::H2Tls,
        "/api/items/1",
        &[256, 1024],
    )),
    p(
        "unary-grpc",
        Family::Grpc,
        Wire::Grpc,
        "/benchmark.BenchmarkService/GetSum",
        &[256, 1024],
    ),
    p(
        "unary-grpc-tls",
        Family::GrpcTls,
        Wire::GrpcTls,
        "/benchmark.BenchmarkService/GetSum",
        &[256, 1024],
    ),
    p(
        "echo-ws",
        Family::EchoWs,
        Wire::Ws,
        "/ws",
        &[512, 4096, 16384],
    ),
    depth(
        p(
            "echo-ws-pipeline",
            Family::EchoWsPipeline,
            Wire::Ws,
            "/ws",
            &[512, 4096, 16384],
        ),
        16,
    ),
    Profile {
        per_conn: 10,
        ..p(
            "echo-ws-limited",
            Family::EchoWsLimited,
            Wire::Ws,
            "/ws",
            &[512, 4096],
        )
    },
    Profile {
        rate: Some(1_000_000.0),
        ..p(
            "latency-1m",
            Family::Baseline,
            Wire::Http1,
            "/baseline11?a=13&b=42",
            &[1024],
        )
    },
    Profile {
        rate: Some(10_000.0),
        ..p(
            "latency-10k",
            Family::Baseline,
            Wire::Http1,
            "/baseline11?a=13&b=42",
            &[1024],
        )
    },
    // Reference-only on HttpArena's board for now: 500K req/s paced on 8 CPUs (four cores and
    // their SMT twins), 1024 connections.
    Profile {
        rate: Some(500_000.0),
        cpus: 8,
        ..p(
            "latency-500k-8cpu",
            Family::Baseline,
            Wire::Http1,
            "/baseline11?a=13&b=42",
            &[1024],
        )
    },
    p("async", Family::Async, Wire::Http1, "/delay/15", &[32000]),
];

/// The profile named `name`.
pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, a) in PROFILES.iter().enumerate() {
            assert!(
                PROFILES[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
        }
    }

    /// HttpArena's shapes (scripts/lib/profiles.sh) for the profiles whose shape is unusual.
    #[test]
    fn shapes_follow_httparena() {
        assert_eq!(find("pipelined").unwrap().depth, 16);
        assert_eq!(find("limited-conn").unwrap().per_conn, 10);
        assert_eq!(find("echo-ws-limited").unwrap().per_conn, 10);
        assert_eq!(find("latency-10k").unwrap().rate, Some(10_000.0));
        assert_eq!(find("latency-1m").unwrap().connections, &[1024]);
        assert_eq!(find("latency-500k-8cpu").unwrap().cpus, 8);
        assert_eq!(find("baseline").unwrap().cpus, HTTPARENA_CPUS);
        assert_eq!(find("async").unwrap().connections, &[32000]);
        assert_eq!(find("fortunes").unwrap().needs, Needs::Postgres);
    }
}
