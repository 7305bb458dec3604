//! The proxy's rules as tables: a client's request in, the upstream's head out; an upstream's
//! response head in, the forwarded fields out. One row per rule, with the rule cited.
#![forbid(unsafe_code)]

use linerate_http1::{Limits, Parsed, RequestHead, Version, parse_response_strict};

use super::forward::{Client, ForwardedStyle, HostPolicy, Policy, request_head};
use super::{Name, Named, reply};
use crate::h1c::ReqBody;

fn policy() -> Policy {
    Policy {
        prefix: "/api".into(),
        rewrite: String::new(),
        host: HostPolicy::PassThrough,
        forwarded: ForwardedStyle::XForwarded,
        trust_forwarded: false,
        set: Vec::new(),
        remove: Vec::new(),
        upstream_host: "app.internal:9000".into(),
        upgrades: vec!["websocket".into()],
    }
}

const CLIENT: Client = Client {
    addr: Some(std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 7))),
    tls: true,
    cert: None,
    ids: super::forward::Ids::NONE,
};

/// The upstream head for `request` under `policy`, and its framing facts.
fn forward(request: &[u8], policy: &Policy) -> (String, ReqBody, bool) {
    let mut head = RequestHead::new();
    let n = match head.parse(request, &Limits::default()).unwrap() {
        Parsed::Complete(n) => n,
        Parsed::Partial => panic!("incomplete"),
    };
    let mut out = Vec::new();
    let f = request_head(&head, &request[..n], CLIENT, policy, None, &mut out);
    (String::from_utf8(out).unwrap(), f.body, f.upgrade)
}

#[test]
fn hop_by_hop_fields_are_removed_and_forwarding_fields_added() {
    let (head, body, upgrade) = forward(
        b"GET /api/users?id=1 HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, X-Secret\r\n\
          Keep-Alive: timeout=5\r\nX-Secret: 1\r\nTE: trailers\r\nProxy-Authorization: Basic x\r\n\
          Proxy-Connection: keep-alive\r\nAccept: */*\r\nCookie: a=1\r\n\r\n",
        &policy(),
    );
    // RFC 9110 §7.6.1 (hop-by-hop, and what Connection names), §7.6.3 (Via).
    assert_eq!(
        head,
        "GET /users?id=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nCookie: a=1\r\n\
         Via: 1.1 linerate\r\nX-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: https\r\n\
         X-Forwarded-Host: example.com\r\n\r\n"
    );
    assert_eq!((body, upgrade), (ReqBody::None, false));
}

#[test]
fn the_body_is_framed_here_never_copied() {
    // Content-Length: written by this server from the parsed length.
    let (head, body, _) = forward(
        b"POST /api/x HTTP/1.1\r\nHost: a\r\nContent-Length: 005\r\nExpect: 100-continue\r\n\r\n",
        &policy(),
    );
    assert!(head.contains("\r\nContent-Length: 5\r\n"), "{head}");
    assert!(
        !head.contains("Expect"),
        "100-continue is answered here: {head}"
    );
    assert_eq!(body, ReqBody::Length(5));
    // Chunked: re-chunked by this server, the client's codings never copied.
    let (head, body, _) = forward(
        b"POST /api/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
        &policy(),
    );
    assert_eq!(head.matches("Transfer-Encoding").count(), 1, "{head}");
    assert!(
        head.ends_with("Transfer-Encoding: chunked\r\n\r\n"),
        "{head}"
    );
    assert_eq!(body, ReqBody::Chunked);
}

