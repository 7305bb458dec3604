//! HTTPS: loading the certificate and key, the rustls configuration, and the per-connection
//! transport (plain TCP, user-space rustls, or kernel TLS after a hand-off).
//!
//! Owns every TLS byte; the connection state machine above sees only plaintext. A transport
//! carries one operation of the connection at a time (send these bytes, send this file
//! range, shut down) over the backend's owned-buffer operations, and reports it done once
//! its records are on their way. Invariant: plaintext handed over is never dropped, and
//! rustls buffers at most [`TLS_BUFFER_LIMIT`] of it before its records go out, so a client
//! that does not read cannot grow the buffer. Handing keys to the kernel happens only at a
//! record boundary with nothing buffered in either direction, so no byte is encrypted or
//! decrypted twice or lost.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use rustix::io::Errno;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ConnectionTrafficSecrets, ProtocolVersion, ServerConfig, ServerConnection};

use super::backend::{Backend, Completion, Submitted, Token};
use crate::config::TlsConfig;
use crate::pool::Pool;
use crate::sys::{KtlsCrypto, KtlsDirection};

/// The one application protocol offered in ALPN.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";
/// Most encrypted-but-unsent bytes rustls holds for one connection; `send` accepts no more
/// plaintext until they are on the socket.
pub const TLS_BUFFER_LIMIT: usize = 64 * 1024;
/// File bytes read (pread) and encrypted at once over user-space TLS: one full record.
pub const TLS_FILE_CHUNK: usize = 16 * 1024;
/// TLS record header: type (1), version (2), length (2).
const RECORD_HEADER: usize = 5;
/// Where Linux lists the upper-layer protocols it can attach right now.
const AVAILABLE_ULP: &str = "/proc/sys/net/ipv4/tcp_available_ulp";

/// Why the TLS configuration could not be built. Each variant names the file at fault.
#[derive(Debug)]
pub enum TlsError {
    /// The certificate file could not be read or holds no valid PEM certificate.
    Cert { path: PathBuf, why: String },
    /// The key file could not be read or holds no valid PEM private key.
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

/// Reads the PEM files and builds the rustls server configuration: aws-lc-rs, TLS 1.3 and
/// 1.2 with their default (AEAD-only) suites, ALPN `http/1.1`, no client certificates.
/// Resumption keeps rustls's defaults: a stateful in-memory session cache (TLS 1.2 session
/// IDs, TLS 1.3 tickets that name a cache entry); no stateless ticket key is set.
pub fn server_config(tls: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_err = |why: String| TlsError::Cert {
        path: tls.cert.clone(),
        why,
    };
    let chain = CertificateDer::pem_file_iter(&tls.cert)
        .map_err(|e| cert_err(pem_why(&e)))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| cert_err(pem_why(&e)))?;
    if chain.is_empty() {
        return Err(cert_err("no CERTIFICATE block found".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key).map_err(|e| TlsError::Key {
        path: tls.key.clone(),
        why: pem_why(&e),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(TlsError::Rustls)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
                cert: tls.cert.clone(),
                key: tls.key.clone(),
            },
            e => TlsError::Rustls(e),
        })?;
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    config.enable_secret_extraction = tls.ktls;
    Ok(Arc::new(config))
}

fn pem_why(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::NoItemsFound => "no PEM block of the expected kind found".into(),
        e => format!("invalid PEM: {e:?}"),
    }
}

/// Whether this kernel can take TLS session keys (kTLS): the `tls` upper-layer protocol is
/// listed, or attaching it to a fresh unconnected socket fails only for want of a connection
/// (which also loads the module where it is built as one).
pub fn ktls_available() -> bool {
    let listed = std::fs::read_to_string(AVAILABLE_ULP)
        .is_ok_and(|s| s.split_whitespace().any(|u| u == "tls"));
    if listed {
        return true;
    }
    let Ok(sock) = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    ) else {
        return false;
    };
    matches!(crate::sys::set_tls_ulp(sock.as_fd()), Err(e) if e.raw_os_error() == Some(libc::ENOTCONN))
}

/// The ciphers this kernel's TLS takes, in both directions. Found once at start
/// ([`ktls_ciphers`]); a session is handed to the kernel only when its cipher is one of them,
/// because by the time the kernel could refuse, the secrets are out of rustls and the
/// connection could only be closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCiphers {
    pub aes_128_gcm: bool,
    pub aes_256_gcm: bool,
    pub chacha20_poly1305: bool,
}

