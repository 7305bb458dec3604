//! Compression of answers that arrive in pieces: a proxied answer, whose body is relayed as
//! the upstream sends it. Owns the decision on the answer's head ([`plan`]: the same rule as
//! in-memory answers, `compress::worth_compressing`, read from the upstream's fields), the
//! fields that change with it ([`Rewrite`]), and [`StreamEncoder`], fed one piece at a time
//! and flushed after each (gzip's sync flush, brotli's flush), so that what the upstream sent
//! reaches the client now (server-sent events arrive event by event, compressed).
//!
//! Unlike in-memory answers there is no size cap: the worker compresses one piece at a time,
//! as it arrives, and never holds the whole body.
#![forbid(unsafe_code)]

use crate::config::Compression;
use crate::files::encoding::Encoding;

/// What to do with an answer's coding, decided on its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Not eligible: forwarded as it is, fields untouched.
    AsIs,
    /// Eligible, but the client takes no coding we make: forwarded as it is, with
    /// `Vary: Accept-Encoding` (caches must keep the variants apart).
    Vary,
    /// Compressed in this coding (gzip or br), with `Vary`.
    Encode(Encoding),
}

/// The plan for an answer with `status`, `fields` (as the upstream sent them) and a body of
/// `length` (`None`: not known ahead), to a request whose chosen coding is `coding` (`None`:
/// compression off for it).
pub(crate) fn plan(
    coding: Option<Encoding>,
    status: u16,
    fields: &[(&[u8], &[u8])],
    length: Option<u64>,
    cfg: &Compression,
) -> Plan {
    let Some(coding) = coding else {
        return Plan::AsIs;
    };
    // The cheap tests first: a small answer (a proxied `/json`) is declined before its
    // fields are read.
    if !worth_reading(status, length, cfg) {
        return Plan::AsIs;
    }
    // One pass over the fields, names told apart by their length first: three scans with a
    // case-insensitive compare of every name cost ~900 instructions a cache hit (callgrind).
    let mut content_type = None;
    for (n, v) in fields {
        match n.len() {
            12 if n.eq_ignore_ascii_case(b"content-type") => {
                content_type.get_or_insert(*v);
            }
            16 if n.eq_ignore_ascii_case(b"content-encoding") => return Plan::AsIs,
            13 if n.eq_ignore_ascii_case(b"cache-control") && has_token(v, b"no-transform") => {
                return Plan::AsIs;
            }
            _ => {}
        }
    }
    decide(coding, content_type)
}

/// Whether an answer with `status` and a body of `length` may be compressed at all (before
/// its fields are read).
pub(crate) fn worth_reading(status: u16, length: Option<u64>, cfg: &Compression) -> bool {
    cfg.enabled && status == 200 && length.is_none_or(|n| n >= cfg.min_bytes as u64)
}

/// The plan for an answer that passed [`worth_reading`] and may be transformed (no
/// Content-Encoding of its own, no `no-transform`), by its first Content-Type.
pub(crate) fn decide(coding: Encoding, content_type: Option<&[u8]>) -> Plan {
    plan_for(compressible_type(content_type), coding)
}

/// Whether `content_type` (a first Content-Type value) is one this server compresses.
pub(crate) fn compressible_type(content_type: Option<&[u8]>) -> bool {
    // A Content-Type that is not UTF-8 (obs-text) is no type this server compresses; most
    // are ASCII, told by a word-at-a-time test where `from_utf8` and the type's test cost
    // ~300 instructions a proxied answer (callgrind, docs/benchmarks.md).
    content_type
        .filter(|v| v.is_ascii() || std::str::from_utf8(v).is_ok())
        .is_some_and(super::compress::compressible_bytes)
}

/// [`decide`] for an answer whose type's eligibility is known ([`compressible_type`]; a
/// stored answer's is read once per entry).
pub(crate) fn plan_for(eligible: bool, coding: Encoding) -> Plan {
    match (eligible, coding) {
        (false, _) => Plan::AsIs,
        (true, Encoding::Identity) => Plan::Vary,
        (true, c) => Plan::Encode(c),
    }
}

