//! `linerate lab …` flags that live in the binary (the floor's), and their mapping.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

#[derive(Args)]
pub(crate) struct FloorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Canned response to send.
    #[arg(long, value_enum, default_value_t = FloorBody::Json)]
    response: FloorBody,
    /// Pin the thread to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum FloorBody {
    Json,
    Plaintext,
}

/// `linerate lab floor`.
pub(crate) fn floor(a: &FloorArgs) -> anyhow::Result<ExitCode> {
    super::init_tracing("info");
    linerate_lab::floor::run(&linerate_lab::floor::FloorConfig {
        addr: a.addr,
        response: match a.response {
            FloorBody::Json => linerate_lab::floor::FloorResponse::Json,
            FloorBody::Plaintext => linerate_lab::floor::FloorResponse::Plaintext,
        },
        cpu: a.cpu,
    })?;
    Ok(ExitCode::SUCCESS)
}
