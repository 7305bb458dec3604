//! Dynamic compression over raw sockets against the demo router: negotiation, Vary, HEAD = GET
//! headers, and compressed bodies that decode to exactly the identity body.

mod common;

use common::{Client, Resp, gunzip, start, start_demo, unbrotli};

/// The demo's ~8.5 KB JSON route (over the threshold).
const BIG: &str = "/json/50";
/// The demo's 27-byte JSON route (under the threshold).
const SMALL: &str = "/json";

fn request(c: &mut Client, method: &str, path: &str, accept: Option<&str>) -> Resp {
    let field = accept
        .map(|a| format!("Accept-Encoding: {a}\r\n"))
        .unwrap_or_default();
    c.send(format!("{method} {path} HTTP/1.1\r\nHost: t\r\n{field}\r\n").as_bytes());
    c.read_response_opt(method == "HEAD").expect("a response")
}

/// Turns a coded body back into the identity body.
type Decoder = fn(&[u8]) -> Vec<u8>;

/// The headers a cache or client sees, minus Date (which may tick between two responses).
fn fields(r: &Resp) -> Vec<(String, String)> {
    let mut h: Vec<_> = r
        .headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case("date"))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    h.sort();
    h
}

#[test]
fn json_route_is_compressed_when_asked_and_decodes_to_identity() {
    let s = start_demo();
    let mut c = Client::connect(s.addr);
    let identity = request(&mut c, "GET", BIG, None);
    assert_eq!(identity.status, 200);
    assert_eq!(identity.header("content-encoding"), None);
    // RFC 9110 §12.5.5: the response varies on Accept-Encoding even when not compressed.
    assert_eq!(identity.header("vary"), Some("Accept-Encoding"));
    assert!(identity.body.len() > 8000, "{}", identity.body.len());

    // (Accept-Encoding, coding sent, decoder)
    let rows: &[(&str, &str, Decoder)] = &[
        ("gzip", "gzip", gunzip),
        ("br", "br", unbrotli),
        // Equal q: br preferred.
        ("gzip, deflate, br", "br", unbrotli),
        // RFC 9110 §12.4.2: q=0 refuses br.
        ("br;q=0, gzip", "gzip", gunzip),
    ];
    for &(accept, coding, decode) in rows {
        let r = request(&mut c, "GET", BIG, Some(accept));
        assert_eq!(r.status, 200, "{accept}");
        assert_eq!(r.header("content-encoding"), Some(coding), "{accept}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept}");
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(r.body.len() < identity.body.len() / 3, "{accept}");
        assert_eq!(decode(&r.body), identity.body, "{accept}");
    }
    s.stop();
}

#[test]
fn refused_or_absent_codings_get_identity() {
    let s = start_demo();
    let mut c = Client::connect(s.addr);
    for accept in [
        None,
        Some("gzip;q=0, br;q=0"),
        Some("identity"),
        Some("*;q=0"),
        Some("deflate"),
    ] {
        let r = request(&mut c, "GET", BIG, accept);
        assert_eq!(r.status, 200, "{accept:?}");
        assert_eq!(r.header("content-encoding"), None, "{accept:?}");
        assert_eq!(r.header("vary"), Some("Accept-Encoding"), "{accept:?}");
        assert!(r.body.starts_with(b"{\"items\":["), "{accept:?}");
    }
    s.stop();
}

#[test]
fn small_json_is_never_compressed() {
    let s = start_demo();
    let mut c = Client::connect(s.addr);
    for accept in [None, Some("gzip"), Some("br"), Some("gzip, br")] {
        let r = request(&mut c, "GET", SMALL, accept);
        assert_eq!(r.header("content-encoding"), None, "{accept:?}");
        // Under the threshold the representation never varies.
        assert_eq!(r.header("vary"), None, "{accept:?}");
        assert_eq!(r.body, br#"{"message":"Hello, World!"}"#);
    }
    s.stop();
}

#[test]
fn head_has_get_headers() {
    // RFC 9110 §9.3.2: HEAD gets the same fields as GET, Content-Length included.
    let s = start_demo();
    let mut c = Client::connect(s.addr);
    for accept in [None, Some("gzip"), Some("br")] {
        let get = request(&mut c, "GET", BIG, accept);
        let head = request(&mut c, "HEAD", BIG, accept);
        assert!(head.body.is_empty());
        assert_eq!(fields(&head), fields(&get), "{accept:?}");
        assert_eq!(
            get.header("content-length").map(str::to_string),
            Some(get.body.len().to_string())
        );
    }
    s.stop();
}

#[test]
fn no_compression_config_never_compresses() {
    let mut config = common::config();
    config.compression.enabled = false;
    let s = start(config, linerate::demo::router());
    let mut c = Client::connect(s.addr);
    let r = request(&mut c, "GET", BIG, Some("gzip, br"));
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.header("vary"), None);
    s.stop();
}

#[test]
fn error_responses_are_not_compressed() {
    let s = start_demo();
    let mut c = Client::connect(s.addr);
    // A 400 from the handler and a 404 from the router: status 200 only.
    for path in ["/json/0", "/no-such-route"] {
        let r = request(&mut c, "GET", path, Some("gzip"));
        assert_ne!(r.status, 200, "{path}");
        assert_eq!(r.header("content-encoding"), None, "{path}");
    }
    s.stop();
}
