//! The reverse proxy in a build without the `proxy` feature: its rules, upstream connections
//! (`crate::h1c`) and relays are not compiled. A mount's `Route`, a `Job` and a body's
//! `PipeIn` cannot be made, so no site has a proxy mount, no request goes up and every path
//! into the proxy is dead code the compiler drops. A configuration with upstreams or proxy
//! mounts is refused at start (`crate::features`); `Route::build` refuses too, should it be
//! reached another way.
//!
//! Each item has its counterpart's signature in `proxy/`.
#![forbid(unsafe_code)]

pub(crate) mod route {
    use std::convert::Infallible;

    use crate::config::{ProxyMount, Upstream};

    /// Cannot be made (see the module doc).
    #[derive(Clone, Debug)]
    pub(crate) struct Route {
        pub mount: ProxyMount,
        #[allow(dead_code)] // never read: it only makes a route impossible
        never: Infallible,
    }

    impl Route {
        /// Always the missing feature.
        pub(crate) fn build(_m: &ProxyMount, _upstreams: &[Upstream]) -> Result<Route, String> {
            Err("a proxy mount: linerate-server was built without feature `proxy`".into())
        }
    }
}

pub(crate) mod job {
    /// Cannot be made: no request goes up.
    #[derive(Debug)]
    pub(crate) enum Job {}

    /// No job to keep.
    #[derive(Debug, Default)]
    pub(crate) struct Spares;
}

pub(crate) mod pipe {
    use std::convert::Infallible;

    /// Cannot be made: no body goes up as it arrives.
    pub(crate) struct PipeIn(Infallible);

    impl PipeIn {
        pub(crate) fn put(&self, _data: &[u8]) -> bool {
            match self.0 {}
        }

        pub(crate) fn has_room(&self) -> bool {
            match self.0 {}
        }

        pub(crate) fn end(self) {
            match self.0 {}
        }
    }

    /// Cannot be made: the upstream's end of a pipe that cannot be made.
    pub(crate) enum PipeOut {}
}

pub(crate) mod cache_admin {
    /// No proxy mount, so no cache to keep.
    pub(crate) fn carry_over(
        _old: &[std::sync::Arc<dyn crate::stats::CacheAdmin>],
        _sites: &mut crate::app::sites::SiteSet,
    ) {
    }

    /// No proxy mount, so no cache.
    pub(crate) fn admin_views(
        _sites: &crate::app::sites::SiteSet,
    ) -> Vec<std::sync::Arc<dyn crate::stats::CacheAdmin>> {
        Vec::new()
    }
}

pub(crate) mod cache {
    /// No hit encodes anything.
    pub(crate) fn bodies_encoded() -> u64 {
        0
    }

    /// Cannot be made: no proxy cache answers (`Body::Cached` is never made).
    #[derive(Clone, Debug)]
    pub(crate) enum Fresh {}

    impl Fresh {
        pub(crate) fn body(&self) -> &[u8] {
            match *self {}
        }

        pub(crate) fn outcome(&self) -> crate::access_log::CacheOutcome {
            match *self {}
        }

        pub(crate) fn write_h1(
            &self,
            _out: &mut Vec<u8>,
            _head_request: bool,
            _close: bool,
            _keep_alive_10: bool,
            _stamp: crate::h1::Stamp<'_>,
        ) {
            match *self {}
        }
    }
}
