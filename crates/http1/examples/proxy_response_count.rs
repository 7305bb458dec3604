//! Instructions per upstream response head as the proxy reads one
//! ([`parse_response_strict`] with its field spans), for callgrind:
//! `valgrind --tool=callgrind target/release/examples/proxy_response_count N`. Parses N times
//! the head linerate's demo sends for `/json`; run it with two N and divide the difference.
use std::hint::black_box;

use linerate_http1::parse_response_strict;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let head = b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Thu, 26 Nov 2026 15:13:25 GMT\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}";
    let mut fields = Vec::new();
    let mut total = 0usize;
    for _ in 0..n {
        let info = parse_response_strict(black_box(&head[..]), Some(&mut fields))
            .expect("well-formed")
            .expect("whole");
        total += info.head_len + fields.len();
    }
    println!("{total}");
}
