//! TLS to an upstream (the proxy's HTTP/2 over TLS, `protocol = "h2"`): the rustls client
//! configuration per trusted-roots choice (the system's, or a `tls_ca` file; ALPN `h2` only),
//! built once and shared, and one connection's session over the backend's owned buffers.
//!
//! Owns every TLS byte of an upstream connection; `upstream_h2.rs` sees plaintext only, and
//! gets none of the server's to read and may send none of its own before the handshake chose
//! `h2` by ALPN. It must not block: a session only moves bytes it is given.
#![forbid(unsafe_code)]
#![cfg_attr(not(all(feature = "proxy", feature = "http2")), allow(dead_code))]

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// The ALPN protocol an HTTP/2 upstream over TLS must choose (RFC 9113 §3.2).
const ALPN_H2: &[u8] = b"h2";

/// The client configurations made so far, by their roots (`None`: the system's): the
/// system's store is read once per process, not per connection.
static CONFIGS: Mutex<Vec<(Option<PathBuf>, Arc<ClientConfig>)>> = Mutex::new(Vec::new());

/// Builds the client configuration trusting `ca` (a PEM file of CA certificates) or, with
/// none, the system's roots, and keeps it for the connections to come (a reload's check
/// reads the file again). An error names what is wrong, for the configuration's message.
pub fn load_upstream_roots(ca: Option<&Path>) -> Result<(), String> {
    let config = build(ca)?;
    let mut configs = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
    configs.retain(|(k, _)| k.as_deref() != ca);
    configs.push((ca.map(Path::to_path_buf), config));
    Ok(())
}

/// The client configuration for `ca` (made at the first use when no check made it).
pub(super) fn client_config(ca: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    {
        let configs = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = configs.iter().find(|(k, _)| k.as_deref() == ca) {
            return Ok(c.clone());
        }
    }
    load_upstream_roots(ca)?;
    client_config(ca)
}

fn build(ca: Option<&Path>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    match ca {
        Some(path) => {
            let pem = crate::privsep::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for der in CertificateDer::pem_slice_iter(&pem) {
                let der = der.map_err(|e| format!("{}: invalid PEM: {e:?}", path.display()))?;
                roots
                    .add(der)
                    .map_err(|e| format!("{}: not a usable CA certificate: {e}", path.display()))?;
            }
            if roots.is_empty() {
                return Err(format!("{}: no CERTIFICATE block found", path.display()));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            // A store with some unreadable entries still verifies with the rest.
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(
                    "no trusted root certificates found on this system (set tls_ca)".into(),
                );
            }
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(config))
}

/// The name an upstream server is verified as (and sent as SNI when it is a DNS name):
/// `name` when given, else the server's IP address.
pub(super) fn server_name(
    name: Option<&str>,
    addr: Option<SocketAddr>,
) -> Result<ServerName<'static>, String> {
    match (name, addr) {
        (Some(n), _) => {
            ServerName::try_from(n.to_string()).map_err(|_| format!("{n:?}: not a server name"))
        }
        (None, Some(a)) => Ok(ServerName::IpAddress(a.ip().into())),
        (None, None) => Err("a Unix-socket server needs tls_server_name".into()),
    }
}

/// Whether `name` can be a server's name (a DNS name or an IP address) for `tls_server_name`.
pub fn upstream_server_name_ok(name: &str) -> bool {
    ServerName::try_from(name).is_ok()
}

/// How a session's handshake ended, once it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Handshake {
    /// Still going.
    Going,
    /// Done, and the server chose `h2`: HTTP/2 may start.
    H2,
    /// Done without `h2` (an HTTP/1.1-only server, or no ALPN at all).
    NotH2,
}

/// One upstream connection's TLS session.
pub(super) struct UpTls {
    session: ClientConnection,
    /// A ciphertext buffer is with the backend.
    in_flight: bool,
    /// It carries HTTP/2 output (whose `sent` the connection awaits).
    carried: bool,
}

impl UpTls {
    pub(super) fn new(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
    ) -> Result<UpTls, String> {
        let mut session = ClientConnection::new(config, name).map_err(|e| e.to_string())?;
        // HTTP/2's windows bound what is handed over at once; rustls holds it all.
        session.set_buffer_limit(None);
        Ok(UpTls {
            session,
            in_flight: false,
            carried: false,
        })
    }

    pub(super) fn handshake(&self) -> Handshake {
        if self.session.is_handshaking() {
            Handshake::Going
        } else if self.session.alpn_protocol() == Some(ALPN_H2) {
            Handshake::H2
        } else {
            Handshake::NotH2
        }
    }

    /// The server's ALPN answer, for the log.
    pub(super) fn alpn(&self) -> String {
        self.session.alpn_protocol().map_or_else(
            || "none".into(),
            |p| String::from_utf8_lossy(p).into_owned(),
        )
    }

    /// Ciphertext from the server in; its plaintext appended to `plain`. `Ok(true)`: the
    /// server ended the session (close_notify). An error is fatal to the connection (a
    /// bad record, a failed verification, an alert).
    pub(super) fn recv(&mut self, mut data: &[u8], plain: &mut Vec<u8>) -> Result<bool, String> {
        let mut closed = false;
        while !data.is_empty() {
            self.session
                .read_tls(&mut data)
                .map_err(|e| e.to_string())?;
            let state = self
                .session
                .process_new_packets()
                .map_err(|e| e.to_string())?;
            closed |= state.peer_has_closed();
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let at = plain.len();
                plain.resize(at + n, 0);
                self.session
                    .reader()
                    .read_exact(&mut plain[at..])
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(closed)
    }

    /// A ciphertext buffer is with the backend (nothing more is encrypted or sent until it
    /// is out: the HTTP/2 output it carries is sent only then).
    pub(super) fn sending(&self) -> bool {
        self.in_flight
    }

    /// Whether ciphertext waits to go out (and no buffer is with the backend).
    pub(super) fn wants_send(&self) -> bool {
        !self.in_flight && self.session.wants_write()
    }

    /// Encrypts HTTP/2 output (the handshake chose `h2`); it goes in the next buffer.
    pub(super) fn encrypt(&mut self, plain: &[u8]) {
        // Unlimited buffer: `write_all` takes it all (an error here is a closed session,
        // seen at the next receive).
        let _ = self.session.writer().write_all(plain);
        self.carried = true;
    }

    /// The ciphertext to send now (after [`UpTls::wants_send`]), into `out`.
    pub(super) fn take_output(&mut self, mut out: Vec<u8>) -> Vec<u8> {
        out.clear();
        while self.session.wants_write() {
            if self.session.write_tls(&mut out).is_err() {
                break;
            }
        }
        self.in_flight = true;
        out
    }

    /// The buffer handed over is sent; `true` when it carried HTTP/2 output.
    pub(super) fn sent(&mut self) -> bool {
        self.in_flight = false;
        std::mem::take(&mut self.carried)
    }
}
