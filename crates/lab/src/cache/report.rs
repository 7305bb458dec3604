//! `lab cache`'s outputs: the raw record (`runs.json`: every sample of every phase), the
//! Markdown report and the charts. The GET/SET tables and charts are `compare`'s own (the same
//! `Record`, rows and charts); this file adds the memory and eviction phases' records, tables
//! and bars. Pure functions over plain data apart from `write`.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::CacheArgs;
use super::admin::Counters;
use crate::compare::charts::{self, human};
use crate::compare::report::{Record, markdown_titled};
use crate::compare::stats::{Outcome, Spread};

/// Everything one `lab cache` run measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CacheRecord {
    /// The GET/SET samples, rows and charts, in `lab compare`'s shape.
    pub compare: Record,
    pub settings: Settings,
    pub memory: Vec<MemorySample>,
    pub eviction: Vec<EvictionSample>,
}

/// The options that shaped the run, beyond `compare`'s `Setup`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Settings {
    pub sizes: Vec<usize>,
    pub keys: u64,
    pub objects: u64,
    pub pipeline: usize,
    pub latency_rate: Option<f64>,
    pub memory_mb: u64,
    pub limit_mb: u64,
    pub zipf: f64,
    pub evict_value_bytes: usize,
    /// memcached's threads and Redis's I/O threads.
    pub threads: usize,
}

impl Settings {
    pub fn of(a: &CacheArgs) -> Settings {
        Settings {
            sizes: a.sizes.clone(),
            keys: a.keys,
            objects: a.objects,
            pipeline: a.pipeline,
            latency_rate: a.latency_rate,
            memory_mb: a.memory_mb,
            limit_mb: a.limit_mb,
            zipf: a.zipf,
            evict_value_bytes: a.evict_value_bytes,
            threads: a.threads(),
        }
    }
}

/// One server's fill of `objects` objects.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemorySample {
    pub server: String,
    pub round: usize,
    pub objects: u64,
    pub value_bytes: usize,
    /// Resident bytes of the server's processes, started and empty.
    pub rss_empty: u64,
    /// … and holding the objects.
    pub rss_full: u64,
    /// What the server says it holds afterwards (its item count must be `objects`).
    pub counters: Counters,
    pub error: Option<String>,
}

impl MemorySample {
    /// RSS ÷ objects, bytes (the figure that compares the stores' memory).
    pub fn per_object(&self) -> Option<f64> {
        self.measured()
            .then(|| self.rss_full as f64 / self.objects as f64)
    }

    /// (RSS − the empty server's RSS) ÷ objects: what each object added.
    pub fn growth_per_object(&self) -> Option<f64> {
        self.measured()
            .then(|| self.rss_full.saturating_sub(self.rss_empty) as f64 / self.objects as f64)
    }

    fn measured(&self) -> bool {
        self.error.is_none() && self.objects > 0 && self.rss_full > 0
    }
}

/// One server at its memory limit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EvictionSample {
    pub server: String,
    pub round: usize,
    pub limit_mb: u64,
    pub keys: u64,
    pub zipf: f64,
    pub value_bytes: usize,
    pub requests: u64,
    pub req_per_s: f64,
    /// Hits ÷ GETs in the measured run.
    pub hit_ratio: Option<f64>,
    /// Evictions the server counted during the measured run.
    pub evictions: u64,
    pub evictions_per_s: f64,
    /// Objects held at the end.
    pub items: u64,
    pub rss_bytes: u64,
    /// Server-CPU busy µs per request (GETs and the SETs after misses).
    pub cost_us: f64,
    pub errors: u64,
    pub error: Option<String>,
}

impl CacheRecord {
    /// Samples of any phase that failed.
    pub fn failed(&self) -> usize {
        self.compare
            .samples
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Failed { .. }))
            .count()
            + self.memory.iter().filter(|m| m.error.is_some()).count()
            + self.eviction.iter().filter(|e| e.error.is_some()).count()
    }
}

