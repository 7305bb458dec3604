//! HTTPS: the per-connection transport (plain TCP, user-space rustls, or kernel TLS after a
//! hand-off). The certificates and their reload are in `certs`, the rustls configuration
//! and the client's certificate in `handshake`.
//!
//! Owns every TLS byte; the connection state machine above sees only plaintext. A transport
//! carries one operation of the connection at a time (send these bytes, send this file
//! range, shut down) over the backend's owned-buffer operations, and reports it done once
//! its records are on their way.
//!
//! User space uses rustls's unbuffered API: an operation's plaintext is encrypted straight
//! into one send buffer (no copy through rustls's own buffers), so what a client that does
//! not read can pin is one operation's worth. Handing the session to the kernel happens only
//! with nothing buffered in either direction (the next byte on the socket starts a record),
//! so no byte is encrypted or decrypted twice or lost.
//!
//! After the hand-off rustls keeps the key schedule ([`KernelConnection`]): the kernel reads
//! records of other types (alerts, handshake messages) with their type, and this module
//! answers them — close_notify ends input; a TLS 1.3 KeyUpdate installs the next receive key
//! and, when the peer asks, sends ours and installs the next send key; the server also
//! updates its own key every [`TlsPolicy::key_update_bytes`]. A kernel that cannot take new
//! keys ([`KernelCiphers::rekey`]: Debian's 6.1 and 6.12 cannot, 7.3 can) cannot follow a
//! peer's key update: the connection answers what came before it and closes, and a used-up
//! send key closes it too.
#![forbid(unsafe_code)]

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::io::Errno;
pub(crate) use rustls::ServerConfig;
use rustls::kernel::KernelConnection;
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, InsufficientSizeError,
    UnbufferedStatus,
};
use rustls::{ConnectionTrafficSecrets, ProtocolVersion};

use super::backend::{Backend, Completion, Submitted, Token};
use super::transport::submitted;
pub(crate) use super::transport::{Finished, Input, Outcome};
use crate::pool::Pool;
use crate::sys::{KtlsCrypto, KtlsDirection};

pub use super::certs::{
    ALPN_H2, ALPN_HTTP11, CertSet, CertStore, NamedCert, TlsError, check_pair, named_certs,
};
pub(crate) use super::handshake::ClientVerifier;
pub use super::handshake::{
    ClientCa, ClientCert, Handshake, cipher_suite_names, seal_with, server_config,
    server_config_with_store, session_lifetime_ok,
};
pub use super::ticket_keys::{
    KeyFormatError, KeyRing, TICKET_KEY_BYTES, TICKET_KEY_BYTES_AES128, TicketKey, TicketKeys,
    ticket_key_size_ok,
};
/// Checks and loads the roots an HTTPS upstream is verified against (`tls_ca`, or the system's).
pub use super::upstream_tls::{load_upstream_roots, upstream_server_name_ok};

/// File bytes read (pread) and encrypted at once over user-space TLS: one full record.
pub const TLS_FILE_CHUNK: usize = 16 * 1024;
/// Where Linux lists the upper-layer protocols it can attach right now.
const AVAILABLE_ULP: &str = "/proc/sys/net/ipv4/tcp_available_ulp";

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
    /// The kernel takes new keys on a socket that already has them (TLS 1.3 KeyUpdate; newer
    /// than 6.12: Debian's 6.1 and 6.12 refuse, 7.3 takes them). Without it a TLS 1.3
    /// session cannot follow a key update in the kernel.
    pub rekey: bool,
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

/// The ciphers in words for the log (`AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, key
/// updates`; `none`), never the struct's Debug form.
impl std::fmt::Display for KernelCiphers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let named = [
            (self.aes_128_gcm, "AES-128-GCM"),
            (self.aes_256_gcm, "AES-256-GCM"),
            (self.chacha20_poly1305, "ChaCha20-Poly1305"),
            (self.rekey, "key updates"),
        ];
        let mut first = true;
        for (_, name) in named.iter().filter(|(on, _)| *on) {
            f.write_str(if first { "" } else { ", " })?;
            f.write_str(name)?;
            first = false;
        }
        if first {
            f.write_str("none")?;
        }
        Ok(())
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
    let rekey = std::cell::Cell::new(false);
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
            && {
                // A second TX key: refused (EBUSY) by kernels without key updates. (A second
                // RX key may be refused until a KeyUpdate has arrived, so it proves nothing.)
                if crate::sys::set_ktls_crypto(fd, KtlsDirection::Tx, &crypto).is_ok() {
                    rekey.set(true);
                }
                true
            }
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
        rekey: rekey.get(),
    }
}

