//! The gzip encoder in a build without the `gzip` feature (no flate2): nothing to encode
//! with, so negotiation never chooses gzip (`compress::encodable`) and these are never
//! reached. A precompressed `.gz` sibling of a static file is still served (no encoder is
//! needed), and a configuration that sets a gzip level is refused at start
//! (`crate::features`).
#![forbid(unsafe_code)]

/// This build makes no gzip answers.
pub const ENCODES: bool = false;

/// Never called (see the module doc); empty is what every caller sends as identity.
pub fn compress(_body: &[u8], _level: u32) -> Vec<u8> {
    Vec::new()
}

/// Cannot be made (see the module doc).
#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
pub enum Stream {}

#[cfg_attr(not(feature = "proxy"), allow(dead_code))]
impl Stream {
    pub fn new(_level: u32) -> Option<Stream> {
        None
    }

    pub fn push(&mut self, _piece: &[u8]) -> &[u8] {
        match *self {}
    }

    pub fn finish(self) -> Vec<u8> {
        match self {}
    }
}