#[test]
fn forwarding_fields_from_an_untrusted_client_are_replaced() {
    let request = b"GET /api/ HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\n\
                    X-Forwarded-Proto: http\r\nForwarded: for=10.0.0.1\r\nVia: 1.0 edge\r\n\r\n";
    let mut p = policy();
    p.forwarded = ForwardedStyle::Both;
    let (head, _, _) = forward(request, &p);
    assert!(
        !head.contains("10.0.0.1"),
        "a client cannot claim an address: {head}"
    );
    assert!(head.contains("Via: 1.0 edge, 1.1 linerate\r\n"), "{head}");
    assert!(
        head.contains("Forwarded: for=192.0.2.7;proto=https;host=\"a\"\r\n"),
        "{head}"
    );
    // Trusted (the edge is another proxy of ours): extended.
    p.trust_forwarded = true;
    let (head, _, _) = forward(request, &p);
    assert!(
        head.contains("X-Forwarded-For: 10.0.0.1, 192.0.2.7\r\n"),
        "{head}"
    );
    assert!(head.contains("X-Forwarded-Proto: http\r\n"), "{head}");
    assert!(
        head.contains("Forwarded: for=10.0.0.1, for=192.0.2.7;proto=https;host=\"a\"\r\n"),
        "{head}"
    );
}

/// A client's `X-Real-IP` once reached the application unchanged.
#[test]
fn x_real_ip_from_an_untrusted_client_is_dropped() {
    let request = b"GET /api/ HTTP/1.1\r\nHost: a\r\nX-Real-IP: 10.0.0.1\r\n\r\n";
    let mut p = policy();
    for style in [
        ForwardedStyle::XForwarded,
        ForwardedStyle::Rfc7239,
        ForwardedStyle::Both,
        ForwardedStyle::None,
    ] {
        p.forwarded = style;
        let (head, _, _) = forward(request, &p);
        assert!(
            !head.contains("10.0.0.1"),
            "a client cannot claim an address ({style:?}): {head}"
        );
    }
    // Trusted (a proxy of ours is in front and found the client): passed on.
    p.trust_forwarded = true;
    let (head, _, _) = forward(request, &p);
    assert!(head.contains("\r\nX-Real-IP: 10.0.0.1\r\n"), "{head}");
}

