//! `serve` with HTTPS flags: mistakes (flags given apart, missing files, a key that does not
//! match the certificate) are one line naming the flag and a non-zero exit; a good pair
//! prints the https URL in the banner. Certificates are made at test time.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// A certificate, its key and an unrelated key, as PEM files in a fresh directory.
fn pem_files(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("linerate-tlscli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.join("other.pem"), other.serialize_pem()).unwrap();
    std::fs::write(dir.join("empty.pem"), "").unwrap();
    dir
}

fn run_err(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn tls_mistakes_are_one_line_and_nonzero() {
    let dir = pem_files("mistakes");
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (cert, key, other, empty, missing) = (
        p("cert.pem"),
        p("key.pem"),
        p("other.pem"),
        p("empty.pem"),
        p("missing.pem"),
    );
    let base = [
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--no-pin",
        "--tls-port",
        "0",
    ];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--tls-cert", &cert], "go together"),
        (vec!["--tls-cert", &cert, "--tls-key", &other], "--tls-key"),
        (
            vec!["--tls-cert", &missing, "--tls-key", &key],
            "--tls-cert",
        ),
        (
            vec!["--tls-cert", &cert, "--tls-key", &missing],
            "--tls-key",
        ),
        (vec!["--tls-cert", &empty, "--tls-key", &key], "--tls-cert"),
        (vec!["--tls-cert", &cert, "--tls-key", &empty], "--tls-key"),
    ];
    for (extra, needle) in &cases {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let (code, stderr) = run_err(&args);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("linerate: ") && stderr.contains(needle),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let (_, stderr) = run_err(
        &base
            .iter()
            .copied()
            .chain(["--tls-cert", &cert, "--tls-key", &other])
            .collect::<Vec<_>>(),
    );
    assert!(stderr.contains("does not match --tls-cert"), "{stderr}");
    let (_, stderr) = run_err(
        &base
            .iter()
            .copied()
            .chain(["--tls-cert", &cert, "--tls-key", &missing])
            .collect::<Vec<_>>(),
    );
    assert!(stderr.contains("No such file"), "{stderr}");
}

#[test]
fn banner_shows_the_https_url() {
    let dir = pem_files("banner");
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--no-pin",
            "--workers",
            "1",
        ])
        .args(["--log-level", "warn", "--tls-port", "0", "--tls-cert"])
        .arg(dir.join("cert.pem"))
        .arg("--tls-key")
        .arg(dir.join("key.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let started = Instant::now();
    let mut https = None;
    let mut line = String::new();
    while https.is_none() && started.elapsed() < Duration::from_secs(10) {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        https = line
            .split_whitespace()
            .find(|w| w.starts_with("https://127.0.0.1:"))
            .map(str::to_string);
    }
    let _ = child.kill();
    let _ = child.wait();
    let https = https.expect("banner has the https URL");
    let port: u16 = https.rsplit(':').next().unwrap().parse().unwrap();
    assert_ne!(port, 0);
}
