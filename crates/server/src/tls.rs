//! HTTPS: loading the certificate and key, the rustls configuration, and the per-connection
//! transport (plain TCP, user-space rustls, or kernel TLS after a hand-off).
//!
//! Owns every TLS byte; the connection state machine above sees only plaintext through
//! `recv`/`send`/`send_file`. Invariant: plaintext accepted by `send` is never dropped —
//! rustls buffers at most [`TLS_BUFFER_LIMIT`] of it, and `wants_write` stays true until the
//! records are on the socket, so a client that does not read cannot grow the buffer.
//! Handing keys to the kernel happens only at a record boundary with nothing buffered in
//! either direction, so no byte is encrypted or decrypted twice or lost.
#![forbid(unsafe_code)]

use std::fmt;
use std::io::{self, BufRead, IoSlice, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;

use rustix::buffer::spare_capacity;
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ConnectionTrafficSecrets, ProtocolVersion, ServerConfig, ServerConnection};

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

/// How a connection's bytes reach the socket.
pub(crate) enum Transport {
    /// Plain HTTP.
    Plain,
    /// TLS encrypted in user space by rustls.
    Tls(Box<TlsSession>),
    /// TLS encrypted by the kernel: the socket reads and writes plaintext, `sendfile` works.
    Kernel,
}

/// One rustls server session and what the hand-off to the kernel needs to know.
pub(crate) struct TlsSession {
    conn: ServerConnection,
    /// Hand the keys to the kernel once the handshake is done.
    offload: bool,
    records: RecordBoundary,
    close_sent: bool,
}

impl Transport {
    /// A fresh server-side TLS session; `offload` when the kernel takes the keys afterwards.
    pub(crate) fn tls(config: &Arc<ServerConfig>, offload: bool) -> Result<Transport, String> {
        let mut conn = ServerConnection::new(config.clone()).map_err(|e| e.to_string())?;
        conn.set_buffer_limit(Some(TLS_BUFFER_LIMIT));
        Ok(Transport::Tls(Box::new(TlsSession {
            conn,
            offload,
            records: RecordBoundary::default(),
            close_sent: false,
        })))
    }

    /// Appends received plaintext to `buf` (up to its spare capacity); `Ok(0)` at the end of
    /// input, `Err(AGAIN)` when nothing is available yet (e.g. mid-handshake).
    pub(crate) fn recv(&mut self, sock: &OwnedFd, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        if let Transport::Tls(s) = self
            && s.ready_for_kernel()
        {
            self.offload(sock)?;
        }
        match self {
            Transport::Plain | Transport::Kernel => {
                rustix::net::recv(sock, spare_capacity(buf), RecvFlags::empty()).map(|(n, _)| n)
            }
            Transport::Tls(s) => s.recv(sock, buf),
        }
    }

    /// Sends (or, over TLS, encrypts and queues) a prefix of `data`; returns its length.
    pub(crate) fn send(
        &mut self,
        sock: &OwnedFd,
        data: &[u8],
        flags: SendFlags,
    ) -> Result<usize, ()> {
        match self {
            Transport::Plain | Transport::Kernel => send_some(sock, data, flags),
            Transport::Tls(s) => s.send(sock, data),
        }
    }

    /// Pushes queued TLS records to the socket; `Ok(true)` once none is left.
    pub(crate) fn flush(&mut self, sock: &OwnedFd) -> Result<bool, ()> {
        match self {
            Transport::Tls(s) => s.write_out(sock),
            _ => Ok(true),
        }
    }

    /// Encrypted output is waiting for the socket.
    pub(crate) fn wants_write(&self) -> bool {
        matches!(self, Transport::Tls(s) if s.conn.wants_write())
    }

    /// The TLS handshake has not finished.
    pub(crate) fn handshaking(&self) -> bool {
        matches!(self, Transport::Tls(s) if s.conn.is_handshaking())
    }