#[test]
#[cfg(feature = "tls")] // A client certificate is read only with TLS.
fn the_client_certificate_field_is_ours_alone_unless_a_trusted_proxy_sent_one() {
    let der = {
        let ck = rcgen::generate_simple_self_signed(vec!["alice.test".to_string()]).unwrap();
        ck.cert.der().to_vec()
    };
    let cert = crate::tls::ClientCert::from_der(&der).unwrap();
    let request = b"GET /api/x HTTP/1.1\r\nHost: a\r\nX-Forwarded-Client-Cert: Hash=00\r\n\r\n";
    let run = |client: Client<'_>, trust: bool| {
        let mut head = RequestHead::new();
        let n = match head.parse(request, &Limits::default()).unwrap() {
            Parsed::Complete(n) => n,
            Parsed::Partial => panic!("incomplete"),
        };
        let policy = Policy {
            trust_forwarded: trust,
            ..policy()
        };
        let mut out = Vec::new();
        request_head(&head, &request[..n], client, &policy, None, &mut out);
        String::from_utf8(out)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("X-Forwarded-Client-Cert: "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let with = Client {
        cert: Some(&cert),
        ..CLIENT
    };
    #[rustfmt::skip]
    let rows: [(Client<'_>, bool, Vec<String>); 4] = [
        // A client cannot claim a certificate: its field is dropped...
        (CLIENT, false, vec![]),
        // ...and replaced by the one the handshake verified.
        (with, false, vec![cert.xfcc.clone()]),
        // Behind a trusted proxy its element stays, and ours is appended (Envoy's
        // APPEND_FORWARD).
        (CLIENT, true, vec!["Hash=00".to_string()]),
        (with, true, vec![format!("Hash=00,{}", cert.xfcc)]),
    ];
    for (client, trust, want) in rows {
        assert_eq!(run(client, trust), want, "trust {trust}");
    }
}

#[test]
fn the_prefix_is_rewritten_and_the_target_is_origin_form() {
    let cases = [
        ("/api", "", "/api/users?q=1", "/users?q=1"),
        ("/api", "", "/api", "/"),
        ("/api", "/v1", "/api/u", "/v1/u"),
        ("/api", "/v1", "/api", "/v1"),
        ("/api/", "/", "/api/x", "/x"),
        ("/api", "/v1/", "/api/a/b", "/v1/a/b"),
        ("", "", "/keep/as/is", "/keep/as/is"),
    ];
    for (prefix, rewrite, path, want) in cases {
        let mut p = policy();
        p.prefix = prefix.into();
        p.rewrite = rewrite.into();
        let req = format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n");
        let (head, _, _) = forward(req.as_bytes(), &p);
        assert!(
            head.starts_with(&format!("GET {want} HTTP/1.1\r\n")),
            "{prefix} → {rewrite:?}: {path} gave {head}"
        );
    }
    // Absolute-form (RFC 9112 §3.2.2) goes upstream in origin-form.
    let (head, _, _) = forward(
        b"GET http://a/api/x?y HTTP/1.1\r\nHost: a\r\n\r\n",
        &policy(),
    );
    assert!(head.starts_with("GET /x?y HTTP/1.1\r\n"), "{head}");
}

#[test]
fn host_and_the_mounts_fields() {
    let mut p = policy();
    p.host = HostPolicy::Set("backend.internal:9000".into());
    p.set = vec![("X-Edge".into(), "1".into())];
    p.remove = vec!["cookie".into()];
    p.forwarded = ForwardedStyle::None;
    let (head, _, _) = forward(
        b"GET /api/ HTTP/1.1\r\nHost: public.example\r\nCookie: s=1\r\nX-Edge: forged\r\n\r\n",
        &p,
    );
    assert_eq!(
        head,
        "GET / HTTP/1.1\r\nHost: backend.internal:9000\r\nX-Edge: 1\r\nVia: 1.1 linerate\r\n\r\n"
    );
}

#[test]
fn an_upgrade_is_forwarded_only_when_asked_properly() {
    // RFC 9110 §7.8: Upgrade with Connection: upgrade, on a GET.
    let (head, _, upgrade) = forward(
        b"GET /api/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Key: x\r\nSec-WebSocket-Version: 13\r\n\r\n",
        &policy(),
    );
    assert!(upgrade);
    assert!(head.contains("Sec-WebSocket-Key: x\r\n"), "{head}");
    assert!(
        head.ends_with("Connection: upgrade\r\nUpgrade: websocket\r\n\r\n"),
        "{head}"
    );
    // Upgrade without Connection: upgrade is a hop-by-hop field like any other.
    let (head, _, upgrade) = forward(
        b"GET /api/ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n",
        &policy(),
    );
    assert!(!upgrade && !head.contains("Upgrade"), "{head}");
    // A mount that does not tunnel yet: the upgrade is not asked of the upstream at all.
    let no_tunnel = Policy {
        upgrades: Vec::new(),
        ..policy()
    };
    let (head, _, upgrade) = forward(
        b"GET /api/ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        &no_tunnel,
    );
    assert!(!upgrade && !head.contains("pgrade"), "{head}");
}

/// `Upgrade: h2c` was once forwarded, and a lenient upstream's 101 made a
/// tunnel whose requests passed without Via, X-Forwarded-For or forward auth. Only the
/// protocols on the mount's list go up (RFC 9110 §7.8's list, each `name[/version]`).
#[test]
fn only_upgrades_on_the_allow_list_are_forwarded() {
    let ask = |upgrade: &str, allowed: &[&str]| {
        let request = format!(
            "GET /api/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n\
             Upgrade: {upgrade}\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
        );
        let p = Policy {
            upgrades: allowed.iter().map(|a| a.to_string()).collect(),
            ..policy()
        };
        let (head, _, upgrade) = forward(request.as_bytes(), &p);
        assert_eq!(upgrade, head.contains("\r\nUpgrade: "), "{head}");
        assert!(
            !head.contains("HTTP2-Settings"),
            "named by Connection: {head}"
        );
        head.split("\r\n")
            .find_map(|l| l.strip_prefix("Upgrade: "))
            .map(str::to_string)
    };
    let ws = &["websocket"][..];
    let rows: &[(&str, &[&str], Option<&str>)] = &[
        ("h2c", ws, None),
        ("websocket", ws, Some("websocket")),
        ("WebSocket", ws, Some("WebSocket")),
        ("h2c, websocket", ws, Some("websocket")),
        ("websocket/13, h2c", ws, Some("websocket/13")),
        ("h2c", &["websocket", "h2c"], Some("h2c")),
        ("websocket", &[], None),
    ];
    for (offered, allowed, want) in rows {
        assert_eq!(
            ask(offered, allowed).as_deref(),
            *want,
            "{offered} with {allowed:?}"
        );
    }
}

#[test]
fn response_fields_forwarded_byte_for_byte_without_hop_by_hop_or_framing() {
    let head: &[u8] = b"HTTP/1.1 200 OK\r\nDate: x\r\nServer: app/1\r\nContent-Length: 5\r\n\
        Connection: X-Internal, keep-alive\r\nX-Internal: 1\r\nKeep-Alive: timeout=5\r\n\
        Content-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\
        Content-Disposition: attachment; filename=\"caf\xe9\"\r\nX-Drop: 1\r\nCache-Control: no\r\n\r\n";
    let mut spans = Vec::new();
    let info = parse_response_strict(head, Some(&mut spans))
        .unwrap()
        .unwrap();
    let policy = reply::Policy {
        set: vec![("Cache-Control".into(), "max-age=60".into())],
        remove: vec!["x-drop".into()],
    };
    let got: Vec<(String, Vec<u8>)> = reply::fields(head, &spans, &info, &policy)
        .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.to_vec()))
        .collect();
    let want: Vec<(String, Vec<u8>)> = [
        ("Content-Type", &b"text/plain"[..]),
        ("Set-Cookie", b"a=1"),
        ("Set-Cookie", b"b=2"),
        ("Content-Disposition", b"attachment; filename=\"caf\xe9\""),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v.to_vec()))
    .collect();
    assert_eq!(got, want);
    // After a 101 the client learns what the tunnel speaks.
    let head: &[u8] =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: y\r\n\r\n";
    let info = parse_response_strict(head, Some(&mut spans))
        .unwrap()
        .unwrap();
    let none = reply::Policy::default();
    let names: Vec<&[u8]> = reply::fields(head, &spans, &info, &none)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, [&b"Upgrade"[..], b"Sec-WebSocket-Accept"]);
}

