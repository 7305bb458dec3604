//! gRPC-Web translated to gRPC at a proxy mount (`grpc_web = true`, as Envoy's `grpc_web`
//! filter): a browser's `application/grpc-web` or `-text` request goes upstream as
//! `application/grpc` (a `-text` body base64-decoded), and the upstream's answer comes back
//! as gRPC-Web: its messages as they came (base64 for `-text`, each piece padded on its own,
//! as PROTOCOL-WEB.md allows), its trailers as the 0x80 trailer frame at the body's end.
//!
//! Pure: heads, fields and body pieces in, bytes out; the codec is `linerate_grpc::web`'s.
//! It must not decide where bytes go (`app/phase/content/proxy.rs` and
//! `driver/upstream_h2.rs` do) nor touch CORS (the mount's headers options do).
#![forbid(unsafe_code)]

use linerate_grpc::web::{self as wire, Protocol, TextDecoder};

/// The gRPC-Web form a request speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Web {
    /// `application/grpc-web`: gRPC's framing, the status in a trailer frame.
    Binary,
    /// `application/grpc-web-text`: the same, base64 both ways.
    Text,
}

impl Web {
    fn protocol(self) -> Protocol {
        match self {
            Web::Binary => Protocol::Web,
            Web::Text => Protocol::WebText,
        }
    }
}

/// The fields of a status that go in the trailer frame of a trailers-only answer
/// (PROTOCOL-HTTP2.md's Status and its details).
const STATUS_FIELDS: [&[u8]; 3] = [b"grpc-status", b"grpc-message", b"grpc-status-details-bin"];

/// The gRPC-Web form a request's `content-type` names (`None`: gRPC, or not gRPC at all:
/// it goes up as it came).
pub(crate) fn web_of(content_type: Option<&[u8]>) -> Option<Web> {
    match content_type.and_then(Protocol::from_content_type)? {
        Protocol::Grpc => None,
        Protocol::Web => Some(Web::Binary),
        Protocol::WebText => Some(Web::Text),
    }
}

/// The request's whole body as gRPC: a `-text` body decoded (padded segments one after
/// another, an unpadded last quantum). `None`: not base64 (the client's 400, as Envoy
/// answers before the call starts).
pub(crate) fn request_body(web: Web, body: Vec<u8>) -> Option<Vec<u8>> {
    if web == Web::Binary {
        return Some(body);
    }
    let mut decoder = TextDecoder::new();
    let mut out = Vec::with_capacity(body.len() / 4 * 3);
    decoder.feed(&body, &mut out).ok()?;
    decoder.finish(&mut out).ok()?;
    Some(out)
}

/// The upstream request's head (HTTP/1.1 text, as `proxy::forward` framed it) with its
/// `Content-Type` made gRPC's; every other line is kept as it is.
pub(crate) fn request_head(head: &mut Vec<u8>) {
    let mut out = Vec::with_capacity(head.len());
    for line in head.split_inclusive(|&b| b == b'\n') {
        let name = line.split(|&b| b == b':').next().unwrap_or(b"");
        if line.contains(&b':') && name.eq_ignore_ascii_case(b"content-type") {
            out.extend_from_slice(b"Content-Type: application/grpc\r\n");
        } else {
            out.extend_from_slice(line);
        }
    }
    *head = out;
}

/// The answer's head fields for the client: the upstream's `content-type` (gRPC's) made
/// the request's gRPC-Web one. A `content-length` is the caller's to drop (the body
/// changes).
pub(crate) fn answer_fields(web: Web, fields: &mut [(Vec<u8>, Vec<u8>)]) {
    for (name, value) in fields.iter_mut() {
        if name.eq_ignore_ascii_case(b"content-type")
            && Protocol::from_content_type(value) == Some(Protocol::Grpc)
        {
            *value = web.protocol().content_type().as_bytes().to_vec();
        }
    }
}

/// A piece of the answer's body as the client gets it: the same bytes, or base64.
pub(crate) fn answer_data(web: Web, data: &[u8]) -> Option<Vec<u8>> {
    (web == Web::Text).then(|| {
        let mut out = Vec::with_capacity(data.len().div_ceil(3) * 4);
        wire::encode_text(data, &mut out);
        out
    })
}

/// The trailer frame (flag 0x80) holding the upstream's trailers `fields`, as the client
/// gets it (base64 for `-text`).
pub(crate) fn trailer_frame<'f>(
    web: Web,
    fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
) -> Vec<u8> {
    let mut frame = Vec::new();
    wire::encode_trailer_fields(fields, &mut frame);
    match answer_data(web, &frame) {
        Some(text) => text,
        None => frame,
    }
}