pub fn memory_progress(m: &MemorySample) -> String {
    match (&m.error, m.per_object()) {
        (Some(e), _) => format!("round {} memory {}: FAILED: {e}", m.round + 1, m.server),
        (None, p) => format!(
            "round {} memory {}: {} objects, RSS {:.1} MiB, {:.0} B per object",
            m.round + 1,
            m.server,
            m.objects,
            m.rss_full as f64 / 1048576.0,
            p.unwrap_or(f64::NAN)
        ),
    }
}

pub fn eviction_progress(e: &EvictionSample) -> String {
    match &e.error {
        Some(err) => format!("round {} limit {}: FAILED: {err}", e.round + 1, e.server),
        None => format!(
            "round {} limit {}: hit ratio {:.3}, {} evictions/s, {} req/s",
            e.round + 1,
            e.server,
            e.hit_ratio.unwrap_or(f64::NAN),
            human(e.evictions_per_s),
            human(e.req_per_s)
        ),
    }
}

/// Per server, in `servers` order, the spread of `f` over its measured samples.
fn per_server<T>(
    servers: &[String],
    samples: &[T],
    name: impl Fn(&T) -> &str,
    f: impl Fn(&T) -> Option<f64>,
) -> Vec<(String, Option<Spread>)> {
    servers
        .iter()
        .map(|s| {
            let v = samples.iter().filter(|x| name(x) == s).filter_map(&f);
            (s.clone(), Spread::of(v))
        })
        .collect()
}

fn spread(s: Option<Spread>, fmt: impl Fn(f64) -> String) -> String {
    s.map_or("–".into(), |s| {
        format!("{} ({}–{})", fmt(s.median), fmt(s.min), fmt(s.max))
    })
}

/// Writes the charts (compare's per workload, and the memory and hit-ratio bars) and
/// `runs.json`; returns the record with the chart names filled in.
pub fn write(mut r: CacheRecord, dir: &Path) -> anyhow::Result<CacheRecord> {
    let order = r.compare.servers.clone();
    for w in &mut r.compare.workloads {
        let pngs = charts::workload_charts(dir, &w.name, &w.title, &w.rows, &order)?;
        w.charts = pngs
            .iter()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
    }
    let bars = |stem: &str, title: String, y: &str, rows: Vec<(String, Option<Spread>)>| {
        let named: Vec<(&str, Spread)> = rows
            .iter()
            .filter_map(|(n, s)| s.map(|s| (n.as_str(), s)))
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        charts::bars(dir, stem, title, y, named, &order).map(|_| ())
    };
    bars(
        "memory",
        "Memory per stored object: RSS ÷ objects (lower is better)".into(),
        "bytes per object",
        per_server(&order, &r.memory, |m| &m.server, MemorySample::per_object),
    )?;
    bars(
        "limit-hit-ratio",
        format!(
            "Hit ratio at a {} MB limit, Zipf({}) (higher is better)",
            r.settings.limit_mb, r.settings.zipf
        ),
        "hits ÷ GETs",
        per_server(
            &order,
            &r.eviction,
            |e| &e.server,
            |e| e.error.is_none().then_some(e.hit_ratio).flatten(),
        ),
    )?;
    let json = serde_json::to_string_pretty(&r)?;
    std::fs::write(dir.join("runs.json"), json + "\n")?;
    Ok(r)
}

