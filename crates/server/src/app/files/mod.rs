//! Static files: decide the answer to a GET or HEAD for a path below a root directory.
//!
//! Owns path safety, confinement below the root, MIME types, validators and conditional
//! requests, single byte ranges, precompressed siblings and a per-worker open-file cache. It
//! opens and stats files but never reads their contents and never touches a socket: a
//! [`FileAnswer::Send`] carries the headers and an `(fd, offset, len)` for the connection
//! to `sendfile`, so files larger than memory stream from the page cache.
//!
//! Decisions, each documented where it is made:
//! - **Traversal**: the path is percent-decoded exactly once; a bad escape, `%2F`/`%5C`, NUL,
//!   backslash, a control byte or non-UTF-8 is 400; a `..` that climbs above the root is 400
//!   (no client that normalizes paths sends one). See [`path`].
//! - **Symlinks**: by default links are followed only while they stay below the root
//!   (`openat2` + `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`); a link leaving it is 404. Where
//!   the kernel has no `openat2`, or with [`SymlinkPolicy::Refuse`], no link is followed at
//!   all (component-wise `O_NOFOLLOW` walk). Only regular files are served; FIFOs, sockets
//!   and devices are 404 and are never opened for reading.
//! - **Directories**: `/dir/` serves `dir/index.html`; `/dir` answers 301 with the relative
//!   `Location: ./dir/` (correct under any mount prefix; the query is not carried); a
//!   directory without index is 404, or listed where [`FilesOptions::listing`] is on (see
//!   [`listing`]).
//! - **Fallbacks**: [`FilesOptions::try_files`] tries other paths for a request that finds
//!   nothing (a 404 only: a bad path stays 400, a forbidden file 403).
//! - **ETag**: strong, `"<size>-<mtime s>.<mtime ns>[-br|-gz]"` in hex, distinct per coding
//!   and the same on every node of a fleet (no inode, no ctime); Last-Modified is the file's
//!   mtime as an IMF-fixdate.
//! - **Ranges**: one `bytes=` range → 206 or 416; a multi-range set → 200 with the whole
//!   file; Range is ignored on HEAD (RFC 9110 §14.2: only GET) and on empty files.
//! - **Precompressed**: `x.br` / `x.gz` beside `x` are served per Accept-Encoding with
//!   q-values (br preferred at equal q); every answer for a file with a sibling carries
//!   `Vary: Accept-Encoding`; ranges and validators apply to the encoded file.
//! - **Cache**: see [`FilesOptions::revalidate_after`]; by default an entry is trusted for
//!   one second, then re-probed (open `O_PATH` + fstat) and reopened if it changed.
#![forbid(unsafe_code)]

mod cache;
pub mod encoding;
pub mod listing;
pub mod mime;
pub mod open;
pub mod path;
pub mod range;
pub mod validators;

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use linerate_http1::{Method, RequestHead};
use rustix::io::Errno;

pub use cache::{CacheStats, DEFAULT_CACHE_ENTRIES, DEFAULT_REVALIDATE_AFTER};
pub use encoding::Encoding;
pub use open::Confinement;

use cache::{FileCache, Lookup};
use range::RangeAnswer;
use validators::{Precondition, Validators};

/// The `Allow` value to send with [`FileAnswer::MethodNotAllowed`].
pub const ALLOW: &str = "GET, HEAD, OPTIONS";

/// The default file served for a directory path ending in `/`.
pub const DEFAULT_INDEX: &str = "index.html";

/// Response header fields: `(name, value)`, names as sent.
pub type Headers = Vec<(&'static str, String)>;

/// Which symlinks are followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SymlinkPolicy {
    /// Follow links whose target stays below the root; others are 404.
    #[default]
    FollowBeneath,
    /// Follow no link at all (every component is opened with `O_NOFOLLOW`).
    Refuse,
}