impl KernelCiphers {
    /// Whether the kernel takes any cipher at all (kTLS usable).
    pub fn any(&self) -> bool {
        self.aes_128_gcm || self.aes_256_gcm || self.chacha20_poly1305
    }

    /// Whether the kernel takes the cipher `suite` negotiated.
    fn takes(&self, suite: rustls::CipherSuite) -> bool {
        use rustls::CipherSuite as C;
        match suite {
            C::TLS13_AES_128_GCM_SHA256
            | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => self.aes_128_gcm,
            C::TLS13_AES_256_GCM_SHA384
            | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => self.aes_256_gcm,
            C::TLS13_CHACHA20_POLY1305_SHA256
            | C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => self.chacha20_poly1305,
            _ => false,
        }
    }
}

/// Which ciphers the kernel takes: on a loopback connection per cipher, attach the ULP and
/// install a throwaway key for TX and RX (which also makes the kernel load the crypto modules
/// the cipher needs, as a real hand-off would). A kernel whose `tls` module loads but whose
/// crypto modules cannot (seen in a minimal VM: ENOENT) takes none, and sessions stay in
/// user space instead of being lost.
pub fn ktls_ciphers() -> KernelCiphers {
    if !ktls_available() {
        return KernelCiphers::default();
    }
    let Ok(listener) = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)) else {
        return KernelCiphers::default();
    };
    let takes = |crypto: KtlsCrypto| -> bool {
        let Ok(addr) = listener.local_addr() else {
            return false;
        };
        let Ok(_client) = std::net::TcpStream::connect(addr) else {
            return false;
        };
        let Ok((server, _)) = listener.accept() else {
            return false;
        };
        let fd = server.as_fd();
        crate::sys::set_tls_ulp(fd).is_ok()
            && crate::sys::set_ktls_crypto(fd, KtlsDirection::Tx, &crypto).is_ok()
            && crate::sys::set_ktls_crypto(fd, KtlsDirection::Rx, &crypto).is_ok()
    };
    let info = |cipher_type| libc::tls_crypto_info {
        version: libc::TLS_1_3_VERSION,
        cipher_type,
    };
    KernelCiphers {
        aes_128_gcm: takes(KtlsCrypto::Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128 {
            info: info(libc::TLS_CIPHER_AES_GCM_128),
            iv: [0; 8],
            key: [0; 16],
            salt: [0; 4],
            rec_seq: [0; 8],
        })),
        aes_256_gcm: takes(KtlsCrypto::Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256 {
            info: info(libc::TLS_CIPHER_AES_GCM_256),
            iv: [0; 8],
            key: [0; 32],
            salt: [0; 4],
            rec_seq: [0; 8],
        })),
        chacha20_poly1305: takes(KtlsCrypto::Chacha20Poly1305(
            libc::tls12_crypto_info_chacha20_poly1305 {
                info: info(libc::TLS_CIPHER_CHACHA20_POLY1305),
                iv: [0; 12],
                key: [0; 32],
                salt: [],
                rec_seq: [0; 8],
            },
        )),
    }
}

/// How a connection's bytes reach the socket.
pub(crate) enum Transport {
    /// Plain HTTP.
    Plain,
    /// TLS encrypted in user space by rustls.
    Tls(Box<TlsSession>),
    /// TLS encrypted by the kernel: the socket reads and writes plaintext, `sendfile` works.
    Kernel,
}

/// How an operation the connection asked for went.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome<T> {
    /// Finished at once.
    Done(T),
    /// Finishes later: a backend completion for the connection brings it ([`Transport::completed`]).
    InFlight,
    /// The connection is broken.
    Failed,
}

/// What a backend completion finished, at the connection's level.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Finished {
    /// Nothing the connection asked for (TLS's own records went out).
    Nothing,
    /// The bytes of [`Transport::send`] are out; the buffer comes back.
    Bytes(Vec<u8>),
    /// `n` bytes of the file range of [`Transport::sendfile`] are out.
    File(u64),
    /// [`Transport::shutdown`] is done.
    Shut,
    Failed,
}

/// What [`Transport::receive`] found besides plaintext.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Input {
    More,
    /// The peer's close_notify: no more input.
    End,
}

