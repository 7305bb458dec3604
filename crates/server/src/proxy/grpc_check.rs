//! gRPC's health service as the active check of an HTTP/2 upstream (gRPC's
//! doc/health-checking.md): the `grpc.health.v1.Health/Check` call's request (one framed
//! HealthCheckRequest naming the service) and the verdict on its answer, which passes only
//! for `:status` 200, `grpc-status: 0` and a HealthCheckResponse whose status is SERVING.
//! Pure: the driver (`driver/upstream_h2.rs`) sends the call on a connection of its own and
//! hands the answer's events here. The protobuf is two fields, written and read by hand, so
//! the proxy needs neither prost nor the `grpc` feature.
#![forbid(unsafe_code)]

/// The call's path.
pub(crate) const PATH: &[u8] = b"/grpc.health.v1.Health/Check";
/// The most of the answer's body kept: a HealthCheckResponse is 2 bytes after its 5-byte
/// prefix, so a longer body is no health answer (and is not held without bound).
pub(crate) const ANSWER_MAX: usize = 1024;
/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: u64 = 1;

/// The call's message: HealthCheckRequest { service = 1 (string) }, length-prefixed
/// (uncompressed). The empty name is the server as a whole, sent as an empty message
/// (proto3 leaves a default field out).
pub(crate) fn request_body(service: &str) -> Vec<u8> {
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a); // field 1, length-delimited
        varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut body = vec![0];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    body
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// What came of one check's call so far.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    /// The call's stream (set by the driver).
    pub stream: u32,
    /// Its verdict was given (a later close of the connection gives none).
    pub done: bool,
    status: u16,
    grpc_status: Option<Vec<u8>>,
    body: Vec<u8>,
    too_long: bool,
}

impl Probe {
    /// The check whose call is on stream `stream`.
    pub(crate) fn new(stream: u32) -> Probe {
        Probe {
            stream,
            ..Probe::default()
        }
    }

    /// The answer's head (1xx heads are not the answer). Its `grpc-status`, if any, is a
    /// Trailers-Only answer's.
    pub(crate) fn head<'a>(
        &mut self,
        status: u16,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) {
        if status < 200 {
            return;
        }
        self.status = status;
        self.trailers(fields);
    }

    /// A piece of the answer's body.
    pub(crate) fn data(&mut self, data: &[u8]) {
        if self.body.len() + data.len() > ANSWER_MAX {
            self.too_long = true;
            return;
        }
        self.body.extend_from_slice(data);
    }

    /// The answer's trailers.
    pub(crate) fn trailers<'a>(&mut self, fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) {
        for (n, v) in fields {
            if n == b"grpc-status" {
                self.grpc_status = Some(v.to_vec());
            }
        }
    }

    /// Whether the whole answer says SERVING.
    pub(crate) fn passed(&self) -> bool {
        self.status == 200
            && self.grpc_status.as_deref() == Some(b"0")
            && !self.too_long
            && serving(&self.body)
    }
}

/// Whether `body` is exactly one uncompressed HealthCheckResponse whose `status` (field 1,
/// an enum) is SERVING; an absent status is UNKNOWN (proto3's default), not SERVING.
fn serving(body: &[u8]) -> bool {
    let Some((&[0, a, b, c, d], msg)) = body.split_first_chunk::<5>() else {
        return false;
    };
    if u32::from_be_bytes([a, b, c, d]) as usize != msg.len() {
        return false;
    }
    let mut status = 0;
    let mut at = 0;
    while at < msg.len() {
        let Some(key) = read_varint(msg, &mut at) else {
            return false;
        };
        let skip = match key & 7 {
            0 => {
                let Some(v) = read_varint(msg, &mut at) else {
                    return false;
                };
                if key >> 3 == 1 {
                    status = v; // the last one wins, as protobuf reads it
                }
                0
            }
            1 => 8,
            2 => match read_varint(msg, &mut at) {
                Some(n) => n as usize,
                None => return false,
            },
            5 => 4,
            _ => return false,
        };
        at = match at.checked_add(skip) {
            Some(end) if end <= msg.len() => end,
            _ => return false,
        };
    }
    status == SERVING
}

