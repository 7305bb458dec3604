//! Tables for gRPC-Web (PROTOCOL-WEB.md): content types, the `-text` body read at every split
//! point, and the answer's trailer frame and base64.

use super::*;

#[test]
fn content_types() {
    // PROTOCOL-WEB.md "Content-Type": application/grpc-web(+proto), application/grpc-web-text
    // (+proto); PROTOCOL-HTTP2.md: "application/grpc" [("+proto" / "+json" / {custom})].
    let table: &[(&[u8], Option<Protocol>)] = &[
        (b"application/grpc", Some(Protocol::Grpc)),
        (b"application/grpc+proto", Some(Protocol::Grpc)),
        (b"Application/GRPC; charset=utf-8", Some(Protocol::Grpc)),
        (b"application/grpc-web", Some(Protocol::Web)),
        (b"application/grpc-web+proto", Some(Protocol::Web)),
        (b"application/grpc-web-text", Some(Protocol::WebText)),
        (b"application/grpc-web-text+proto", Some(Protocol::WebText)),
        (b" application/grpc-web-text ; x=1", Some(Protocol::WebText)),
        (b"application/grpc+json", None),
        (b"application/grpc-web+json", None),
        (b"application/grpcx", None),
        (b"application/json", None),
        (b"", None),
    ];
    for &(value, want) in table {
        assert_eq!(
            Protocol::from_content_type(value),
            want,
            "{:?}",
            String::from_utf8_lossy(value)
        );
    }
    assert_eq!(
        Protocol::WebText.content_type(),
        "application/grpc-web-text+proto"
    );
    assert_eq!(Protocol::Web.content_type(), "application/grpc-web+proto");
    assert_eq!(Protocol::Grpc.content_type(), "application/grpc");
    assert!(Protocol::Web.is_web() && !Protocol::Grpc.is_web());
}

/// What a `TextDecoder` makes of `pieces`.
fn text(pieces: &[&[u8]]) -> Result<Vec<u8>, WebError> {
    let mut d = TextDecoder::new();
    let mut out = Vec::new();
    for p in pieces {
        d.feed(p, &mut out)?;
    }
    d.finish(&mut out)?;
    Ok(out)
}

