//! `--grpc`: gRPC's rules for one answer, the client's side, sans I/O (gRPC over HTTP/2,
//! PROTOCOL-HTTP2.md). A call succeeded when its `:status` is 200, its `content-type` is
//! application/grpc (or `+proto`, `;…`), its trailers carry `grpc-status: 0` (or its one
//! header block does, in a trailers-only answer) and, when the run names them, its DATA bytes
//! are exactly the expected ones; its length-prefixed messages are counted as they pass, and a
//! message cut short at the end fails the call. Only `Client` calls this, and only on a
//! `--grpc` run: plain HTTP/2 runs never reach it.
#![forbid(unsafe_code)]

use std::sync::Arc;

/// Bytes of a gRPC message's prefix: the compressed flag, then the length (big-endian u32).
pub const PREFIX: usize = 5;

/// What every answer of a `--grpc` run is held to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    /// The exact DATA bytes of a good answer (`--expect-body`); None: any bytes.
    pub body: Option<Arc<[u8]>>,
}

/// Why a call failed gRPC's checks (the first rule it broke, in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// `:status` was not 200 (a 2xx or 3xx other than 200; others are status errors).
    HttpStatus,
    /// No `content-type`, or not application/grpc.
    ContentType,
    /// No `grpc-status` in the trailers (or in a trailers-only answer).
    NoGrpcStatus,
    /// A `grpc-status` other than 0 (OK).
    GrpcStatus,
    /// The DATA ended inside a message (its prefix or its bytes cut short).
    Truncated,
    /// The DATA bytes were not the expected ones (`--expect-body`).
    Body,
}

impl Fault {
    /// Every fault, in the order of `index`.
    pub const ALL: [Fault; 6] = [
        Fault::HttpStatus,
        Fault::ContentType,
        Fault::NoGrpcStatus,
        Fault::GrpcStatus,
        Fault::Truncated,
        Fault::Body,
    ];

    /// Its slot in a per-fault count.
    pub fn index(self) -> usize {
        self as usize
    }

    /// As the report names it.
    pub fn name(self) -> &'static str {
        match self {
            Fault::HttpStatus => "HTTP status not 200",
            Fault::ContentType => "content-type not application/grpc",
            Fault::NoGrpcStatus => "no grpc-status",
            Fault::GrpcStatus => "grpc-status not 0",
            Fault::Truncated => "message cut short",
            Fault::Body => "body bytes not the expected ones",
        }
    }
}

/// The gRPC fields of one header block, as decoded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fields {
    /// A `content-type` of application/grpc was there.
    pub content_type: bool,
    /// The `grpc-status` field: Some(true) when it is exactly `0`.
    pub status: Option<bool>,
}

impl Fields {
    /// Takes one decoded field (the rest are ignored).
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        match name {
            b"content-type" => self.content_type = is_grpc_type(value),
            b"grpc-status" => self.status = Some(value == b"0"),
            _ => {}
        }
    }
}

/// `application/grpc`, alone or with a `+format` or parameters (gRPC's Content-Type rule);
/// the type is compared without regard to case (RFC 9110 §8.3.1). gRPC-Web's types are not
/// gRPC's.
fn is_grpc_type(v: &[u8]) -> bool {
    const T: &[u8] = b"application/grpc";
    v.len() >= T.len()
        && v[..T.len()].eq_ignore_ascii_case(T)
        && matches!(v.get(T.len()), None | Some(b'+' | b';' | b' '))
}

/// One call's answer as it arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    content_type: bool,
    status: Option<bool>,
    /// DATA bytes seen.
    body: u64,
    /// A DATA byte differed from the expected ones, or there were more.
    body_differs: bool,
    /// Bytes of the current message's prefix seen (0..PREFIX).
    prefix_at: u8,
    /// The current message's prefix so far.
    prefix: [u8; PREFIX],
    /// Bytes of the current message still to come.
    left: u32,
    /// Whole messages seen.
    messages: u32,
}

impl Answer {
    /// The answer's first header block (`end_stream`: a trailers-only answer, whose
    /// `grpc-status` is there).
    pub fn head(&mut self, f: Fields, end_stream: bool) {
        self.content_type = f.content_type;
        if end_stream {
            self.status = f.status;
        }
    }

    /// The trailers.
    pub fn trailers(&mut self, f: Fields) {
        self.status = f.status;
    }

