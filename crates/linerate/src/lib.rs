//! The `linerate` package: the binary's command line (`cli`) and, as a library, what its
//! integration tests start in-process. Library crates return data and typed errors; this crate
//! parses flags and renders.
#![forbid(unsafe_code)]

pub mod cli;
pub mod conf;
pub mod db;
pub mod demo;
pub mod grpc;