/// Whether `fields` has a `Vary` that names `Accept-Encoding` or `*` (the answer already says
/// it varies on the coding).
pub(crate) fn varies_on_coding(fields: &[(&[u8], &[u8])]) -> bool {
    fields
        .iter()
        .filter(|(n, _)| n.len() == 4 && n.eq_ignore_ascii_case(b"vary"))
        .any(|(_, v)| has_token(v, b"accept-encoding") || has_token(v, b"*"))
}

/// Whether a comma-separated field value lists `token` (case-insensitive).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The answer's fields as `plan` changes them: what to leave out, and what to add.
pub(crate) struct Rewrite {
    /// The coding's `Content-Encoding` value, when compressing.
    pub encoding: Option<&'static str>,
    /// Add `Vary: Accept-Encoding` (the upstream's `Vary` names neither it nor `*`).
    pub vary: bool,
    /// The upstream's strong ETag made weak (RFC 9110 §8.8.1: the bytes differ), as nginx's
    /// gzip filter does.
    pub etag: Option<Vec<u8>>,
}

impl Rewrite {
    /// How `plan` changes `fields`.
    pub(crate) fn new(plan: Plan, fields: &[(&[u8], &[u8])]) -> Rewrite {
        let varies = varies_on_coding(fields);
        let encoding = match plan {
            Plan::Encode(c) => c.content_encoding(),
            _ => None,
        };
        let etag = encoding.and_then(|_| {
            fields
                .iter()
                .find(|(n, v)| n.eq_ignore_ascii_case(b"etag") && v.starts_with(b"\""))
                .map(|(_, v)| [&b"W/"[..], v].concat())
        });
        Rewrite {
            encoding,
            vary: plan != Plan::AsIs && !varies,
            etag,
        }
    }

    /// Whether the upstream's field `name` stays: a compressed body has another length, no
    /// byte ranges of its own, and the weak ETag instead.
    pub(crate) fn keeps(&self, name: &[u8]) -> bool {
        self.encoding.is_none()
            || !(name.eq_ignore_ascii_case(b"content-length")
                || name.eq_ignore_ascii_case(b"accept-ranges")
                || (self.etag.is_some() && name.eq_ignore_ascii_case(b"etag")))
    }
}

/// A gzip or brotli encoder fed one piece at a time, each piece flushed through. Boxed: a
/// link to an upstream carries an `Option` of it, empty for most answers.
pub(crate) enum StreamEncoder {
    Gzip(Box<super::gz::Stream>),
    Brotli(Box<super::br::Stream>),
}

impl StreamEncoder {
    /// An encoder for `coding` at the site's level, for a body of `length` when known
    /// (brotli's window fits it, at most [`STREAM_MAX_LGWIN`]). `None` for identity.
    pub(crate) fn new(
        coding: Encoding,
        length: Option<u64>,
        cfg: &Compression,
    ) -> Option<StreamEncoder> {
        match coding {
            Encoding::Identity => None,
            Encoding::Gzip => {
                super::gz::Stream::new(cfg.gzip_level).map(|s| StreamEncoder::Gzip(Box::new(s)))
            }
            Encoding::Brotli => super::br::Stream::new(length, cfg.brotli_quality)
                .map(|s| StreamEncoder::Brotli(Box::new(s))),
        }
    }

    /// Compresses `piece` and flushes: every byte of it can be decoded from what this has
    /// returned so far. The slice is valid until the next call.
    pub(crate) fn push(&mut self, piece: &[u8]) -> &[u8] {
        // Writing into a Vec cannot fail; neither can flushing into one.
        match self {
            StreamEncoder::Gzip(e) => e.push(piece),
            StreamEncoder::Brotli(e) => e.push(piece),
        }
    }

