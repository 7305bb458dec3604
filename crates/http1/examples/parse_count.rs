//! Parses one bench input many times with one parser, for counting instructions under callgrind.
//!
//! Owns nothing but a loop: wall time on a shared VM is noisy, instruction counts are not. Run it
//! twice with different counts and divide the difference, so start-up cancels out:
//!
//!     cargo build --release -p linerate-http1 --example parse_count
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/parse_count linerate wrk_min 100000

use std::hint::black_box;
use std::process::ExitCode;

use linerate_http1::{Limits, Parsed, RequestHead};

#[path = "../benches/inputs/mod.rs"]
mod inputs;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [parser, input, count] = args.as_slice() else {
        eprintln!("usage: parse_count <linerate|httparse> <input> <count>");
        eprintln!("inputs: wrk_min techempower_plaintext browser_get pipelined16");
        return ExitCode::FAILURE;
    };
    let Some((_, buf)) = inputs::heads().into_iter().find(|(name, _)| name == input) else {
        eprintln!("unknown input {input}");
        return ExitCode::FAILURE;
    };
    let Ok(count) = count.parse::<u64>() else {
        eprintln!("count must be a number");
        return ExitCode::FAILURE;
    };
    let mut parsed = 0usize;
    match parser.as_str() {
        "linerate" => {
            let limits = Limits::default();
            let mut head = RequestHead::new();
            for _ in 0..count {
                let buf = black_box(&buf[..]);
                let mut pos = 0;
                while pos < buf.len() {
                    let Ok(Parsed::Complete(n)) = head.parse(&buf[pos..], &limits) else {
                        return ExitCode::FAILURE;
                    };
                    pos += n;
                    parsed += 1;
                }
            }
        }
        "httparse" => {
            let mut headers = [httparse::EMPTY_HEADER; 100];
            for _ in 0..count {
                let buf = black_box(&buf[..]);
                let mut pos = 0;
                while pos < buf.len() {
                    let mut req = httparse::Request::new(&mut headers);
                    let Ok(httparse::Status::Complete(n)) = req.parse(&buf[pos..]) else {
                        return ExitCode::FAILURE;
                    };
                    pos += n;
                    parsed += 1;
                }
            }
        }
        other => {
            eprintln!("unknown parser {other}");
            return ExitCode::FAILURE;
        }
    }
    println!("{parsed}");
    ExitCode::SUCCESS
}
