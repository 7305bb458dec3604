//! Work given up for requests whose streams ended before their answers: reset by the client
//! (RST_STREAM, RESET_STREAM, STOP_SENDING), reset by the server for a frame the client sent
//! (MadeYouReset), or dropped with their failed connection. The connections list them in
//! [`Cx::cancelled`](crate::h1::Cx::cancelled) during a call; here, right after it, each
//! request's deferred handler is given up (its `Responder` is cancelled, an `async` one's
//! future dropped) and its proxied exchange abandoned wherever it is (`cancel_exchange`:
//! routed this turn, waiting for a connection, parked on a cache flight, or in flight).
//!
//! Invariant: a cancelled request never starts upstream work after its cancellation, so a
//! client that opens and resets streams (and reconnects) costs the upstream nothing.
#![forbid(unsafe_code)]

use super::backend::{Backend, Token};
use super::{Shared, Worker};

impl<B: Backend> Worker<B> {
    /// Gives up the work of the requests connection `token` cancelled during this call.
    #[cold]
    #[inline(never)]
    pub(super) fn cancel_work(&mut self, token: Token, sh: &Shared) {
        let mut ids = std::mem::take(&mut self.io.cx.cancelled);
        for &id in &ids {
            if let Some(waiting) = self.io.app.waiting.remove(&(token, id)) {
                waiting.cancel.give_up();
            }
            self.cancel_exchange(token, id, sh);
        }
        ids.clear();
        self.io.cx.cancelled = ids;
    }
}
