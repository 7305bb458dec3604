//! A TLS listener's handshake options: the rustls server configuration built from
//! [`TlsOptions`] (versions, cipher suites, ALPN, resumption with a lifetime and tickets
//! under rustls's keys or the fleet's (`ticket_keys.rs`), OCSP through
//! the certificate store, client certificates against a CA bundle), and the verified client
//! certificate's identity as handlers and upstreams see it ([`ClientCert`]).
//!
//! Owns the rustls knobs and nothing about bytes on a socket. Everything here runs per
//! handshake or per reload, never per request: a session's age is checked when it is
//! resumed, the CA bundle is read at start and on SIGHUP, and a client certificate is parsed
//! once, when the handshake that verified it completes.
#![forbid(unsafe_code)]

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{
    NoServerSessionStorage, ProducesTickets, ServerSessionMemoryCache, StoresServerSessions,
    WebPkiClientVerifier,
};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig};

use super::certs::{ALPN_H2, ALPN_HTTP11, CertStore, NamedCert, TlsError};
pub use super::client_cert::ClientCert;
use super::ticket_keys::TicketKeys;
use crate::config::{ClientAuth, TlsConfig, TlsOptions, TlsVersion};

/// The cipher suites a listener can name in `ciphers`, by IANA name, TLS 1.3 ones first.
pub fn cipher_suite_names() -> Vec<String> {
    rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
        .iter()
        .map(|s| suite_name(s.suite()))
        .collect()
}

/// A suite's IANA name (rustls spells TLS 1.3's `TLS13_…`; the registry says `TLS_…`).
fn suite_name(suite: rustls::CipherSuite) -> String {
    let debug = format!("{suite:?}");
    match debug.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => debug,
    }
}

/// The crypto provider for `options`: aws-lc-rs with the suites named (in that order), or
/// its defaults. A name it does not know, or a list with no suite for the versions
/// offered, is an error naming what is wrong.
fn provider(options: &TlsOptions) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    if !options.ciphers.is_empty() {
        let mut chosen = Vec::new();
        for name in &options.ciphers {
            let suite = rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
                .iter()
                .find(|s| suite_name(s.suite()).eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    TlsError::Options(format!(
                        "unknown cipher suite {name:?} (known: {})",
                        cipher_suite_names().join(", ")
                    ))
                })?;
            chosen.push(*suite);
        }
        provider.cipher_suites = chosen;
    }
    let tls13 = provider
        .cipher_suites
        .iter()
        .any(|s| s.version() == &rustls::version::TLS13);
    let tls12 = provider
        .cipher_suites
        .iter()
        .any(|s| s.version() == &rustls::version::TLS12);
    if !tls13 && (options.min_version == TlsVersion::Tls13 || !tls12) {
        return Err(TlsError::Options(
            "the cipher suites leave no TLS 1.3 suite for the versions offered".into(),
        ));
    }
    Ok(provider)
}

/// The ALPN protocols offered, in order (`acme-tls/1` last, for the CA's TLS-ALPN-01
/// validation only, when such challenges are answered here).
fn alpn(tls: &TlsConfig, acme: bool) -> Vec<Vec<u8>> {
    let mut protocols = if !tls.options.alpn.is_empty() {
        tls.options
            .alpn
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect()
    } else if tls.http2 {
        vec![ALPN_H2.to_vec(), ALPN_HTTP11.to_vec()]
    } else {
        vec![ALPN_HTTP11.to_vec()]
    };
    if acme {
        protocols.push(crate::acme::ACME_TLS_ALPN.to_vec());
    }
    protocols
}

/// Reads the PEM files and builds the rustls server configuration for `tls`: aws-lc-rs,
/// the versions and suites of its options, ALPN, resumption, client certificates.
pub fn server_config(tls: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    server_config_with_store(tls, &[], None).map(|b| b.config)
}

/// A listener's rustls configuration and the parts of it a reload reads again.
pub struct Handshake {
    pub config: Arc<ServerConfig>,
    /// The certificates it answers from.
    pub store: Arc<CertStore>,
    /// Its client-CA verifier, when it asks for client certificates.
    pub client_ca: Option<Arc<ClientCa>>,
    /// Its ticket keys, when `ticket_keys` names files (read again on SIGHUP).
    pub ticket_keys: Option<Arc<TicketKeys>>,
}

