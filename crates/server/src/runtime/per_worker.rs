//! [`PerWorker`]: a value made once per worker runtime (a pooled HTTP client, a database
//! client, a cache of the worker's own), for `async` handlers run by [`OnWorker`].
//!
//! Owns the values' keeping: each lives in its runtime's `Local` (`States`) and is dropped
//! with it, so a value never outlives the runtime its sockets and timers were registered
//! with. A `thread_local!` cannot promise that: a test thread runs one runtime per
//! [`TestClient`](crate::testing::TestClient), and a client kept per thread held connections
//! of the previous client's runtime, gone with it.
//!
//! [`OnWorker`]: crate::OnWorker
#![forbid(unsafe_code)]

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells [`PerWorker`]s apart in a runtime's [`States`].
static IDS: AtomicU64 = AtomicU64::new(1);

/// The values one worker runtime holds, by [`PerWorker`] id: a handful per application, so a
/// list searched in order.
#[derive(Default)]
pub(crate) struct States(RefCell<Vec<(u64, Rc<dyn Any>)>>);

impl States {
    fn find(&self, id: u64) -> Option<Rc<dyn Any>> {
        self.0
            .borrow()
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| v.clone())
    }

    /// Keeps `value` under `id` unless one is there already (made meanwhile by a `make`
    /// that asked for it itself); the one kept.
    fn keep(&self, id: u64, value: Rc<dyn Any>) -> Rc<dyn Any> {
        if let Some(there) = self.find(id) {
            return there;
        }
        self.0.borrow_mut().push((id, value.clone()));
        value
    }
}

/// A value of type `T` made once per worker runtime, on first use there, by the function
/// given to [`PerWorker::new`]; dropped with that runtime. Each HTTP worker has its own, and
/// so does each [`TestClient`](crate::testing::TestClient) (its runtime stands in for a
/// worker's), so that what the value holds (a pool's connections, a timer) always belongs to
/// the runtime the handler runs on.
///
/// Clone it into the handlers that use it (clones share the function and the values). Use it
/// where the handler runs (its closure, on the worker), and move what the future needs into
/// it: [`PerWorker::get`] hands out a clone (for `T` such as `reqwest::Client`, itself a
/// handle), [`PerWorker::with`] a borrow.
///
/// ```
/// use linerate_server::runtime::PerWorker;
/// use linerate_server::{OnWorker, OwnedRequest, Response, Router};
///
/// #[derive(Clone)]
/// struct Client; // a pooled client, such as reqwest::Client
///
/// let client = PerWorker::new(|| Client); // made on each worker when first used
/// let router = Router::new().get_async("/up", OnWorker, move |_req: OwnedRequest| {
///     let _client = client.get(); // this worker's
///     async move { Response::text("ok") }
/// });
/// ```
///
/// On a thread with no worker runtime (start-up code, another runtime's thread) there is no
/// worker to keep a value for: `get` and `with` make one for that call alone.
pub struct PerWorker<T> {
    id: u64,
    make: Arc<dyn Fn() -> T + Send + Sync>,
}

impl<T: 'static> PerWorker<T> {
    /// Values made by `make`, one per worker runtime, when first asked for there.
    pub fn new(make: impl Fn() -> T + Send + Sync + 'static) -> PerWorker<T> {
        PerWorker {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            make: Arc::new(make),
        }
    }

    /// Runs `f` with this worker runtime's value (made now if it is the first use here).
    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let kept = super::with_states(|states| {
            states.find(self.id).unwrap_or_else(|| {
                // Made with no borrow held: `make` may use other `PerWorker`s.
                let made: Rc<dyn Any> = Rc::new((self.make)());
                states.keep(self.id, made)
            })
        });
        match kept {
            Some(value) => match value.downcast_ref::<T>() {
                Some(value) => f(value),
                None => unreachable!("a PerWorker's id holds its own type"),
            },
            None => f(&(self.make)()),
        }
    }

    /// A clone of this worker runtime's value (made now if it is the first use here).
    pub fn get(&self) -> T
    where
        T: Clone,
    {
        self.with(T::clone)
    }
}

impl<T> Clone for PerWorker<T> {
    fn clone(&self) -> PerWorker<T> {
        PerWorker {
            id: self.id,
            make: self.make.clone(),
        }
    }
}

impl<T> std::fmt::Debug for PerWorker<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerWorker").field("id", &self.id).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn one_value_per_runtime_made_on_first_use_and_dropped_with_it() {
        thread_local! {
            static MADE: Cell<u32> = const { Cell::new(0) };
        }
        let counter = PerWorker::new(|| {
            MADE.set(MADE.get() + 1);
            Rc::new(Cell::new(0u32))
        });
        // No runtime here: a value for the call alone.
        counter.with(|c| c.set(c.get() + 1));
        counter.with(|c| assert_eq!(c.get(), 0));
        assert_eq!(MADE.get(), 2);

        for round in 0..2 {
            let local = super::super::Local::install().unwrap();
            let weak = Rc::downgrade(&counter.get());
            let again = counter.clone();
            for _ in 0..3 {
                again.with(|c| c.set(c.get() + 1));
            }
            assert_eq!(counter.get().get(), 3, "round {round}: one value, kept");
            assert_eq!(MADE.get(), 3 + round, "made once in this runtime");
            super::super::uninstall();
            drop(local);
            assert!(weak.upgrade().is_none(), "dropped with its runtime");
        }
    }

    #[test]
    fn make_may_use_another_per_worker() {
        let base = PerWorker::new(|| 40u32);
        let inner = base.clone();
        let sum = PerWorker::new(move || inner.get() + 2);
        let _local = super::super::Local::install().unwrap();
        assert_eq!(sum.get(), 42);
        super::super::uninstall();
    }
}