/// What the TLS listeners do beyond the rustls configuration: which ciphers the kernel
/// takes (empty when kTLS is off or absent), and after how many bytes under one key the
/// sending key is updated.
#[derive(Clone, Copy, Debug)]
pub struct TlsPolicy {
    pub kernel: KernelCiphers,
    pub key_update_bytes: u64,
}

/// How a connection's bytes reach the socket.
pub(crate) enum Transport {
    /// Plain HTTP.
    Plain,
    /// TLS encrypted in user space by rustls.
    Tls(Box<TlsSession>),
    /// TLS encrypted by the kernel: the socket reads and writes plaintext, `sendfile` works;
    /// rustls still owns the key schedule (key updates) through its kernel connection.
    Kernel(Box<KernelSession>),
}

/// One rustls server session (the unbuffered API: records are encrypted straight into the
/// send buffer), the connection's operation it is carrying, and what the hand-off to the
/// kernel needs to know.
pub(crate) struct TlsSession {
    conn: UnbufferedServerConnection,
    /// Ciphertext received that rustls has not consumed yet (a partial record at most,
    /// between reads).
    incoming: Vec<u8>,
    /// TLS's own records (handshake, tickets, key updates, alerts) encoded and not yet handed
    /// to the backend; they go before any application data.
    pending: Vec<u8>,
    /// Hand the keys to the kernel once the handshake is done.
    offload: bool,
    policy: TlsPolicy,
    /// Application bytes encrypted under the current sending key.
    sent: u64,
    close_sent: bool,
    /// The peer's close_notify arrived.
    peer_closed: bool,
    /// The connection's operation being encrypted.
    op: Option<TlsOp>,
    /// A ciphertext send is with the backend.
    cipher_in_flight: bool,
    /// The client certificate the handshake verified (mTLS), read once it completed.
    client_cert: Option<Arc<ClientCert>>,
    /// No byte has arrived yet: the first ones may be plain HTTP ([`plain_http`]).
    fresh: bool,
}

enum TlsOp {
    Bytes { buf: Vec<u8>, done: bool },
    File { chunk: Vec<u8>, done: bool },
    Close,
}

/// A session whose records the kernel encrypts and decrypts (see the module doc).
pub(crate) struct KernelSession {
    conn: KernelConnection<ServerConnectionData>,
    version: ProtocolVersion,
    /// The kernel takes new keys on this socket (TLS 1.3 key updates can be followed).
    rekey: bool,
    key_update_bytes: u64,
    /// Bytes handed to the kernel under the current sending key.
    sent: u64,
    /// The peer asked for our key update: it goes out before our next byte.
    update_owed: bool,
    /// Key updates the peer has sent on this connection.
    peer_updates: u32,
    /// The client certificate the handshake verified (mTLS).
    client_cert: Option<Arc<ClientCert>>,
}

/// TLS content types (RFC 8446 §5.1) and the messages the kernel path handles itself.
const CONTENT_ALERT: u8 = 21;
const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_KEY_UPDATE: u8 = 24;
const ALERT_WARNING: u8 = 1;
const ALERT_FATAL: u8 = 2;
const ALERT_CLOSE_NOTIFY: u8 = 0;
const ALERT_UNEXPECTED_MESSAGE: u8 = 10;
const ALERT_DECODE_ERROR: u8 = 50;
/// Our KeyUpdate, as the kernel sends it (handshake header + `update_not_requested`).
const KEY_UPDATE_NOT_REQUESTED: [u8; 5] = [HANDSHAKE_KEY_UPDATE, 0, 0, 1, 0];
/// Most key updates a peer may send on one kernel-TLS connection; more is a flood (each costs
/// a key derivation and a setsockopt) and ends the connection.
pub const MAX_PEER_KEY_UPDATES: u32 = 256;
/// Default bytes sent under one key before the server updates it (TLS 1.3). AES-GCM's limit
/// (RFC 8446 §5.5) is 2^24.5 full records, about 380 GiB; this stays well under it even for
/// small records.
pub const TLS_KEY_UPDATE_BYTES: u64 = 32 << 30;
/// TLS 1.3 record overhead: header (5) + inner content type (1) + AEAD tag (16); TLS 1.2
/// AES-GCM adds an 8-byte explicit nonce instead of the type. Sized up for one encryption.
const RECORD_OVERHEAD: usize = 32;
/// The answer to plain HTTP on a TLS listener (nginx's words), sent unencrypted; the
/// connection closes after it.
const PLAIN_HTTP_ANSWER: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
    Content-Length: 46\r\nConnection: close\r\n\r\nThe plain HTTP request was sent to HTTPS port\n";