#[test]
fn dot_segments_raw_or_encoded_are_found_and_dotted_names_are_not() {
    use super::forward::has_dot_segment;
    for path in [
        &b"/api/../admin"[..],
        b"/api/./x",
        b"/api/%2e%2e/admin",
        b"/api/.%2E/admin",
        b"/api/%2e",
        b"/api/..",
    ] {
        assert!(has_dot_segment(path), "{}", String::from_utf8_lossy(path));
    }
    for path in [
        &b"/api/x"[..],
        b"/api/.well-known/x",
        b"/a/...",
        b"/a/..b",
        b"/a/%2e%2ex",
        b"/",
    ] {
        assert!(!has_dot_segment(path), "{}", String::from_utf8_lossy(path));
    }
}

#[test]
fn host_comes_from_an_absolute_target_else_the_field_else_the_upstream() {
    let (head, _, _) = forward(
        b"GET http://other.test/api/x HTTP/1.1\r\nHost: example.test\r\n\r\n",
        &policy(),
    );
    assert!(head.contains("\r\nHost: other.test\r\n"), "{head}");
    let (head, _, _) = forward(b"GET /api/x HTTP/1.0\r\n\r\n", &policy());
    assert!(head.contains("\r\nHost: app.internal:9000\r\n"), "{head}");
    // A trailing slash after the prefix is the client's, and stays.
    let rewrite = Policy {
        rewrite: "/v1".into(),
        ..policy()
    };
    let (head, _, _) = forward(b"GET /api/ HTTP/1.1\r\nHost: a\r\n\r\n", &rewrite);
    assert!(head.starts_with("GET /v1/ HTTP/1.1\r\n"), "{head}");
    let (head, _, _) = forward(b"GET /api HTTP/1.1\r\nHost: a\r\n\r\n", &rewrite);
    assert!(head.starts_with("GET /v1 HTTP/1.1\r\n"), "{head}");
}