/// [`server_config`] with the sites' certificates chosen by SNI (`named`), with the
/// certificate store it answers from and its client-CA verifier (to reload them). With
/// `tls_alpn01`, handshakes for `acme-tls/1` get the ACME challenges' certificates.
pub fn server_config_with_store(
    tls: &TlsConfig,
    named: &[NamedCert],
    tls_alpn01: Option<Arc<crate::acme::Challenges>>,
) -> Result<Handshake, TlsError> {
    let options = &tls.options;
    let provider = Arc::new(provider(options)?);
    let acme = tls_alpn01.is_some();
    let store = Arc::new(CertStore::load(tls, named, provider.clone(), tls_alpn01)?);
    let versions: &[&rustls::SupportedProtocolVersion] = match options.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(TlsError::Rustls)?;
    let (builder, ca) = match &options.client_auth {
        None => (builder.with_no_client_auth(), None),
        Some(auth) => {
            let ca = Arc::new(ClientCa::load(auth, provider.clone())?);
            (builder.with_client_cert_verifier(ca.clone()), Some(ca))
        }
    };
    let mut config = builder.with_cert_resolver(store.clone());
    config.alpn_protocols = alpn(tls, acme);
    config.enable_secret_extraction = tls.ktls;
    // The suites' order is the operator's when they named them (nginx's
    // `ssl_prefer_server_ciphers on`); the client's otherwise.
    config.ignore_client_order = !options.ciphers.is_empty();
    let lifetime = options.session_lifetime.as_secs();
    config.session_storage = if options.session_cache == 0 {
        Arc::new(NoServerSessionStorage {})
    } else {
        Arc::new(AgedSessions {
            inner: ServerSessionMemoryCache::new(options.session_cache),
            lifetime,
        })
    };
    let ticket_keys = if options.ticket_keys.is_empty() {
        None
    } else {
        Some(Arc::new(TicketKeys::from_files(&options.ticket_keys)?))
    };
    if let Some(keys) = &ticket_keys {
        // The fleet's keys: a ticket sealed on one node opens on every node that has its key.
        config.ticketer = Arc::new(AgedTickets {
            inner: keys.clone(),
            lifetime,
        });
    } else if options.session_tickets {
        config.ticketer = Arc::new(AgedTickets {
            inner: rustls::crypto::aws_lc_rs::Ticketer::new().map_err(TlsError::Rustls)?,
            lifetime,
        });
    } else if options.session_cache == 0 {
        // Nothing to resume: no TLS 1.3 ticket is worth sending.
        config.send_tls13_tickets = 0;
    }
    Ok(Handshake {
        config: Arc::new(config),
        store,
        client_ca: ca,
        ticket_keys,
    })
}

/// Has `config` seal its tickets with `keys` (the fleet's, from the shared storage), the
/// session's age checked as for any ticket; tickets are on from then.
pub fn seal_with(config: &mut Arc<ServerConfig>, keys: Arc<TicketKeys>, options: &TlsOptions) {
    let config = Arc::make_mut(config);
    config.ticketer = Arc::new(AgedTickets {
        inner: keys,
        lifetime: options.session_lifetime.as_secs(),
    });
    // Turned off for a listener with neither a cache nor tickets of its own.
    config.send_tls13_tickets = config.send_tls13_tickets.max(TLS13_TICKETS);
}

/// TLS 1.3 tickets sent after each handshake when tickets are on (rustls's default).
const TLS13_TICKETS: usize = 2;

/// Unix seconds now.
fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `value` with the time it was made in front (8 bytes, big-endian Unix seconds).
fn stamped(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + value.len());
    out.extend_from_slice(&now_secs().to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// The value behind a stamp made less than `lifetime` seconds ago.
fn fresh(stamped: &[u8], lifetime: u64) -> Option<Vec<u8>> {
    let (at, value) = stamped.split_first_chunk::<8>()?;
    let age = now_secs().saturating_sub(u64::from_be_bytes(*at));
    (age < lifetime).then(|| value.to_vec())
}

/// rustls's session cache, with sessions older than the lifetime forgotten when asked for.
#[derive(Debug)]
struct AgedSessions {
    inner: Arc<ServerSessionMemoryCache>,
    lifetime: u64,
}

impl StoresServerSessions for AgedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(key, stamped(&value))
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.get(key)?, self.lifetime)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.take(key)?, self.lifetime)
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

/// A ticketer (rustls's own, AES-256 and HMAC-SHA256 keys rotated every 6 h, the previous
/// one kept; or the fleet's [`TicketKeys`]), with the session's time sealed inside the
/// ticket and checked on resumption, and the lifetime announced to clients.
#[derive(Debug)]
struct AgedTickets {
    inner: Arc<dyn ProducesTickets>,
    lifetime: u64,
}

impl ProducesTickets for AgedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        u32::try_from(self.lifetime).unwrap_or(u32::MAX)
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(&stamped(plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        fresh(&self.inner.decrypt(cipher)?, self.lifetime)
    }
}

/// A client CA bundle read again, waiting to be swapped in.
pub(crate) type ClientVerifier = Arc<dyn ClientCertVerifier>;