/// Whether a connection's first bytes are a plain HTTP request (a method's first letter)
/// rather than TLS: a record starts with its content type (20 to 24, RFC 8446 §5.1), an
/// SSLv2-style hello with a byte of 128 or more, never a letter.
fn plain_http(first: &[u8]) -> bool {
    first.first().is_some_and(u8::is_ascii_uppercase)
}

/// Most receive-buffer capacity a connection keeps once all its ciphertext is consumed.
const IDLE_INCOMING_CAPACITY: usize = 4096;
/// Largest plaintext in one record.
const MAX_FRAGMENT: usize = 16 * 1024;

impl Transport {
    /// A fresh server-side TLS session; handed to the kernel afterwards when it takes the
    /// negotiated cipher.
    pub(crate) fn tls(config: &Arc<ServerConfig>, policy: TlsPolicy) -> Result<Transport, String> {
        let conn = UnbufferedServerConnection::new(config.clone()).map_err(|e| e.to_string())?;
        Ok(Transport::Tls(Box::new(TlsSession {
            conn,
            incoming: Vec::new(),
            pending: Vec::new(),
            offload: policy.kernel.any(),
            policy,
            sent: 0,
            close_sent: false,
            peer_closed: false,
            op: None,
            cipher_in_flight: false,
            client_cert: None,
            fresh: true,
        })))
    }

    /// Once the handshake is done, reads the client certificate it verified (if the client
    /// sent one) so requests can name the client.
    pub(crate) fn identify(&mut self) {
        if let Transport::Tls(s) = self
            && s.client_cert.is_none()
            && let Some(leaf) = s.conn.peer_certificates().and_then(|c| c.first())
        {
            s.client_cert = ClientCert::from_der(leaf).map(Arc::new);
        }
    }

    /// The client certificate the handshake verified.
    #[inline]
    pub(crate) fn client_cert(&self) -> Option<Arc<ClientCert>> {
        match self {
            Transport::Plain => None,
            Transport::Tls(s) => s.client_cert.clone(),
            Transport::Kernel(k) => k.client_cert.clone(),
        }
    }

    /// For a TLS connection, whether its handshake completed; `None` for plain HTTP.
    pub(crate) fn handshake_done(&self) -> Option<bool> {
        match self {
            Transport::Plain => None,
            Transport::Tls(s) => Some(!s.conn.is_handshaking()),
            Transport::Kernel(_) => Some(true),
        }
    }

    /// Once the handshake is done: whether ALPN chose HTTP/2 (`None` while handshaking).
    pub(crate) fn negotiated_h2(&self) -> Option<bool> {
        match self {
            Transport::Plain => Some(false),
            Transport::Tls(s) if s.conn.is_handshaking() => None,
            Transport::Tls(s) => Some(s.conn.alpn_protocol() == Some(ALPN_H2)),
            Transport::Kernel(_) => Some(false),
        }
    }