/// How a [`StaticFiles`] serves its root.
#[derive(Clone, Debug)]
pub struct FilesOptions {
    /// The file served for a directory path ending in `/`; one path segment.
    pub index: String,
    /// Look for `.br` and `.gz` siblings and serve them per Accept-Encoding.
    pub precompressed: bool,
    pub symlinks: SymlinkPolicy,
    /// Serve files and directories whose name starts with `.` (`.env`, `.git/`). Off by
    /// default: they are answered 404 as if absent, except below `/.well-known/` (RFC 8615:
    /// ACME challenges, security.txt).
    pub dotfiles: bool,
    /// Bound on open-file cache entries per worker (0: no cache, every request probes).
    pub cache_entries: usize,
    /// A cache entry younger than this is used without any syscall; an older one is checked
    /// against the disk. `Duration::ZERO` checks on every request. Changes on disk become
    /// visible within this time.
    pub revalidate_after: Duration,
    /// Paths tried in order for a request that finds no file: `{path}` stands for the
    /// request's path (still percent-encoded); anything else is a path from the root. Empty:
    /// only the request's path.
    pub try_files: Vec<String>,
    /// List a directory that has no index (HTML, or JSON when asked), instead of 404.
    pub listing: bool,
    /// Content types by extension (lowercase, without the dot), before the built-in table.
    pub types: Arc<[(String, String)]>,
}

impl Default for FilesOptions {
    fn default() -> Self {
        FilesOptions {
            index: DEFAULT_INDEX.to_string(),
            precompressed: true,
            dotfiles: false,
            symlinks: SymlinkPolicy::FollowBeneath,
            cache_entries: DEFAULT_CACHE_ENTRIES,
            revalidate_after: DEFAULT_REVALIDATE_AFTER,
            try_files: Vec::new(),
            listing: false,
            types: Arc::new([]),
        }
    }
}

/// Read access to request header fields, by lower-case name. Only the first field line of a
/// name is consulted (Accept-Encoding, If-None-Match and Range are sent on one line by every
/// client in practice).
pub trait RequestHeaders {
    fn header(&self, name: &str) -> Option<&[u8]>;
}

impl RequestHeaders for crate::Request<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        crate::Request::header(self, name)
    }
}

/// A parsed head with its buffer, for callers below the handler API.
#[derive(Clone, Copy, Debug)]
pub struct HeadView<'a> {
    pub head: &'a RequestHead,
    pub buf: &'a [u8],
}

impl RequestHeaders for HeadView<'_> {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.head.header(self.buf, name)
    }
}

impl RequestHeaders for [(&str, &str)] {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_bytes())
    }
}

/// The answer to one request.
#[derive(Debug)]
pub enum FileAnswer {
    /// 200 or 206: send `headers`, then `len` bytes of `file` from `offset` (none for HEAD).
    /// `headers` include Content-Length; the connection must not add its own. Should the file
    /// shrink while it is being sent, `sendfile` returns short: close the connection.
    Send {
        status: u16,
        headers: Headers,
        file: Arc<OwnedFd>,
        offset: u64,
        len: u64,
        head_only: bool,
    },
    /// 304: ETag, Last-Modified and (for a file with siblings) Vary; no body.
    NotModified { headers: Headers },
    /// 412 (If-Match / If-Unmodified-Since failed); `headers` may hold Vary.
    PreconditionFailed { headers: Headers },
    /// 416: `Content-Range: bytes */size` (and Vary when the file has siblings).
    RangeNotSatisfiable { headers: Headers },
    /// 301 to the directory with a trailing slash; `location` is a relative reference.
    Redirect { location: String },
    /// 400: a path that is malformed or climbs above the root.
    BadRequest,
    /// 403: the file exists but the server may not read it.
    Forbidden,
    /// 404: missing, outside the root, not a regular file, or a directory without index.
    NotFound,
    /// 405: send `Allow:` [`ALLOW`].
    MethodNotAllowed,
    /// 500: an I/O failure on the server's side (EMFILE, EIO…); log it, do not send it.
    Error(Errno),
    /// 200: a directory's listing, rendered.
    Listing {
        content_type: &'static str,
        body: String,
    },
}

impl FileAnswer {
    /// The status code to send.
    pub fn status(&self) -> u16 {
        match self {
            FileAnswer::Send { status, .. } => *status,
            FileAnswer::Listing { .. } => 200,
            FileAnswer::NotModified { .. } => 304,
            FileAnswer::PreconditionFailed { .. } => 412,
            FileAnswer::RangeNotSatisfiable { .. } => 416,
            FileAnswer::Redirect { .. } => 301,
            FileAnswer::BadRequest => 400,
            FileAnswer::Forbidden => 403,
            FileAnswer::NotFound => 404,
            FileAnswer::MethodNotAllowed => 405,
            FileAnswer::Error(_) => 500,
        }
    }

