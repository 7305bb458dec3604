//! Criterion micro-benchmarks for the request-head parser and the body decoder.
//!
//! Owns the wall-time comparison of `linerate_http1::RequestHead::parse` with `httparse` on the
//! same bytes (`inputs/mod.rs`), reported as `Throughput::Bytes`. linerate also validates more
//! (Host rules, CL/TE interpretation, pct-encoding): the comparison prices that strictness.
//! Each parser is used the way a server uses it: one `RequestHead` (or one httparse header
//! array) reused across iterations. Instruction counts live in `examples/parse_count.rs`.
//!
//! Run: `cargo bench -p linerate-http1 --bench parse -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use linerate_http1::{BodyDecoder, Framing, Limits, Parsed, RequestHead};

mod inputs;

/// Parses every head in `buf` back to back with linerate; returns how many were parsed.
fn linerate_all(head: &mut RequestHead, buf: &[u8], limits: &Limits) -> usize {
    let mut pos = 0;
    let mut count = 0;
    while pos < buf.len() {
        match head.parse(&buf[pos..], limits) {
            Ok(Parsed::Complete(n)) => pos += n,
            other => panic!("linerate rejected a bench input at {pos}: {other:?}"),
        }
        count += 1;
    }
    count
}

/// Parses every head in `buf` back to back with httparse; returns how many were parsed.
fn httparse_all<'b>(headers: &mut [httparse::Header<'b>], buf: &'b [u8]) -> usize {
    let mut pos = 0;
    let mut count = 0;
    while pos < buf.len() {
        let mut req = httparse::Request::new(headers);
        match req.parse(&buf[pos..]) {
            Ok(httparse::Status::Complete(n)) => pos += n,
            other => panic!("httparse rejected a bench input at {pos}: {other:?}"),
        }
        count += 1;
    }
    count
}

fn heads(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("parse_head");
    for (name, buf) in inputs::heads() {
        let mut head = RequestHead::new();
        let mut headers = [httparse::EMPTY_HEADER; 100];
        // Same inputs, same verdicts: both parsers must accept every head before either is timed.
        assert_eq!(
            linerate_all(&mut head, &buf, &limits),
            httparse_all(&mut headers, &buf),
            "{name}"
        );
        group.throughput(Throughput::Bytes(buf.len() as u64));
        group.bench_function(BenchmarkId::new("linerate", name), |b| {
            b.iter(|| linerate_all(&mut head, black_box(&buf), &limits))
        });
        // httparse's header array borrows the buffer it last parsed, so it is tied to `buf`.
        group.bench_function(BenchmarkId::new("httparse", name), |b| {
            b.iter(|| httparse_all(&mut headers, black_box(&buf)))
        });
    }
    group.finish();
}

/// A chunked body of `total` data bytes in chunks of `chunk` bytes, then the last chunk.
fn chunked_body(total: usize, chunk: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(total + total / chunk * 12 + 5);
    let mut left = total;
    while left > 0 {
        let n = left.min(chunk);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend(std::iter::repeat_n(b'x', n));
        out.extend_from_slice(b"\r\n");
        left -= n;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// Decodes a whole chunked body; returns the number of data bytes.
fn decode_chunked(body: &[u8], limits: &Limits) -> usize {
    let mut dec = BodyDecoder::new(Framing::Chunked).expect("chunked has a body");
    let mut rest = body;
    let mut data = 0;
    loop {
        let step = dec.decode(rest, limits).expect("bench body is valid");
        data += step.data.len();
        rest = &rest[step.consumed..];
        if step.done {
            return data;
        }
    }
}

fn chunked(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("decode_chunked");
    // 64 KiB of data in 4 KiB chunks (a streaming upload), and in 64-byte chunks, where the
    // size-line state machine rather than the data copy-free slicing dominates.
    for (name, chunk) in [("64KiB_in_4KiB", 4096), ("64KiB_in_64B", 64)] {
        let body = chunked_body(64 * 1024, chunk);
        assert_eq!(decode_chunked(&body, &limits), 64 * 1024);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("linerate", name), &body, |b, body| {
            b.iter(|| decode_chunked(black_box(body), &limits))
        });
    }
    group.finish();
}

criterion_group!(benches, heads, chunked);
criterion_main!(benches);
