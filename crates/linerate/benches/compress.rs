//! Dynamic compression cost per response, to choose the default gzip level and brotli quality.
//!
//! Bodies are the demo's `/json/50` (built by the handler's own `demo::items_page`, ~8.5 KB) and
//! `/json` (27 bytes, under the threshold, measured to show what the threshold saves). Prints
//! each coding's compressed size and its fastest of `MIN_OF` calls, then criterion times one response's compression.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use linerate::demo::{self, DATASET_JSON, Item};
use linerate_server::compress;

const GZIP_LEVELS: [u32; 4] = [1, 4, 6, 9];
const BROTLI_QUALITIES: [u32; 6] = [1, 3, 4, 5, 6, 11];

/// Calls timed for the printed minimum: on a shared machine the fastest call is the one
/// least disturbed by other work, so it is the most repeatable number.
const MIN_OF: u32 = 2000;

fn best_micros(mut f: impl FnMut() -> Vec<u8>) -> f64 {
    (0..MIN_OF)
        .map(|_| {
            let t = std::time::Instant::now();
            std::hint::black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
        .as_secs_f64()
        * 1e6
}

fn bodies() -> Vec<(&'static str, Vec<u8>)> {
    let dataset: Vec<Item> = serde_json::from_str(DATASET_JSON).expect("dataset");
    let page = demo::items_page(&dataset, 50, 1).expect("no overflow in the dataset");
    let json50 = serde_json::to_vec(&page).expect("json");
    let json = br#"{"message":"Hello, World!"}"#.to_vec();
    vec![("json50", json50), ("json", json)]
}

/// A coding's name and its compressor.
type Coding = (String, Box<dyn Fn(&[u8]) -> Vec<u8>>);

fn codings() -> Vec<Coding> {
    let mut v: Vec<Coding> = Vec::new();
    for l in GZIP_LEVELS {
        v.push((format!("gzip-{l}"), Box::new(move |b| compress::gzip(b, l))));
    }
    for q in BROTLI_QUALITIES {
        v.push((format!("br-{q}"), Box::new(move |b| compress::brotli(b, q))));
    }
    v
}

/// A compressor at a fixed level.
type Compressor = Box<dyn Fn(&[u8]) -> Vec<u8>>;

/// Body sizes for the stall table: how long one worker spends on one large answer at the
/// default levels (what `COMPRESS_MAX_BYTES` is chosen from).
const STALL_SIZES_KIB: [usize; 6] = [16, 32, 64, 128, 256, 1024];
/// Calls per size in the stall table (fewer than `MIN_OF`: a 1 MiB call takes milliseconds).
const STALL_MIN_OF: u32 = 100;

/// Prints the fastest compression of JSON pages of each of [`STALL_SIZES_KIB`] at the
/// default gzip level and brotli quality, with the rate it implies.
fn stall_table() {
    let dataset: Vec<Item> = serde_json::from_str(DATASET_JSON).expect("dataset");
    let pages: Vec<u8> = (1..=100)
        .flat_map(|p| {
            let page = demo::items_page(&dataset, 50, p).expect("no overflow in the dataset");
            serde_json::to_vec(&page).expect("json")
        })
        .collect();
    let defaults = linerate_server::config::Compression::default();
    let (gzip_level, brotli_quality) = (defaults.gzip_level, defaults.brotli_quality);
    for kib in STALL_SIZES_KIB {
        let body: Vec<u8> = pages.iter().copied().cycle().take(kib * 1024).collect();
        let codings: [(&str, Compressor); 2] = [
            ("gzip", Box::new(move |b| compress::gzip(b, gzip_level))),
            ("br", Box::new(move |b| compress::brotli(b, brotli_quality))),
        ];
        for (coding, f) in codings {
            let best = (0..STALL_MIN_OF)
                .map(|_| {
                    let t = std::time::Instant::now();
                    std::hint::black_box(f(std::hint::black_box(&body)));
                    t.elapsed()
                })
                .min()
                .unwrap_or_default();
            eprintln!(
                "stall: {kib} KiB {coding} (default level) best of {STALL_MIN_OF} {:.0} µs, {:.0} MB/s",
                best.as_secs_f64() * 1e6,
                body.len() as f64 / best.as_secs_f64() / 1e6
            );
        }
    }
}

fn bench(c: &mut Criterion) {
    stall_table();
    if std::env::var_os("STALL_ONLY").is_some() {
        return;
    }
    let bodies = bodies();
    for (name, body) in &bodies {
        eprintln!("{name}: identity {} bytes", body.len());
        for (coding, f) in codings() {
            let n = f(body).len();
            eprintln!(
                "{name}: {coding} {n} bytes ({:.3}), best of {MIN_OF} calls {:.1} µs",
                n as f64 / body.len() as f64,
                best_micros(|| f(std::hint::black_box(body)))
            );
        }
    }
    for (name, body) in &bodies {
        let mut g = c.benchmark_group(*name);
        g.throughput(Throughput::Bytes(body.len() as u64));
        for (coding, f) in codings() {
            g.bench_with_input(BenchmarkId::from_parameter(&coding), body, |b, body| {
                b.iter(|| f(std::hint::black_box(body)))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
