//! Content-Type by file extension.
//!
//! Owns one static table, matched ASCII case-insensitively on the last extension. It never
//! sniffs content. Text types carry `; charset=utf-8`; anything unknown is
//! `application/octet-stream` so a browser does not guess.
#![forbid(unsafe_code)]

/// The type for files whose extension is not in [`TABLE`] (RFC 9110 §8.3: a recipient may
/// treat data without a usable type as `application/octet-stream`).
pub const DEFAULT_TYPE: &str = "application/octet-stream";

/// Extension (lower case, no dot) → Content-Type.
pub const TABLE: &[(&str, &str)] = &[
    // Text and documents.
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("webmanifest", "application/manifest+json"),
    ("pdf", "application/pdf"),
    ("wasm", "application/wasm"),
    // Images.
    ("svg", "image/svg+xml; charset=utf-8"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("ico", "image/vnd.microsoft.icon"),
    ("bmp", "image/bmp"),
    // Fonts.
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    // Audio and video.
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("ogg", "audio/ogg"),
    ("mp3", "audio/mpeg"),
    ("wav", "audio/wav"),
    // Archives, when asked for by name (not as a precompressed sibling).
    ("gz", "application/gzip"),
    ("br", "application/octet-stream"),
    ("zip", "application/zip"),
    ("tar", "application/x-tar"),
];

/// Longest extension in [`TABLE`]; longer ones cannot match, so they are not lowercased.
const MAX_EXT: usize = 16;

/// The Content-Type for a file name (the last path segment, or the whole relative path).
pub fn content_type(name: &str) -> &'static str {
    let file = name.rsplit('/').next().unwrap_or(name);
    let Some((stem, ext)) = file.rsplit_once('.') else {
        return DEFAULT_TYPE;
    };
    // A dotfile such as `.html` has no extension, only a name.
    if stem.is_empty() || ext.len() > MAX_EXT {
        return DEFAULT_TYPE;
    }
    // Length first: most rows are declined by one compare (this runs per file request).
    TABLE
        .iter()
        .find(|(e, _)| e.len() == ext.len() && e.eq_ignore_ascii_case(ext))
        .map_or(DEFAULT_TYPE, |&(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_table() {
        let rows = [
            ("index.html", "text/html; charset=utf-8"),
            ("a.htm", "text/html; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("mod.mjs", "text/javascript; charset=utf-8"),
            ("data.json", "application/json"),
            ("app.js.map", "application/json"),
            ("logo.svg", "image/svg+xml; charset=utf-8"),
            ("f.woff", "font/woff"),
            ("f.woff2", "font/woff2"),
            ("i.webp", "image/webp"),
            ("i.avif", "image/avif"),
            ("i.png", "image/png"),
            ("i.jpg", "image/jpeg"),
            ("i.jpeg", "image/jpeg"),
            ("i.gif", "image/gif"),
            ("favicon.ico", "image/vnd.microsoft.icon"),
            ("m.wasm", "application/wasm"),
            ("r.txt", "text/plain; charset=utf-8"),
            ("feed.xml", "application/xml; charset=utf-8"),
            ("doc.pdf", "application/pdf"),
            ("v.mp4", "video/mp4"),
            ("v.webm", "video/webm"),
            ("dir/sub/INDEX.HTML", "text/html; charset=utf-8"),
            ("A.Css", "text/css; charset=utf-8"),
            ("archive.tar.gz", "application/gzip"),
            ("Makefile", DEFAULT_TYPE),
            ("x.unknownext", DEFAULT_TYPE),
            (".html", DEFAULT_TYPE),
            ("dir.css/file", DEFAULT_TYPE),
            ("trailing.", DEFAULT_TYPE),
        ];
        for (name, want) in rows {
            assert_eq!(content_type(name), want, "{name}");
        }
    }

    #[test]
    fn table_is_lowercase_and_fits_max_ext() {
        for (ext, _) in TABLE {
            assert_eq!(*ext, ext.to_ascii_lowercase());
            assert!(ext.len() <= MAX_EXT);
        }
    }
}
