//! The ACME manager in a build without the `acme` feature: a type that cannot be made, so
//! that `Server` keeps one shape and every path that would start the renewal thread is dead
//! code. `crate::features` refuses a configuration with managed sites before one could be
//! wanted. The challenge table cannot be made either: no CA validates anything here.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::Challenges;
use crate::config::Config;

/// Cannot be made: nothing obtains certificates in this build.
pub struct Manager {
    pub challenges: Arc<Challenges>,
    never: std::convert::Infallible,
}

impl Manager {
    /// Always `None` (see the module doc).
    pub fn new(_config: &Config) -> Option<Manager> {
        None
    }

    pub fn ask_again(&self) -> Arc<AtomicBool> {
        match self.never {}
    }

    pub fn prepare(&self) -> Result<(), String> {
        match self.never {}
    }

    pub fn spawn(
        self,
        _reload: Box<dyn Fn() -> Result<(), String> + Send>,
        _stop: Arc<AtomicBool>,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        match self.never {}
    }
}

/// The challenge table: uninhabited, as no challenge can be in flight.
pub mod challenges {
    /// Where the CA fetches HTTP-01 tokens (RFC 8555 §8.3).
    pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";
    /// The ALPN protocol of a TLS-ALPN-01 validation handshake (RFC 8737 §6.2).
    pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

    /// Cannot be made (see the module doc).
    #[derive(Debug)]
    pub enum Challenges {}

    impl Challenges {
        pub fn http01(&self, _token: &str) -> Option<String> {
            match *self {}
        }

        #[cfg(feature = "tls")]
        pub fn tls_alpn01(
            &self,
            _name: &str,
        ) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
            match *self {}
        }
    }
}
