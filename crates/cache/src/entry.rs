//! A stored response: its head (less the fields never stored, §3.1), body, the facts read from
//! it, the secondary key it was chosen by and when it was requested and received (§4.2.3).
//! Immutable once made: a 304 makes a new entry that shares the body (§4.3.4).

use std::sync::Arc;

use crate::Time;
use crate::facts::{Response, ResponseFacts};
use crate::fields::{OwnedField, first, to_stored};
use crate::key::{Key, Variant};

/// Memory an entry costs beyond its bytes (the entry, its `Arc`, the map and queue slots),
/// counted so that a store of many tiny objects still stays under its limit.
pub const ENTRY_OVERHEAD: usize = 256;

/// When the request that fetched a response was sent, and when its head arrived (§4.2.3's
/// `request_time` and `response_time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub request_time: Time,
    pub response_time: Time,
}

#[derive(Debug)]
pub struct Entry {
    pub key: Key,
    pub variant: Variant,
    pub status: u16,
    pub fields: Vec<OwnedField>,
    pub body: Arc<[u8]>,
    pub facts: ResponseFacts,
    pub timing: Timing,
}

impl Entry {
    /// An entry for `response` to a request with secondary key `variant`; hop-by-hop and
    /// Connection-named fields are dropped (§3.1).
    pub fn new(
        key: Key,
        variant: Variant,
        response: &Response<'_>,
        body: Arc<[u8]>,
        timing: Timing,
    ) -> Entry {
        Entry::from_stored(
            key,
            variant,
            response.status,
            to_stored(response.fields),
            body,
            timing,
        )
    }

    pub(crate) fn from_stored(
        key: Key,
        variant: Variant,
        status: u16,
        fields: Vec<OwnedField>,
        body: Arc<[u8]>,
        timing: Timing,
    ) -> Entry {
        let facts = ResponseFacts::of(status, &fields);
        Entry {
            key,
            variant,
            status,
            fields,
            body,
            facts,
            timing,
        }
    }

    /// The bytes this entry holds in memory, for the store's limit.
    pub fn size(&self) -> usize {
        let head: usize = self.fields.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
        ENTRY_OVERHEAD + self.key.as_bytes().len() + self.variant.size() + head + self.body.len()
    }

    /// The first value of a stored field.
    pub fn field(&self, name: &[u8]) -> Option<&[u8]> {
        first(&self.fields, name)
    }
}
