//! The per-worker buffer pool.
//!
//! Owns reusing byte buffers so that idle connections hold none: a connection borrows a
//! buffer only while it has a partial request or unsent output and gives it back as soon as
//! that is gone. Single-threaded (one pool per worker): no locks, no atomics.
#![forbid(unsafe_code)]

/// Capacity of a fresh pooled buffer.
pub const BUF_SIZE: usize = 16 * 1024;
/// Buffers kept for reuse; more are freed.
const MAX_POOLED: usize = 256;
/// Buffers that grew beyond this are freed instead of pooled, so one big request does not
/// pin memory forever.
const MAX_POOLED_CAPACITY: usize = 64 * 1024;

/// A free list of empty buffers.
#[derive(Default)]
pub(crate) struct Pool {
    free: Vec<Vec<u8>>,
}

impl Pool {
    /// An empty buffer with at least [`BUF_SIZE`] capacity.
    pub(crate) fn get(&mut self) -> Vec<u8> {
        self.free
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUF_SIZE))
    }

    /// Returns a buffer; leaves an empty, unallocated Vec in its place.
    pub(crate) fn put(&mut self, buf: &mut Vec<u8>) {
        let mut buf = std::mem::take(buf);
        if buf.capacity() == 0 {
            return;
        }
        if self.free.len() < MAX_POOLED && buf.capacity() <= MAX_POOLED_CAPACITY {
            buf.clear();
            self.free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_leaves_nothing_allocated_behind() {
        let mut p = Pool::default();
        let mut b = p.get();
        b.extend_from_slice(b"abc");
        p.put(&mut b);
        assert_eq!(b.capacity(), 0);
        let again = p.get();
        assert!(again.is_empty() && again.capacity() >= BUF_SIZE);
    }
}
