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
pub(crate) mod cache_admin;
pub(crate) mod cache_force;
pub(crate) mod cache_list;
pub(crate) mod forward;
#[cfg(feature = "http2")]
pub(crate) mod grpc_check;
#[cfg(feature = "grpc")]
pub(crate) mod grpc_web;
#[cfg(not(feature = "grpc"))]
#[path = "grpc_web_off.rs"]
pub(crate) mod grpc_web;
pub(crate) mod job;
pub(crate) mod pipe;
pub(crate) mod purge;
pub(crate) mod reply;
pub(crate) mod route;
#[cfg(test)]
mod tests;
#[cfg(feature = "kv")]
pub(crate) mod tier;
#[cfg(not(feature = "kv"))]
#[path = "tier_off.rs"]
pub(crate) mod tier;

/// A field name the proxy's rules single out, told apart by its length and at most two
/// compares: the request and answer filters ask this once per field, where a compare against
/// each rule's names cost more than the rest of the filter (callgrind, docs/benchmarks.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// `Keep-Alive`, `Proxy-Connection`, `TE`, `Transfer-Encoding`, `Proxy-Authenticate`,
    /// `Proxy-Authorization`, `Content-Length`: hop-by-hop.
    HopByHop,
    /// `Connection` (hop-by-hop).
    Connection,
    /// `Upgrade` (hop-by-hop; kept on a 101).
    Upgrade,
    Host,
    Expect,
    Via,
    Date,
    Server,
    XForwardedFor,
    XForwardedProto,
    XForwardedHost,
    XForwardedClientCert,
    Forwarded,
    /// nginx's `X-Real-IP`: an address a client must not be able to claim.
    XRealIp,
    /// W3C Trace Context's fields, and the request id's: replaced by this server's own.
    TraceParent,
    TraceState,
    XRequestId,
    /// Any other name.
    Other,
}

impl Name {
    /// What `name` is, ASCII case-insensitively (as `eq_ignore_ascii_case` compares).
    pub(crate) fn of(name: &[u8]) -> Name {
        // Same length already: a word compare with the (lowercase) literal.
        let is = |lit: &[u8]| eq_lower(name, lit);
        match name.len() {
            2 if is(b"te") => Name::HopByHop,
            3 if is(b"via") => Name::Via,
            4 if is(b"host") => Name::Host,
            4 if is(b"date") => Name::Date,
            6 if is(b"expect") => Name::Expect,
            6 if is(b"server") => Name::Server,
            7 if is(b"upgrade") => Name::Upgrade,
            9 if is(b"forwarded") => Name::Forwarded,
            9 if is(b"x-real-ip") => Name::XRealIp,
            10 if is(b"connection") => Name::Connection,
            10 if is(b"keep-alive") => Name::HopByHop,
            10 if is(b"tracestate") => Name::TraceState,
            11 if is(b"traceparent") => Name::TraceParent,
            12 if is(b"x-request-id") => Name::XRequestId,
            14 if is(b"content-length") => Name::HopByHop,
            15 if is(b"x-forwarded-for") => Name::XForwardedFor,
            16 if is(b"proxy-connection") => Name::HopByHop,
            16 if is(b"x-forwarded-host") => Name::XForwardedHost,
            17 if is(b"transfer-encoding") => Name::HopByHop,
            17 if is(b"x-forwarded-proto") => Name::XForwardedProto,
            18 if is(b"proxy-authenticate") => Name::HopByHop,
            19 if is(b"proxy-authorization") => Name::HopByHop,
            23 if is(b"x-forwarded-client-cert") => Name::XForwardedClientCert,
            _ => Name::Other,
        }
    }

    /// A field a proxy never forwards as it is, in either direction (RFC 9110 §7.6.1:
    /// connection-specific; the ones `Connection` names are removed too, [`Named`]).
    /// `Transfer-Encoding` and `Content-Length` are the framing this server writes itself.
    pub(crate) fn hop_by_hop(self) -> bool {
        matches!(self, Name::HopByHop | Name::Connection | Name::Upgrade)
    }
}

/// Whether `name` lowercased (ASCII letters only, as `to_ascii_lowercase`) is `lit`, a
/// lowercase literal of the same length. Eight bytes at a time (the last word overlapping):
/// a byte loop cost ~50 instructions a name that matched (callgrind, docs/benchmarks.md).
#[inline(always)]
fn eq_lower(name: &[u8], lit: &[u8]) -> bool {
    debug_assert_eq!(name.len(), lit.len());
    let n = name.len();
    let w64 = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
    let w32 =
        |s: &[u8], at: usize| u64::from(u32::from_le_bytes(s[at..at + 4].try_into().unwrap()));
    if n >= 8 {
        let mut i = 0;
        while i + 8 <= n {
            if fold(w64(name, i)) != w64(lit, i) {
                return false;
            }
            i += 8;
        }
        i == n || fold(w64(name, n - 8)) == w64(lit, n - 8)
    } else if n >= 4 {
        fold(w32(name, 0)) == w32(lit, 0) && fold(w32(name, n - 4)) == w32(lit, n - 4)
    } else {
        name.iter()
            .zip(lit)
            .all(|(a, b)| a.to_ascii_lowercase() == *b)
    }
}

/// `w`'s bytes with each ASCII upper-case letter made lower case, every other byte as it is.
#[inline(always)]
fn fold(w: u64) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    // Per byte, on its low seven bits (no carry crosses a byte): the top bit is set at or
    // above 'A', and above 'Z'; a byte with its own top bit set is no letter.
    let low = w & !HI;
    let from_a = low + LO * u64::from(0x80 - b'A');
    let past_z = low + LO * u64::from(0x80 - b'Z' - 1);
    let upper = from_a & !past_z & !w & HI;
    w | (upper >> 2)
}

/// The names a message's `Connection` fields list (RFC 9110 §7.6.1): hop-by-hop too. Holds
/// the fields' values as they are, and looks a name up among their tokens: nothing is
/// allocated for a message without `Connection`, one list for one with it.
#[derive(Debug, Default)]
pub(crate) struct Named<'a> {
    values: Vec<&'a [u8]>,
}

impl<'a> Named<'a> {
    /// The `Connection` fields among `fields`.
    pub(crate) fn of(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Named<'a> {
        let mut values = Vec::new();
        for (name, value) in fields {
            if name.len() == 10 && name.eq_ignore_ascii_case(b"connection") {
                values.push(value);
            }
        }
        Named { values }
    }

    /// Whether a `Connection` field lists `name` (ASCII case-insensitive; empty list
    /// elements are no names).
    pub(crate) fn lists(&self, name: &[u8]) -> bool {
        self.values.iter().any(|v| {
            v.split(|&b| b == b',').any(|t| {
                let t = t.trim_ascii();
                !t.is_empty() && t.eq_ignore_ascii_case(name)
            })
        })
    }
}