    /// rustls holds decrypted input that no socket event will announce.
    pub(crate) fn has_buffered_input(&mut self) -> bool {
        match self {
            Transport::Tls(s) => s.conn.reader().fill_buf().is_ok_and(|b| !b.is_empty()),
            _ => false,
        }
    }

    /// Queues `close_notify` (once) and pushes it out; `Ok(true)` once sent. Over kTLS no
    /// alert is sent (it needs a control message); HTTP framing still marks every end.
    pub(crate) fn close_notify(&mut self, sock: &OwnedFd) -> Result<bool, ()> {
        match self {
            Transport::Tls(s) => {
                if !s.close_sent {
                    s.conn.send_close_notify();
                    s.close_sent = true;
                }
                s.write_out(sock)
            }
            _ => Ok(true),
        }
    }

    /// Sends file bytes over user-space TLS (pread, encrypt) from `offset + *sent` up to
    /// `len`, at most `budget` bytes this call; `Ok(true)` when all are queued. `None` when
    /// this transport sends files with `sendfile` instead.
    pub(crate) fn send_file(
        &mut self,
        sock: &OwnedFd,
        file: &OwnedFd,
        (offset, len): (u64, u64),
        sent: &mut u64,
        budget: u64,
        pool: &mut Pool,
    ) -> Option<Result<bool, ()>> {
        let Transport::Tls(s) = self else {
            return None;
        };
        let mut chunk = pool.get();
        let done = s.send_file(sock, file, (offset, len), sent, budget, &mut chunk);
        pool.put(&mut chunk);
        Some(done)
    }

    /// Hands the session keys to the kernel. Attaching the ULP comes first: if the kernel
    /// refuses it the session simply stays in user space. Once the keys are extracted the
    /// rustls session is gone, so a failure after that closes the connection.
    fn offload(&mut self, sock: &OwnedFd) -> Result<(), Errno> {
        if let Err(e) = crate::sys::set_tls_ulp(sock.as_fd()) {
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
            Errno::PROTO
        })?;
        let (Some(tx), Some(rx)) = (
            kernel_crypto(version, secrets.tx.0, &secrets.tx.1),
            kernel_crypto(version, secrets.rx.0, &secrets.rx.1),
        ) else {
            return Err(Errno::PROTO);
        };
        for (dir, crypto) in [(KtlsDirection::Tx, &tx), (KtlsDirection::Rx, &rx)] {
            crate::sys::set_ktls_crypto(sock.as_fd(), dir, crypto).map_err(|e| {
                tracing::debug!(error = %e, "kTLS key setup failed; closing");
                Errno::PROTO
            })?;
        }
        Ok(())
    }
}

impl TlsSession {
    /// Handshake done, all records out, all plaintext taken, and the input stopped at a
    /// record boundary: nothing would be lost by moving the session to the kernel.
    fn ready_for_kernel(&mut self) -> bool {
        self.offload
            && !self.close_sent
            && !self.conn.is_handshaking()
            && !self.conn.wants_write()
            && self.records.at_boundary()
            && kernel_cipher(&self.conn)
            && matches!(self.conn.reader().fill_buf(), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    fn recv(&mut self, sock: &OwnedFd, buf: &mut Vec<u8>) -> Result<usize, Errno> {
        let start = buf.len();
        loop {
            // Plaintext already decrypted goes first, as much as fits.
            loop {
                let room = buf.capacity() - buf.len();
                if room == 0 {
                    return Ok(buf.len() - start);
                }
                let mut reader = self.conn.reader();
                match reader.fill_buf() {
                    Ok([]) => return Ok(buf.len() - start), // close_notify: end of input
                    Ok(chunk) => {
                        let k = chunk.len().min(room);
                        buf.extend_from_slice(&chunk[..k]);
                        reader.consume(k);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // TCP EOF without close_notify: HTTP framing tells whether a request was
                    // cut short, so treat it as the end of input.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        return Ok(buf.len() - start);
                    }
                    Err(_) => return Err(Errno::IO),
                }
            }
            let mut rd = SockRead {
                sock,
                records: &mut self.records,
            };
            match self.conn.read_tls(&mut rd) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let got = buf.len() - start;
                    return if got > 0 { Ok(got) } else { Err(Errno::AGAIN) };
                }
                Err(_) => return Err(Errno::IO),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // rustls queued the matching alert: try to send it, then close.
                tracing::debug!(error = %e, "TLS error; closing");
                let _ = self.write_out(sock);
                return Err(Errno::PROTO);
            }
        }
    }