/// The names the proxy's rules single out, as the rules were first written: one
/// `eq_ignore_ascii_case` compare per rule name (RFC 9110 §7.6.1's hop-by-hop fields and the
/// framing; `Host`, `Expect`, `Via`, the forwarding fields, `Date`, `Server`). [`Name::of`]
/// must agree with them on every name.
const RULE_NAMES: &[(&str, Name)] = &[
    ("connection", Name::Connection),
    ("keep-alive", Name::HopByHop),
    ("proxy-connection", Name::HopByHop),
    ("te", Name::HopByHop),
    ("transfer-encoding", Name::HopByHop),
    ("upgrade", Name::Upgrade),
    ("proxy-authenticate", Name::HopByHop),
    ("proxy-authorization", Name::HopByHop),
    ("content-length", Name::HopByHop),
    ("host", Name::Host),
    ("expect", Name::Expect),
    ("via", Name::Via),
    ("date", Name::Date),
    ("server", Name::Server),
    ("x-forwarded-for", Name::XForwardedFor),
    ("x-forwarded-proto", Name::XForwardedProto),
    ("x-forwarded-host", Name::XForwardedHost),
    ("forwarded", Name::Forwarded),
    ("x-forwarded-client-cert", Name::XForwardedClientCert),
    ("x-real-ip", Name::XRealIp),
];

/// The first version's rule: the first listed name `name` equals, ignoring ASCII case.
fn name_by_compares(name: &[u8]) -> Name {
    RULE_NAMES
        .iter()
        .find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
        .map_or(Name::Other, |&(_, kind)| kind)
}

/// The first version's `Connection` tokens: every field's elements, trimmed, lowercased,
/// empty ones dropped; a name is listed when it equals one ignoring ASCII case.
fn tokens_by_copies(values: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for value in values {
        for t in value.split(|&b| b == b',') {
            let t = t.trim_ascii();
            if !t.is_empty() {
                out.push(t.to_ascii_lowercase());
            }
        }
    }
    out
}

/// Every rule name in three cases, cut, lengthened, and with each byte replaced by bytes that
/// fold near it (`\r` | 0x20 is `-`, 0xC0..: not ASCII, never folded), and other names.
fn candidate_names() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = [
        &b""[..],
        b"x",
        b"accept",
        b"user-agent",
        b"content-type",
        b"cookie",
        b"set-cookie",
        b"x-forwarded",
        b"forwarded-for",
    ]
    .iter()
    .map(|n| n.to_vec())
    .collect();
    for (n, _) in RULE_NAMES {
        let n = n.as_bytes();
        let mixed: Vec<u8> = n
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if i % 2 == 0 {
                    b.to_ascii_uppercase()
                } else {
                    *b
                }
            })
            .collect();
        for base in [n.to_vec(), n.to_ascii_uppercase(), mixed] {
            out.push(base[..base.len() - 1].to_vec());
            out.push([&base[..], b"s"].concat());
            for at in 0..base.len() {
                for b in [b'x', b'_', b'\r', b'\t', 0x0d ^ 0x20, 0xc0, 0xe0, 0xff] {
                    let mut m = base.clone();
                    m[at] = b;
                    out.push(m);
                }
            }
            out.push(base);
        }
    }
    out
}

