//! The brotli encoder in a build without the `brotli` feature: nothing to encode with, so
//! negotiation never chooses br (`compress::encodable`) and these are never reached. A
//! precompressed `.br` sibling of a static file is still served (no encoder is needed), and
//! a configuration that sets a brotli quality is refused at start (`crate::features`).
#![forbid(unsafe_code)]

/// This build makes no br answers.
pub const ENCODES: bool = false;

/// Never called (see the module doc); empty is what every caller sends as identity.
pub fn compress(_body: &[u8], _quality: u32) -> Vec<u8> {
    Vec::new()
}

/// Cannot be made (see the module doc).
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub enum Stream {}

#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
impl Stream {
    pub fn new(_length: Option<u64>, _quality: u32) -> Option<Stream> {
        None
    }

    pub fn push(&mut self, _piece: &[u8]) -> &[u8] {
        match *self {}
    }

    pub fn finish(self) -> Vec<u8> {
        match self {}
    }
}