#[test]
fn text_bodies_in_any_split() {
    // PROTOCOL-WEB.md "Text-encoded (response) streams": base64, padded wherever the sender
    // flushed, so segments follow each other; a request body is read the same way.
    type Row = (&'static [u8], Result<&'static [u8], WebError>);
    let table: &[Row] = &[
        (b"", Ok(b"")),
        (b"AAAAAAQIARAC", Ok(&[0, 0, 0, 0, 4, 8, 1, 16, 2])),
        // The same frame flushed as two padded segments: prefix, then message.
        (b"AAAAAAQ=CAEQAg==", Ok(&[0, 0, 0, 0, 4, 8, 1, 16, 2])),
        (b"AA==AA==AA==", Ok(&[0, 0, 0])),
        (b"aGk=aGk=", Ok(b"hihi")),
        (b"aGk=aGVsbG8=", Ok(b"hihello")),
        // A last quantum without its padding is read.
        (b"aGk", Ok(b"hi")),
        (b"aGk=aGVsbG8", Ok(b"hihello")),
        (b"a", Err(WebError::BadBase64)),
        (b"aGk=a", Err(WebError::BadBase64)),
        (b"aG=k", Err(WebError::BadBase64)),
        (b"====", Err(WebError::BadBase64)),
        (b"aGk===", Err(WebError::BadBase64)),
        (b"aGk\n", Err(WebError::BadBase64)),
        (b"aG-_", Err(WebError::BadBase64)),
        (b"aGk=*AAA", Err(WebError::BadBase64)),
    ];
    for &(body, want) in table {
        let want = want.map(<[u8]>::to_vec);
        assert_eq!(text(&[body]), want, "{:?}", String::from_utf8_lossy(body));
        for i in 0..=body.len() {
            let (a, b) = body.split_at(i);
            assert_eq!(text(&[a, b]), want, "{body:?} split at {i}");
            for j in i..=body.len() {
                let (b, c) = body[i..].split_at(j - i);
                assert_eq!(text(&[a, b, c]), want, "{body:?} split at {i} and {j}");
            }
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(text(&bytes), want, "{body:?} byte by byte");
    }
    assert_eq!(WebError::BadBase64.code(), Code::Internal);
}

#[test]
fn trailer_frames() {
    // PROTOCOL-WEB.md "Message framing": the MSB of the first byte marks trailers; the
    // payload is an HTTP/1 header block without the last newline; names lowercase.
    let mut out = vec![0xAA];
    encode_trailers(&Status::ok(), &[], &mut out);
    let body = b"grpc-status:0\r\n";
    let mut want = vec![0xAA, 0x80, 0, 0, 0, body.len() as u8];
    want.extend_from_slice(body);
    assert_eq!(out, want);

    let status = Status::new(Code::NotFound, "no such 100%");
    let mut out = Vec::new();
    encode_trailers(
        &status,
        &[("X-Trailer", b"v"), ("x-t-bin", b"AAE")],
        &mut out,
    );
    let body = b"grpc-status:5\r\ngrpc-message:no such 100%25\r\nx-trailer:v\r\nx-t-bin:AAE\r\n";
    assert_eq!(out[0], TRAILER_FLAG);
    assert_eq!(
        u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize,
        body.len()
    );
    assert_eq!(&out[5..], body);
}

#[test]
fn text_answers() {
    // Each flush is its own padded base64; the concatenation reads back whole.
    let table: &[(&[u8], &str)] = &[
        (b"", ""),
        (b"h", "aA=="),
        (b"hi", "aGk="),
        (b"hi!", "aGkh"),
        (&[0, 0, 0, 0, 2, 8, 3], "AAAAAAIIAw=="),
    ];
    let mut all = Vec::new();
    let mut plain = Vec::new();
    for &(bytes, b64) in table {
        let mut out = vec![b'>'];
        encode_text(bytes, &mut out);
        assert_eq!(&out[1..], b64.as_bytes());
        all.extend_from_slice(&out[1..]);
        plain.extend_from_slice(bytes);
    }
    assert_eq!(text(&[&all]), Ok(plain));
}

#[test]
fn answers_read_back() {
    // A whole gRPC-Web answer: two messages, then the trailer frame; read at every split by
    // the answer's decoder, whose trailer block gives the status back.
    let mut body = Vec::new();
    frame::encode_raw(b"one", false, &mut body);
    frame::encode_raw(b"", false, &mut body);
    let status = Status::new(Code::Unavailable, "try later: 50%");
    encode_trailers(&status, &[("x-retry", b"3")], &mut body);
    for i in 0..=body.len() {
        let mut d = frame::Decoder::web_answer(1024, false);
        let mut got = Vec::new();
        for piece in [&body[..i], &body[i..]] {
            let mut input = piece;
            while let Some(m) = d.next(&mut input).unwrap() {
                got.push((m.trailers, m.data.to_vec()));
            }
        }
        assert_eq!(d.finish(), Ok(()));
        assert_eq!(got.len(), 3, "split at {i}");
        assert_eq!(got[0], (false, b"one".to_vec()));
        assert_eq!(got[1], (false, Vec::new()));
        assert!(got[2].0);
        let fields: Vec<_> = trailer_fields(&got[2].1).collect();
        let get = |n: &[u8]| fields.iter().find(|f| f.0 == n).map(|f| f.1);
        let back = Status::from_fields(get(b"grpc-status"), get(b"grpc-message"), None);
        assert_eq!(back, status);
        assert_eq!(get(b"x-retry"), Some(&b"3"[..]));
    }
    // A request decoder refuses the trailer flag (PROTOCOL-HTTP2.md: Compressed-Flag → 0 / 1).
    let mut d = frame::Decoder::new(1024, false);
    let mut trailer_frame = &body[13..];
    assert_eq!(
        d.next(&mut trailer_frame),
        Err(frame::FrameError::BadFlag(0x80))
    );
}

#[test]
fn trailer_blocks() {
    // PROTOCOL-WEB.md: "key1: foo\r\nkey2: bar\r\n".
    type Fields = Vec<(&'static [u8], &'static [u8])>;
    let table: &[(&[u8], Fields)] = &[
        (
            b"key1: foo\r\nkey2: bar\r\n",
            vec![(b"key1", b"foo"), (b"key2", b"bar")],
        ),
        (b"grpc-status:0\r\n", vec![(b"grpc-status", b"0")]),
        (
            b"Grpc-Status: 5 \nx:a:b",
            vec![(b"Grpc-Status", b"5"), (b"x", b"a:b")],
        ),
        (b"\r\nno colon\r\nk:\r\n", vec![(b"k", b"")]),
        (b"", vec![]),
    ];
    for (block, want) in table {
        let got: Vec<_> = trailer_fields(block).collect();
        assert_eq!(&got, want, "{:?}", String::from_utf8_lossy(block));
    }
    let mut out = Vec::new();
    encode_trailer_fields([(&b"Grpc-Status"[..], &b"0"[..]), (b"x-a", b"b")], &mut out);
    assert_eq!(out, b"\x80\x00\x00\x00\x16grpc-status:0\r\nx-a:b\r\n");
}
