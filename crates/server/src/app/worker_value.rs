//! Per-worker values as a feature of the router: [`Router::with_worker_value`] gives the
//! function that makes one (a pooled HTTP client, a database client), and handlers reach
//! this worker's value with [`Request::worker_value`] or the [`Worker`] extractor.
//!
//! Owns the link from the router to [`PerWorker`]: the function is kept in the
//! application's state, and each value lives in the runtime of the worker that asked for it
//! (a `TestClient`'s runtime stands in for a worker's), made on first use there and dropped
//! with it, so a value never holds sockets or timers of another runtime.
#![forbid(unsafe_code)]

use crate::app::extractors::{FromRequestParts, missing};
use crate::extract::Rejection;
use crate::request::Request;
use crate::router::Router;
use crate::runtime::PerWorker;

/// The function making the per-worker values of type `T`, kept in the application's state
/// under its own type (so a state of type `PerWorker<T>` of the application's is another).
struct WorkerValue<T>(PerWorker<T>);

impl Router {
    /// Gives `make`, which makes a value of type `T` once per worker runtime (each HTTP
    /// worker's, each [`TestClient`](crate::testing::TestClient)'s), on its first use there;
    /// handlers, sync and `async`, and layers read this worker's with
    /// [`Request::worker_value`] or the [`Worker`] extractor. One function per type; a
    /// group's joins the application's as its state does.
    ///
    /// On the router rather than the [`Server`](crate::Server): a `TestClient` serves a
    /// router with no server, and the value is made again for each client's runtime.
    ///
    /// ```
    /// use linerate_server::testing::TestClient;
    /// use linerate_server::{Router, Worker, handler};
    ///
    /// #[derive(Clone)]
    /// struct Client { id: u32 } // a pooled client, such as reqwest::Client
    ///
    /// let app = Router::new()
    ///     .get("/id", handler(|Worker(c): Worker<Client>| c.id.to_string()))
    ///     .get("/again", |req| req.worker_value::<Client>().id.to_string())
    ///     .with_worker_value(|| Client { id: 7 });
    /// let client = TestClient::new(app);
    /// assert_eq!(client.get("/id").send().text(), "7");
    /// assert_eq!(client.get("/again").send().text(), "7");
    /// ```
    pub fn with_worker_value<T: 'static>(
        self,
        make: impl Fn() -> T + Send + Sync + 'static,
    ) -> Router {
        self.with_state(WorkerValue(PerWorker::new(make)))
    }
}

impl<'a> Request<'a> {
    /// A clone of this worker runtime's value of type `T` (made now if it is the first use
    /// here), given with [`Router::with_worker_value`]: for `T` a handle such as
    /// `reqwest::Client`, a reference count.
    ///
    /// # Panics
    /// When the router was given no worker value of type `T`: a programming error, which
    /// the handler's panic rail answers 500 with a log line naming the type (as
    /// [`Request::state`]).
    pub fn worker_value<T: Clone + 'static>(&self) -> T {
        match self.ctx.state().get::<WorkerValue<T>>() {
            Some(value) => value.0.get(),
            None => panic!(
                "no worker value of type {} (give it with Router::with_worker_value)",
                std::any::type_name::<T>()
            ),
        }
    }
}

/// A clone of this worker runtime's value of type `T` ([`Router::with_worker_value`]). 500
/// when the router has none of that type (a programming error, logged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Worker<T>(pub T);

impl<T> std::ops::Deref for Worker<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Worker<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Clone + 'static> FromRequestParts for Worker<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        match req.ctx.state().get::<WorkerValue<T>>() {
            Some(value) => Ok(Worker(value.0.get())),
            None => Err(missing("worker value", std::any::type_name::<T>())),
        }
    }
}