    /// ALPN chose `acme-tls/1`: a CA's TLS-ALPN-01 validation, which ends with the
    /// handshake (RFC 8737 §3).
    pub(crate) fn negotiated_acme(&self) -> bool {
        match self {
            Transport::Tls(s) => s.conn.alpn_protocol() == Some(crate::acme::ACME_TLS_ALPN),
            _ => false,
        }
    }

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
            Transport::Plain => submitted(b.send(token, buf, more)),
            Transport::Kernel(k) => {
                if k.before_send(b, token, buf.len() as u64).is_err() {
                    return Outcome::Failed;
                }
                submitted(b.send(token, buf, more))
            }
            Transport::Tls(s) => {
                s.op = Some(TlsOp::Bytes { buf, done: false });
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
            Transport::Plain => submitted(b.sendfile(token, file, offset, len)),
            Transport::Kernel(k) => {
                if k.before_send(b, token, len).is_err() {
                    return Outcome::Failed;
                }
                submitted(b.sendfile(token, file, offset, len))
            }
            Transport::Tls(s) => {
                let mut chunk = pool.get_filled();
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
                    pool.put_filled(&mut chunk);
                    return Outcome::Failed;
                }
                chunk.truncate(n);
                s.op = Some(TlsOp::File { chunk, done: false });
                match s.pump(b, token, pool) {
                    None => Outcome::InFlight,
                    Some(Finished::File(n)) => Outcome::Done(n),
                    Some(_) => Outcome::Failed,
                }
            }
        }
    }

    /// Ends the write side: TLS sends close_notify first, then the socket is shut down.
    pub(crate) fn shutdown<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        pool: &mut Pool,
    ) -> Outcome<()> {
        match self {
            Transport::Tls(s) => {
                s.op = Some(TlsOp::Close);
                match s.pump(b, token, pool) {
                    None => return Outcome::InFlight,
                    Some(Finished::Shut) => {}
                    Some(_) => return Outcome::Failed,
                }
            }
            Transport::Kernel(_) => {
                // Best effort: with the socket's buffer full the alert is left out and the
                // peer sees a plain FIN after every byte it was owed.
                let _ = send_record(
                    b,
                    token,
                    CONTENT_ALERT,
                    &[ALERT_WARNING, ALERT_CLOSE_NOTIFY],
                );
            }
            Transport::Plain => {}
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
                pool.put_filled(&mut buf);
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
            Transport::Tls(s) => {
                if s.fresh {
                    s.fresh = false;
                    if plain_http(data) {
                        // Answered in plain text, as nginx does, in place of rustls's alert
                        // (which a browser or curl shows as an opaque error); then closed.
                        s.pending.extend_from_slice(PLAIN_HTTP_ANSWER);
                        return Err(());
                    }
                }
                s.incoming.extend_from_slice(data);
                s.process(plain)
            }
            _ => {
                plain.extend_from_slice(data);
                Ok(Input::More)
            }
        }
    }

    /// A record other than application data arrived on a kernel-TLS socket (an alert or a
    /// handshake message, already decrypted). `Err`: the connection must close (an alert
    /// has been sent where one is owed).
    pub(crate) fn record<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        kind: u8,
        data: &[u8],
    ) -> Result<Input, ()> {
        let Transport::Kernel(k) = self else {
            return Err(());
        };
        match (kind, data) {
            (CONTENT_ALERT, [_, ALERT_CLOSE_NOTIFY]) => Ok(Input::End),
            (CONTENT_ALERT, [level, what]) => {
                tracing::debug!(level, alert = what, "TLS alert from the peer; closing");
                Err(())
            }
            (CONTENT_HANDSHAKE, msgs) => k.handshake(b, token, msgs),
            _ => {
                let _ = send_record(
                    b,
                    token,
                    CONTENT_ALERT,
                    &[ALERT_FATAL, ALERT_UNEXPECTED_MESSAGE],
                );
                Err(())
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
            && let Some(Finished::Failed) = s.pump(b, token, pool)
        {
            return Err(());
        }
        if s.ready_for_kernel() {
            self.offload(b, token)?;
        }
        Ok(())
    }

    /// Hands the session to the kernel. Attaching the ULP comes first: if the kernel refuses
    /// it the session simply stays in user space. Once rustls has given up the keys the
    /// session cannot come back, so a refusal after that closes the connection (the cipher
    /// probe at start makes that a kernel that changed its mind, not a normal case).
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
        let Transport::Tls(s) = std::mem::replace(self, Transport::Plain) else {
            return Ok(());
        };
        let policy = s.policy;
        let sent = s.sent;
        let client_cert = s.client_cert.clone();
        let (secrets, conn) = s.conn.dangerous_into_kernel_connection().map_err(|e| {
            tracing::debug!(error = %e, "TLS session not extractable");
        })?;
        let version = conn.protocol_version();
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
        b.read_records(token);
        *self = Transport::Kernel(Box::new(KernelSession {
            conn,
            version,
            rekey: policy.kernel.rekey,
            key_update_bytes: policy.key_update_bytes,
            sent,
            update_owed: false,
            peer_updates: 0,
            client_cert,
        }));
        Ok(())
    }
}

