//! The response reader as tables: one row per RFC rule, every input at every split point and
//! one byte at a time, the counter's fast path against a plain parse.

use super::*;

const CL: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";

/// Feeds `input` to a counter in pieces cut at `cuts`; returns what was counted.
fn count(input: &[u8], cuts: &[usize], head: bool) -> Result<Vec<Counted>, ResponseError> {
    let mut c = ResponseCounter::new();
    let mut out = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain([input.len()]) {
        let mut piece = &input[start..end];
        while !piece.is_empty() {
            let (n, done) = c.feed(piece, head)?;
            assert!(n <= piece.len(), "consumed more than given");
            assert!(n > 0 || done.is_some(), "no progress");
            piece = &piece[n..];
            out.extend(done);
        }
        start = end;
    }
    out.extend(c.eof()?);
    Ok(out)
}

type Outcome = Result<(u16, bool, BodyLength), ResponseError>;

/// (rule, response head, what it parses to: status, close, body length).
#[rustfmt::skip]
const HEADS: &[(&str, &[u8], Outcome)] = &[
    ("a plain 200 (RFC 9112 §4)", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", Ok((200, false, BodyLength::Length(5)))),
    ("empty reason phrase", b"HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n", Ok((200, false, BodyLength::Empty))),
    ("no space before a missing reason (tolerated)", b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", Ok((200, false, BodyLength::Empty))),
    ("bare LF line ends (§2.2: a recipient MAY)", b"HTTP/1.1 200 OK\nContent-Length: 2\n\n", Ok((200, false, BodyLength::Length(2)))),
    ("204 has no body whatever it says (§6.3 rule 1)", b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", Ok((204, false, BodyLength::Empty))),
    ("304 has no body (§6.3 rule 1)", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", Ok((304, false, BodyLength::Empty))),
    ("1xx has no body (§6.3 rule 1)", b"HTTP/1.1 100 Continue\r\n\r\n", Ok((100, false, BodyLength::Empty))),
    ("chunked final: chunked (§6.3 rule 4)", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Ok((200, false, BodyLength::Chunked))),
    ("chunked not final: to the close (§6.3 rule 4)", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Ok((200, false, BodyLength::UntilClose))),
    ("codings over two lines: the last one's decides", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", Ok((200, false, BodyLength::Chunked))),
    ("no length: to the close (§6.3 rule 8)", b"HTTP/1.1 200 OK\r\n\r\n", Ok((200, false, BodyLength::UntilClose))),
    ("identical lengths are one (§6.3 rule 5)", b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n", Ok((200, false, BodyLength::Length(3)))),
    ("Connection: close in any case, among tokens (RFC 9110 §7.6.1)", b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\nConnection: foo, CLOSE\r\n\r\n", Ok((500, true, BodyLength::Empty))),
    ("HTTP/1.0 closes by default (§9.3)", b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", Ok((200, true, BodyLength::Empty))),
    ("HTTP/1.0 keep-alive stays open", b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n", Ok((200, false, BodyLength::Empty))),
    ("obs-fold is accepted by a user agent (§5.2)", b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 1\r\n\r\n", Ok((200, false, BodyLength::Length(1)))),
    ("HTTP/2.0 is not an HTTP/1.1 status line", b"HTTP/2.0 200 OK\r\n\r\n", Err(ResponseError::StatusLine)),
    ("status not 3 digits", b"HTTP/1.1 2x0 OK\r\n\r\n", Err(ResponseError::StatusLine)),
    ("status under 100", b"HTTP/1.1 099 Low\r\n\r\n", Err(ResponseError::StatusLine)),
    ("not HTTP", b"ICY 200 OK\r\n\r\n", Err(ResponseError::StatusLine)),
    ("a control in the reason phrase", b"HTTP/1.1 200 O\x01K\r\n\r\n", Err(ResponseError::StatusLine)),
    ("a field line without a colon", b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", Err(ResponseError::FieldLine)),
    ("whitespace in a field name (§5.1)", b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", Err(ResponseError::FieldLine)),
    ("whitespace before the colon (§5.1)", b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", Err(ResponseError::FieldLine)),
    ("NUL in a value (RFC 9110 §5.5)", b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", Err(ResponseError::FieldLine)),
    ("a continuation line before any field", b"HTTP/1.1 200 OK\r\n folded\r\n\r\n", Err(ResponseError::FieldLine)),
    ("negative length (§6.3 rule 5)", b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", Err(ResponseError::ContentLength)),
    ("differing lengths (§6.3 rule 5)", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", Err(ResponseError::ContentLength)),
    ("a length that overflows", b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", Err(ResponseError::ContentLength)),
    ("empty length", b"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n", Err(ResponseError::ContentLength)),
    ("length and chunked: response splitting (§6.3 rule 3)", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", Err(ResponseError::LengthAndEncoding)),
];

#[test]
fn head_rules() {
    for (rule, bytes, want) in HEADS {
        let got = parse_response(bytes, None).map(|r| {
            let r = r.unwrap_or_else(|| panic!("{rule}: incomplete"));
            assert_eq!(r.head_len, bytes.len(), "{rule}");
            (r.status, r.close, r.length)
        });
        assert_eq!(&got, want, "{rule}");
        // Every proper prefix is incomplete, or already the same error.
        for cut in 0..bytes.len() {
            match (parse_response(&bytes[..cut], None), want) {
                (Ok(None), _) => {}
                (Err(e), Err(w)) if e == *w => {}
                (other, _) => panic!("{rule}: prefix of {cut} bytes gave {other:?}"),
            }
        }
    }
}

#[test]
fn fields_are_spans_with_obs_fold_as_continuations() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Type:  text/html \r\nX-Long: a\r\n\t b c\r\n\r\n";
    let mut fields = Vec::new();
    let r = parse_response(buf, Some(&mut fields)).unwrap().unwrap();
    assert_eq!(r.head_len, buf.len());
    let text = |r: &Range<usize>| std::str::from_utf8(&buf[r.clone()]).unwrap();
    let got: Vec<(&str, &str)> = fields
        .iter()
        .map(|f| (text(&f.name), text(&f.value)))
        .collect();
    assert_eq!(
        got,
        [("Content-Type", "text/html"), ("X-Long", "a"), ("", "b c")]
    );
}

#[test]
fn head_too_large() {
    let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
    while big.len() <= MAX_RESPONSE_HEAD_BYTES {
        big.extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    assert_eq!(parse_response(&big, None), Err(ResponseError::HeadTooLarge));
    let cuts: Vec<usize> = (1..big.len()).step_by(1000).collect();
    assert_eq!(count(&big, &cuts, false), Err(ResponseError::HeadTooLarge));
    // Byte by byte too (the carried head is parsed only once its end may have arrived).
    let cuts: Vec<usize> = (1..big.len()).collect();
    assert_eq!(count(&big, &cuts, false), Err(ResponseError::HeadTooLarge));
}

#[test]
fn counts_at_every_split_point_and_byte_by_byte() {
    let all = [CHUNKED, CL, CHUNKED, CL].concat();
    for cut in 0..=all.len() {
        let got = count(&all, &[cut], false).unwrap();
        assert_eq!(got.len(), 4, "cut at {cut}");
        assert!(
            got.iter().all(|r| r.status == 200 && !r.close),
            "cut at {cut}"
        );
    }
    let cuts: Vec<usize> = (1..all.len()).collect();
    assert_eq!(count(&all, &cuts, false).unwrap().len(), 4);
}

#[test]
fn counting_rules() {
    // (rule, responses, HEAD request, responses counted, close of the first)
    #[rustfmt::skip]
    let rows: &[(&str, &[u8], bool, usize, bool)] = &[
        ("204 then 304, no bodies (§6.3 rule 1)", b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false, 2, false),
        ("HEAD: no body whatever the length (§6.3 rule 1)", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true, 1, false),
        ("HEAD without a length does not close", b"HTTP/1.1 200 OK\r\n\r\n", true, 1, false),
        ("1xx is interim and not counted (RFC 9110 §15.2)", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 1, false),
        ("a body to the close closes", b"HTTP/1.1 200 OK\r\n\r\nsome body", false, 1, true),
        ("Connection: close", b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\nConnection: foo, CLOSE\r\n\r\n", false, 1, true),
    ];
    for (rule, input, head, n, close) in rows {
        for cut in 0..=input.len() {
            let got = count(input, &[cut], *head).unwrap_or_else(|e| panic!("{rule}: {e}"));
            assert_eq!(got.len(), *n, "{rule}, cut at {cut}");
            assert_eq!(got[0].close, *close, "{rule}");
        }
    }
}

#[test]
fn broken_chunks_and_cut_offs() {
    #[rustfmt::skip]
    let rows: &[(&str, &[u8], ResponseError)] = &[
        ("a size that is not hex (RFC 9112 §7.1)", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ResponseError::Chunked(ParseError::InvalidChunkSize)),
        ("data longer than its size", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", ResponseError::Chunked(ParseError::InvalidChunkData)),
        ("a size that overflows", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n", ResponseError::Chunked(ParseError::ChunkSizeOverflow)),
        ("a length body cut off", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel", ResponseError::CutOff),
        ("a chunked body cut off", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", ResponseError::CutOff),
        ("a head cut off", b"HTTP/1.1 200 OK\r\nContent-Le", ResponseError::CutOff),
    ];
    for (rule, input, want) in rows {
        assert_eq!(count(input, &[], false), Err(*want), "{rule}");
    }
    assert_eq!(ResponseCounter::new().eof(), Ok(None));
    // The connection closing anywhere inside a response is a cut-off.
    for cut in 1..CL.len() {
        assert_eq!(
            count(&CL[..cut], &[], false),
            Err(ResponseError::CutOff),
            "cut at {cut}"
        );
    }
}

#[test]
fn the_repeated_head_fast_path_frames_like_a_parse() {
    // The same head twice (a hit), a head that differs only in its length (a miss), close.
    let a = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let b = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok!";
    let c = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    let all = [&a[..], a, b, a, c].concat();
    let got = count(&all, &[], false).unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got.iter().filter(|r| r.close).count(), 1);
    assert!(got[4].close);
    // A prefix of the remembered head is not a hit.
    let mut r = ResponseCounter::new();
    assert_eq!(r.feed(a, false).unwrap().0, a.len() - 2);
    r.feed(b"ok", false).unwrap();
    assert_eq!(r.feed(&a[..10], false).unwrap(), (10, None));
}

#[test]
fn a_body_decodes_to_the_same_bytes_at_every_split() {
    let head = parse_response(CHUNKED, None).unwrap().unwrap();
    let body = &CHUNKED[head.head_len..];
    for cut in 0..=body.len() {
        let mut dec = ResponseBody::new(head.length);
        let mut content = Vec::new();
        let mut used = 0;
        for piece in [&body[..cut], &body[cut..]] {
            let mut p = piece;
            while !p.is_empty() && !dec.is_done() {
                let step = dec.decode(p, &Limits::default()).unwrap();
                content.extend_from_slice(step.data);
                used += step.consumed;
                p = &p[step.consumed..];
            }
        }
        assert!(dec.is_done(), "cut at {cut}");
        assert_eq!(used, body.len(), "cut at {cut}");
        assert_eq!(content, b"helloabcdefghijklmnopqrstuvwxyz", "cut at {cut}");
    }
    // A body to the close ends at EOF; one with a length does not.
    let mut until_close = ResponseBody::new(BodyLength::UntilClose);
    assert_eq!(
        until_close.decode(b"abc", &Limits::default()).unwrap().data,
        b"abc"
    );
    assert_eq!(until_close.eof(), Ok(()));
    assert_eq!(
        ResponseBody::new(BodyLength::Length(3)).eof(),
        Err(ResponseError::CutOff)
    );
}

/// (rule, head, outcome read strictly): what a proxy refuses that a user agent accepts, and
/// that it accepts the plain cases alike.
#[rustfmt::skip]
const STRICT: &[(&str, &[u8], Outcome)] = &[
    ("a plain 200", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", Ok((200, false, BodyLength::Length(5)))),
    ("chunked alone", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Ok((200, false, BodyLength::Chunked))),
    ("chunked in any case", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", Ok((200, false, BodyLength::Chunked))),
    ("bare LF (§2.2: only a user agent MAY)", b"HTTP/1.1 200 OK\nContent-Length: 2\n\n", Err(ResponseError::BareLf)),
    ("one bare LF among CRLFs", b"HTTP/1.1 200 OK\r\nX: 1\nContent-Length: 2\r\n\r\n", Err(ResponseError::BareLf)),
    ("obs-fold (§5.2: a proxy replaces it or 502s)", b"HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 1\r\n\r\n", Err(ResponseError::ObsFold)),
    ("a coding it cannot decode", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Err(ResponseError::TransferCoding)),
    ("chunked not final", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Err(ResponseError::TransferCoding)),
    ("chunked twice over two lines", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Err(ResponseError::TransferCoding)),
    ("length and chunked (§6.3 rule 3)", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", Err(ResponseError::LengthAndEncoding)),
    ("differing lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", Err(ResponseError::ContentLength)),
];

#[test]
fn strict_head_rules() {
    for (rule, bytes, want) in STRICT {
        let got = parse_response_strict(bytes, None)
            .map(|r| r.map(|r| (r.status, r.close, r.length)).expect("complete"));
        assert_eq!(&got, want, "{rule}");
        for cut in 0..bytes.len() {
            match (parse_response_strict(&bytes[..cut], None), want) {
                (Ok(None), _) => {}
                (Err(e), Err(w)) if e == *w => {}
                (other, _) => panic!("{rule}: prefix of {cut} bytes gave {other:?}"),
            }
        }
    }
}

// The single-pass reader against the two-pass one it replaced (head end first, then a bare-LF
// sweep, then the lines), kept here as the reference: the same verdict, length and spans for
// every row of the tables, every prefix of them, and every one-byte change to them.

#[allow(clippy::needless_pass_by_value)]
fn reference_parse(
    buf: &[u8],
    mut fields: Option<&mut Vec<FieldSpan>>,
    strict: bool,
) -> Result<Option<ResponseInfo>, ResponseError> {
    if let Some(f) = fields.as_deref_mut() {
        f.clear();
    }
    let Some(end) = head_end(buf, 0) else {
        return if buf.len() > MAX_RESPONSE_HEAD_BYTES {
            Err(ResponseError::HeadTooLarge)
        } else {
            Ok(None)
        };
    };
    if end > MAX_RESPONSE_HEAD_BYTES {
        return Err(ResponseError::HeadTooLarge);
    }
    let buf = &buf[..end];
    if strict && memchr::memchr_iter(b'\n', buf).any(|i| i == 0 || buf[i - 1] != b'\r') {
        return Err(ResponseError::BareLf);
    }
    let Some((line, mut at)) = next_line(buf, 0) else {
        return Err(ResponseError::StatusLine);
    };
    let (status, version) = status_line(line)?;
    let mut facts = Facts {
        close: version == Version::Http10,
        http10: version == Version::Http10,
        ..Facts::default()
    };
    loop {
        // Every line up to `end` is complete: the head's end was found first.
        let Some((line, next)) = next_line(buf, at) else {
            return Err(ResponseError::FieldLine);
        };
        let start = at;
        at = next;
        if line.is_empty() {
            break;
        }
        if matches!(line[0], b' ' | b'\t') {
            if strict && facts.any_field {
                return Err(ResponseError::ObsFold);
            }
            // obs-fold (RFC 9112 §5.2): the value goes on; framing fields are never folded
            // by a server that means them, so only the span is kept.
            if !facts.any_field || !chars::is_field_value(line) {
                return Err(ResponseError::FieldLine);
            }
            if let Some(f) = fields.as_deref_mut() {
                let v = chars::trim_ows(line);
                let lead = line.len() - line.trim_ascii_start().len();
                f.push(FieldSpan {
                    name: start..start,
                    value: start + lead..start + lead + v.len(),
                });
            }
            continue;
        }
        let colon = memchr(b':', line).ok_or(ResponseError::FieldLine)?;
        let name = &line[..colon];
        let raw = &line[colon + 1..];
        if !chars::is_token(name) || !chars::is_field_value(raw) {
            return Err(ResponseError::FieldLine);
        }
        let value = chars::trim_ows(raw);
        facts.any_field = true;
        facts.field(name, value)?;
        if strict && name.eq_ignore_ascii_case(b"transfer-encoding") {
            facts.strict_coding(value)?;
        }
        if let Some(f) = fields.as_deref_mut() {
            let lead = raw.len() - raw.trim_ascii_start().len();
            let v0 = start + colon + 1 + lead;
            f.push(FieldSpan {
                name: start..start + colon,
                value: v0..v0 + value.len(),
            });
        }
    }
    let length = facts.length(status)?;
    Ok(Some(ResponseInfo {
        status,
        version,
        close: facts.close,
        length,
        head_len: at,
    }))
}

/// The next line of `buf` from `at` without its CRLF (or bare LF, RFC 9112 §2.2), and the
/// offset after it; `None` until its LF has arrived.
fn next_line(buf: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let lf = memchr(b'\n', &buf[at..])?;
    let raw = &buf[at..at + lf];
    Some((raw.strip_suffix(b"\r").unwrap_or(raw), at + lf + 1))
}

#[test]
fn one_pass_reads_as_the_two_pass_reference_did() {
    let mut inputs: Vec<Vec<u8>> = HEADS.iter().map(|(_, b, _)| b.to_vec()).collect();
    inputs.extend(STRICT.iter().map(|(_, b, _)| b.to_vec()));
    inputs.push(CL.to_vec());
    inputs.push(CHUNKED.to_vec());
    inputs.push(b"\r\nHTTP/1.1 200 OK\r\n\r\n".to_vec());
    inputs.push(b"\nHTTP/1.1 200 OK\r\n\r\n".to_vec());
    inputs.push(b"HTTP/1.1 200 OK\r\nX: 1\n\r\nContent-Length: 1\r\n\r\n".to_vec());
    let mut cases = Vec::new();
    for input in &inputs {
        for cut in 0..=input.len() {
            cases.push(input[..cut].to_vec());
        }
        for at in 0..input.len() {
            for b in [b'\r', b'\n', b' ', b'\t', b':', b'a', 0, 0x7f, b'0'] {
                let mut v = input.clone();
                v[at] = b;
                cases.push(v);
                let mut v = input.clone();
                v.insert(at, b);
                cases.push(v);
            }
        }
    }
    for case in &cases {
        for strict in [false, true] {
            let (mut got_fields, mut want_fields) = (Vec::new(), Vec::new());
            let got = parse(case, Some(&mut got_fields), strict);
            let want = reference_parse(case, Some(&mut want_fields), strict);
            assert_eq!(
                got,
                want,
                "{:?} strict={strict}",
                String::from_utf8_lossy(case)
            );
            if matches!(want, Ok(Some(_))) {
                assert_eq!(
                    got_fields,
                    want_fields,
                    "{:?}",
                    String::from_utf8_lossy(case)
                );
            }
        }
    }
}

/// The one-pass reader (`fast.rs`) against the line by line one, which it must never contradict:
/// heads from the table above and a field-rich one, mutated at random (bytes that matter to
/// the grammar put in, swapped or taken out) and cut at every length, read leniently and
/// strictly; the verdict and every field span must be the same either way.
#[test]
fn the_one_pass_reader_agrees_with_the_line_by_line_one_on_every_mutated_head() {
    const RICH: &[u8] = b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Thu, 26 Nov 2026 15:13:25 GMT\r\nContent-Type: application/json\r\nX-Empty:\r\nX-Ows: \t v \t\r\nConnection: keep-alive, Close\r\nContent-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}";
    const BYTES: &[u8] = b"\r\n \t:\x00\x7f\x80,aZ09-";
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let bases: Vec<&[u8]> = HEADS
        .iter()
        .map(|(_, h, _)| *h)
        .chain([RICH, CL, CHUNKED])
        .collect();
    let (mut fast_answered, mut cases) = (0, 0);
    for round in 0..4_000 {
        let mut head = bases[round % bases.len()].to_vec();
        for _ in 0..rand(3) {
            let at = rand(head.len() + 1);
            match rand(3) {
                0 => head.insert(at, BYTES[rand(BYTES.len())]),
                1 if at < head.len() => head[at] = BYTES[rand(BYTES.len())],
                _ if at < head.len() => {
                    head.remove(at);
                }
                _ => {}
            }
        }
        for len in (0..=head.len()).rev().step_by(1 + rand(4)) {
            for strict in [false, true] {
                let buf = &head[..len];
                let (mut a, mut b) = (Vec::new(), Vec::new());
                let got = parse(buf, Some(&mut a), strict);
                let want = parse_lines(buf, Some(&mut b), strict);
                assert_eq!(
                    got,
                    want,
                    "verdict for {:?} (strict {strict})",
                    String::from_utf8_lossy(buf)
                );
                if want.is_ok_and(|w| w.is_some()) {
                    assert_eq!(a, b, "spans for {:?}", String::from_utf8_lossy(buf));
                }
                let scan = &buf[..buf.len().min(MAX_RESPONSE_HEAD_BYTES)];
                fast_answered += usize::from(fast::parse(scan, None, strict).is_some());
                cases += 1;
            }
        }
    }
    // Both readers were exercised: the fast one answered many, and gave up on many.
    assert!(
        fast_answered > 5_000 && fast_answered < cases,
        "{fast_answered} of {cases}"
    );
}