/// The client-certificate verifier of a listener: rustls's WebPKI verifier over the CA
/// bundle, read again on reload (a bad bundle keeps the one in use). The CA names offered
/// to clients as hints are the bundle's at start.
pub struct ClientCa {
    path: PathBuf,
    required: bool,
    provider: Arc<CryptoProvider>,
    hints: Vec<DistinguishedName>,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
}

impl fmt::Debug for ClientCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCa")
            .field("path", &self.path)
            .field("required", &self.required)
            .finish_non_exhaustive()
    }
}

impl ClientCa {
    fn load(auth: &ClientAuth, provider: Arc<CryptoProvider>) -> Result<ClientCa, TlsError> {
        let verifier = read_verifier(&auth.ca, auth.required, &provider)?;
        Ok(ClientCa {
            path: auth.ca.clone(),
            required: auth.required,
            hints: verifier.root_hint_subjects().to_vec(),
            provider,
            current: RwLock::new(verifier),
        })
    }

    /// Reads the bundle again without using it yet.
    pub fn read_again(&self) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
        read_verifier(&self.path, self.required, &self.provider)
    }

    /// Verifies the next handshake's client with `verifier`.
    pub fn swap(&self, verifier: Arc<dyn ClientCertVerifier>) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = verifier;
    }

    /// The bundle's path (kept readable across a privilege drop).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// rustls's WebPKI verifier over the CA certificates in `path`.
