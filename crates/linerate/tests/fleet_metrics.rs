//! Through the binary: what tells a fleet's nodes apart on the admin
//! listener (the build, the configuration's hash, the last reload's outcome), and a
//! `redirect_to_https` listener naming the port clients see (`https_port`), read by curl.
//! A restart pending, the ticket key's age, the storage's errors, and
//! `/readyz` while the storage has not answered since start.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use common::bin::{self, BIN};
use common::{READ_TIMEOUT, eventually, free_port};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The admin listener's answer to `GET path`: status and body.
fn admin_get(admin: &str, path: &str) -> (u16, String) {
    let mut c = TcpStream::connect(admin).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let status = out.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |b| b.1).to_string();
    (status, body)
}

/// The samples of `/metrics` whose line starts with `name` (labels included), as lines.
fn samples(admin: &str, name: &str) -> Vec<String> {
    admin_get(admin, "/metrics")
        .1
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The value of the one sample `name` (no labels).
fn value(admin: &str, name: &str) -> f64 {
    let lines = samples(admin, &format!("{name} "));
    assert_eq!(lines.len(), 1, "{name}: {lines:?}");
    lines[0].rsplit(' ').next().unwrap().parse().unwrap()
}

/// The first 16 hex digits of the SHA-256 of `path`'s bytes, by coreutils' sha256sum.
fn sha256_16(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum (coreutils)");
    String::from_utf8(out.stdout).unwrap()[..16].to_string()
}

/// The commit this test was built from, as the build script finds it.
fn head_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown".into(), |o| {
            String::from_utf8(o.stdout).unwrap().trim().to_string()
        })
}

/// Nothing on `/metrics` said which build a node ran, and `--version` named
/// no commit. Both now name the package's version and the commit built.
#[test]
fn build_info_and_version_name_the_version_and_the_commit() {
    let commit = head_commit();
    let version = env!("CARGO_PKG_VERSION");
    let out = std::process::Command::new(BIN)
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("linerate {version} ({commit})")
    );
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let _s = bin::serve(&["--app", "none", "--admin", &admin]);
    assert_eq!(
        samples(&admin, "linerate_build_info"),
        [format!(
            "linerate_build_info{{version=\"{version}\",commit=\"{commit}\"}} 1"
        )]
    );
    // Without a file, the hash is the command line's.
    let info = samples(&admin, "linerate_config_info");
    assert!(
        info.len() == 1 && info[0].contains("source=\"flags\""),
        "{info:?}"
    );
}

