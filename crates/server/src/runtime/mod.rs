//! Each worker's tokio runtime: a current-thread runtime made on the worker's thread and
//! driven by the worker's own loop, so that an `async` handler run by [`OnWorker`] finds a
//! tokio context (timers, `tokio::net`, reqwest, tokio-based SDKs) with no thread hop.
//!
//! Owns the runtime, the futures [`OnWorker`] and [`spawn_local`] hand it (kept and polled by
//! the worker's own executor, `tasks.rs`), the values made once per runtime ([`PerWorker`],
//! `per_worker.rs`), and the two ways the worker's loop
//! lets it run: `Local::turn` (run what is ready, without waiting) and `Local::park` (wait
//! for the worker's own epoll instance, a deadline or an answer, inside the runtime, so that
//! tokio's I/O and timers wake the thread too). A worker whose runtime has no task never
//! enters it: it waits in its own `epoll_wait`, as before, and pays one thread-local test per
//! turn. Knows nothing of HTTP.
#![forbid(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::unix::AsyncFd;

use crate::deferred::{BoxFuture, Spawn};

mod per_worker;
mod tasks;

pub use per_worker::PerWorker;
use per_worker::States;
use tasks::Tasks;

thread_local! {
    /// This thread's worker runtime, while a worker (or the test client) serves on it.
    static LOCAL: RefCell<Option<Rc<Local>>> = const { RefCell::new(None) };
    /// What the wakers of `LOCAL`'s executor point at ([`Tasks::id`]; null with none): a wake
    /// on this thread for that executor is a push on its list.
    static HERE: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    /// A future was handed to this thread's runtime: from then on the worker's loop asks it
    /// for work each turn (read once per turn, so a worker that never uses it pays that only).
    static USED: Cell<bool> = const { Cell::new(false) };
    /// The thread is inside its runtime (a turn, a park or [`block_on`]): the executor's
    /// runner is a task there, woken at once.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
    /// The worker parked in its runtime: an answer given on this thread wakes it.
    static PARKED: RefCell<Option<Waker>> = const { RefCell::new(None) };
}

/// Installs `local` as this thread's runtime (`None`: none), returning what was there.
fn set_local(local: Option<Rc<Local>>) -> Option<Rc<Local>> {
    HERE.with(|h| h.set(local.as_ref().map_or(std::ptr::null(), |l| l.tasks.id())));
    LOCAL.with(|l| std::mem::replace(&mut *l.borrow_mut(), local))
}

/// Runs `f` on this thread's executor when it is the one `id` names.
fn with_here<R>(id: *const (), f: impl FnOnce(&Tasks) -> R) -> Option<R> {
    if HERE.with(Cell::get) != id.cast() {
        return None;
    }
    LOCAL.with(|l| l.borrow().as_ref().map(|local| f(&local.tasks)))
}

/// Whether the thread is inside its runtime.
fn inside() -> bool {
    INSIDE.with(Cell::get)
}

/// The executor's runner, a task of the runtime: polls this thread's woken futures.
fn run_tasks(cx: &mut Context<'_>) -> Poll<()> {
    match LOCAL.with(|l| l.borrow().clone()) {
        Some(local) => local.tasks.run(cx),
        None => Poll::Ready(()),
    }
}

/// One worker's runtime and the futures it runs.
pub(crate) struct Local {
    /// The futures [`OnWorker`] and [`spawn_local`] handed the worker: polled on its thread
    /// by an executor of its own, woken by tokio's timers and sockets.
    tasks: Tasks,
    /// The worker's epoll instance (a duplicate), watched by the runtime's reactor while the
    /// worker is parked in it; registered at the first park.
    watched: RefCell<Option<AsyncFd<OwnedFd>>>,
    /// The timer a park with a deadline waits on, kept armed from one park to the next and
    /// moved only when the deadline does: registering a timer while none is armed makes tokio
    /// wake its own reactor (an eventfd write, then a wait that returns at once), two
    /// syscalls on every park when each made a new `Sleep`.
    timer: RefCell<Option<Pin<Box<tokio::time::Sleep>>>>,
    /// The [`PerWorker`] values made for this runtime: dropped with it, before it.
    states: States,
    /// Declared last, so dropped last: the futures and the registration above go first.
    rt: tokio::runtime::Runtime,
}

