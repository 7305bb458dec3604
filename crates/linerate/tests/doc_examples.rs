//! The command lines and examples of docs/serve.md (the `linerate serve` synopsis, which the
//! README held before the front page moved it there) and docs/config.md, run as written, so
//! they cannot rot (docs/config.md once showed `--max-head-bytes 8KiB`, which the binary
//! refused). Each example is read from the document itself. What is changed to run it here,
//! and nothing else:
//! - listen addresses become 127.0.0.1 or ::1 on free ports (tests bind nothing else);
//! - absolute paths (/etc, /srv, /run, /var/log) move into a fresh directory, where the files
//!   they name are created (certificates, roots, pages);
//! - a placeholder (`N`, `FILE`, `DIR`, `PORT`) gets a value;
//! - as another user than root, a `user =` line is dropped (only root can switch users).
//!
//! A `postgres://…` URL is a placeholder for a database; the database flags run in
//! tests/database.rs against a real PostgreSQL.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::bin::{BIN, Stopped, banner, signal, wait_exit};

fn doc(name: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(name)).unwrap()
}

/// The first fenced block of `lang` ("" for none) after the line that starts with `after`.
fn block(text: &str, after: &str, lang: &str) -> String {
    let start = text
        .lines()
        .position(|l| l.starts_with(after))
        .unwrap_or_else(|| panic!("no line starting {after:?}"));
    let mut lines = text.lines().skip(start + 1);
    lines
        .by_ref()
        .find(|l| l.trim_end() == format!("```{lang}"))
        .unwrap_or_else(|| panic!("no ```{lang} block after {after:?}"));
    lines
        .take_while(|l| !l.starts_with("```"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn free_port() -> u16 {
    common::free_port("127.0.0.1")
}

fn fresh(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-docs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Runs `linerate ARGS` in `cwd` until its banner is out, then stops it with SIGTERM; or,
/// for `--check-config`, to its end. `Err` with what it said when it refused. Every wait is
/// bounded.
fn run(cwd: &Path, args: &[String]) -> Result<Vec<String>, String> {
    let mut child = Stopped(
        Command::new(BIN)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = child.0.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    match banner(&mut child.0) {
        Ok(lines) => {
            signal(&child.0, rustix::process::Signal::TERM);
            let status = wait_exit(&mut child.0, common::EVENTUALLY);
            if status.success() {
                Ok(lines)
            } else {
                Err(format!("{args:?}: exit {status} after SIGTERM"))
            }
        }
        Err(lines) => {
            let status = wait_exit(&mut child.0, common::EVENTUALLY);
            if status.success() && args.iter().any(|a| a == "--check-config") {
                return Ok(lines);
            }
            let err = stderr.join().unwrap_or_default();
            Err(format!("{args:?}: {status}: {lines:?} {err}"))
        }
    }
}

/// A directory with what the placeholders name: a config file, a dataset, a root, a
/// certificate and its key.
fn props(d: &Path) {
    std::fs::create_dir_all(d.join("www")).unwrap();
    std::fs::write(d.join("www/index.html"), "<h1>www</h1>\n").unwrap();
    std::fs::write(
        d.join("minimal.toml"),
        "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\nroot = [{ dir = \"www\" }]\n",
    )
    .unwrap();
    std::fs::write(
        d.join("dataset.json"),
        r#"[{"id":1,"name":"One","category":"c","price":3,"quantity":2,"active":true,
            "tags":["t"],"rating":{"score":4,"count":9}}]"#,
    )
    .unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
}

/// docs/serve.md's `linerate serve` synopsis: each top-level `[…]` is one run with every option
/// in it (the nested ones too), once per alternative of an `a|b` value.
#[test]
fn the_serve_synopsis_runs_as_written() {
    let synopsis = block(&doc("docs/serve.md"), "## `linerate serve`", "text");
    // The top-level bracket groups, each as its (flag, value) pairs.
    let mut groups: Vec<Vec<(String, Option<String>)>> = Vec::new();
    let mut depth = 0usize;
    let tokens: Vec<&str> = synopsis.split_whitespace().collect();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        let opens = t.chars().take_while(|&c| c == '[').count();
        if depth == 0 && opens > 0 {
            groups.push(Vec::new());
        }
        depth += opens;
        let mut closes = t.chars().rev().take_while(|&c| c == ']').count();
        let flag = t.trim_matches(|c| c == '[' || c == ']');
        if flag.starts_with("--") && depth > 0 {
            let next = tokens
                .get(i + 1)
                .filter(|v| !v.starts_with('[') && !v.starts_with("--"));
            let value = next.map(|v| v.trim_end_matches(']').to_string());
            if let Some(v) = next {
                i += 1;
                closes += v.chars().rev().take_while(|&c| c == ']').count();
            }
            groups.last_mut().unwrap().push((flag.to_string(), value));
        }
        depth -= closes.min(depth);
        i += 1;
    }
    groups.retain(|g| !g.is_empty());
    let names: Vec<&str> = groups.iter().flatten().map(|(f, _)| f.as_str()).collect();
    for must in [
        "--max-head-bytes",
        "--cpus",
        "--tls-key-update",
        "--root-prefix",
    ] {
        assert!(names.contains(&must), "{must} not read from {names:?}");
    }
    let d = fresh("synopsis");
    props(&d);
    let value_for = |flag: &str, v: &str| -> Option<String> {
        Some(match v {
            "N" => "2".into(),
            "PORT" => free_port().to_string(),
            "DIR" => "www".into(),
            "FILE" => match flag {
                "--config" | "--check-config" => "minimal.toml".into(),
                "--dataset" => "dataset.json".into(),
                "--access-log" => "access.log".into(),
                _ => panic!("no file for {flag}"),
            },
            v if v.starts_with("postgres://") => return None,
            v if v.starts_with("127.0.0.1:") => format!("127.0.0.1:{}", free_port()),
            v => v.to_string(),
        })
    };
    let mut ran = 0;
    let mut failed = Vec::new();
    for group in &groups {
        // One run per alternative of the group's `a|b` value (at most one such value).
        let alternatives = group
            .iter()
            .find_map(|(_, v)| v.as_ref().filter(|v| v.contains('|')))
            .map_or(vec![None], |v| v.split('|').map(Some).collect());
        'runs: for alt in alternatives {
            let mut args = vec!["serve".to_string()];
            for (flag, value) in group {
                args.push(flag.clone());
                let Some(v) = value else { continue };
                let v = if v.contains('|') { alt.unwrap() } else { v };
                match value_for(flag, v) {
                    Some(v) => args.push(v),
                    None => continue 'runs, // a database: tests/database.rs
                }
            }
            if !args.iter().any(|a| a == "--addr") {
                args.extend(["--addr".into(), "127.0.0.1:0".into()]);
            }
            if !args.iter().any(|a| a == "--log-level") {
                args.extend(["--log-level".into(), "warn".into()]);
            }
            if !args.iter().any(|a| a == "--workers") {
                args.extend(["--workers".into(), "1".into()]);
            }
            if !args.iter().any(|a| a == "--no-pin") {
                args.push("--no-pin".into());
            }
            ran += 1;
            if let Err(e) = run(&d, &args) {
                failed.push(e);
            }
        }
    }
    assert!(ran >= 28, "only {ran} runs from {groups:?}");
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let _ = std::fs::remove_dir_all(&d);
}

/// docs/config.md's inline examples: the flags that override a file, and the flag-only
/// commands.
#[test]
fn the_config_guide_inline_commands_run_as_written() {
    let text = doc("docs/config.md");
    let spans: Vec<&str> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.starts_with("--") || s.starts_with("linerate serve"))
        .collect();
    let d = fresh("inline");
    props(&d);
    std::fs::create_dir_all(d.join("public")).unwrap();
    std::fs::write(d.join("public/index.html"), "<h1>public</h1>\n").unwrap();
    let mut ran = Vec::new();
    let mut failed = Vec::new();
    for span in spans {
        let words: Vec<String> = span.split_whitespace().map(String::from).collect();
        // Flags alone name no value or a placeholder: nothing to run.
        if words
            .iter()
            .any(|w| w.chars().all(|c| c.is_ascii_uppercase()))
            || words.len() < 2
        {
            continue;
        }
        let mut args = vec!["serve".to_string()];
        if words[0] == "linerate" {
            args.extend(words[2..].iter().cloned());
        } else {
            // "Flags given on the command line override the file (…)".
            args.extend(["--config".into(), "minimal.toml".into()]);
            args.extend(words.iter().cloned());
        }
        args.extend(["--addr", "127.0.0.1:0", "--no-pin", "--log-level", "warn"].map(String::from));
        if !args.iter().any(|a| a == "--workers") {
            args.extend(["--workers".into(), "1".into()]);
        }
        ran.push(span.to_string());
        if let Err(e) = run(&d, &args) {
            failed.push(e);
        }
    }
    for must in [
        "--max-head-bytes 8KiB",
        "linerate serve --root ./public",
        "linerate serve",
    ] {
        assert!(ran.iter().any(|r| r == must), "{must:?} not run: {ran:?}");
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let _ = std::fs::remove_dir_all(&d);
}

/// Absolute paths moved under `d`, listen addresses onto free loopback ports.
fn relocate(text: &str, d: &Path, ports: &[(&str, String)]) -> String {
    let mut out = text.to_string();
    for (from, to) in ports {
        out = out.replace(from, to);
    }
    for dir in ["/etc/", "/srv/", "/run/", "/var/log/"] {
        out = out.replace(&format!("\"{dir}"), &format!("\"{}{dir}", d.display()));
        out = out.replace(&format!(" {dir}"), &format!(" {}{dir}", d.display()));
    }
    out
}

/// docs/config.md's complete annotated example: checked, then served, with each feature it
/// shows answering as its comment says.
#[test]
fn the_annotated_config_example_checks_and_serves() {
    let d = fresh("annotated");
    let (p80, p80v6, p443, p8082, p9090) = (
        free_port(),
        TcpListener::bind("[::1]:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let example = block(&doc("docs/config.md"), "## A complete example", "toml");
    let mut text = relocate(
        &example,
        &d,
        &[
            ("\"0.0.0.0:80\"", format!("\"127.0.0.1:{p80}\"")),
            ("\"[::]:80\"", format!("\"[::1]:{p80v6}\"")),
            ("\"0.0.0.0:443\"", format!("\"127.0.0.1:{p443}\"")),
            ("\"127.0.0.1:8082\"", format!("\"127.0.0.1:{p8082}\"")),
            ("\"127.0.0.1:9090\"", format!("\"127.0.0.1:{p9090}\"")),
        ],
    );
    if !root() {
        text = text
            .lines()
            // Only root switches users or gives a socket to another group.
            .filter(|l| !l.starts_with("user =") && !l.starts_with("group ="))
            .collect::<Vec<_>>()
            .join("\n");
    }
    for (p, body) in [
        ("srv/example.com/index.html", "<h1>example</h1>\n"),
        ("srv/example.com/404.html", "<h1>not here</h1>\n"),
        ("srv/example.com/500.html", "<h1>oops</h1>\n"),
        ("srv/downloads/file.txt", "file\n"),
        ("srv/app/dist/index.html", "<h1>app</h1>\n"),
    ] {
        let path = d.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    for dir in ["etc/linerate", "run", "var/log/linerate"] {
        std::fs::create_dir_all(d.join(dir)).unwrap();
    }
    for name in ["example.com", "api.example.com"] {
        let ck = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        std::fs::write(d.join(format!("etc/linerate/{name}.pem")), ck.cert.pem()).unwrap();
        std::fs::write(
            d.join(format!("etc/linerate/{name}.key")),
            ck.signing_key.serialize_pem(),
        )
        .unwrap();
    }
    // The user of the example reads the roots and writes nothing but through the keeper.
    let _ = Command::new("chmod").args(["-R", "a+rX"]).arg(&d).status();
    let file = d.join("etc/linerate/linerate.toml");
    std::fs::write(&file, &text).unwrap();
    let f = file.to_str().unwrap().to_string();
    let checked = run(&d, &["serve".into(), "--check-config".into(), f.clone()]);
    assert!(
        checked
            .as_ref()
            .is_ok_and(|l| l.concat().contains(": ok (5 listeners")),
        "{checked:?}"
    );
    // Served: as it says, on the ports it was moved to, except that the first port-80
    // listener (127.0.0.1 here) serves the sites instead of redirecting to HTTPS, so that a
    // plain client can see them; the second one ([::1]) redirects, as the example says.
    let first = text.find("redirect_to_https = true").unwrap();
    let served = format!(
        "{}{}",
        &text[..first],
        &text[first + "redirect_to_https = true".len()..]
    );
    std::fs::write(&file, &served).unwrap();
    let mut child = Stopped(
        Command::new(BIN)
            .args(["serve", "--config", &f])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    banner(&mut child.0).expect("the example serves");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{p80}").parse().unwrap();
    let get = |host: &str, path: &str| {
        let mut c = common::Client::connect(addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        c.read_response()
    };
    assert_eq!(get("example.com", "/").text(), "<h1>example</h1>\n");
    let v6: std::net::SocketAddr = format!("[::1]:{p80v6}").parse().unwrap();
    let mut c = common::Client::connect(v6);
    c.send(b"GET /a?b HTTP/1.1\r\nHost: www.example.com\r\n\r\n");
    let moved = c.read_response();
    assert_eq!(moved.status, 308);
    assert_eq!(
        moved.header("location"),
        Some(format!("https://www.example.com:{p443}/a?b").as_str())
    );
    let page = get("example.com", "/index.html");
    assert_eq!(page.header("cache-control"), Some("no-cache"), "{page:?}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(
        get("www.example.com", "/downloads/file.txt").text(),
        "file\n"
    );
    assert_eq!(
        get("a.example.org", "/missing").text(),
        "<h1>not here</h1>\n"
    );
    let moved = get("example.com", "/old/a?b=1");
    assert_eq!(
        (moved.status, moved.header("location")),
        (308, Some("/new/a?b=1"))
    );
    assert_eq!(get("api.example.com", "/plaintext").text(), "Hello, World!");
    // Over TLS each name gets its own certificate: curl trusts only that one.
    for name in ["example.com", "api.example.com"] {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(d.join(format!("etc/linerate/{name}.pem")))
            .arg("--resolve")
            .arg(format!("{name}:{p443}:127.0.0.1"))
            .arg(format!("https://{name}:{p443}/plaintext"))
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sock = d.join("run/linerate.sock");
    if root() {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&sock).unwrap();
        assert_eq!(
            (m.gid(), m.mode() & 0o777),
            (33, 0o660),
            "group www-data, 0660"
        );
    }
    signal(&child.0, rustix::process::Signal::TERM);
    assert!(wait_exit(&mut child.0, common::EVENTUALLY).success());
    // api.example.com's requests went to its own log, in its own format, and not to the
    // server's.
    let api = std::fs::read_to_string(d.join("var/log/linerate/api.log")).unwrap();
    assert_eq!(
        api,
        "api.example.com http \"GET /plaintext HTTP/1.1\" 200 - -\n\
         api.example.com https \"GET /plaintext HTTP/2.0\" 200 - -\n"
    );
    let all = std::fs::read_to_string(d.join("var/log/linerate/access.log")).unwrap();
    let plaintext: Vec<u64> = all
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["target"] == "/plaintext")
        .map(|v| v["status"].as_u64().unwrap())
        .collect();
    // example.com's (no such file there), never api.example.com's 200s.
    assert!(
        !plaintext.is_empty() && plaintext.iter().all(|status| *status == 404),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// docs/config.md's "from nothing" walk-through, as one shell script: make the trees and the
/// certificate, write the file, check it, serve it, ask it over HTTPS, plain HTTP and the
/// admin listener, reload it.
#[test]
fn the_from_nothing_walkthrough_runs_as_written() {
    let d = fresh("walkthrough");
    std::fs::create_dir_all(d.join("etc/ssl")).unwrap();
    let (p80, p443, p9090) = (free_port(), free_port(), free_port());
    let script = block(&doc("docs/config.md"), "## A site with TLS", "sh");
    let script = relocate(
        &script,
        &d,
        &[
            ("0.0.0.0:80", format!("127.0.0.1:{p80}")),
            ("0.0.0.0:443", format!("127.0.0.1:{p443}")),
            ("127.0.0.1:9090", format!("127.0.0.1:{p9090}")),
            ("b.example:443:", format!("b.example:{p443}:")),
            ("https://b.example/", format!("https://b.example:{p443}/")),
            ("http://127.0.0.1/", format!("http://127.0.0.1:{p80}/")),
        ],
    );
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(BIN, bin.join("linerate")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // The server is the script's job %1; the script's end stops it.
    let out = Command::new("timeout")
        .args([
            "120",
            "bash",
            "-c",
            // A failed step ends the script; its trap stops the server it started.
            &format!(
                "set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}\nkill -TERM %1\nwait %1\n"
            ),
        ])
        .env("PATH", path)
        .current_dir(&d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for want in [
        "linerate.toml: ok (2 listeners",
        "<h1>b</h1>",
        "<h1>a</h1>",
        "linerate_requests_total{",
    ] {
        assert!(
            stdout.contains(want),
            "{want:?} missing:\n{stdout}\n{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}