/// One rustls server session, the connection's operation it is carrying, and what the
/// hand-off to the kernel needs to know.
pub(crate) struct TlsSession {
    conn: ServerConnection,
    /// Hand the keys to the kernel once the handshake is done.
    offload: bool,
    /// The ciphers the kernel takes.
    kernel: KernelCiphers,
    records: RecordBoundary,
    close_sent: bool,
    /// The connection's operation being encrypted.
    op: Option<TlsOp>,
    /// A ciphertext send is with the backend.
    cipher_in_flight: bool,
}

enum TlsOp {
    Bytes { buf: Vec<u8>, pos: usize },
    File { chunk: Vec<u8>, pos: usize },
    Close,
}

impl Transport {
    /// A fresh server-side TLS session; handed to the kernel afterwards when it takes the
    /// negotiated cipher (`kernel` is empty when kTLS is off or absent).
    pub(crate) fn tls(
        config: &Arc<ServerConfig>,
        kernel: KernelCiphers,
    ) -> Result<Transport, String> {
        let mut conn = ServerConnection::new(config.clone()).map_err(|e| e.to_string())?;
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Ok(Transport::Tls(Box::new(TlsSession {
            conn,
            offload: kernel.any(),
            kernel,
            records: RecordBoundary::default(),
            close_sent: false,
            op: None,
            cipher_in_flight: false,
        })))
    }

    /// Whether received bytes are ciphertext for [`Transport::receive`] (plain and kernel
    /// TLS sockets deliver plaintext straight to the connection).
    pub(crate) fn decrypts(&self) -> bool {
        matches!(self, Transport::Tls(_))
    }