impl Local {
    /// Makes a runtime for this thread.
    pub(crate) fn new() -> std::io::Result<Rc<Local>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Rc::new(Local {
            rt,
            tasks: Tasks::new(),
            watched: RefCell::new(None),
            timer: RefCell::new(None),
            states: States::default(),
        }))
    }

    /// Makes this thread's runtime and installs it, for [`OnWorker`] and [`block_on`].
    pub(crate) fn install() -> std::io::Result<Rc<Local>> {
        let local = Local::new()?;
        set_local(Some(local.clone()));
        Ok(local)
    }

    /// Runs `f` with this runtime installed and entered on this thread (the test client's
    /// exchanges), then puts back what was installed before.
    pub(crate) fn serving<R>(self: &Rc<Local>, f: impl FnOnce() -> R) -> R {
        let before = set_local(Some(self.clone()));
        let result = {
            let _enter = self.rt.enter();
            f()
        };
        set_local(before);
        result
    }

    /// The runtime's handle: enter it for the thread's whole service, so that a handler's
    /// first poll (inline, outside the runtime) finds a tokio context.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.handle()
    }

    /// Whether futures were ever handed to this thread's runtime.
    #[inline(always)]
    pub(crate) fn used() -> bool {
        USED.with(Cell::get)
    }

    /// Whether the runtime has work: futures alive (waiting on tokio's timers or I/O, or
    /// ready to run), or tasks of tokio's own.
    pub(crate) fn busy(&self) -> bool {
        self.tasks.live() > 0 || self.rt.metrics().num_alive_tasks() > 0
    }

    /// Runs what is ready — woken futures, tokio's tasks, timers and I/O — and returns
    /// without waiting.
    pub(crate) fn turn(self: &Rc<Local>) {
        self.run(tokio::task::yield_now());
    }
    /// Has the runtime's reactor watch `epoll` (the worker's own instance) while the worker
    /// is parked in it.
    pub(crate) fn watch(&self, epoll: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
        let _enter = self.rt.enter();
        let afd = crate::sys::watch_in_tokio(epoll.try_clone_to_owned()?)?;
        *self.watched.borrow_mut() = Some(afd);
        Ok(())
    }

    /// Waits inside the runtime, running what is ready meanwhile, until the watched epoll
    /// instance has events, `timeout` passes (`None`: no limit), `ready` says an answer is
    /// waiting (asked at each wake, with the waker an answer from another thread should
    /// wake), or an answer is given on this thread. Returns whether the watched instance has
    /// events (or may have: then the worker takes them without waiting).
    ///
    /// The wait is asked first and what is ready runs after it (tokio polls the future it
    /// blocks on before its tasks), so a park costs one `epoll_wait` of tokio's when it
    /// blocks, none when `ready` holds at once; the worker's own instance is read after it
    /// only when it has events.
    pub(crate) fn park(
        self: &Rc<Local>,
        timeout: Option<Duration>,
        mut ready: impl FnMut(&Waker) -> bool,
    ) -> bool {
        let watched = self.watched.borrow();
        let mut timer = self.timer.borrow_mut();
        self.run(async {
            let mut timer = timeout.map(|t| arm(&mut timer, tokio::time::Instant::now() + t));
            let woke = std::future::poll_fn(|cx| {
                PARKED.with(|p| *p.borrow_mut() = Some(cx.waker().clone()));
                if ready(cx.waker()) {
                    return Poll::Ready(false);
                }
                if let Some(afd) = watched.as_ref()
                    && let Poll::Ready(got) = afd.poll_read_ready(cx)
                {
                    // Edge-triggered in tokio's reactor: the worker's wait that follows takes
                    // what is there; a stale readiness costs one empty turn.
                    if let Ok(mut guard) = got {
                        guard.clear_ready();
                    }
                    return Poll::Ready(true);
                }
                if let Some(t) = timer.as_mut()
                    && t.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(false);
                }
                Poll::Pending
            })
            .await;
            PARKED.with(|p| p.borrow_mut().take());
            woke
        })
    }

    /// Runs `fut` to its end in the runtime, with the worker's futures (installed on this
    /// thread for the while, so that its runner finds them).
    fn run<F: Future>(self: &Rc<Local>, fut: F) -> F::Output {
        let swapped = !LOCAL.with(|l| l.borrow().as_ref().is_some_and(|l| Rc::ptr_eq(l, self)));
        let before = swapped.then(|| set_local(Some(self.clone())));
        let outside = !INSIDE.with(|i| i.replace(true));
        let out = self.rt.block_on(async {
            self.tasks.enter();
            fut.await
        });
        if outside {
            INSIDE.with(|i| i.set(false));
        }
        if let Some(before) = before {
            set_local(before);
        }
        out
    }
}

