//! An answer's own fields as HTTP/2 and HTTP/3 send them (RFC 9113 §8.2, RFC 9114 §4.2):
//! names in lowercase, connection-specific fields never. Shared by `h2` and `h3`, which add
//! the fields the server writes itself (`:status`, `date`, `server`, the length: never on a
//! gRPC answer, [`is_grpc`]).
//!
//! Lowering costs no allocation for names up to [`LOWER_ON_STACK`] bytes (every registered
//! field name is shorter).
#![forbid(unsafe_code)]

/// The longest name lowered in a stack buffer; a longer one is lowered into a new one.
const LOWER_ON_STACK: usize = 64;

/// RFC 9113 §8.2.2, RFC 9114 §4.2: fields that belong to one HTTP/1.1 connection.
fn is_connection_specific(lower: &[u8]) -> bool {
    matches!(
        lower,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// The media type gRPC over HTTP/2 and HTTP/3 answers with (PROTOCOL-HTTP2.md:
/// `application/grpc`, or with a message format, `application/grpc+proto`).
const GRPC_MEDIA_TYPE: &[u8] = b"application/grpc";

/// Whether an answer of content type `content_type` is a gRPC one, sent without
/// `content-length`: gRPC's framing is the stream's end and its trailers (`grpc-status`), as
/// grpc-go and tonic send it, and a client that stops reading at the length (curl) never
/// reads those trailers. gRPC-Web (`application/grpc-web…`) is not: its trailers are in the
/// body, and its length stays. Parameters are ignored; the type is case-insensitive (RFC 9110
/// §8.3.1).
pub(crate) fn is_grpc(content_type: &[u8]) -> bool {
    let media = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    let n = GRPC_MEDIA_TYPE.len();
    media.len() >= n
        && media[..n].eq_ignore_ascii_case(GRPC_MEDIA_TYPE)
        && (media.len() == n || media[n] == b'+')
}

/// Calls `f` with each field of `fields` that goes out, its name lowercase: connection-specific
/// ones are left out, and so is `content-length` where `own_length` (the caller writes the
/// length it knows).
pub(crate) fn each<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    own_length: bool,
    mut f: impl FnMut(&[u8], &[u8]),
) {
    let mut low = [0u8; LOWER_ON_STACK];
    for (name, value) in fields {
        let owned;
        let lower: &[u8] = if name.len() <= low.len() {
            let l = &mut low[..name.len()];
            l.copy_from_slice(name);
            l.make_ascii_lowercase();
            l
        } else {
            owned = name.to_ascii_lowercase();
            &owned
        };
        if is_connection_specific(lower) || (own_length && lower == b"content-length") {
            continue;
        }
        f(lower, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gRPC's content types (PROTOCOL-HTTP2.md "Content-Type") go without a length;
    /// gRPC-Web's (PROTOCOL-WEB.md) and everything else keep it.
    #[test]
    fn grpc_answers_are_told_from_grpc_web_and_others() {
        for (ct, grpc) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("application/grpc+json", true),
            ("Application/GRPC", true),
            ("application/grpc; charset=utf-8", true),
            (" application/grpc ", true),
            ("application/grpc-web", false),
            ("application/grpc-web+proto", false),
            ("application/grpc-web-text+proto", false),
            ("application/grpcx", false),
            ("application/json", false),
            ("application/grp", false),
            ("", false),
        ] {
            assert_eq!(is_grpc(ct.as_bytes()), grpc, "{ct:?}");
        }
    }

    /// Rows of (fields in, own length, fields out): names lowered (short and past the stack
    /// buffer), values untouched, connection-specific fields dropped, the length only when the
    /// caller writes its own.
    #[test]
    fn fields_go_out_lowercase_without_connection_fields() {
        type Fields<'a> = Vec<(&'a str, &'a str)>;
        type Out<'a> = Vec<(String, &'a str)>;
        let long = "X-".to_string() + &"Ab".repeat(40);
        #[rustfmt::skip]
        let rows: &[(Fields, bool, Out)] = &[
            (vec![("ETag", "\"A\""), ("x-Ok", "V V")], false,
             vec![("etag".into(), "\"A\""), ("x-ok".into(), "V V")]),
            (vec![("Connection", "close"), ("Keep-Alive", "5"), ("Proxy-Connection", "x"),
                  ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Vary", "*")], false,
             vec![("vary".into(), "*")]),
            (vec![("Content-Length", "3")], false, vec![("content-length".into(), "3")]),
            (vec![("Content-Length", "3"), ("te", "x")], true, vec![("te".into(), "x")]),
            (vec![(long.as_str(), "v")], false, vec![(long.to_ascii_lowercase(), "v")]),
            (vec![], false, vec![]),
        ];
        for (fields, own_length, want) in rows {
            let mut got = Vec::new();
            let pairs = fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes()));
            each(pairs, *own_length, |n, v| {
                got.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    std::str::from_utf8(v).unwrap().to_string(),
                ))
            });
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(n, v)| (n.clone(), v.to_string()))
                .collect();
            assert_eq!(got, want, "{fields:?}");
        }
    }
}
