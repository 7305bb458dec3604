//! The transport in a build without the `tls` feature: plain TCP only. `Transport` keeps the
//! shape of `tls.rs`'s (the driver names `Plain` and `Tls`), but a TLS session cannot be
//! made, so every TLS path of the driver is dead code the compiler drops and the plain one
//! is what is left of each method. The certificate types the server names are stand-ins of
//! the same kind. A configuration with HTTPS is refused at start (`crate::features`), and
//! `server_config_with_store` refuses too, should it be reached another way.
//!
//! Each item has its counterpart's signature in tls.rs, certs.rs or handshake.rs.
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use super::backend::{Backend, Completion, Token};
pub use super::client_cert::ClientCert;
use super::transport::submitted;
pub(crate) use super::transport::{Finished, Input, Outcome};
/// Checks and loads the roots an HTTPS upstream is verified against (`tls_ca`, or the system's).
pub use super::upstream_tls::{load_upstream_roots, upstream_server_name_ok};
use crate::config::TlsConfig;
use crate::pool::Pool;

/// Bytes sent under one TLS 1.3 key before the server updates it (unused here).
pub const TLS_KEY_UPDATE_BYTES: u64 = 32 << 30;

/// Why TLS cannot be set up: this build has none.
#[derive(Debug)]
pub enum TlsError {
    /// Built without the `tls` feature.
    Disabled,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("linerate-server was built without feature `tls`")
    }
}

impl std::error::Error for TlsError {}

/// The ciphers the kernel takes for TLS: none asked for here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCiphers {
    _none: (),
}

impl KernelCiphers {
    pub fn any(&self) -> bool {
        false
    }
}

impl std::fmt::Display for KernelCiphers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("none")
    }
}

/// Never probed: nothing is handed to the kernel.
pub fn ktls_ciphers() -> KernelCiphers {
    KernelCiphers::default()
}

/// What a TLS session is handed to the kernel with (unused here).
#[derive(Clone, Copy, Debug)]
pub struct TlsPolicy {
    pub kernel: KernelCiphers,
    pub key_update_bytes: u64,
}

/// A listener's TLS configuration: cannot be made.
pub enum ServerConfig {}

/// A site's certificate, as the TLS listeners would read it: there are none.
pub struct NamedCert {
    never: Infallible,
}

impl Clone for NamedCert {
    fn clone(&self) -> NamedCert {
        match self.never {}
    }
}

/// No certificates are read in this build.
pub fn named_certs(_config: &crate::config::Config) -> Vec<NamedCert> {
    Vec::new()
}

/// A listener's certificates: cannot be made.
#[derive(Debug)]
pub struct CertStore {
    never: Infallible,
}

/// What `CertStore::read_again` reads: cannot be made.
pub enum CertSet {}

impl CertStore {
    pub fn read_again(&self) -> Result<CertSet, TlsError> {
        match self.never {}
    }

    pub fn read_with(&self, _named: Vec<NamedCert>) -> Result<CertSet, TlsError> {
        match self.never {}
    }

    pub fn swap(&self, set: CertSet) {
        match set {}
    }

    pub fn cert_paths(&self) -> Vec<PathBuf> {
        match self.never {}
    }

    pub fn expiries(&self) -> Vec<crate::node_info::CertExpiry> {
        match self.never {}
    }

    pub fn missing_managed(&self) -> Vec<String> {
        match self.never {}
    }

    pub fn files(&self) -> Vec<PathBuf> {
        match self.never {}
    }
}

/// A client CA bundle read again: cannot be made.
pub(crate) type ClientVerifier = Infallible;

/// A listener's client-certificate verifier: cannot be made.
pub struct ClientCa {
    never: Infallible,
}

impl ClientCa {
    pub fn read_again(&self) -> Result<ClientVerifier, TlsError> {
        match self.never {}
    }

    pub fn swap(&self, verifier: ClientVerifier) {
        match verifier {}
    }

    pub fn path(&self) -> &std::path::Path {
        match self.never {}
    }
}

