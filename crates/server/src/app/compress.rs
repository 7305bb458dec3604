//! Dynamic response compression: gzip or br (gzip with the `gzip` feature: `app/gz.rs`; br
//! with the `brotli` feature: `app/br.rs`) for in-memory bodies when the client asks.
//!
//! Owns the decision (status 200, compressible Content-Type, body held in memory, at least
//! `min_bytes` and at most `max_bytes` (the worker compresses nothing else meanwhile: see
//! [`COMPRESS_MAX_BYTES`]), no Content-Encoding from the handler, no `Cache-Control: no-transform`: a
//! route's way to opt out) and the compressing. File bodies are `static_gz`'s (compressed once
//! per worker and cached, when no precompressed sibling serves); this never
//! compresses for a request without Accept-Encoding. Every eligible response gets
//! `Vary: Accept-Encoding`, compressed or not, so caches keep the variants apart. The coding
//! is chosen by the static-file module's RFC 9110 §12.5.3 parser (`files::encoding::choose`):
//! q-values, `q=0`, `*`, `identity`; br before gzip at equal q.
//!
//! Levels were chosen by measurement (`cargo bench -p linerate --bench compress`: the
//! fastest of 2 000 calls, one core of a loaded 2-vCPU VM, Rust encoders flate2/miniz_oxide and
//! the `brotli` crate, bench profile without LTO). Bodies: the demo's `/json/50` (8 454 bytes)
//! and `/json` (27 bytes):
//!
//! | coding   | /json/50 bytes | ratio | µs/response | /json bytes | µs/response |
//! |----------|---------------:|------:|------------:|------------:|------------:|
//! | identity |          8 454 | 1.000 |           0 |          27 |           0 |
//! | gzip 1   |          2 045 | 0.242 |          59 |          47 |          21 |
//! | gzip 4   |          1 531 | 0.181 |         159 |          47 |          23 |
//! | gzip 6   |          1 515 | 0.179 |         182 |          47 |          23 |
//! | gzip 9   |          1 514 | 0.179 |         189 |          47 |          21 |
//! | br 1     |          2 210 | 0.261 |          91 |          31 |           7 |
//! | br 3     |          1 566 | 0.185 |         119 |          32 |          18 |
//! | br 4     |          1 531 | 0.181 |         177 |          32 |          39 |
//! | br 5     |          1 374 | 0.163 |       2 899 |          32 |          88 |
//! | br 6     |          1 374 | 0.163 |       2 886 |          32 |          87 |
//! | br 11    |          1 222 | 0.145 |      15 809 |          32 |         626 |
//!
//! HttpArena scores rate and bytes together. A worker spends a few µs on an identity `/json/50`,
//! so compression cost sets the rate: scoring by bytes × µs per response, gzip 1 (2 045 × 64)
//! beats gzip 4 (1 531 × 164) by 1.9× and every brotli quality too, so the default gzip level
//! is 1 (also the level HttpArena's compression profile requires). Brotli default is 3: the
//! cheapest quality within 4 % of gzip 9's size, faster than gzip 4; br 1 is bigger and slower
//! than gzip 1; 5 and up cost 25× more. br stays preferred at equal q: clients that offer br
//! are browsers on real networks, where 23 % fewer bytes than gzip 1 is worth ~60 µs of CPU,
//! and benchmark clients ask for gzip alone. Below [`COMPRESS_MIN_BYTES`] (1 KiB) a response
//! fits one TCP segment either way, so compressing saves no packet and still pays the encoder's
//! set-up (the `/json` columns: 7–21 µs to make the body larger).
//!
//! [`COMPRESS_MIN_BYTES`]: crate::config::COMPRESS_MIN_BYTES
//! [`COMPRESS_MAX_BYTES`]: crate::config::COMPRESS_MAX_BYTES
#![forbid(unsafe_code)]

use std::borrow::Cow;

use crate::config::Compression;
use crate::files::encoding::{self, Encoding};
use crate::response::{Body, Response};

/// Media types (lower case, parameters stripped) worth compressing besides `text/*` and the
/// `+json` / `+xml` structured-syntax suffixes (RFC 6839).
const COMPRESSIBLE: &[&str] = &[
    "application/json",
    "application/javascript",
    "application/ecmascript",
    "application/xml",
    "application/x-ndjson",
    "application/manifest+json",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "image/bmp",
    "font/ttf",
    "font/otf",
];

