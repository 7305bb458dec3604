//! Automatic HTTPS: certificates the server obtains and renews itself, from an ACME CA
//! (RFC 8555; Let's Encrypt by default) for sites with `tls = "acme"`, or from its own local
//! CA for sites with `tls = "internal"`.
//!
//! The parts, one job each:
//! - [`store`]: the files on disk and whether a stored certificate may be served;
//! - [`schedule`]: when to renew, and the backoff after a failure;
//! - [`challenges`]: the HTTP-01 tokens and TLS-ALPN-01 certificates that workers answer
//!   the CA's validation with;
//! - [`issue`]: one ACME order, through instant-acme;
//! - [`fleet`]: with `[storage]`, the account, certificates, locks and challenge answers
//!   the fleet's nodes share;
//! - [`dns`]: DNS-01's TXT records, put by RFC 2136 updates signed with TSIG;
//! - [`local_ca`]: the local CA;
//! - [`orders`]: the orders counted by outcome, for `/metrics`;
//! - [`manager`]: the thread that keeps every managed certificate fresh and has the TLS
//!   listeners read it again when it changes (a swap between handshakes: no connection is
//!   touched).
//!
//! Without the `acme` feature only the store stays (the TLS listeners read managed
//! certificates through it), and `off.rs` stands in for the manager and the challenge table:
//! a configuration with managed sites is refused at start (`crate::features`), so neither is
//! ever made.
#![forbid(unsafe_code)]

#[cfg(feature = "acme")]
pub mod challenges;
pub mod dns;
#[cfg(feature = "acme")]
pub mod fleet;
#[cfg(feature = "acme")]
pub mod issue;
#[cfg(feature = "acme")]
pub mod local_ca;
#[cfg(feature = "acme")]
pub mod manager;
#[cfg(not(feature = "acme"))]
mod off;
#[cfg(feature = "acme")]
pub mod orders;
#[cfg(feature = "acme")]
pub mod schedule;
#[cfg(feature = "tls")]
pub mod store;

pub use challenges::{ACME_TLS_ALPN, Challenges, HTTP01_PREFIX};
#[cfg(feature = "acme")]
pub use manager::{ManagedSite, Manager, managed_sites};
#[cfg(not(feature = "acme"))]
pub use off::Manager;
#[cfg(not(feature = "acme"))]
use off::challenges;