/// An operator could not tell which nodes ran which configuration, nor
/// whether a SIGHUP took. `linerate_config_info{hash}` is the file's SHA-256 (first 16 hex
/// digits) and follows a successful reload; a failed one keeps it and sets
/// `linerate_config_last_reload_successful` to 0, its timestamp unchanged.
#[test]
fn the_config_hash_and_the_last_reload_follow_sighup() {
    let d = dir("reload");
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    let good = |comment: &str| {
        format!(
            "# {comment}\n[admin]\naddr = \"{admin}\"\n[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\nnames = [\"{comment}.test\"]\napp = \"demo\"\n"
        )
    };
    std::fs::write(&file, good("first")).unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let info = |admin: &str| samples(admin, "linerate_config_info");
    let first = sha256_16(&file);
    assert_eq!(
        info(&admin),
        [format!(
            "linerate_config_info{{hash=\"{first}\",source=\"file\"}} 1"
        )]
    );
    assert_eq!(value(&admin, "linerate_config_last_reload_successful"), 1.0);
    let started = value(
        &admin,
        "linerate_config_last_reload_success_timestamp_seconds",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(started > 0.0 && started <= now + 1.0, "{started} {now}");

    // Another file (a comment differs: still another file's bytes), reloaded.
    std::fs::write(&file, good("second")).unwrap();
    let second = sha256_16(&file);
    assert_ne!(first, second);
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the reload's hash is exposed", || {
        info(&admin).iter().any(|l| l.contains(&second))
    });
    assert_eq!(value(&admin, "linerate_config_last_reload_successful"), 1.0);
    let reloaded = value(
        &admin,
        "linerate_config_last_reload_success_timestamp_seconds",
    );
    assert!(reloaded >= started, "{reloaded} < {started}");
    // GET /config follows it too.
    let config = admin_get(&admin, "/config").1;
    assert!(
        config.contains("second.test") && !config.contains("first.test"),
        "{config}"
    );

    // A file with a mistake: the configuration in use stays, and says the reload failed.
    std::fs::write(&file, "[[listen]]\naddr = 7\n").unwrap();
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the failed reload is exposed", || {
        value(&admin, "linerate_config_last_reload_successful") == 0.0
    });
    assert!(info(&admin)[0].contains(&second), "{:?}", info(&admin));
    assert_eq!(
        value(
            &admin,
            "linerate_config_last_reload_success_timestamp_seconds"
        ),
        reloaded
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// Behind a balancer, `redirect_to_https` named the node's own TLS port
/// (`https://host:PORT/…`), which clients cannot reach. `https_port` names the port they see:
/// left out for 443, named otherwise. Read by Debian's curl (`curl -sI`).
#[test]
fn https_port_is_the_port_the_redirect_names() {
    let d = dir("https-port");
    let ck = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    let (p443, p8443, pown) = (
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
        free_port("127.0.0.1"),
    );
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[listen]]\naddr = \"127.0.0.1:{p443}\"\nredirect_to_https = true\nhttps_port = 443\n\
             [[listen]]\naddr = \"127.0.0.1:{p8443}\"\nredirect_to_https = true\nhttps_port = 8443\n\
             [[listen]]\naddr = \"127.0.0.1:{pown}\"\nredirect_to_https = true\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\
             [[site]]\nnames = [\"a.test\"]\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let tls_port = s
        .banner
        .iter()
        .find_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("https://"))
        })
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .expect("an https listener in the banner")
        .port();
    let location = |port: u16| {
        let out = std::process::Command::new("curl")
            .args(["-sI", "--max-time", "10", "-H", "Host: a.test"])
            .arg(format!("http://127.0.0.1:{port}/x/y?z=1"))
            .output()
            .expect("curl is needed by this test (apt-get install curl)");
        let head = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(head.starts_with("HTTP/1.1 308"), "{head}");
        head.lines()
            .find_map(|l| {
                l.strip_prefix("Location: ")
                    .or(l.strip_prefix("location: "))
            })
            .map(|l| l.trim().to_string())
            .unwrap_or_else(|| panic!("no Location: {head}"))
    };
    assert_eq!(location(p443), "https://a.test/x/y?z=1");
    assert_eq!(location(p8443), "https://a.test:8443/x/y?z=1");
    // Without it, the node's own TLS listener, as before.
    assert_eq!(location(pown), format!("https://a.test:{tls_port}/x/y?z=1"));
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// The admin listener could not say what configuration a node runs. `GET
/// /config` answers it as JSON (what the server runs with: defaults filled in), with every
/// secret the file can hold replaced by `<redacted>`: a Redis URL's password (the cache tier,
/// `[storage]`), the EAB MAC key, and none of what the file only points at (the htpasswd
/// file's hashes, the JWT secret, the private key's contents) is read into it.
#[test]
fn get_config_answers_the_configuration_in_use_without_its_secrets() {
    use base64::Engine as _;
    let d = dir("config");
    let ck = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    let key_pem = ck.signing_key.serialize_pem();
    std::fs::write(d.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(d.join("key.pem"), &key_pem).unwrap();
    let bcrypt_hash = bcrypt::hash_with_salt("alice-pw", 4, [7; 16])
        .unwrap()
        .format_for_version(bcrypt::Version::TwoY);
    std::fs::write(d.join("users.htpasswd"), format!("alice:{bcrypt_hash}\n")).unwrap();
    let jwt_secret = "jwt-secret-bytes-0123456789abcdefghij";
    std::fs::write(d.join("jwt.key"), jwt_secret).unwrap();
    let hmac = b"eab-hmac-key-bytes-0123456789";
    let hmac_b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hmac);
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let up = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n\
             [acme]\nstorage = \"acme\"\neab_kid = \"kid-7\"\neab_hmac_key = \"{hmac_b64}\"\n\
             [storage]\nredis = \"redis://fleet:storage-pass-1@127.0.0.1:1/0\"\nnodes = 3\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\
             [[upstream]]\nname = \"app\"\nservers = [\"{up}\"]\n\
             [[site]]\nnames = [\"a.test\", \"b.test\"]\napp = \"demo\"\n\
             [[site.basic_auth]]\nprefix = \"/admin\"\nhtpasswd = \"users.htpasswd\"\n\
             [[site.jwt]]\nprefix = \"/api\"\nsecret_file = \"jwt.key\"\n\
             [[site.proxy]]\nprefix = \"/p/\"\nupstream = \"app\"\n\
             cache = {{ size = \"4MiB\", tier = \"redis://:tier-pass-2@127.0.0.1:1\" }}\n"
        ),
    )
    .unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let (status, body) = admin_get(&admin, "/config");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    // The secrets, in every spelling they could take.
    let hmac_text = String::from_utf8_lossy(hmac).into_owned();
    let hmac_bytes = format!("{:?}", hmac.to_vec()).replace(' ', "");
    let compact = body.replace([' ', '\n'], "");
    for secret in [
        "storage-pass-1",
        "tier-pass-2",
        hmac_b64.as_str(),
        hmac_text.as_str(),
        jwt_secret,
        bcrypt_hash.as_str(),
        "alice-pw",
        key_pem.lines().nth(1).unwrap(),
    ] {
        assert!(!body.contains(secret), "{secret:?} in {body}");
    }
    assert!(
        !compact.contains(&hmac_bytes[1..hmac_bytes.len() - 1]),
        "{body}"
    );
    // Each replaced by the marker, the rest of the URL kept.
    assert!(
        body.contains("redis://fleet:<redacted>@127.0.0.1:1/0"),
        "{body}"
    );
    assert!(body.contains("redis://:<redacted>@127.0.0.1:1"), "{body}");
    assert_eq!(v["acme"]["eab"]["hmac_key"], "<redacted>", "{body}");
    // The rest is there: the sites' names, the listeners, the defaults filled in, the
    // paths to the secrets.
    let text = v.to_string();
    for there in [
        "\"a.test\"",
        "\"b.test\"",
        "kid-7",
        "users.htpasswd",
        "jwt.key",
        "key.pem",
        "cert.pem",
        &admin,
        "\"nodes\":3",
    ] {
        assert!(text.contains(there), "{there} not in {body}");
    }
    let listeners = v["listeners"].as_array().expect("listeners");
    assert_eq!(listeners.len(), 2, "{body}");
    // A default the file did not name: the header timeout (10 s).
    assert_eq!(v["header_timeout"], "10s", "{body}");
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// A self-signed certificate for `names` expiring on `(y, m, d)` at 00:00 UTC, as
/// `FILE.pem` and `FILE.key` in `d`.
fn cert_until(d: &Path, file: &str, names: &[&str], (y, m, day): (i32, u8, u8)) {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.not_after = rcgen::date_time_ymd(y, m, day);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(d.join(format!("{file}.pem")), cert.pem()).unwrap();
    std::fs::write(d.join(format!("{file}.key")), key.serialize_pem()).unwrap();
}

