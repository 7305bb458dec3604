//! TLS for `https://` targets: the rustls client configuration (roots, `--cacert`, `--insecure`,
//! ALPN `http/1.1`, or `h2` alone with `--http2`, or TLS 1.3 and `h3` alone for QUIC with
//! `--http3`, SNI) and `Transport`, the per-connection layer
//! between the worker and its non-blocking socket. rustls does no I/O of its own; this module
//! feeds it with `recv`/`send` and never blocks, except in `preflight`, which runs once before
//! the workers start.
//! Invariant: `Transport::Plain` is one enum match away from the bare syscalls, so `http://` pays
//! nothing for TLS being here.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::{self, RecvFlags, SendFlags};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, SignatureScheme,
};

/// The application protocol offered for HTTP/1.1 runs, alone.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";
/// The application protocol offered for `--http2` runs, alone: a server that does not choose
/// it fails the run (`SetupFailure::NoHttp2`).
pub const ALPN_H2: &[u8] = b"h2";

/// How the server's certificate is checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verify {
    /// Against the Mozilla roots bundled by `webpki-roots` (the default).
    WebPkiRoots,
    /// Against the CA certificates of a PEM file only (`--cacert`).
    CaFile(PathBuf),
    /// Not at all (`--insecure`): any chain and name is accepted; handshake signatures are still
    /// checked, so the peer must hold the key of the certificate it shows.
    Insecure,
}

impl fmt::Display for Verify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verify::WebPkiRoots => f.write_str("certificate verified against webpki roots"),
            Verify::CaFile(p) => write!(f, "certificate verified against {}", p.display()),
            Verify::Insecure => f.write_str("certificate not verified (--insecure)"),
        }
    }
}

/// Why the TLS client could not be configured.
#[derive(Debug)]
pub enum TlsConfigError {
    Read(PathBuf, io::Error),
    Pem(PathBuf, String),
    NoCertificates(PathBuf),
    Rejected(PathBuf, rustls::Error),
    Provider(rustls::Error),
    /// The URL's host is neither an IP address nor a valid DNS name (SNI needs one).
    ServerName(String),
    /// `--tls-cipher` names no suite the provider has.
    Cipher(String, Vec<String>),
    /// `--http3` without TLS13_AES_128_GCM_SHA256, which QUIC's Initial packets need.
    NoQuicInitialSuite,
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsConfigError::Read(p, e) => write!(f, "cannot read --cacert {}: {e}", p.display()),
            TlsConfigError::Pem(p, e) => {
                write!(f, "--cacert {} is not valid PEM: {e}", p.display())
            }
            TlsConfigError::NoCertificates(p) => {
                write!(f, "--cacert {} holds no CERTIFICATE block", p.display())
            }
            TlsConfigError::Rejected(p, e) => {
                write!(
                    f,
                    "--cacert {}: certificate not usable as a root: {e}",
                    p.display()
                )
            }
            TlsConfigError::Provider(e) => write!(f, "TLS setup failed: {e}"),
            TlsConfigError::Cipher(name, known) => {
                write!(
                    f,
                    "unknown --tls-cipher {name:?} (known: {})",
                    known.join(", ")
                )
            }
            TlsConfigError::NoQuicInitialSuite => f.write_str(
                "--http3 needs TLS13_AES_128_GCM_SHA256 among the offered cipher suites (QUIC's \
                 Initial packets use it, RFC 9001 §5); --tls-cipher left it out",
            ),
            TlsConfigError::ServerName(h) => {
                write!(
                    f,
                    "host {h:?} is not a valid TLS server name (DNS name or IP address)"
                )
            }
        }
    }
}

impl std::error::Error for TlsConfigError {}

/// What the client offers beyond its defaults, and its key-update habit.
#[derive(Clone, Debug, Default)]
pub struct TlsChoice {
    /// Offer ALPN `h2` only (instead of `http/1.1`) and require the server to choose it.
    pub http2: bool,
    /// For QUIC (`--http3`): TLS 1.3 only and ALPN `h3` only (the QUIC client checks that
    /// the server chose it).
    pub http3: bool,
    pub version: Option<crate::options::TlsVersion>,
    /// One cipher suite by IANA name (`TLS13_AES_128_GCM_SHA256`, ...).
    pub cipher: Option<String>,
    pub key_update_every: Option<u32>,
    /// Never resume a session: no session cache, no tickets (every handshake is full).
    pub no_resume: bool,
}