    /// DATA payload bytes (padding removed), checked against the expected body and cut into
    /// messages.
    pub fn data(&mut self, mut bytes: &[u8], expect: &Expect) {
        if let Some(e) = &expect.body {
            let at = usize::try_from(self.body).unwrap_or(usize::MAX);
            let same = e
                .get(at..)
                .and_then(|rest| rest.get(..bytes.len()))
                .is_some_and(|want| want == bytes);
            self.body_differs |= !same;
        }
        self.body += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = (self.left as usize).min(bytes.len());
                self.left -= n as u32;
                bytes = &bytes[n..];
                if self.left == 0 {
                    self.messages += 1;
                }
                continue;
            }
            let at = usize::from(self.prefix_at);
            let n = (PREFIX - at).min(bytes.len());
            self.prefix[at..at + n].copy_from_slice(&bytes[..n]);
            self.prefix_at += n as u8;
            bytes = &bytes[n..];
            if usize::from(self.prefix_at) == PREFIX {
                self.prefix_at = 0;
                let p = self.prefix;
                self.left = u32::from_be_bytes([p[1], p[2], p[3], p[4]]);
                if self.left == 0 {
                    self.messages += 1;
                }
            }
        }
    }

    /// Whole messages seen.
    pub fn messages(&self) -> u32 {
        self.messages
    }

    /// The verdict once the stream has ended with this HTTP `status`.
    pub fn verdict(&self, status: u16, expect: &Expect) -> Result<(), Fault> {
        if status != 200 {
            return Err(Fault::HttpStatus);
        }
        if !self.content_type {
            return Err(Fault::ContentType);
        }
        match self.status {
            None => return Err(Fault::NoGrpcStatus),
            Some(false) => return Err(Fault::GrpcStatus),
            Some(true) => {}
        }
        if self.prefix_at != 0 || self.left != 0 {
            return Err(Fault::Truncated);
        }
        if let Some(e) = &expect.body
            && (self.body_differs || self.body != e.len() as u64)
        {
            return Err(Fault::Body);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        let mut f = Fields::default();
        for (n, v) in pairs {
            f.field(n.as_bytes(), v.as_bytes());
        }
        f
    }

    const GRPC: (&str, &str) = ("content-type", "application/grpc");
    const OK: (&str, &str) = ("grpc-status", "0");
    /// HttpArena's GetSum answer: one message, SumReply { result: 3 }.
    const SUM3: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x03];

    fn expect(body: Option<&[u8]>) -> Expect {
        Expect {
            body: body.map(Arc::from),
        }
    }

    /// Head, DATA in the given pieces, then trailers (None: a trailers-only answer).
    fn call(head: &[(&str, &str)], data: &[&[u8]], trailers: Option<&[(&str, &str)]>) -> Answer {
        let mut a = Answer::default();
        let e = Expect::default();
        a.head(fields(head), trailers.is_none());
        for d in data {
            a.data(d, &e);
        }
        if let Some(t) = trailers {
            a.trailers(fields(t));
        }
        a
    }

    #[test]
    fn content_types_that_are_grpc() {
        // gRPC over HTTP/2: "application/grpc" [("+proto" / "+json" / {custom})].
        for (v, ok) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC", true),
            ("application/grpc; charset=utf-8", true),
            ("application/grpc-web", false),
            ("application/grpcx", false),
            ("application/json", false),
            ("", false),
        ] {
            assert_eq!(is_grpc_type(v.as_bytes()), ok, "{v:?}");
        }
    }

    #[test]
    fn verdicts_one_per_rule() {
        let e = expect(None);
        let rows: [(Answer, u16, Result<(), Fault>); 9] = [
            (call(&[GRPC], &[SUM3], Some(&[OK])), 200, Ok(())),
            // A trailers-only answer carries grpc-status in its one block.
            (call(&[GRPC, OK], &[], None), 200, Ok(())),
            // Only a trailers-only answer's head may give the status.
            (
                call(&[GRPC, OK], &[SUM3], Some(&[])),
                200,
                Err(Fault::NoGrpcStatus),
            ),
            (
                call(&[GRPC], &[SUM3], Some(&[OK])),
                204,
                Err(Fault::HttpStatus),
            ),
            (
                call(&[], &[SUM3], Some(&[OK])),
                200,
                Err(Fault::ContentType),
            ),
            (
                call(&[("content-type", "text/plain")], &[SUM3], Some(&[OK])),
                200,
                Err(Fault::ContentType),
            ),
            (
                call(&[GRPC], &[], Some(&[("grpc-status", "12")])),
                200,
                Err(Fault::GrpcStatus),
            ),
            (
                call(&[GRPC], &[&SUM3[..6]], Some(&[OK])),
                200,
                Err(Fault::Truncated),
            ),
            (
                call(&[GRPC], &[&SUM3[..3]], Some(&[OK])),
                200,
                Err(Fault::Truncated),
            ),
        ];
        for (i, (a, status, want)) in rows.iter().enumerate() {
            assert_eq!(a.verdict(*status, &e), *want, "row {i}");
        }
    }

    #[test]
    fn expected_body_must_match_exactly_however_split() {
        let e = expect(Some(SUM3));
        for split in 0..=SUM3.len() {
            let (x, y) = SUM3.split_at(split);
            let mut a = call(&[GRPC], &[], Some(&[OK]));
            a.data(x, &e);
            a.data(y, &e);
            assert_eq!(a.verdict(200, &e), Ok(()), "split at {split}");
            assert_eq!(a.messages(), 1);
        }
        let wrong: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x04];
        let longer: &[u8] = &[0, 0, 0, 0, 2, 0x08, 0x03, 0, 0, 0, 0, 0];
        for body in [wrong, longer, &[]] {
            let mut a = call(&[GRPC], &[], Some(&[OK]));
            a.data(body, &e);
            assert_eq!(a.verdict(200, &e), Err(Fault::Body), "{body:?}");
        }
    }

    #[test]
    fn messages_are_counted_across_pieces() {
        // Three messages of 100, 0 and 3 bytes, fed one byte at a time.
        let mut bytes = Vec::new();
        for len in [100u32, 0, 3] {
            bytes.push(0);
            bytes.extend_from_slice(&len.to_be_bytes());
            bytes.extend(std::iter::repeat_n(7, len as usize));
        }
        let mut a = call(&[GRPC], &[], Some(&[OK]));
        for b in &bytes {
            a.data(std::slice::from_ref(b), &Expect::default());
        }
        assert_eq!(a.messages(), 3);
        assert_eq!(a.verdict(200, &Expect::default()), Ok(()));
    }
}
