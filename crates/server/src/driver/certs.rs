//! The HTTPS certificate: read from its PEM files, checked against its key, served to every
//! handshake through a resolver that a reload (SIGHUP) swaps without touching a connection,
//! and the rustls server configuration built around it.
//!
//! Owns the files and the swap. A handshake takes the current certificate with one
//! uncontended read lock (per connection, never per request); a reload reads both files,
//! checks them, and only then replaces the certificate, so a bad file keeps the old one.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::TlsConfig;

/// The one application protocol offered in ALPN.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
/// HTTP/2 over TLS (RFC 9113 §3.2), offered first.
pub const ALPN_H2: &[u8] = b"h2";

/// Why the TLS configuration could not be built. Each variant names the file at fault.
#[derive(Debug)]
pub enum TlsError {
    /// The certificate file could not be read or holds no valid PEM certificate.
    Cert { path: PathBuf, why: String },
    /// The key file could not be read or holds no usable private key.
    Key { path: PathBuf, why: String },
    /// The private key does not belong to the leaf certificate.
    KeyMismatch { cert: PathBuf, key: PathBuf },
    /// rustls refused the certificate or key for another reason.
    Rustls(rustls::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Cert { path, why } => {
                write!(f, "certificate {}: {why}", path.display())
            }
            TlsError::Key { path, why } => write!(f, "private key {}: {why}", path.display()),
            TlsError::KeyMismatch { cert, key } => write!(
                f,
                "private key {} does not match certificate {}",
                key.display(),
                cert.display()
            ),
            TlsError::Rustls(e) => write!(f, "TLS configuration refused: {e}"),
        }
    }
}

impl std::error::Error for TlsError {}

/// The certificate every handshake is answered with, and where it is read from.
#[derive(Debug)]
pub struct CertStore {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
}

impl CertStore {
    /// Reads and checks the certificate chain and key of `tls`.
    pub fn load(tls: &TlsConfig, provider: Arc<CryptoProvider>) -> Result<CertStore, TlsError> {
        let key = read(&tls.cert, &tls.key, &provider)?;
        Ok(CertStore {
            cert: tls.cert.clone(),
            key: tls.key.clone(),
            provider,
            current: RwLock::new(Arc::new(key)),
        })
    }

    /// Reads both files again and, when they are good, serves them to the next handshake.
    /// On an error the certificate in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let key = self.read_again()?;
        self.swap(key);
        Ok(())
    }

    /// Reads and checks both files again without serving them yet.
    pub fn read_again(&self) -> Result<CertifiedKey, TlsError> {
        read(&self.cert, &self.key, &self.provider)
    }

    /// Serves `key` to the next handshake.
    pub fn swap(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }

    /// The certificate file's path.
    pub fn cert_path(&self) -> &std::path::Path {
        &self.cert
    }

    /// The private key file's path.
    pub fn key_path(&self) -> &std::path::Path {
        &self.key
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// The chain and key from their PEM files, checked to belong together.
fn read(
    cert: &std::path::Path,
    key: &std::path::Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let cert_err = |why: String| TlsError::Cert {
        path: cert.to_path_buf(),
        why,
    };
    // Through the privilege keeper: after a drop to another user, a SIGHUP still reads
    // root's keys.
    let cert_pem = crate::privsep::read(cert).map_err(|e| cert_err(e.to_string()))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(pem_why(&e)))?;
    if chain.is_empty() {
        return Err(cert_err("no CERTIFICATE block found".into()));
    }
    let key_err = |why: String| TlsError::Key {
        path: key.to_path_buf(),
        why,
    };
    let key_pem = crate::privsep::read(key).map_err(|e| key_err(e.to_string()))?;
    let der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| key_err(pem_why(&e)))?;
    CertifiedKey::from_der(chain, der, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        },
        e => TlsError::Rustls(e),
    })
}

/// Reads the PEM files and builds the rustls server configuration: aws-lc-rs, TLS 1.3 and
/// 1.2 with their default (AEAD-only) suites, ALPN `http/1.1`, no client certificates.
/// Resumption keeps rustls's defaults: a stateful in-memory session cache (TLS 1.2 session
/// IDs, TLS 1.3 tickets that name a cache entry); no stateless ticket key is set.
pub fn server_config(tls: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_with_store(tls).map(|(config, _)| config)
}

/// [`server_config`], and the certificate store it answers from (to reload it).
pub fn server_config_with_store(
    tls: &TlsConfig,
) -> Result<(Arc<ServerConfig>, Arc<CertStore>), TlsError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let store = Arc::new(CertStore::load(tls, provider.clone())?);
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Rustls)?
        .with_no_client_auth()
        .with_cert_resolver(store.clone());
    config.alpn_protocols = if tls.http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()]
    } else {
        vec![ALPN_HTTP11.to_vec()]
    };
    config.enable_secret_extraction = tls.ktls;
    Ok((Arc::new(config), store))
}

fn pem_why(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::NoItemsFound => "no PEM block of the expected kind found".into(),
        e => format!("invalid PEM: {e:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &std::path::Path) -> Vec<u8> {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
        ck.cert.der().to_vec()
    }

    fn served(store: &CertStore) -> Vec<u8> {
        store.current.read().unwrap().cert[0].to_vec()
    }

    #[test]
    fn reload_swaps_a_good_pair_and_keeps_the_old_one_on_any_error() {
        let dir = std::env::temp_dir().join(format!("linerate-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let first = write_pair(&dir);
        let tls = TlsConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
            ktls: false,
            key_update_bytes: 1 << 30,
            http2: true,
        };
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let store = CertStore::load(&tls, provider).unwrap();
        assert_eq!(served(&store), first);

        // Each failure names its file and leaves the first certificate in place.
        std::fs::write(dir.join("cert.pem"), "garbage").unwrap();
        assert!(matches!(store.reload(), Err(TlsError::Cert { .. })));
        let other = rcgen::generate_simple_self_signed(vec!["x".to_string()]).unwrap();
        std::fs::write(dir.join("cert.pem"), other.cert.pem()).unwrap();
        assert!(matches!(store.reload(), Err(TlsError::KeyMismatch { .. })));
        std::fs::remove_file(dir.join("key.pem")).unwrap();
        assert!(matches!(store.reload(), Err(TlsError::Key { .. })));
        assert_eq!(served(&store), first);

        let second = write_pair(&dir);
        store.reload().unwrap();
        assert_eq!(served(&store), second);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