/// Sends one whole control record through the kernel's TLS: `Ok(true)` sent, `Ok(false)`
/// the socket's buffer is full (nothing sent; try again when it drains), `Err` broken.
fn send_record<B: Backend>(b: &mut B, token: Token, kind: u8, data: &[u8]) -> Result<bool, ()> {
    let fd = b.fd(token).ok_or(())?;
    match crate::sys::send_tls_record(fd, kind, data) {
        Ok(n) if n == data.len() => Ok(true),
        Ok(_) => Err(()),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => {
            tracing::debug!(error = %e, kind, "kTLS control record not sent");
            Err(())
        }
    }
}

impl KernelSession {
    /// Before `len` more bytes go to the kernel: our key update when the peer asked for one
    /// or the current key has carried its share. Where the kernel cannot take a new key (or
    /// the version has no key update) the connection ends at the limit instead.
    #[inline(always)]
    fn before_send<B: Backend>(&mut self, b: &mut B, token: Token, len: u64) -> Result<(), ()> {
        if self.update_owed || self.sent >= self.key_update_bytes {
            self.key_used_up(b, token)?;
        }
        self.sent += len;
        Ok(())
    }

    /// A socket whose buffer is full cannot take the KeyUpdate now: our own periodic update
    /// then waits for the next send (the key carries a little more, far inside its limits);
    /// an update the peer asked for must precede our next data (RFC 8446 §4.6.3), so there
    /// the connection ends instead.
    #[cold]
    #[inline(never)]
    fn key_used_up<B: Backend>(&mut self, b: &mut B, token: Token) -> Result<(), ()> {
        if !self.rekey || self.version != ProtocolVersion::TLSv1_3 {
            tracing::debug!("sending key used up and the kernel cannot take a new one; closing");
            return Err(());
        }
        match self.update_tx(b, token)? {
            true => Ok(()),
            false if self.update_owed => {
                tracing::debug!("socket full when a KeyUpdate was owed; closing");
                Err(())
            }
            false => Ok(()),
        }
    }

    /// Our KeyUpdate goes out under the old key, then the kernel gets the new one; `false`
    /// when the socket had no room for it (nothing changed).
    fn update_tx<B: Backend>(&mut self, b: &mut B, token: Token) -> Result<bool, ()> {
        if !send_record(b, token, CONTENT_HANDSHAKE, &KEY_UPDATE_NOT_REQUESTED)? {
            return Ok(false);
        }
        let (seq, secrets) = self.conn.update_tx_secret().map_err(|_| ())?;
        let crypto = kernel_crypto(self.version, seq, &secrets).ok_or(())?;
        let fd = b.fd(token).ok_or(())?;
        crate::sys::set_ktls_crypto(fd, KtlsDirection::Tx, &crypto).map_err(|e| {
            tracing::debug!(error = %e, "kTLS sending key update refused; closing");
        })?;
        self.sent = 0;
        self.update_owed = false;
        Ok(true)
    }

