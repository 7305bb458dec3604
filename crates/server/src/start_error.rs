//! Why a server could not start, and which part of its configuration is at fault, so that a
//! program reading a configuration file can name the file, line and column of that part
//! (`linerate serve --config` does) while a library user still gets the plain error.
//!
//! Owns only the error's shape; [`crate::Server::bind`] and
//! [`crate::Server::drop_privileges`] say which part failed.
#![forbid(unsafe_code)]

use std::fmt;
use std::io;

/// The part of a [`crate::Config`] a start-up error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// `Config::listen_list()[i]`: its address could not be bound, its certificate read, or
    /// its Unix socket's owner or mode set.
    Listener(usize),
    /// The admin listener.
    Admin,
    /// The CPU list.
    Cpus,
    /// The access log.
    AccessLog,
    /// `Config::sites[site]` as a whole.
    Site(usize),
    /// `Config::sites[site].access_log`: it cannot be opened (or, on a reload, was not open).
    SiteLog(usize),
    /// `Config::sites[site].mounts[mount]`: its root cannot be opened or searched.
    Root { site: usize, mount: usize },
    /// `Config::sites[site].error_pages[index]`.
    ErrorPage { site: usize, index: usize },
    /// `Config::sites[site].redirects[index]`: its target is not valid.
    Redirect { site: usize, index: usize },
    /// `Config::sites[site].proxies[index]` (`site` 0 is the implicit site's
    /// `Config::proxies` when there are no sites): its upstream is unknown, or the build has
    /// no `proxy` feature.
    Proxy { site: usize, index: usize },
    /// `Config::upstreams[i]`: it has no server, a name used twice, or the build has no
    /// `proxy` feature.
    Upstream(usize),
    /// The [`Router`](crate::Router): a method and pattern registered twice.
    Routes,
    /// The router's gRPC services ([`Router::grpc`](crate::Router)): no listener speaks
    /// HTTP/2 or HTTP/3 ([`Config::speaks_http2`](crate::Config::speaks_http2)), so no gRPC
    /// client could reach them.
    Grpc,
    /// The user to switch to.
    User,
    /// Nothing the configuration names (an eventfd, a thread).
    Other,
}

/// A start-up error and the part of the configuration it is about.
#[derive(Debug)]
pub struct StartError {
    pub part: Part,
    pub error: io::Error,
}

impl StartError {
    /// The underlying error's kind.
    pub fn kind(&self) -> io::ErrorKind {
        self.error.kind()
    }

    pub(crate) fn new(part: Part, error: io::Error) -> StartError {
        StartError { part, error }
    }

    /// An error about `part` with this message (its kind: invalid input).
    pub(crate) fn invalid(part: Part, message: String) -> StartError {
        StartError::new(part, io::Error::new(io::ErrorKind::InvalidInput, message))
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

impl From<StartError> for io::Error {
    fn from(e: StartError) -> io::Error {
        e.error
    }
}

/// An error that is about nothing in particular.
impl From<io::Error> for StartError {
    fn from(error: io::Error) -> StartError {
        StartError::new(Part::Other, error)
    }
}

/// Tags an `io::Result`'s error with the part it is about.
pub(crate) trait AtPart<T> {
    fn at(self, part: Part) -> Result<T, StartError>;
}

impl<T> AtPart<T> for io::Result<T> {
    fn at(self, part: Part) -> Result<T, StartError> {
        self.map_err(|e| StartError::new(part, e))
    }
}