    /// Sends every byte of `buf` (plaintext; encrypted first over TLS).
    #[inline(always)]
    pub(crate) fn send<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        buf: Vec<u8>,
        more: bool,
        pool: &mut Pool,
    ) -> Outcome<Vec<u8>> {
        match self {
            Transport::Plain | Transport::Kernel => match b.send(token, buf, more) {
                Submitted::Done(buf) => Outcome::Done(buf),
                Submitted::Pending => Outcome::InFlight,
                Submitted::Failed => Outcome::Failed,
            },
            Transport::Tls(s) => {
                s.op = Some(TlsOp::Bytes { buf, pos: 0 });
                match s.pump(b, token, pool) {
                    None => Outcome::InFlight,
                    Some(Finished::Bytes(buf)) => Outcome::Done(buf),
                    Some(_) => Outcome::Failed,
                }
            }
        }
    }

    /// Sends up to `len` bytes of `file` from `offset`: `sendfile` on plain and kernel TLS
    /// sockets; over user-space TLS one record's worth is read (`pread`) and encrypted.
    pub(crate) fn sendfile<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        file: &Arc<OwnedFd>,
        (offset, len): (u64, u64),
        pool: &mut Pool,
    ) -> Outcome<u64> {
        match self {
            Transport::Plain | Transport::Kernel => match b.sendfile(token, file, offset, len) {
                Submitted::Done(n) => Outcome::Done(n),
                Submitted::Pending => Outcome::InFlight,
                Submitted::Failed => Outcome::Failed,
            },
            Transport::Tls(s) => {
                let mut chunk = pool.get();
                chunk.resize(len.min(TLS_FILE_CHUNK as u64) as usize, 0);
                let n = loop {
                    match rustix::io::pread(&**file, &mut chunk[..], offset) {
                        Ok(n) => break n,
                        Err(Errno::INTR) => continue,
                        Err(_) => break 0,
                    }
                };
                if n == 0 {
                    // The file shrank: the promised Content-Length can no longer be met.
                    pool.put(&mut chunk);
                    return Outcome::Failed;
                }
                chunk.truncate(n);
                s.op = Some(TlsOp::File { chunk, pos: 0 });
                match s.pump(b, token, pool) {
                    None => Outcome::InFlight,
                    Some(Finished::File(n)) => Outcome::Done(n),
                    Some(_) => Outcome::Failed,
                }
            }
        }
    }

    /// Ends the write side: close_notify over user-space TLS, then FIN. Over kTLS no alert
    /// is sent (it needs a control message); HTTP framing still marks every end.
    pub(crate) fn shutdown<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        pool: &mut Pool,
    ) -> Outcome<()> {
        if let Transport::Tls(s) = self {
            s.op = Some(TlsOp::Close);
            match s.pump(b, token, pool) {
                None => return Outcome::InFlight,
                Some(Finished::Shut) => {}
                Some(_) => return Outcome::Failed,
            }
        }
        match b.shutdown_write(token) {
            Ok(()) => Outcome::Done(()),
            Err(_) => Outcome::Failed,
        }
    }

    /// A `Sent` or `FileSent` completion for this connection: what it finished.
    pub(crate) fn completed<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        c: Completion,
        pool: &mut Pool,
    ) -> Finished {
        match (self, c) {
            (Transport::Tls(s), Completion::Sent { mut buf, .. }) => {
                pool.put(&mut buf);
                s.cipher_in_flight = false;
                match s.pump(b, token, pool) {
                    None => Finished::Nothing,
                    Some(Finished::Shut) => match b.shutdown_write(token) {
                        Ok(()) => Finished::Shut,
                        Err(_) => Finished::Failed,
                    },
                    Some(f) => f,
                }
            }
            (_, Completion::Sent { buf, .. }) => Finished::Bytes(buf),
            (_, Completion::FileSent { n, .. }) => Finished::File(n),
            _ => Finished::Failed,
        }
    }

    /// Ciphertext arrived (user-space TLS only): the plaintext is appended to `plain`.
    /// `Err` on a TLS error (rustls queued the alert; [`Transport::flush`] sends it).
    pub(crate) fn receive(&mut self, data: &[u8], plain: &mut Vec<u8>) -> Result<Input, ()> {
        match self {
            Transport::Tls(s) => s.receive(data, plain),
            _ => {
                plain.extend_from_slice(data);
                Ok(Input::More)
            }
        }
    }

    /// Sends what TLS itself has to say (handshake messages, key updates, alerts) when no
    /// operation of the connection is under way, and hands the keys to the kernel when the
    /// session is ready for it. `Err` when the connection is broken.
    pub(crate) fn flush<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        pool: &mut Pool,
    ) -> Result<(), ()> {
        let Transport::Tls(s) = self else {
            return Ok(());
        };
        if s.op.is_none()
            && !s.cipher_in_flight
            && s.conn.wants_write()
            && let Some(Finished::Failed) = s.pump(b, token, pool)
        {
            return Err(());
        }
        if s.ready_for_kernel() {
            self.offload(b, token)?;
        }
        Ok(())
    }

    /// Hands the session keys to the kernel. Attaching the ULP comes first: if the kernel
    /// refuses it the session simply stays in user space. Once the keys are extracted the
    /// rustls session is gone, so a failure after that closes the connection.
    fn offload<B: Backend>(&mut self, b: &mut B, token: Token) -> Result<(), ()> {
        let Some(fd) = b.fd(token) else {
            return Err(());
        };
        if let Err(e) = crate::sys::set_tls_ulp(fd) {
            tracing::debug!(error = %e, "kTLS refused; staying in user space");
            if let Transport::Tls(s) = self {
                s.offload = false;
            }
            return Ok(());
        }
        let Transport::Tls(s) = std::mem::replace(self, Transport::Kernel) else {
            return Ok(());
        };
        let version = s.conn.protocol_version();
        let secrets = s.conn.dangerous_extract_secrets().map_err(|e| {
            tracing::debug!(error = %e, "TLS secrets not extractable");
        })?;
        let (Some(tx), Some(rx)) = (
            kernel_crypto(version, secrets.tx.0, &secrets.tx.1),
            kernel_crypto(version, secrets.rx.0, &secrets.rx.1),
        ) else {
            return Err(());
        };
        for (dir, crypto) in [(KtlsDirection::Tx, &tx), (KtlsDirection::Rx, &rx)] {
            crate::sys::set_ktls_crypto(fd, dir, crypto).map_err(|e| {
                tracing::debug!(error = %e, "kTLS key setup failed; closing");
            })?;
        }
        Ok(())
    }
}

