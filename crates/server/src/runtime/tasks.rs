//! The worker's own executor: the futures [`OnWorker`](crate::OnWorker) and
//! [`spawn_local`](super::spawn_local) hand a worker, kept in a slab and polled on the worker's
//! thread without a tokio task each. One tokio task per worker, the runner, polls the woken
//! ones while the runtime runs, so tokio's timers and sockets wake them as they would wake
//! tasks of tokio's own (a wake on the runtime's thread is a push on a list, never a write to
//! its eventfd).
//!
//! Owns the slab, the wakers and the runner; knows nothing of HTTP, and of the runtime only
//! how to spawn and wake the runner. Why not a tokio task per future: it costs an allocation
//! aligned to 128 bytes (`memalign`, which glibc's per-thread cache never serves), a
//! reference-counted header and tokio's scheduling for each request that waits, about 2,000
//! instructions (callgrind); a slot here is reused, with its
//! waker.
#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

/// A future for the worker's thread alone (it may hold `Rc`s).
pub(crate) type LocalFuture = Pin<Box<dyn Future<Output = ()> + 'static>>;

/// One worker's futures.
pub(crate) struct Tasks {
    /// Each future's place; a slot freed is reused by the next, with its waker.
    slots: RefCell<Vec<Slot>>,
    /// Free slots.
    free: RefCell<Vec<u32>>,
    /// Slots woken on this thread, each once until it is polled (`Slot::queued`).
    ready: RefCell<Vec<u32>>,
    /// The list `ready` is swapped with for a pass, kept for its capacity.
    spare: RefCell<Vec<u32>>,
    /// Futures not yet ended.
    live: Cell<usize>,
    /// What other threads reach: their wakes and the runner's waker.
    remote: Arc<Remote>,
    /// The runner (a tokio task of the runtime) lives: it ends when no future does.
    runner_live: Cell<bool>,
    /// The runner's waker, since its last poll.
    runner: RefCell<Option<Waker>>,
    /// The runner was woken since its last poll (a second wake is not needed).
    runner_woken: Cell<bool>,
    /// The runner is to be woken when the thread next enters the runtime: a future was woken
    /// outside it, where waking a tokio task writes the runtime's eventfd.
    runner_due: Cell<bool>,
}

/// A future's place.
struct Slot {
    /// The future; taken out while it is polled.
    fut: Option<LocalFuture>,
    /// A future holds the slot (it may be out being polled).
    taken: bool,
    /// Woken and in `Tasks::ready`.
    queued: bool,
    /// Counts the slot's futures: a waker of an earlier one wakes nothing.
    round: u32,
    /// The waker's state, and the waker made of it (the slot reuses both while nobody else
    /// holds a clone).
    handle: Arc<Handle>,
    waker: Waker,
}

/// A waker's state: its slot, the slot's round when it was made, and the way back to its
/// worker from any thread.
struct Handle {
    remote: Arc<Remote>,
    index: u32,
    round: AtomicU32,
}

/// The part of a worker's executor other threads reach.
struct Remote {
    /// Something is in `inner.woken`.
    any: AtomicBool,
    inner: Mutex<RemoteInner>,
}

#[derive(Default)]
struct RemoteInner {
    /// Wakes from other threads: (slot, round).
    woken: Vec<(u32, u32)>,
    /// The runner's waker, for those wakes.
    runner: Option<Waker>,
}

impl Remote {
    fn lock(&self) -> MutexGuard<'_, RemoteInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Wake for Handle {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let round = self.round.load(Ordering::Relaxed);
        let here = super::with_here(Arc::as_ptr(&self.remote).cast(), |tasks| {
            tasks.wake_here(self.index, round)
        });
        if here.is_none() {
            // Another thread, or this one with another executor installed.
            let runner = {
                let mut inner = self.remote.lock();
                inner.woken.push((self.index, round));
                self.remote.any.store(true, Ordering::Release);
                inner.runner.clone()
            };
            if let Some(w) = runner {
                w.wake();
            }
        }
    }
}

impl Tasks {
    pub(crate) fn new() -> Tasks {
        Tasks {
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            ready: RefCell::new(Vec::new()),
            spare: RefCell::new(Vec::new()),
            live: Cell::new(0),
            remote: Arc::new(Remote {
                any: AtomicBool::new(false),
                inner: Mutex::new(RemoteInner::default()),
            }),
            runner_live: Cell::new(false),
            runner: RefCell::new(None),
            runner_woken: Cell::new(false),
            runner_due: Cell::new(false),
        }
    }

    /// What a waker of this executor points at (compared, never followed).
    pub(crate) fn id(&self) -> *const () {
        Arc::as_ptr(&self.remote).cast()
    }

