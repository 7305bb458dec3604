//! Instructions per response of the load generator's reader ([`ResponseCounter`]), for
//! callgrind: `valgrind --tool=callgrind target/release/examples/count_responses N`. Feeds N
//! times a read of 16 pipelined answers as linerate sends them (plaintext, with the headers
//! of a real response) and counts them; run it with two N and divide the difference.
use linerate_http1::ResponseCounter;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let one = b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Sun, 22 Nov 2026 12:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";
    let read: Vec<u8> = one.iter().copied().cycle().take(one.len() * 16).collect();
    let mut counter = ResponseCounter::new();
    let mut counted = 0u64;
    for _ in 0..n {
        let mut rest = &read[..];
        while !rest.is_empty() {
            let (used, done) = counter.feed(rest, false).expect("well-formed");
            rest = &rest[used..];
            counted += u64::from(done.is_some());
        }
    }
    assert_eq!(counted, 16 * n as u64);
    println!("{counted} responses");
}
