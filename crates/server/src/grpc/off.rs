//! Stands in for `grpc/` in a build without the `grpc` feature: no unary method can be made
//! (`Unary` holds `Infallible`) and a router serves no service (`content/grpc_off.rs` never
//! asks), so the content phase's gRPC arms are dead code the compiler drops.
#![forbid(unsafe_code)]

/// A unary method's handler; none can be made without the feature.
pub(crate) struct Unary(pub(crate) std::convert::Infallible);

/// A unary call's body over the limit: never, as no call is made.
pub(crate) fn over_limit<'h>(
    _: &[u8],
    _: impl FnOnce() -> Option<&'h [u8]>,
) -> Option<crate::response::Response> {
    None
}

/// A router's gRPC services: always none.
#[derive(Clone, Debug, Default)]
pub(crate) struct Services {
    pub(crate) calls: CallStats,
}

impl Services {
    pub(crate) fn merge(&mut self, _: &Services) {}
}

/// A router's gRPC call counters: none.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallStats;

impl CallStats {
    pub(crate) fn turn_on(&self) {}

    pub(crate) fn render(&self, _: &mut String) {}
}

/// An answer's `grpc-status` for the log: none without the feature.
pub(crate) fn logged_status(_: &crate::response::Response) -> Option<&'static str> {
    None
}

/// No streamed gRPC answer without the feature.
pub(crate) fn streamed(_: &crate::response::Response) -> bool {
    false
}

/// No `grpc-status` to log without the feature.
#[cfg_attr(not(all(feature = "proxy", feature = "http2")), allow(dead_code))]
pub(crate) fn status_value(_: &[u8]) -> Option<&'static str> {
    None
}

/// No `grpc-status` to log without the feature.
pub(crate) fn trailer_fields_status(_: &[crate::response::Field]) -> Option<&'static str> {
    None
}
