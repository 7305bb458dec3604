//! `[acme]`'s `dns` table: where DNS-01's TXT records are put by RFC 2136
//! updates, and the TSIG key that signs them (BIND's key file, or a base64 secret and its
//! algorithm). Every refusal is at the key's FILE:LINE:COLUMN.
#![forbid(unsafe_code)]

use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;
use toml::Spanned;

use linerate_server::acme::dns::key;
use linerate_server::config::DnsUpdateConfig;

use super::{ConfError, Cx};

/// The port a `server` without one is asked on.
const DNS_PORT: u16 = 53;

/// `dns = { server, zone, key_name, key_file | key_secret + algorithm, tcp }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAcmeDns {
    server: Option<Spanned<String>>,
    zone: Option<Spanned<String>>,
    key_name: Option<Spanned<String>>,
    key_file: Option<Spanned<String>>,
    key_secret: Option<Spanned<String>>,
    algorithm: Option<Spanned<String>>,
    #[serde(default)]
    tcp: bool,
}

impl Cx<'_> {
    /// The `dns` table: needed by `challenge = "dns-01"`, refused with any other.
    pub(super) fn acme_dns(
        &self,
        challenge: Option<&Spanned<String>>,
        dns: Option<&Spanned<RawAcmeDns>>,
    ) -> Result<Option<DnsUpdateConfig>, ConfError> {
        let dns01 = challenge.filter(|c| c.get_ref() == "dns-01");
        let d = match (dns01, dns) {
            (None, None) => return Ok(None),
            (Some(c), None) => {
                return Err(self.err(
                    c.span(),
                    "challenge = \"dns-01\" needs a dns table: dns = { server = \"IP:PORT\", key_file = \"tsig.key\" } (the zone's server, which takes RFC 2136 updates signed with that TSIG key)",
                ));
            }
            (None, Some(d)) => {
                return Err(self.err(d.span(), "dns is for challenge = \"dns-01\""));
            }
            (Some(_), Some(d)) => d,
        };
        let raw = d.get_ref();
        let server = raw
            .server
            .as_ref()
            .ok_or_else(|| self.err(d.span(), "dns needs server (the zone's primary, IP:PORT)"))?;
        let addr = server
            .get_ref()
            .parse::<SocketAddr>()
            .or_else(|_| {
                server
                    .get_ref()
                    .parse::<IpAddr>()
                    .map(|ip| SocketAddr::new(ip, DNS_PORT))
            })
            .map_err(|_| {
                self.err(
                    server.span(),
                    format!(
                        "server {:?} is not an IP address with an optional port (\"127.0.0.1:53\", \"[::1]:5353\")",
                        server.get_ref()
                    ),
                )
            })?;
        let zone = match &raw.zone {
            Some(z) => {
                linerate_server::acme::dns::message::encode_name(z.get_ref())
                    .map_err(|e| self.err(z.span(), format!("zone {:?}: {e}", z.get_ref())))?;
                Some(z.get_ref().trim_end_matches('.').to_ascii_lowercase())
            }
            None => None,
        };
        let named = raw.key_name.as_ref().map(|n| n.get_ref().as_str());
        if let Some(n) = &raw.key_name {
            key::key_name(n.get_ref())
                .map_err(|e| self.err(n.span(), format!("key_name {:?}: {e}", n.get_ref())))?;
        }
        let key = match (&raw.key_file, &raw.key_secret) {
            (Some(f), None) => {
                if let Some(a) = &raw.algorithm {
                    return Err(self.err(
                        a.span(),
                        "algorithm is the key file's: give it with key_secret only",
                    ));
                }
                let path = self.existing_file(f, "key_file")?;
                let text = read_key_file(&path)
                    .map_err(|e| self.err(f.span(), format!("key_file {}: {e}", path.display())))?;
                key::parse_bind_key(&text, named)
                    .map_err(|e| self.err(f.span(), format!("key_file {}: {e}", path.display())))?
            }
            (None, Some(s)) => {
                let name = raw.key_name.as_ref().ok_or_else(|| {
                    self.err(
                        s.span(),
                        "key_secret needs key_name (the key's name on the server)",
                    )
                })?;
                let algorithm = raw.algorithm.as_ref().ok_or_else(|| {
                    self.err(s.span(), "key_secret needs algorithm (\"hmac-sha256\")")
                })?;
                key::from_parts(name.get_ref(), algorithm.get_ref(), s.get_ref()).map_err(|e| {
                    let at = match e {
                        key::KeyError::UnknownAlgorithm(_) => algorithm.span(),
                        _ => s.span(),
                    };
                    self.err(at, e.to_string())
                })?
            }
            (Some(f), Some(_)) => {
                return Err(self.err(f.span(), "key_file or key_secret, not both"));
            }
            (None, None) => {
                return Err(self.err(
                    d.span(),
                    "dns needs its TSIG key: key_file (BIND's, what tsig-keygen writes), or key_name, key_secret and algorithm",
                ));
            }
        };
        Ok(Some(DnsUpdateConfig {
            server: addr,
            zone,
            key,
            tcp: raw.tcp,
        }))
    }
}

/// The key file's text, at most [`key::MAX_KEY_FILE`] bytes (through the keeper when the
/// system refuses: a reload after privileges were dropped).
fn read_key_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            linerate_server::privsep::open_read(path)?
        }
        f => f?,
    };
    let mut text = String::new();
    file.take(key::MAX_KEY_FILE as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > key::MAX_KEY_FILE {
        return Err(std::io::Error::other(format!(
            "longer than {} bytes",
            key::MAX_KEY_FILE
        )));
    }
    Ok(text)
}