    /// Handshake messages after the hand-off: only TLS 1.3 KeyUpdate is allowed from a
    /// client (RFC 8446 §4.6.3); anything else is an unexpected message.
    fn handshake<B: Backend>(
        &mut self,
        b: &mut B,
        token: Token,
        mut msgs: &[u8],
    ) -> Result<Input, ()> {
        let alert = |b: &mut B, what: u8| {
            let _ = send_record(b, token, CONTENT_ALERT, &[ALERT_FATAL, what]);
            Err(())
        };
        while !msgs.is_empty() {
            let [kind, l0, l1, l2, rest @ ..] = msgs else {
                return alert(b, ALERT_DECODE_ERROR);
            };
            let len = u32::from_be_bytes([0, *l0, *l1, *l2]) as usize;
            if rest.len() < len {
                return alert(b, ALERT_DECODE_ERROR);
            }
            let (body, tail) = rest.split_at(len);
            msgs = tail;
            match (*kind, body) {
                (HANDSHAKE_KEY_UPDATE, [request @ (0 | 1)])
                    if self.version == ProtocolVersion::TLSv1_3 =>
                {
                    self.peer_updates += 1;
                    if self.peer_updates > MAX_PEER_KEY_UPDATES {
                        tracing::debug!("too many key updates from the peer; closing");
                        return alert(b, ALERT_UNEXPECTED_MESSAGE);
                    }
                    if !self.rekey {
                        // The kernel would fail every record under the peer's new key: read no
                        // more, answer what came before, then close.
                        tracing::debug!("peer key update the kernel cannot follow; ending input");
                        return Ok(Input::End);
                    }
                    let (seq, secrets) = self.conn.update_rx_secret().map_err(|_| ())?;
                    let crypto = kernel_crypto(self.version, seq, &secrets).ok_or(())?;
                    let fd = b.fd(token).ok_or(())?;
                    crate::sys::set_ktls_crypto(fd, KtlsDirection::Rx, &crypto).map_err(|e| {
                        tracing::debug!(error = %e, "kTLS receiving key update refused; closing");
                    })?;
                    if *request == 1 {
                        self.update_owed = true;
                    }
                }
                (HANDSHAKE_KEY_UPDATE, _) if self.version == ProtocolVersion::TLSv1_3 => {
                    return alert(b, ALERT_DECODE_ERROR);
                }
                _ => return alert(b, ALERT_UNEXPECTED_MESSAGE),
            }
        }
        Ok(Input::More)
    }
}

impl TlsSession {
    /// Handshake done, all records out, all ciphertext consumed (so the socket's next byte
    /// starts a record), no operation under way: nothing would be lost by moving the session
    /// to the kernel.
    fn ready_for_kernel(&self) -> bool {
        self.offload
            && !self.close_sent
            && !self.peer_closed
            && self.op.is_none()
            && !self.cipher_in_flight
            && self.pending.is_empty()
            && self.incoming.is_empty()
            && !self.conn.is_handshaking()
            && self
                .conn
                .negotiated_cipher_suite()
                .is_some_and(|s| self.policy.kernel.takes(s.suite()))
    }

