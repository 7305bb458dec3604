//! Fuzzes the request-head parser and body framing over arbitrary bytes taken as a stream of
//! pipelined requests; the invariants are `linerate_fuzz::check_request`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::check_request(data);
});
