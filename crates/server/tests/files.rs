//! Static files against a real temporary tree: traversal attempts (with a canary file above
//! the root), symlinks, a FIFO, MIME types, conditional requests, ranges, precompressed
//! siblings, directories and the open-file cache. No sockets: answers are inspected as
//! values, and bodies are read back from the returned fd at the returned offset.

use std::fs;
use std::os::unix::fs::{FileExt, MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use linerate_server::Method;
use linerate_server::files::{Confinement, FileAnswer, FilesOptions, StaticFiles, SymlinkPolicy};

const CANARY: &[u8] = b"CANARY: this must never be served";
const HELLO: &[u8] = b"hello world\n";
const JS: &[u8] = b"console.log('identity representation, the longest one');\n";
const JS_BR: &[u8] = b"BR-BYTES";
const JS_GZ: &[u8] = b"GZIP-BYTES!";

/// A directory tree under the system temp dir, removed on drop:
/// `base/canary` above `base/root/`, which is the served root.
struct Tree {
    base: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "linerate-files-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("root")).unwrap();
        let t = Tree { base };
        fs::write(t.base.join("canary"), CANARY).unwrap();
        t.write("hello.txt", HELLO);
        t.write("a.css", b"body{}");
        t.write("data.unknownext", b"?");
        t.write("index.html", b"<h1>root</h1>");
        t.write("sub/index.html", b"<h1>sub</h1>");
        t.write("sub/page.html", b"<p>page</p>");
        t.write("noindex/file.txt", b"x");
        t.write(
            "big.bin",
            &(0..1000u32).map(|i| i as u8).collect::<Vec<_>>(),
        );
        t.write("empty.txt", b"");
        t.write("app.js", JS);
        t.write("app.js.br", JS_BR);
        t.write("app.js.gz", JS_GZ);
        t.write("only-gz.css", b"p{color:red}");
        t.write("only-gz.css.gz", b"GZ");
        symlink("../canary", t.root().join("link-out")).unwrap();
        symlink(t.base.join("canary"), t.root().join("link-out-abs")).unwrap();
        symlink("..", t.root().join("dir-link-out")).unwrap();
        symlink("hello.txt", t.root().join("link-in")).unwrap();
        symlink("sub", t.root().join("dir-link-in")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.root().join("fifo"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        t
    }

    fn root(&self) -> PathBuf {
        self.base.join("root")
    }

    fn write(&self, rel: &str, contents: &[u8]) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, contents).unwrap();
    }

    /// Replaces `rel` by a new file (new inode), as a deploy does: write then rename.
    fn replace(&self, rel: &str, contents: &[u8]) {
        let tmp = self.root().join(format!("{rel}.tmp"));
        fs::write(&tmp, contents).unwrap();
        fs::rename(&tmp, self.root().join(rel)).unwrap();
    }

    fn open(&self, opts: FilesOptions) -> StaticFiles {
        StaticFiles::open(&self.root(), opts).unwrap()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

fn get(files: &StaticFiles, path: &str, headers: &[(&str, &str)]) -> FileAnswer {
    files.resolve(Method::Get, path.as_bytes(), headers)
}

fn header<'a>(a: &'a FileAnswer, name: &str) -> Option<&'a str> {
    a.headers()
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The bytes a connection would sendfile for this answer.
fn body(a: &FileAnswer) -> Vec<u8> {
    let FileAnswer::Send {
        file,
        offset,
        len,
        head_only,
        ..
    } = a
    else {
        panic!("not a Send: {a:?}");
    };
    assert!(!head_only);
    let f = fs::File::from(file.try_clone().unwrap());
    let mut buf = vec![0; *len as usize];
    f.read_exact_at(&mut buf, *offset).unwrap();
    buf
}

/// The strong ETag the module documents: `"<size>-<mtime s>.<mtime ns>[-br|-gz]"`.
fn etag_of(path: &Path, suffix: &str) -> String {
    let m = fs::metadata(path).unwrap();
    format!(
        "\"{:x}-{:x}.{:x}{suffix}\"",
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    )
}

fn last_modified_of(path: &Path) -> String {
    let secs = fs::metadata(path).unwrap().mtime() as u64;
    httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Runs `f` on another thread and fails (rather than hangs) if it takes too long: a FIFO
/// opened for reading would block until a writer appears.
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("resolve blocked")
}

#[test]
fn traversal_table_never_serves_the_canary() {
    let tree = Tree::new();
    for policy in [SymlinkPolicy::FollowBeneath, SymlinkPolicy::Refuse] {
        let files = tree.open(FilesOptions {
            symlinks: policy,
            ..FilesOptions::default()
        });
        let follows = files.confinement() == Confinement::Beneath;
        // (raw path, expected status)
        let rows: &[(&str, u16)] = &[
            // RFC 3986 §5.2.4: dot-segments that climb above the root are refused.
            ("/../canary", 400),
            ("../canary", 400),
            ("/sub/../../canary", 400),
            ("/%2e%2e/canary", 400),
            ("/%2E%2E/canary", 400),
            ("/.%2e/canary", 400),
            // Decoded once: `%252e%252e` is the literal directory name `%2e%2e` (missing).
            ("/%252e%252e/canary", 404),
            ("/%252e%252e%252fcanary", 404),
            // Encoded slashes and backslashes are refused, not decoded into separators.
            ("/..%2fcanary", 400),
            ("/..%2Fcanary", 400),
            ("/..%5ccanary", 400),
            ("/..\\canary", 400),
            ("/sub\\..\\..\\canary", 400),
            // Overlong UTF-8 for `.` is not UTF-8 at all.
            ("/%c0%ae%c0%ae/canary", 400),
            ("/%c0%2e%c0%2e/canary", 400),
            // NUL, raw or encoded, and other controls.
            ("/hello.txt%00.html", 400),
            ("/canary%00", 400),
            ("/hello.txt%0a", 400),
            // Incomplete or invalid escapes (RFC 3986 §2.1).
            ("/hello%2", 400),
            ("/hello%", 400),
            ("/hello%g0", 400),
            // Absolute-looking paths stay below the root.
            ("//etc/passwd", 404),
            ("///canary", 404),
            // Symlinks that leave the root (relative, absolute, through a directory).
            ("/link-out", 404),
            ("/link-out-abs", 404),
            ("/dir-link-out/canary", 404),
            ("/dir-link-out/root/hello.txt", 404),
            // Only regular files are served: the FIFO is 404 and does not block.
            ("/fifo", 404),
            // Missing things.
            ("/missing.txt", 404),
            ("/noindex/", 404),
            ("/hello.txt/", 404),
            // Symlinks inside the root are followed where the kernel confines them.
            ("/link-in", if follows { 200 } else { 404 }),
            ("/dir-link-in/page.html", if follows { 200 } else { 404 }),
            ("/hello.txt", 200),
        ];
        let files = std::sync::Arc::new(std::sync::Mutex::new(files));
        for &(raw, want) in rows {
            let shared = std::sync::Arc::clone(&files);
            let raw_owned = raw.to_string();
            let (status, served) = within(move || {
                let files = shared.lock().unwrap();
                let a = get(&files, &raw_owned, &[]);
                let served = matches!(a, FileAnswer::Send { .. }).then(|| body(&a));
                (a.status(), served)
            });
            assert_eq!(status, want, "{policy:?} {raw}");
            if let Some(bytes) = served {
                assert_ne!(bytes, CANARY, "{policy:?} {raw} served the canary");
            }
        }
    }
}

#[test]
fn symlink_inside_root_is_served_with_target_contents() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    if files.confinement() != Confinement::Beneath {
        // Without openat2 no link is followed; the table test covers that (404).
        assert_eq!(get(&files, "/link-in", &[]).status(), 404);
        return;
    }
    let a = get(&files, "/link-in", &[]);
    assert_eq!(a.status(), 200);
    assert_eq!(body(&a), HELLO);
    // The type comes from the requested name, which has no extension.
    assert_eq!(header(&a, "content-type"), Some("application/octet-stream"));
}

