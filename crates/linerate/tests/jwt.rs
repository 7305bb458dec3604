//! The edge JWT check (`[[site.jwt]]`) as `linerate serve --config FILE` runs it: app routes
//! and proxy mounts below a rule need an HS256 bearer token, refused requests never reach
//! the content phase (no upstream sees them, so no cache can store them), tokens made by
//! PyJWT are taken and refused as PyJWT's own rules would, and `--check-config` refuses a
//! rule it cannot use at its place. Servers bind 127.0.0.1 on ports the test picks and are
//! stopped when the test ends.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::bin::{BIN, Stopped, banner, run_err};
use common::{Client, Resp, recording_upstream};
use linerate_server::jwt::sign_hs256;

/// The secret in the file (with the newline `echo` leaves, which is not part of it).
const FILE_SECRET: &str = "file-secret-of-at-least-32-bytes!";
/// The secret in the environment variable of the proxy mount's rule.
const ENV_SECRET: &str = "env-secret-0123456789abcdefghijkl";
const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-jwt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `/json` and `/api` behind the file's secret (issuer `auth`, `sub` required); the proxy
/// mount `/up` behind the environment's secret (audience `edge`); `/plaintext` open.
/// With `h2c`, a second listener there for HTTP/2 with prior knowledge.
fn config(d: &Path, upstream: SocketAddr, h2c: Option<u16>) -> PathBuf {
    std::fs::write(d.join("secret"), format!("{FILE_SECRET}\n")).unwrap();
    let file = d.join("linerate.toml");
    std::fs::write(
        &file,
        format!(
            "[[upstream]]\nname = \"app\"\nservers = [\"{upstream}\"]\n\
             [[listen]]\naddr = \"127.0.0.1:0\"\n{}\
             [[site]]\ndefault = true\napp = \"demo\"\n\
             [[site.proxy]]\nprefix = \"/up\"\nupstream = \"app\"\n\
             [[site.jwt]]\nprefix = \"/json\"\nsecret_file = \"secret\"\nissuer = \"auth\"\nrequire = [\"sub\"]\n\
             [[site.jwt]]\nprefix = \"/up\"\nsecret_env = \"LINERATE_TEST_JWT_SECRET\"\naudience = \"edge\"\nrealm = \"edge\"\n",
            h2c.map_or(String::new(), |p| format!(
                "[[listen]]\naddr = \"127.0.0.1:{p}\"\nh2c = true\n"
            )),
        ),
    )
    .unwrap();
    file
}