/// Most a kept timer may come due before the deadline a park asks for and still be used
/// as it is (the worker's deadlines are whole milliseconds, read from another clock): waking
/// that much early costs one more turn of the loop; a timer due later is always moved.
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// The kept timer, armed for `deadline`: as it is when it comes due no later than
/// `deadline` and at most [`TIMER_SLACK`] before it and has not fired, moved otherwise,
/// made on the first park (in the runtime: a timer belongs to the runtime current there).
fn arm(
    timer: &mut Option<Pin<Box<tokio::time::Sleep>>>,
    deadline: tokio::time::Instant,
) -> Pin<&mut tokio::time::Sleep> {
    match timer {
        Some(t) => {
            let due = t.deadline();
            if due > deadline || due + TIMER_SLACK < deadline || t.is_elapsed() {
                t.as_mut().reset(deadline);
            }
        }
        None => *timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
    }
    timer.as_mut().expect("armed above").as_mut()
}

/// A worker runtime installed on a thread that stands in for a worker (a test driving a
/// library's worker-side code, a tool): [`OnWorker`], [`spawn_local`] and [`block_on`] use it
/// on this thread; [`block_on`] drives it. Dropped, it is uninstalled with its tasks.
pub struct Installed(Rc<Local>);

impl Installed {
    /// Enters the runtime's context (tokio's types need it outside [`block_on`], as a
    /// future's first poll in [`OnWorker`] is).
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.0.rt.enter()
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        uninstall();
    }
}

impl std::fmt::Debug for Installed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Installed")
    }
}

/// Installs a worker runtime on this thread (see [`Installed`]).
pub fn install_here() -> std::io::Result<Installed> {
    Local::install().map(Installed)
}

/// Uninstalls this thread's runtime (its tasks are dropped with it).
pub(crate) fn uninstall() {
    let local = set_local(None);
    drop(local);
}

/// An answer was given on this thread: a worker parked in its runtime goes back to its loop.
pub(crate) fn wake_parked() {
    PARKED.with(|p| {
        if let Some(w) = p.borrow().as_ref() {
            w.wake_by_ref();
        }
    });
}

/// Runs futures on the HTTP worker that took the request, in that worker's tokio runtime:
/// the spawner for [`Router::route_async`](crate::Router::route_async) and `get_async`…
/// when handlers should stay on the worker's thread (no thread hop, no lock) and still use
/// tokio (timers, `tokio::net`, reqwest, tokio-based clients).
///
/// A future is polled once at once, where the handler was called: one that awaits nothing
/// answers in that poll. One that waits stays on the worker's own executor, polled again
/// on the worker's thread when tokio's timers or sockets (or anything else) wake it, while
/// the worker drives its current-thread runtime between its own events. It runs on that
/// worker only: what blocks the thread blocks the worker's connections too, so CPU-heavy
/// or blocking work belongs in `tokio::task::spawn_blocking`. (`tokio::spawn` inside it
/// makes a task of that runtime, as usual; `tokio::task::spawn_local` has no `LocalSet`
/// there: use [`spawn_local`].)
///
/// On a thread that is no worker of this server (start-up code, a thread of the
/// application's), the future goes to the tokio runtime current there, if any; with none it
/// is dropped and an error logged (a handler's future dropped unanswered answers 500).
#[derive(Clone, Copy, Debug, Default)]
pub struct OnWorker;

impl Spawn for OnWorker {
    fn spawn(&self, fut: BoxFuture) {
        spawn(fut);
    }
}