#[test]
fn mime_rows() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let rows = [
        ("/hello.txt", "text/plain; charset=utf-8"),
        ("/a.css", "text/css; charset=utf-8"),
        ("/index.html", "text/html; charset=utf-8"),
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/big.bin", "application/octet-stream"),
        ("/data.unknownext", "application/octet-stream"),
        ("/", "text/html; charset=utf-8"),
    ];
    for (path, want) in rows {
        let a = get(&files, path, &[]);
        assert_eq!(header(&a, "content-type"), Some(want), "{path}");
    }
}

#[test]
fn get_200_exact_header_set() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let p = tree.root().join("hello.txt");
    let a = get(&files, "/hello.txt", &[]);
    let FileAnswer::Send {
        status,
        headers,
        offset,
        len,
        head_only,
        ..
    } = &a
    else {
        panic!("{a:?}")
    };
    assert_eq!((*status, *offset, *len, *head_only), (200, 0, 12, false));
    let want: Vec<(&str, String)> = vec![
        ("Content-Type", "text/plain; charset=utf-8".into()),
        ("Content-Length", "12".into()),
        ("Last-Modified", last_modified_of(&p)),
        ("ETag", etag_of(&p, "")),
        ("Accept-Ranges", "bytes".into()),
    ];
    assert_eq!(headers, &want);
    assert_eq!(body(&a), HELLO);
}