    /// Runs rustls over the ciphertext received: plaintext to `plain`, TLS's own records to
    /// `pending`.
    fn process(&mut self, plain: &mut Vec<u8>) -> Result<Input, ()> {
        loop {
            let UnbufferedStatus { discard, state } =
                self.conn.process_tls_records(&mut self.incoming);
            let step = match state {
                Err(e) => {
                    // rustls queued the matching alert: the caller flushes it, then closes.
                    tracing::debug!(error = %e, "TLS error; closing");
                    Step::Fail
                }
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    let mut step = Step::Again;
                    while let Some(rec) = r.next_record() {
                        match rec {
                            Ok(rec) => plain.extend_from_slice(rec.payload),
                            Err(_) => step = Step::Fail,
                        }
                    }
                    step
                }
                Ok(ConnectionState::EncodeTlsData(mut e)) => encode(&mut self.pending, &mut e),
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    // Ours now: `pending` goes out before any application data.
                    t.done();
                    Step::Again
                }
                Ok(ConnectionState::BlockedHandshake | ConnectionState::WriteTraffic(_)) => {
                    Step::More
                }
                Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                    self.peer_closed = true;
                    Step::End
                }
                Ok(_) => Step::Fail,
            };
            self.incoming.drain(..discard);
            if self.incoming.is_empty() && self.incoming.capacity() > IDLE_INCOMING_CAPACITY {
                // The handshake's flight is through: an idle connection keeps no big buffer.
                self.incoming = Vec::new();
            }
            match step {
                Step::Again => {}
                Step::More => return Ok(Input::More),
                Step::End => return Ok(Input::End),
                Step::Fail => {
                    // Whatever alert rustls queued is encoded for the flush.
                    self.drain_alerts();
                    return Err(());
                }
            }
        }
    }

    /// After a TLS error: the alert rustls queued, into `pending`.
    fn drain_alerts(&mut self) {
        for _ in 0..4 {
            let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
            match state {
                Ok(ConnectionState::EncodeTlsData(mut e)) => {
                    if encode(&mut self.pending, &mut e) == Step::Fail {
                        return;
                    }
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    t.done();
                    return;
                }
                _ => return,
            }
        }
    }

    /// Moves the operation on: TLS's own records first, then the operation's plaintext
    /// encrypted into one send buffer. `None` while a ciphertext send is in flight;
    /// otherwise what finished.
    fn pump<B: Backend>(&mut self, b: &mut B, token: Token, pool: &mut Pool) -> Option<Finished> {
        loop {
            if self.cipher_in_flight {
                return None;
            }
            if !self.pending.is_empty() {
                // The records' own buffer goes out (and to the pool afterwards); an idle
                // connection keeps no capacity here.
                let c = std::mem::take(&mut self.pending);
                match b.send(token, c, false) {
                    Submitted::Done(mut buf) => {
                        pool.put_filled(&mut buf);
                        continue;
                    }
                    Submitted::Failed => return Some(Finished::Failed),
                    Submitted::Pending => {
                        self.cipher_in_flight = true;
                        return None;
                    }
                }
            }
            let work = match &self.op {
                Some(TlsOp::Bytes { buf, done: false })
                | Some(TlsOp::File {
                    chunk: buf,
                    done: false,
                }) => Some(buf.len()),
                Some(TlsOp::Close) if !self.close_sent => Some(0),
                _ => None,
            };
            if let Some(len) = work {
                match self.encrypt_op(len, pool) {
                    Ok(Some(c)) => match b.send(token, c, false) {
                        Submitted::Done(mut buf) => {
                            pool.put_filled(&mut buf);
                            continue;
                        }
                        Submitted::Failed => return Some(Finished::Failed),
                        Submitted::Pending => {
                            self.cipher_in_flight = true;
                            return None;
                        }
                    },
                    Ok(None) => continue, // TLS's own records came first
                    Err(()) => return Some(Finished::Failed),
                }
            }
            return match self.op.take() {
                None => Some(Finished::Nothing),
                Some(TlsOp::Bytes { buf, .. }) => Some(Finished::Bytes(buf)),
                Some(TlsOp::File { mut chunk, .. }) => {
                    let n = chunk.len() as u64;
                    pool.put_filled(&mut chunk);
                    Some(Finished::File(n))
                }
                Some(TlsOp::Close) => Some(Finished::Shut),
            };
        }
    }

    /// Encrypts the operation (its `len` plaintext bytes, or close_notify) into a buffer
    /// from the pool. `Ok(None)`: rustls had records of its own to send first (now in
    /// `pending`), or a key update was started; call again.
    fn encrypt_op(&mut self, len: usize, pool: &mut Pool) -> Result<Option<Vec<u8>>, ()> {
        let update_due = len > 0
            && self.sent >= self.policy.key_update_bytes
            && self.conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
        let UnbufferedStatus { state, .. } = self.conn.process_tls_records(&mut []);
        let mut w = match state {
            Ok(ConnectionState::WriteTraffic(w)) => w,
            Ok(ConnectionState::EncodeTlsData(mut e)) => {
                return match encode(&mut self.pending, &mut e) {
                    Step::Fail => Err(()),
                    _ => Ok(None),
                };
            }
            Ok(ConnectionState::TransmitTlsData(t)) => {
                t.done();
                return Ok(None);
            }
            Ok(ConnectionState::PeerClosed) => {
                self.peer_closed = true;
                return Ok(None);
            }
            // Application data before the handshake finished, after close, or plaintext
            // received but not taken: none of these can happen in the order the driver
            // calls; refuse rather than guess.
            _ => return Err(()),
        };
        if update_due {
            self.sent = 0;
            return w.refresh_traffic_keys().map(|()| None).map_err(|_| ());
        }
        let mut c = pool.get_filled();
        c.resize(len + len.div_ceil(MAX_FRAGMENT).max(1) * RECORD_OVERHEAD, 0);
        let result = match &self.op {
            Some(TlsOp::Bytes { buf, .. }) | Some(TlsOp::File { chunk: buf, .. }) => loop {
                match w.encrypt(buf, &mut c) {
                    Err(EncryptError::InsufficientSize(InsufficientSizeError {
                        required_size,
                    })) => {
                        c.resize(required_size, 0);
                    }
                    r => break r,
                }
            },
            _ => loop {
                match w.queue_close_notify(&mut c) {
                    Err(EncryptError::InsufficientSize(InsufficientSizeError {
                        required_size,
                    })) => {
                        c.resize(required_size, 0);
                    }
                    r => break r,
                }
            },
        };
        let Ok(n) = result else {
            pool.put_filled(&mut c);
            return Err(());
        };
        c.truncate(n);
        match &mut self.op {
            Some(TlsOp::Bytes { done, .. }) | Some(TlsOp::File { done, .. }) => {
                *done = true;
                self.sent += len as u64;
            }
            _ => self.close_sent = true,
        }
        Ok(Some(c))
    }
}