#[test]
fn the_name_rules_read_once_agree_with_a_compare_per_rule_name() {
    // RFC 9110 §5.1: field names are case-insensitive; the rules' names in any case, and no
    // other name, are told apart.
    let names = candidate_names();
    assert!(names.len() > 2_000, "{}", names.len());
    for name in &names {
        assert_eq!(
            Name::of(name),
            name_by_compares(name),
            "{:?}",
            String::from_utf8_lossy(name)
        );
    }
    for (n, kind) in RULE_NAMES {
        let hop = matches!(*kind, Name::HopByHop | Name::Connection | Name::Upgrade);
        assert_eq!(kind.hop_by_hop(), hop, "{n}");
    }
}

#[test]
fn connection_listed_names_agree_with_the_lowercased_token_copies() {
    // RFC 9110 §7.6.1: the names a Connection field lists, in any of its fields, are
    // hop-by-hop; its list elements are trimmed, and empty ones name nothing.
    let values: &[&[&[u8]]] = &[
        &[],
        &[b"keep-alive"],
        &[b"close"],
        &[b"Upgrade"],
        &[b"X-Secret, keep-alive"],
        &[b" , ,X-A ,\tX-B\t, "],
        &[b"te", b"X-Forwarded-For, Via"],
        &[b""],
        &[b",,"],
        &[b"caf\xe9, X-\xc0"],
    ];
    let mut names = candidate_names();
    names.extend(
        [
            &b"x-secret"[..],
            b"X-A",
            b"x-b",
            b"caf\xe9",
            b"CAF\xe9",
            b"x-\xc0",
            b"X-\xe0",
        ]
        .iter()
        .map(|n| n.to_vec()),
    );
    for fields in values {
        let named = Named::of(fields.iter().map(|v| (&b"Connection"[..], *v)));
        let tokens = tokens_by_copies(fields);
        for name in &names {
            let want = tokens.iter().any(|t| name.eq_ignore_ascii_case(t));
            assert_eq!(named.lists(name), want, "{fields:?} {name:?}");
        }
    }
    // Only `Connection` fields count, in any case.
    let fields: [(&[u8], &[u8]); 3] = [
        (b"CONNECTION", b"x-one"),
        (b"Connections", b"x-two"),
        (b"Keep-Alive", b"x-three"),
    ];
    let named = Named::of(fields.into_iter());
    assert!(named.lists(b"X-One"));
    assert!(!named.lists(b"x-two") && !named.lists(b"x-three"));
}

#[test]
fn fields_a_connection_field_names_are_dropped_in_both_directions_even_forwarding_ones() {
    // RFC 9110 §7.6.1; from a trusted proxy, a forwarding field its Connection names is its
    // own hop's, and is not extended.
    let mut p = policy();
    p.trust_forwarded = true;
    let (head, _, _) = forward(
        b"GET /api/ HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.1\r\nX-Keep: 1\r\n\
          Connection: x-forwarded-for\r\nconnection: X-KEEP\r\nX-Other: 2\r\n\r\n",
        &p,
    );
    assert_eq!(
        head,
        "GET / HTTP/1.1\r\nHost: a\r\nX-Other: 2\r\nVia: 1.1 linerate\r\n\
         X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: a\r\n\r\n"
    );
    let head: &[u8] = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nCONNECTION: x-a\r\nX-B: 2\r\n\
        Content-Length: 0\r\n\r\n";
    let mut spans = Vec::new();
    let info = parse_response_strict(head, Some(&mut spans))
        .unwrap()
        .unwrap();
    let none = reply::Policy::default();
    let names: Vec<&[u8]> = reply::fields(head, &spans, &info, &none)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, [&b"X-B"[..]]);
}

#[test]
fn a_word_is_folded_to_lower_case_as_each_of_its_bytes_is() {
    // Every byte value in every lane, beside letters and bytes next to the letters' edges.
    for b in 0..=255u8 {
        for lane in 0..8 {
            for fill in [b'A', b'z', b'@', b'[', b'`', b'{', 0x00, 0xc1] {
                let mut bytes = [fill; 8];
                bytes[lane] = b;
                let want = u64::from_le_bytes(bytes.map(|c| c.to_ascii_lowercase()));
                assert_eq!(super::fold(u64::from_le_bytes(bytes)), want, "{bytes:x?}");
            }
        }
    }
}

