//! `TestClient::grpc_channel`: a gRPC client [`Transport`] whose calls the test client's own
//! engine serves, as HTTP/2 requests through the server's connection state machine (the
//! same path as `TestClient::http2`), and a small executor to drive them on the test's
//! thread.
//!
//! Owns the seam only: the call's request body is collected to its end, sent as one HTTP/2
//! request, and the answer's head, body and trailers handed back as the client's events. The
//! engine is not `Send`: a channel (which is) finds its engine through this thread's list,
//! so a call polled on another thread, or after its `TestClient` is gone, fails UNAVAILABLE.
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::future::Future;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;

use super::client::Protocol;
use super::engine::Engine;
use super::wire::{H2Wire, Outgoing};
use crate::grpc::client::{CallIo, CallWork, Channel, Down, Transport, Up};
use crate::grpc::{Code, Status};

/// The engine and time limit of each test client with a channel on this thread.
type Clients = Vec<(u64, Weak<RefCell<Engine>>, Duration)>;

thread_local! {
    static CLIENTS: RefCell<Clients> = const { RefCell::new(Vec::new()) };
}

/// Channel ids, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A channel to `engine`, each exchange within `limit`.
pub(super) fn channel(engine: &Rc<RefCell<Engine>>, limit: Duration) -> Channel {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    CLIENTS.with(|c| {
        let mut c = c.borrow_mut();
        c.retain(|(_, engine, _)| engine.strong_count() > 0);
        c.push((id, Rc::downgrade(engine), limit));
    });
    Channel::from_transport(InProcess { id })
}

/// The transport: the id of its client on the thread that made it.
struct InProcess {
    id: u64,
}

impl Transport for InProcess {
    fn start(&self, call: CallIo) -> CallWork {
        Some(Box::pin(serve(self.id, call)))
    }
}

/// Serves one call once its request body is whole.
async fn serve(id: u64, mut call: CallIo) {
    let mut body = Vec::new();
    while let Some(Up::Data(piece)) = call.up.recv().await {
        body.extend_from_slice(&piece);
    }
    let found = CLIENTS.with(|c| {
        c.borrow()
            .iter()
            .find(|(i, _, _)| *i == id)
            .and_then(|(_, engine, limit)| Some((engine.upgrade()?, *limit)))
    });
    let Some((engine, limit)) = found else {
        call.fail(Status::new(
            Code::Unavailable,
            "a TestClient's gRPC channel is served on its client's thread, while it lives",
        ));
        return;
    };
    let req = Outgoing {
        method: "POST",
        target: &call.path,
        headers: &call.fields,
        body: &body,
    };
    let mut wire = H2Wire::new(&req);
    let Ok(mut engine) = engine.try_borrow_mut() else {
        call.fail(Status::new(
            Code::Unavailable,
            "the TestClient is serving another exchange",
        ));
        return;
    };
    let answer = engine.exchange(Protocol::Http2, &mut wire, limit);
    drop(engine);
    let resp = match answer {
        Ok(resp) => resp,
        Err(e) => {
            call.fail(Status::new(Code::Unavailable, e.to_string()));
            return;
        }
    };
    let fields = |list: &[(String, String)]| -> Vec<(Vec<u8>, Vec<u8>)> {
        list.iter()
            .map(|(n, v)| (n.to_ascii_lowercase().into_bytes(), v.clone().into_bytes()))
            .collect()
    };
    let _ = call
        .down
        .send(Down::Head(resp.status(), fields(resp.headers())));
    if !resp.body().is_empty() {
        let _ = call
            .down
            .send(Down::Data(Bytes::copy_from_slice(resp.body())));
    }
    if !resp.trailers().is_empty() {
        let _ = call.down.send(Down::Trailers(fields(resp.trailers())));
    }
    let _ = call.down.send(Down::End);
}

/// Wakes the thread that waits in [`block_on`].
struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on this thread, parking between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}
