//! Fuzzes the upstream HTTP/2 connection (linerate-server's `h2u`) reading arbitrary server
//! bytes: the first byte picks our settings and how many requests are open, the rest is read
//! whole, split in two and a byte at a time. The checks (no panic, the same events and output
//! however the bytes arrive, one ending per stream, windows never overrun, whole frames out)
//! live in `crates/server/src/h2u/fuzz.rs`, which also replays the seeds on stable.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_server::fuzzing::h2u_frames(data);
});
