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

fn bench(c: &mut Criterion) {
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
