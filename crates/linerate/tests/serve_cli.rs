//! `linerate serve` as a user runs it: which application is mounted (`--root` alone is the
//! whole site; `--app demo` adds the demo), `--dataset`, and their one-line errors.

mod common;

use common::Client;
use common::bin::{run_err, serve};

fn site(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-site-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("json")).unwrap();
    std::fs::write(dir.join("index.html"), b"<h1>my site</h1>\n").unwrap();
    std::fs::write(dir.join("json/readme.txt"), b"not the demo\n").unwrap();
    dir
}

#[test]
fn root_alone_is_the_whole_site() {
    let dir = site("alone");
    let s = serve(&["--root", dir.to_str().unwrap()]);
    assert!(
        !s.banner.iter().any(|l| l.contains("/plaintext")),
        "{:?}",
        s.banner
    );
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/").text(), "<h1>my site</h1>\n");
    assert_eq!(c.get("/json/readme.txt").text(), "not the demo\n");
    // `json` is the site's directory now, not the demo's route.
    let r = c.get("/json");
    assert_eq!((r.status, r.header("location")), (301, Some("./json/")));
    assert_eq!(c.get("/plaintext").status, 404);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn app_demo_mounts_the_demo_beside_the_site() {
    let dir = site("both");
    let s = serve(&["--root", dir.to_str().unwrap(), "--app", "demo"]);
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/plaintext").text(), "Hello, World!");
    // Routes take precedence; the rest is the site.
    assert!(c.get("/").text().contains("linerate demo"));
    assert_eq!(c.get("/json/readme.txt").status, 400);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_arguments_serve_the_demo() {
    let s = serve(&[]);
    assert!(
        s.banner.iter().any(|l| l.contains("/plaintext")),
        "{:?}",
        s.banner
    );
    let mut c = Client::connect(s.addr);
    assert_eq!(c.get("/json").text(), "{\"message\":\"Hello, World!\"}");
    assert!(c.get("/").text().contains("/cookie"));
}

#[test]
fn dataset_file_is_loaded_and_served() {
    let dir = site("dataset");
    let file = dir.join("dataset.json");
    std::fs::write(
        &file,
        r#"[{"id":7,"name":"Seven","category":"c","price":3,"quantity":2,"active":true,
            "tags":["t"],"rating":{"score":4,"count":9}}]"#,
    )
    .unwrap();
    let s = serve(&["--dataset", file.to_str().unwrap()]);
    let mut c = Client::connect(s.addr);
    let r = c.get("/json/5?m=10");
    assert_eq!(r.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["count"], 1);
    assert_eq!(v["items"][0]["name"], "Seven");
    assert_eq!(v["items"][0]["total"], 60);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dataset_and_app_mistakes_are_one_line() {
    let dir = site("bad-dataset");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "[{\"id\": 1,\n \"name\": 5}]").unwrap();
    let empty = dir.join("empty.json");
    std::fs::write(&empty, "[]").unwrap();
    let missing = dir.join("missing.json");
    let (bad, empty, missing) = (
        bad.to_str().unwrap(),
        empty.to_str().unwrap(),
        missing.to_str().unwrap(),
    );
    let root = dir.to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--dataset", bad],
            format!(
                "invalid --dataset {bad}: not a JSON array of dataset items: invalid type: integer `5`, expected a string at line 2 column"
            ),
        ),
        (
            vec!["--dataset", empty],
            format!("invalid --dataset {empty}: the array holds no items"),
        ),
        (
            vec!["--dataset", missing],
            format!("invalid --dataset {missing}: No such file"),
        ),
        (
            vec!["--root", root, "--dataset", empty],
            "--dataset needs the demo app (add --app demo)".into(),
        ),
        (
            vec!["--app", "nginx"],
            "invalid value 'nginx' for '--app".into(),
        ),
    ];
    for (args, needle) in &cases {
        let mut full = vec!["serve", "--addr", "127.0.0.1:0"];
        full.extend(args.iter());
        let (code, stderr) = run_err(&full);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(needle.as_str()), "{args:?}: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redirect_to_https_sends_the_addr_listener_to_the_tls_port() {
    let dir = site("to-https");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let s = serve(&[
        "--tls-port",
        "0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--redirect-to-https",
    ]);
    // The banner names the port the TLS listener got; the redirect goes there.
    let https = s
        .banner
        .iter()
        .find_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
        .expect("the banner names the HTTPS listener");
    let port = https.rsplit(':').next().unwrap();
    let mut c = Client::connect(s.addr);
    c.send(b"GET /json?x=1 HTTP/1.1\r\nHost: Foo.Test:8080\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 308);
    assert_eq!(
        r.header("location"),
        Some(format!("https://foo.test:{port}/json?x=1").as_str())
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression: HTTP/3 was served but named nowhere in the help.
#[test]
fn help_names_http3() {
    for args in [&["serve", "--help"][..], &["--help"][..]] {
        let out = std::process::Command::new(common::bin::BIN)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("HTTP/3"), "{args:?}: {text}");
    }
}

/// `curl -sS ARGS URL` with the answer's HTTP version after its body.
fn curl_version(args: &[&str], url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", " %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is needed by this test (apt-get install curl)");
    assert!(
        out.status.success(),
        "curl {args:?} {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The demo's gRPC answers carried `content-length`; curl stopped reading at it
/// and never showed the trailers, so a curl check of HttpArena's GetSum saw no
/// `grpc-status`. Debian's curl itself, as such a check runs it: HTTP/2 with prior knowledge
/// on the demo's port, gRPC's framing (SumRequest{a=1, b=2}), `-v` and `-D` for the fields.
#[test]
fn curl_shows_grpc_status_0_for_httparenas_get_sum() {
    let s = serve(&[]);
    let dir = std::env::temp_dir().join(format!("linerate-getsum-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (request, reply, head) = (dir.join("req"), dir.join("reply"), dir.join("head"));
    std::fs::write(&request, [0, 0, 0, 0, 4, 0x08, 1, 0x10, 2]).unwrap();
    let out = std::process::Command::new("curl")
        .args(["-sS", "-v", "--max-time", "10", "--http2-prior-knowledge"])
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("--data-binary")
        .arg(format!("@{}", request.display()))
        .arg("-o")
        .arg(&reply)
        .arg("-D")
        .arg(&head)
        .arg(format!(
            "http://{}/benchmark.BenchmarkService/GetSum",
            s.addr
        ))
        .output()
        .expect("curl is needed by this test (apt-get install curl)");
    let verbose = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{verbose}");
    let shown: Vec<&str> = verbose
        .lines()
        .filter_map(|l| l.strip_prefix("< "))
        .collect();
    assert!(
        shown.iter().any(|l| l.trim_end() == "grpc-status: 0"),
        "curl -v shows the trailer: {verbose}"
    );
    assert!(
        !shown
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("content-length")),
        "{verbose}"
    );
    let head = std::fs::read_to_string(&head).unwrap();
    assert!(
        head.lines().any(|l| l.trim_end() == "grpc-status: 0"),
        "{head}"
    );
    // SumReply{result: 3}.
    assert_eq!(std::fs::read(&reply).unwrap(), [0, 0, 0, 0, 2, 0x08, 3]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// HttpArena's shape: the demo's one port serves HTTP/1.1 and HTTP/2 with prior knowledge
/// (gRPC's h2c); `--no-h2c-preface` leaves it HTTP/1.1 only, where the preface gets 505 and
/// the demo's gRPC services are not served.
#[test]
fn the_demo_port_serves_http11_and_h2c_prior_knowledge() {
    let s = serve(&[]);
    assert!(
        s.banner
            .iter()
            .any(|l| l.contains("HTTP/2 with prior knowledge (h2c) too on the same port")),
        "{:?}",
        s.banner
    );
    let url = format!("http://{}/plaintext", s.addr);
    assert_eq!(curl_version(&[], &url), "Hello, World! 1.1");
    assert_eq!(
        curl_version(&["--http2-prior-knowledge"], &url),
        "Hello, World! 2"
    );

    let s = serve(&["--no-h2c-preface"]);
    // No listener speaks HTTP/2, so the demo serves no gRPC (`Server::bind`
    // refuses gRPC services no client could reach), and says so.
    assert!(
        s.banner
            .iter()
            .any(|l| l.contains("gRPC: not served (no listener speaks HTTP/2")),
        "{:?}",
        s.banner
    );
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    std::io::Write::write_all(&mut c, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c, &mut got);
    assert!(got.starts_with(b"HTTP/1.1 505 "), "{got:?}");
}