    fn send(&mut self, sock: &OwnedFd, data: &[u8]) -> Result<usize, ()> {
        if !self.write_out(sock)? {
            return Ok(0);
        }
        let n = self.conn.writer().write(data).map_err(|_| ())?;
        self.write_out(sock)?;
        Ok(n)
    }

    fn send_file(
        &mut self,
        sock: &OwnedFd,
        file: &OwnedFd,
        (offset, len): (u64, u64),
        sent: &mut u64,
        mut budget: u64,
        chunk: &mut Vec<u8>,
    ) -> Result<bool, ()> {
        while *sent < len {
            // Read more of the file only once the previous records are on the socket.
            if !self.write_out(sock)? || budget == 0 {
                return Ok(false);
            }
            let want = (len - *sent).min(TLS_FILE_CHUNK as u64) as usize;
            chunk.clear();
            chunk.resize(want, 0);
            let n = match rustix::io::pread(file, &mut chunk[..], offset + *sent) {
                // The file shrank: the promised Content-Length can no longer be met.
                Ok(0) => return Err(()),
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(_) => return Err(()),
            };
            let k = self.conn.writer().write(&chunk[..n]).map_err(|_| ())?;
            *sent += k as u64;
            budget = budget.saturating_sub(k as u64);
        }
        self.write_out(sock)?;
        Ok(true)
    }

    /// Writes queued records until none is left (`Ok(true)`) or the socket is full.
    fn write_out(&mut self, sock: &OwnedFd) -> Result<bool, ()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut SockWrite(sock)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => return Err(()),
            }
        }
        Ok(true)
    }
}

/// Whether the negotiated suite is one the kernel takes (all of rustls's default suites are).
fn kernel_cipher(conn: &ServerConnection) -> bool {
    use rustls::CipherSuite as C;
    matches!(
        conn.negotiated_cipher_suite().map(|s| s.suite()),
        Some(
            C::TLS13_AES_128_GCM_SHA256
                | C::TLS13_AES_256_GCM_SHA384
                | C::TLS13_CHACHA20_POLY1305_SHA256
                | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
                | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
                | C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
                | C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        )
    )
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

/// `Read` over a nonblocking socket for rustls, noting record boundaries as bytes pass.
struct SockRead<'a> {
    sock: &'a OwnedFd,
    records: &'a mut RecordBoundary,
}

impl Read for SockRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (n, _) = rustix::net::recv(self.sock, &mut *buf, RecvFlags::empty())?;
        self.records.feed(&buf[..n]);
        Ok(n)
    }
}

/// `Write` over a nonblocking socket for rustls: vectored (one syscall for many records)
/// and MSG_NOSIGNAL (a closed peer is an error, not SIGPIPE).
struct SockWrite<'a>(&'a OwnedFd);

impl Write for SockWrite<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(self.0, buf, SendFlags::NOSIGNAL)?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Ok(rustix::net::sendmsg(
            self.0,
            bufs,
            &mut SendAncillaryBuffer::default(),
            SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Sends as much of `data` as the socket takes; `Err` on a broken connection.
pub(crate) fn send_some(sock: &OwnedFd, data: &[u8], flags: SendFlags) -> Result<usize, ()> {
    loop {
        match rustix::net::send(sock, data, flags) {
            Ok(n) => return Ok(n),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(0),
            Err(_) => return Err(()),
        }
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