#[test]
fn head_has_get_headers_and_no_body() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    for (path, accept) in [("/hello.txt", ""), ("/app.js", "gzip, br"), ("/sub/", "")] {
        let hs = [("Accept-Encoding", accept)];
        let g = files.resolve(Method::Get, path.as_bytes(), &hs[..]);
        let h = files.resolve(Method::Head, path.as_bytes(), &hs[..]);
        assert_eq!(g.headers(), h.headers(), "{path}");
        assert_eq!(h.status(), 200);
        let FileAnswer::Send { head_only, len, .. } = h else {
            panic!()
        };
        assert!(head_only);
        assert_eq!(Some(len.to_string().as_str()), header(&g, "content-length"));
    }
    // RFC 9110 §14.2: Range is defined for GET only; HEAD gets the 200 headers.
    let h = files.resolve(Method::Head, b"/big.bin", &[("Range", "bytes=0-9")][..]);
    assert_eq!(h.status(), 200);
    assert_eq!(header(&h, "content-length"), Some("1000"));
}

#[test]
fn methods_other_than_get_and_head_are_405() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    for m in [Method::Post, Method::Put, Method::Delete, Method::Options] {
        let a = files.resolve(m, b"/hello.txt", &[][..]);
        assert!(matches!(a, FileAnswer::MethodNotAllowed));
        assert_eq!(a.status(), 405);
    }
}

#[test]
fn conditional_requests() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let p = tree.root().join("hello.txt");
    let etag = etag_of(&p, "");
    let lm = last_modified_of(&p);
    let before = "Thu, 01 Jan 1970 00:00:01 GMT";
    let weak = format!("W/{etag}");
    let list = format!("\"nope\", {etag}");
    // (request headers, expected status)
    let rows: Vec<(Vec<(&str, &str)>, u16)> = vec![
        // RFC 9110 §13.1.2: If-None-Match, weak comparison, `*`, lists.
        (vec![("If-None-Match", &etag)], 304),
        (vec![("If-None-Match", &weak)], 304),
        (vec![("If-None-Match", &list)], 304),
        (vec![("If-None-Match", "*")], 304),
        (vec![("If-None-Match", "\"nope\"")], 200),
        // RFC 9110 §13.1.3: If-Modified-Since.
        (vec![("If-Modified-Since", &lm)], 304),
        (vec![("If-Modified-Since", before)], 200),
        (vec![("If-Modified-Since", "garbage")], 200),
        // RFC 9110 §13.2.2: If-None-Match takes precedence over If-Modified-Since.
        (
            vec![("If-None-Match", "\"nope\""), ("If-Modified-Since", &lm)],
            200,
        ),
        (
            vec![("If-None-Match", &etag), ("If-Modified-Since", before)],
            304,
        ),
        // RFC 9110 §13.1.1 / §13.1.4: If-Match (strong) and If-Unmodified-Since.
        (vec![("If-Match", &etag)], 200),
        (vec![("If-Match", &weak)], 412),
        (vec![("If-Unmodified-Since", before)], 412),
        (vec![("If-Unmodified-Since", &lm)], 200),
    ];
    for (hs, want) in rows {
        let a = get(&files, "/hello.txt", &hs);
        assert_eq!(a.status(), want, "{hs:?}");
        if want == 304 {
            // RFC 9110 §15.4.5: exactly the cache-updating fields, no body framing.
            let expected: Vec<(&str, String)> =
                vec![("ETag", etag.clone()), ("Last-Modified", lm.clone())];
            assert_eq!(a.headers(), expected.as_slice(), "{hs:?}");
        }
    }
    // HEAD is conditional too.
    let a = files.resolve(
        Method::Head,
        b"/hello.txt",
        &[("If-None-Match", etag.as_str())][..],
    );
    assert_eq!(a.status(), 304);
}