/// Everything a connection needs to start a TLS session; cloned per connection cheaply.
#[derive(Clone, Debug)]
pub struct TlsClient {
    /// Shared by all threads, and with it the session cache, so reconnects may resume.
    pub config: Arc<ClientConfig>,
    /// SNI and the name the certificate must match; an IP address sends no SNI.
    pub server_name: ServerName<'static>,
    pub verify: Verify,
    /// Send a KeyUpdate before every Nth send on a connection.
    pub key_update_every: Option<u32>,
    /// ALPN `h2` was offered, and a handshake that does not choose it fails.
    pub http2: bool,
}

impl TlsClient {
    /// Builds the client for `host` (a DNS name or an IP address, without brackets).
    pub fn new(host: &str, verify: Verify, choice: TlsChoice) -> Result<TlsClient, TlsConfigError> {
        let mut provider = rustls::crypto::aws_lc_rs::default_provider();
        if let Some(name) = &choice.cipher {
            let known: Vec<String> = provider
                .cipher_suites
                .iter()
                .map(|s| format!("{:?}", s.suite()))
                .collect();
            provider
                .cipher_suites
                .retain(|s| format!("{:?}", s.suite()) == *name);
            if provider.cipher_suites.is_empty() {
                return Err(TlsConfigError::Cipher(name.clone(), known));
            }
        }
        let provider = Arc::new(provider);
        use crate::options::TlsVersion;
        let versions: &[&'static rustls::SupportedProtocolVersion] = match choice.version {
            // RFC 9001 §4.2: QUIC is TLS 1.3 or later.
            _ if choice.http3 => &[&rustls::version::TLS13],
            None => rustls::DEFAULT_VERSIONS,
            Some(TlsVersion::V12) => &[&rustls::version::TLS12],
            Some(TlsVersion::V13) => &[&rustls::version::TLS13],
        };
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(TlsConfigError::Provider)?;
        let mut config = match &verify {
            Verify::WebPkiRoots => {
                let roots = rustls::RootCertStore::from_iter(
                    webpki_roots::TLS_SERVER_ROOTS.iter().cloned(),
                );
                builder.with_root_certificates(roots)
            }
            Verify::CaFile(path) => builder.with_root_certificates(read_roots(path)?),
            Verify::Insecure => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                    provider.signature_verification_algorithms,
                ))),
        }
        .with_no_client_auth();
        let alpn = match (choice.http2, choice.http3) {
            (_, true) => crate::h3::ALPN_H3,
            (true, false) => ALPN_H2,
            (false, false) => ALPN_HTTP1,
        };
        config.alpn_protocols = vec![alpn.to_vec()];
        if choice.no_resume {
            config.resumption = rustls::client::Resumption::disabled();
        }
        let server_name = ServerName::try_from(host.to_string())
            .map_err(|_| TlsConfigError::ServerName(host.to_string()))?;
        Ok(TlsClient {
            config: Arc::new(config),
            server_name,
            verify,
            key_update_every: choice.key_update_every,
            http2: choice.http2,
        })
    }

    /// A new client session with this configuration (blocking callers drive it themselves).
    pub fn session(&self) -> Result<ClientConnection, rustls::Error> {
        ClientConnection::new(self.config.clone(), self.server_name.clone())
    }
}

/// A finished handshake's verdict on the protocol: with `--http2` (`http2`), the server must
/// have chosen `h2` (one that ignores ALPN would answer in HTTP/1.1).
fn check_alpn(http2: bool, conn: &ClientConnection) -> Result<(), SetupFailure> {
    match conn.alpn_protocol() {
        _ if !http2 => Ok(()),
        Some(ALPN_H2) => Ok(()),
        chosen => Err(SetupFailure::NoHttp2(
            chosen.map(|p| String::from_utf8_lossy(p).into_owned()),
        )),
    }
}

/// A refused handshake, seen with what was offered: a server that answers the `h2` offer with
/// `no_application_protocol` (RFC 7301 §3.2) does not speak HTTP/2 there.
fn refused(http2: bool, e: rustls::Error) -> SetupFailure {
    match e {
        rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) if http2 => {
            SetupFailure::NoHttp2(None)
        }
        e => SetupFailure::Tls(e),
    }
}