    /// The end of the stream (gzip's trailer, brotli's last block).
    pub(crate) fn finish(self) -> Vec<u8> {
        match self {
            StreamEncoder::Gzip(e) => e.finish(),
            StreamEncoder::Brotli(e) => e.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn fields(list: &[(&'static str, &'static str)]) -> Vec<(&'static [u8], &'static [u8])> {
        list.iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect()
    }

    /// A plan row: the request's coding, the answer's status, fields and length, the plan.
    type PlanRow = (
        Option<Encoding>,
        u16,
        Vec<(&'static str, &'static str)>,
        Option<u64>,
        Plan,
    );

    #[test]
    fn the_plan_follows_the_in_memory_rule() {
        let cfg = Compression::default();
        let text = [("Content-Type", "text/plain; charset=utf-8")];
        let gz = Some(Encoding::Gzip);
        // (coding, status, fields, length, plan)
        let rows: Vec<PlanRow> = vec![
            (
                gz,
                200,
                text.to_vec(),
                Some(58_000),
                Plan::Encode(Encoding::Gzip),
            ),
            (gz, 200, text.to_vec(), None, Plan::Encode(Encoding::Gzip)),
            (
                Some(Encoding::Brotli),
                200,
                text.to_vec(),
                None,
                Plan::Encode(Encoding::Brotli),
            ),
            (
                Some(Encoding::Identity),
                200,
                text.to_vec(),
                None,
                Plan::Vary,
            ),
            // Compression off for the site or the request.
            (None, 200, text.to_vec(), None, Plan::AsIs),
            // RFC 9110 §15: only a 200 is compressed (not a 206's ranges, not a 304).
            (gz, 206, text.to_vec(), None, Plan::AsIs),
            (gz, 304, text.to_vec(), None, Plan::AsIs),
            // Below min_bytes a response fits one segment either way.
            (gz, 200, text.to_vec(), Some(100), Plan::AsIs),
            (
                gz,
                200,
                vec![("Content-Type", "image/png")],
                None,
                Plan::AsIs,
            ),
            (gz, 200, vec![], None, Plan::AsIs),
            (
                gz,
                200,
                vec![("Content-Type", "application/json")],
                None,
                Plan::Encode(Encoding::Gzip),
            ),
            // Already encoded by the application.
            (
                gz,
                200,
                vec![("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
                None,
                Plan::AsIs,
            ),
            // RFC 9111 §5.2.2.6: no-transform forbids changing the content's coding.
            (
                gz,
                200,
                vec![
                    ("Content-Type", "text/html"),
                    ("Cache-Control", "private, No-Transform"),
                ],
                None,
                Plan::AsIs,
            ),
        ];
        for (coding, status, f, length, want) in rows {
            let f: Vec<(&[u8], &[u8])> = f
                .iter()
                .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
                .collect();
            assert_eq!(
                plan(coding, status, &f, length, &cfg),
                want,
                "{status} {f:?} {length:?}"
            );
        }
        let off = Compression {
            enabled: false,
            ..Compression::default()
        };
        let f = fields(&text);
        assert_eq!(plan(gz, 200, &f, None, &off), Plan::AsIs);
    }

    #[test]
    fn a_content_type_that_is_not_utf8_is_not_compressed() {
        // The rule as `compress::compressible` reads a `str`: a value with obs-text (RFC 9110
        // §5.5) that is not UTF-8 names no type this server compresses; UTF-8 beyond ASCII
        // is read like ASCII.
        let cfg = Compression::default();
        let gz = Some(Encoding::Gzip);
        for (value, want) in [
            (&b"text/html"[..], Plan::Encode(Encoding::Gzip)),
            (
                b"text/html; charset=\"caf\xc3\xa9\"",
                Plan::Encode(Encoding::Gzip),
            ),
            (b"text/html; charset=\"caf\xe9\"", Plan::AsIs),
            (b"application/json\xff", Plan::AsIs),
            (b"\xc3\xa9", Plan::AsIs),
        ] {
            let f: [(&[u8], &[u8]); 1] = [(b"Content-Type", value)];
            let old = std::str::from_utf8(value)
                .ok()
                .is_some_and(crate::app::compress::compressible);
            assert_eq!(old, want != Plan::AsIs, "{value:?}");
            assert_eq!(plan(gz, 200, &f, None, &cfg), want, "{value:?}");
        }
    }

    #[test]
    fn the_fields_change_with_the_coding() {
        let f = fields(&[
            ("Content-Type", "text/plain"),
            ("Content-Length", "58000"),
            ("Accept-Ranges", "bytes"),
            ("ETag", "\"abc\""),
            ("Vary", "Origin"),
        ]);
        let r = Rewrite::new(Plan::Encode(Encoding::Brotli), &f);
        assert_eq!(r.encoding, Some("br"));
        assert!(r.vary);
        assert_eq!(r.etag.as_deref(), Some(&b"W/\"abc\""[..]));
        let kept: Vec<&[u8]> = f.iter().map(|(n, _)| *n).filter(|n| r.keeps(n)).collect();
        assert_eq!(kept, [&b"Content-Type"[..], b"Vary"]);

        // Forwarded as it is: every field kept, Vary added unless it is there.
        let r = Rewrite::new(Plan::Vary, &f);
        assert!(r.encoding.is_none() && r.etag.is_none() && r.vary);
        assert!(f.iter().all(|(n, _)| r.keeps(n)));
        for vary in ["accept-encoding", "Origin, Accept-Encoding", "*"] {
            let g = [(&b"Vary"[..], vary.as_bytes())];
            assert!(!Rewrite::new(Plan::Vary, &g).vary, "{vary}");
            assert!(
                !Rewrite::new(Plan::Encode(Encoding::Gzip), &g).vary,
                "{vary}"
            );
        }
        // A weak ETag stays as it is.
        let g = fields(&[("ETag", "W/\"abc\"")]);
        let r = Rewrite::new(Plan::Encode(Encoding::Gzip), &g);
        assert!(r.etag.is_none() && r.keeps(b"ETag"));
        assert!(!Rewrite::new(Plan::AsIs, &f).vary);
    }

    /// Each piece decodes as soon as it is pushed: what the client got so far holds every
    /// byte sent so far (an event of a stream is not held back), and the whole decodes to
    /// the body.
    #[test]
    fn every_piece_is_flushed_through() {
        let cfg = Compression::default();
        let pieces: Vec<Vec<u8>> = (0..20)
            .map(|i| format!("data: event {i} {}\n\n", "x".repeat(i * 37)).into_bytes())
            .collect();
        let codings = [Encoding::Gzip, Encoding::Brotli];
        for coding in codings
            .into_iter()
            .filter(|&c| super::super::compress::encodable(c))
        {
            let mut enc = StreamEncoder::new(coding, None, &cfg).unwrap();
            let mut sent = Vec::new();
            let mut plain = Vec::new();
            for p in &pieces {
                sent.extend_from_slice(enc.push(p));
                plain.extend_from_slice(p);
                assert_eq!(decode_prefix(coding, &sent), plain, "{coding:?}");
            }
            sent.extend_from_slice(&enc.finish());
            assert_eq!(decode_whole(coding, &sent), plain, "{coding:?}");
        }
        assert!(StreamEncoder::new(Encoding::Identity, None, &cfg).is_none());
    }

    /// What a decoder gives for a stream not yet finished.
    fn decode_prefix(coding: Encoding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        match coding {
            Encoding::Gzip => {
                let mut d = flate2::read::GzDecoder::new(data);
                while let Ok(n) = d.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
            }
            _ => {
                let mut d = brotli_decompressor::Decompressor::new(data, 4096);
                while let Ok(n) = d.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    out.extend_from_slice(&buf[..n]);
                }
            }
        }
        out
    }

    fn decode_whole(coding: Encoding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Encoding::Gzip => flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .expect("a whole gzip member"),
            _ => brotli_decompressor::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .expect("a whole brotli stream"),
        };
        out
    }
}