/// Compresses `resp` for a request whose Accept-Encoding is `accept`, when it is eligible and
/// the chosen coding makes it smaller. The only path by which the server compresses.
///
/// Never inlined: the encoders' state is large, and inlined into the dispatcher it gave every
/// response a 14 KiB stack frame with three stack-probe writes, compressed or not.
#[inline(never)]
pub fn negotiate(mut resp: Response, accept: Option<&[u8]>, cfg: &Compression) -> Response {
    if !eligible(&resp, cfg) {
        return resp;
    }
    add_vary(&mut resp);
    let coding = encoding::choose(accept, encodable);
    let body = resp.body.as_bytes();
    let encoded = match coding {
        Encoding::Identity => return resp,
        Encoding::Gzip => super::gz::compress(body, cfg.gzip_level),
        Encoding::Brotli => super::br::compress(body, cfg.brotli_quality),
    };
    // A body that does not shrink (already dense) goes out as it is.
    if encoded.is_empty() || encoded.len() >= body.len() {
        return resp;
    }
    let Some(name) = coding.content_encoding() else {
        return resp;
    };
    resp.headers
        .push((Cow::Borrowed("Content-Encoding"), Cow::Borrowed(name)));
    weaken_etag(&mut resp);
    resp.body = Body::Owned(encoded);
    resp
}

/// `resp` (a file answer) carrying `encoded`, its body in `coding`: Content-Encoding, `Vary`,
/// a weak ETag (see `static_gz`).
pub(crate) fn with_encoding(mut resp: Response, coding: Encoding, encoded: Vec<u8>) -> Response {
    add_vary(&mut resp);
    if let Some(name) = coding.content_encoding() {
        resp.headers
            .push((Cow::Borrowed("Content-Encoding"), Cow::Borrowed(name)));
        weaken_etag(&mut resp);
    }
    resp.body = Body::Owned(encoded);
    resp
}

/// `Vary: Accept-Encoding`, unless the answer already varies on it (or on everything).
pub(crate) fn add_vary(resp: &mut Response) {
    if !has_token(resp, "vary", "accept-encoding") && !has_token(resp, "vary", "*") {
        resp.headers
            .push((Cow::Borrowed("Vary"), Cow::Borrowed("Accept-Encoding")));
    }
}

/// Whether `resp` may be compressed at all, whatever the client accepts; exactly the
/// responses that vary on Accept-Encoding.
#[inline(always)]
pub(crate) fn eligible(resp: &Response, cfg: &Compression) -> bool {
    matches!(resp.body, Body::Static(_) | Body::Owned(_))
        && worth_compressing(resp, resp.body.as_bytes().len() as u64, cfg)
        // Last: most answers are below `min_bytes`, and leave before this.
        && resp.body.as_bytes().len() <= cfg.max_bytes
}

/// The rule both kinds of compression share (in-memory bodies here, files in `static_gz`):
/// on, a 200 of at least `min_bytes`, a compressible type, not already encoded, and no
/// `Cache-Control: no-transform`.
#[inline(always)]
pub(crate) fn worth_compressing(resp: &Response, len: u64, cfg: &Compression) -> bool {
    cfg.enabled
        && resp.status == 200
        && len >= cfg.min_bytes as u64
        && resp.content_type.as_deref().is_some_and(compressible)
        && !resp.headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("content-encoding")
                || (n.eq_ignore_ascii_case("cache-control") && no_transform(v))
        })
}

/// `Cache-Control: no-transform`: how a route opts out of compression (a secret beside
/// reflected input over HTTPS: BREACH).
fn no_transform(value: &str) -> bool {
    value
        .split(',')
        .any(|d| d.trim().eq_ignore_ascii_case("no-transform"))
}

/// Whether a Content-Type names a media type that compresses well (text, JSON, XML, SVG…).
pub fn compressible(content_type: &str) -> bool {
    compressible_bytes(content_type.as_bytes())
}

