//! Runs this crate's part of one unary GetSum call many times, for counting instructions
//! under callgrind: the request body through a fresh `frame::Decoder`, the `SumRequest`
//! decoded, the `SumReply` framed into a reused buffer, the OK status's trailer fields.
//!
//! Owns nothing but a loop: wall time on a shared VM is noisy, instruction counts are not. Run
//! it twice with different counts and divide the difference, so start-up cancels out:
//!
//!     cargo build --release -p linerate-grpc --example unary_count
//!     valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/unary_count 100000

use std::hint::black_box;
use std::process::ExitCode;

use linerate_grpc::Status;
use linerate_grpc::frame::{self, Decoder};
use linerate_grpc::proto::benchmark::{SumReply, SumRequest};
use prost::Message as _;

/// HttpArena's prebuilt request body: a = 1, b = 2.
const REQUEST: [u8; 9] = [0x00, 0x00, 0x00, 0x00, 0x04, 0x08, 0x01, 0x10, 0x02];

fn main() -> ExitCode {
    let Some(Ok(count)) = std::env::args().nth(1).map(|c| c.parse::<u64>()) else {
        eprintln!("usage: unary_count <count>");
        return ExitCode::FAILURE;
    };
    let mut out = Vec::with_capacity(64);
    let mut trailer_bytes = 0usize;
    let ok = Status::ok();
    for _ in 0..count {
        out.clear();
        let mut d = Decoder::new(frame::DEFAULT_MAX_MESSAGE, false);
        let mut input = black_box(&REQUEST[..]);
        let Ok(Some(m)) = d.next(&mut input) else {
            return ExitCode::FAILURE;
        };
        let Ok(req) = SumRequest::decode(m.data) else {
            return ExitCode::FAILURE;
        };
        if d.finish().is_err() {
            return ExitCode::FAILURE;
        }
        frame::encode(
            &SumReply {
                result: req.a + req.b,
            },
            &mut out,
        );
        black_box(&ok).fields(|name, value| trailer_bytes += name.len() + value.len());
        black_box(&out);
    }
    println!(
        "{} bytes out per call, {trailer_bytes} trailer bytes",
        out.len()
    );
    ExitCode::SUCCESS
}
