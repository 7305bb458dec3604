//! gRPC's wire parts, sans I/O: a request's call definition ([`call`]), length-prefixed
//! messages ([`frame`]), status codes and the trailers that carry them ([`code`],
//! [`status`]), `grpc-timeout` ([`timeout`]), custom metadata ([`metadata`]), message
//! compression ([`compress`]), gRPC-Web ([`web`]) and the protobuf messages of the services
//! linerate serves ([`proto`]); with the `build` feature, code generation for build scripts
//! (its `build` module). Bytes in, facts out: no sockets, threads, clocks or server
//! types; the server's service layer drives these.
//!
//! The specifications: gRPC's doc/PROTOCOL-HTTP2.md, PROTOCOL-WEB.md, statuscodes.md,
//! http-grpc-status-mapping.md and compression.md (github.com/grpc/grpc).
#![forbid(unsafe_code)]

/// The README's examples, compiled and run with the other doctests (`cargo test --doc`), so
/// that they cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(feature = "build")]
pub mod build;
pub mod call;
pub mod code;
pub mod compress;
pub mod frame;
pub mod metadata;
pub mod proto;
pub mod status;
pub mod timeout;
pub mod web;

pub use code::Code;
pub use status::Status;