/// A listener's ticket keys (see ticket_keys.rs): cannot be made.
pub struct TicketKeys {
    never: Infallible,
}

/// Ticket keys read again: cannot be made.
pub enum KeyRing {}

impl KeyRing {
    pub fn names(&self) -> std::iter::Empty<&[u8; 16]> {
        match *self {}
    }
}

impl TicketKeys {
    pub fn read_again(&self) -> Result<Arc<KeyRing>, TlsError> {
        match self.never {}
    }

    pub fn swap(&self, ring: Arc<KeyRing>) {
        match *ring {}
    }

    pub fn paths(&self) -> &[PathBuf] {
        match self.never {}
    }
}

/// A listener's TLS set-up (see tls.rs's `Handshake`): cannot be made.
pub struct Handshake {
    pub config: Arc<ServerConfig>,
    pub store: Arc<CertStore>,
    pub client_ca: Option<Arc<ClientCa>>,
    pub ticket_keys: Option<Arc<TicketKeys>>,
}

/// Refused: no TLS in this build.
pub fn server_config_with_store(
    _tls: &TlsConfig,
    _named: &[NamedCert],
    _tls_alpn01: Option<Arc<crate::acme::Challenges>>,
) -> Result<Handshake, TlsError> {
    Err(TlsError::Disabled)
}

/// How a connection's bytes reach the socket: plain TCP (`Tls` cannot be made).
pub(crate) enum Transport {
    Plain,
    #[allow(dead_code)] // Matched by the driver; made only by the real `Transport::tls`.
    Tls(Infallible),
}

impl Transport {
    pub(crate) fn tls(config: &Arc<ServerConfig>, _policy: TlsPolicy) -> Result<Transport, String> {
        match **config {}
    }

    pub(crate) fn identify(&mut self) {}

    #[inline]
    pub(crate) fn client_cert(&self) -> Option<Arc<ClientCert>> {
        None
    }

    pub(crate) fn handshake_done(&self) -> Option<bool> {
        None
    }

    pub(crate) fn negotiated_h2(&self) -> Option<bool> {
        Some(false)
    }

    pub(crate) fn negotiated_acme(&self) -> bool {
        false
    }

    pub(crate) fn decrypts(&self) -> bool {
        false
    }

    #[inline(always)]
    pub(crate) fn send<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        buf: Vec<u8>,
        more: bool,
        _pool: &mut Pool,
    ) -> Outcome<Vec<u8>> {
        submitted(b.send(token, buf, more))
    }

    pub(crate) fn sendfile<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        file: &Arc<OwnedFd>,
        (offset, len): (u64, u64),
        _pool: &mut Pool,
    ) -> Outcome<u64> {
        submitted(b.sendfile(token, file, offset, len))
    }

    pub(crate) fn shutdown<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        _pool: &mut Pool,
    ) -> Outcome<()> {
        match b.shutdown_write(token) {
            Ok(()) => Outcome::Done(()),
            Err(_) => Outcome::Failed,
        }
    }

    pub(crate) fn completed<B: Backend>(
        &mut self,
        _b: &mut B,
        _token: Token,
        c: Completion,
        _pool: &mut Pool,
    ) -> Finished {
        match c {
            Completion::Sent { buf, .. } => Finished::Bytes(buf),
            Completion::FileSent { n, .. } => Finished::File(n),
            _ => Finished::Failed,
        }
    }

    pub(crate) fn receive(&mut self, data: &[u8], plain: &mut Vec<u8>) -> Result<Input, ()> {
        plain.extend_from_slice(data);
        Ok(Input::More)
    }

    /// A TLS record: none come to a plain socket.
    pub(crate) fn record<B: Backend>(
        &mut self,
        _b: &mut B,
        _token: Token,
        _kind: u8,
        _data: &[u8],
    ) -> Result<Input, ()> {
        Err(())
    }

    pub(crate) fn flush<B: Backend>(
        &mut self,
        _b: &mut B,
        _token: Token,
        _pool: &mut Pool,
    ) -> Result<(), ()> {
        Ok(())
    }
}
