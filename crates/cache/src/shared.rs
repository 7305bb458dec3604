//! [`Shared`]: bytes an [`Entry`](crate::Entry) keeps, as a range of one reference-counted
//! block, so that an entry's fields (and, read back from a second tier, its body) live in one
//! allocation instead of one each, and a block that arrived as a `Vec` is kept without a copy.
//!
//! Why, as measured: an entry read back from a second tier cost a `Box` per field name and
//! value (10 allocations and 10 frees for a five-field answer) and a copy of its body into an
//! `Arc<[u8]>` (a 1 KiB body: ~1,200 instructions, past glibc's per-thread cache), about 3,300
//! instructions of a tier hit's 25,000 (callgrind). Cloning one is a reference count, as
//! cloning the `Arc<[u8]>` body was.

use std::ops::{Deref, Range};
use std::sync::Arc;

/// Bytes kept by an entry: `range` of a block other `Shared`s may share.
#[derive(Clone)]
pub struct Shared {
    block: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl Shared {
    /// `bytes` as a block of its own, kept without a copy.
    pub fn new(bytes: Vec<u8>) -> Shared {
        let end = bytes.len();
        Shared {
            block: Arc::new(bytes),
            start: 0,
            end,
        }
    }

    /// The part `range` of this one's bytes, sharing its block. Panics when `range` is not
    /// within them, as slicing does.
    pub fn slice(&self, range: Range<usize>) -> Shared {
        assert!(
            range.start <= range.end && range.end <= self.end - self.start,
            "Shared::slice out of range"
        );
        Shared {
            block: Arc::clone(&self.block),
            start: self.start + range.start,
            end: self.start + range.end,
        }
    }

    /// Whether both are the same bytes of the same block (a 304's update keeps its stored
    /// body without a copy).
    pub fn same(a: &Shared, b: &Shared) -> bool {
        Arc::ptr_eq(&a.block, &b.block) && a.start == b.start && a.end == b.end
    }
}

impl Deref for Shared {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.block[self.start..self.end]
    }
}

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<&[u8]> for Shared {
    fn from(bytes: &[u8]) -> Shared {
        Shared::new(bytes.to_vec())
    }
}

impl From<Vec<u8>> for Shared {
    fn from(bytes: Vec<u8>) -> Shared {
        Shared::new(bytes)
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        **self == **other
    }
}

impl Eq for Shared {}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_its_bytes_and_shares_its_block() {
        let whole = Shared::new(b"Content-Type: text/plain".to_vec());
        let name = whole.slice(0..12);
        let value = whole.slice(14..24);
        assert_eq!(
            (&name[..], &value[..]),
            (&b"Content-Type"[..], &b"text/plain"[..])
        );
        // A slice of a slice counts from its own start.
        assert_eq!(&value.slice(5..10)[..], b"plain");
        assert!(Arc::ptr_eq(&name.block, &whole.block));
        assert!(Shared::same(&value, &whole.slice(14..24)));
        assert!(!Shared::same(&value, &Shared::from(&b"text/plain"[..])));
        assert_eq!(value, Shared::from(&b"text/plain"[..]), "equal by bytes");
        assert_eq!(&whole.slice(3..3)[..], b"");
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_slice_past_the_end_panics() {
        let v = Shared::new(b"abc".to_vec()).slice(1..3);
        let _ = v.slice(0..3);
    }
}
