//! Fuzzes the chunked body decoder over arbitrary bytes, whole, split in two and byte by byte;
//! the invariants are `linerate_fuzz::check_chunked`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::check_chunked(data);
});
