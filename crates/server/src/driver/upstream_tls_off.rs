//! TLS to an upstream in a build without the `tls` feature: an `h2` upstream is refused at
//! start (`crate::features`), so no session is ever made. `UpTls` is an empty enum, and the
//! driver's TLS paths are dead code the compiler drops.
//!
//! Each item has its counterpart's signature in upstream_tls.rs.
#![forbid(unsafe_code)]
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

/// Built without `tls`: there are no roots to load.
pub fn load_upstream_roots(_ca: Option<&Path>) -> Result<(), String> {
    Err("linerate-server was built without feature `tls`".into())
}

/// Without `tls` no name is checked (an `h2` upstream is refused at start).
pub fn upstream_server_name_ok(_name: &str) -> bool {
    true
}

/// What [`UpTls::new`] takes: nothing can be made.
pub(super) enum ClientConfig {}

pub(super) fn client_config(ca: Option<&Path>) -> Result<ClientConfig, String> {
    Err(load_upstream_roots(ca).expect_err("no TLS in this build"))
}

/// A server name stand-in.
pub(super) struct ServerName;

pub(super) fn server_name(
    _name: Option<&str>,
    _addr: Option<SocketAddr>,
) -> Result<ServerName, String> {
    Ok(ServerName)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handshake {
    Going,
    H2,
    NotH2,
}

pub(super) enum UpTls {}

impl UpTls {
    pub(super) fn new(config: ClientConfig, _name: ServerName) -> Result<UpTls, String> {
        match config {}
    }
    pub(super) fn handshake(&self) -> Handshake {
        match *self {}
    }
    pub(super) fn alpn(&self) -> String {
        match *self {}
    }
    pub(super) fn recv(&mut self, _data: &[u8], _plain: &mut Vec<u8>) -> Result<bool, String> {
        match *self {}
    }
    pub(super) fn sending(&self) -> bool {
        match *self {}
    }
    pub(super) fn wants_send(&self) -> bool {
        match *self {}
    }
    pub(super) fn encrypt(&mut self, _plain: &[u8]) {
        match *self {}
    }
    pub(super) fn take_output(&mut self, _out: Vec<u8>) -> Vec<u8> {
        match *self {}
    }
    pub(super) fn sent(&mut self) -> bool {
        match *self {}
    }
}
