//! The demo app's contracts: TechEmpower (/json, /plaintext) and HttpArena (/baseline11,
//! /pipeline, /json/{count}, /upload), with random inputs from a fixed-seed generator.

mod common;

use common::{Client, start_demo};
use linerate::demo::{DATASET_JSON, Item};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

#[test]
fn techempower_json_and_plaintext() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let r = c.get("/json");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, br#"{"message":"Hello, World!"}"#);
    let r = c.get("/plaintext");
    assert_eq!(
        (r.header("content-type"), r.body.as_slice()),
        (Some("text/plain"), &b"Hello, World!"[..])
    );
    assert!(r.header("date").is_some() && r.header("server").is_some());
    server.stop();
}

#[test]
fn baseline11_get_and_post_with_random_values() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let mut rng = Rng(0x5eed);
    for i in 0..200 {
        let (a, b, body) = (
            rng.int(-100_000, 100_000),
            rng.int(-100_000, 100_000),
            rng.int(-1000, 1000),
        );
        let r = c.get(&format!("/baseline11?a={a}&b={b}"));
        assert_eq!((r.status, r.text()), (200, (a + b).to_string()));
        let body_s = body.to_string();
        let req = if i % 2 == 0 {
            format!(
                "POST /baseline11?a={a}&b={b} HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n{body_s}",
                body_s.len()
            )
        } else {
            // Chunked, split into two chunks when possible.
            let (x, y) = body_s.split_at(body_s.len() / 2);
            let mut s = format!(
                "POST /baseline11?a={a}&b={b} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            for part in [x, y].into_iter().filter(|p| !p.is_empty()) {
                s.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
            }
            s + "0\r\n\r\n"
        };
        c.send(req.as_bytes());
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text()),
            (200, (a + b + body).to_string()),
            "{req}"
        );
        assert_eq!(r.header("content-type"), Some("text/plain"));
    }
    // Bad input is a 400, not a crash.
    assert_eq!(c.get("/baseline11?a=x&b=1").status, 400);
    assert_eq!(c.get("/baseline11").status, 400);
    server.stop();
}

#[test]
fn pipeline_endpoint() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    c.send(&b"GET /pipeline HTTP/1.1\r\nHost: t\r\n\r\n".repeat(16));
    for _ in 0..16 {
        assert_eq!(c.read_response().text(), "ok");
    }
    server.stop();
}

#[test]
fn json_count_items_with_totals() {
    let dataset: Vec<Item> = serde_json::from_str(DATASET_JSON).unwrap();
    assert_eq!(dataset.len(), 50);
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let mut rng = Rng(42);
    for _ in 0..60 {
        let count = rng.int(1, 50) as usize;
        let m = rng.int(0, 9);
        let path = if m == 0 {
            format!("/json/{count}")
        } else {
            format!("/json/{count}?m={m}")
        };
        let m = if m == 0 { 1 } else { m };
        let r = c.get(&path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["count"], count);
        let items = v["items"].as_array().unwrap();
        assert_eq!(items.len(), count);
        for (got, want) in items.iter().zip(&dataset) {
            assert_eq!(got["id"], want.id);
            assert_eq!(got["total"], want.price * want.quantity * m, "{path}");
            assert_eq!(got["rating"]["score"], want.rating.score);
        }
    }
    for bad in ["/json/0", "/json/51", "/json/x", "/json/3?m=q"] {
        assert_eq!(c.get(bad).status, 400, "{bad}");
    }
    server.stop();
}

#[test]
fn upload_counts_streamed_bytes_for_20_mb() {
    let server = start_demo();
    let mut c = Client::connect(server.addr);
    let size = 20 * 1024 * 1024 + 7;
    let mut rng = Rng(7);
    let body: Vec<u8> = (0..size).map(|_| rng.next() as u8).collect();
    // Content-Length, sent in pieces.
    c.send(
        format!("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n").as_bytes(),
    );
    for piece in body.chunks(1 << 20) {
        c.send(piece);
    }
    let r = c.read_response();
    assert_eq!((r.status, r.text()), (200, size.to_string()));
    // Chunked, odd chunk sizes.
    c.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for piece in body.chunks(777_777) {
        c.send(format!("{:x}\r\n", piece.len()).as_bytes());
        c.send(piece);
        c.send(b"\r\n");
    }
    c.send(b"0\r\n\r\n");
    let r = c.read_response();
    assert_eq!((r.status, r.text()), (200, size.to_string()));
    // A lying Content-Length (shorter body, then EOF) is never answered with a count.
    server.stop();
}
