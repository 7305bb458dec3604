//! The client's answer from an upstream's response head: which of its fields are forwarded
//! (byte for byte: an upstream's values may hold obs-text, which no `str` holds), which are
//! this server's to write (framing, `Date`, `Server`, as nginx hides them), and the `Via`
//! every forwarded message carries (RFC 9110 §7.6.3).
#![forbid(unsafe_code)]

use linerate_http1::{FieldSpan, ResponseInfo, Version};

use super::{Name, Named};

/// A mount's rules for responses.
#[derive(Clone, Debug, Default)]
pub(crate) struct Policy {
    /// Fields set on every answer (replacing the upstream's of the same name).
    pub set: Vec<(String, String)>,
    /// Fields removed from every answer.
    pub remove: Vec<String>,
}

impl Policy {
    /// Whether the mount sets or removes the field `name` on every answer.
    pub(crate) fn names(&self, name: &[u8]) -> bool {
        self.remove
            .iter()
            .chain(self.set.iter().map(|(n, _)| n))
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    }
}

/// The upstream's fields as they are forwarded, in order: `(name, value)` slices of `head`.
/// Hop-by-hop fields (and those `Connection` names), the framing, `Date` and `Server` are
/// left out, as are the mount's removed and set ones; after a 101 the `Upgrade` field stays
/// (the client must learn what the tunnel speaks).
pub(crate) fn fields<'h>(
    head: &'h [u8],
    spans: &'h [FieldSpan],
    info: &ResponseInfo,
    policy: &'h Policy,
) -> impl Iterator<Item = (&'h [u8], &'h [u8])> + 'h {
    let all = move || {
        spans
            .iter()
            .map(move |f| (&head[f.name.clone()], &head[f.value.clone()]))
    };
    let named = Named::of(all());
    let upgraded = info.status == 101;
    all().filter(move |(name, _)| {
        let kind = Name::of(name);
        (upgraded && kind == Name::Upgrade)
            || !(kind.hop_by_hop()
                || kind == Name::Date
                || kind == Name::Server
                || named.lists(name)
                || policy.names(name))
    })
}

/// The `Via` value for an answer from an upstream that spoke `version`.
pub(crate) fn via(version: Version) -> &'static str {
    match version {
        Version::Http10 => "1.0 linerate",
        _ => "1.1 linerate",
    }
}
