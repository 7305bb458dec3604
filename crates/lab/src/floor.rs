//! The syscall-floor reference server (placeholder: being written).

use std::net::SocketAddr;

/// Which canned response the floor sends for every request end it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorResponse {
    Json,
    Plaintext,
}

/// Floor configuration.
#[derive(Clone, Debug)]
pub struct FloorConfig {
    pub addr: SocketAddr,
    pub response: FloorResponse,
    pub cpu: Option<usize>,
}

/// Runs the floor until killed.
pub fn run(_cfg: &FloorConfig) -> anyhow::Result<()> {
    anyhow::bail!("floor not built yet")
}