/// What one step of [`TlsSession::process`] asks for next.
#[derive(PartialEq, Eq)]
enum Step {
    Again,
    More,
    End,
    Fail,
}

/// Appends one of rustls's own records to `pending`.
fn encode(pending: &mut Vec<u8>, e: &mut EncodeTlsData<'_, ServerConnectionData>) -> Step {
    let at = pending.len();
    let need = match e.encode(&mut []) {
        Ok(_) => return Step::Again,
        Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
            required_size
        }
        Err(EncodeError::AlreadyEncoded) => return Step::Fail,
    };
    pending.resize(at + need, 0);
    match e.encode(&mut pending[at..]) {
        Ok(n) => {
            pending.truncate(at + n);
            Step::Again
        }
        Err(_) => {
            pending.truncate(at);
            Step::Fail
        }
    }
}

/// The kernel's cipher state for one direction: for AES-GCM rustls's 12-byte IV is the
/// 4-byte salt followed by the 8-byte explicit/initial nonce; ChaCha20 takes all 12 as IV.
fn kernel_crypto(
    version: ProtocolVersion,
    seq: u64,
    secrets: &ConnectionTrafficSecrets,
) -> Option<KtlsCrypto> {
    let version = match version {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The start-up line once read `ciphers=KernelCiphers { aes_128_gcm: false, … }`.
    #[test]
    fn kernel_ciphers_read_as_words_in_the_log() {
        let all = KernelCiphers {
            aes_128_gcm: true,
            aes_256_gcm: true,
            chacha20_poly1305: true,
            rekey: true,
        };
        let aes = KernelCiphers {
            aes_256_gcm: true,
            ..KernelCiphers::default()
        };
        assert_eq!(
            all.to_string(),
            "AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, key updates"
        );
        assert_eq!(aes.to_string(), "AES-256-GCM");
        assert_eq!(KernelCiphers::default().to_string(), "none");
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

    /// Plain HTTP to a TLS port once got a raw TLS alert.
    #[test]
    fn plain_http_is_told_from_tls_by_its_first_byte() {
        let rows: &[(&[u8], bool)] = &[
            (b"GET / HTTP/1.1\r\n", true),
            (b"POST", true),
            (b"P", true),
            // RFC 9113 §3.3: prior knowledge's preface is plain text too.
            (b"PRI * HTTP/2.0\r\n", true),
            // RFC 8446 §5.1: a handshake record (a ClientHello, ACME's TLS-ALPN-01 too).
            (b"\x16\x03\x01\x02\x00", false),
            (b"\x15\x03\x03", false),
            // An SSLv2-style ClientHello.
            (b"\x80\x2e\x01", false),
            (b"", false),
            (b"get / HTTP/1.1", false),
        ];
        for (first, want) in rows {
            assert_eq!(plain_http(first), *want, "{first:?}");
        }
        let body = PLAIN_HTTP_ANSWER
            .split(|&b| b == b'\n')
            .next_back()
            .unwrap();
        assert!(body.is_empty(), "the answer ends with its body's newline");
        let at = PLAIN_HTTP_ANSWER
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap();
        assert_eq!(PLAIN_HTTP_ANSWER.len() - at - 4, 46, "Content-Length");
    }

    #[test]
    fn gcm_iv_splits_into_salt_and_nonce() {
        let key = rustls::crypto::cipher::AeadKey::from([7u8; 32]);
        let iv = rustls::crypto::cipher::Iv::new([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        let s = ConnectionTrafficSecrets::Aes256Gcm { key, iv };
        let Some(KtlsCrypto::Aes256Gcm(c)) = kernel_crypto(ProtocolVersion::TLSv1_3, 5, &s) else {
            panic!("AES-256-GCM maps to the kernel's struct");
        };
        assert_eq!(c.salt, [1, 2, 3, 4]);
        assert_eq!(c.iv, [5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(c.rec_seq, 5u64.to_be_bytes());
        assert_eq!(c.info.version, libc::TLS_1_3_VERSION);
    }
}
