//! DNS-01 (RFC 8555 §8.4) through RFC 2136 dynamic updates signed with TSIG (RFC 8945): the
//! `_acme-challenge` TXT record is put in the zone by its primary server (BIND, Knot,
//! PowerDNS), checked to be served, and deleted after the order.
//!
//! The parts, one job each:
//! - [`message`]: the wire format, sans I/O (the UPDATE and query builders, a strict parser
//!   of the server's answer); fuzzed (`fuzz/fuzz_targets/dns_answer.rs`);
//! - [`key`]: the TSIG key, from BIND's `key "NAME" { … };` file or the config's secret;
//! - [`tsig`]: a message's MAC and the check of the server's signed answer;
//! - [`client`]: UDP with a timeout and retries, TCP when the answer is truncated;
//! - [`update`]: the three operations an order needs (add, check served, delete).
//!
//! `message` and `key` need no crypto and no runtime (the config parser and the fuzzer use
//! them); the rest runs on the ACME thread only, never on a worker.
#![forbid(unsafe_code)]

#[cfg(feature = "acme")]
pub mod client;
// Run by the `dns_answer` fuzz target (through `crate::fuzzing`, built with proxy and http2)
// and by its seeds' unit test.
#[cfg(any(test, all(feature = "proxy", feature = "http2")))]
pub(crate) mod fuzz;
pub mod key;
pub mod message;
#[cfg(feature = "acme")]
pub mod tsig;
#[cfg(feature = "acme")]
pub mod update;