/// A trailers-only answer (the upstream's head ended the call): its status fields leave the
/// head for the trailer frame, which is the whole body (as linerate's own gRPC-Web answers:
/// a browser reads the body without `Access-Control-Expose-Headers`).
pub(crate) fn trailers_only(web: Web, fields: &mut Vec<(Vec<u8>, Vec<u8>)>) -> Vec<u8> {
    answer_fields(web, fields);
    let (status, rest): (Vec<_>, Vec<_>) = std::mem::take(fields)
        .into_iter()
        .partition(|(n, _)| STATUS_FIELDS.iter().any(|s| n.eq_ignore_ascii_case(s)));
    *fields = rest;
    trailer_frame(web, status.iter().map(|(n, v)| (&n[..], &v[..])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_name_the_web_forms_and_leave_grpc_alone() {
        // PROTOCOL-WEB.md: application/grpc-web[+proto], application/grpc-web-text[+proto].
        for (ct, want) in [
            (&b"application/grpc-web"[..], Some(Web::Binary)),
            (b"application/grpc-web+proto", Some(Web::Binary)),
            (b"application/grpc-web-text", Some(Web::Text)),
            (
                b"Application/gRPC-Web-Text+proto; charset=x",
                Some(Web::Text),
            ),
            (b"application/grpc", None),
            (b"application/grpc-web+json", None),
            (b"text/plain", None),
        ] {
            assert_eq!(web_of(Some(ct)), want, "{}", String::from_utf8_lossy(ct));
        }
        assert_eq!(web_of(None), None);
    }

    #[test]
    fn a_text_body_is_decoded_across_padded_segments() {
        // Two flushes, each padded on its own (PROTOCOL-WEB.md: "base64-encoded chunks with
        // potential padding").
        let body = b"AAAAAAI=CAM=".to_vec();
        assert_eq!(
            request_body(Web::Text, body),
            Some(vec![0, 0, 0, 0, 2, 8, 3])
        );
        assert_eq!(request_body(Web::Text, b"not base64!".to_vec()), None);
        assert_eq!(
            request_body(Web::Binary, b"as is".to_vec()),
            Some(b"as is".to_vec())
        );
    }

    #[test]
    fn the_upstream_request_says_application_grpc() {
        let mut head = b"POST /pkg.Svc/M HTTP/1.1\r\nHost: a\r\ncontent-type: application/grpc-web-text\r\nX-Grpc-Web: 1\r\nContent-Length: 7\r\n\r\n".to_vec();
        request_head(&mut head);
        assert_eq!(
            head,
            b"POST /pkg.Svc/M HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\nX-Grpc-Web: 1\r\nContent-Length: 7\r\n\r\n"
        );
    }

    #[test]
    fn trailers_become_the_0x80_frame_in_the_body() {
        let fields: [(&[u8], &[u8]); 2] = [(b"grpc-status", b"0"), (b"Grpc-Message", b"ok")];
        let frame = trailer_frame(Web::Binary, fields);
        let block = b"grpc-status:0\r\ngrpc-message:ok\r\n";
        assert_eq!(frame[0], 0x80, "the trailer flag");
        assert_eq!(&frame[1..5], &(block.len() as u32).to_be_bytes());
        assert_eq!(&frame[5..], block);
        // -text: the same frame, base64.
        let text = trailer_frame(Web::Text, fields);
        assert_eq!(request_body(Web::Text, text), Some(frame));
    }

    #[test]
    fn a_trailers_only_answer_moves_its_status_into_the_body() {
        let mut fields = vec![
            (b"content-type".to_vec(), b"application/grpc".to_vec()),
            (b"grpc-status".to_vec(), b"12".to_vec()),
            (b"grpc-message".to_vec(), b"no%20such".to_vec()),
            (b"x-meta".to_vec(), b"kept".to_vec()),
        ];
        let body = trailers_only(Web::Binary, &mut fields);
        assert_eq!(
            fields,
            [
                (
                    b"content-type".to_vec(),
                    b"application/grpc-web+proto".to_vec()
                ),
                (b"x-meta".to_vec(), b"kept".to_vec()),
            ]
        );
        assert_eq!(body[0], 0x80);
        assert_eq!(&body[5..], b"grpc-status:12\r\ngrpc-message:no%20such\r\n");
    }

    #[test]
    fn answer_pieces_are_base64_only_for_text() {
        assert_eq!(answer_data(Web::Binary, b"\0\0\0\0\x02\x08\x03"), None);
        assert_eq!(
            answer_data(Web::Text, b"\0\0\0\0\x02\x08\x03").as_deref(),
            Some(&b"AAAAAAIIAw=="[..])
        );
    }
}
