//! Middleware: [`Layer`]s that see each request before its handler and each answer after it,
//! and the [`Extensions`] they hand on to handlers.
//!
//! Owns the hook trait, the typed extension map, and one request's run through its layers
//! (`Layered`: which layers' `before` ran, in order, so their `after` runs in reverse on
//! whatever answer comes — the handler's, deferred or not, or the server's own). The last
//! layer a router is given is its outermost (`Router::layer`, as in tower). A router's
//! layers see every request of the sites it serves, routed or not (404, 405, OPTIONS, 501,
//! files); a group's layers (a router [`merge`](crate::Router::merge)d into another) see only
//! the requests of its routes. Nothing here runs for a router without layers: the dispatcher
//! tests one flag. Middleware that must wait is an async layer (`around.rs`), which runs
//! inside all of these.
#![forbid(unsafe_code)]

use std::any::{Any, TypeId};
use std::sync::Arc;

use crate::request::Request;
use crate::response::Response;

/// A middleware hook pair. Layers are shared by every worker, so they are `Send + Sync`;
/// per-request state goes in the request's [`Extensions`].
pub trait Layer: Send + Sync + 'static {
    /// Called with the request's head before its handler (before its body is read): attach
    /// typed values for the handler and for [`Layer::after`] to `ext`, or answer at once
    /// with `Some` (the handler is never called, the body is not read, and only the layers
    /// that ran before this one see the answer in their `after`).
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        let _ = (req, ext);
        None
    }

    /// Called with the answer to every request whose `before` this layer ran: read or change
    /// its status, fields and body ([`Response::set_header`], [`Response::remove_header`],
    /// [`Response::set_status`]).
    fn after(&self, ext: &Extensions, resp: &mut Response) {
        let _ = (ext, resp);
    }
}

/// Typed values attached to one request by its layers: one value per type. Cloning shares
/// the values (each is behind an `Arc`), so a deferred handler's copy costs no deep copy.
#[derive(Clone, Default)]
pub struct Extensions(Vec<(TypeId, Arc<dyn Any + Send + Sync>)>);

/// No extensions: what layers' own view of the request holds (theirs is the `&mut` beside it).
pub(crate) static NO_EXTENSIONS: Extensions = Extensions(Vec::new());

impl Extensions {
    /// Attaches `value`, replacing a value of the same type.
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
        match self.0.iter_mut().find(|(t, _)| *t == id) {
            Some(slot) => slot.1 = value,
            None => self.0.push((id, value)),
        }
    }

    /// The value of type `T`, if a layer attached one.
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.0
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref())
    }

    /// Each value with its type (a router's state merged into another's).
    pub(crate) fn entries(&self) -> &[(TypeId, Arc<dyn Any + Send + Sync>)] {
        &self.0
    }

    /// Attaches a value of type `id` already shared, unless one of that type is there.
    pub(crate) fn insert_shared(&mut self, id: TypeId, value: Arc<dyn Any + Send + Sync>) {
        if !self.0.iter().any(|(t, _)| *t == id) {
            self.0.push((id, value));
        }
    }

    /// Whether nothing is attached.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Extensions({} values)", self.0.len())
    }
}

/// One request's pass through its layers: those whose `before` ran, outermost first, and
/// what they attached. Travels with the request: into a body being read, a deferred answer's
/// metadata, and back.
///
/// Invariant: while it is not `active` (no layer ran for the request at hand) it holds
/// nothing, so the empty `ext` a handler without layers sees costs one pointer.
#[derive(Default)]
pub(crate) struct Layered {
    /// A `before` hook ran for the request at hand.
    pub(crate) active: bool,
    ran: Vec<Arc<dyn Layer>>,
    pub(crate) ext: Extensions,
}

impl std::fmt::Debug for Layered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Layered({} layers ran, {:?})", self.ran.len(), self.ext)
    }
}

impl Layered {
    /// Runs `layers`' `before` in order after those already run; the first answer stops
    /// the run (that layer's own `after` is not called on it).
    pub(crate) fn before(
        &mut self,
        layers: &[Arc<dyn Layer>],
        req: &Request<'_>,
    ) -> Option<Response> {
        for layer in layers {
            if let Some(resp) = layer.before(req, &mut self.ext) {
                return Some(resp);
            }
            self.ran.push(layer.clone());
        }
        None
    }

    /// Runs the `after` of every layer whose `before` ran, innermost first.
    pub(crate) fn after(self, resp: &mut Response) {
        for layer in self.ran.iter().rev() {
            layer.after(&self.ext, resp);
        }
    }

    /// [`Layered::after`] for the request at hand, leaving this empty for the next.
    #[cold]
    #[inline(never)]
    pub(crate) fn run_after(&mut self, resp: &mut Response) {
        std::mem::take(self).after(resp);
    }

    /// The pass, to travel with its request (a body being read, a deferred answer), leaving
    /// this empty; `None` when no layer ran.
    pub(crate) fn take(&mut self) -> Option<Box<Layered>> {
        self.active.then(|| Box::new(std::mem::take(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_hold_one_value_per_type() {
        let mut ext = Extensions::default();
        assert!(ext.is_empty());
        ext.insert(7u32);
        ext.insert(String::from("a"));
        ext.insert(8u32);
        assert_eq!(ext.get::<u32>(), Some(&8));
        assert_eq!(ext.get::<String>().map(String::as_str), Some("a"));
        assert_eq!(ext.get::<u64>(), None);
        let shared = ext.clone();
        assert_eq!(shared.get::<u32>(), Some(&8));
    }
}
