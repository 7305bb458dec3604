//! Stands in for `grpc.rs` in a build without the `grpc` feature: no unary method can be made,
//! so its arms are dead code, and a request no route takes goes to the static files.
#![forbid(unsafe_code)]

use std::sync::Arc;

use linerate_http1::RequestHead;

use crate::app::ConnApp;
use crate::app::dispatch::Pending;
use crate::app::request::Params;
use crate::grpc::Unary;
use crate::h1::{Decision, Exchange};

impl<'a> ConnApp<'a> {
    pub(crate) fn grpc(
        &mut self,
        _: usize,
        _: Params,
        _: Exchange<'_>,
        unary: &Arc<Unary>,
    ) -> Decision<Pending> {
        match unary.0 {}
    }

    pub(crate) fn grpc_unary(
        &mut self,
        _: u64,
        _: &RequestHead,
        _: &[u8],
        _: &[u8],
        unary: &Arc<Unary>,
    ) -> Decision<Pending> {
        match unary.0 {}
    }

    /// No gRPC call is counted.
    #[inline(always)]
    pub(crate) fn grpc_over_limit(&self, _: usize, _: u64) {}

    #[inline(always)]
    pub(crate) fn unrouted(&mut self, head: &RequestHead, buf: &[u8]) -> Decision<Pending> {
        self.files(head, buf)
    }
}

/// No gRPC call to answer for without the feature: a layer's answer goes as it is.
#[inline(always)]
pub(crate) fn layer_answer(
    _: bool,
    _: &RequestHead,
    _: &[u8],
    resp: crate::response::Response,
) -> crate::response::Response {
    resp
}
