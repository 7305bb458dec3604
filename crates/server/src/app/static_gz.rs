//! On-the-fly gzip/br of compressible static files that have no precompressed sibling: each
//! file is compressed once per worker and coding, then answered from a bounded cache.
//!
//! Owns the cache. Its key is the file's strong ETag (size and mtime to the nanosecond: a
//! changed file is a new key; one rewritten in place with both put back is not, as its
//! ETag tells its clients nothing either) and the coding; entries are dropped oldest first
//! past [`STATIC_GZ_CACHE_BYTES`] per worker. Only 200 answers of [`STATIC_GZ_MAX_FILE`] bytes or
//! less are compressed (ranges, 304s and big files go out as they are, with sendfile); a
//! precompressed `.br`/`.gz` sibling, chosen by the file module, always wins. The first
//! request for a file pays for reading and compressing it on the worker (milliseconds for a
//! few hundred kilobytes at the configured levels); every later one is a copy of the cached
//! bytes.
#![forbid(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::compress;
use super::files::encoding::{self, Encoding};
use super::response::{Body, Response};
use crate::config::Compression;

/// Largest file compressed on the fly, in bytes.
pub const STATIC_GZ_MAX_FILE: u64 = 1024 * 1024;
/// Compressed bytes one worker keeps.
pub const STATIC_GZ_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// One worker's compressed files.
#[derive(Default)]
pub(crate) struct StaticGz {
    entries: HashMap<(String, Encoding), Arc<[u8]>>,
    order: VecDeque<(String, Encoding)>,
    bytes: usize,
}

impl StaticGz {
    /// `resp` compressed per `accept` (the request's Accept-Encoding, read only for an
    /// eligible file) when it is a whole compressible file answer; else as it is (with `Vary`
    /// when the choice depended on Accept-Encoding).
    pub(crate) fn apply<'b>(
        &mut self,
        resp: Response,
        accept: impl FnOnce() -> Option<&'b [u8]>,
        cfg: &Compression,
    ) -> Response {
        let Body::File(file) = &resp.body else {
            return resp;
        };
        if file.len > STATIC_GZ_MAX_FILE || !compress::worth_compressing(&resp, file.len, cfg) {
            return resp;
        }
        let Some(etag) = resp
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("etag"))
            .map(|(_, v)| v.to_string())
        else {
            return resp;
        };
        let coding = encoding::choose(accept(), compress::encodable);
        if coding == Encoding::Identity {
            let mut resp = resp;
            compress::add_vary(&mut resp);
            return resp;
        }
        let key = (etag, coding);
        if let Some(hit) = self.entries.get(&key) {
            let bytes = hit.to_vec();
            return compress::with_encoding(resp, coding, bytes);
        }
        let mut plain = vec![0u8; file.len as usize];
        let mut done = 0;
        while done < plain.len() {
            match rustix::io::pread(&*file.file, &mut plain[done..], file.offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "static file not compressed: read failed");
                    return resp;
                }
            }
        }
        if done != plain.len() {
            // The file shrank under us: send it as it is (sendfile), do not cache.
            return resp;
        }
        let encoded = match coding {
            Encoding::Gzip => super::gz::compress(&plain, cfg.gzip_level),
            Encoding::Brotli => super::br::compress(&plain, cfg.brotli_quality),
            Encoding::Identity => unreachable!("identity returned above"),
        };
        if encoded.is_empty() || encoded.len() >= plain.len() {
            let mut resp = resp;
            compress::add_vary(&mut resp);
            return resp;
        }
        self.insert(key, &encoded);
        compress::with_encoding(resp, coding, encoded)
    }

    fn insert(&mut self, key: (String, Encoding), bytes: &[u8]) {
        if bytes.len() > STATIC_GZ_CACHE_BYTES {
            return;
        }
        while self.bytes + bytes.len() > STATIC_GZ_CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.entries.remove(&old) {
                self.bytes -= v.len();
            }
        }
        self.bytes += bytes.len();
        self.order.push_back(key.clone());
        self.entries.insert(key, bytes.into());
    }
}