fn read_roots(path: &Path) -> Result<rustls::RootCertStore, TlsConfigError> {
    let pem = std::fs::read(path).map_err(|e| TlsConfigError::Read(path.to_path_buf(), e))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| TlsConfigError::Pem(path.to_path_buf(), e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsConfigError::Rejected(path.to_path_buf(), e))?;
    }
    if roots.is_empty() {
        return Err(TlsConfigError::NoCertificates(path.to_path_buf()));
    }
    Ok(roots)
}

/// `--insecure`: accepts any certificate for any name, like `curl -k`.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// Why a connection could not be set up (TCP connect or TLS handshake).
#[derive(Clone, Debug)]
pub enum SetupFailure {
    /// The TCP connect (or a socket call during the handshake) failed.
    Io(Errno),
    /// rustls refused the handshake: certificate, protocol version, alert from the peer …
    Tls(rustls::Error),
    /// The server closed the connection before the handshake finished.
    Closed,
    /// No handshake within `--timeout`.
    HandshakeTimeout,
    /// `--http2`: the server did not choose ALPN `h2` (what it chose, if anything).
    NoHttp2(Option<String>),
    /// `--ws`: the upgrade was refused or its 101 is not a WebSocket one.
    Upgrade(crate::ws::WsError),
    /// `--ws`: the server closed the connection before answering the upgrade.
    UpgradeClosed,
    /// `--ws`: no answer to the upgrade within `--timeout`.
    UpgradeTimeout,
    /// `--http3`: the QUIC connection failed before its handshake was done (its TLS
    /// handshake included), or the server did not choose `h3`.
    Http3(crate::h3::H3Error),
}

impl SetupFailure {
    /// True for failures of the TLS layer (counted as `tls` errors, not `connect`).
    pub fn is_tls(&self) -> bool {
        !matches!(
            self,
            SetupFailure::Io(_)
                | SetupFailure::Upgrade(_)
                | SetupFailure::UpgradeClosed
                | SetupFailure::UpgradeTimeout
        )
    }
}

impl fmt::Display for SetupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupFailure::Io(e) => e.fmt(f),
            // `openssl req -x509` makes CA:TRUE certificates; webpki refuses them as a server's.
            SetupFailure::Tls(e @ rustls::Error::InvalidCertificate(_))
                if e.to_string().contains("CaUsedAsEndEntity") =>
            {
                write!(
                    f,
                    "TLS handshake failed: {e} (the server's certificate is a CA certificate; \
                     serve a leaf certificate signed by it, or use -k/--insecure)"
                )
            }
            SetupFailure::Tls(e @ rustls::Error::InvalidCertificate(_)) => write!(
                f,
                "TLS handshake failed: {e} (use --cacert FILE to trust its CA, or -k/--insecure \
                 to skip verification)"
            ),
            SetupFailure::Tls(e) => write!(f, "TLS handshake failed: {e}"),
            SetupFailure::Closed => {
                f.write_str("the server closed the connection during the TLS handshake")
            }
            SetupFailure::HandshakeTimeout => f.write_str("TLS handshake timed out"),
            SetupFailure::Upgrade(e) => e.fmt(f),
            SetupFailure::UpgradeClosed => f.write_str(
                "the server closed the connection before answering the WebSocket upgrade",
            ),
            SetupFailure::UpgradeTimeout => {
                f.write_str("the WebSocket upgrade was not answered in time")
            }
            SetupFailure::Http3(e) => {
                let text = e.to_string();
                if text.contains("certificate") {
                    write!(
                        f,
                        "{text} (use --cacert FILE to trust its CA, or -k/--insecure to skip \
                         verification)"
                    )
                } else {
                    f.write_str(&text)
                }
            }
            SetupFailure::NoHttp2(chosen) => {
                let answer = match chosen {
                    Some(p) => format!("it chose {p:?}"),
                    None => "it refused it or chose none".to_string(),
                };
                write!(
                    f,
                    "the server does not speak HTTP/2 over TLS here: ALPN h2 was offered and \
                     {answer}; run without --http2"
                )
            }
        }
    }
}

impl std::error::Error for SetupFailure {}