fn read_verifier(
    path: &std::path::Path,
    required: bool,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let err = |why: String| TlsError::ClientCa {
        path: path.to_path_buf(),
        why,
    };
    let pem = crate::privsep::read(path).map_err(|e| err(e.to_string()))?;
    let mut roots = RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(&pem) {
        let der = der.map_err(|e| err(format!("invalid PEM: {e:?}")))?;
        roots
            .add(der)
            .map_err(|e| err(format!("not a usable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(err("no CERTIFICATE block found".into()));
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let builder = if required {
        builder
    } else {
        builder.allow_unauthenticated()
    };
    builder.build().map_err(|e| err(e.to_string()))
}

impl ClientCertVerifier for ClientCa {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.required
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.current().supported_verify_schemes()
    }
}

/// How long a session lives at most, as a check for the configuration.
pub fn session_lifetime_ok(d: Duration) -> bool {
    d > Duration::ZERO && d <= crate::config::TLS_MAX_SESSION_LIFETIME
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    #[test]
    fn a_stamped_value_is_fresh_until_its_lifetime() {
        let v = stamped(b"session");
        assert_eq!(fresh(&v, 60).as_deref(), Some(&b"session"[..]));
        // Made an hour ago: past a 60 s lifetime, within a day.
        let mut old = (now_secs() - 3600).to_be_bytes().to_vec();
        old.extend_from_slice(b"session");
        assert_eq!(fresh(&old, 60), None);
        assert_eq!(fresh(&old, 86_400).as_deref(), Some(&b"session"[..]));
        assert_eq!(fresh(b"short", 60), None);
    }

    /// One QUIC handshake in memory (rustls's QUIC API, as quinn-proto drives it), the
    /// tickets after it read by the client: how the client saw it.
    fn quic_handshake(
        client: &Arc<rustls::ClientConfig>,
        server: &Arc<ServerConfig>,
    ) -> Option<rustls::HandshakeKind> {
        use rustls::quic::{ClientConnection, ServerConnection, Version};
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut c =
            ClientConnection::new(client.clone(), Version::V1, name, b"p".to_vec()).unwrap();
        let mut s = ServerConnection::new(server.clone(), Version::V1, b"p".to_vec()).unwrap();
        // Each side's handshake bytes to the other, one key epoch at a time (as QUIC's
        // packet spaces carry them), a few times over: the client's Finished, then the
        // server's tickets.
        macro_rules! pass {
            ($from:expr, $to:expr) => {
                loop {
                    let mut buf = Vec::new();
                    let change = $from.write_hs(&mut buf);
                    if !buf.is_empty() {
                        $to.read_hs(&buf).unwrap();
                    }
                    if change.is_none() {
                        break;
                    }
                }
            };
        }
        for _ in 0..4 {
            pass!(c, s);
            pass!(s, c);
        }
        assert!(!c.is_handshaking() && !s.is_handshaking());
        c.handshake_kind()
    }

    /// HTTP/3 shares the listener's ticket keys. QUIC's TLS is the
    /// listener's rustls configuration with ALPN `h3` and no early data (`QuicConfig::new`
    /// clones it, its ticketer with it), so a QUIC session made on one node resumes on a
    /// node with the same key files, and not on one with other keys.
    #[test]
    fn a_quic_session_resumes_on_another_node_with_the_same_ticket_keys() {
        let d = std::env::temp_dir().join(format!("linerate-quic-tickets-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
        std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
        std::fs::write(d.join("shared.key"), [1u8; 80]).unwrap();
        std::fs::write(d.join("other.key"), [2u8; 80]).unwrap();
        let node = |key: &str| {
            let tls = TlsConfig {
                addr: "127.0.0.1:0".parse().unwrap(),
                cert: Some(crate::config::CertPair {
                    cert: d.join("cert.pem"),
                    key: d.join("key.pem"),
                }),
                ktls: false,
                key_update_bytes: 1 << 30,
                http2: true,
                options: TlsOptions {
                    // No cache: a resumption can only come from the ticket.
                    session_cache: 0,
                    ticket_keys: vec![d.join(key)],
                    ..TlsOptions::default()
                },
            };
            // What QuicConfig::new does to the listener's configuration.
            let mut quic = (*server_config(&tls).unwrap()).clone();
            quic.alpn_protocols = vec![b"h3".to_vec()];
            quic.max_early_data_size = 0;
            Arc::new(quic)
        };
        let (a, b, other) = (node("shared.key"), node("shared.key"), node("other.key"));
        let mut roots = RootCertStore::empty();
        roots.add(ck.cert.der().clone()).unwrap();
        let client = |_: ()| {
            let mut c = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
            c.alpn_protocols = vec![b"h3".to_vec()];
            Arc::new(c)
        };
        let to_b = client(());
        assert_eq!(quic_handshake(&to_b, &a), Some(rustls::HandshakeKind::Full));
        assert_eq!(
            quic_handshake(&to_b, &b),
            Some(rustls::HandshakeKind::Resumed)
        );
        let to_other = client(());
        assert_eq!(
            quic_handshake(&to_other, &a),
            Some(rustls::HandshakeKind::Full)
        );
        assert_eq!(
            quic_handshake(&to_other, &other),
            Some(rustls::HandshakeKind::Full)
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn suites_are_named_as_iana_registers_them_and_checked_against_the_versions() {
        let names = cipher_suite_names();
        assert!(names.contains(&"TLS_AES_128_GCM_SHA256".to_string()));
        assert!(names.contains(&"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string()));
        let opts = |min, ciphers: &[&str]| TlsOptions {
            min_version: min,
            ciphers: ciphers.iter().map(|c| c.to_string()).collect(),
            ..TlsOptions::default()
        };
        let p = provider(&opts(
            TlsVersion::Tls12,
            &["tls_chacha20_poly1305_sha256", "TLS_AES_256_GCM_SHA384"],
        ))
        .unwrap();
        let got: Vec<String> = p
            .cipher_suites
            .iter()
            .map(|s| suite_name(s.suite()))
            .collect();
        assert_eq!(
            got,
            ["TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_256_GCM_SHA384"]
        );
        assert!(matches!(
            provider(&opts(TlsVersion::Tls12, &["TLS_RSA_WITH_RC4_128_MD5"])),
            Err(TlsError::Options(m)) if m.contains("unknown cipher suite")
        ));
        // TLS 1.2 suites alone cannot serve a TLS 1.3-only listener.
        assert!(
            provider(&opts(
                TlsVersion::Tls13,
                &["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]
            ))
            .is_err()
        );
    }

    #[test]
    fn a_client_certificate_gives_its_subject_sans_and_envoys_field() {
        let mut params = rcgen::CertificateParams::new(vec!["client.test".to_string()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice, the \"admin\"");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params.subject_alt_names.push(rcgen::SanType::URI(
            "spiffe://example.org/alice".try_into().unwrap(),
        ));
        params
            .subject_alt_names
            .push(rcgen::SanType::IpAddress("10.0.0.7".parse().unwrap()));
        params.subject_alt_names.push(rcgen::SanType::Rfc822Name(
            "alice@example.org".try_into().unwrap(),
        ));
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let c = ClientCert::from_der(cert.der()).unwrap();
        assert!(c.subject.contains("CN=alice"), "{}", c.subject);
        assert!(c.subject.contains("O=Example"), "{}", c.subject);
        assert_eq!(c.dns, ["client.test"]);
        assert_eq!(c.uris, ["spiffe://example.org/alice"]);
        assert_eq!(c.emails, ["alice@example.org"]);
        assert_eq!(c.ips, [IpAddr::from([10, 0, 0, 7])]);
        assert_eq!(c.sha256.len(), 64);
        assert!(
            c.xfcc.starts_with(&format!("Hash={};Subject=\"", c.sha256)),
            "{}",
            c.xfcc
        );
        assert!(
            c.xfcc
                .ends_with(";URI=spiffe://example.org/alice;DNS=client.test"),
            "{}",
            c.xfcc
        );
        assert!(c.xfcc.contains(r#"\"admin\""#), "{}", c.xfcc);
        assert_eq!(ClientCert::from_der(b"not a certificate"), None);
    }
}
