//! TSIG (RFC 8945): a request's MAC over the message and the TSIG variables, the TSIG record
//! appended; and the check of the server's signed answer, whose MAC covers the request's.
//!
//! The clock is an argument (seconds since the epoch), so signing and checking are tested
//! with fixed times. A server's TSIG error (BADSIG, BADKEY, BADTIME …) is an error by its
//! name; an answer whose MAC does not verify, or that comes unsigned, is never trusted.
#![forbid(unsafe_code)]

use aws_lc_rs::hmac;

use super::key::{TsigAlgorithm, TsigKey};
use super::message::{self, CLASS_ANY, TYPE_TSIG, Tsig, encode_name};

/// How far apart the signer's clock and the checker's may be (RFC 8945 §10: 300 s).
pub const FUDGE: u16 = 300;

/// Why an answer's TSIG is not trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TsigError {
    /// The server's TSIG error (RFC 8945 §3), by number.
    Server(u16),
    /// The answer carries no TSIG though the request was signed.
    Unsigned,
    /// The answer is signed with another key or algorithm than the request's.
    OtherKey,
    /// The answer's MAC does not verify.
    BadMac,
    /// The answer was signed more than its fudge away from this clock.
    BadTime { signed: u64, now: u64 },
}

/// The name of TSIG error `code` (RFC 8945 §3, RFC 6895 §2.3).
pub fn error_name(code: u16) -> &'static str {
    match code {
        16 => "BADSIG",
        17 => "BADKEY",
        18 => "BADTIME",
        22 => "BADTRUNC",
        _ => "an unknown TSIG error",
    }
}

impl std::fmt::Display for TsigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TsigError::Server(16) => f.write_str(
                "BADSIG: the server finds the signature wrong (its secret for this key differs)",
            ),
            TsigError::Server(17) => {
                f.write_str("BADKEY: the server does not know this key (name and algorithm)")
            }
            TsigError::Server(18) => f.write_str(
                "BADTIME: the server's clock and this one are more than the fudge (300 s) apart",
            ),
            TsigError::Server(code) => write!(f, "TSIG error {code} ({})", error_name(*code)),
            TsigError::Unsigned => f.write_str("the server's answer is not signed"),
            TsigError::OtherKey => f.write_str("the server's answer is signed with another key"),
            TsigError::BadMac => f.write_str("the server's answer's MAC does not verify"),
            TsigError::BadTime { signed, now } => write!(
                f,
                "the server's answer was signed at {signed}, {} s from this clock ({now})",
                signed.abs_diff(*now)
            ),
        }
    }
}

impl std::error::Error for TsigError {}

fn algorithm(a: TsigAlgorithm) -> hmac::Algorithm {
    match a {
        TsigAlgorithm::HmacSha256 => hmac::HMAC_SHA256,
        TsigAlgorithm::HmacSha384 => hmac::HMAC_SHA384,
        TsigAlgorithm::HmacSha512 => hmac::HMAC_SHA512,
    }
}

fn wire(name: &str) -> Vec<u8> {
    // Key names are checked where the key is read, and algorithm names are constants.
    encode_name(name).unwrap_or_else(|_| vec![0])
}

/// The TSIG variables (RFC 8945 §4.3.3) after the key name: class, TTL, algorithm, time,
/// fudge, error, other data.
fn variables(
    out: &mut Vec<u8>,
    key: &[u8],
    alg: &[u8],
    time: u64,
    fudge: u16,
    error: u16,
    other: &[u8],
) {
    out.extend_from_slice(key);
    out.extend_from_slice(&CLASS_ANY.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes());
    out.extend_from_slice(alg);
    out.extend_from_slice(&time.to_be_bytes()[2..]);
    out.extend_from_slice(&fudge.to_be_bytes());
    out.extend_from_slice(&error.to_be_bytes());
    out.extend_from_slice(&(other.len() as u16).to_be_bytes());
    out.extend_from_slice(other);
}