/// Does one blocking handshake on `sock`, so that a certificate the client refuses is one clear
/// error before the run starts. Each read or write waits at most `timeout`.
pub fn preflight(
    tls: &TlsClient,
    mut sock: TcpStream,
    timeout: Duration,
) -> Result<(), SetupFailure> {
    let io_err = |e: io::Error| SetupFailure::Io(Errno::from_io_error(&e).unwrap_or(Errno::IO));
    sock.set_read_timeout(Some(timeout)).map_err(io_err)?;
    sock.set_write_timeout(Some(timeout)).map_err(io_err)?;
    let mut conn = tls.session().map_err(SetupFailure::Tls)?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            return Err(match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    SetupFailure::HandshakeTimeout
                }
                io::ErrorKind::UnexpectedEof => SetupFailure::Closed,
                _ => match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
                    Some(t) => refused(tls.http2, t.clone()),
                    None => io_err(e),
                },
            });
        }
    }
    check_alpn(tls.http2, &conn)
}

/// What a connection speaks over its socket. Matched once per I/O call.
#[derive(Debug)]
pub enum Transport {
    Plain,
    Tls(Box<TlsSession>),
}

/// A rustls client session over a non-blocking socket.
#[derive(Debug)]
pub struct TlsSession {
    conn: ClientConnection,
    /// Decrypted bytes rustls holds that `recv` has not handed out yet.
    plaintext: usize,
    /// `--tls-key-update`: a KeyUpdate before every Nth send; `sends` counts them.
    key_update_every: Option<u32>,
    sends: u32,
    /// `--http2`: the handshake must choose ALPN `h2`.
    http2: bool,
}

/// Where a handshake stands after the socket was ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Waiting for the peer; wait for EPOLLOUT too when `want_write`.
    Pending { want_write: bool },
    /// Done: HTTP may flow.
    Done { resumed: bool },
}

/// Why a read or write on an open connection failed.
#[derive(Debug)]
pub enum IoFailure {
    Io(Errno),
    /// A bad record, a decryption failure, an alert from the peer.
    Tls(rustls::Error),
}

impl Transport {
    /// A fresh transport for a new connection: plain, or a new TLS session from `tls`.
    pub fn new(tls: Option<&TlsClient>) -> Result<Transport, SetupFailure> {
        match tls {
            None => Ok(Transport::Plain),
            Some(t) => Ok(Transport::Tls(Box::new(TlsSession {
                conn: t.session().map_err(SetupFailure::Tls)?,
                plaintext: 0,
                key_update_every: t.key_update_every,
                sends: 0,
                http2: t.http2,
            }))),
        }
    }

    /// Reads into `buf`: Ok(0) at end of stream, `Errno::AGAIN` when nothing is there. At most
    /// one `recv` per call; see `has_buffered` for what is left after it.
    #[inline]
    pub fn recv(&mut self, fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, IoFailure> {
        match self {
            Transport::Plain => match net::recv(fd, buf, RecvFlags::empty()) {
                Ok((n, _)) => Ok(n),
                Err(e) => Err(IoFailure::Io(e)),
            },
            Transport::Tls(s) => s.recv(fd, buf),
        }
    }

    /// Sends `bytes`, returning how many were taken (for TLS: taken into the session, which then
    /// writes what the socket accepts; see `wants_write`).
    #[inline]
    pub fn send(&mut self, fd: &OwnedFd, bytes: &[u8]) -> Result<usize, Errno> {
        match self {
            Transport::Plain => net::send(fd, bytes, SendFlags::NOSIGNAL),
            Transport::Tls(s) => s.send(fd, bytes),
        }
    }

    /// True when the TLS session holds records the socket did not take yet.
    #[inline]
    pub fn wants_write(&self) -> bool {
        match self {
            Transport::Plain => false,
            Transport::Tls(s) => s.conn.wants_write(),
        }
    }

    /// True when `recv` has decrypted bytes to hand out without reading the socket.
    #[inline]
    pub fn has_buffered(&self) -> bool {
        match self {
            Transport::Plain => false,
            Transport::Tls(s) => s.has_plaintext(),
        }
    }

    /// Writes held TLS records until done or the socket is full.
    pub fn flush(&mut self, fd: &OwnedFd) -> Result<(), Errno> {
        match self {
            Transport::Plain => Ok(()),
            Transport::Tls(s) => s.flush(fd),
        }
    }

    /// True while a fresh TLS session has not finished its handshake.
    pub fn is_handshaking(&self) -> bool {
        match self {
            Transport::Plain => false,
            Transport::Tls(s) => s.conn.is_handshaking(),
        }
    }

    /// Advances the handshake with what the socket allows; never blocks.
    pub fn handshake(&mut self, fd: &OwnedFd) -> Result<Handshake, SetupFailure> {
        match self {
            Transport::Plain => Ok(Handshake::Done { resumed: false }),
            Transport::Tls(s) => s.handshake(fd),
        }
    }
}

impl TlsSession {
    fn handshake(&mut self, fd: &OwnedFd) -> Result<Handshake, SetupFailure> {
        self.flush(fd).map_err(SetupFailure::Io)?;
        while self.conn.is_handshaking() {
            match self.conn.read_tls(&mut SockIo(fd)) {
                Ok(0) => return Err(SetupFailure::Closed),
                Ok(_) => {
                    if let Err(e) = self.conn.process_new_packets() {
                        // Best effort: tell the peer why (the alert rustls queued).
                        let _ = self.flush(fd);
                        return Err(refused(self.http2, e));
                    }
                    self.flush(fd).map_err(SetupFailure::Io)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(Handshake::Pending {
                        want_write: self.conn.wants_write(),
                    });
                }
                Err(e) => return Err(SetupFailure::Io(to_errno(&e))),
            }
        }
        check_alpn(self.http2, &self.conn)?;
        Ok(Handshake::Done {
            resumed: self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
        })
    }