/// `linerate serve --config FILE` with the proxy rule's secret in its environment.
fn serve(file: &Path) -> (Stopped, SocketAddr) {
    let mut child = Command::new(BIN)
        .args(["serve", "--no-pin", "--log-level", "warn", "--workers", "1"])
        .arg("--config")
        .arg(file)
        .env("LINERATE_TEST_JWT_SECRET", ENV_SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines = banner(&mut child).unwrap_or_else(|l| panic!("no banner: {l:?}"));
    let guard = Stopped(child);
    let url = lines[0]
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("banner has the URL");
    (guard, url.trim_start_matches("http://").parse().unwrap())
}

fn get(addr: SocketAddr, path: &str, fields: &str) -> Resp {
    let mut c = Client::connect(addr);
    c.send(format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n{fields}\r\n").as_bytes());
    c.read_response()
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// A token for `/json`: issuer `auth`, a subject, valid for a minute.
fn json_token(extra: &str) -> String {
    let claims = format!(r#"{{"iss":"auth","sub":"u1","exp":{}{extra}}}"#, now() + 60);
    sign_hs256(HS256, &claims, FILE_SECRET.as_bytes())
}

/// A token for `/up`: audience `edge`, valid for a minute.
fn up_token() -> String {
    let claims = format!(r#"{{"aud":"edge","sub":"u2","exp":{}}}"#, now() + 60);
    sign_hs256(HS256, &claims, ENV_SECRET.as_bytes())
}

#[test]
fn jwt_guards_app_routes_and_proxy_mounts_before_their_content() {
    let d = dir("guard");
    let (up, seen) = recording_upstream();
    let (_server, addr) = serve(&config(&d, up, None));
    let challenge = "Bearer realm=\"restricted\"";
    let invalid = "Bearer realm=\"restricted\", error=\"invalid_token\"";
    let good = json_token("");
    let expired = sign_hs256(
        HS256,
        &format!(r#"{{"iss":"auth","sub":"u1","exp":{}}}"#, now() - 3600),
        FILE_SECRET.as_bytes(),
    );
    let none = {
        let signed = &good[..good.rfind('.').unwrap()];
        let claims = &signed[signed.find('.').unwrap()..];
        // {"alg":"none"} with the good token's claims and no signature (RFC 7519 §6).
        format!("eyJhbGciOiJub25lIn0{claims}.")
    };
    // (path, fields, status, WWW-Authenticate)
    let rows: Vec<(&str, String, u16, Option<&str>)> = vec![
        ("/json", String::new(), 401, Some(challenge)),
        (
            "/json",
            "Authorization: Basic YTpi\r\n".into(),
            401,
            Some(challenge),
        ),
        ("/json", bearer(&good), 200, None),
        ("/json", bearer(&expired), 401, Some(invalid)),
        ("/json", bearer(&none), 401, Some(invalid)),
        ("/json", bearer(&up_token()), 401, Some(invalid)),
        ("/json", bearer(&format!("{good}=")), 401, Some(invalid)),
        // The path as the app reads it, however spelled (RFC 3986 §2.1, §5.2.4).
        ("/%6Ason", String::new(), 401, Some(challenge)),
        ("//json", String::new(), 401, Some(challenge)),
        ("/x/../json", String::new(), 401, Some(challenge)),
        // RFC 6750 §3.1: two Authorization fields are invalid_request (an upstream may read
        // the other one).
        (
            "/json",
            format!("{}{}", bearer(&good), bearer(&good)),
            400,
            Some("Bearer realm=\"restricted\", error=\"invalid_request\""),
        ),
        // No rule covers it.
        ("/plaintext", String::new(), 200, None),
        // The proxy mount's own rule: its secret, its audience.
        ("/up/x", String::new(), 401, Some("Bearer realm=\"edge\"")),
        (
            "/up/x",
            bearer(&good),
            401,
            Some("Bearer realm=\"edge\", error=\"invalid_token\""),
        ),
    ];
    for (path, fields, status, www) in &rows {
        let r = get(addr, path, fields);
        assert_eq!(r.status, *status, "{path} {fields}");
        assert_eq!(r.header("www-authenticate"), *www, "{path} {fields}");
    }
    // None of the refused /up requests reached the upstream: the first it sees is this one,
    // with the client's Authorization as it came.
    let token = up_token();
    let r = get(addr, "/up/good", &bearer(&token));
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "ok");
    let head = seen.recv_timeout(common::EVENTUALLY).unwrap();
    assert!(head.starts_with("GET /up/good "), "{head}");
    assert!(head.contains(&format!("Bearer {token}")), "{head}");
    assert!(seen.try_recv().is_err());
    // A 401 keeps the connection: the same client sends a token next.
    let mut c = Client::connect(addr);
    c.send(b"GET /up/a HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(c.read_response().status, 401);
    c.send(
        format!(
            "GET /up/b HTTP/1.1\r\nHost: a.test\r\n{}\r\n",
            bearer(&token)
        )
        .as_bytes(),
    );
    assert_eq!(c.read_response().status, 200);
    let head = seen.recv_timeout(common::EVENTUALLY).unwrap();
    assert!(head.starts_with("GET /up/b "), "{head}");
    let _ = std::fs::remove_dir_all(&d);
}

/// SIGHUP reads the secret file again: a token of the old secret is refused after it, one of
/// the new taken.
#[test]
fn a_reload_reads_the_secret_file_again() {
    let d = dir("reload");
    let (up, _seen) = recording_upstream();
    let (server, addr) = serve(&config(&d, up, None));
    let old = json_token("");
    assert_eq!(get(addr, "/json", &bearer(&old)).status, 200);
    let new_secret = "a-new-secret-after-the-rotation-42";
    std::fs::write(d.join("secret"), new_secret).unwrap();
    common::bin::signal(&server.0, rustix::process::Signal::HUP);
    let claims = format!(r#"{{"iss":"auth","sub":"u1","exp":{}}}"#, now() + 60);
    let new = sign_hs256(HS256, &claims, new_secret.as_bytes());
    common::eventually("the new secret is used after SIGHUP", || {
        get(addr, "/json", &bearer(&new)).status == 200
    });
    assert_eq!(get(addr, "/json", &bearer(&old)).status, 401);
    let _ = std::fs::remove_dir_all(&d);
}

/// HTTP/2 requests pass the same access phase: curl with prior knowledge.
#[test]
fn jwt_guards_http2_requests_too() {
    let d = dir("h2");
    let (up, seen) = recording_upstream();
    let port = common::free_port("127.0.0.1");
    let (_server, _) = serve(&config(&d, up, Some(port)));
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");
    let h2 = ["--http2-prior-knowledge"];
    let token = format!("Authorization: Bearer {}", json_token(""));
    let r = common::curl::curl_url(&d, &url("/json"), &h2, &[]);
    assert_eq!((r.version.as_str(), r.status), ("2", 401));
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer realm=\"restricted\"")
    );
    let r = common::curl::curl_url(&d, &url("/json"), &h2, &["-H", &token]);
    assert_eq!((r.version.as_str(), r.status), ("2", 200));
    let r = common::curl::curl_url(&d, &url("/json"), &h2, &["-H", &token, "-H", &token]);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Bearer realm=\"restricted\", error=\"invalid_request\"")
    );
    let r = common::curl::curl_url(&d, &url("/up/x"), &h2, &[]);
    assert_eq!(r.status, 401);
    assert!(
        seen.try_recv().is_err(),
        "a refused request reached the upstream"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A folder for `PYTHONPATH` where PyJWT 2 can be imported: none needed where python3 has it
/// already (Debian's python3-jwt), else PyJWT installed into a folder of its own (`pip
/// install --target`, which reaches PyPI); `Err` with why not.
fn pyjwt(d: &Path) -> Result<PathBuf, String> {
    let target = d.join("pyjwt");
    let has = Command::new("python3")
        .args([
            "-c",
            "import jwt, sys; sys.exit(int(jwt.__version__.split('.')[0]) < 2)",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has {
        return Ok(target);
    }
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-warn-script-location", "--target"])
        .arg(&target)
        .arg("pyjwt>=2")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pip install pyjwt: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(target)
}

/// Runs `script` with PyJWT importable and the two secrets as argv[1] and argv[2]; its
/// stdout's lines.
fn python(target: &Path, script: &str, args: &[&str]) -> Vec<String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args([FILE_SECRET, ENV_SECRET])
        .args(args)
        .env("PYTHONPATH", target)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// PyJWT's tokens, one per line: `PATH STATUS TOKEN`.
const MAKE: &str = r#"
import sys, time, jwt
file_key, env_key = sys.argv[1], sys.argv[2]
now = int(time.time())
ok = {"iss": "auth", "sub": "u1", "exp": now + 60, "iat": now}
rows = [
    ("/json", 200, jwt.encode(ok, file_key, algorithm="HS256")),
    ("/json", 200, jwt.encode(ok, file_key, algorithm="HS256", headers={"kid": "k1"})),
    ("/json", 200, jwt.encode(dict(ok, nbf=now), file_key, algorithm="HS256")),
    ("/up/x", 200, jwt.encode({"aud": ["other", "edge"], "exp": now + 60}, env_key, algorithm="HS256")),
    ("/json", 401, jwt.encode(ok, file_key, algorithm="HS512")),
    ("/json", 401, jwt.encode(ok, file_key, algorithm="HS384")),
    ("/json", 401, jwt.encode(ok, None, algorithm="none")),
    ("/json", 401, jwt.encode(ok, env_key, algorithm="HS256")),
    ("/json", 401, jwt.encode(dict(ok, exp=now - 3600), file_key, algorithm="HS256")),
    ("/json", 401, jwt.encode(dict(ok, nbf=now + 3600), file_key, algorithm="HS256")),
    ("/json", 401, jwt.encode({"iss": "auth", "sub": "u1"}, file_key, algorithm="HS256")),
    ("/json", 401, jwt.encode(dict(ok, iss="someone"), file_key, algorithm="HS256")),
    ("/json", 401, jwt.encode({"iss": "auth", "exp": now + 60}, file_key, algorithm="HS256")),
    ("/up/x", 401, jwt.encode({"aud": "other", "exp": now + 60}, env_key, algorithm="HS256")),
]
for path, status, token in rows:
    print(path, status, token)
"#;

/// Decodes argv[3] (a token of ours) with PyJWT's checks, printing its `sub`.
const READ: &str = r#"
import sys, jwt
claims = jwt.decode(sys.argv[3], sys.argv[1], algorithms=["HS256"], issuer="auth",
                    options={"require": ["exp", "iss", "sub"]})
print(claims["sub"])
"#;

#[test]
fn tokens_made_by_pyjwt_are_checked_as_made() {
    let d = dir("pyjwt");
    let target = match pyjwt(&d) {
        Ok(t) => t,
        Err(why) => {
            println!("NOT RUN: {why}");
            let _ = std::fs::remove_dir_all(&d);
            return;
        }
    };
    let (up, _seen) = recording_upstream();
    let (_server, addr) = serve(&config(&d, up, None));
    let rows = python(&target, MAKE, &[]);
    assert_eq!(rows.len(), 14, "{rows:?}");
    for row in &rows {
        let mut w = row.split(' ');
        let (path, status, token) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
        let r = get(addr, path, &bearer(token));
        assert_eq!(r.status.to_string(), status, "{row}");
    }
    // And the other way: PyJWT takes a token of ours.
    assert_eq!(python(&target, READ, &[&json_token("")]), ["u1"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_jwt_rule_that_cannot_be_used_is_refused_at_its_place() {
    let d = dir("bad");
    std::fs::write(d.join("short"), "hunter2\n").unwrap();
    std::fs::write(d.join("long"), FILE_SECRET).unwrap();
    let rows = [
        (
            "secret_file = \"short\"",
            "the secret is 7 bytes; HS256 needs at least 32",
        ),
        (
            "secret_env = \"LINERATE_TEST_NO_SUCH_VARIABLE\"",
            "variable LINERATE_TEST_NO_SUCH_VARIABLE is not set",
        ),
        ("realm = \"x\"", "needs one of secret_file or secret_env"),
        (
            "secret_file = \"long\"\nsecret_env = \"HOME\"",
            "needs one of secret_file or secret_env",
        ),
        ("secret_file = \"long\"\nleeway = \"soon\"", "jwt leeway"),
        (
            "secret_file = \"long\"\n[[site.jwt]]\nsecret_file = \"long\"",
            "a second [[site.jwt]] for prefix \"/\"",
        ),
        (
            "secret_file = \"long\"\nrealm = \"a\\r\\nX-Injected: 1\"",
            "jwt realm: a control character",
        ),
        (
            "secret_file = \"long\"\nrequire = [\"\"]",
            "an empty claim name",
        ),
        (
            "secret_file = \"long\"\nprefix = \"/%61pi\"",
            "jwt prefix \"/%61pi\" is matched against the decoded path",
        ),
    ];
    for (keys, says) in rows {
        let file = d.join("linerate.toml");
        std::fs::write(
            &file,
            format!(
                "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\napp = \"demo\"\n[[site.jwt]]\n{keys}\n"
            ),
        )
        .unwrap();
        let (code, err) = run_err(&["serve", "--check-config", file.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        assert!(
            err.starts_with(&format!("linerate: {}:", file.display())) && err.contains(says),
            "{keys}: {err}"
        );
        assert!(
            !err.contains("hunter2"),
            "the secret is never written: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Each key of `[[site.jwt]]` lands where the server reads it, and the defaults are the
/// documented ones (realm "restricted", exp required, a 30 s leeway, no iss or aud). (An
/// environment secret is read by the live server above.)
#[test]
fn the_keys_of_a_jwt_rule_are_read_as_documented() {
    use linerate_server::config::{JWT_LEEWAY_S, JwtAuth, JwtSecret};
    let d = dir("keys");
    std::fs::write(d.join("secret"), FILE_SECRET).unwrap();
    let file = d.join("linerate.toml");
    let text = "[[listen]]\naddr = \"127.0.0.1:0\"\n[[site]]\napp = \"demo\"\n\
        [[site.jwt]]\nsecret_file = \"secret\"\n\
        [[site.jwt]]\nprefix = \"/api\"\nsecret_file = \"secret\"\nrealm = \"api\"\n\
        issuer = \"auth\"\naudience = \"edge\"\nrequire = [\"sub\", \"role\"]\n\
        require_exp = false\nleeway = \"2m\"\n";
    let parsed = linerate::conf::parse(text, &file).unwrap();
    let jwt = &parsed.server.sites[0].jwt;
    let secret = JwtSecret::File(d.join("secret"));
    assert_eq!(JWT_LEEWAY_S, 30);
    assert_eq!(
        jwt[..],
        [
            JwtAuth {
                prefix: "/".into(),
                realm: "restricted".into(),
                secret: secret.clone(),
                issuer: None,
                audience: None,
                require: Vec::new(),
                require_exp: true,
                leeway_s: JWT_LEEWAY_S,
            },
            JwtAuth {
                prefix: "/api".into(),
                realm: "api".into(),
                secret,
                issuer: Some("auth".into()),
                audience: Some("edge".into()),
                require: vec!["sub".into(), "role".into()],
                require_exp: false,
                leeway_s: 120,
            },
        ]
    );
    let _ = std::fs::remove_dir_all(&d);
}