/// [`compressible`] on the bytes of a Content-Type value (a proxied answer's, read as bytes).
pub(crate) fn compressible_bytes(b: &[u8]) -> bool {
    // Byte slices and a length test before each comparison: this runs for every static-file
    // answer when compression is on, so declining `application/octet-stream` must be cheap.
    let essence = b[..memchr::memchr(b';', b).unwrap_or(b.len())].trim_ascii();
    let ends = |suffix: &[u8]| {
        essence.len() > suffix.len()
            && essence[essence.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    let text = essence.len() >= 5 && essence[..5].eq_ignore_ascii_case(b"text/");
    text || ends(b"+json")
        || ends(b"+xml")
        || COMPRESSIBLE
            .iter()
            .any(|c| c.len() == essence.len() && c.as_bytes().eq_ignore_ascii_case(essence))
}

/// Whether a header `name` lists `token` (case-insensitive, comma-separated, any line).
fn has_token(resp: &Response, name: &str, token: &str) -> bool {
    resp.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// A strong ETag names exact bytes; the compressed bytes differ, so it becomes weak
/// (RFC 9110 §8.8.1), as nginx's gzip filter does. If-None-Match uses weak comparison, so
/// revalidation still works.
fn weaken_etag(resp: &mut Response) {
    for (n, v) in &mut resp.headers {
        if n.eq_ignore_ascii_case("etag") && v.starts_with('"') {
            *v = Cow::Owned(format!("W/{v}"));
        }
    }
}

/// `body` as a gzip member (RFC 1952) at `level` (0–9).
#[cfg(feature = "gzip")]
pub fn gzip(body: &[u8], level: u32) -> Vec<u8> {
    super::gz::compress(body, level)
}

/// `body` as a brotli stream (RFC 7932) at `quality` (0–11), with the smallest window that
/// holds the whole body (less memory for both ends, same output).
#[cfg(feature = "brotli")]
pub fn brotli(body: &[u8], quality: u32) -> Vec<u8> {
    super::br::compress(body, quality)
}

/// Whether this build makes answers in `coding` (gzip needs the `gzip` feature, br the
/// `brotli` one).
pub(crate) fn encodable(coding: Encoding) -> bool {
    match coding {
        Encoding::Identity => true,
        Encoding::Gzip => super::gz::ENCODES,
        Encoding::Brotli => super::br::ENCODES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &str = "gzip, br";

    fn json(len: usize) -> Response {
        let body = format!("[{}]", "1,".repeat(len / 2)).into_bytes();
        Response::new(200)
            .content_type("application/json")
            .body(Body::Owned(body))
    }

    fn header<'a>(resp: &'a Response, name: &str) -> Option<&'a str> {
        resp.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_ref())
    }

    fn coding(accept: Option<&str>) -> Option<String> {
        let resp = negotiate(
            json(4096),
            accept.map(str::as_bytes),
            &Compression::default(),
        );
        header(&resp, "content-encoding").map(str::to_string)
    }

    #[test]
    fn accept_encoding_table() {
        // (Accept-Encoding, Content-Encoding sent by a build with both encoders, with gzip
        // only (no `brotli`), with br only (no `gzip`); a build with neither sends none)
        type Row<'a> = (
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
            Option<&'a str>,
        );
        const GZ: Option<&str> = Some("gzip");
        const BR: Option<&str> = Some("br");
        let rows: &[Row] = &[
            // RFC 9110 §12.5.3: no field — the server may not assume any coding.
            (None, None, None, None),
            // An empty value: identity only.
            (Some(""), None, None, None),
            (Some("gzip"), GZ, GZ, None),
            (Some("x-gzip"), GZ, GZ, None),
            (Some("br"), BR, None, BR),
            // Equal q: br is smaller for the same cost (see module doc).
            (Some("gzip, br"), BR, GZ, BR),
            (Some("gzip, deflate, br, zstd"), BR, GZ, BR),
            // RFC 9110 §12.4.2: q=0 means "not acceptable".
            (Some("gzip;q=0, br;q=0"), None, None, None),
            (Some("br;q=0, gzip"), GZ, GZ, None),
            (Some("br;q=0.5, gzip;q=0.8"), GZ, GZ, BR),
            // `*` matches any coding not listed.
            (Some("*"), BR, GZ, BR),
            (Some("*;q=0.5, br;q=0"), GZ, GZ, None),
            (Some("*;q=0"), None, None, None),
            // identity preferred over the codings offered.
            (Some("identity, gzip;q=0.5"), None, None, None),
            (Some("identity;q=0, gzip;q=0.1"), GZ, GZ, None),
            // Codings we do not produce are ignored.
            (Some("deflate, zstd"), None, None, None),
        ];
        for &(accept, both, gzip_only, br_only) in rows {
            let want = match (cfg!(feature = "gzip"), cfg!(feature = "brotli")) {
                (true, true) => both,
                (true, false) => gzip_only,
                (false, true) => br_only,
                (false, false) => None,
            };
            assert_eq!(coding(accept).as_deref(), want, "{accept:?}");
        }
    }

    #[test]
    fn eligibility_table() {
        let cfg = Compression::default();
        let big = cfg.min_bytes;
        // (response, compressed?)
        let rows: Vec<(&str, Response, bool)> = vec![
            ("json at threshold", json(big), true),
            ("json below threshold", json(big - 10), false),
            // json(n) is n + 2 bytes long for an even n.
            ("json at the most", json(cfg.max_bytes - 2), true),
            ("json over the most", json(cfg.max_bytes), false),
            ("not 200", json(big).status(404), false),
            (
                "no content type",
                Response::new(200).body(Body::Owned(vec![b'a'; big])),
                false,
            ),
            (
                "text/html; charset",
                json(big).content_type("text/html; charset=utf-8"),
                true,
            ),
            (
                "problem+json",
                json(big).content_type("application/problem+json"),
                true,
            ),
            ("SVG", json(big).content_type("image/svg+xml"), true),
            ("PNG", json(big).content_type("image/png"), false),
            (
                "octet-stream",
                json(big).content_type("application/octet-stream"),
                false,
            ),
            (
                "handler set Content-Encoding",
                json(big).header("Content-Encoding", "gzip"),
                false,
            ),
            (
                "static body",
                json(big).body(Body::Static(&[b'x'; 2048])),
                true,
            ),
        ];
        for (name, resp, want) in rows {
            // The handler's own Content-Encoding is not ours.
            let handlers = header(&resp, "content-encoding").is_some();
            let resp = negotiate(resp, Some(ALL.as_bytes()), &cfg);
            // `ALL` offers both: br where the build makes it, else gzip, else neither.
            let coding = if cfg!(feature = "brotli") {
                Some("br")
            } else if cfg!(feature = "gzip") {
                Some("gzip")
            } else {
                None
            };
            let got = !handlers && coding.is_some() && header(&resp, "content-encoding") == coding;
            assert_eq!(got, want && coding.is_some(), "{name}");
        }
        let off = Compression {
            enabled: false,
            ..Compression::default()
        };
        let resp = negotiate(json(4096), Some(ALL.as_bytes()), &off);
        assert_eq!(header(&resp, "content-encoding"), None);
        assert_eq!(header(&resp, "vary"), None, "disabled: nothing varies");
        let resp = negotiate(json(cfg.max_bytes), Some(ALL.as_bytes()), &cfg);
        assert_eq!(header(&resp, "vary"), None, "over the most: never varies");
        assert_eq!(resp.body.len(), cfg.max_bytes as u64 + 2);
    }

    #[test]
    fn vary_on_every_eligible_response() {
        let cfg = Compression::default();
        for accept in [None, Some("identity"), Some("gzip"), Some("br")] {
            let resp = negotiate(json(4096), accept.map(str::as_bytes), &cfg);
            assert_eq!(header(&resp, "vary"), Some("Accept-Encoding"), "{accept:?}");
        }
        // Not eligible (too small): the representation never varies, so no Vary.
        let resp = negotiate(json(10), Some(b"gzip"), &cfg);
        assert_eq!(header(&resp, "vary"), None);
        // A handler's own Vary listing accept-encoding is not repeated.
        let resp = json(4096).header("Vary", "Origin, accept-encoding");
        let resp = negotiate(resp, Some(b"gzip"), &cfg);
        let varies: Vec<_> = resp
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("vary"))
            .collect();
        assert_eq!(varies.len(), 1);
    }

    #[test]
    fn strong_etag_is_weakened_when_compressed() {
        let cfg = Compression::default();
        let resp = json(4096).header("ETag", "\"abc\"");
        let resp = negotiate(resp, Some(b"gzip"), &cfg);
        // Compressed only where the build has gzip.
        let want = if cfg!(feature = "gzip") {
            "W/\"abc\""
        } else {
            "\"abc\""
        };
        assert_eq!(header(&resp, "etag"), Some(want));
        let resp = json(4096).header("ETag", "\"abc\"");
        let resp = negotiate(resp, None, &cfg);
        assert_eq!(header(&resp, "etag"), Some("\"abc\""));
    }

    #[test]
    fn compressible_types_table() {
        for (ct, want) in [
            ("text/html; charset=utf-8", true),
            ("TEXT/CSS", true),
            ("text/", true),
            ("text", false),
            ("application/json", true),
            ("Application/JSON ; charset=utf-8", true),
            ("application/problem+json", true),
            ("image/svg+xml; charset=utf-8", true),
            ("+json", false),
            ("application/octet-stream", false),
            ("application/jsonx", false),
            ("image/png", false),
            ("", false),
        ] {
            assert_eq!(compressible(ct), want, "{ct:?}");
        }
    }

    #[test]
    fn incompressible_body_goes_out_as_identity() {
        // A body that does not shrink is not worth a Content-Encoding.
        let mut x: u32 = 1;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        let resp = json(0).body(Body::Owned(noise.clone()));
        let resp = negotiate(resp, Some(b"gzip"), &Compression::default());
        assert_eq!(header(&resp, "content-encoding"), None);
        assert_eq!(resp.body.as_bytes(), &noise[..]);
        assert_eq!(header(&resp, "vary"), Some("Accept-Encoding"));
    }

    #[cfg(feature = "gzip")]
    #[test]
    fn round_trips_every_level() {
        use std::io::Read;
        let body = json(20_000).body.as_bytes().to_vec();
        for level in 0..=9 {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&gzip(&body, level)[..])
                .read_to_end(&mut out)
                .unwrap();
            assert_eq!(out, body, "gzip {level}");
        }
    }

    /// br is chosen only where the build has its encoder (the `brotli` feature); without it
    /// a client that prefers br gets gzip when it takes that, else the answer as it is,
    /// never an empty br body.
    #[test]
    fn br_is_chosen_only_where_the_build_encodes_it() {
        let cfg = Compression::default();
        let br = negotiate(json(20_000), Some(b"br"), &cfg);
        let either = negotiate(json(20_000), Some(b"br, gzip;q=0.5"), &cfg);
        if cfg!(feature = "brotli") {
            assert_eq!(header(&br, "content-encoding"), Some("br"));
            assert_eq!(header(&either, "content-encoding"), Some("br"));
        } else {
            assert_eq!(header(&br, "content-encoding"), None);
            assert_eq!(br.body.as_bytes(), json(20_000).body.as_bytes());
            let gzip = cfg!(feature = "gzip").then_some("gzip");
            assert_eq!(header(&either, "content-encoding"), gzip);
        }
        assert_eq!(header(&br, "vary"), Some("Accept-Encoding"));
    }

    /// gzip is chosen only where the build has its encoder (the `gzip` feature); without it
    /// a client that asks for gzip gets the answer as it is, never an empty gzip body, and
    /// the answer still varies on Accept-Encoding.
    #[test]
    fn gzip_is_chosen_only_where_the_build_encodes_it() {
        let cfg = Compression::default();
        let body = json(20_000).body.as_bytes().to_vec();
        assert_eq!(encodable(Encoding::Gzip), cfg!(feature = "gzip"));
        let gz = negotiate(json(20_000), Some(b"gzip"), &cfg);
        if cfg!(feature = "gzip") {
            assert_eq!(header(&gz, "content-encoding"), Some("gzip"));
            assert!(gz.body.len() < body.len() as u64);
        } else {
            assert_eq!(header(&gz, "content-encoding"), None);
            assert_eq!(gz.body.as_bytes(), &body[..]);
        }
        assert_eq!(header(&gz, "vary"), Some("Accept-Encoding"));
    }
}