impl TlsSession {
    /// Handshake done, all records out, all plaintext taken, no operation under way, and the
    /// input stopped at a record boundary: nothing would be lost by moving the session to
    /// the kernel.
    fn ready_for_kernel(&mut self) -> bool {
        self.offload
            && !self.close_sent
            && self.op.is_none()
            && !self.cipher_in_flight
            && !self.conn.is_handshaking()
            && !self.conn.wants_write()
            && self.records.at_boundary()
            && self
                .conn
                .negotiated_cipher_suite()
                .is_some_and(|s| self.kernel.takes(s.suite()))
            && matches!(self.conn.reader().fill_buf(), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    fn receive(&mut self, data: &[u8], plain: &mut Vec<u8>) -> Result<Input, ()> {
        let mut rest = data;
        loop {
            // Plaintext already decrypted goes first.
            loop {
                let mut reader = self.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => return Ok(Input::End), // close_notify
                    Ok(chunk) => {
                        let k = chunk.len();
                        plain.extend_from_slice(chunk);
                        reader.consume(k);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // TCP EOF without close_notify: HTTP framing tells whether a request was
                    // cut short, so treat it as the end of input.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Input::End),
                    Err(_) => return Err(()),
                }
            }
            if rest.is_empty() {
                return Ok(Input::More);
            }
            let before = rest.len();
            if self.conn.read_tls(&mut rest).is_err() {
                return Err(());
            }
            let start = data.len() - before;
            self.records
                .feed(&data[start..start + (before - rest.len())]);
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued the matching alert: the caller flushes it, then closes.
                tracing::debug!(error = %e, "TLS error; closing");
                return Err(());
            }
        }
    }

    /// Moves the operation on: its plaintext into rustls, rustls's records to the backend.
    /// `None` while a ciphertext send is in flight; otherwise what finished.
    fn pump<B: Backend>(&mut self, b: &mut B, token: Token, pool: &mut Pool) -> Option<Finished> {
        loop {
            if self.cipher_in_flight {
                return None;
            }
            let mut accepted = 0;
            match &mut self.op {
                Some(TlsOp::Bytes { buf, pos }) | Some(TlsOp::File { chunk: buf, pos })
                    if *pos < buf.len() =>
                {
                    match self.conn.writer().write(&buf[*pos..]) {
                        Ok(k) => {
                            *pos += k;
                            accepted = k;
                        }
                        Err(_) => return Some(Finished::Failed),
                    }
                }
                Some(TlsOp::Close) if !self.close_sent => {
                    self.conn.send_close_notify();
                    self.close_sent = true;
                }
                _ => {}
            }
            if self.conn.wants_write() {
                let mut c = pool.get();
                if self.conn.write_tls(&mut c).is_err() {
                    pool.put(&mut c);
                    return Some(Finished::Failed);
                }
                match b.send(token, c, false) {
                    Submitted::Done(mut buf) => {
                        pool.put(&mut buf);
                        continue;
                    }
                    Submitted::Failed => return Some(Finished::Failed),
                    Submitted::Pending => {
                        self.cipher_in_flight = true;
                        return None;
                    }
                }
            }
            return match self.op.take() {
                None => Some(Finished::Nothing),
                Some(TlsOp::Bytes { buf, pos }) if pos == buf.len() => Some(Finished::Bytes(buf)),
                Some(TlsOp::File { mut chunk, pos }) if pos == chunk.len() => {
                    let n = chunk.len() as u64;
                    pool.put(&mut chunk);
                    Some(Finished::File(n))
                }
                Some(TlsOp::Close) => Some(Finished::Shut),
                Some(op) => {
                    self.op = Some(op);
                    if accepted == 0 {
                        // rustls took nothing and has nothing to send: it cannot go on.
                        return Some(Finished::Failed);
                    }
                    continue;
                }
            };
        }
    }
}

/// The kernel's cipher state for one direction: for AES-GCM rustls's 12-byte IV is the
/// 4-byte salt followed by the 8-byte explicit/initial nonce; ChaCha20 takes all 12 as IV.
fn kernel_crypto(
    version: Option<ProtocolVersion>,
    seq: u64,
    secrets: &ConnectionTrafficSecrets,
) -> Option<KtlsCrypto> {
    let version = match version? {
        ProtocolVersion::TLSv1_2 => libc::TLS_1_2_VERSION,
        ProtocolVersion::TLSv1_3 => libc::TLS_1_3_VERSION,
        _ => return None,
    };
    let rec_seq = seq.to_be_bytes();
    Some(match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
            let (salt, nonce) = iv.as_ref().split_at(4);
            KtlsCrypto::Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128 {
                info: libc::tls_crypto_info {
                    version,
                    cipher_type: libc::TLS_CIPHER_AES_GCM_128,
                },
                iv: nonce.try_into().ok()?,
                key: key.as_ref().try_into().ok()?,
                salt: salt.try_into().ok()?,
                rec_seq,
            })
        }
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
            let (salt, nonce) = iv.as_ref().split_at(4);
            KtlsCrypto::Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256 {
                info: libc::tls_crypto_info {
                    version,
                    cipher_type: libc::TLS_CIPHER_AES_GCM_256,
                },
                iv: nonce.try_into().ok()?,
                key: key.as_ref().try_into().ok()?,
                salt: salt.try_into().ok()?,
                rec_seq,
            })
        }
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            KtlsCrypto::Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305 {
                info: libc::tls_crypto_info {
                    version,
                    cipher_type: libc::TLS_CIPHER_CHACHA20_POLY1305,
                },
                iv: iv.as_ref().try_into().ok()?,
                key: key.as_ref().try_into().ok()?,
                salt: [],
                rec_seq,
            })
        }
        _ => return None,
    })
}

