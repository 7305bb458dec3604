//! HttpArena's TLS posture, checked on one TLS port: the mounted certificate is the one
//! served, a client offering TLS 1.3 gets it (with one of its AEAD suites), ALPN never names a
//! protocol the client did not offer, and the server refuses obsolete protocols (SSL 3.0,
//! TLS 1.0, 1.1) and weak TLS 1.2 suites (NULL, anonymous, EXPORT, RC4, DES, 3DES).
//!
//! rustls cannot offer what must be refused, so those probes write their own ClientHello
//! (RFC 5246 §7.4.1.2) and read only the first record back: a ServerHello is acceptance, an
//! alert or a close refusal. No handshake is ever completed with the weak parameters.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::checks::Outcome;
use super::wire::{self, IO_TIMEOUT, Stream};

/// TLS 1.2 suites no server should agree to, by family (IANA numbers, RFC 5246 Appendix A.5,
/// RFC 4346, RFC 2246, RFC 4492).
const WEAK_SUITES: &[(&str, &[u16])] = &[
    ("NULL", &[0x0001, 0x0002, 0x003b, 0xc006, 0xc010]),
    (
        "anonymous",
        &[
            0x0018, 0x001b, 0x0034, 0x003a, 0x006c, 0x006d, 0xc018, 0xc019,
        ],
    ),
    ("EXPORT", &[0x0003, 0x0006, 0x0008, 0x000e, 0x0011, 0x0014]),
    ("RC4", &[0x0004, 0x0005, 0xc007, 0xc011]),
    ("DES", &[0x0009, 0x000c, 0x000f, 0x0012, 0x0015]),
    (
        "3DES",
        &[0x000a, 0x000d, 0x0010, 0x0013, 0x0016, 0xc008, 0xc012],
    ),
];
/// Ordinary suites offered by the obsolete-protocol probes (CBC with RSA and ECDHE), so a
/// refusal is about the protocol version, not a cipher the server lacks.
const OLD_PROTOCOL_SUITES: &[u16] = &[0xc013, 0xc014, 0x002f, 0x0035, 0xc009, 0xc00a];
/// The obsolete protocols, by record-layer version.
const OLD_PROTOCOLS: &[(&str, u16)] = &[
    ("SSL 3.0", 0x0300),
    ("TLS 1.0", 0x0301),
    ("TLS 1.1", 0x0302),
];

/// The checks of one TLS port; `cert` is the certificate the server was given (PEM), if known.
pub fn check(addr: SocketAddr, alpn: &[u8], cert: Option<&Path>) -> Vec<(String, Outcome)> {
    let mut out = Vec::new();
    let label = String::from_utf8_lossy(alpn).into_owned();
    match wire::connect(addr, Some(alpn)) {
        Err(why) => out.push(("TLS handshake".into(), Outcome::Fail(why))),
        Ok(Stream::Plain(_)) => unreachable!("connect with ALPN is TLS"),
        Ok(Stream::Tls(s)) => {
            let conn = &s.conn;
            if let Some(path) = cert {
                let served = conn
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .map(|c| c.as_ref().to_vec());
                let mounted = CertificateDer::pem_file_iter(path)
                    .ok()
                    .and_then(|mut i| i.next())
                    .and_then(Result::ok)
                    .map(|c| c.as_ref().to_vec());
                out.push((
                    "serves the mounted certificate".into(),
                    match (served, mounted) {
                        (_, None) => Outcome::Fail(format!("cannot read {}", path.display())),
                        (Some(s), Some(m)) if s == m => Outcome::Pass,
                        _ => Outcome::Fail(format!(
                            "the certificate served is not {}",
                            path.display()
                        )),
                    },
                ));
            }
            let version = conn.protocol_version();
            let suite = conn
                .negotiated_cipher_suite()
                .map(|s| format!("{:?}", s.suite()));
            out.push((
                "negotiates TLS 1.3 with an AEAD suite".into(),
                match (version, &suite) {
                    (Some(rustls::ProtocolVersion::TLSv1_3), Some(s))
                        if [
                            "TLS13_AES_128_GCM_SHA256",
                            "TLS13_AES_256_GCM_SHA384",
                            "TLS13_CHACHA20_POLY1305_SHA256",
                        ]
                        .contains(&s.as_str()) =>
                    {
                        Outcome::Pass
                    }
                    _ => Outcome::Fail(format!(
                        "settled on {version:?} with {suite:?} against a client offering TLS 1.3"
                    )),
                },
            ));
            out.push((
                format!("ALPN: {label} offered, nothing else chosen"),
                match conn.alpn_protocol() {
                    None => Outcome::Pass,
                    Some(p) if p == alpn => Outcome::Pass,
                    Some(p) => {
                        Outcome::Fail(format!("the server chose {:?}", String::from_utf8_lossy(p)))
                    }
                },
            ));
        }
    }
    let mut old = Vec::new();
    for (name, version) in OLD_PROTOCOLS {
        match accepts(addr, *version, OLD_PROTOCOL_SUITES) {
            Ok(true) => old.push(name.to_string()),
            Ok(false) => {}
            Err(why) => old.push(format!("{name} (probe failed: {why})")),
        }
    }
    out.push((
        "refuses SSL 3.0, TLS 1.0 and 1.1".into(),
        if old.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail(format!("completes a ServerHello for {}", old.join(", ")))
        },
    ));
    let mut weak = Vec::new();
    for (family, suites) in WEAK_SUITES {
        match accepts(addr, 0x0303, suites) {
            Ok(true) => weak.push(family.to_string()),
            Ok(false) => {}
            Err(why) => weak.push(format!("{family} (probe failed: {why})")),
        }
    }
    out.push((
        "refuses weak TLS 1.2 suites (NULL, anon, EXPORT, RC4, DES, 3DES)".into(),
        if weak.is_empty() {
            Outcome::Pass
        } else {
            Outcome::Fail(format!("agrees to {}", weak.join(", ")))
        },
    ));
    out
}

