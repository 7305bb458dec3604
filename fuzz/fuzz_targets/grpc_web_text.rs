//! Fuzzes the gRPC-Web `-text` body decoder (crates/grpc, `web::TextDecoder`) and, on what it
//! decodes, the message decoder. The checks are `fuzz/src/grpc.rs`'s `check_web_text`.
#![no_main]

#[path = "../src/grpc.rs"]
mod grpc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = grpc::check_web_text(data);
});
