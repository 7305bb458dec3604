//! The proxy cache's shared second tier in a build without the `kv` feature: it cannot be
//! made (a configuration naming one is refused at start, `crate::features`), so every path
//! into it is dead code. Each item has its counterpart's signature in `proxy/tier.rs`.
#![forbid(unsafe_code)]

use std::sync::Weak;
use std::time::Duration;

use linerate_cache::entry::Entry;
use linerate_cache::key::Key;

/// Cannot be made.
#[derive(Debug)]
pub(crate) enum SharedTier {}

impl SharedTier {
    /// Always the missing feature.
    pub(crate) fn start(_url: &str, _timeout: Duration) -> std::io::Result<SharedTier> {
        Err(std::io::Error::other(
            "a cache tier: linerate-server was built without feature `kv`",
        ))
    }

    pub(crate) fn watch<T: Send + Sync + 'static>(
        &self,
        _alive: Weak<T>,
        _forget: impl Fn(&T, Forget<'_>) + Send + Sync + 'static,
    ) {
        match *self {}
    }

    pub(crate) fn adopt_pending(&self, _old: &SharedTier) {
        match *self {}
    }

    pub(crate) fn fence(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn usable(&self, _asked: u64, _key: &Key) -> bool {
        match *self {}
    }

    pub(crate) fn name(&self) -> String {
        match *self {}
    }

    pub(crate) fn invalidate(&self, _keys: &[Key]) {
        match *self {}
    }

    pub(crate) fn tier_key(&self, _key: &Key) -> Option<String> {
        match *self {}
    }

    pub(crate) fn fetch_many(
        &self,
        _keys: Vec<String>,
        _done: impl FnOnce(Vec<Option<Vec<u8>>>) + Send + 'static,
    ) {
        match *self {}
    }

    pub(crate) fn put(
        &self,
        _entry: &Entry,
        _request_fields: &[(&[u8], &[u8])],
        _opts: &linerate_cache::Options,
    ) {
        match *self {}
    }

    pub(crate) fn purge_many(&self, _what: Vec<Purge>) -> bool {
        match *self {}
    }

    pub(crate) fn purge_then<T: Send + 'static>(
        &self,
        _what: Vec<Purge>,
        _now: impl FnOnce() -> T,
        _done: impl FnOnce(T, bool) + Send + 'static,
    ) {
        match *self {}
    }

    pub(crate) fn tag_purged(&self, _entry: &Entry) -> bool {
        match *self {}
    }

    pub(crate) fn counts(&self) -> crate::stats::TierCounts {
        match *self {}
    }

    pub(crate) fn link(&self) -> Option<(std::net::SocketAddr, Link)> {
        match *self {}
    }

    pub(crate) fn admit(&self, _keys: usize) -> bool {
        match *self {}
    }

    pub(crate) fn timeout_ms(&self) -> u64 {
        match *self {}
    }

    pub(crate) fn settle(
        &self,
        _outcome: Result<Vec<Option<Vec<u8>>>, Broken>,
        _timed_out: bool,
        _keys: usize,
    ) -> Vec<Option<Vec<u8>>> {
        match *self {}
    }
}

/// What a purge is of (`proxy/tier.rs`'s).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Purge {
    Key(Key),
    All,
    Tag(Box<[u8]>),
    SoftKey(Key),
    SoftTag(Box<[u8]>),
}

/// What an edge forgets (`proxy/tier.rs`'s; never made without a tier).
#[derive(Clone, Copy, Debug)]
#[allow(dead_code)]
pub(crate) enum Forget<'a> {
    Key(&'a Key),
    Tag(&'a [u8]),
    All,
    SoftKey(&'a Key),
    SoftTag(&'a [u8]),
}

/// Why a link broke (never: no link is made; the driver only makes one to fail an ask).
#[derive(Debug)]
pub(crate) struct Broken(#[allow(dead_code)] pub String);

/// Cannot be made: no tier to link to.
#[derive(Debug)]
pub(crate) enum Link {}

impl Link {
    pub(crate) fn ask(&mut self, _ticket: u64, _keys: &[String]) {
        match *self {}
    }

    pub(crate) fn has_output(&self) -> bool {
        match *self {}
    }

    pub(crate) fn take_output(&mut self, _spare: Vec<u8>) -> Vec<u8> {
        match *self {}
    }

    pub(crate) fn abandon(&mut self) -> std::iter::Empty<u64> {
        match *self {}
    }

    #[allow(clippy::type_complexity)]
    pub(crate) fn received(
        &mut self,
        _bytes: &[u8],
        _answers: &mut Vec<(u64, Result<Vec<Option<Vec<u8>>>, Broken>)>,
    ) -> Result<(), Broken> {
        match *self {}
    }
}

/// Never called: no tier holds bytes.
pub(crate) fn decode(_stored: Vec<u8>, _key: &Key) -> Option<Entry> {
    None
}