#[test]
fn not_modified_for_precompressed_carries_vary_and_coded_etag() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let br = tree.root().join("app.js.br");
    let etag = etag_of(&br, "-br");
    let a = get(
        &files,
        "/app.js",
        &[("Accept-Encoding", "br"), ("If-None-Match", &etag)],
    );
    let expected: Vec<(&str, String)> = vec![
        ("ETag", etag.clone()),
        ("Last-Modified", last_modified_of(&br)),
        ("Vary", "Accept-Encoding".into()),
    ];
    assert_eq!(a.status(), 304);
    assert_eq!(a.headers(), expected.as_slice());
    // The identity representation has another ETag: the br tag does not match it.
    let a = get(&files, "/app.js", &[("If-None-Match", &etag)]);
    assert_eq!(a.status(), 200);
    assert_eq!(body(&a), JS);
}

#[test]
fn range_rows() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let all: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    let etag = etag_of(&tree.root().join("big.bin"), "");
    let lm = last_modified_of(&tree.root().join("big.bin"));
    // (Range, If-Range, status, Content-Range, offset, len)
    type Row<'a> = (&'a str, Option<&'a str>, u16, Option<&'a str>, u64, u64);
    let rows: Vec<Row> = vec![
        // RFC 9110 §14.1.2: int-range, open-ended, suffix.
        ("bytes=0-99", None, 206, Some("bytes 0-99/1000"), 0, 100),
        ("bytes=10-10", None, 206, Some("bytes 10-10/1000"), 10, 1),
        (
            "bytes=900-",
            None,
            206,
            Some("bytes 900-999/1000"),
            900,
            100,
        ),
        ("bytes=-10", None, 206, Some("bytes 990-999/1000"), 990, 10),
        (
            "bytes=990-5000",
            None,
            206,
            Some("bytes 990-999/1000"),
            990,
            10,
        ),
        ("bytes=-5000", None, 206, Some("bytes 0-999/1000"), 0, 1000),
        // RFC 9110 §15.5.17: unsatisfiable → 416 with `bytes */size`.
        ("bytes=1000-", None, 416, Some("bytes */1000"), 0, 0),
        ("bytes=-0", None, 416, Some("bytes */1000"), 0, 0),
        // Multi-range: the whole file with 200 (documented choice).
        ("bytes=0-1,10-11", None, 200, None, 0, 1000),
        // Invalid or other units: ignored.
        ("bytes=9-1", None, 200, None, 0, 1000),
        ("lines=1-2", None, 200, None, 0, 1000),
        // RFC 9110 §13.1.5: If-Range with the current strong ETag or exact date applies the
        // range; anything else sends the whole file.
        ("bytes=0-9", Some(&etag), 206, Some("bytes 0-9/1000"), 0, 10),
        ("bytes=0-9", Some(&lm), 206, Some("bytes 0-9/1000"), 0, 10),
        ("bytes=0-9", Some("\"stale\""), 200, None, 0, 1000),
        (
            "bytes=0-9",
            Some("Thu, 01 Jan 1970 00:00:01 GMT"),
            200,
            None,
            0,
            1000,
        ),
    ];
    for (range, if_range, status, content_range, offset, len) in rows {
        let mut hs = vec![("Range", range)];
        if let Some(ir) = if_range {
            hs.push(("If-Range", ir));
        }
        let a = get(&files, "/big.bin", &hs);
        assert_eq!(a.status(), status, "{hs:?}");
        assert_eq!(header(&a, "content-range"), content_range, "{hs:?}");
        if status == 416 {
            let expected: Vec<(&str, String)> = vec![("Content-Range", "bytes */1000".into())];
            assert_eq!(a.headers(), expected.as_slice());
            continue;
        }
        let FileAnswer::Send {
            offset: o, len: l, ..
        } = &a
        else {
            panic!("{a:?}")
        };
        assert_eq!((*o, *l), (offset, len), "{hs:?}");
        assert_eq!(header(&a, "content-length"), Some(len.to_string().as_str()));
        assert_eq!(body(&a), &all[offset as usize..(offset + len) as usize]);
    }
    // A zero-length file is sent whole: there is no byte to range over.
    let a = get(&files, "/empty.txt", &[("Range", "bytes=0-")]);
    assert_eq!(a.status(), 200);
    assert_eq!(header(&a, "content-length"), Some("0"));
}