/// Signs `msg` (a request, ARCOUNT without the TSIG) with `key` at `now`: the TSIG record is
/// appended and ARCOUNT counts it. Returns the MAC, which the answer's MAC covers.
pub fn sign(key: &TsigKey, msg: &mut Vec<u8>, now: u64) -> Vec<u8> {
    let key_name = wire(&key.name);
    let alg = wire(key.algorithm.name());
    let mut digested = msg.clone();
    variables(&mut digested, &key_name, &alg, now, FUDGE, 0, &[]);
    let k = hmac::Key::new(algorithm(key.algorithm), &key.secret);
    let mac = hmac::sign(&k, &digested).as_ref().to_vec();

    let id = msg.get(..2).map_or([0, 0], |b| [b[0], b[1]]);
    msg.extend_from_slice(&key_name);
    msg.extend_from_slice(&TYPE_TSIG.to_be_bytes());
    msg.extend_from_slice(&CLASS_ANY.to_be_bytes());
    msg.extend_from_slice(&0u32.to_be_bytes());
    let mut rdata = alg;
    rdata.extend_from_slice(&now.to_be_bytes()[2..]);
    rdata.extend_from_slice(&FUDGE.to_be_bytes());
    rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
    rdata.extend_from_slice(&mac);
    rdata.extend_from_slice(&id);
    rdata.extend_from_slice(&0u16.to_be_bytes()); // error
    rdata.extend_from_slice(&0u16.to_be_bytes()); // other len
    msg.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    msg.extend_from_slice(&rdata);
    if let Some(ar) = msg.get_mut(10..12) {
        let n = u16::from_be_bytes([ar[0], ar[1]]).wrapping_add(1);
        ar.copy_from_slice(&n.to_be_bytes());
    }
    mac
}

