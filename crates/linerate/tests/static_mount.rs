//! The static-file mount on a real server, over raw sockets: file bodies go out whole and in
//! order with pipelined requests around them, HEAD matches GET, 304 and 206 are exact,
//! traversal attempts never leak a file above the root, and a 100 MB file streams without the
//! server's memory growing with it.

mod common;

use std::path::{Path, PathBuf};

use common::{Client, config, start};
use linerate_server::config::FilesMount;

fn root(name: &str) -> PathBuf {
    let base = std::env::temp_dir().join(format!("linerate-static-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let root = base.join("www");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(base.join("canary"), b"CANARY-SECRET").unwrap();
    std::fs::write(root.join("a.txt"), b"hello file\n").unwrap();
    std::fs::write(root.join("sub/index.html"), b"<h1>index</h1>\n").unwrap();
    std::fs::write(root.join("big.bin"), pattern(4 << 20)).unwrap();
    std::os::unix::fs::symlink(base.join("canary"), root.join("out-link")).unwrap();
    root
}

/// Bytes whose every position is distinguishable, so a reordered or shifted range shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 16) as u8)
        .collect()
}

fn serve(root: &Path) -> common::Running {
    let cfg = linerate_server::Config {
        files: Some(FilesMount {
            prefix: "/static".into(),
            root: root.to_path_buf(),
            ..Default::default()
        }),
        ..config()
    };
    start(cfg, linerate::demo::router())
}

#[test]
fn file_bodies_are_whole_and_in_order_with_pipelined_requests() {
    let root = root("order");
    let srv = serve(&root);
    let mut c = Client::connect(srv.addr);
    c.send(
        b"GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n\
GET /json HTTP/1.1\r\nHost: x\r\n\r\n\
HEAD /static/a.txt HTTP/1.1\r\nHost: x\r\n\r\n\
GET /static/a.txt HTTP/1.1\r\nHost: x\r\n\r\n\
GET /static/big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=1000000-1000009\r\n\r\n",
    );
    let big = c.read_response();
    assert_eq!(big.status, 200);
    assert_eq!(big.body.len(), 4 << 20);
    assert!(big.body == pattern(4 << 20), "file body differs");
    let json = c.read_response();
    assert_eq!(json.text(), r#"{"message":"Hello, World!"}"#);
    let head = c.read_response_opt(true).unwrap();
    let get = c.read_response();
    assert_eq!(get.text(), "hello file\n");
    for name in ["content-type", "content-length", "etag", "last-modified"] {
        assert_eq!(
            head.header(name),
            get.header(name),
            "HEAD and GET agree on {name}"
        );
    }
    assert!(head.body.is_empty());
    let range = c.read_response();
    assert_eq!(range.status, 206);
    assert_eq!(
        range.header("content-range"),
        Some("bytes 1000000-1000009/4194304")
    );
    assert_eq!(range.body, pattern(4 << 20)[1_000_000..1_000_010]);
    srv.stop();
}

#[test]
fn conditional_requests_get_exact_304() {
    let root = root("cond");
    let srv = serve(&root);
    let mut c = Client::connect(srv.addr);
    let first = c.get("/static/a.txt");
    let etag = first.header("etag").unwrap().to_string();
    c.send(
        format!("GET /static/a.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n")
            .as_bytes(),
    );
    let r = c.read_response_opt(true).unwrap();
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(r.header("content-length"), None);
    // The connection is still in step: the next answer is the next request's.
    assert_eq!(c.get("/json").status, 200);
    srv.stop();
}

#[test]
fn traversal_never_leaks_a_file_above_the_root() {
    let root = root("traversal");
    let srv = serve(&root);
    for path in [
        "/static/../canary",
        "/static/%2e%2e/canary",
        "/static/%252e%252e/canary",
        "/static/..%2fcanary",
        "/static/%2e%2e%2fcanary",
        "/static/%c0%ae%c0%ae/canary",
        "/static/..\\canary",
        "/static/a.txt%00",
        "/static//etc/passwd",
        "/static/out-link",
        "/static/sub/../../canary",
    ] {
        let mut c = Client::connect(srv.addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        let r = c.read_response();
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        assert!(!r.text().contains("CANARY"), "{path} leaked the canary");
        assert!(
            !r.text().contains(root.to_str().unwrap()),
            "{path}: a path in the body"
        );
    }
    let mut c = Client::connect(srv.addr);
    let r = c.get("/static");
    assert_eq!((r.status, r.header("location")), (301, Some("/static/")));
    let r = c.get("/static/sub/");
    assert_eq!(r.text(), "<h1>index</h1>\n");
    srv.stop();
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn a_100_mb_file_streams_with_bounded_memory() {
    const SIZE: u64 = 100 << 20;
    let root = root("large");
    // Sparse: no disk space used; its pages read as zeros.
    std::fs::File::create(root.join("large.bin"))
        .unwrap()
        .set_len(SIZE)
        .unwrap();
    let srv = serve(&root);
    let before = rss_bytes();
    let mut c = Client::connect(srv.addr);
    c.send(b"GET /static/large.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut got = 0u64;
    let mut head_done = false;
    let mut buf = vec![0u8; 1 << 16];
    let mut pending = Vec::new();
    loop {
        let n = std::io::Read::read(&mut c.stream, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        if head_done {
            got += n as u64;
        } else {
            pending.extend_from_slice(&buf[..n]);
            if let Some(p) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                assert!(pending.starts_with(b"HTTP/1.1 200 OK\r\n"));
                head_done = true;
                got += (pending.len() - p - 4) as u64;
            }
        }
    }
    assert_eq!(got, SIZE, "the whole file, then FIN");
    let grown = rss_bytes().saturating_sub(before);
    // The test's own 64 KiB read buffer and the server's pools: nothing near the file's size.
    assert!(
        grown < 16 << 20,
        "RSS grew by {grown} bytes while streaming 100 MB"
    );
    srv.stop();
}