fn read_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(
        status: u16,
        head: &[(&[u8], &[u8])],
        body: &[u8],
        trailers: &[(&[u8], &[u8])],
    ) -> bool {
        let mut p = Probe::default();
        p.head(100, [(&b"grpc-status"[..], &b"0"[..])].into_iter());
        p.head(status, head.iter().copied());
        p.data(body);
        p.trailers(trailers.iter().copied());
        p.passed()
    }

    /// Fields of a head or trailers.
    type F = &'static [(&'static [u8], &'static [u8])];
    const OK: F = &[(b"grpc-status", b"0")];
    /// What, the verdict, then the answer: status, head, body, trailers.
    type Row = (&'static str, bool, u16, F, &'static [u8], F);
    const SERVING_MSG: &[u8] = &[0, 0, 0, 0, 2, 0x08, 1];

    /// gRPC's doc/health-checking.md: a server is healthy when Check answers OK with
    /// SERVING; any other status (NOT_SERVING, UNKNOWN, SERVICE_UNKNOWN) or an error
    /// (NOT_FOUND for an unknown service) is not.
    #[test]
    fn only_an_ok_call_answering_serving_passes() {
        let ct: F = &[(b"content-type", b"application/grpc")];
        let table: &[Row] = &[
            ("SERVING", true, 200, ct, SERVING_MSG, OK),
            ("NOT_SERVING", false, 200, ct, &[0, 0, 0, 0, 2, 0x08, 2], OK),
            (
                "UNKNOWN, written",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 2, 0x08, 0],
                OK,
            ),
            (
                "UNKNOWN, the empty message",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 0],
                OK,
            ),
            (
                "an unknown field then SERVING",
                true,
                200,
                ct,
                &[0, 0, 0, 0, 6, 0x12, 2, b'h', b'i', 0x08, 1],
                OK,
            ),
            (
                "SERVING then NOT_SERVING: the last wins",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 4, 0x08, 1, 0x08, 2],
                OK,
            ),
            (
                "grpc-status 5 (NOT_FOUND), Trailers-Only",
                false,
                200,
                &[(b"grpc-status", b"5")],
                b"",
                &[],
            ),
            ("grpc-status 0 but no message", false, 200, ct, b"", OK),
            ("no grpc-status", false, 200, ct, SERVING_MSG, &[]),
            (
                "grpc-status 14 in trailers",
                false,
                200,
                ct,
                SERVING_MSG,
                &[(b"grpc-status", b"14")],
            ),
            ("HTTP 503", false, 503, ct, SERVING_MSG, OK),
            (
                "a compressed message (none was asked for)",
                false,
                200,
                ct,
                &[1, 0, 0, 0, 2, 0x08, 1],
                OK,
            ),
            (
                "a truncated message",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 3, 0x08, 1],
                OK,
            ),
            (
                "two messages",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 2, 0x08, 1, 0, 0, 0, 0, 2, 0x08, 1],
                OK,
            ),
            (
                "a truncated varint",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 2, 0x08, 0x81],
                OK,
            ),
            (
                "a length past the message",
                false,
                200,
                ct,
                &[0, 0, 0, 0, 3, 0x12, 9, 0],
                OK,
            ),
        ];
        for &(what, pass, status, head, body, trailers) in table {
            assert_eq!(answer(status, head, body, trailers), pass, "{what}");
        }
    }

    #[test]
    fn a_body_past_the_limit_fails_and_is_not_kept() {
        let mut p = Probe::default();
        p.head(200, std::iter::empty());
        p.data(SERVING_MSG);
        p.data(&vec![0; ANSWER_MAX]);
        p.trailers(OK.iter().copied());
        assert!(!p.passed());
        assert!(p.body.len() <= ANSWER_MAX);
    }

    #[test]
    fn the_request_names_the_service_as_protobuf_writes_it() {
        assert_eq!(request_body(""), [0, 0, 0, 0, 0]);
        assert_eq!(
            request_body("app"),
            [0, 0, 0, 0, 5, 0x0a, 3, b'a', b'p', b'p']
        );
        let long = "s".repeat(200);
        let body = request_body(&long);
        assert_eq!(&body[..8], &[0, 0, 0, 0, 203, 0x0a, 0xc8, 0x01]);
        #[cfg(feature = "grpc")]
        {
            use linerate_grpc::proto::grpc::health::v1::{HealthCheckRequest, HealthCheckResponse};
            use prost::Message;
            for name in ["", "app", &long] {
                let msg = HealthCheckRequest {
                    service: name.into(),
                }
                .encode_to_vec();
                assert_eq!(request_body(name)[5..], msg[..], "{name:?}");
            }
            for status in 0..4 {
                let msg = HealthCheckResponse { status }.encode_to_vec();
                let mut body = vec![0];
                body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                body.extend_from_slice(&msg);
                assert_eq!(serving(&body), status == 1, "status {status}");
            }
        }
    }
}
