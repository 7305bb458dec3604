//! Response framer tests: every response split at every byte, table of framing rules.

use super::*;

/// Feeds `input` in pieces cut at `cuts`, returns the responses framed and bytes consumed.
fn frame(input: &[u8], cuts: &[usize], no_body: bool) -> Result<Vec<Response>, Malformed> {
    let mut p = ResponseParser::new();
    let mut out = Vec::new();
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(input.len());
    for end in bounds {
        let mut piece = &input[start..end];
        while !piece.is_empty() {
            let (n, done) = p.feed(piece, no_body)?;
            assert!(n <= piece.len(), "consumed more than given");
            assert!(n > 0 || done.is_some(), "no progress");
            piece = &piece[n..];
            out.extend(done);
        }
        start = end;
    }
    assert!(
        p.is_idle() || matches!(p.state, State::UntilClose),
        "leftover state {:?}",
        p.state
    );
    Ok(out)
}

const CL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
const CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";

#[test]
fn content_length_split_at_every_byte() {
    let two = [CL, CL].concat();
    for cut in 0..=two.len() {
        let got = frame(&two, &[cut], false).unwrap();
        assert_eq!(got.len(), 2, "cut at {cut}");
        assert!(got.iter().all(|r| r.status == 200 && !r.close));
    }
}

#[test]
fn chunked_split_at_every_byte() {
    let two = [CHUNKED, CL, CHUNKED].concat();
    for cut in 0..=two.len() {
        let got = frame(&two, &[cut], false).unwrap();
        assert_eq!(got.len(), 3, "cut at {cut}");
    }
}

#[test]
fn one_byte_at_a_time() {
    let all = [CHUNKED, CL, CHUNKED, CL].concat();
    let cuts: Vec<usize> = (1..all.len()).collect();
    assert_eq!(frame(&all, &cuts, false).unwrap().len(), 4);
}

#[test]
fn framing_rules() {
    // (response, no_body, expected responses, close of the first)
    let rows: &[(&[u8], bool, usize, bool)] = &[
        // RFC 9112 §6.3: 204 and 304 carry no body.
        (b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false, 2, false),
        // RFC 9112 §6.3: a response to HEAD carries no body, whatever Content-Length says.
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, 1, false),
        // RFC 9110 §15.2: 1xx is interim and not counted.
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 1, false),
        // RFC 9110 §7.6.1: Connection: close, any case, among other tokens.
        (b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\nConnection: foo, CLOSE\r\n\r\n", false, 1, true),
        // RFC 9112 §9.3: HTTP/1.0 closes unless keep-alive.
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, 1, true),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n", false, 1, false),
        // RFC 9112 §4: the reason phrase may be empty.
        (b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", false, 1, false),
        (b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 1, false),
    ];
    for (i, (input, no_body, n, close)) in rows.iter().enumerate() {
        let got = frame(input, &[], *no_body).unwrap_or_else(|e| panic!("row {i}: {e}"));
        assert_eq!(got.len(), *n, "row {i}");
        assert_eq!(got[0].close, *close, "row {i}");
    }
}

#[test]
fn body_until_close() {
    let mut p = ResponseParser::new();
    let input = b"HTTP/1.1 200 OK\r\n\r\nsome body";
    let (n, done) = p.feed(input, false).unwrap();
    assert!(done.is_none());
    let (m, done) = p.feed(&input[n..], false).unwrap();
    assert_eq!(n + m, input.len());
    assert!(done.is_none());
    assert_eq!(
        p.eof(),
        Ok(Some(Response {
            status: 200,
            close: true
        }))
    );
}

#[test]
fn eof_mid_response_is_cut_off() {
    for cut in 1..CL.len() {
        let mut p = ResponseParser::new();
        let mut piece = &CL[..cut];
        while !piece.is_empty() {
            let (n, done) = p.feed(piece, false).unwrap();
            assert!(done.is_none());
            piece = &piece[n..];
        }
        assert_eq!(p.eof(), Err(CutOff), "cut at {cut}");
    }
    assert_eq!(ResponseParser::new().eof(), Ok(None));
}

#[test]
fn malformed_rejected() {
    let rows: &[(&[u8], Malformed)] = &[
        (b"HTTP/2.0 200 OK\r\n\r\n", Malformed::StatusLine),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", Malformed::StatusLine),
        (b"ICY 200 OK\r\n\r\n", Malformed::StatusLine),
        (b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", Malformed::Header),
        (b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", Malformed::Header),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            Malformed::ContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            Malformed::Chunk,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n",
            Malformed::Chunk,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n",
            Malformed::Chunk,
        ),
    ];
    for (i, (input, want)) in rows.iter().enumerate() {
        assert_eq!(frame(input, &[], false), Err(*want), "row {i}");
    }
}

#[test]
fn head_too_large() {
    let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
    while big.len() <= MAX_HEAD_BYTES {
        big.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let cuts: Vec<usize> = (1..big.len()).step_by(1000).collect();
    assert_eq!(frame(&big, &cuts, false), Err(Malformed::HeadTooLarge));
}

#[test]
fn repeated_head_cache_frames_like_a_parse() {
    // Same head bytes twice (cache hit), then a head that differs only in its length (miss).
    let a = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let b = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok!";
    let c = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    let all = [&a[..], a, b, a, c].concat();
    let got = frame(&all, &[], false).unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got.iter().filter(|r| r.close).count(), 1);
    assert!(got[4].close);
    // A prefix of the cached head is not a hit.
    let mut p = ResponseParser::new();
    assert_eq!(p.feed(a, false).unwrap().0, a.len() - 2);
    p.feed(b"ok", false).unwrap();
    let (n, done) = p.feed(&a[..10], false).unwrap();
    assert_eq!((n, done), (10, None));
}
