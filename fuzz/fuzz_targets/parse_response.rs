//! Fuzzes the response reader (the load generator's counter and the head parser) over
//! arbitrary bytes, whole, split in two and byte by byte; the invariants are
//! `linerate_fuzz::check_response`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::check_response(data);
});