/// Whether the server answers a ClientHello of `version` offering only `suites` with a
/// ServerHello (true) or refuses it with an alert or a close (false).
fn accepts(addr: SocketAddr, version: u16, suites: &[u16]) -> Result<bool, String> {
    let mut s =
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|e| e.to_string())?;
    s.write_all(&client_hello(version, suites))
        .map_err(|e| format!("write: {e}"))?;
    let mut head = [0u8; 6];
    let mut got = 0;
    while got < head.len() {
        match s.read(&mut head[got..]) {
            Ok(n) if n > 0 => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err("no answer to the ClientHello".into());
            }
            // Closed or reset before a whole ServerHello head: refused.
            Ok(_) | Err(_) => return Ok(false),
        }
    }
    // Record type 22 (handshake) whose first message is 2 (ServerHello): accepted.
    Ok(head[0] == 22 && head[5] == 2)
}

/// A ClientHello (RFC 5246 §7.4.1.2) of `version` offering `suites`, with the extensions an
/// ECDHE suite needs (supported groups, point formats) and signature algorithms; no SNI
/// (the server is addressed by IP) and no supported_versions, so `version` is the highest.
fn client_hello(version: u16, suites: &[u16]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&version.to_be_bytes());
    body.extend((0u8..32).map(|i| i.wrapping_mul(37).wrapping_add(11))); // random
    body.push(0); // no session id
    body.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        body.extend_from_slice(&s.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]); // compression: null only
    let mut ext = Vec::new();
    // supported_groups: x25519, secp256r1, secp384r1
    ext.extend_from_slice(&[
        0x00, 0x0a, 0x00, 0x08, 0x00, 0x06, 0x00, 0x1d, 0x00, 0x17, 0x00, 0x18,
    ]);
    // ec_point_formats: uncompressed
    ext.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]);
    if version >= 0x0303 {
        // signature_algorithms: rsa_pss_rsae_sha256, rsa_pkcs1_sha256, ecdsa_secp256r1_sha256
        ext.extend_from_slice(&[
            0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x08, 0x04, 0x04, 0x01, 0x04, 0x03,
        ]);
    }
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut hs = vec![1u8]; // client_hello
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![22u8];
    rec.extend_from_slice(&version.clamp(0x0300, 0x0301).to_be_bytes());
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that reads one ClientHello and answers `reply` (then closes).
    fn answering(reply: &'static [u8]) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(reply);
        });
        addr
    }

    /// The probe tells a ServerHello (accepted: the check fails) from an alert or a close.
    #[test]
    fn server_hello_is_acceptance_alert_and_close_are_refusal() {
        // Handshake record, TLS 1.0, then a ServerHello (type 2) head.
        let hello = answering(&[22, 3, 1, 0, 42, 2, 0, 0, 38, 3, 1]);
        assert_eq!(accepts(hello, 0x0301, OLD_PROTOCOL_SUITES), Ok(true));
        // Alert record: fatal protocol_version (RFC 5246 §7.2.2).
        let alert = answering(&[21, 3, 1, 0, 2, 2, 70]);
        assert_eq!(accepts(alert, 0x0301, OLD_PROTOCOL_SUITES), Ok(false));
        let closed = answering(&[]);
        assert_eq!(accepts(closed, 0x0303, WEAK_SUITES[0].1), Ok(false));
    }

    /// RFC 5246 §7.4.1.2's layout: record header, handshake header, version, 32 random bytes,
    /// an empty session id, the suites, null compression, the extensions.
    #[test]
    fn client_hello_layout() {
        let h = client_hello(0x0302, &[0x002f, 0x0035]);
        assert_eq!(&h[..3], &[22, 3, 1]);
        assert_eq!(u16::from_be_bytes([h[3], h[4]]) as usize, h.len() - 5);
        assert_eq!(h[5], 1);
        assert_eq!(&h[9..11], &[3, 2]);
        assert_eq!(h[43], 0);
        assert_eq!(&h[44..50], &[0, 4, 0x00, 0x2f, 0x00, 0x35]);
        assert_eq!(&h[50..52], &[1, 0]);
    }
}