    /// Futures not yet ended.
    pub(crate) fn live(&self) -> usize {
        self.live.get()
    }

    /// Futures were woken and wait for a poll.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.borrow().is_empty() || self.remote.any.load(Ordering::Acquire)
    }

    /// Takes `fut`: polls it at once (`inside`: the thread is inside the runtime) when `now`,
    /// else queues it for the runner.
    pub(crate) fn start(&self, fut: LocalFuture, now: bool, inside: bool) {
        let index = self.insert(fut);
        if now {
            self.poll_one(index);
        } else {
            let round = self.slots.borrow()[index as usize].round;
            self.wake_here(index, round);
        }
        if inside {
            self.enter();
        }
    }

    /// Puts `fut` in a free slot.
    fn insert(&self, fut: LocalFuture) -> u32 {
        self.live.set(self.live.get() + 1);
        let mut slots = self.slots.borrow_mut();
        let index = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let index = slots.len() as u32;
                let handle = Arc::new(Handle {
                    remote: self.remote.clone(),
                    index,
                    round: AtomicU32::new(0),
                });
                slots.push(Slot {
                    fut: None,
                    taken: false,
                    queued: false,
                    round: 0,
                    waker: Waker::from(handle.clone()),
                    handle,
                });
                index
            }
        };
        let slot = &mut slots[index as usize];
        slot.fut = Some(fut);
        slot.taken = true;
        index
    }

    /// A future of this executor was woken on its thread: queued for the runner once.
    fn wake_here(&self, index: u32, round: u32) {
        {
            let mut slots = self.slots.borrow_mut();
            let Some(slot) = slots.get_mut(index as usize) else {
                return;
            };
            if !slot.taken || slot.round != round || slot.queued {
                return;
            }
            slot.queued = true;
        }
        self.ready.borrow_mut().push(index);
        if self.runner_woken.replace(true) {
            return;
        }
        if super::inside() {
            self.wake_runner();
        } else {
            self.runner_due.set(true);
        }
    }

    /// Wakes the runner (none between its spawn and its first poll, which takes what is
    /// ready).
    fn wake_runner(&self) {
        if let Some(w) = self.runner.borrow().as_ref() {
            w.wake_by_ref();
        }
    }

    /// The thread entered the runtime: the runner is spawned when futures live, and woken
    /// when they were woken outside it.
    pub(crate) fn enter(&self) {
        if self.live.get() == 0 && !self.has_ready() {
            return;
        }
        if !self.runner_live.replace(true) {
            self.runner_woken.set(true);
            self.runner_due.set(false);
            tokio::spawn(std::future::poll_fn(super::run_tasks));
        } else if self.runner_due.replace(false) {
            self.wake_runner();
        }
    }

    /// The runner's turn: takes other threads' wakes, polls what was woken before it began
    /// while tokio's budget for one task poll lasts (the rest first at its next poll), and
    /// says whether it is over (no future lives).
    pub(crate) fn run(&self, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut runner = self.runner.borrow_mut();
            if !runner.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *runner = Some(cx.waker().clone());
                self.remote.lock().runner = Some(cx.waker().clone());
            }
        }
        self.runner_woken.set(false);
        self.runner_due.set(false);
        if self.remote.any.load(Ordering::Acquire) {
            self.take_remote();
        }
        let mut batch = self.spare.take();
        std::mem::swap(&mut batch, &mut *self.ready.borrow_mut());
        let mut polled = 0;
        while polled < batch.len() && tokio::task::coop::has_budget_remaining() {
            self.poll_one(batch[polled]);
            polled += 1;
        }
        if polled < batch.len() {
            // The runner is one tokio task: its futures share one poll's budget. Past it,
            // each would fail at its first tokio operation and defer its wake, behind the
            // futures timers woke meanwhile: polled in vain every pass, the oldest starved
            // for as long as new calls came. The rest stay first in line for the next poll.
            self.requeue_front(&batch[polled..]);
            self.runner_woken.set(true);
            cx.waker().wake_by_ref();
        }
        batch.clear();
        *self.spare.borrow_mut() = batch;
        if self.live.get() > 0 {
            return Poll::Pending;
        }
        self.runner_live.set(false);
        self.runner.borrow_mut().take();
        self.remote.lock().runner = None;
        Poll::Ready(())
    }

    /// Puts `left` (woken, still queued, not polled) back at the head of `ready`, before the
    /// wakes that came while they waited.
    fn requeue_front(&self, left: &[u32]) {
        let mut ready = self.ready.borrow_mut();
        ready.splice(0..0, left.iter().copied());
    }

    /// Other threads' wakes, queued as this thread's.
    fn take_remote(&self) {
        let woken = {
            let mut inner = self.remote.lock();
            self.remote.any.store(false, Ordering::Relaxed);
            std::mem::take(&mut inner.woken)
        };
        for (index, round) in woken {
            self.wake_here(index, round);
        }
    }

    /// Polls the future in `index`, and frees the slot if it ended (or panicked).
    fn poll_one(&self, index: u32) {
        let (mut fut, waker) = {
            let mut slots = self.slots.borrow_mut();
            let slot = &mut slots[index as usize];
            slot.queued = false;
            match slot.fut.take() {
                Some(fut) => (fut, slot.waker.clone()),
                None => return,
            }
        };
        let mut cx = Context::from_waker(&waker);
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
            Ok(Poll::Pending) => {
                self.slots.borrow_mut()[index as usize].fut = Some(fut);
                return;
            }
            Ok(Poll::Ready(())) => {}
            Err(_) => tracing::error!("a future panicked on the worker; dropped"),
        }
        drop(waker);
        // Its drop may wake or start others (no borrow is held), and may panic.
        if catch_unwind(AssertUnwindSafe(move || drop(fut))).is_err() {
            tracing::error!("a future panicked while dropped on the worker");
        }
        self.release(index);
    }

    /// Frees `index` for the next future; its waker is kept when nobody else holds a clone.
    fn release(&self, index: u32) {
        let mut slots = self.slots.borrow_mut();
        let slot = &mut slots[index as usize];
        slot.taken = false;
        slot.queued = false;
        slot.round = slot.round.wrapping_add(1);
        // The slot's `Arc` and the one inside its waker.
        if Arc::strong_count(&slot.handle) == 2 {
            slot.handle.round.store(slot.round, Ordering::Relaxed);
        } else {
            let handle = Arc::new(Handle {
                remote: self.remote.clone(),
                index,
                round: AtomicU32::new(slot.round),
            });
            slot.waker = Waker::from(handle.clone());
            slot.handle = handle;
        }
        drop(slots);
        self.free.borrow_mut().push(index);
        self.live.set(self.live.get() - 1);
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // The futures go first, one at a time, with no borrow held: a drop may wake.
        let mut index = 0;
        loop {
            let fut = {
                let mut slots = self.slots.borrow_mut();
                let Some(slot) = slots.get_mut(index) else {
                    break;
                };
                slot.fut.take()
            };
            if let Some(fut) = fut {
                let _ = catch_unwind(AssertUnwindSafe(move || drop(fut)));
            }
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Poll, Waker};

    use crate::deferred::Spawn;
    use crate::runtime::{self, OnWorker, install_here};

    /// Futures alive on this thread's executor.
    fn live() -> usize {
        super::super::LOCAL.with(|l| l.borrow().as_ref().map_or(0, |l| l.tasks.live()))
    }

    /// A future that counts its polls and waits until `go`; its waker goes to `waker`.
    fn waiting(
        polls: Rc<Cell<u32>>,
        go: Rc<Cell<bool>>,
        waker: Rc<std::cell::RefCell<Option<Waker>>>,
    ) -> impl Future<Output = ()> {
        std::future::poll_fn(move |cx| {
            polls.set(polls.get() + 1);
            *waker.borrow_mut() = Some(cx.waker().clone());
            if go.get() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    #[test]
    fn a_future_woken_from_another_thread_is_polled_on_the_worker_and_its_slot_freed() {
        let _rt = install_here().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let first = Arc::new(AtomicBool::new(true));
        OnWorker.spawn(Box::pin(std::future::poll_fn(move |cx| {
            if first.swap(false, Ordering::Relaxed) {
                tx.send(cx.waker().clone()).unwrap();
                return Poll::Pending;
            }
            d.store(true, Ordering::Relaxed);
            Poll::Ready(())
        })));
        assert_eq!(live(), 1, "it waits after its first poll");
        let waker = rx.recv().unwrap();
        let thread = std::thread::spawn(move || waker.wake());
        runtime::block_on(async {
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        })
        .unwrap();
        thread.join().unwrap();
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(live(), 0);
    }

    #[test]
    fn a_waker_kept_after_its_future_ended_wakes_nothing_in_the_slots_next_future() {
        let _rt = install_here().unwrap();
        // A: ends at its first poll, its waker kept.
        let kept = Rc::new(std::cell::RefCell::new(None));
        let k = kept.clone();
        runtime::spawn_local(std::future::poll_fn(move |cx| {
            *k.borrow_mut() = Some(cx.waker().clone());
            Poll::Ready(())
        }));
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(live(), 0);
        let stale = kept.borrow_mut().take().unwrap();
        // B: the slot's next future, waiting.
        let (polls, go, waker) = Default::default();
        let polls: Rc<Cell<u32>> = polls;
        let go: Rc<Cell<bool>> = go;
        let waker: Rc<std::cell::RefCell<Option<Waker>>> = waker;
        runtime::spawn_local(waiting(polls.clone(), go.clone(), waker.clone()));
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(polls.get(), 1);
        stale.wake_by_ref();
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(polls.get(), 1, "a stale waker polled the slot's new future");
        // B's own waker does.
        go.set(true);
        waker.borrow_mut().take().unwrap().wake();
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(polls.get(), 2);
        assert_eq!(live(), 0);
    }

    #[test]
    fn a_future_woken_twice_before_its_turn_is_polled_once_and_one_woken_in_its_poll_again() {
        let _rt = install_here().unwrap();
        let (polls, go, waker): (Rc<Cell<u32>>, Rc<Cell<bool>>, _) = Default::default();
        let waker: Rc<std::cell::RefCell<Option<Waker>>> = waker;
        runtime::spawn_local(waiting(polls.clone(), go.clone(), waker.clone()));
        runtime::block_on(tokio::task::yield_now()).unwrap();
        let w = waker.borrow().clone().unwrap();
        w.wake_by_ref();
        w.wake_by_ref();
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(polls.get(), 2);
        // Woken during its own poll: polled again, at the runner's next pass.
        let count = Rc::new(Cell::new(0u32));
        let c = count.clone();
        runtime::spawn_local(std::future::poll_fn(move |cx| {
            c.set(c.get() + 1);
            if c.get() < 3 {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            Poll::Ready(())
        }));
        runtime::block_on(async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        })
        .unwrap();
        assert_eq!(count.get(), 3);
        go.set(true);
        w.wake();
        runtime::block_on(tokio::task::yield_now()).unwrap();
        assert_eq!(live(), 0);
    }

    #[test]
    fn a_panicking_future_is_dropped_and_the_others_go_on() {
        let _rt = install_here().unwrap();
        let dropped = Rc::new(Cell::new(false));
        struct Flag(Rc<Cell<bool>>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.set(true);
            }
        }
        let flag = Flag(dropped.clone());
        runtime::spawn_local(async move {
            let _flag = flag;
            tokio::task::yield_now().await;
            panic!("a handler's bug");
        });
        let ran = Rc::new(Cell::new(false));
        let r = ran.clone();
        runtime::spawn_local(async move {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            // Spawned from inside a future: runs too.
            runtime::spawn_local(async move { r.set(true) });
        });
        // Until both are over (a panic's backtrace may take long), at most 10 s.
        runtime::block_on(async {
            for _ in 0..10_000 {
                if live() == 0 {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        })
        .unwrap();
        assert!(dropped.get(), "the panicking future was not dropped");
        assert!(ran.get());
        assert_eq!(live(), 0);
    }

    /// Issue "wstall": 6,400 gRPC calls in flight on one worker, each awaiting a timer, and
    /// some calls went unanswered for seconds. The runner polled every woken future under
    /// one tokio budget (128): past it each failed and deferred its wake, was polled again in
    /// vain next pass, and came back behind the futures timers had woken meanwhile, so the
    /// oldest starved while new calls came. Now a pass stops where the budget does: each
    /// future that spends budget is polled once, in the order it was woken.
    #[test]
    fn futures_past_the_runners_budget_are_not_polled_in_vain_and_keep_their_turn() {
        let _rt = install_here().unwrap();
        const N: u32 = 1_000;
        let polls = Rc::new(Cell::new(0u32));
        let order = Rc::new(std::cell::RefCell::new(Vec::new()));
        for i in 0..N {
            let polls = polls.clone();
            let order = order.clone();
            let mut budget = Box::pin(tokio::task::coop::consume_budget());
            runtime::spawn_local(std::future::poll_fn(move |cx| {
                polls.set(polls.get() + 1);
                let ready = budget.as_mut().poll(cx);
                if ready.is_ready() {
                    order.borrow_mut().push(i);
                }
                ready
            }));
        }
        // Bounded: each turn ends at least 128 of them.
        for _ in 0..N {
            if live() == 0 {
                break;
            }
            runtime::block_on(tokio::task::yield_now()).unwrap();
        }
        assert_eq!(live(), 0, "every future ended");
        assert_eq!(
            polls.get(),
            N,
            "a future was polled past the runner's budget"
        );
        let ended = order.borrow();
        assert!(
            ended.windows(2).all(|w| w[0] < w[1]),
            "futures ended out of the order they were woken in"
        );
    }
}