    /// One `recv` per call at most: decrypted bytes left from an earlier call go first, and only
    /// when there are none is the socket read (rustls reads up to 4 KiB at a time).
    fn recv(&mut self, fd: &OwnedFd, buf: &mut [u8]) -> Result<usize, IoFailure> {
        if self.plaintext == 0 {
            match self.conn.read_tls(&mut SockIo(fd)) {
                Ok(0) => return Ok(0),
                Ok(_) => {}
                Err(e) => return Err(IoFailure::Io(to_errno(&e))),
            }
            let state = match self.conn.process_new_packets() {
                Ok(state) => state,
                Err(e) => {
                    // Best effort: tell the peer why (the alert rustls queued).
                    let _ = self.flush(fd);
                    return Err(IoFailure::Tls(e));
                }
            };
            // A key update, say, wants an answer even when no request is due.
            if state.tls_bytes_to_write() > 0 {
                self.flush(fd).map_err(IoFailure::Io)?;
            }
            self.plaintext = state.plaintext_bytes_to_read();
            if self.plaintext == 0 {
                // A partial record, or records without data (session tickets): wait for more,
                // unless the peer said close_notify.
                return if state.peer_has_closed() {
                    Ok(0)
                } else {
                    Err(IoFailure::Io(Errno::AGAIN))
                };
            }
        }
        match self.conn.reader().read(buf) {
            Ok(n) => {
                self.plaintext = self.plaintext.saturating_sub(n);
                Ok(n)
            }
            // Cannot happen with plaintext counted as buffered; treat as nothing to read.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.plaintext = 0;
                Err(IoFailure::Io(Errno::AGAIN))
            }
            Err(e) => Err(IoFailure::Io(to_errno(&e))),
        }
    }

    /// Decrypted bytes not handed out yet: the caller must read again before waiting on epoll,
    /// which cannot see them.
    fn has_plaintext(&self) -> bool {
        self.plaintext > 0
    }

    fn send(&mut self, fd: &OwnedFd, bytes: &[u8]) -> Result<usize, Errno> {
        if let Some(every) = self.key_update_every {
            self.sends += 1;
            if self.sends.is_multiple_of(every) {
                // TLS 1.2 has no key update: nothing to do there.
                let _ = self.conn.refresh_traffic_keys();
            }
        }
        // Takes at most rustls's buffer limit; the rest stays with the caller.
        let n = self.conn.writer().write(bytes).map_err(|e| to_errno(&e))?;
        self.flush(fd)?;
        Ok(n)
    }

    fn flush(&mut self, fd: &OwnedFd) -> Result<(), Errno> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SockIo(fd)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(to_errno(&e)),
            }
        }
        Ok(())
    }
}

fn to_errno(e: &io::Error) -> Errno {
    Errno::from_io_error(e).unwrap_or(Errno::IO)
}