/// The report: compare's tables for GET/SET, then memory and the limit.
pub fn markdown(r: &CacheRecord, image_prefix: &str) -> String {
    let st = &r.settings;
    let mut o = markdown_titled(
        &r.compare,
        image_prefix,
        "linerate lab cache: Redis against memcached",
        "the lab's cache client",
    );
    let order = &r.compare.servers;
    let _ = writeln!(
        o,
        "GET and SET workloads: {} keys (`key:` and ten digits, 14 bytes), uniformly drawn; a GET \
         run first stores every key, and a GET that misses counts as an error. Every request \
         waits for its reply on its connection, {} in flight per connection (closed loop); the \
         latency runs offer a fixed rate instead. Throughput per server core is 10⁶ ÷ the cost \
         in µs (the cost counts all of the server CPUs' busy time, softirq included). Ratios \
         are to {}.\n",
        st.keys,
        st.pipeline,
        order.first().map_or("–", |s| s.as_str())
    );
    let cpus = r.compare.setup.server_cpus.len();
    if st.threads >= 2 {
        let _ = writeln!(
            o,
            "memcached runs {t} worker threads (`-t {t}`); redis-io{t} runs {t} I/O threads \
             (`io-threads {t}`, `io-threads-do-reads yes`), redis none; on {cpus} server CPUs, \
             one for each thread.\n",
            t = st.threads
        );
    } else {
        let _ = writeln!(
            o,
            "memcached runs 1 worker thread (`-t 1`), redis none; on 1 server CPU. {}\n",
            super::servers::LEFT_OUT_ONE_CPU
        );
    }
    let size = r.memory.first().map_or(0, |m| m.value_bytes);
    let _ = writeln!(
        o,
        "## Memory per stored object\n\n{} objects of {} B values (and 14-byte keys) stored \
         into each server started empty with a {} MB limit; RSS is the server's resident memory \
         (/proc), median (min–max) over rounds. The server's own count is Redis's `used_memory` \
         (all it allocated, through jemalloc) and memcached's `bytes` (its items' sizes, slab \
         rounding and unused slab space left out).\n",
        st.objects, size, st.memory_mb
    );
    let _ = writeln!(
        o,
        "| server | RSS MiB | RSS ÷ objects, B | (RSS − empty RSS) ÷ objects, B | server's own count ÷ objects, B | objects held | evicted |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|");
    let mib = |v: f64| format!("{:.1}", v / 1048576.0);
    let bytes = |v: f64| format!("{v:.0}");
    for s in order {
        let ms: Vec<&MemorySample> = r
            .memory
            .iter()
            .filter(|m| &m.server == s && m.error.is_none())
            .collect();
        let f = |g: fn(&MemorySample) -> Option<f64>| Spread::of(ms.iter().filter_map(|m| g(m)));
        let held = ms.iter().map(|m| m.counters.items).min();
        let evicted = ms.iter().map(|m| m.counters.evictions).max();
        let _ = writeln!(
            o,
            "| {s} | {} | {} | {} | {} | {} | {} |",
            spread(f(|m| Some(m.rss_full as f64)), mib),
            spread(f(MemorySample::per_object), bytes),
            spread(f(MemorySample::growth_per_object), bytes),
            spread(
                f(|m| Some(m.counters.used_bytes as f64 / m.objects.max(1) as f64)),
                bytes
            ),
            held.map_or("–".into(), |v| v.to_string()),
            evicted.map_or("–".into(), |v| v.to_string()),
        );
    }
    let _ = writeln!(o, "\n![memory.png]({image_prefix}memory.png)\n");
    let _ = writeln!(
        o,
        "## At the memory limit\n\nEach server with a {} MB limit (Redis: `maxmemory` with \
         `allkeys-lru`; memcached: `-m`, its segmented LRU), {} keys of {} B values drawn from \
         Zipf({}): a GET, and after a miss a SET of that key (cache-aside). Each server is first \
         filled to 1.5× its limit (the hottest keys), then warmed up, then measured. Evictions \
         are the server's own count during the measured run.\n",
        st.limit_mb, st.objects, st.evict_value_bytes, st.zipf
    );
    let _ = writeln!(
        o,
        "| server | hit ratio | evictions/s | req/s | cost µs/req | RSS MiB | objects held | errors |"
    );
    let _ = writeln!(o, "|---|---|---|---|---|---|---|---|");
    let mut short = false;
    for s in order {
        let es: Vec<&EvictionSample> = r
            .eviction
            .iter()
            .filter(|e| &e.server == s && e.error.is_none())
            .collect();
        let f = |g: fn(&EvictionSample) -> Option<f64>| Spread::of(es.iter().filter_map(|e| g(e)));
        // A run without an eviction never reached the limit: its hit ratio is not one at it.
        let never_full = es.iter().any(|e| e.evictions == 0);
        short |= never_full;
        let _ = writeln!(
            o,
            "| {s} | {}{} | {} | {} | {} | {} | {} | {} |",
            spread(f(|e| e.hit_ratio), |v| format!("{v:.3}")),
            if never_full { " ‡" } else { "" },
            spread(f(|e| Some(e.evictions_per_s)), human),
            spread(f(|e| Some(e.req_per_s)), human),
            spread(f(|e| Some(e.cost_us)), |v| format!("{v:.2}")),
            spread(f(|e| Some(e.rss_bytes as f64)), mib),
            es.iter()
                .map(|e| e.items)
                .max()
                .map_or("–".into(), |v| v.to_string()),
            es.iter().map(|e| e.errors).sum::<u64>(),
        );
    }
    if short {
        let _ = writeln!(
            o,
            "\n‡ no eviction during a measured run: that server was not evicting (every key it \
             was asked for fitted, or too few misses came in the run), so its hit ratio is not \
             one at the limit."
        );
    }
    let _ = writeln!(
        o,
        "\n![limit-hit-ratio.png]({image_prefix}limit-hit-ratio.png)\n"
    );
    let failures: Vec<String> = r
        .memory
        .iter()
        .filter_map(|m| {
            m.error
                .as_ref()
                .map(|e| format!("- {} / memory, round {}: {e}", m.server, m.round + 1))
        })
        .chain(r.eviction.iter().filter_map(|x| {
            x.error
                .as_ref()
                .map(|e| format!("- {} / limit, round {}: {e}", x.server, x.round + 1))
        }))
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(
            o,
            "## Failed memory and limit samples\n\n{}\n",
            failures.join("\n")
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_per_object() {
        let m = MemorySample {
            objects: 1000,
            rss_empty: 1_000_000,
            rss_full: 1_200_000,
            ..Default::default()
        };
        assert_eq!(m.per_object(), Some(1200.0));
        assert_eq!(m.growth_per_object(), Some(200.0));
        let failed = MemorySample {
            error: Some("x".into()),
            ..m
        };
        assert_eq!(failed.per_object(), None);
    }

    #[test]
    fn report_has_every_phase_and_its_failures() {
        let servers: Vec<String> = vec!["memcached-t2".into(), "redis".into()];
        let r = CacheRecord {
            compare: Record {
                servers: servers.clone(),
                ..Default::default()
            },
            settings: Settings {
                objects: 1000,
                limit_mb: 8,
                zipf: 0.99,
                ..Default::default()
            },
            memory: vec![
                MemorySample {
                    server: "memcached-t2".into(),
                    objects: 1000,
                    value_bytes: 100,
                    rss_empty: 1 << 20,
                    rss_full: 2 << 20,
                    counters: Counters {
                        items: 1000,
                        evictions: 0,
                        used_bytes: 150_000,
                    },
                    ..Default::default()
                },
                MemorySample {
                    server: "redis".into(),
                    error: Some("the server exited".into()),
                    ..Default::default()
                },
            ],
            eviction: vec![EvictionSample {
                server: "redis".into(),
                hit_ratio: Some(0.75),
                ..Default::default()
            }],
        };
        let md = markdown(&r, "");
        assert!(
            md.contains("| memcached-t2 | 2.0 (2.0–2.0) | 2097 (2097–2097) | 1049 (1049–1049) | 150 (150–150) | 1000 |"),
            "{md}"
        );
        assert!(md.contains("| redis | 0.750 (0.750–0.750) ‡ |"), "{md}");
        assert!(md.contains("‡ no eviction during a measured run"), "{md}");
        assert!(
            md.contains("- redis / memory, round 1: the server exited"),
            "{md}"
        );
        assert_eq!(r.failed(), 1);
    }
}
