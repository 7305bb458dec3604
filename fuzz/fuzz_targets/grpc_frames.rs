//! Fuzzes gRPC's length-prefixed message decoder (crates/grpc, `frame::Decoder`): the first
//! byte picks the call's encoding, the limit and a split point; the rest is a request body.
//! The checks are `fuzz/src/grpc.rs`'s `check_frames`.
#![no_main]

#[path = "../src/grpc.rs"]
mod grpc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = grpc::check_frames(data);
});
