//! Directory listings (nginx's `autoindex`, caddy's `browse`), for a mount that turns them
//! on: the entries of a directory without its index, read through the root's confinement,
//! rendered as HTML or as JSON.
//!
//! Owns what a listing shows and how. Shown: regular files (name, size, mtime) and
//! directories, sorted directories first, then by name. Never shown: dotfiles (whatever the
//! mount's `dotfiles` says: a listing is not where a `.env` should be discovered), symlinks,
//! FIFOs, sockets and devices. At most [`MAX_LISTED`] entries are read (the rest is said to be
//! left out), so one request's work on the worker is bounded.
#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::os::fd::{AsFd, BorrowedFd};

use super::open::{self, Confinement, Probe};
use super::path;
use super::validators::http_date;

/// Most entries one listing reads.
pub const MAX_LISTED: usize = 4096;

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub dir: bool,
    /// Bytes (0 for a directory).
    pub size: u64,
    /// Seconds since the epoch.
    pub mtime: i64,
}

/// A directory's listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Directories first, then files, each by name (bytewise).
    pub entries: Vec<Entry>,
    /// More entries than [`MAX_LISTED`] were there.
    pub truncated: bool,
}

/// Reads the directory at `rel` below `root`.
pub(crate) fn read(root: BorrowedFd<'_>, rel: &str, how: Confinement) -> Result<Listing, Probe> {
    let fd = open::open_dir(root, rel, how)?;
    let dir = rustix::fs::Dir::read_from(&fd).map_err(Probe::Error)?;
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in dir {
        let entry = entry.map_err(Probe::Error)?;
        let raw = entry.file_name();
        let Ok(name) = raw.to_str() else {
            continue; // not UTF-8: no URL could reach it
        };
        if name.starts_with('.') {
            continue;
        }
        if entries.len() == MAX_LISTED {
            truncated = true;
            break;
        }
        if let Some((is_dir, meta)) = open::entry_meta(fd.as_fd(), raw) {
            entries.push(Entry {
                name: name.to_string(),
                dir: is_dir,
                size: if is_dir { 0 } else { meta.size },
                mtime: meta.mtime_s,
            });
        }
    }
    // Names are unique in a directory: an unstable sort gives the one order.
    entries.sort_unstable_by(|a, b| b.dir.cmp(&a.dir).then_with(|| a.name.cmp(&b.name)));
    Ok(Listing { entries, truncated })
}

/// Whether a client asked for JSON over HTML (its Accept names `application/json` and not
/// `text/html`, as caddy decides).
pub fn wants_json(accept: Option<&[u8]>) -> bool {
    let Some(accept) = accept.and_then(|a| std::str::from_utf8(a).ok()) else {
        return false;
    };
    let has = |t: &str| {
        accept.split(',').any(|m| {
            m.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case(t)
        })
    };
    has("application/json") && !has("text/html")
}

/// The listing as JSON: nginx's `autoindex_format json` fields (`name`, `type`, `mtime` as
/// an IMF-fixdate, `size` for files), in an object that also says whether entries were left
/// out.
pub fn json(l: &Listing) -> String {
    let entries: Vec<serde_json::Value> = l
        .entries
        .iter()
        .map(|e| {
            let mut v = serde_json::json!({
                "name": e.name,
                "type": if e.dir { "directory" } else { "file" },
                "mtime": http_date(u64::try_from(e.mtime).unwrap_or(0)),
            });
            if !e.dir {
                v["size"] = e.size.into();
            }
            v
        })
        .collect();
    serde_json::json!({ "entries": entries, "truncated": l.truncated }).to_string()
}

/// The listing as an HTML page titled with the request's path `shown` (already decoded).
pub fn html(l: &Listing, shown: &str) -> String {
    let title = escape(shown);
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n\
         <body><h1>Index of {title}</h1>\n<table>\n\
         <tr><th>Name</th><th>Size</th><th>Modified</th></tr>\n\
         <tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n"
    );
    for e in &l.entries {
        let href = path::encode_segment(&e.name);
        let slash = if e.dir { "/" } else { "" };
        let size = if e.dir {
            "-".to_string()
        } else {
            e.size.to_string()
        };
        let _ = writeln!(
            out,
            "<tr><td><a href=\"./{href}{slash}\">{}{slash}</a></td><td>{size}</td><td>{}</td></tr>",
            escape(&e.name),
            http_date(u64::try_from(e.mtime).unwrap_or(0)),
        );
    }
    out.push_str("</table>\n");
    if l.truncated {
        let _ = writeln!(out, "<p>Only the first {MAX_LISTED} entries are shown.</p>");
    }
    out.push_str("</body></html>\n");
    out
}

/// Text for HTML content and attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Listing {
        Listing {
            entries: vec![
                Entry {
                    name: "sub dir".into(),
                    dir: true,
                    size: 0,
                    mtime: 0,
                },
                Entry {
                    name: "<script>&\"x\".txt".into(),
                    dir: false,
                    size: 12,
                    mtime: 784_111_777,
                },
            ],
            truncated: false,
        }
    }

    #[test]
    fn names_are_escaped_in_html_and_encoded_in_links() {
        let page = html(&listing(), "/files/<b>/");
        assert!(
            page.contains("<title>Index of /files/&lt;b&gt;/</title>"),
            "{page}"
        );
        assert!(
            page.contains("<a href=\"./sub%20dir/\">sub dir/</a>"),
            "{page}"
        );
        assert!(
            page.contains("&lt;script&gt;&amp;&quot;x&quot;.txt</a></td><td>12</td><td>Sun, 06 Nov 1994 08:49:37 GMT</td>"),
            "{page}"
        );
        assert!(!page.contains("<script>"), "{page}");
    }

    #[test]
    fn json_carries_nginx_fields() {
        let v: serde_json::Value = serde_json::from_str(&json(&listing())).unwrap();
        assert_eq!(v["truncated"], false);
        assert_eq!(v["entries"][0]["type"], "directory");
        assert!(v["entries"][0].get("size").is_none());
        assert_eq!(v["entries"][1]["name"], "<script>&\"x\".txt");
        assert_eq!(v["entries"][1]["size"], 12);
        assert_eq!(v["entries"][1]["mtime"], "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn json_is_chosen_only_when_asked_over_html() {
        #[rustfmt::skip]
        let rows: &[(Option<&str>, bool)] = &[
            (None, false),
            (Some("*/*"), false),
            (Some("application/json"), true),
            (Some("application/json;q=0.9, */*;q=0.1"), true),
            (Some("text/html,application/xhtml+xml,application/json"), false),
            (Some("application/jsonx"), false),
        ];
        for (accept, want) in rows {
            assert_eq!(wants_json(accept.map(str::as_bytes)), *want, "{accept:?}");
        }
    }
}
