//! The reverse proxy's rules (RFC 9110 §7.6, RFC 9112): what an upstream receives for a
//! client's request ([`forward`]) and what the client receives of the upstream's response
//! ([`reply`]), the forward-auth subrequest ([`auth`]), the choice of a server ([`balance`]),
//! a mount's rules built from the configuration ([`route`]), the request handed to the
//! driver ([`job`]): pure functions over heads and field spans, no sockets. One piece holds
//! state, a body still arriving on its way up ([`pipe`]), shared by the two connections. The
//! connection to the upstream is `crate::h1c`'s state machine; the driver's
//! `driver/upstream.rs` owns the connections, pools and relays.
//!
//! The invariant that matters: every client request becomes exactly one upstream request,
//! framed by this server — its `Content-Length` or `Transfer-Encoding: chunked` written here
//! from the body's framing as the client's connection decoded it, never copied — so no
//! smuggling vector can reach an upstream as two requests.

pub(crate) mod auth;
pub(crate) mod balance;
pub(crate) mod cache;
pub(crate) mod forward;
pub(crate) mod job;
pub(crate) mod pipe;
pub(crate) mod reply;
pub(crate) mod route;
#[cfg(test)]
mod tests;
#[cfg(feature = "kv")]
pub(crate) mod tier;
#[cfg(not(feature = "kv"))]
#[path = "tier_off.rs"]
pub(crate) mod tier;

/// The fields a proxy never forwards as they are, in either direction (RFC 9110 §7.6.1:
/// connection-specific; the ones `Connection` names are removed too). `Transfer-Encoding`
/// and `Content-Length` are the framing this server writes itself.
pub(crate) const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
    "content-length",
];

/// Whether `name` is hop-by-hop, or named by the message's `Connection` field (`named`: its
/// lowercased tokens).
pub(crate) fn hop_by_hop(name: &[u8], named: &[Vec<u8>]) -> bool {
    HOP_BY_HOP
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h.as_bytes()))
        || named.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// The tokens of every `Connection` field among `fields`, lowercased.
pub(crate) fn connection_tokens<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (name, value) in fields {
        if name.eq_ignore_ascii_case(b"connection") {
            for t in value.split(|&b| b == b',') {
                let t = t.trim_ascii();
                if !t.is_empty() {
                    out.push(t.to_ascii_lowercase());
                }
            }
        }
    }
    out
}