/// The non-blocking socket as `Read`/`Write` for rustls (`EAGAIN` becomes `WouldBlock`).
struct SockIo<'a>(&'a OwnedFd);

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match net::recv(self.0.as_fd(), &mut *buf, RecvFlags::empty()) {
                Ok((n, _)) => return Ok(n),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match net::send(self.0.as_fd(), buf, SendFlags::NOSIGNAL) {
                Ok(n) => return Ok(n),
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_only_for_dns_names() {
        // RFC 6066 §3: literal IP addresses are not sent as SNI; rustls leaves them out.
        let c = TlsClient::new("127.0.0.1", Verify::Insecure, TlsChoice::default()).unwrap();
        assert!(matches!(c.server_name, ServerName::IpAddress(_)));
        let c = TlsClient::new("::1", Verify::Insecure, TlsChoice::default()).unwrap();
        assert!(matches!(c.server_name, ServerName::IpAddress(_)));
        let c = TlsClient::new("example.com", Verify::WebPkiRoots, TlsChoice::default()).unwrap();
        assert!(matches!(c.server_name, ServerName::DnsName(_)));
        assert!(matches!(
            TlsClient::new("bad_host!", Verify::Insecure, TlsChoice::default()),
            Err(TlsConfigError::ServerName(_))
        ));
    }

    #[test]
    fn version_and_cipher_choices_narrow_the_offer() {
        use crate::options::TlsVersion;
        let choice = |version, cipher: Option<&str>| TlsChoice {
            version,
            cipher: cipher.map(str::to_owned),
            ..TlsChoice::default()
        };
        let c = TlsClient::new(
            "localhost",
            Verify::Insecure,
            choice(
                Some(TlsVersion::V12),
                Some("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
            ),
        )
        .unwrap();
        let suites: Vec<_> = c
            .config
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| s.suite())
            .collect();
        assert_eq!(
            suites,
            vec![rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]
        );
        match TlsClient::new(
            "localhost",
            Verify::Insecure,
            choice(None, Some("TLS13_NOPE")),
        ) {
            Err(e @ TlsConfigError::Cipher(..)) => {
                let line = e.to_string();
                assert!(
                    line.starts_with("unknown --tls-cipher \"TLS13_NOPE\" (known: "),
                    "{line}"
                );
                assert!(line.contains("TLS13_CHACHA20_POLY1305_SHA256"), "{line}");
            }
            other => panic!("expected an unknown-cipher error, got {other:?}"),
        }
        // A TLS 1.3 suite with only TLS 1.2 offered cannot work: refused at setup.
        assert!(
            TlsClient::new(
                "localhost",
                Verify::Insecure,
                choice(Some(TlsVersion::V12), Some("TLS13_AES_128_GCM_SHA256"))
            )
            .is_err()
        );
        assert!(
            TlsClient::new(
                "localhost",
                Verify::Insecure,
                choice(
                    Some(TlsVersion::V13),
                    Some("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256")
                )
            )
            .is_err()
        );
    }

    #[test]
    fn offers_http1_only() {
        let c = TlsClient::new("localhost", Verify::Insecure, TlsChoice::default()).unwrap();
        assert_eq!(c.config.alpn_protocols, vec![ALPN_HTTP1.to_vec()]);
    }

    #[test]
    fn http2_offers_h2_only_and_says_so_when_refused() {
        let choice = TlsChoice {
            http2: true,
            ..TlsChoice::default()
        };
        let c = TlsClient::new("localhost", Verify::Insecure, choice).unwrap();
        assert_eq!(c.config.alpn_protocols, vec![ALPN_H2.to_vec()]);
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol);
        let failure = refused(c.http2, alert.clone());
        assert!(
            matches!(failure, SetupFailure::NoHttp2(None)),
            "{failure:?}"
        );
        let line = failure.to_string();
        assert!(line.contains("does not speak HTTP/2") && line.contains("without --http2"));
        // For HTTP/1.1 runs the alert stays what it is.
        let h1 = TlsClient::new("localhost", Verify::Insecure, TlsChoice::default()).unwrap();
        assert!(matches!(refused(h1.http2, alert), SetupFailure::Tls(_)));
        let chose = SetupFailure::NoHttp2(Some("http/1.1".into())).to_string();
        assert!(chose.contains("it chose \"http/1.1\""), "{chose}");
    }

    #[test]
    fn plain_transport_is_not_tls() {
        let t = Transport::new(None).unwrap();
        assert!(!t.wants_write() && !t.is_handshaking());
    }
}