    /// The header fields to send with the status (empty for the bodiless errors, which the
    /// connection answers its usual way).
    pub fn headers(&self) -> &[(&'static str, String)] {
        match self {
            FileAnswer::Send { headers, .. }
            | FileAnswer::NotModified { headers }
            | FileAnswer::PreconditionFailed { headers }
            | FileAnswer::RangeNotSatisfiable { headers } => headers,
            _ => &[],
        }
    }
}

/// A root directory served as static files, with this worker's open-file cache.
///
/// `!Sync` by design: the cache is per worker. Open one at startup, then give each worker
/// its own with [`StaticFiles::for_worker`] (they share the root handle).
#[derive(Debug)]
pub struct StaticFiles {
    root: Arc<OwnedFd>,
    confinement: Confinement,
    opts: FilesOptions,
    cache: RefCell<FileCache>,
}

impl StaticFiles {
    /// Opens `root` (a directory) and checks the options.
    pub fn open(root: &Path, opts: FilesOptions) -> io::Result<StaticFiles> {
        let index_ok = !opts.index.is_empty()
            && opts.index != "."
            && opts.index != ".."
            && !opts.index.contains(['/', '\\', '\0']);
        if !index_ok {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "index must be a single file name",
            ));
        }
        let root = open::open_root(root)?;
        let confinement = match opts.symlinks {
            SymlinkPolicy::Refuse => Confinement::Walk,
            SymlinkPolicy::FollowBeneath => open::detect(root.as_fd()),
        };
        let cache = FileCache::new(opts.cache_entries, opts.revalidate_after);
        Ok(StaticFiles {
            root: Arc::new(root),
            confinement,
            opts,
            cache: RefCell::new(cache),
        })
    }

    /// Whether this process may search the root (look up names in it), as serving needs:
    /// the root is held `O_PATH`, which opens without any permission.
    pub fn check_searchable(&self) -> io::Result<()> {
        Ok(rustix::fs::accessat(
            &*self.root,
            ".",
            rustix::fs::Access::EXEC_OK,
            // Not AT_EACCESS: real and effective ids are equal here, and with that flag rustix
            // calls faccessat2, which older container seccomp profiles answer with EPERM.
            rustix::fs::AtFlags::empty(),
        )?)
    }

    /// The same root and options with a fresh, empty cache: one per worker.
    pub fn for_worker(&self) -> StaticFiles {
        StaticFiles {
            root: Arc::clone(&self.root),
            confinement: self.confinement,
            opts: self.opts.clone(),
            cache: RefCell::new(FileCache::new(
                self.opts.cache_entries,
                self.opts.revalidate_after,
            )),
        }
    }

    /// How paths are confined on this kernel with these options.
    pub fn confinement(&self) -> Confinement {
        self.confinement
    }

    /// This worker's cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.borrow().stats()
    }

    /// Entries in this worker's cache.
    pub fn cache_len(&self) -> usize {
        self.cache.borrow().entries()
    }

    /// Decides the answer for one request. `raw_path` is the request target's path after the
    /// mount prefix is stripped, still percent-encoded (with or without its leading `/`).
    pub fn resolve<H: RequestHeaders + ?Sized>(
        &self,
        method: Method,
        raw_path: &[u8],
        headers: &H,
    ) -> FileAnswer {
        self.resolve_at(Instant::now(), method, raw_path, headers)
    }

    /// [`StaticFiles::resolve`] with the caller's clock, which decides cache freshness (the
    /// event loop's cached time, or a test's).
    pub fn resolve_at<H: RequestHeaders + ?Sized>(
        &self,
        now: Instant,
        method: Method,
        raw_path: &[u8],
        headers: &H,
    ) -> FileAnswer {
        if self.opts.try_files.is_empty() {
            return self.resolve_one(now, method, raw_path, headers);
        }
        let mut candidate = Vec::new();
        for t in &self.opts.try_files {
            candidate.clear();
            let mut parts = t.split(TRY_PATH);
            candidate.extend_from_slice(parts.next().unwrap_or("").as_bytes());
            for rest in parts {
                candidate.extend_from_slice(raw_path);
                candidate.extend_from_slice(rest.as_bytes());
            }
            match self.resolve_one(now, method, &candidate, headers) {
                FileAnswer::NotFound => continue,
                other => return other,
            }
        }
        FileAnswer::NotFound
    }

    /// The answer for one path.
    fn resolve_one<H: RequestHeaders + ?Sized>(
        &self,
        now: Instant,
        method: Method,
        raw_path: &[u8],
        headers: &H,
    ) -> FileAnswer {
        let head_only = match method {
            Method::Get => false,
            Method::Head => true,
            _ => return FileAnswer::MethodNotAllowed,
        };
        let Ok(path) = path::normalize(raw_path) else {
            return FileAnswer::BadRequest;
        };
        if !self.opts.dotfiles && path::hidden(&path.rel) {
            return FileAnswer::NotFound;
        }
        let mut cache = self.cache.borrow_mut();
        let root = self.root.as_fd();
        let how = self.confinement;
        let (file_rel, fd, meta) = match cache.lookup(root, how, &path.rel, now, false) {
            Lookup::File { .. } if path.dir => return FileAnswer::NotFound,
            Lookup::File { fd, meta } => (path.rel, fd, meta),
            Lookup::Dir if !path.dir => return redirect_to_dir(&path.rel),
            Lookup::Dir => {
                let index = if path.rel.is_empty() {
                    self.opts.index.clone()
                } else {
                    format!("{}/{}", path.rel, self.opts.index)
                };
                match cache.lookup(root, how, &index, now, false) {
                    Lookup::File { fd, meta } => (index, fd, meta),
                    Lookup::Missing if self.opts.listing => {
                        drop(cache);
                        return self.list(&path.rel, headers);
                    }
                    other => return not_a_file(other),
                }
            }
            other => return not_a_file(other),
        };

        let mut variants = [None, None];
        if self.opts.precompressed {
            let mut name = String::with_capacity(file_rel.len() + 3);
            for (slot, e) in variants.iter_mut().zip(Encoding::COMPRESSED) {
                name.clear();
                name.push_str(&file_rel);
                name.push_str(e.suffix());
                if let Lookup::File { fd, meta } = cache.lookup(root, how, &name, now, true) {
                    *slot = Some((fd, meta));
                }
            }
        }
        drop(cache);
        let sibling = |e: Encoding| match e {
            Encoding::Brotli => variants[0].as_ref(),
            Encoding::Gzip => variants[1].as_ref(),
            Encoding::Identity => None,
        };
        let vary = variants.iter().any(Option::is_some);
        let encoding =
            encoding::choose(headers.header("accept-encoding"), |e| sibling(e).is_some());
        let (fd, meta) = match sibling(encoding) {
            Some((fd, meta)) => (Arc::clone(fd), *meta),
            None => (fd, meta),
        };
        let representation = Representation {
            content_type: self.content_type(&file_rel),
            encoding,
            vary,
            meta,
            validators: Validators::of(&meta, encoding),
        };
        representation.answer(fd, head_only, headers)
    }
}

