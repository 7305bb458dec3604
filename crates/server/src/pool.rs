//! The per-worker buffer pool.
//!
//! Owns reusing byte buffers so that idle connections hold none: a connection borrows a
//! buffer only while it has a partial request or unsent output and gives it back as soon as
//! that is gone. The same for the HTTP/1.1 connection's queue of answers held behind a
//! deferred one (a proxied request, an async handler's): borrowed while a request is
//! deferred, given back empty. Single-threaded (one pool per worker): no locks, no atomics.
#![forbid(unsafe_code)]

/// Capacity of a fresh pooled buffer.
pub const BUF_SIZE: usize = 16 * 1024;
/// Buffers kept for reuse; more are freed.
const MAX_POOLED: usize = 256;
/// Buffers that grew beyond this are freed instead of pooled, so one big request does not
/// pin memory forever.
const MAX_POOLED_CAPACITY: usize = 64 * 1024;

/// Answer queues kept for reuse; more are freed.
const MAX_POOLED_QUEUES: usize = 256;

/// A free list of empty buffers, one of filled ones, and one of empty answer queues.
#[derive(Default)]
pub(crate) struct Pool {
    /// Empty answer queues: a deferred request took an allocation for its connection's
    /// queue and another as the queue grew, each time (callgrind: ~330 instructions of every
    /// proxied request).
    #[allow(clippy::vec_box)] // A connection holds its queue boxed: the box is what is reused.
    queues: Vec<Box<crate::h1::queue::Queue>>,
    free: Vec<Vec<u8>>,
    /// Buffers given back with their length kept ([`Pool::put_filled`]): whoever needs a
    /// buffer of a given length to write into (TLS records, a file chunk read with `pread`)
    /// gets one whose bytes are already initialized, so `resize` zeroes only what it grows.
    /// Zeroing 16 KiB before every record cost more instructions than the encryption's own
    /// copies (the user-space TLS path; docs/benchmarks.md's section on kTLS).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))] // Only TLS fills buffers.
    filled: Vec<Vec<u8>>,
}

impl Pool {
    /// An empty answer queue.
    pub(crate) fn get_queue(&mut self) -> Box<crate::h1::queue::Queue> {
        self.queues.pop().unwrap_or_default()
    }

    /// Returns an answer queue, emptied; one that grew past a pipelining burst is freed.
    pub(crate) fn put_queue(&mut self, q: Box<crate::h1::queue::Queue>) {
        if q.reusable() && self.queues.len() < MAX_POOLED_QUEUES {
            self.queues.push(q);
        }
    }

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

    /// A buffer to write into after `resize`: its length is whatever its last user left
    /// (stale bytes; the caller overwrites and truncates to what it wrote).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn get_filled(&mut self) -> Vec<u8> {
        self.filled.pop().unwrap_or_else(|| self.get())
    }

    /// Returns a buffer keeping its length, for [`Pool::get_filled`]; leaves an empty,
    /// unallocated Vec in its place.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn put_filled(&mut self, buf: &mut Vec<u8>) {
        let buf = std::mem::take(buf);
        if buf.capacity() == 0 {
            return;
        }
        if self.filled.len() < MAX_POOLED && buf.capacity() <= MAX_POOLED_CAPACITY {
            self.filled.push(buf);
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

    #[test]
    fn filled_buffers_keep_their_length_and_never_reach_get() {
        let mut p = Pool::default();
        let mut b = p.get_filled();
        b.resize(100, 7);
        p.put_filled(&mut b);
        assert_eq!(b.capacity(), 0);
        assert!(p.get().is_empty(), "get hands out only empty buffers");
        let again = p.get_filled();
        assert_eq!(again.len(), 100);
        let mut big = vec![0u8; MAX_POOLED_CAPACITY + 1];
        p.put_filled(&mut big);
        assert!(
            p.get_filled().is_empty(),
            "an oversized buffer is freed, not pooled"
        );
    }

    #[test]
    fn an_empty_queue_is_reused_and_one_still_holding_answers_never() {
        let mut p = Pool::default();
        let q = p.get_queue();
        let at: *const crate::h1::queue::Queue = &*q;
        p.put_queue(q);
        let again = p.get_queue();
        assert!(
            std::ptr::eq(at, &*again),
            "the emptied queue was not reused"
        );
        let mut held = again;
        held.push_ready(b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), None);
        p.put_queue(held);
        assert_eq!(
            p.get_queue().len(),
            0,
            "a queue holding an answer came back from the pool"
        );
    }
}
