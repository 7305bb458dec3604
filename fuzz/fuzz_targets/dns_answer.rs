//! Fuzzes the DNS answer parser DNS-01 reads its zone server's answers with (linerate-server's
//! `acme::dns::message`) over arbitrary bytes; the checks (no panic, a message ends exactly at
//! its last record, its parts inside it) live in `crates/server/src/acme/dns/fuzz.rs`, which
//! also replays the seeds on stable.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_server::fuzzing::dns_answer(data);
});
