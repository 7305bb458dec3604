//! What a site's static files can do beyond serving a path, through `linerate serve
//! --config`: `try_files` fallbacks (a single-page app's `/index.html`), directory listings
//! (HTML and JSON, off by default, dotfiles never listed), content types by extension, and
//! the metrics labelled by site. Servers bind 127.0.0.1 on chosen ports and are stopped when
//! the test ends.

mod common;

use std::path::{Path, PathBuf};

use common::bin::serve_as as serve;
use common::{Client, free_port};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-sitefiles-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(d: &Path, rel: &str, body: &str) {
    let p = d.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, body).unwrap();
}

/// GET `path` on `host`, with extra request fields.
fn get(addr: std::net::SocketAddr, host: &str, path: &str, fields: &str) -> common::Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{fields}\r\n").as_bytes());
    c.read_response()
}

#[test]
fn fallbacks_listings_types_and_site_metrics() {
    let d = dir("all");
    write(&d, "app/index.html", "<h1>app</h1>\n");
    write(&d, "app/about.html", "<h1>about</h1>\n");
    write(&d, "app/main.js", "run()\n");
    write(&d, "pub/readme.txt", "hello\n");
    write(&d, "pub/notes.md", "# notes\n");
    write(&d, "pub/sub dir/a <b>.txt", "x\n");
    write(&d, "pub/.secret", "no\n");
    write(&d, "pub/.hidden/x.txt", "no\n");
    write(&d, "pub/nolist/x.txt", "x\n");
    let admin = free_port("127.0.0.1");
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"127.0.0.1:{admin}\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[site]]\nnames = [\"app.test\"]\n\
             [[site.root]]\ndir = \"app\"\ntry_files = [\"{{path}}\", \"{{path}}.html\", \"/index.html\"]\n\
             [[site]]\nnames = [\"files.test\", \"www.files.test\"]\n\
             types = {{ md = \"text/markdown; charset=utf-8\", TXT = \"text/x-readme\" }}\n\
             [[site.root]]\ndir = \"pub\"\nlisting = true\n\
             [[site.root]]\nprefix = \"/nolist\"\ndir = \"pub/nolist\"\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);

    // try_files: the path, then the path with .html, then the app's index, as 200s; a bad
    // path is still refused, never answered with the fallback.
    #[rustfmt::skip]
    let rows: &[(&str, u16, &str)] = &[
        ("/main.js", 200, "run()\n"),
        ("/about", 200, "<h1>about</h1>\n"),
        ("/users/42/edit", 200, "<h1>app</h1>\n"),
        ("/", 200, "<h1>app</h1>\n"),
        ("/%2e%2e/pub/readme.txt", 400, ""),
    ];
    for (path, status, body) in rows {
        let r = get(s.addr, "app.test", path, "");
        assert_eq!(r.status, *status, "{path}");
        if *status == 200 {
            assert_eq!(r.text(), *body, "{path}");
        }
    }
    assert_eq!(
        get(s.addr, "app.test", "/users/42", "").header("content-type"),
        Some("text/html; charset=utf-8")
    );

    // Types by extension, the site's before the built-in table, any case.
    let ct = |path: &str| {
        get(s.addr, "files.test", path, "")
            .header("content-type")
            .map(str::to_string)
    };
    assert_eq!(
        ct("/notes.md").as_deref(),
        Some("text/markdown; charset=utf-8")
    );
    assert_eq!(ct("/readme.txt").as_deref(), Some("text/x-readme"));
    // Another site keeps the built-in table.
    assert_eq!(
        get(s.addr, "app.test", "/main.js", "").header("content-type"),
        Some("text/javascript; charset=utf-8")
    );

    // Listings: HTML by default, JSON when asked; directories first, names escaped and
    // linked percent-encoded; no dotfile, no dot-directory.
    let r = get(s.addr, "files.test", "/", "");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    let html = r.text();
    assert!(html.contains("<a href=\"./nolist/\">nolist/</a>"), "{html}");
    assert!(
        html.contains("<a href=\"./sub%20dir/\">sub dir/</a>"),
        "{html}"
    );
    assert!(
        html.contains("<a href=\"./readme.txt\">readme.txt</a></td><td>6</td>"),
        "{html}"
    );
    assert!(
        !html.contains("secret") && !html.contains("hidden"),
        "{html}"
    );
    assert!(
        html.find("sub dir/").unwrap() < html.find("notes.md").unwrap(),
        "directories first: {html}"
    );
    let r = get(s.addr, "files.test", "/sub%20dir/", "");
    assert!(r.text().contains("a &lt;b&gt;.txt</a>"), "{}", r.text());
    let r = get(s.addr, "files.test", "/", "Accept: application/json\r\n");
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
    let names: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nolist", "sub dir", "notes.md", "readme.txt"]);
    assert_eq!(v["entries"][3]["size"], 6);
    assert_eq!(v["truncated"], false);
    // A mount without `listing` answers 404 for a directory without index, as before.
    assert_eq!(get(s.addr, "files.test", "/nolist/", "").status, 404);
    // A listing never opens what a dotfile rule hides.
    assert_eq!(get(s.addr, "files.test", "/.hidden/", "").status, 404);

    // Metrics by site (its first name; `_` for the nameless default).
    assert_eq!(get(s.addr, "other.test", "/json", "").status, 200);
    let mut c = Client::connect(([127, 0, 0, 1], admin).into());
    let m = c.get("/metrics").text();
    let count = |site: &str, class: &str| -> u64 {
        let key = format!("linerate_site_requests_total{{site=\"{site}\",class=\"{class}\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(&key))
            .unwrap_or_else(|| panic!("{key} missing:\n{m}"))
            .parse()
            .unwrap()
    };
    assert_eq!(count("app.test", "2xx"), 6, "{m}");
    assert_eq!(count("app.test", "4xx"), 1, "{m}");
    assert_eq!(count("files.test", "2xx"), 5, "{m}");
    assert_eq!(count("files.test", "4xx"), 2, "{m}");
    assert_eq!(count("_", "2xx"), 1, "{m}");
    assert!(
        m.contains("linerate_site_sent_bytes_total{site=\"_\"} 27\n"),
        "{m}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