/// No metric said when a node's certificates expire, so a node still serving
/// an old one looked like the others. `linerate_certificate_expiry_timestamp_seconds{name,
/// source}` gives each loaded certificate's `notAfter`: the listener's own (its first DNS
/// name), a site's files, the local CA's; a SIGHUP that rereads a renewed file moves it.
#[test]
fn every_loaded_certificate_reports_its_expiry_and_a_reread_moves_it() {
    let d = dir("expiry");
    // 2031-05-06 and 2032-01-02, 2033-03-04 00:00:00 UTC.
    let (t2031, t2032, t2033) = (1_935_792_000.0, 1_956_614_400.0, 1_993_507_200.0);
    cert_until(&d, "own", &["own.test", "x.test"], (2031, 5, 6));
    cert_until(&d, "b", &["b.test"], (2032, 1, 2));
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n[acme]\nstorage = \"acme\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"own.pem\", key = \"own.key\" }}\n\
             [[site]]\nnames = [\"b.test\"]\napp = \"demo\"\ntls = {{ cert = \"b.pem\", key = \"b.key\" }}\n\
             [[site]]\nnames = [\"c.internal\"]\napp = \"demo\"\ntls = \"internal\"\n"
        ),
    )
    .unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let expiry = |name: &str, source: &str| -> Option<f64> {
        let head = format!(
            "linerate_certificate_expiry_timestamp_seconds{{name=\"{name}\",source=\"{source}\"}} "
        );
        samples(&admin, &head)
            .first()
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    assert_eq!(expiry("own.test", "files"), Some(t2031));
    assert_eq!(expiry("b.test", "files"), Some(t2032));
    // The local CA's leaves live 7 days from their making.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let internal = expiry("c.internal", "internal").expect("the local CA's certificate");
    assert!(
        internal > now + 6.0 * 86_400.0 && internal < now + 8.0 * 86_400.0,
        "{internal} {now}"
    );
    // b.test renewed on disk; a SIGHUP rereads it.
    cert_until(&d, "b", &["b.test"], (2033, 3, 4));
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the reread certificate's expiry", || {
        expiry("b.test", "files") == Some(t2033)
    });
    assert_eq!(
        samples(&admin, "linerate_certificate_expiry_timestamp_seconds").len(),
        3,
        "one sample per certificate"
    );
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// Without a file: SIGHUP rereads the certificates only, and its outcome is
/// what `linerate_config_last_reload_successful` says (a certificate file that no longer
/// parses: 0, the one in use stays; fixed: 1 again, at a later time), the flags' hash kept.
#[test]
fn without_a_file_a_certificate_reread_sets_the_last_reload() {
    let d = dir("flags-reload");
    cert_until(&d, "own", &["own.test"], (2031, 5, 6));
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let (cert, key) = (d.join("own.pem"), d.join("own.key"));
    let s = bin::serve(&[
        "--app",
        "none",
        "--admin",
        &admin,
        "--tls-port",
        "0",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let hash = samples(&admin, "linerate_config_info");
    assert!(hash[0].contains("source=\"flags\""), "{hash:?}");
    let at = |admin: &str| {
        value(
            admin,
            "linerate_config_last_reload_success_timestamp_seconds",
        )
    };
    let started = at(&admin);
    std::fs::write(&cert, "not a certificate\n").unwrap();
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the failed reread is exposed", || {
        value(&admin, "linerate_config_last_reload_successful") == 0.0
    });
    assert_eq!(at(&admin), started);
    // One second on: the next success is at a later time, whatever the clock's resolution.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    cert_until(&d, "own", &["own.test"], (2032, 1, 2));
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the good reread is exposed", || {
        value(&admin, "linerate_config_last_reload_successful") == 1.0
    });
    assert!(at(&admin) > started);
    assert_eq!(samples(&admin, "linerate_config_info"), hash);
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// A new fleet node whose `[storage]` Redis could not be reached answered
/// `/healthz` and `/readyz` 200 while it had none of the fleet's ticket keys (nor, with ACME,
/// its certificates). `/readyz` is 503 until the storage first answers, naming it and why;
/// `/healthz` stays 200 (alive). Item 3 beside it: the failed calls are counted by
/// operation, and the ticket key sealing (the node's own, then the fleet's) has an age.
#[test]
fn readyz_is_503_until_the_storage_answers_and_says_why() {
    let d = dir("storage-down");
    cert_until(&d, "own", &["own.test"], (2031, 5, 6));
    // Redis down at start: stopped on its port when there is one to bring back.
    let mut redis = common::tier::TierServer::start("redis-server");
    let port = match redis.as_mut() {
        Some(r) => {
            r.kill();
            r.port
        }
        None => free_port("127.0.0.1"),
    };
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n\
             [storage]\nredis = \"redis://127.0.0.1:{port}\"\nnodes = 2\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"own.pem\", key = \"own.key\" }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    assert_eq!(admin_get(&admin, "/healthz"), (200, "ok\n".into()));
    let why =
        format!("not ready: [storage] (redis 127.0.0.1:{port}) has not answered since start: ");
    eventually("/readyz names the storage", || {
        let (status, body) = admin_get(&admin, "/readyz");
        status == 503 && body.starts_with(&why) && body.ends_with('\n')
    });
    // The start's read of the keys failed, and the probe's.
    let errors = |op: &str| -> f64 {
        let head = format!("linerate_storage_errors_total{{op=\"{op}\"}} ");
        samples(&admin, &head)
            .first()
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {head}"))
    };
    assert!(errors("get") >= 1.0);
    eventually("the probe's failures are counted", || {
        errors("probe") >= 1.0
    });
    assert_eq!(errors("put"), 0.0);
    // The node seals with a key of its own meanwhile, made at start.
    let age = |admin: &str| {
        samples(
            admin,
            "linerate_tls_ticket_key_age_seconds{source=\"storage\"} ",
        )
        .first()
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert!(age(&admin).is_some_and(|a| a < 60.0), "{:?}", age(&admin));
    let Some(redis) = redis.as_mut() else {
        drop(s);
        let _ = std::fs::remove_dir_all(&d);
        return;
    };
    redis.restart();
    eventually("/readyz is 200 once the storage answers", || {
        admin_get(&admin, "/readyz") == (200, "ready\n".into())
    });
    assert_eq!(admin_get(&admin, "/healthz"), (200, "ok\n".into()));
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// A SIGHUP that changed a key only a restart applies said so in the log
/// alone. `linerate_restart_pending` is 0 from the start, stays 0 for a change applied at
/// once (a site), is 1 while the file changes a restart-only key (`limits.header_timeout`),
/// and 0 again once that change is undone.
#[test]
fn restart_pending_is_1_while_the_file_changes_a_restart_only_key() {
    let d = dir("restart-pending");
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    let conf = |site: &str, header_timeout: &str| {
        format!(
            "[admin]\naddr = \"{admin}\"\n[limits]\nheader_timeout = \"{header_timeout}\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\nnames = [\"{site}.test\"]\napp = \"demo\"\n"
        )
    };
    std::fs::write(&file, conf("a", "10s")).unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let pending = |admin: &str| value(admin, "linerate_restart_pending");
    assert_eq!(pending(&admin), 0.0);
    let hup_and_wait = |text: String| {
        std::fs::write(&file, text).unwrap();
        let hash = sha256_16(&file);
        bin::signal(&s.child, rustix::process::Signal::HUP);
        eventually("the reload's hash is exposed", || {
            samples(&admin, "linerate_config_info")
                .iter()
                .any(|l| l.contains(&hash))
        });
    };
    hup_and_wait(conf("b", "10s"));
    assert_eq!(pending(&admin), 0.0, "a site applies at once");
    hup_and_wait(conf("c", "5s"));
    assert_eq!(pending(&admin), 1.0, "header_timeout waits for a restart");
    hup_and_wait(conf("d", "10s"));
    assert_eq!(pending(&admin), 0.0, "undone");
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}

/// Nothing said how old the session-ticket key in use was, so a rotation
/// that stopped went unseen until a leak. `linerate_tls_ticket_key_age_seconds{source=
/// "files"}` is the sealing key file's age (its modification time), and follows a SIGHUP
/// that reads a new one.
#[test]
fn the_ticket_key_age_is_the_sealing_key_files() {
    let d = dir("ticket-age");
    cert_until(&d, "own", &["own.test"], (2031, 5, 6));
    let key = d.join("current.key");
    let write_key = |byte: u8, hours_ago: u64| {
        std::fs::write(&key, [byte; 80]).unwrap();
        let at = std::time::SystemTime::now() - std::time::Duration::from_secs(hours_ago * 3600);
        std::fs::File::options()
            .write(true)
            .open(&key)
            .unwrap()
            .set_modified(at)
            .unwrap();
    };
    write_key(1, 30);
    let admin = format!("127.0.0.1:{}", free_port("127.0.0.1"));
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[admin]\naddr = \"{admin}\"\n[tls]\nticket_keys = [\"current.key\"]\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\ntls = {{ cert = \"own.pem\", key = \"own.key\" }}\n\
             [[site]]\ndefault = true\napp = \"demo\"\n"
        ),
    )
    .unwrap();
    let s = bin::serve_as(&["--config", file.to_str().unwrap()]);
    let age = |admin: &str| {
        value(
            admin,
            "linerate_tls_ticket_key_age_seconds{source=\"files\"}",
        )
    };
    let hours = |h: f64| h * 3600.0;
    let got = age(&admin);
    assert!(got >= hours(30.0) && got < hours(30.0) + 60.0, "{got}");
    // No fleet storage: no storage series.
    assert!(samples(&admin, "linerate_storage_errors_total").is_empty());
    write_key(2, 1);
    bin::signal(&s.child, rustix::process::Signal::HUP);
    eventually("the new key's age", || age(&admin) < hours(1.0) + 60.0);
    drop(s);
    let _ = std::fs::remove_dir_all(&d);
}