/// Checks the answer `msg`, whose TSIG record `tsig` was read by
/// [`message::parse`], against the request's MAC (RFC 8945 §5.3.2 and §4.3.1): the
/// server's own error first, then the key, the MAC (with the request MAC first in what it
/// covers), then the time.
pub fn verify(
    key: &TsigKey,
    request_mac: &[u8],
    msg: &[u8],
    tsig: &Tsig<'_>,
    now: u64,
) -> Result<(), TsigError> {
    if tsig.error != 0 {
        return Err(TsigError::Server(tsig.error));
    }
    if tsig.key != wire(&key.name) || tsig.algorithm != wire(key.algorithm.name()) {
        return Err(TsigError::OtherKey);
    }
    if tsig.mac.is_empty() {
        return Err(TsigError::Unsigned);
    }
    let mut digested = Vec::with_capacity(msg.len() + request_mac.len() + 64);
    digested.extend_from_slice(&(request_mac.len() as u16).to_be_bytes());
    digested.extend_from_slice(request_mac);
    let mut body = msg.get(..tsig.start).unwrap_or_default().to_vec();
    if body.len() < message::HEADER {
        return Err(TsigError::BadMac);
    }
    body[..2].copy_from_slice(&tsig.original_id.to_be_bytes());
    let ar = u16::from_be_bytes([body[10], body[11]]).wrapping_sub(1);
    body[10..12].copy_from_slice(&ar.to_be_bytes());
    digested.extend_from_slice(&body);
    variables(
        &mut digested,
        &tsig.key,
        &tsig.algorithm,
        tsig.time_signed,
        tsig.fudge,
        tsig.error,
        tsig.other,
    );
    // Only a full-length MAC is taken (RFC 8945 §5.2.2.1 allows truncation by agreement;
    // BIND and Knot send it whole).
    if tsig.mac.len() != key.algorithm.mac_len() {
        return Err(TsigError::BadMac);
    }
    let k = hmac::Key::new(algorithm(key.algorithm), &key.secret);
    hmac::verify(&k, &digested, tsig.mac).map_err(|_| TsigError::BadMac)?;
    if tsig.time_signed.abs_diff(now) > u64::from(tsig.fudge) {
        return Err(TsigError::BadTime {
            signed: tsig.time_signed,
            now,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acme::dns::message::{Change, parse, update};

    fn key(secret: &[u8]) -> TsigKey {
        TsigKey {
            name: "linerate".into(),
            algorithm: TsigAlgorithm::HmacSha256,
            secret: secret.to_vec(),
        }
    }

    /// The answer a server that knows `k` makes to `request` (signed with `request_mac`):
    /// the request's header with QR set, its zone section, and a TSIG over both (RFC 8945
    /// §4.3.1), at `time`.
    fn server_answer(k: &TsigKey, request: &[u8], request_mac: &[u8], time: u64) -> Vec<u8> {
        let tsig = parse(request).unwrap().tsig.unwrap();
        let mut m = request[..tsig.start].to_vec();
        m[2] |= 0x80;
        m[7] = 0; // PRCOUNT
        m[9] = 0; // UPCOUNT: the answer carries the zone section only
        m[11] = 0;
        let zone_end = message::HEADER + b"\x05fleet\x04test\x00".len() + 4;
        m.truncate(zone_end);
        let mut digested = (request_mac.len() as u16).to_be_bytes().to_vec();
        digested.extend_from_slice(request_mac);
        digested.extend_from_slice(&m);
        variables(
            &mut digested,
            &wire(&k.name),
            &wire(k.algorithm.name()),
            time,
            FUDGE,
            0,
            &[],
        );
        let mac = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &k.secret), &digested);
        let mut signed = m.clone();
        signed[11] = 1;
        signed.extend_from_slice(&wire(&k.name));
        signed.extend_from_slice(&[0, 250, 0, 255, 0, 0, 0, 0]);
        let mut rdata = wire(k.algorithm.name());
        rdata.extend_from_slice(&time.to_be_bytes()[2..]);
        rdata.extend_from_slice(&FUDGE.to_be_bytes());
        rdata.extend_from_slice(&[0, 32]);
        rdata.extend_from_slice(mac.as_ref());
        rdata.extend_from_slice(&m[..2]);
        rdata.extend_from_slice(&[0, 0, 0, 0]);
        signed.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        signed.extend_from_slice(&rdata);
        signed
    }

    fn request(k: &TsigKey, now: u64) -> (Vec<u8>, Vec<u8>) {
        let mut m = update(
            9,
            "fleet.test",
            "_acme-challenge.fleet.test",
            b"v",
            Change::Add { ttl: 60 },
        )
        .unwrap();
        let mac = sign(k, &mut m, now);
        (m, mac)
    }

    // RFC 8945 §4.2, §4.3.3: the TSIG RR closes the message, ARCOUNT counts it, and its MAC
    // is the HMAC of the message before it and the variables.
    #[test]
    fn a_signed_request_carries_its_mac_over_the_message_and_variables() {
        let k = key(b"0123456789abcdef0123456789abcdef");
        let now = 1_700_000_000;
        let (m, mac) = request(&k, now);
        let a = parse(&m).unwrap();
        assert_eq!(a.header.counts[3], 1);
        let t = a.tsig.unwrap();
        assert_eq!(t.key, b"\x08linerate\x00");
        assert_eq!(t.algorithm, b"\x0bhmac-sha256\x00");
        assert_eq!(t.time_signed, now);
        assert_eq!(t.fudge, 300);
        assert_eq!(t.original_id, 9);
        assert_eq!(t.mac, &mac[..]);
        let mut digested = m[..t.start].to_vec();
        digested[11] = 0;
        digested.extend_from_slice(b"\x08linerate\x00\x00\xff\x00\x00\x00\x00\x0bhmac-sha256\x00");
        digested.extend_from_slice(&now.to_be_bytes()[2..]);
        digested.extend_from_slice(&[1, 44, 0, 0, 0, 0]);
        let want = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, &k.secret), &digested);
        assert_eq!(mac, want.as_ref());
    }

    #[test]
    fn a_signed_answer_verifies_and_a_changed_byte_or_other_secret_does_not() {
        let k = key(b"0123456789abcdef0123456789abcdef");
        let now = 1_700_000_000;
        let (req, mac) = request(&k, now);
        let ans = server_answer(&k, &req, &mac, now + 2);
        let t = parse(&ans).unwrap().tsig.unwrap();
        assert_eq!(verify(&k, &mac, &ans, &t, now), Ok(()));
        // Its MAC covers the request's MAC.
        let mut other_mac = mac.clone();
        other_mac[0] ^= 1;
        assert_eq!(
            verify(&k, &other_mac, &ans, &t, now),
            Err(TsigError::BadMac)
        );
        assert_eq!(
            verify(&key(b"another secret"), &mac, &ans, &t, now),
            Err(TsigError::BadMac)
        );
        let mut changed = ans.clone();
        changed[3] ^= 0x05; // the RCODE
        let t2 = parse(&changed).unwrap().tsig.unwrap();
        assert_eq!(verify(&k, &mac, &changed, &t2, now), Err(TsigError::BadMac));
        assert_eq!(
            verify(&k, &mac, &ans, &t, now + 400),
            Err(TsigError::BadTime {
                signed: now + 2,
                now: now + 400
            })
        );
    }

    // RFC 8945 §5.2: the server's BADSIG/BADKEY/BADTIME come unsigned, by their names.
    #[test]
    fn a_server_s_tsig_error_is_an_error_by_its_name() {
        let k = key(b"s");
        let t = Tsig {
            start: 12,
            key: wire("linerate"),
            algorithm: wire("hmac-sha256"),
            time_signed: 0,
            fudge: 300,
            mac: &[],
            original_id: 0,
            error: 16,
            other: &[],
        };
        let e = verify(&k, &[], &[0; 12], &t, 0).unwrap_err();
        assert_eq!(e, TsigError::Server(16));
        assert!(e.to_string().starts_with("BADSIG"), "{e}");
        assert!(TsigError::Server(17).to_string().starts_with("BADKEY"));
        assert!(TsigError::Server(18).to_string().starts_with("BADTIME"));
        let unsigned = Tsig { error: 0, ..t };
        assert_eq!(
            verify(&k, &[], &[0; 12], &unsigned, 0),
            Err(TsigError::Unsigned)
        );
        let other = Tsig {
            key: wire("other"),
            ..unsigned
        };
        assert_eq!(
            verify(&k, &[], &[0; 12], &other, 0),
            Err(TsigError::OtherKey)
        );
    }
}