/// Polls `fut` once on this thread, and keeps it on the worker's executor if it waits.
fn spawn(fut: BoxFuture) {
    let local = LOCAL.with(|l| l.borrow().clone());
    let Some(local) = local else {
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(fut);
            }
            Err(_) => tracing::error!("OnWorker: not on a worker thread nor in a tokio runtime"),
        }
        return;
    };
    USED.with(|u| u.set(true));
    local.tasks.start(fut, true, inside());
}

/// Runs `fut` on this thread's worker runtime (it need not be `Send`: it stays on this
/// worker), first polled at the runtime's next turn: for a library's own work beside the
/// handlers, such as a database connection's task. Returns false, dropping `fut`, on a
/// thread with no worker runtime.
pub fn spawn_local(fut: impl Future<Output = ()> + 'static) -> bool {
    let local = LOCAL.with(|l| l.borrow().clone());
    let Some(local) = local else {
        return false;
    };
    USED.with(|u| u.set(true));
    local.tasks.start(Box::pin(fut), false, inside());
    true
}

/// Runs `f` with this thread's worker runtime's [`PerWorker`] values; `None` with no worker
/// runtime here. No borrow of the thread's runtime is held while `f` runs.
fn with_states<R>(f: impl FnOnce(&States) -> R) -> Option<R> {
    let local = LOCAL.with(|l| l.borrow().clone())?;
    Some(f(&local.states))
}

/// Whether this thread has a worker runtime ([`OnWorker`] and [`spawn_local`] run there).
pub fn on_worker() -> bool {
    LOCAL.with(|l| l.borrow().is_some())
}

/// Runs `fut` to its end on this worker's runtime: for start-up work on a worker's thread
/// (opening connections before it serves, see [`Server::with_worker_start`]). `None` on a
/// thread with no worker runtime.
///
/// [`Server::with_worker_start`]: crate::Server::with_worker_start
pub fn block_on<F: Future>(fut: F) -> Option<F::Output> {
    let local = LOCAL.with(|l| l.borrow().clone())?;
    Some(local.run(fut))
}

/// A worker's start-up work on its own thread, in its runtime's context, before it serves:
/// given the worker's index; an error ends that worker (see [`Server::with_worker_start`]).
///
/// [`Server::with_worker_start`]: crate::Server::with_worker_start
pub type WorkerStart = std::sync::Arc<dyn Fn(usize) -> std::io::Result<()> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's `write` syscalls so far (Linux counts them per thread).
    fn writes_here() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").expect("/proc/thread-self/io");
        io.lines()
            .find_map(|l| l.strip_prefix("syscw: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("a syscw line")
    }

    /// One park that waits on its timer, then is woken by an answer (`ready` on its second
    /// ask): the timer is polled, so it is registered with tokio's driver.
    fn park_until_answered(local: &Rc<Local>, timeout: Duration) -> bool {
        let mut asked = 0;
        local.park(Some(timeout), |waker| {
            asked += 1;
            if asked == 1 {
                waker.wake_by_ref();
            }
            asked > 1
        })
    }

    #[test]
    fn parks_with_the_same_deadline_keep_one_timer_and_wake_no_reactor() {
        // Each park made a new tokio `Sleep`: registering it, with no timer armed, made
        // tokio write to its eventfd (and its next wait return at once for nothing), on
        // every park of a worker waiting for its database.
        let local = Local::install().unwrap();
        assert!(!park_until_answered(&local, Duration::from_secs(60)));
        let before = writes_here();
        for _ in 0..20 {
            assert!(!park_until_answered(&local, Duration::from_secs(60)));
        }
        assert_eq!(writes_here() - before, 0, "a park wrote to tokio's eventfd");
        uninstall();
    }

    #[test]
    fn a_kept_timer_is_moved_for_a_nearer_deadline() {
        let local = Local::install().unwrap();
        park_until_answered(&local, Duration::from_secs(60));
        let far = local.timer.borrow().as_ref().unwrap().deadline();
        park_until_answered(&local, Duration::from_secs(1));
        let near = local.timer.borrow().as_ref().unwrap().deadline();
        assert!(
            near < far,
            "the timer must not come due after the deadline asked"
        );
        uninstall();
    }
}
