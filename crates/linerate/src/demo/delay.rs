//! `GET /delay/{ms}`, HttpArena's `async` profile: the number back as `text/plain`, never
//! before `ms` milliseconds have passed.
//!
//! Owns reading `{ms}` and the wait. No thread, task or future per request: each worker keeps
//! its waiting answers in one deadline heap (the `Responder` and the number, about 40 bytes
//! each), and one future on the worker's own tokio runtime sleeps until the earliest deadline,
//! answers what is due and sleeps again; it ends when the heap is empty.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use linerate_server::{OwnedRequest, Responder, Response};

/// Longest delay answered: well below the deferred timeout (`config::DEFERRED_TIMEOUT`,
/// 30 s), so a wait is never cut off by that 503. HttpArena asks for 10 to 500 ms.
pub const MAX_DELAY_MS: u64 = 10_000;

/// One waiting answer.
struct Due {
    at: Instant,
    ms: u64,
    res: Responder,
}

impl PartialEq for Due {
    fn eq(&self, other: &Due) -> bool {
        self.at == other.at
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Due) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Due) -> Ordering {
        self.at.cmp(&other.at)
    }
}

/// A worker's waiting answers and its one timer.
#[derive(Default)]
struct Waits {
    /// Earliest deadline on top.
    heap: BinaryHeap<Reverse<Due>>,
    /// The deadline the timer is set for, while its future runs.
    armed: Option<Instant>,
    /// Wakes the timer's future for an earlier deadline than `armed`.
    waker: Option<Waker>,
}

thread_local! {
    /// This worker's waits (handlers run on their worker's thread).
    static WAITS: RefCell<Waits> = RefCell::default();
}

/// The handler (`Router::deferred`): `{ms}` read, the request dropped, the answer queued.
pub(crate) fn delay(req: OwnedRequest, res: Responder) {
    let Some(ms) = req.param("ms").and_then(parse_ms) else {
        return res.send(
            Response::text("ms must be a whole number of milliseconds from 0 to 10000").status(400),
        );
    };
    drop(req);
    // Zero is a delay of zero (HttpArena: answered at once), so no wait for it.
    if ms == 0 {
        return res.send(Response::text("0"));
    }
    let at = Instant::now() + Duration::from_millis(ms);
    let start = WAITS.with(|w| {
        let mut w = w.borrow_mut();
        w.heap.push(Reverse(Due { at, ms, res }));
        match w.armed {
            None => {
                w.armed = Some(at);
                true
            }
            Some(armed) => {
                if at < armed {
                    w.armed = Some(at);
                    if let Some(waker) = w.waker.take() {
                        waker.wake();
                    }
                }
                false
            }
        }
    });
    if start && !linerate_server::runtime::spawn_local(timer()) {
        // Not on a worker (cannot happen for a routed request): answer rather than hang.
        let due = WAITS.with(|w| std::mem::take(&mut *w.borrow_mut()).heap);
        for Reverse(d) in due {
            d.res.send(Response::text("no worker runtime").status(500));
        }
    }
}

/// The worker's timer: answers what is due, sleeps until the next deadline, ends with none.
async fn timer() {
    // Dropped before its end (its runtime shut down): the next wait starts a new one.
    let _disarm = Disarm;
    let mut sleep = Box::pin(tokio::time::sleep(Duration::ZERO));
    let mut ready = Vec::new();
    poll_fn(|cx| {
        loop {
            let now = Instant::now();
            let next = WAITS.with(|w| {
                let mut w = w.borrow_mut();
                while w.heap.peek().is_some_and(|Reverse(d)| d.at <= now) {
                    ready.extend(w.heap.pop().map(|Reverse(d)| d));
                }
                let next = w.heap.peek().map(|Reverse(d)| d.at);
                w.armed = next;
                if next.is_some() {
                    w.waker = Some(cx.waker().clone());
                }
                next
            });
            // Answered outside the borrow: an answer never re-enters this module, but a
            // handler called meanwhile must find the heap free.
            for d in ready.drain(..) {
                d.res.send(Response::text_owned(d.ms.to_string()));
            }
            let Some(next) = next else {
                return Poll::Ready(());
            };
            // tokio's timer never fires before its deadline (it rounds up to its 1 ms tick).
            sleep.as_mut().reset(tokio::time::Instant::from_std(next));
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    })
    .await
}

/// Marks the worker's timer gone when its future ends or is dropped.
struct Disarm;

impl Drop for Disarm {
    fn drop(&mut self) {
        let _ = WAITS.try_with(|w| {
            if let Ok(mut w) = w.try_borrow_mut() {
                w.armed = None;
                w.waker = None;
            }
        });
    }
}

/// `{ms}`: ASCII digits only (no sign, no space), at most [`MAX_DELAY_MS`].
fn parse_ms(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u64>().ok().filter(|&ms| ms <= MAX_DELAY_MS)
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn ms_is_digits_up_to_the_limit() {
        let cases: &[(&str, Option<u64>)] = &[
            ("0", Some(0)),
            ("37", Some(37)),
            ("0010", Some(10)),
            ("10000", Some(10_000)),
            ("10001", None),
            ("99999999999999999999999", None),
            ("", None),
            ("+5", None),
            ("-1", None),
            ("1.5", None),
            (" 5", None),
            ("5ms", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_ms(input), *want, "{input:?}");
        }
    }
}
