//! A stored response: its head (less the fields never stored, §3.1), body, the facts read from
//! it, the secondary key it was chosen by and when it was requested and received (§4.2.3).
//! Immutable once made: a 304 makes a new entry that shares the body (§4.3.4), so whatever is
//! derived from its fields once (its head rendered for the wire) is never stale.

use crate::Time;
use crate::facts::{Response, ResponseFacts};
use crate::fields::{OwnedField, first, to_stored};
use crate::key::{Key, Variant};
use crate::shared::Shared;

/// Memory an entry costs beyond its bytes (the entry, its `Arc`, the map and queue slots),
/// counted so that a store of many tiny objects still stays under its limit.
pub const ENTRY_OVERHEAD: usize = 256;

/// The bytes an entry of `key`, `variant`, stored `fields` and a body of `body` bytes holds
/// ([`Entry::size`]), known before its body is: whether the store will keep an answer is
/// then known when its head is.
pub fn size_of(key: &Key, variant: &Variant, fields: &[OwnedField], body: usize) -> usize {
    let head: usize = fields.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    ENTRY_OVERHEAD + key.as_bytes().len() + variant.size() + head + body
}

/// When the request that fetched a response was sent, and when its head arrived (§4.2.3's
/// `request_time` and `response_time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub request_time: Time,
    pub response_time: Time,
}

/// What a server derives from an [`Entry`] once, for every answer it makes of it.
#[derive(Debug, Default)]
pub struct Rendered {
    /// The stored fields as the server writes them on an answer (HTTP/1.1 field lines).
    pub head: Vec<u8>,
    /// The length of a line at `head`'s start that the server writes before its own fields
    /// (the stored `Date`'s; 0: none).
    pub first_line: usize,
    /// The server would compress a body of the entry's Content-Type.
    pub compressible: bool,
}

#[derive(Debug)]
pub struct Entry {
    pub key: Key,
    pub variant: Variant,
    pub status: u16,
    pub fields: Vec<OwnedField>,
    /// The body: its own block, or (read back from a second tier) part of the block its
    /// fields share.
    pub body: Shared,
    pub facts: ResponseFacts,
    pub timing: Timing,
    /// What the server that serves the entry derives from it once (its stored fields as
    /// HTTP/1.1 field lines, whether it compresses its type), made on the first answer that
    /// asks ([`Entry::rendered`]).
    rendered: std::sync::OnceLock<Rendered>,
    /// Bodies the server derives from this one (its content codings), each in the slot the
    /// server numbers it by, made once on the first answer that asks ([`Entry::derived`]).
    derived: [std::sync::OnceLock<Option<Box<[u8]>>>; DERIVED],
}

/// How many derived bodies an entry keeps ([`Entry::derived`]): a server's content codings
/// (gzip, br).
pub const DERIVED: usize = 2;

impl Entry {
    /// An entry for `response` to a request with secondary key `variant`; hop-by-hop and
    /// Connection-named fields are dropped (§3.1).
    pub fn new(
        key: Key,
        variant: Variant,
        response: &Response<'_>,
        body: Shared,
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

    /// An entry from fields already as stored (an entry's own `fields`, read back from a
    /// second tier that [`Entry::new`] filled): nothing is filtered again.
    pub fn from_stored(
        key: Key,
        variant: Variant,
        status: u16,
        fields: Vec<OwnedField>,
        body: Shared,
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
            rendered: std::sync::OnceLock::new(),
            derived: Default::default(),
        }
    }

    /// The body derived in `slot` (below [`DERIVED`]), made by `make` from the stored body
    /// on the first call for that slot (`None` from `make`: none can be made, kept so too);
    /// every later call, from any thread, gets the same bytes. They live as long as the
    /// entry and are not in [`Entry::size`]: the one who made them counts them in the store
    /// ([`crate::store::Store::grow`]).
    pub fn derived(
        &self,
        slot: usize,
        make: impl FnOnce(&[u8]) -> Option<Box<[u8]>>,
    ) -> Option<&[u8]> {
        self.derived
            .get(slot)?
            .get_or_init(|| make(&self.body))
            .as_deref()
    }

    /// The bytes this entry holds in memory, for the store's limit.
    pub fn size(&self) -> usize {
        size_of(&self.key, &self.variant, &self.fields, self.body.len())
    }

    /// The stored fields to send on an answer from the cache: all but Age, which the cache
    /// replaces with its own (§5.1: [`crate::freshness::age_field`] of the current age).
    pub fn answer_fields(&self) -> impl Iterator<Item = &OwnedField> {
        self.fields
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case(b"age"))
    }

    /// What `render` makes of this entry, made on the first call and kept for its life:
    /// every later call returns it whatever `render` it passes (one renderer per server).
    pub fn rendered(&self, render: impl FnOnce(&Entry) -> Rendered) -> &Rendered {
        self.rendered.get_or_init(|| render(self))
    }

    /// The first value of a stored field.
    pub fn field(&self, name: &[u8]) -> Option<&[u8]> {
        first(&self.fields, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::Field;

    #[test]
    fn answers_carry_the_caches_age_not_the_stored_one() {
        // RFC 9111 §5.1: the stored Age is replaced by the current age.
        let fields: &[Field] = &[
            (b"Age", b"100"),
            (b"ETag", b"\"a\""),
            (b"Connection", b"close"),
        ];
        let t = Timing {
            request_time: Time(0),
            response_time: Time(0),
        };
        let key = Key::new(b"http", b"a", b"/").unwrap();
        let e = Entry::new(
            key,
            Variant::default(),
            &Response {
                status: 200,
                fields,
            },
            Shared::from(&b""[..]),
            t,
        );
        assert_eq!(e.facts.age, 100, "read for the age calculation");
        let sent: Vec<&[u8]> = e.answer_fields().map(|(n, _)| &n[..]).collect();
        assert_eq!(
            sent,
            [&b"ETag"[..]],
            "no Age; Connection never stored (§3.1)"
        );
    }

    #[test]
    fn a_rendering_is_made_once_and_kept() {
        let t = Timing {
            request_time: Time(0),
            response_time: Time(0),
        };
        let key = Key::new(b"http", b"a", b"/").unwrap();
        let fields: &[Field] = &[(b"ETag", b"\"a\"")];
        let response = Response {
            status: 200,
            fields,
        };
        let e = Entry::new(
            key,
            Variant::default(),
            &response,
            Shared::from(&b""[..]),
            t,
        );
        let mut made = 0;
        for _ in 0..3 {
            let r = e.rendered(|e| {
                made += 1;
                Rendered {
                    head: e.fields[0].1.to_vec(),
                    first_line: 0,
                    compressible: true,
                }
            });
            assert_eq!((&r.head[..], r.compressible), (&b"\"a\""[..], true));
        }
        assert_eq!(made, 1);
    }

    #[test]
    fn the_shared_parts_can_cross_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Entry>();
        shared::<crate::store::Store>();
        shared::<crate::collapse::Flights<u64>>();
    }
}
