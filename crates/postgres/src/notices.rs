//! The buffer between a listener's connection task and its reader ([`Listener`]): items in
//! the order they came, at most [`LISTEN_BUFFER`] of them, and a `Missed` mark in place of
//! whatever could not be kept (the buffer full, or the connection lost), so the reader always
//! learns that it must read the state again rather than trust the stream alone. Each side
//! learns when the other is gone: the task stops (closing its connection) when the reader is
//! dropped, and the reader's stream ends when the task is gone. No I/O here.
//!
//! [`Listener`]: crate::Listener
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// Notifications a listener keeps for a reader that is behind; past this, they are dropped and
/// the reader is told so (a `Missed` mark).
pub const LISTEN_BUFFER: usize = 1024;

/// One item for the reader: something heard, or the mark that some may have been missed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Heard<T> {
    Item(T),
    Missed,
}

/// Both sides' view of the buffer.
pub(crate) struct Notices<T> {
    state: Mutex<State<T>>,
    limit: usize,
}

struct State<T> {
    items: VecDeque<Heard<T>>,
    /// Items in `items` that are not `Missed` marks.
    kept: usize,
    reader: Option<Waker>,
    writer: Option<Waker>,
    reader_gone: bool,
    writer_gone: bool,
}

impl<T> Notices<T> {
    /// An empty buffer keeping at most `limit` items.
    pub(crate) fn new(limit: usize) -> Notices<T> {
        Notices {
            state: Mutex::new(State {
                items: VecDeque::new(),
                kept: 0,
                reader: None,
                writer: None,
                reader_gone: false,
                writer_gone: false,
            }),
            limit,
        }
    }

    /// Adds `item`; when the buffer is full it is dropped and a `Missed` mark stands for it.
    pub(crate) fn push(&self, item: T) {
        let mut s = self.state.lock().unwrap();
        if s.kept < self.limit {
            s.items.push_back(Heard::Item(item));
            s.kept += 1;
        } else {
            s.mark_missed();
        }
        s.wake_reader();
    }

    /// Tells the reader that items may have been missed here (one mark for several in a row).
    pub(crate) fn missed(&self) {
        let mut s = self.state.lock().unwrap();
        s.mark_missed();
        s.wake_reader();
    }

    /// The next item; `None` once the writer is gone and all was read.
    pub(crate) fn poll_next(&self, cx: &mut Context<'_>) -> Poll<Option<Heard<T>>> {
        let mut s = self.state.lock().unwrap();
        if let Some(next) = s.items.pop_front() {
            if matches!(next, Heard::Item(_)) {
                s.kept -= 1;
            }
            return Poll::Ready(Some(next));
        }
        if s.writer_gone {
            return Poll::Ready(None);
        }
        s.reader = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Ready once the reader is gone (the writer then stops).
    pub(crate) fn poll_reader_gone(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.state.lock().unwrap();
        if s.reader_gone {
            return Poll::Ready(());
        }
        s.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    /// The reader is dropped: what is left is dropped too, and the writer is woken to stop.
    pub(crate) fn close_reader(&self) {
        let mut s = self.state.lock().unwrap();
        s.reader_gone = true;
        s.items.clear();
        s.kept = 0;
        if let Some(w) = s.writer.take() {
            w.wake();
        }
    }

    /// The writer is gone: the reader's stream ends after what is left.
    pub(crate) fn close_writer(&self) {
        let mut s = self.state.lock().unwrap();
        s.writer_gone = true;
        s.wake_reader();
    }
}

impl<T> State<T> {
    fn mark_missed(&mut self) {
        if !matches!(self.items.back(), Some(Heard::Missed)) {
            self.items.push_back(Heard::Missed);
        }
    }

    fn wake_reader(&mut self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(n: &Notices<u32>) -> Vec<Heard<u32>> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut out = Vec::new();
        while let Poll::Ready(Some(h)) = n.poll_next(&mut cx) {
            out.push(h);
        }
        out
    }

    #[test]
    fn items_come_in_order_and_what_did_not_fit_is_one_mark_in_its_place() {
        use Heard::{Item, Missed};
        let n = Notices::new(3);
        for i in 1..=5 {
            n.push(i);
        }
        // 4 and 5 did not fit: one mark after the three kept.
        assert_eq!(drain(&n), [Item(1), Item(2), Item(3), Missed]);
        // Room again: new items come after the mark's place.
        n.push(6);
        n.missed(); // an outage
        n.missed(); // the same outage, said again: still one mark
        n.push(7);
        assert_eq!(drain(&n), [Item(6), Missed, Item(7)]);
        // A mark takes no item's room.
        n.missed();
        for i in 8..=10 {
            n.push(i);
        }
        assert_eq!(drain(&n), [Missed, Item(8), Item(9), Item(10)]);
    }

    #[test]
    fn each_side_learns_that_the_other_is_gone() {
        let mut cx = Context::from_waker(Waker::noop());
        let n = Notices::new(LISTEN_BUFFER);
        assert!(n.poll_reader_gone(&mut cx).is_pending());
        n.push(1u32);
        n.close_writer();
        // What was heard is still read; then the stream ends.
        assert_eq!(n.poll_next(&mut cx), Poll::Ready(Some(Heard::Item(1))));
        assert_eq!(n.poll_next(&mut cx), Poll::Ready(None));
        n.close_reader();
        assert!(n.poll_reader_gone(&mut cx).is_ready());
    }
}