/// What stands for the request's path in a [`FilesOptions::try_files`] entry.
pub const TRY_PATH: &str = "{path}";

impl StaticFiles {
    /// The Content-Type for a file: the site's own types first, then the built-in table.
    fn content_type(&self, rel: &str) -> String {
        let file = rel.rsplit('/').next().unwrap_or(rel);
        if let Some((stem, ext)) = file.rsplit_once('.')
            && !stem.is_empty()
            && let Some((_, t)) = self
                .opts
                .types
                .iter()
                .find(|(e, _)| e.eq_ignore_ascii_case(ext))
        {
            return t.clone();
        }
        mime::content_type(rel).to_string()
    }

    /// The listing of the directory `rel` (below the root; its title shows it).
    #[cold]
    fn list<H: RequestHeaders + ?Sized>(&self, rel: &str, h: &H) -> FileAnswer {
        match listing::read(self.root.as_fd(), rel, self.confinement) {
            Ok(l) if listing::wants_json(h.header("accept")) => FileAnswer::Listing {
                content_type: "application/json",
                body: listing::json(&l),
            },
            Ok(l) => FileAnswer::Listing {
                content_type: "text/html; charset=utf-8",
                body: listing::html(&l, &format!("/{rel}/").replace("//", "/")),
            },
            Err(open::Probe::Forbidden) => FileAnswer::Forbidden,
            Err(open::Probe::Error(e)) => FileAnswer::Error(e),
            Err(_) => FileAnswer::NotFound,
        }
    }
}

