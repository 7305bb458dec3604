//! HTTP/1.1 as a client speaks it: the request line, fields and body out, and the response
//! read back with the codec's client side (`linerate_http1::parse_response`, `ResponseBody`),
//! interim 1xx answers skipped.
#![forbid(unsafe_code)]

use linerate_http1::{FieldSpan, Limits, ResponseBody, ResponseError, parse_response};

use super::{DEFAULT_HOST, Outgoing, Wire};
use crate::testing::client::Protocol;
use crate::testing::error::TestError;
use crate::testing::response::TestResponse;

enum Reading {
    Head,
    Body {
        status: u16,
        headers: Vec<(String, String)>,
        body: ResponseBody,
        data: Vec<u8>,
        /// A chunked body's trailer section, once read.
        trailers: Vec<(String, String)>,
    },
    Done(TestResponse),
    Taken,
}

/// The client end of one HTTP/1.1 exchange.
pub(crate) struct H1Wire {
    request: Vec<u8>,
    /// The request was HEAD: the response has no body whatever its fields say.
    head_request: bool,
    inbuf: Vec<u8>,
    reading: Reading,
}

impl H1Wire {
    pub(crate) fn new(req: &Outgoing<'_>) -> H1Wire {
        let mut b = Vec::with_capacity(128 + req.body.len());
        for part in [req.method, " ", req.target, " HTTP/1.1\r\n"] {
            b.extend_from_slice(part.as_bytes());
        }
        if req.header("host").is_none() {
            b.extend_from_slice(format!("host: {DEFAULT_HOST}\r\n").as_bytes());
        }
        for (name, value) in req.headers {
            for part in [name.as_str(), ": ", value.as_str(), "\r\n"] {
                b.extend_from_slice(part.as_bytes());
            }
        }
        if let Some(n) = req.content_length() {
            b.extend_from_slice(format!("content-length: {n}\r\n").as_bytes());
        }
        b.extend_from_slice(b"\r\n");
        b.extend_from_slice(req.body);
        H1Wire {
            request: b,
            head_request: req.method == "HEAD",
            inbuf: Vec::new(),
            reading: Reading::Head,
        }
    }

    /// Reads what `inbuf` holds as far as it goes.
    fn read(&mut self) -> Result<(), TestError> {
        loop {
            match &mut self.reading {
                Reading::Head => {
                    let mut spans = Vec::new();
                    let Some(info) = parse_response(&self.inbuf, Some(&mut spans))
                        .map_err(TestError::Response)?
                    else {
                        return Ok(());
                    };
                    let headers = fields(&self.inbuf, &spans);
                    self.inbuf.drain(..info.head_len);
                    if info.is_interim() {
                        continue;
                    }
                    self.reading = Reading::Body {
                        status: info.status,
                        headers,
                        body: ResponseBody::new(info.body_length(self.head_request)),
                        data: Vec::new(),
                        trailers: Vec::new(),
                    };
                }
                Reading::Body {
                    body,
                    data,
                    trailers,
                    ..
                } => {
                    let limits = Limits::default();
                    let (consumed, done) = match body {
                        // Decoded here, not by `ResponseBody`, which forgets the chunked
                        // decoder (and the trailer section it read) at the end.
                        ResponseBody::Chunked(c) => {
                            let step = c
                                .decode(&self.inbuf, &limits)
                                .map_err(|e| TestError::Response(ResponseError::Chunked(e)))?;
                            data.extend_from_slice(step.data);
                            if step.done {
                                *trailers = c.trailers().iter().map(text_pair).collect();
                            }
                            (step.consumed, step.done)
                        }
                        body => {
                            let step = body
                                .decode(&self.inbuf, &limits)
                                .map_err(TestError::Response)?;
                            data.extend_from_slice(step.data);
                            (step.consumed, step.done)
                        }
                    };
                    self.inbuf.drain(..consumed);
                    if done {
                        self.finish();
                    } else if consumed == 0 {
                        return Ok(());
                    }
                }
                Reading::Done(_) | Reading::Taken => return Ok(()),
            }
        }
    }

    fn finish(&mut self) {
        if let Reading::Body {
            status,
            headers,
            data,
            trailers,
            ..
        } = std::mem::replace(&mut self.reading, Reading::Taken)
        {
            self.reading = Reading::Done(TestResponse {
                protocol: Protocol::Http1,
                status,
                headers,
                body: data,
                trailers,
            });
        }
    }
}

/// A field's name and value as text.
fn text_pair((n, v): (&[u8], &[u8])) -> (String, String) {
    (
        String::from_utf8_lossy(n).into_owned(),
        String::from_utf8_lossy(v).into_owned(),
    )
}

/// The head's fields as text; an obs-fold continuation joins the field before it with a space
/// (RFC 9112 §5.2).
fn fields(buf: &[u8], spans: &[FieldSpan]) -> Vec<(String, String)> {
    let text = |r: &std::ops::Range<usize>| String::from_utf8_lossy(&buf[r.clone()]).into_owned();
    let mut out: Vec<(String, String)> = Vec::with_capacity(spans.len());
    for s in spans {
        match out.last_mut() {
            Some((_, v)) if s.name.is_empty() => {
                v.push(' ');
                v.push_str(&text(&s.value));
            }
            _ => out.push((text(&s.name), text(&s.value))),
        }
    }
    out
}

impl Wire for H1Wire {
    fn outgoing(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.request)
    }

    fn has_output(&self) -> bool {
        !self.request.is_empty()
    }

    fn incoming(&mut self, bytes: &[u8]) -> Result<(), TestError> {
        self.inbuf.extend_from_slice(bytes);
        self.read()
    }

    fn closed(&mut self, reset: bool) -> Result<(), TestError> {
        match &mut self.reading {
            Reading::Body { body, .. } if !reset => {
                body.eof().map_err(|_| TestError::Closed { reset })?;
                self.finish();
                Ok(())
            }
            Reading::Done(_) => Ok(()),
            _ => Err(TestError::Closed { reset }),
        }
    }

    fn response(&mut self) -> Option<TestResponse> {
        match std::mem::replace(&mut self.reading, Reading::Taken) {
            Reading::Done(r) => Some(r),
            other => {
                self.reading = other;
                None
            }
        }
    }
}
