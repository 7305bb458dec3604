//! gRPC-Web translation in a build without the `grpc` feature: a mount with `grpc_web` is
//! refused at start (`crate::features`), so no request is ever found to be gRPC-Web here and
//! the rest is never reached; each item has its counterpart's signature in grpc_web.rs.
#![forbid(unsafe_code)]
#![allow(dead_code)]

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Web {
    Binary,
    Text,
}

pub(crate) fn web_of(_content_type: Option<&[u8]>) -> Option<Web> {
    None
}

pub(crate) fn request_body(_web: Web, body: Vec<u8>) -> Option<Vec<u8>> {
    Some(body)
}

pub(crate) fn request_head(_head: &mut Vec<u8>) {}

pub(crate) fn answer_fields(_web: Web, _fields: &mut [(Vec<u8>, Vec<u8>)]) {}

pub(crate) fn answer_data(_web: Web, _data: &[u8]) -> Option<Vec<u8>> {
    None
}

pub(crate) fn trailer_frame<'f>(
    _web: Web,
    _fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
) -> Vec<u8> {
    Vec::new()
}

pub(crate) fn trailers_only(_web: Web, _fields: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Vec<u8> {
    Vec::new()
}
