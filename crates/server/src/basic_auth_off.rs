//! HTTP basic auth in a build without the `basic-auth` feature (no bcrypt): no htpasswd file
//! can be read, so no rule can be made. A site with `auth` is refused at start
//! (`crate::features`) before its file would be read; `parse` refuses too, should it be
//! reached another way.
#![forbid(unsafe_code)]

/// Why an htpasswd file cannot be used: here, always the missing feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtpasswdError {
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for HtpasswdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Cannot be made (see the module doc).
pub enum Htpasswd {}

impl Htpasswd {
    pub fn parse(_text: &str) -> Result<Htpasswd, HtpasswdError> {
        Err(HtpasswdError {
            line: 0,
            message: "linerate-server was built without feature `basic-auth`".into(),
        })
    }
}

/// Cannot be made: its `Htpasswd` cannot.
pub(crate) struct AuthGate {
    pub prefix: String,
    pub path: std::path::PathBuf,
    pub challenge: String,
    never: std::convert::Infallible,
}

impl AuthGate {
    pub(crate) fn new(
        _prefix: String,
        _realm: &str,
        _path: std::path::PathBuf,
        users: Htpasswd,
    ) -> AuthGate {
        match users {}
    }

    pub(crate) fn admits(&self, _authorization: Option<&[u8]>) -> bool {
        match self.never {}
    }
}
