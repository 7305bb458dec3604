//! Answers held in request order behind a deferred request that has not been answered yet.
//!
//! Owns ordering only: an entry is still pending (its `Responder` is out), ready (encoded
//! bytes, maybe a file body after them), or streaming (its head and the body pieces so far,
//! more to come). Invariant kept by the connection: when the queue is not empty, its front is
//! pending or a file or streamed body is being sent — a ready or streaming front is released
//! into the output at once.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::collections::VecDeque;

use super::conn::{Facts, StreamOut};
use crate::response::FileBody;

pub(crate) enum Entry {
    /// Waiting for the service's answer; 503 at `deadline`.
    Pending { facts: Facts, deadline: u64 },
    /// Encoded and waiting for the entries before it.
    Ready {
        bytes: Vec<u8>,
        file: Option<FileBody>,
    },
    /// A streamed answer: its head and body so far, framed; `out` says how it goes on.
    Streaming { bytes: Vec<u8>, out: Box<StreamOut> },
}

/// The held answers of one connection.
#[derive(Default)]
pub(crate) struct Queue {
    entries: VecDeque<Entry>,
    /// Bytes held in ready entries.
    bytes: usize,
}

/// Most entries an empty queue may have room for and still be kept for reuse (see `SPARE`).
const MAX_SPARE_ENTRIES: usize = 64;

thread_local! {
    /// This thread's empty queue, kept for the next connection that defers an answer: a
    /// queue made and dropped around each deferred answer cost three allocations.
    static SPARE: Cell<Option<Box<Queue>>> = const { Cell::new(None) };
}

impl Queue {
    /// An empty queue: this thread's spare, or a new one.
    pub(crate) fn take() -> Box<Queue> {
        SPARE.with(Cell::take).unwrap_or_default()
    }

    /// Keeps `q`, once empty, as this thread's spare (a large one is freed).
    pub(crate) fn recycle(q: Box<Queue>) {
        if q.entries.is_empty() && q.entries.capacity() <= MAX_SPARE_ENTRIES {
            debug_assert_eq!(q.bytes, 0, "an empty queue holds no bytes");
            let _ = SPARE.try_with(|s| s.set(Some(q)));
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Entries still waiting for the service.
    pub(crate) fn pending(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e, Entry::Pending { .. }))
            .count()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn push_pending(&mut self, facts: Facts, deadline: u64) {
        self.entries.push_back(Entry::Pending { facts, deadline });
    }

    pub(crate) fn push_ready(&mut self, bytes: Vec<u8>, file: Option<FileBody>) {
        self.bytes += bytes.len();
        self.entries.push_back(Entry::Ready { bytes, file });
    }

    /// Where the pending entry of request `id` is, with its facts.
    pub(crate) fn find_pending(&self, id: u64) -> Option<(usize, Facts)> {
        self.entries.iter().enumerate().find_map(|(i, e)| match e {
            Entry::Pending { facts, .. } if facts.id == id => Some((i, *facts)),
            _ => None,
        })
    }

    /// Replaces the pending entry at `i` with its encoded answer.
    pub(crate) fn fill(&mut self, i: usize, bytes: Vec<u8>, file: Option<FileBody>) {
        self.bytes += bytes.len();
        self.entries[i] = Entry::Ready { bytes, file };
    }

    /// Replaces the pending entry at `i` with the start of a streamed answer.
    pub(crate) fn fill_stream(&mut self, i: usize, bytes: Vec<u8>, out: Box<StreamOut>) {
        self.bytes += bytes.len();
        self.entries[i] = Entry::Streaming { bytes, out };
    }

    /// The streamed answer `id` waiting here: its bytes so far and how it goes on.
    pub(crate) fn stream_mut(&mut self, id: u64) -> Option<(&mut Vec<u8>, &mut StreamOut)> {
        self.entries.iter_mut().find_map(|e| match e {
            Entry::Streaming { bytes, out } if out.id == id => Some((bytes, &mut **out)),
            _ => None,
        })
    }

    /// The bytes the streamed answer `id` holds here, if it is here.
    pub(crate) fn stream_len(&self, id: u64) -> Option<usize> {
        self.entries.iter().find_map(|e| match e {
            Entry::Streaming { bytes, out } if out.id == id => Some(bytes.len()),
            _ => None,
        })
    }

    /// Counts `n` more bytes held in a streaming entry.
    pub(crate) fn grew(&mut self, n: usize) {
        self.bytes += n;
    }

    /// The first entry's deadline, when it is pending.
    pub(crate) fn front_deadline(&self) -> Option<u64> {
        match self.entries.front() {
            Some(Entry::Pending { deadline, .. }) => Some(*deadline),
            _ => None,
        }
    }

    /// The first entry, if it is pending: its facts.
    pub(crate) fn front_pending(&self) -> Option<Facts> {
        match self.entries.front() {
            Some(Entry::Pending { facts, .. }) => Some(*facts),
            _ => None,
        }
    }

    /// Takes the first entry.
    pub(crate) fn pop(&mut self) -> Option<Entry> {
        let e = self.entries.pop_front()?;
        if let Entry::Ready { bytes, .. } | Entry::Streaming { bytes, .. } = &e {
            self.bytes -= bytes.len();
        }
        Some(e)
    }

    /// Drops every entry after the first `keep` (their answers will never be sent: an answer
    /// before them closes the connection). Returns the ready buffers for reuse.
    pub(crate) fn truncate(&mut self, keep: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
        let start = keep.min(self.entries.len());
        self.entries.drain(start..).filter_map(|e| match e {
            Entry::Pending { .. } => None,
            Entry::Ready { bytes, .. } | Entry::Streaming { bytes, .. } => {
                self.bytes -= bytes.len();
                Some(bytes)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_queue_is_the_next_one_taken_on_its_thread_with_its_room() {
        let mut q = Queue::take();
        q.push_ready(b"abc".to_vec(), None);
        let room = q.entries.capacity();
        let at: *const Queue = &*q;
        assert!(matches!(q.pop(), Some(Entry::Ready { .. })));
        Queue::recycle(q);
        let again = Queue::take();
        assert_eq!(&*again as *const Queue, at, "the same queue");
        assert_eq!(
            (again.len(), again.bytes(), again.entries.capacity()),
            (0, 0, room)
        );
        // Only one spare: the next is new.
        assert_ne!(&*Queue::take() as *const Queue, at);
    }

    #[test]
    fn a_queue_with_entries_is_never_kept() {
        let mut q = Queue::take();
        q.push_ready(b"abc".to_vec(), None);
        Queue::recycle(q);
        assert_eq!(Queue::take().len(), 0);
    }
}
