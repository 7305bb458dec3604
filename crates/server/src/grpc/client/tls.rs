//! A channel's TLS (feature `grpc-client-tls`): [`ClientTlsConfig`] (the roots a server is
//! verified against, and the name it is verified as), made into a rustls client
//! configuration over aws-lc-rs with ALPN `h2` only, and the handshake over the connection's
//! socket (tokio-rustls), which must choose `h2` (RFC 9113 §3.2; gRPC has no HTTP/1.1).
//!
//! Owns the TLS choices of the client; the connection (`h2.rs`) sees plaintext only.
#![forbid(unsafe_code)]

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use tokio::net::TcpStream;

use super::Error;

/// The ALPN protocol a gRPC server over TLS must choose.
const ALPN_H2: &[u8] = b"h2";

/// How a channel verifies its server over TLS, as tonic's `ClientTlsConfig`: the system's
/// roots unless CA certificates are given, and the URI's host as the name unless one is.
#[derive(Clone, Debug, Default)]
pub struct ClientTlsConfig {
    ca_pem: Option<Vec<u8>>,
    domain: Option<String>,
}

impl ClientTlsConfig {
    /// The system's roots, the URI's host.
    pub fn new() -> ClientTlsConfig {
        ClientTlsConfig::default()
    }

    /// Trusts the CA certificates of `pem` (one or more PEM blocks) instead of the system's.
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> ClientTlsConfig {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Verifies the server as `name` (and sends it as SNI) instead of the URI's host.
    pub fn domain_name(mut self, name: impl Into<String>) -> ClientTlsConfig {
        self.domain = Some(name.into());
        self
    }
}

/// A channel's TLS, ready: the rustls configuration and the server's name.
#[derive(Clone, Debug)]
pub(crate) struct Tls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl Tls {
    /// `config` for a server at `host`.
    pub(crate) fn new(config: &ClientTlsConfig, host: &str) -> Result<Tls, Error> {
        let mut roots = RootCertStore::empty();
        match &config.ca_pem {
            Some(pem) => {
                for der in CertificateDer::pem_slice_iter(pem) {
                    let der = der.map_err(|e| Error::Tls(format!("invalid PEM: {e:?}")))?;
                    roots
                        .add(der)
                        .map_err(|e| Error::Tls(format!("not a usable CA certificate: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(Error::Tls("no CERTIFICATE block in the CA's PEM".into()));
                }
            }
            None => {
                // A store with some unreadable entries still verifies with the rest.
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
                if roots.is_empty() {
                    return Err(Error::Tls(
                        "no trusted root certificates on this system (give a CA)".into(),
                    ));
                }
            }
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut rustls_config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        rustls_config.alpn_protocols = vec![ALPN_H2.to_vec()];
        let name = config.domain.as_deref().unwrap_or(host).to_string();
        let name =
            ServerName::try_from(name).map_err(|e| Error::Tls(format!("server name: {e}")))?;
        Ok(Tls {
            config: Arc::new(rustls_config),
            name,
        })
    }

    /// The handshake over `tcp`; the server must choose `h2`.
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let stream = tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(self.name.clone(), tcp)
            .await?;
        if stream.get_ref().1.alpn_protocol() != Some(ALPN_H2) {
            return Err(std::io::Error::other(
                "the server did not choose h2 by ALPN",
            ));
        }
        Ok(stream)
    }
}
