//! The call counters through a real server (HTTP/1.1 gRPC-Web calls on 127.0.0.1): every
//! way a call ends — the unary fast path, a call answered later, a deadline, a panic, a
//! stream, an unknown path — counted under its method with the status it ended with, as
//! `/metrics` renders them; and each call's `grpc-status` in its access-log line.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use super::super::tests::{COUNT_UP, FAIL, PANIC, SLOW_SUM, SUM, Sums, ab, frames};
use crate::Router;
use crate::testing::TestServer;

/// One gRPC-Web call over its own HTTP/1.1 connection; the answer's bytes.
fn call(addr: SocketAddr, path: &str, body: &[u8], extra: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/grpc-web+proto\r\n\
         content-length: {}\r\nconnection: close\r\n{extra}\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

/// `name{labels} value` lines of the text, as (name, labels, value).
fn samples(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("a value");
            let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
            let labels = labels.strip_suffix('}').expect("closed labels");
            (
                name.to_string(),
                labels.to_string(),
                value.parse().expect("a number"),
            )
        })
        .collect()
}

fn value(s: &[(String, String, f64)], name: &str, labels: &str) -> Option<f64> {
    s.iter()
        .find(|(n, l, _)| n == name && l == labels)
        .map(|&(_, _, v)| v)
}

#[test]
fn calls_are_counted_by_method_and_the_status_they_ended_with() {
    let mut config = TestServer::config();
    config.admin = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let router = Router::new().grpc(Sums {
        called: Arc::new(AtomicUsize::new(0)),
    });
    let server = TestServer::start_with(config, router).unwrap();
    let addr = server.addr();
    let one = frames(&[ab(1, 2)]);
    for _ in 0..3 {
        call(addr, SUM, &one, ""); // the fast path: OK
    }
    call(addr, FAIL, &one, ""); // NOT_FOUND
    call(addr, PANIC, &one, ""); // a panic: INTERNAL
    call(addr, SLOW_SUM, &frames(&[ab(1, 1)]), ""); // answered later: OK
    call(
        addr,
        SLOW_SUM,
        &frames(&[ab(1, 60_000)]),
        "grpc-timeout: 20m\r\n",
    ); // its deadline
    call(addr, SUM, &one, "grpc-timeout: 0n\r\n"); // a deadline of 0
    call(addr, COUNT_UP, &frames(&[ab(2, 0)]), ""); // a stream: OK
    call(addr, COUNT_UP, &[], ""); // a stream without its message: INTERNAL
    call(addr, "/test.Sum/Nope", &one, ""); // unknown
    call(addr, "/no.Such/Thing", &one, ""); // unknown too, under the same label
    // A body without a declared length whose prefix is over the limit, refused as it
    // arrives (`dispatch.rs`): RESOURCE_EXHAUSTED.
    let over = ((crate::grpc::MAX_MESSAGE + 1) as u32).to_be_bytes();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!(
        "POST {SUM} HTTP/1.1\r\nhost: x\r\ncontent-type: application/grpc-web+proto\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n5\r\n"
    )
    .into_bytes();
    req.extend_from_slice(&[0, over[0], over[1], over[2], over[3]]);
    req.extend_from_slice(b"\r\n");
    s.write_all(&req).unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // Each call was counted before its answer went out, and every answer has been read.
    let text = server.stats().grpc_metrics();
    let s = samples(&text);
    let calls = |method: &str, code: &str| {
        value(
            &s,
            "linerate_grpc_calls_total",
            &format!("method=\"{method}\",code=\"{code}\""),
        )
    };
    let rows = [
        (SUM, "OK", 3.0),
        (SUM, "DEADLINE_EXCEEDED", 1.0),
        (SUM, "RESOURCE_EXHAUSTED", 1.0),
        (FAIL, "NOT_FOUND", 1.0),
        (PANIC, "INTERNAL", 1.0),
        (SLOW_SUM, "OK", 1.0),
        (SLOW_SUM, "DEADLINE_EXCEEDED", 1.0),
        (COUNT_UP, "OK", 1.0),
        (COUNT_UP, "INTERNAL", 1.0),
        ("unknown", "UNIMPLEMENTED", 2.0),
    ];
    for (method, code, n) in rows {
        assert_eq!(calls(method, code), Some(n), "{method} {code}\n{text}");
    }
    // Every registered method is listed (OK at 0 before its first call); nothing else.
    assert_eq!(calls("/test.Sum/Total", "OK"), Some(0.0));
    assert_eq!(
        calls("/test.Sum/Nope", "UNIMPLEMENTED"),
        None,
        "no series per path"
    );
    // The histogram agrees with the counts, bucket by bucket cumulative.
    let labels = format!("method=\"{SUM}\",code=\"OK\"");
    let h = |suffix: &str, extra: &str| {
        value(
            &s,
            &format!("linerate_grpc_call_duration_seconds{suffix}"),
            &format!("{labels}{extra}"),
        )
    };
    assert_eq!(h("_count", ""), Some(3.0));
    assert_eq!(h("_bucket", ",le=\"+Inf\""), Some(3.0));
    assert!(h("_sum", "").is_some_and(|v| v >= 0.0));
    let buckets: Vec<f64> = s
        .iter()
        .filter(|(n, l, _)| {
            n == "linerate_grpc_call_duration_seconds_bucket" && l.starts_with(&labels)
        })
        .map(|&(_, _, v)| v)
        .collect();
    assert_eq!(buckets.len(), crate::stats::DURATION_BUCKETS_US.len() + 1);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative");
    server.stop().unwrap();
}

#[test]
fn nothing_is_counted_without_metrics() {
    let router = Router::new().grpc(Sums {
        called: Arc::new(AtomicUsize::new(0)),
    });
    let server = TestServer::start(router).unwrap();
    call(server.addr(), SUM, &frames(&[ab(1, 2)]), "");
    call(server.addr(), COUNT_UP, &frames(&[ab(1, 0)]), "");
    let text = server.stats().grpc_metrics();
    let s = samples(&text);
    assert!(!s.is_empty(), "the methods are listed");
    assert!(s.iter().all(|&(_, _, v)| v == 0.0), "{text}");
    server.stop().unwrap();
}

#[test]
fn the_access_log_has_each_calls_grpc_status() {
    let dir = std::env::temp_dir().join(format!("linerate-grpc-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let mut config = TestServer::config();
    config.access_log = Some(crate::access_log::LogTarget::File(path.clone()));
    config.access_log_format =
        crate::access_log::LogFormat::parse("$request_uri $grpc_status").unwrap();
    let router = Router::new()
        .grpc(Sums {
            called: Arc::new(AtomicUsize::new(0)),
        })
        .get("/plain", |_| crate::Response::text("plain"));
    let server = TestServer::start_with(config, router).unwrap();
    let addr = server.addr();
    let one = frames(&[ab(1, 2)]);
    call(addr, SUM, &one, ""); // 0, in the trailer frame (gRPC-Web)
    call(addr, FAIL, &one, ""); // 5, the frame alone
    call(addr, SLOW_SUM, &frames(&[ab(1, 1)]), ""); // answered later: 0
    call(addr, "/no.Such/Thing", &one, ""); // 12
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /plain HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    s.read_to_end(&mut Vec::new()).unwrap();
    server.stop().unwrap();
    let log = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        log,
        format!("{SUM} 0\n{FAIL} 5\n{SLOW_SUM} 0\n/no.Such/Thing 12\n/plain -\n"),
    );
}
