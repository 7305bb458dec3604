//! A site's request-rate limits and basic auth, as `linerate serve --config FILE` runs them:
//! 429 counts under `linerate load` that match the configured burst exactly, `Retry-After`,
//! limits keyed by the client or by a field, what the access log and `/metrics` count; 401
//! with its challenge, right and wrong passwords (raw requests and curl), and an htpasswd file
//! that cannot be used refused by `--check-config` at its place.
//! Servers bind 127.0.0.1 on ports the test picks and are stopped when the test ends.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::bin::{BIN, run_err, serve_as as serve};
use common::{Client, Resp, eventually, free_port};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-limits-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn get(addr: SocketAddr, path: &str, fields: &str) -> Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n{fields}\r\n").as_bytes());
    c.read_response()
}

/// The value of the Prometheus sample `name` on the admin listener.
fn metric(admin: SocketAddr, name: &str) -> u64 {
    let r = get(admin, "/metrics", "");
    r.text()
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[test]
fn rate_limits_answer_429_past_the_burst_per_key_and_count_it() {
    let d = dir("rate");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port("127.0.0.1"))
        .parse()
        .unwrap();
    let file = d.join("linerate.toml");
    // One request a minute and bursts of 10 and 1: no bucket refills while the test runs.
    std::fs::write(
        &file,
        format!(
            "access_log = \"access.log\"\naccess_log_format = \"json\"\n\
             [admin]\naddr = \"{admin}\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[site]]\ndefault = true\napp = \"demo\"\n\
             [[site.rate_limit]]\nprefix = \"/json\"\nrate = \"1r/m\"\nburst = 10\n\
             [[site.rate_limit]]\nprefix = \"/plaintext\"\nrate = \"1r/m\"\nburst = 1\nkey = \"header:X-Api-Key\"\n"
        ),
    )
    .unwrap();
    let s = serve(&["--config", file.to_str().unwrap()]);
    let out = Command::new(BIN)
        .args([
            "load",
            "-c",
            "4",
            "-t",
            "1",
            "-n",
            "50",
            "--json",
            "--allow-status-errors",
        ])
        .arg(format!("http://{}/json", s.addr))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let codes = &run["runs"][0]["status_codes"];
    // The first request and its burst of 10 pass; the other 39 are refused.
    assert_eq!(
        (codes["200"].as_u64(), codes["429"].as_u64()),
        (Some(11), Some(39)),
        "{codes}"
    );

    let refused = get(s.addr, "/json", "");
    assert_eq!(refused.status, 429);
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "Retry-After {wait}");
    // A path no rule covers is not limited.
    assert_eq!(get(s.addr, "/baseline2?a=1&b=2", "").status, 200);
    // Keyed by a field: each key has its own bucket; a request without it is not counted.
    let key = |k: &str| format!("X-Api-Key: {k}\r\n");
    assert_eq!(get(s.addr, "/plaintext", &key("a")).status, 200);
    assert_eq!(get(s.addr, "/plaintext", &key("a")).status, 200);
    assert_eq!(get(s.addr, "/plaintext", &key("a")).status, 429);
    assert_eq!(get(s.addr, "/plaintext", &key("b")).status, 200);
    for _ in 0..3 {
        assert_eq!(get(s.addr, "/plaintext", "").status, 200);
    }
    // Counted by rule (the label is the rule's site and prefix), and logged
    // as the 429s they are.
    assert_eq!(
        metric(admin, "linerate_rate_limited_total{rule=\"_ /json\"}"),
        39 + 1
    );
    assert_eq!(
        metric(admin, "linerate_rate_limited_total{rule=\"_ /plaintext\"}"),
        1
    );
    eventually("41 lines with status 429 in the access log", || {
        let text = std::fs::read_to_string(d.join("access.log")).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("\"status\":429"))
            .count()
            == 41
    });
    let _ = std::fs::remove_dir_all(&d);
}

/// A cost-4 bcrypt hash of `password`, as `htpasswd -B -C 4` writes it.
fn bcrypt_line(user: &str, password: &str) -> String {
    format!("{user}:{}\n", bcrypt::hash(password, 4).unwrap())
}

fn basic(user_pass: &str) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
    format!("Authorization: Basic {b64}\r\n")
}

fn auth_config(d: &Path, users: &str) -> PathBuf {
    std::fs::write(d.join("users"), users).unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        "[[listen]]\naddr = \"127.0.0.1:0\"\n\
         [[site]]\ndefault = true\napp = \"demo\"\n\
         [[site.basic_auth]]\nprefix = \"/json\"\nhtpasswd = \"users\"\nrealm = \"Demo\"\n",
    )
    .unwrap();
    file
}

#[test]
fn basic_auth_lets_a_right_password_in_and_challenges_the_rest() {
    let d = dir("auth");
    let users = format!(
        "# admins\n{}{}",
        bcrypt_line("alice", "s3cret"),
        bcrypt_line("bob", "p:w")
    );
    let file = auth_config(&d, &users);
    let s = serve(&["--config", file.to_str().unwrap()]);
    let challenged = get(s.addr, "/json", "");
    assert_eq!(challenged.status, 401);
    assert_eq!(
        challenged.header("www-authenticate"),
        Some("Basic realm=\"Demo\", charset=\"UTF-8\"")
    );
    // (credentials, status): twice each, the second served from what passed before.
    let rows = [
        (basic("alice:s3cret"), 200),
        (basic("bob:p:w"), 200),
        (basic("alice:S3cret"), 401),
        (basic("alice:"), 401),
        (basic("mallory:s3cret"), 401),
        ("Authorization: Bearer s3cret\r\n".to_string(), 401),
        ("Authorization: Basic !!\r\n".to_string(), 401),
    ];
    for (fields, status) in &rows {
        for _ in 0..2 {
            assert_eq!(get(s.addr, "/json", fields).status, *status, "{fields}");
        }
    }
    // Below another prefix nothing is asked.
    assert_eq!(get(s.addr, "/plaintext", "").status, 200);
    // A real client.
    let url = format!("http://{}/json", s.addr);
    let curl = |user: &str| {
        let out = Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
                "-u",
                user,
                &url,
            ])
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl("alice:s3cret"), "200");
    assert_eq!(curl("alice:wrong"), "401");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_htpasswd_file_that_cannot_be_used_is_refused_at_its_place() {
    let d = dir("badauth");
    for (users, says) in [
        (
            "alice:$apr1$abc$def\n".to_string(),
            "line 1: user \"alice\": the hash is not bcrypt",
        ),
        (
            "alice:plain\n".to_string(),
            "line 1: user \"alice\": the hash is not bcrypt",
        ),
        (
            format!("# x\n{}alice\n", bcrypt_line("bob", "pw")),
            "line 3: not USER:HASH",
        ),
        ("\n".to_string(), "no users"),
    ] {
        let file = auth_config(&d, &users);
        let (code, err) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        let line = format!("linerate: {}:8:12: htpasswd ", file.display());
        assert!(
            err.starts_with(&line) && err.contains(says),
            "{users:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
