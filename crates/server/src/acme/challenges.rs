//! The answers to the ACME challenges in flight, shared by the ACME thread that sets them
//! and the workers that answer the CA's validation requests with them: HTTP-01 key
//! authorizations by token, and TLS-ALPN-01 certificates (RFC 8737) by name.
//!
//! Owns only the table. Workers read it for a request below [`HTTP01_PREFIX`] or a handshake
//! that offers [`ACME_TLS_ALPN`], never otherwise; a server without ACME has none.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rustls::sign::CertifiedKey;

/// Where the CA fetches HTTP-01 tokens (RFC 8555 §8.3).
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";
/// The ALPN protocol of a TLS-ALPN-01 validation handshake (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// The challenges being validated now.
#[derive(Default)]
pub struct Challenges {
    /// Token → key authorization.
    http: RwLock<HashMap<String, String>>,
    /// Lowercase name → the self-signed certificate carrying the key authorization's digest.
    tls_alpn: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl std::fmt::Debug for Challenges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Challenges").finish_non_exhaustive()
    }
}

impl Challenges {
    /// The key authorization for the HTTP-01 `token`, while its challenge is in flight.
    pub fn http01(&self, token: &str) -> Option<String> {
        read(&self.http).get(token).cloned()
    }

    /// The TLS-ALPN-01 certificate for `name` (SNI), while its challenge is in flight.
    pub fn tls_alpn01(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        read(&self.tls_alpn).get(&name).cloned()
    }

    pub(crate) fn put_http01(&self, token: &str, key_authorization: &str) {
        write(&self.http).insert(token.to_string(), key_authorization.to_string());
    }

    pub(crate) fn put_tls_alpn01(&self, name: &str, cert: Arc<CertifiedKey>) {
        write(&self.tls_alpn).insert(name.to_ascii_lowercase(), cert);
    }

    /// Forgets the challenges of an order, answered or not.
    pub(crate) fn remove(&self, tokens: &[String], names: &[String]) {
        let mut http = write(&self.http);
        for t in tokens {
            http.remove(t);
        }
        drop(http);
        let mut tls = write(&self.tls_alpn);
        for n in names {
            tls.remove(&n.to_ascii_lowercase());
        }
    }
}

/// One challenge's answer, as a fleet's nodes share it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The key authorization served at [`HTTP01_PREFIX`]`TOKEN`.
    Http01 {
        token: String,
        key_authorization: String,
    },
    /// The key authorization's SHA-256, which a node puts in its own self-signed
    /// certificate for `name` (RFC 8737: any key will do).
    TlsAlpn01 { name: String, digest: Vec<u8> },
}

/// Where an order's answers are shared with the fleet's other nodes (`acme::fleet`).
pub trait SharedAnswers {
    /// Publishes `answer`; returns once every node can answer with it (or an error).
    fn share(&self, answer: &Answer) -> Result<(), String>;
    /// Withdraws it (the order ended); a failure only leaves a stale answer behind.
    fn withdraw(&self, answer: &Answer);
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_names_are_answered_while_in_flight_only() {
        let c = Challenges::default();
        assert_eq!(c.http01("tok"), None);
        c.put_http01("tok", "tok.thumb");
        assert_eq!(c.http01("tok").as_deref(), Some("tok.thumb"));
        assert_eq!(c.http01("other"), None);
        c.remove(&["tok".into()], &[]);
        assert_eq!(c.http01("tok"), None);
    }
}
