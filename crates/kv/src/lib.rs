//! linerate's cache-aside for handlers: a per-process memory tier ([`Memory`]) in
//! front of an optional shared second tier in Redis/Valkey or memcached ([`Tier`]), together
//! as [`Cache`]. memcached is reached through a well-kept crate (`async-memcached`); Redis
//! through a hand-written pipelined RESP client ([`resp`], measured against the `redis` crate's
//! connection, which cost a tier hit more than the rest of the edge did); this crate adds what a cache tier needs of them: every call bounded by a timeout, a tier that is
//! down answered as a miss (counted, logged once per outage, probed until it is back), an
//! exact TTL on every engine ([`frame`]), and a purge that reaches every edge through a
//! generation number kept in the tier.
//!
//! The sans-I/O parts ([`health`], [`frame`], [`endpoint`], [`resp`], [`link`]) are tested without sockets;
//! tests/ runs the clients against real `redis-server` and `memcached` processes.
#![forbid(unsafe_code)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod cache;
pub mod endpoint;
pub mod frame;
pub mod health;
pub mod link;
mod memcached;
mod memory;
mod redis;
pub mod resp;
pub mod stats;
mod tier;

pub use cache::{
    Cache, CacheBuilder, CacheStats, DEFAULT_GENERATION_REFRESH, DEFAULT_MEMORY_BYTES,
    DEFAULT_MEMORY_TTL_WITH_TIER, Hit, Source,
};
pub use endpoint::{BadUrl, Endpoint, TierConfig};
pub use memory::{ENTRY_OVERHEAD, Memory};
pub use stats::Snapshot;
pub use tier::{LinkSpec, Tier};
