//! The request bytes the parser benchmarks measure, shared by `benches/parse.rs` (wall time) and
//! `examples/parse_count.rs` (instruction counts under callgrind) so both measure the same input.
//!
//! Every input must parse as one complete head with both linerate and httparse; the bench
//! asserts that before timing anything, so a rejected input can never be "fast".

/// wrk's default request: the smallest head a load generator sends.
pub const WRK_MIN: &[u8] = b"GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n";

/// TechEmpower's plaintext test request (as sent by its wrk script).
pub const TECHEMPOWER_PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\n\
Host: 127.0.0.1:8080\r\n\
Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n\
Connection: keep-alive\r\n\
\r\n";

/// A realistic desktop browser navigation (Chrome-like, 12 fields, ~600 bytes): long
/// User-Agent, client hints, a cookie.
pub const BROWSER_GET: &[u8] = b"GET /articles/strict-http?page=2 HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.9,de;q=0.8\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Referer: https://www.example.com/articles\r\n\
Cookie: session=8f3a9c2e41b7d065; theme=dark\r\n\
sec-ch-ua: \"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"\r\n\
sec-ch-ua-mobile: ?0\r\n\
sec-ch-ua-platform: \"Linux\"\r\n\
Sec-Fetch-Mode: navigate\r\n\
Connection: keep-alive\r\n\
\r\n";

/// How many copies of [`TECHEMPOWER_PLAINTEXT`] the pipelined input holds (TechEmpower's
/// plaintext test pipelines 16 requests per write).
pub const PIPELINE_DEPTH: usize = 16;

/// [`PIPELINE_DEPTH`] copies of [`TECHEMPOWER_PLAINTEXT`] back to back.
pub fn pipelined() -> Vec<u8> {
    TECHEMPOWER_PLAINTEXT.repeat(PIPELINE_DEPTH)
}

/// The head inputs by name, in report order (`pipelined16` is built by [`pipelined`]).
pub fn heads() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("wrk_min", WRK_MIN.to_vec()),
        ("techempower_plaintext", TECHEMPOWER_PLAINTEXT.to_vec()),
        ("browser_get", BROWSER_GET.to_vec()),
        ("pipelined16", pipelined()),
    ]
}
