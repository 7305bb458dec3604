//! The worker's outbound side in a build without the `proxy` feature: no upstream connection
//! can be made. `UpLive` and `Relays` cannot be made, so no slot holds one and no client
//! connection has relays; `is_up` is false, so the completion arms' bit test goes at compile
//! time and every path into the proxy is dead code the compiler drops. A configuration with
//! upstreams or proxy mounts is refused at start (`crate::features`).
//!
//! Each item has its counterpart's signature in upstream.rs.
#![forbid(unsafe_code)]

use std::convert::Infallible;

use super::backend::{Backend, Completion, Token};
use super::{Shared, Worker};

/// No token is an upstream connection's: there are none.
#[inline(always)]
pub(super) const fn is_up(_token: Token) -> bool {
    false
}

/// Cannot be made: no upstream connection carries an answer.
pub(super) struct Relays(pub Vec<Token>, Infallible);

/// Cannot be made: no slot holds an upstream connection.
pub(super) enum UpLive {}

/// No pools: nothing to check, ever.
pub(super) struct Pools {
    pub(super) next_check: u64,
}

impl Default for Pools {
    fn default() -> Pools {
        Pools {
            next_check: u64::MAX,
        }
    }
}

impl<B: Backend> Worker<B> {
    /// No job can be made (`crate::proxy::job::Job` cannot).
    pub(super) fn start_jobs(&mut self, _sh: &Shared) {}

    /// No completion is an upstream connection's (nothing connects).
    pub(super) fn up_event(&mut self, _c: Completion, _sh: &Shared) {}

    /// No slot holds an upstream connection.
    pub(super) fn up_timer(&mut self, _idx: u32, _sh: &Shared) {}

    /// No upstream has checks.
    pub(super) fn health_checks(&mut self, _sh: &Shared) {}

    /// No request waits on a cache flight (no proxy, no cache).
    pub(super) fn cache_landed(&mut self, _sh: &Shared) {}

    /// No relay pauses.
    pub(super) fn resume_relays(&mut self, _sh: &Shared) {
        self.up_ready.clear();
    }

    /// No request is proxied: a cancelled one has no exchange to give up.
    pub(super) fn cancel_exchange(&mut self, _client: Token, _id: u64, _sh: &Shared) {}

    /// No client leaves relays behind.
    pub(super) fn drop_orphans(&mut self, _sh: &Shared) {
        self.orphans.clear();
    }

    /// No pooled connection to close.
    pub(super) fn reload_upstreams(&mut self, _old: &crate::app::sites::SiteSet) {}
}