#[test]
fn precompressed_selection_rows() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    // (path, Accept-Encoding, Content-Encoding, body)
    type Row<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);
    let rows: &[Row] = &[
        ("/app.js", None, None, JS),
        ("/app.js", Some(""), None, JS),
        ("/app.js", Some("gzip"), Some("gzip"), JS_GZ),
        ("/app.js", Some("br"), Some("br"), JS_BR),
        // RFC 9110 §12.5.3: q=0 refuses; equal q prefers br; higher q wins.
        ("/app.js", Some("gzip, deflate, br"), Some("br"), JS_BR),
        ("/app.js", Some("gzip;q=0, br"), Some("br"), JS_BR),
        ("/app.js", Some("br;q=0, gzip"), Some("gzip"), JS_GZ),
        ("/app.js", Some("br;q=0.2, gzip;q=0.9"), Some("gzip"), JS_GZ),
        ("/app.js", Some("br;q=0, gzip;q=0"), None, JS),
        ("/app.js", Some("identity"), None, JS),
        ("/app.js", Some("identity, br;q=0.5"), None, JS),
        ("/app.js", Some("*"), Some("br"), JS_BR),
        ("/app.js", Some("*;q=0, identity"), None, JS),
        ("/app.js", Some("x-gzip"), Some("gzip"), JS_GZ),
        // Only a .gz sibling exists.
        ("/only-gz.css", Some("br, gzip"), Some("gzip"), b"GZ"),
        ("/only-gz.css", Some("br"), None, b"p{color:red}"),
        // No sibling: no coding, whatever is accepted.
        ("/hello.txt", Some("br, gzip"), None, HELLO),
    ];
    for &(path, accept, coding, want) in rows {
        let hs: Vec<(&str, &str)> = accept.map(|v| ("Accept-Encoding", v)).into_iter().collect();
        let a = get(&files, path, &hs);
        assert_eq!(a.status(), 200, "{path} {accept:?}");
        assert_eq!(header(&a, "content-encoding"), coding, "{path} {accept:?}");
        assert_eq!(body(&a), want, "{path} {accept:?}");
        assert_eq!(
            header(&a, "content-length"),
            Some(want.len().to_string().as_str())
        );
        // Vary on every answer for a file that has a sibling, identity included.
        let has_sibling = path != "/hello.txt";
        assert_eq!(
            header(&a, "vary"),
            has_sibling.then_some("Accept-Encoding"),
            "{path} {accept:?}"
        );
        // The type is the original's, not application/gzip.
        assert_ne!(header(&a, "content-type"), Some("application/gzip"));
    }
}

