//! Fuzzes the PROXY protocol header parser (versions 1 and 2) over arbitrary bytes; the
//! invariants are `linerate_fuzz::check_proxy_header`'s.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_fuzz::check_proxy_header(data);
});
