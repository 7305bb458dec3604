//! Compressed hits over real sockets: a stored answer a client takes gzip or
//! br for is encoded once per entry and coding, and every later hit sends the kept bytes,
//! read back by Debian's curl `--compressed`. What is asserted is the bytes and how many
//! times the compressor ran (the admin listener's counter), never a time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

use common::bin::serve;
use common::curl::curl_url;
use common::{READ_TIMEOUT, free_port};

/// A 2 KiB text page, as the encoded hits' benchmark serves: compressible, never the same
/// line twice.
fn page() -> Vec<u8> {
    (0..64)
        .flat_map(|i| format!("line {i:02} of the page that is stored once\n").into_bytes())
        .take(2048)
        .collect()
}

/// An origin that answers every request with the page, fresh for a minute.
fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
                let mut w = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                loop {
                    let mut line = String::new();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => {
                            let body = page();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
                                 Cache-Control: max-age=60\r\nETag: \"p\"\r\n\
                                 Content-Length: {}\r\n\r\n",
                                body.len()
                            );
                            if w.write_all(head.as_bytes()).is_err() || w.write_all(&body).is_err()
                            {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    addr
}

/// `linerate_cache_encoded_bodies_total` from the admin listener at `admin`.
fn encoded(admin: &str) -> u64 {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out.lines()
        .find_map(|l| l.strip_prefix("linerate_cache_encoded_bodies_total "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the counter is in /metrics")
}

/// A hit with `Accept-Encoding: gzip` compressed the stored page again on
/// every request. Now the first hit that asks for a coding encodes it, and every later one
/// sends the same kept bytes: the compressor runs once per entry and coding, and each answer
/// decodes (curl `--compressed`) to the origin's bytes, with `Content-Encoding`, `Vary` and
/// the ETag made weak as before.
#[test]
fn a_compressed_hit_is_encoded_once_per_entry_and_coding() {
    let up = origin();
    let dir = std::env::temp_dir().join(format!("linerate-coded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = format!("/=http://{up}");
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let s = serve(&[
        "--app",
        "none",
        "--proxy",
        &spec,
        "--proxy-cache",
        "4MiB",
        "--admin",
        &admin,
    ]);
    let url = format!("http://{}/page", s.addr);
    let get = |coding: &str| {
        let ae = format!("Accept-Encoding: {coding}");
        curl_url(&dir, &url, &["--compressed"], &["-H", &ae]).resp
    };
    // The miss fills the store (its answer is compressed as it streams, as before).
    assert_eq!(get("gzip").body, page());
    assert_eq!(encoded(&admin), 0);
    for (coding, runs) in [("gzip", 1), ("gzip", 1), ("gzip", 1), ("br", 2), ("br", 2)] {
        let r = get(coding);
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("content-encoding"),
            Some(coding),
            "{:?}",
            r.headers
        );
        assert!(r.header("cache-status").unwrap().contains("hit"));
        assert_eq!(r.header("etag"), Some("W/\"p\""), "{:?}", r.headers);
        assert_eq!(r.body, page(), "{coding}: decodes to the origin's bytes");
        assert_eq!(encoded(&admin), runs, "{coding}: the compressor's runs");
    }
    // A client that takes no coding gets the stored bytes as they are.
    let plain = curl_url(&dir, &url, &[], &[]).resp;
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.body, page());
    let _ = std::fs::remove_dir_all(&dir);
}