#[test]
fn precompressed_etags_differ_and_ranges_apply_to_the_encoded_file() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let id = get(&files, "/app.js", &[]);
    let br = get(&files, "/app.js", &[("Accept-Encoding", "br")]);
    let gz = get(&files, "/app.js", &[("Accept-Encoding", "gzip")]);
    let tags = [&id, &br, &gz].map(|a| header(a, "etag").unwrap().to_string());
    assert_eq!(tags[1], etag_of(&tree.root().join("app.js.br"), "-br"));
    assert_eq!(tags[2], etag_of(&tree.root().join("app.js.gz"), "-gz"));
    assert!(tags[0] != tags[1] && tags[1] != tags[2] && tags[0] != tags[2]);
    let a = get(
        &files,
        "/app.js",
        &[("Accept-Encoding", "br"), ("Range", "bytes=3-")],
    );
    assert_eq!(a.status(), 206);
    assert_eq!(header(&a, "content-range"), Some("bytes 3-7/8"));
    assert_eq!(body(&a), &JS_BR[3..]);
    let a = get(
        &files,
        "/app.js",
        &[("Accept-Encoding", "gzip"), ("Range", "bytes=100-")],
    );
    let expected: Vec<(&str, String)> = vec![
        ("Content-Range", "bytes */11".into()),
        ("Vary", "Accept-Encoding".into()),
    ];
    assert_eq!(a.status(), 416);
    assert_eq!(a.headers(), expected.as_slice());
}

#[test]
fn precompressed_off_serves_identity_without_vary() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions {
        precompressed: false,
        ..FilesOptions::default()
    });
    let a = get(&files, "/app.js", &[("Accept-Encoding", "br, gzip")]);
    assert_eq!(body(&a), JS);
    assert_eq!(header(&a, "vary"), None);
    assert_eq!(header(&a, "content-encoding"), None);
}

#[test]
fn directories_redirect_or_serve_index() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    // A directory without its slash: 301 to the relative `./name/`.
    let a = get(&files, "/sub", &[]);
    assert_eq!(a.status(), 301);
    assert!(matches!(&a, FileAnswer::Redirect { location } if location == "./sub/"));
    let a = get(&files, "/noindex", &[]);
    assert!(matches!(&a, FileAnswer::Redirect { location } if location == "./noindex/"));
    // With the slash (or a trailing dot-segment): the index.
    for path in ["/sub/", "/sub/.", "/sub/page.html/..", "/sub//"] {
        let a = get(&files, path, &[]);
        assert_eq!(a.status(), 200, "{path}");
        assert_eq!(body(&a), b"<h1>sub</h1>", "{path}");
        assert_eq!(header(&a, "content-type"), Some("text/html; charset=utf-8"));
    }
    // The root, with or without the leading slash.
    for path in ["/", ""] {
        assert_eq!(body(&get(&files, path, &[])), b"<h1>root</h1>", "{path:?}");
    }
    // No listings.
    assert_eq!(get(&files, "/noindex/", &[]).status(), 404);
    // A custom index name.
    let files = tree.open(FilesOptions {
        index: "page.html".into(),
        ..FilesOptions::default()
    });
    assert_eq!(body(&get(&files, "/sub/", &[])), b"<p>page</p>");
    assert!(
        StaticFiles::open(
            &tree.root(),
            FilesOptions {
                index: "../x".into(),
                ..FilesOptions::default()
            }
        )
        .is_err()
    );
}

#[test]
fn root_must_be_a_directory() {
    let tree = Tree::new();
    assert!(StaticFiles::open(&tree.root().join("hello.txt"), FilesOptions::default()).is_err());
    assert!(StaticFiles::open(&tree.root().join("missing"), FilesOptions::default()).is_err());
}

#[test]
fn cache_hits_without_syscalls_while_fresh() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let t0 = Instant::now();
    let a = files.resolve_at(t0, Method::Get, b"/hello.txt", &[][..]);
    let first = files.cache_stats();
    // hello.txt, hello.txt.br, hello.txt.gz: three misses.
    assert_eq!((first.misses, first.hits), (3, 0));
    let b = files.resolve_at(
        t0 + Duration::from_millis(999),
        Method::Get,
        b"/hello.txt",
        &[][..],
    );
    let second = files.cache_stats();
    assert_eq!(
        (second.misses, second.hits, second.revalidations),
        (3, 3, 0)
    );
    assert_eq!(a.headers(), b.headers());
    // A second worker has its own, empty cache.
    let other = files.for_worker();
    assert_eq!(other.cache_len(), 0);
    assert_eq!(
        body(&other.resolve(Method::Get, b"/hello.txt", &[][..])),
        HELLO
    );
}