/// Tracks TLS record framing of the bytes read off the socket, so the hand-off to the
/// kernel happens only when rustls holds no partial record.
#[derive(Default)]
struct RecordBoundary {
    header: [u8; RECORD_HEADER],
    /// Header bytes seen of the next record (0 at a boundary or inside a body).
    have: usize,
    /// Body bytes of the current record still to come.
    left: usize,
}

impl RecordBoundary {
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.left > 0 {
                let k = self.left.min(data.len());
                self.left -= k;
                data = &data[k..];
                continue;
            }
            let k = (RECORD_HEADER - self.have).min(data.len());
            self.header[self.have..self.have + k].copy_from_slice(&data[..k]);
            self.have += k;
            data = &data[k..];
            if self.have == RECORD_HEADER {
                self.left = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.have = 0;
            }
        }
    }

    fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_boundaries_are_tracked_across_split_reads() {
        let mut r = RecordBoundary::default();
        assert!(r.at_boundary());
        // Two records: 3-byte body, then 2-byte body; fed in awkward pieces.
        let bytes = [23, 3, 3, 0, 3, 1, 2, 3, 23, 3, 3, 0, 2, 9, 9];
        r.feed(&bytes[..2]);
        assert!(!r.at_boundary());
        r.feed(&bytes[2..7]);
        assert!(!r.at_boundary());
        r.feed(&bytes[7..8]);
        assert!(r.at_boundary());
        r.feed(&bytes[8..14]);
        assert!(!r.at_boundary());
        r.feed(&bytes[14..]);
        assert!(r.at_boundary());
    }

    #[test]
    fn a_session_goes_to_the_kernel_only_with_a_cipher_it_takes() {
        use rustls::CipherSuite as C;
        let only_aes128 = KernelCiphers {
            aes_128_gcm: true,
            ..KernelCiphers::default()
        };
        let rows = [
            (C::TLS13_AES_128_GCM_SHA256, true),
            (C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true),
            (C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, true),
            (C::TLS13_AES_256_GCM_SHA384, false),
            (C::TLS13_CHACHA20_POLY1305_SHA256, false),
            (C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, false),
        ];
        for (suite, want) in rows {
            assert_eq!(only_aes128.takes(suite), want, "{suite:?}");
        }
        assert!(only_aes128.any());
        assert!(!KernelCiphers::default().any());
        assert!(!KernelCiphers::default().takes(C::TLS13_AES_128_GCM_SHA256));
    }

    #[test]
    fn gcm_iv_splits_into_salt_and_nonce() {
        let key = rustls::crypto::cipher::AeadKey::from([7u8; 32]);
        let iv = rustls::crypto::cipher::Iv::new([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let s = ConnectionTrafficSecrets::Aes256Gcm { key, iv };
        let Some(KtlsCrypto::Aes256Gcm(c)) = kernel_crypto(Some(ProtocolVersion::TLSv1_3), 5, &s)
        else {
            panic!("AES-256-GCM maps to the kernel's struct");
        };
        assert_eq!(c.salt, [1, 2, 3, 4]);
        assert_eq!(c.iv, [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(c.rec_seq, 5u64.to_be_bytes());
        assert_eq!(c.info.version, libc::TLS_1_3_VERSION);
    }
}
