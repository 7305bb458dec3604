//! The servers `lab cache` compares and how each is started: Debian's `redis-server` without
//! and with I/O threads, and `memcached` with its worker threads, each on 127.0.0.1 on a port
//! the lab picks, with a memory limit and nothing written to disk. The options are
//! `scripts/cache-servers.sh`'s; the lab starts the programs itself (through `compare::server`)
//! so that they are pinned and in a process group whose CPU time it can read.

use std::collections::BTreeMap;

use crate::compare::suite::ServerSpec;

use super::client::Protocol;

/// One server configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `io_threads` 1 is Redis's default: the main thread does all socket I/O.
    Redis {
        io_threads: usize,
    },
    Memcached {
        threads: usize,
    },
}

#[derive(Clone, Debug)]
pub struct CacheServer {
    /// `redis`, `redis-io4`, `memcached-t4`.
    pub name: String,
    pub kind: Kind,
}

impl CacheServer {
    pub fn new(kind: Kind) -> CacheServer {
        let name = match kind {
            Kind::Redis { io_threads: 1 } => "redis".to_string(),
            Kind::Redis { io_threads } => format!("redis-io{io_threads}"),
            Kind::Memcached { threads } => format!("memcached-t{threads}"),
        };
        CacheServer { name, kind }
    }

    pub fn protocol(&self) -> Protocol {
        match self.kind {
            Kind::Redis { .. } => Protocol::Resp,
            Kind::Memcached { .. } => Protocol::Meta,
        }
    }

    /// The program it runs (`program` overrides the name on PATH).
    pub fn program<'a>(&self, programs: &'a Programs) -> &'a str {
        match self.kind {
            Kind::Redis { .. } => &programs.redis,
            Kind::Memcached { .. } => &programs.memcached,
        }
    }

    /// How `compare::server::start` runs it with a `memory_mb` limit; `{port}` and `{rundir}`
    /// are filled in at each start.
    pub fn spec(&self, programs: &Programs, memory_mb: u64) -> ServerSpec {
        let s = |v: &str| v.to_string();
        let command = match self.kind {
            Kind::Redis { io_threads } => {
                let mut c = vec![
                    s(&programs.redis),
                    s("--bind"),
                    s("127.0.0.1"),
                    s("--port"),
                    s("{port}"),
                    s("--protected-mode"),
                    s("no"),
                    // No RDB snapshots, no AOF: a cache, and no fork in the middle of a run.
                    s("--save"),
                    s(""),
                    s("--appendonly"),
                    s("no"),
                    s("--dir"),
                    s("{rundir}"),
                    s("--maxmemory"),
                    format!("{memory_mb}mb"),
                    s("--maxmemory-policy"),
                    s("allkeys-lru"),
                    s("--io-threads"),
                    io_threads.to_string(),
                ];
                if io_threads > 1 {
                    c.extend([s("--io-threads-do-reads"), s("yes")]);
                }
                c
            }
            Kind::Memcached { threads } => {
                let mut c = vec![
                    s(&programs.memcached),
                    s("-l"),
                    s("127.0.0.1"),
                    s("-p"),
                    s("{port}"),
                    s("-U"),
                    s("0"),
                    s("-m"),
                    memory_mb.to_string(),
                    s("-t"),
                    threads.to_string(),
                    s("-c"),
                    s("4096"),
                ];
                // memcached refuses to run as root unless told which user to be.
                if rustix::process::geteuid().is_root() {
                    c.extend([s("-u"), s("root")]);
                }
                c
            }
        };
        ServerSpec {
            name: self.name.clone(),
            command,
            requires: None,
            config_template: None,
            env: BTreeMap::new(),
            workloads: None,
        }
    }
}

/// The programs' names or paths.
#[derive(Clone, Debug)]
pub struct Programs {
    pub redis: String,
    pub memcached: String,
}

impl Default for Programs {
    fn default() -> Programs {
        Programs {
            redis: "redis-server".into(),
            memcached: "memcached".into(),
        }
    }
}

/// The comparison's servers: memcached with `threads` threads, Redis alone, and, when
/// `threads` is 2 or more, Redis with `threads` I/O threads. With one thread (one server
/// CPU) that third server is left out ([`LEFT_OUT_ONE_CPU`]): Redis with one I/O thread is
/// plain Redis, and with two on one CPU it measures their spinning.
pub fn lineup(threads: usize) -> Vec<CacheServer> {
    let mut l = vec![
        CacheServer::new(Kind::Memcached {
            threads: threads.max(1),
        }),
        CacheServer::new(Kind::Redis { io_threads: 1 }),
    ];
    if threads >= 2 {
        l.push(CacheServer::new(Kind::Redis {
            io_threads: threads,
        }));
    }
    l
}

/// Why a run on one server CPU has no Redis with I/O threads (the report says it).
pub const LEFT_OUT_ONE_CPU: &str = "Redis with I/O threads is left out: this run gives the \
servers one CPU, and Redis's I/O threads busy-wait for its main thread, so on one CPU they \
measure their own spinning (1,988 req/s, 75× memcached's cost, in the report of 2026-11-26), \
not Redis. Give `--server-cpus` two or more CPUs (and the load others) to measure it.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineup_names_and_options() {
        let names =
            |l: &[CacheServer]| -> Vec<String> { l.iter().map(|s| s.name.clone()).collect() };
        // One server CPU: no threaded Redis (its I/O threads would spin on that CPU).
        assert_eq!(names(&lineup(1)), ["memcached-t1", "redis"]);
        let l = lineup(2);
        assert_eq!(names(&l), ["memcached-t2", "redis", "redis-io2"]);
        let p = Programs::default();
        let redis = l[1].spec(&p, 64).command.join(" ");
        assert!(redis.contains("--maxmemory 64mb --maxmemory-policy allkeys-lru --io-threads 1"));
        assert!(!redis.contains("io-threads-do-reads"));
        let io = l[2].spec(&p, 64).command.join(" ");
        assert!(
            io.ends_with("--io-threads 2 --io-threads-do-reads yes"),
            "{io}"
        );
        let mc = l[0].spec(&p, 64).command.join(" ");
        assert!(
            mc.starts_with("memcached -l 127.0.0.1 -p {port} -U 0 -m 64 -t 2"),
            "{mc}"
        );
    }
}
