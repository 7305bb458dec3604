//! The three things a DNS-01 order asks of the zone's server: add the `_acme-challenge`
//! TXT record (an UPDATE signed with TSIG), check that it is served (a TXT query, bounded
//! tries), and delete that exact record after the order, however it ended.
//!
//! The answer to an UPDATE is taken only when its TSIG verifies against the request's
//! MAC; a refusal is an error by its name (BADSIG, BADKEY, BADTIME, REFUSED, NOTZONE …).
#![forbid(unsafe_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::client::{self, TransportError};
use super::message::{self, Change, NameError, OPCODE_UPDATE, WireError};
use super::tsig::{self, TsigError};
use crate::config::DnsUpdateConfig;

/// The TTL of the TXT record (short: a resolver must not keep a stale challenge).
pub const TXT_TTL: u32 = 60;
/// How many times the server is asked whether it serves the record before the CA is told
/// to validate.
pub const SERVED_TRIES: u32 = 20;
/// The wait between two of those questions.
pub const SERVED_INTERVAL: Duration = Duration::from_millis(500);
/// The label the TXT record is put under (RFC 8555 §8.4).
pub const LABEL: &str = "_acme-challenge";

/// Why an update or a check failed.
#[derive(Debug)]
pub enum DnsError {
    Name(NameError),
    Transport(TransportError),
    Wire(WireError),
    Tsig(TsigError),
    /// The server's RCODE (RFC 1035 §4.1.1, RFC 2136 §2.2), not NOERROR.
    Rcode(u8),
    /// An answer that is not an UPDATE's (another opcode).
    NotUpdate(u8),
    /// The record was never served within [`SERVED_TRIES`].
    NotServed(String),
}

/// The name of RCODE `code`.
pub fn rcode_name(code: u8) -> &'static str {
    match code {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        6 => "YXDOMAIN",
        7 => "YXRRSET",
        8 => "NXRRSET",
        9 => "NOTAUTH",
        10 => "NOTZONE",
        _ => "an unknown RCODE",
    }
}

impl std::fmt::Display for DnsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DnsError::Name(e) => write!(f, "{e}"),
            DnsError::Transport(e) => write!(f, "{e}"),
            DnsError::Wire(e) => write!(f, "{e}"),
            DnsError::Tsig(e) => write!(f, "TSIG: {e}"),
            DnsError::Rcode(9) => f.write_str(
                "NOTAUTH: the server is not authoritative for the zone, or refuses the key",
            ),
            DnsError::Rcode(10) => {
                f.write_str("NOTZONE: the record is not in the zone (set dns.zone)")
            }
            DnsError::Rcode(5) => {
                f.write_str("REFUSED: the server's update policy refuses this key")
            }
            DnsError::Rcode(code) => write!(f, "{} (RCODE {code})", rcode_name(*code)),
            DnsError::NotUpdate(op) => write!(f, "an answer with opcode {op}, not UPDATE"),
            DnsError::NotServed(name) => write!(
                f,
                "the server did not serve the TXT record {name} after {SERVED_TRIES} questions"
            ),
        }
    }
}

impl std::error::Error for DnsError {}

/// `_acme-challenge.NAME`, a wildcard's `*.` taken off (RFC 8555 §8.4).
pub fn record_name(name: &str) -> String {
    format!("{LABEL}.{}", name.strip_prefix("*.").unwrap_or(name))
}

/// The zone the record of `name` goes in: the configured one, else the validated name (the
/// record's parent).
pub fn zone_of<'a>(config: &'a DnsUpdateConfig, name: &'a str) -> &'a str {
    config
        .zone
        .as_deref()
        .unwrap_or_else(|| name.strip_prefix("*.").unwrap_or(name))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_id() -> u16 {
    let mut b = [0u8; 2];
    // A failure leaves the ID 0: IDs guard against stray answers, not forgery (TSIG does).
    let _ = aws_lc_rs::rand::fill(&mut b);
    u16::from_be_bytes(b)
}

/// One UPDATE of the TXT record for `name` (the validated name) holding `value`.
pub async fn change(
    config: &DnsUpdateConfig,
    name: &str,
    value: &str,
    what: Change,
) -> Result<(), DnsError> {
    change_signed_at(config, name, value, what, unix_now()).await
}

/// [`change`], signed as of `signed_at` (seconds since the epoch): a test's way to a clock
/// the server refuses (BADTIME).
pub async fn change_signed_at(
    config: &DnsUpdateConfig,
    name: &str,
    value: &str,
    what: Change,
    signed_at: u64,
) -> Result<(), DnsError> {
    let record = record_name(name);
    let mut request = message::update(
        random_id(),
        zone_of(config, name),
        &record,
        value.as_bytes(),
        what,
    )
    .map_err(DnsError::Name)?;
    let mac = tsig::sign(&config.key, &mut request, signed_at);
    let answer = client::exchange(config.server, &request, config.tcp)
        .await
        .map_err(DnsError::Transport)?;
    let parsed = message::parse(&answer).map_err(DnsError::Wire)?;
    if parsed.header.opcode != OPCODE_UPDATE {
        return Err(DnsError::NotUpdate(parsed.header.opcode));
    }
    match &parsed.tsig {
        Some(t) => {
            tsig::verify(&config.key, &mac, &answer, t, unix_now()).map_err(DnsError::Tsig)?
        }
        // An unsigned refusal (a server that does not do TSIG at all) says its RCODE.
        None if parsed.header.rcode != 0 => {}
        None => return Err(DnsError::Tsig(TsigError::Unsigned)),
    }
    if parsed.header.rcode != 0 {
        return Err(DnsError::Rcode(parsed.header.rcode));
    }
    Ok(())
}

/// Whether the server answers the TXT query for `name`'s record with `value` among its
/// records.
pub async fn served(config: &DnsUpdateConfig, name: &str, value: &str) -> Result<bool, DnsError> {
    let request = message::query_txt(random_id(), &record_name(name)).map_err(DnsError::Name)?;
    let answer = client::exchange(config.server, &request, config.tcp)
        .await
        .map_err(DnsError::Transport)?;
    let parsed = message::parse(&answer).map_err(DnsError::Wire)?;
    Ok(parsed.txt.iter().any(|t| t == value.as_bytes()))
}

/// Adds the record, then asks until it is served ([`SERVED_TRIES`] at most).
pub async fn publish(config: &DnsUpdateConfig, name: &str, value: &str) -> Result<(), DnsError> {
    change(config, name, value, Change::Add { ttl: TXT_TTL }).await?;
    for _ in 0..SERVED_TRIES {
        if served(config, name, value).await? {
            return Ok(());
        }
        tokio::time::sleep(SERVED_INTERVAL).await;
    }
    Err(DnsError::NotServed(record_name(name)))
}

/// Deletes that exact record (other TXT records at the name stay).
pub async fn withdraw(config: &DnsUpdateConfig, name: &str, value: &str) -> Result<(), DnsError> {
    change(config, name, value, Change::Delete).await
}