#[test]
fn cache_notices_a_replaced_file_after_revalidate_after() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let t0 = Instant::now();
    let old = files.resolve_at(t0, Method::Get, b"/hello.txt", &[][..]);
    tree.replace("hello.txt", b"new contents, longer\n");
    // Within the revalidation interval the entry is trusted (documented staleness).
    let stale = files.resolve_at(
        t0 + Duration::from_millis(500),
        Method::Get,
        b"/hello.txt",
        &[][..],
    );
    assert_eq!(body(&stale), HELLO);
    // At the interval it is re-probed, found changed and reopened.
    let fresh = files.resolve_at(
        t0 + Duration::from_secs(1),
        Method::Get,
        b"/hello.txt",
        &[][..],
    );
    assert_eq!(body(&fresh), b"new contents, longer\n");
    assert_ne!(header(&fresh, "etag"), header(&old, "etag"));
    let stats = files.cache_stats();
    assert_eq!(stats.changed, 1);
    // An answer already handed out keeps reading the file it opened.
    assert_eq!(body(&old), HELLO);
}

#[test]
fn cache_with_zero_interval_notices_every_change() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions {
        revalidate_after: Duration::ZERO,
        ..FilesOptions::default()
    });
    let t0 = Instant::now();
    assert_eq!(
        body(&files.resolve_at(t0, Method::Get, b"/a.css", &[][..])),
        b"body{}"
    );
    // Rewritten in place (same inode, new size) and then replaced: both seen at once.
    fs::write(tree.root().join("a.css"), b"body{margin:0}").unwrap();
    let a = files.resolve_at(t0, Method::Get, b"/a.css", &[][..]);
    assert_eq!(body(&a), b"body{margin:0}");
    tree.replace("a.css", b"p{}");
    assert_eq!(
        body(&files.resolve_at(t0, Method::Get, b"/a.css", &[][..])),
        b"p{}"
    );
    // Removed: 404; created again: served. Missing entries are revalidated too.
    fs::remove_file(tree.root().join("a.css")).unwrap();
    assert_eq!(
        files
            .resolve_at(t0, Method::Get, b"/a.css", &[][..])
            .status(),
        404
    );
    tree.write("a.css", b"back");
    assert_eq!(
        body(&files.resolve_at(t0, Method::Get, b"/a.css", &[][..])),
        b"back"
    );
    // A sibling appearing later is picked up, with Vary.
    tree.write("a.css.br", b"BR");
    let a = files.resolve_at(t0, Method::Get, b"/a.css", &[("Accept-Encoding", "br")][..]);
    assert_eq!(body(&a), b"BR");
    assert_eq!(header(&a, "vary"), Some("Accept-Encoding"));
}

#[test]
fn cache_is_bounded() {
    let tree = Tree::new();
    let files = tree.open(FilesOptions {
        cache_entries: 4,
        precompressed: false,
        ..FilesOptions::default()
    });
    for path in [
        "/hello.txt",
        "/a.css",
        "/big.bin",
        "/app.js",
        "/index.html",
        "/empty.txt",
    ] {
        assert_eq!(
            files
                .resolve(Method::Get, path.as_bytes(), &[][..])
                .status(),
            200
        );
        assert!(files.cache_len() <= 4);
    }
    assert_eq!(files.cache_stats().evictions, 2);
    // Missing paths are not kept, so requests for them cannot evict files that exist.
    for i in 0..10 {
        let path = format!("/missing-{i}");
        assert_eq!(
            files
                .resolve(Method::Get, path.as_bytes(), &[][..])
                .status(),
            404
        );
    }
    assert_eq!(files.cache_stats().evictions, 2);
    // Capacity 0: nothing is kept, answers are still right.
    let files = tree.open(FilesOptions {
        cache_entries: 0,
        ..FilesOptions::default()
    });
    assert_eq!(
        body(&files.resolve(Method::Get, b"/hello.txt", &[][..])),
        HELLO
    );
    assert_eq!(files.cache_len(), 0);
}

#[test]
fn static_files_moves_to_a_worker_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<StaticFiles>();
    assert_send::<FileAnswer>();
    let tree = Tree::new();
    let files = tree.open(FilesOptions::default());
    let worker = files.for_worker();
    let status =
        std::thread::spawn(move || worker.resolve(Method::Get, b"/a.css", &[][..]).status())
            .join()
            .unwrap();
    assert_eq!(status, 200);
}