/// One selected file and what describes it on the wire.
struct Representation {
    content_type: String,
    encoding: Encoding,
    vary: bool,
    meta: open::FileMeta,
    validators: Validators,
}

impl Representation {
    fn answer<H: RequestHeaders + ?Sized>(
        mut self,
        file: Arc<OwnedFd>,
        head_only: bool,
        h: &H,
    ) -> FileAnswer {
        let v = &self.validators;
        match validators::evaluate(
            v,
            h.header("if-match"),
            h.header("if-unmodified-since"),
            h.header("if-none-match"),
            h.header("if-modified-since"),
        ) {
            Precondition::Proceed => {}
            Precondition::NotModified => {
                // RFC 9110 §15.4.5: the fields a 200 would carry that update a cache.
                let mut headers = vec![
                    ("ETag", v.etag.clone()),
                    ("Last-Modified", v.last_modified.clone()),
                ];
                self.push_vary(&mut headers);
                return FileAnswer::NotModified { headers };
            }
            Precondition::Failed => {
                let mut headers = Vec::new();
                self.push_vary(&mut headers);
                return FileAnswer::PreconditionFailed { headers };
            }
        }
        let size = self.meta.size;
        // RFC 9110 §14.2: Range is for GET only; If-Range that does not hold means "send
        // the whole representation" (§13.1.5).
        let range = h
            .header("range")
            .filter(|_| !head_only)
            .filter(|_| {
                h.header("if-range")
                    .is_none_or(|ir| validators::if_range_holds(ir, v))
            })
            .map_or(RangeAnswer::Full, |r| range::evaluate(r, size));
        let (status, offset, len) = match range {
            RangeAnswer::Full => (200, 0, size),
            RangeAnswer::Partial { offset, len } => (206, offset, len),
            RangeAnswer::Unsatisfiable => {
                let mut headers = vec![("Content-Range", range::unsatisfied_range(size))];
                self.push_vary(&mut headers);
                return FileAnswer::RangeNotSatisfiable { headers };
            }
        };
        let mut headers = Vec::with_capacity(8);
        headers.push(("Content-Type", std::mem::take(&mut self.content_type)));
        headers.push(("Content-Length", len.to_string()));
        if status == 206 {
            headers.push(("Content-Range", range::content_range(offset, len, size)));
        }
        headers.push(("Last-Modified", v.last_modified.clone()));
        headers.push(("ETag", v.etag.clone()));
        headers.push(("Accept-Ranges", "bytes".to_string()));
        if let Some(coding) = self.encoding.content_encoding() {
            headers.push(("Content-Encoding", coding.to_string()));
        }
        self.push_vary(&mut headers);
        FileAnswer::Send {
            status,
            headers,
            file,
            offset,
            len,
            head_only,
        }
    }

    fn push_vary(&self, headers: &mut Headers) {
        if self.vary {
            headers.push(("Vary", "Accept-Encoding".to_string()));
        }
    }
}

/// `/dir` names a directory: 301 to `./dir/`. Relative (RFC 9110 §10.2.2 allows it), so it
/// is right whatever prefix the files are mounted under; `./` keeps a segment with a colon
/// from reading as a scheme (RFC 3986 §4.2).
fn redirect_to_dir(rel: &str) -> FileAnswer {
    let last = rel.rsplit('/').next().unwrap_or(rel);
    FileAnswer::Redirect {
        location: format!("./{}/", path::encode_segment(last)),
    }
}

fn not_a_file(lookup: Lookup) -> FileAnswer {
    match lookup {
        Lookup::Forbidden => FileAnswer::Forbidden,
        Lookup::Error(e) => FileAnswer::Error(e),
        Lookup::File { .. } | Lookup::Dir | Lookup::Missing => FileAnswer::NotFound,
    }
}
