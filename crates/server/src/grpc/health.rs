//! The standard health service, `grpc.health.v1.Health` (gRPC's doc/health-checking.md):
//! [`Health`], a handle the application keeps to set each service's serving status at run
//! time (`""` is the server as a whole), and serves with `Router::grpc(health.clone())`.
//!
//! Owns the statuses and their watchers; `Check` answers the current status (an unknown
//! service is NOT_FOUND), `Watch` streams it and each change (an unknown service is
//! SERVICE_UNKNOWN, and the stream stays open until the client leaves). Never blocks the
//! worker: a watcher waits on a `Notify` and on its client's leaving (a closed connection
//! wakes it; a reset stream alone shows at the next change, when the send fails).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use linerate_grpc::proto::grpc::health::v1::{
    HealthCheckRequest, HealthCheckResponse, health_methods,
};
use tokio::sync::Notify;

pub use linerate_grpc::proto::grpc::health::v1::health_check_response::ServingStatus;

use super::{Code, Method, Request, Response, Service, Sink, Status};

/// The health service and the handle that sets its statuses (clones share them). A new one
/// reports the server (`""`) SERVING and knows no other service.
#[derive(Clone, Debug)]
pub struct Health {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    statuses: Mutex<HashMap<String, ServingStatus>>,
    /// Woken at each change; a watcher then reads its service's status again.
    changed: Notify,
    /// Open Watch calls.
    watchers: AtomicUsize,
}

impl Default for Health {
    fn default() -> Health {
        Health::new()
    }
}

impl Health {
    /// A health service reporting the server (`""`) SERVING.
    pub fn new() -> Health {
        let health = Health {
            shared: Arc::new(Shared::default()),
        };
        health.set("", ServingStatus::Serving);
        health
    }

    /// Sets `service`'s status (`""`: the server as a whole); watchers see the change.
    pub fn set(&self, service: &str, status: ServingStatus) {
        self.statuses().insert(service.to_string(), status);
        self.shared.changed.notify_waiters();
    }

    /// Forgets `service`: `Check` answers NOT_FOUND, `Watch` SERVICE_UNKNOWN.
    pub fn remove(&self, service: &str) {
        self.statuses().remove(service);
        self.shared.changed.notify_waiters();
    }

    /// `service`'s status; `None` when unknown.
    pub fn get(&self, service: &str) -> Option<ServingStatus> {
        self.statuses().get(service).copied()
    }

    fn statuses(&self) -> std::sync::MutexGuard<'_, HashMap<String, ServingStatus>> {
        // A panic while holding the map leaves it whole (each change is one insert).
        self.shared
            .statuses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn check(&self, req: &HealthCheckRequest) -> Result<Response<HealthCheckResponse>, Status> {
        match self.get(&req.service) {
            Some(status) => Ok(Response::new(HealthCheckResponse {
                status: status as i32,
            })),
            None => Err(Status::new(
                Code::NotFound,
                format!("unknown service {:?}", req.service),
            )),
        }
    }

    /// Sends the status now and at each change until the client leaves.
    async fn watch(
        &self,
        service: &str,
        out: &mut Sink<HealthCheckResponse>,
    ) -> Result<(), Status> {
        let _watching = Watching::new(&self.shared.watchers);
        let mut last = None;
        loop {
            // Made before the status is read, so a change in between still wakes it.
            let changed = self.shared.changed.notified();
            let now = self.get(service).unwrap_or(ServingStatus::ServiceUnknown);
            if last != Some(now) {
                out.send(&HealthCheckResponse { status: now as i32 })
                    .await?;
                last = Some(now);
            }
            // A reset stream wakes nobody else: wait on the client's leaving too.
            let mut changed = pin!(changed);
            let mut gone = pin!(out.cancelled());
            let left = poll_fn(|cx| {
                if gone.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(true);
                }
                changed.as_mut().poll(cx).map(|()| false)
            })
            .await;
            if left {
                return Err(super::stream::cancelled());
            }
        }
    }

    /// How many Watch calls are open now.
    pub fn watchers(&self) -> usize {
        self.shared.watchers.load(Ordering::Relaxed)
    }
}

/// Counts an open Watch for as long as it lives.
struct Watching<'a>(&'a AtomicUsize);

impl<'a> Watching<'a> {
    fn new(count: &'a AtomicUsize) -> Watching<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Watching(count)
    }
}

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Service for Health {
    fn name(&self) -> &'static str {
        health_methods::SERVICE.name
    }

    fn methods(self) -> Vec<Method> {
        let check = self.clone();
        vec![
            Method::unary(
                health_methods::CHECK.path,
                move |req: Request<HealthCheckRequest>| {
                    std::future::ready(check.check(req.get_ref()))
                },
            ),
            Method::server_streaming(
                health_methods::WATCH.path,
                move |req: Request<HealthCheckRequest>, mut out| {
                    let health = self.clone();
                    async move {
                        let outcome = health.watch(&req.get_ref().service, &mut out).await;
                        (outcome, out)
                    }
                },
            ),
        ]
    }
}
