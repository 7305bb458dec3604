//! The edge JWT check in a build without the `jwt` feature (no aws-lc-rs HMAC): no rule can
//! be made. A site with `[[site.jwt]]` is refused at start (`crate::features`) before its
//! secret would be read; `JwtGate::new` and `read_secret` refuse too, should they be
//! reached another way.
#![forbid(unsafe_code)]

use crate::config::{JwtAuth, JwtSecret};

const MISSING: &str = "linerate-server was built without feature `jwt`";

/// Refuses: this build cannot check a token.
pub fn read_secret(_secret: &JwtSecret) -> Result<Vec<u8>, String> {
    Err(MISSING.into())
}

/// Refuses: this build cannot check a token.
pub fn check_secret(_secret: &[u8]) -> Result<(), String> {
    Err(MISSING.into())
}

/// Cannot be made (see the module doc).
pub(crate) struct JwtGate {
    pub prefix: String,
    pub secret_file: Option<std::path::PathBuf>,
    never: std::convert::Infallible,
}

impl JwtGate {
    pub(crate) fn new(_conf: &JwtAuth, _secret: &[u8]) -> Result<JwtGate, String> {
        Err(MISSING.into())
    }

    pub(crate) fn admits(
        &self,
        _authorization: Option<&[u8]>,
        _repeated: bool,
        _now_s: u64,
    ) -> Result<(), (u16, &str)> {
        match self.never {}
    }
}