#[test]
fn an_address_is_written_as_display_writes_it() {
    // X-Forwarded-For's address: every octet value in every position, and IPv6 (RFC 5952).
    let mut addrs: Vec<std::net::IpAddr> = Vec::new();
    for pos in 0..4 {
        for o in 0..=255u8 {
            let mut octets = [10, 0, 200, 7];
            octets[pos] = o;
            addrs.push(std::net::Ipv4Addr::from(octets).into());
        }
    }
    addrs.push(std::net::Ipv4Addr::BROADCAST.into());
    addrs.push(std::net::Ipv4Addr::UNSPECIFIED.into());
    addrs.push("2001:db8::1".parse().unwrap());
    addrs.push("::ffff:192.0.2.7".parse().unwrap());
    for a in addrs {
        let mut out = b"x".to_vec();
        super::forward::write_ip(&mut out, a);
        assert_eq!(out, format!("x{a}").into_bytes(), "{a}");
    }
}

#[test]
fn via_names_the_protocol_the_request_came_with() {
    // RFC 9110 §7.6.3: received-protocol is the version, its name omitted for HTTP.
    let request = b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n";
    for (version, via) in [
        (Version::Http10, "Via: 1.0 linerate\r\n"),
        (Version::Http11, "Via: 1.1 linerate\r\n"),
        (Version::Http2, "Via: 2.0 linerate\r\n"),
        (Version::Http3, "Via: 3 linerate\r\n"),
    ] {
        let mut head = RequestHead::new();
        head.parse(request, &Limits::default()).unwrap();
        head.set_version(version);
        let mut out = Vec::new();
        request_head(&head, request, CLIENT, &policy(), None, &mut out);
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains(&format!("\r\n{via}")), "{out}");
    }
}

/// This server's request id and traceparent replace the client's fields of those
/// names; without them (ids off, tracing off) the client's pass as they came.
#[test]
fn request_ids_and_trace_context_replace_the_clients() {
    let request = b"GET /api/x HTTP/1.1\r\nHost: example.com\r\nX-Request-Id: forged\r\n\
        traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n\
        tracestate: rojo=1\r\nX-Trace: keep\r\n\r\n";
    let mut head = RequestHead::new();
    head.parse(request, &Limits::default()).unwrap();
    let run = |ids: super::forward::Ids<'_>| {
        let mut out = Vec::new();
        let client = Client { ids, ..CLIENT };
        request_head(&head, request, client, &policy(), None, &mut out);
        String::from_utf8(out).unwrap()
    };
    let ours = b"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
    let traced = run(super::forward::Ids {
        request_id: Some((b"X-Request-Id", b"0123456789abcdef0123456789abcdef")),
        traceparent: Some(ours),
        tracestate: Some(b"rojo=1"),
    });
    assert!(!traced.contains("forged"), "{traced}");
    assert!(!traced.contains("00f067aa0ba902b7"), "{traced}");
    assert_eq!(traced.matches("traceparent").count(), 1, "{traced}");
    assert_eq!(traced.matches("tracestate: rojo=1").count(), 1, "{traced}");
    assert!(traced.contains("X-Request-Id: 0123456789abcdef0123456789abcdef\r\n"));
    assert!(
        traced.contains("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01\r\n")
    );
    assert!(traced.contains("X-Trace: keep\r\n"));
    // An operator's own field name replaces the client's of that name; X-Request-Id then
    // passes.
    let custom = run(super::forward::Ids {
        request_id: Some((b"X-Correlation-Id", b"abc")),
        ..super::forward::Ids::NONE
    });
    assert!(custom.contains("X-Correlation-Id: abc\r\n"), "{custom}");
    assert!(custom.contains("X-Request-Id: forged\r\n"), "{custom}");
    let plain = run(super::forward::Ids::NONE);
    assert!(plain.contains("X-Request-Id: forged\r\n"));
    assert!(
        plain.contains("traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n")
    );
}
