//! A call's custom metadata (PROTOCOL-HTTP2.md "Custom-Metadata"): linerate-grpc's
//! [`Metadata`], ASCII values and `-bin` binary ones, read from a request's fields and written
//! as an answer's fields or trailers, or a failed call's [`Status`](super::Status)'s.
//!
//! Names and values are checked when a handler sets them, so what goes out is always
//! sendable; a request's are read with reserved fields left out, `-bin` values
//! base64-decoded and ASCII values outside 0x20–0x7E dropped, as the spec says.
#![forbid(unsafe_code)]

pub use linerate_grpc::metadata::{InvalidMetadata, Metadata};
