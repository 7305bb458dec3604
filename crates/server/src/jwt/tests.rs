//! Table tests of the JWT check, one row per rule with the RFC section it follows.

use super::*;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";
const NOW: u64 = 1_800_000_000;
const HS256: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

fn verifier(rules: Rules) -> Verifier {
    Verifier::new(SECRET, rules).unwrap()
}

fn strict() -> Rules {
    Rules {
        require_exp: true,
        ..Rules::default()
    }
}

fn token(header: &str, claims: &str) -> String {
    sign_hs256(header, claims, SECRET)
}

fn claims(extra: &str) -> String {
    format!(r#"{{"sub":"u1","exp":{}{extra}}}"#, NOW + 60)
}

/// A token of these parts as they are (not encoded here), with a right MAC over them.
fn signed_raw(header_b64: &str, claims_b64: &str) -> String {
    let signed = format!("{header_b64}.{claims_b64}");
    let tag = hmac::sign(
        &hmac::Key::new(hmac::HMAC_SHA256, SECRET),
        signed.as_bytes(),
    );
    format!("{signed}.{}", B64.encode(tag.as_ref()))
}

/// The token with its `i`th part (0 header, 1 claims, 2 signature) replaced.
fn with_part(token: &str, i: usize, part: &str) -> String {
    let mut parts: Vec<&str> = token.split('.').collect();
    parts[i] = part;
    parts.join(".")
}

/// The signature's last character changed so that only the bits past the 256 of the tag
/// differ: the same bytes, spelled another way.
fn noncanonical(token: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut t = token.as_bytes().to_vec();
    let last = t.last_mut().unwrap();
    let v = ALPHABET.iter().position(|c| c == last).unwrap();
    *last = ALPHABET[v ^ 1];
    String::from_utf8(t).unwrap()
}

#[test]
fn rfc_7515_appendix_a1_hs256_example_verifies() {
    // RFC 7515 §A.1 (and RFC 7519 §3.1): the JWK's `k`, the token, its exp of 1300819380.
    let k = B64
        .decode("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow")
        .unwrap();
    let token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9\
        .eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ\
        .dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let v = Verifier::new(&k, strict()).unwrap();
    let claims = v.verify(token.as_bytes(), 1_300_819_379).unwrap();
    assert_eq!(claims["iss"], "joe");
    assert_eq!(
        v.verify(token.as_bytes(), 1_300_819_380),
        Err(JwtError::Expired)
    );
}

#[test]
fn tokens_are_refused_for_the_rule_they_break() {
    let good = token(HS256, &claims(""));
    let long_claims = format!(
        r#"{{"exp":{},"pad":"{}"}}"#,
        NOW + 60,
        "x".repeat(MAX_TOKEN_BYTES)
    );
    let rows: Vec<(&str, String, Rules, Result<(), JwtError>)> = vec![
        ("a good token", good.clone(), strict(), Ok(())),
        // RFC 7519 §6 / RFC 8725 §3.1: an unsecured JWT (alg none, empty signature).
        (
            "alg none, empty signature",
            format!(
                "{}.",
                &token(r#"{"alg":"none"}"#, &claims(""))[..good.rfind('.').unwrap()]
            ),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "alg none, signed",
            token(r#"{"alg":"none"}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        // RFC 8725 §2.1, §3.1: no other algorithm, whatever the token says.
        (
            "alg HS512",
            token(r#"{"alg":"HS512"}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        (
            "alg RS256",
            token(r#"{"alg":"RS256"}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        (
            "alg hs256 (case)",
            token(r#"{"alg":"hs256"}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        (
            "no alg",
            token(r#"{"typ":"JWT"}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        (
            "alg not a string",
            token(r#"{"alg":["HS256"]}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        // RFC 7515 §4.1.11: an extension this check does not understand.
        (
            "crit",
            token(r#"{"alg":"HS256","crit":["b64"],"b64":false}"#, &claims("")),
            strict(),
            Err(JwtError::Algorithm),
        ),
        // RFC 7515 §5.2: the MAC covers header and payload.
        (
            "tampered payload",
            with_part(&good, 1, &B64.encode(claims(r#","admin":true"#))),
            strict(),
            Err(JwtError::Signature),
        ),
        (
            "tampered header",
            with_part(&good, 0, &B64.encode(r#"{"alg":"HS256"}"#)),
            strict(),
            Err(JwtError::Signature),
        ),
        (
            "wrong key",
            sign_hs256(HS256, &claims(""), b"another secret of 32 bytes......"),
            strict(),
            Err(JwtError::Signature),
        ),
        (
            "truncated signature",
            with_part(&good, 2, &good.rsplit('.').next().unwrap()[..40]),
            strict(),
            Err(JwtError::Signature),
        ),
        // RFC 7519 §4.1.4: now must be before exp.
        (
            "expired",
            token(HS256, &format!(r#"{{"exp":{}}}"#, NOW - 1)),
            strict(),
            Err(JwtError::Expired),
        ),
        (
            "exp is now",
            token(HS256, &format!(r#"{{"exp":{NOW}}}"#)),
            strict(),
            Err(JwtError::Expired),
        ),
        (
            "expired within the leeway",
            token(HS256, &format!(r#"{{"exp":{}}}"#, NOW - 10)),
            Rules {
                leeway_s: 30,
                ..strict()
            },
            Ok(()),
        ),
        (
            "a fractional exp (RFC 7519 §2 NumericDate)",
            token(HS256, &format!(r#"{{"exp":{}.5}}"#, NOW)),
            strict(),
            Ok(()),
        ),
        (
            "exp a string",
            token(HS256, &format!(r#"{{"exp":"{}"}}"#, NOW + 60)),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "no exp, required",
            token(HS256, r#"{"sub":"u1"}"#),
            strict(),
            Err(JwtError::Expired),
        ),
        (
            "no exp, not required",
            token(HS256, r#"{"sub":"u1"}"#),
            Rules::default(),
            Ok(()),
        ),
        // RFC 7519 §4.1.5: now must be at or after nbf.
        (
            "nbf in the future",
            token(HS256, &claims(&format!(r#","nbf":{}"#, NOW + 1))),
            strict(),
            Err(JwtError::NotYetValid),
        ),
        (
            "nbf is now",
            token(HS256, &claims(&format!(r#","nbf":{NOW}"#))),
            strict(),
            Ok(()),
        ),
        (
            "nbf within the leeway",
            token(HS256, &claims(&format!(r#","nbf":{}"#, NOW + 20))),
            Rules {
                leeway_s: 30,
                ..strict()
            },
            Ok(()),
        ),
        // RFC 7519 §4.1.1, §4.1.3.
        (
            "iss matches",
            token(HS256, &claims(r#","iss":"auth""#)),
            Rules {
                issuer: Some("auth".into()),
                ..strict()
            },
            Ok(()),
        ),
        (
            "iss differs",
            token(HS256, &claims(r#","iss":"Auth""#)),
            Rules {
                issuer: Some("auth".into()),
                ..strict()
            },
            Err(JwtError::Claims),
        ),
        (
            "iss missing",
            good.clone(),
            Rules {
                issuer: Some("auth".into()),
                ..strict()
            },
            Err(JwtError::Claims),
        ),
        (
            "aud in an array",
            token(HS256, &claims(r#","aud":["x","edge"]"#)),
            Rules {
                audience: Some("edge".into()),
                ..strict()
            },
            Ok(()),
        ),
        (
            "aud differs",
            token(HS256, &claims(r#","aud":"x""#)),
            Rules {
                audience: Some("edge".into()),
                ..strict()
            },
            Err(JwtError::Claims),
        ),
        (
            "aud present, none configured",
            token(HS256, &claims(r#","aud":"x""#)),
            strict(),
            Err(JwtError::Claims),
        ),
        (
            "a required claim present",
            good.clone(),
            Rules {
                require: vec!["sub".into()],
                ..strict()
            },
            Ok(()),
        ),
        (
            "a required claim missing",
            good.clone(),
            Rules {
                require: vec!["role".into()],
                ..strict()
            },
            Err(JwtError::Claims),
        ),
        // RFC 7515 §2, §C: base64url, no padding, one spelling (RFC 4648 §3.5).
        (
            "padding on the signature",
            format!("{good}="),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "padding on the header",
            with_part(&good, 0, &format!("{}=", B64.encode(r#"{"alg":"HS256"}"#))),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "standard alphabet",
            with_part(
                &good,
                2,
                &good.rsplit('.').next().unwrap().replace(['-', '_'], "+"),
            ),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "an invalid character",
            with_part(&good, 2, "!!!!"),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "a space inside the claims, signed",
            signed_raw(&B64.encode(HS256), &format!("{} ", B64.encode(claims("")))),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "padding on the claims, signed",
            signed_raw(&B64.encode(HS256), &format!("{}=", B64.encode(claims("")))),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "the standard alphabet in the claims, signed",
            signed_raw(
                &B64.encode(HS256),
                &B64.encode(claims(r#","x":"~~~>>>???""#))
                    .replace('_', "/")
                    .replace('-', "+"),
            ),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "non-canonical trailing bits",
            noncanonical(&good),
            strict(),
            Err(JwtError::Malformed),
        ),
        // RFC 7515 §7.1: three parts, none empty; a JWE has five.
        (
            "two parts",
            good[..good.rfind('.').unwrap()].to_string(),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "four parts",
            format!("{good}.x"),
            strict(),
            Err(JwtError::Malformed),
        ),
        ("empty", String::new(), strict(), Err(JwtError::Malformed)),
        ("only dots", "..".into(), strict(), Err(JwtError::Malformed)),
        (
            "an empty payload",
            with_part(&good, 1, ""),
            strict(),
            Err(JwtError::Malformed),
        ),
        // RFC 7519 §7.2 steps 3 and 10: each part a JSON object.
        (
            "a header that is an array",
            token(r#"["HS256"]"#, &claims("")),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "claims that are not JSON",
            token(HS256, "sub=u1"),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "claims that are an array",
            token(HS256, "[1]"),
            strict(),
            Err(JwtError::Malformed),
        ),
        (
            "too long",
            token(HS256, &long_claims),
            strict(),
            Err(JwtError::TooLong),
        ),
    ];
    for (what, token, rules, want) in rows {
        let got = verifier(rules).verify(token.as_bytes(), NOW).map(drop);
        assert_eq!(got, want, "{what}: {token}");
    }
}

#[test]
fn a_secret_shorter_than_the_hash_is_refused() {
    // RFC 7518 §3.2.
    assert!(Verifier::new(&SECRET[..31], strict()).is_err());
    assert!(check_secret(SECRET).is_ok());
    let e = check_secret(b"hunter2").unwrap_err();
    assert!(e.contains("7 bytes") && !e.contains("hunter2"), "{e}");
}

#[test]
fn a_secret_file_loses_one_trailing_newline() {
    let dir = std::env::temp_dir().join(format!("linerate-jwt-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, want) in [
        (&b"s3cret\n"[..], &b"s3cret"[..]),
        (b"s3cret\r\n", b"s3cret"),
        (b"s3cret", b"s3cret"),
        (b"s3cret\n\n", b"s3cret\n"),
        (b" s3cret ", b" s3cret "),
    ] {
        let path = dir.join("secret");
        std::fs::write(&path, text).unwrap();
        assert_eq!(read_secret(&JwtSecret::File(path)).unwrap(), want);
    }
    let e = read_secret(&JwtSecret::File(dir.join("none"))).unwrap_err();
    assert!(e.contains("cannot read the JWT secret"), "{e}");
    let e = read_secret(&JwtSecret::Env("LINERATE_TEST_NO_SUCH_VARIABLE".into())).unwrap_err();
    assert!(e.contains("LINERATE_TEST_NO_SUCH_VARIABLE"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn gate() -> JwtGate {
    let conf = JwtAuth {
        prefix: "/api".into(),
        realm: "api \"x\"".into(),
        secret: JwtSecret::Env("unused".into()),
        issuer: None,
        audience: None,
        require: Vec::new(),
        require_exp: true,
        leeway_s: 0,
    };
    JwtGate::new(&conf, SECRET).unwrap()
}

/// What the gate answers: let in, or the status and the challenge.
type Verdict<'a> = Result<(), (u16, &'a str)>;

#[test]
fn the_gate_answers_as_rfc_6750_section_3_says() {
    let g = gate();
    let good = token(HS256, &claims(""));
    let plain = r#"Bearer realm="api x""#;
    let invalid = r#"Bearer realm="api x", error="invalid_token""#;
    let rows: Vec<(String, bool, Verdict)> = vec![
        (format!("Bearer {good}"), false, Ok(())),
        // RFC 9110 §11.1: the scheme without case; RFC 6750 §2.1: 1*SP.
        (format!("bearer {good}"), false, Ok(())),
        (format!("BEARER   {good}"), false, Ok(())),
        // §3.1: a request without a token gets no error code.
        ("Basic YTpi".into(), false, Err((401, plain))),
        ("Bearer".into(), false, Err((401, plain))),
        // A token that does not verify: invalid_token.
        ("Bearer ".into(), false, Err((401, invalid))),
        (format!("Bearer {good}x"), false, Err((401, invalid))),
        (
            format!("Bearer {}", noncanonical(&good)),
            false,
            Err((401, invalid)),
        ),
        // Two Authorization fields: invalid_request, 400.
        (
            format!("Bearer {good}"),
            true,
            Err((400, r#"Bearer realm="api x", error="invalid_request""#)),
        ),
    ];
    for (value, repeated, want) in rows {
        assert_eq!(
            g.admits(Some(value.as_bytes()), repeated, NOW),
            want,
            "{value}"
        );
    }
    assert_eq!(g.admits(None, false, NOW), Err((401, plain)));
}
