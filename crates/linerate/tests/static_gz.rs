//! On-the-fly compression of static files over raw sockets: a `.js` without a sibling is
//! gzip/br-encoded (weak ETag, `Vary`), the same bytes every time (cached); a precompressed
//! sibling wins; ranges, binary types and clients that do not ask get the file as it is; an
//! edited file is compressed again; a route opts out with `Cache-Control: no-transform`; a
//! site can switch compression off.

mod common;

use common::{Client, Resp, config, gunzip, start, unbrotli};
use linerate_server::config::FilesMount;
use linerate_server::{Response, Router};

fn get(c: &mut Client, path: &str, accept: Option<&str>, extra: &str) -> Resp {
    let ae = accept.map_or(String::new(), |a| format!("Accept-Encoding: {a}\r\n"));
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{ae}{extra}\r\n").as_bytes());
    c.read_response()
}

fn script(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("function f{i}(a, b) {{ return a + b * {i}; }}\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn a_script_is_compressed_once_and_served_from_the_cache() {
    let root = std::env::temp_dir().join(format!("linerate-sgz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let js = script(400);
    std::fs::write(root.join("app.js"), &js).unwrap();
    std::fs::write(root.join("pre.css"), b"body { color: red }\n".repeat(200)).unwrap();
    std::fs::write(root.join("pre.css.gz"), b"not really gzip, but the sibling").unwrap();
    std::fs::write(root.join("blob.bin"), vec![7u8; 20_000]).unwrap();
    let router = Router::new().get("/secret", |_| {
        Response::text_owned("token=abc ".repeat(200)).header("Cache-Control", "no-transform")
    });
    let server = start(
        linerate_server::Config {
            files: Some(FilesMount {
                prefix: "/s".into(),
                root: root.clone(),
                ..Default::default()
            }),
            ..config()
        },
        router,
    );
    let mut c = Client::connect(server.addr);

    let gz = get(&mut c, "/s/app.js", Some("gzip"), "");
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert!(
        gz.header("etag").unwrap().starts_with("W/\""),
        "{:?}",
        gz.header("etag")
    );
    assert!(gz.body.len() < js.len() / 3);
    assert_eq!(gunzip(&gz.body), js);
    // Cached: the same bytes again.
    let again = get(&mut c, "/s/app.js", Some("gzip"), "");
    assert_eq!(again.body, gz.body);
    let br = get(&mut c, "/s/app.js", Some("br;q=1, gzip;q=0.5"), "");
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(unbrotli(&br.body), js);
    // No Accept-Encoding: the file as it is, still marked as varying.
    let plain = get(&mut c, "/s/app.js", None, "");
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.body, js);
    // A range is the file's bytes.
    let part = get(&mut c, "/s/app.js", Some("gzip"), "Range: bytes=0-9\r\n");
    assert_eq!((part.status, &part.body[..]), (206, &js[..10]));
    // A precompressed sibling wins.
    let pre = get(&mut c, "/s/pre.css", Some("gzip"), "");
    assert_eq!(pre.header("content-encoding"), Some("gzip"));
    assert_eq!(pre.body, b"not really gzip, but the sibling");
    // Binary types are not compressed.
    let blob = get(&mut c, "/s/blob.bin", Some("gzip"), "");
    assert_eq!(blob.header("content-encoding"), None);
    assert_eq!(blob.body.len(), 20_000);
    // An edited file is a new cache key.
    let edited = script(401);
    std::fs::write(root.join("app.js"), &edited).unwrap();
    // The open-file cache revalidates after a short while (FilesOptions::revalidate_after).
    common::eventually("edit never seen", || {
        gunzip(&get(&mut c, "/s/app.js", Some("gzip"), "").body) == edited
    });
    // A route that says no-transform is not compressed.
    let secret = get(&mut c, "/secret", Some("gzip, br"), "");
    assert_eq!(secret.header("content-encoding"), None);
    assert_eq!(secret.body.len(), 2000);
    server.stop();
    let _ = std::fs::remove_dir_all(&root);
}
