//! Typed extraction and handler results: [`Rejection`] (why a request cannot be served as
//! sent, with its status), the typed accessors of [`Request`] that return one (`json`,
//! `form`, `query_as`, `param_as`, `required_header`), [`IntoResponse`] (what a handler may
//! return: a [`Response`], text, [`Json`], `(status, body)`, or a `Result` of two of them),
//! and [`ErrorRenderer`], the layer that renders a router's errors (its rejections and the
//! server's own answers) its own way, JSON for example.
//!
//! Extraction is opt-in: a handler that reads `&Request` as before pays nothing for it, and
//! each accessor costs only its own parsing. Statuses follow what each failure means: a body
//! of another media type is 415 (RFC 9110 §15.5.16), one that is not valid JSON or form
//! syntax is 400, a valid one of the wrong shape is 422 (RFC 9110 §15.5.21), a query or path
//! parameter of the wrong shape or a missing field is 400.
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::str::FromStr;

use serde::Serialize;
use serde::de::Deserialize;

use crate::app::dispatch::generated;
use crate::layer::{Extensions, Layer};
use crate::request::{Request, percent_decode};
use crate::response::Response;

/// Why a request cannot be served as sent: a status (4xx) and a message for the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    status: u16,
    message: Cow<'static, str>,
}

impl Rejection {
    /// A rejection with `status` and `message`.
    pub fn new(status: u16, message: impl Into<Cow<'static, str>>) -> Rejection {
        Rejection {
            status,
            message: message.into(),
        }
    }

    /// The status it answers with.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// What it tells the client.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status, self.message)
    }
}

impl std::error::Error for Rejection {}

/// What a handler may return. `Result<T, E>` with both sides `IntoResponse` lets a handler
/// use `?` on extraction (`let user: NewUser = req.json()?;`).
pub trait IntoResponse {
    /// The response to send.
    fn into_response(self) -> Response;
}

impl IntoResponse for Response {
    #[inline(always)]
    fn into_response(self) -> Response {
        self
    }
}

/// `200 text/plain`.
impl IntoResponse for &'static str {
    fn into_response(self) -> Response {
        Response::text(self)
    }
}

/// `200 text/plain`.
impl IntoResponse for String {
    fn into_response(self) -> Response {
        Response::text_owned(self)
    }
}

/// Its status, `text/plain`, the message and a newline; an [`ErrorRenderer`] may render it
/// otherwise.
impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let mut resp = Response::text_owned(format!("{}\n", self.message)).status(self.status);
        resp.rejection = true;
        resp
    }
}

impl<T: IntoResponse, E: IntoResponse> IntoResponse for Result<T, E> {
    #[inline(always)]
    fn into_response(self) -> Response {
        match self {
            Ok(t) => t.into_response(),
            Err(e) => e.into_response(),
        }
    }
}

/// `body` with `status` (for example `(201, Json(created))`).
impl<T: IntoResponse> IntoResponse for (u16, T) {
    fn into_response(self) -> Response {
        self.1.into_response().status(self.0)
    }
}

/// A body serialized as JSON: `200 application/json` (500 if it does not serialize).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        Response::json(&self.0)
    }
}

/// The media type of a request's Content-Type, lower-cased bytes compared without
/// parameters (`application/json; charset=utf-8` is `application/json`).
fn media_type<'a>(req: &Request<'a>) -> Option<&'a [u8]> {
    let v = req.header("content-type")?;
    let end = v.iter().position(|&b| b == b';').unwrap_or(v.len());
    Some(v[..end].trim_ascii())
}

/// Whether `media` is JSON: `application/json` or a `+json` type (RFC 6839).
fn is_json(media: &[u8]) -> bool {
    media.eq_ignore_ascii_case(b"application/json")
        || (media.len() > 5
            && media[media.len() - 5..].eq_ignore_ascii_case(b"+json")
            && media.starts_with(b"application/"))
}

impl<'a> Request<'a> {
    /// The body as JSON, borrowed from the request where `T` borrows. 415 unless
    /// Content-Type is JSON; 400 for a body that is not JSON; 422 for JSON of another shape.
    ///
    /// A `&str` field can only borrow a string sent without escapes (`\"`, `\n`, `\u00e9`):
    /// any escaped string is a 422, as for a string where a number belongs. For text that
    /// may be escaped, use `String`, or `Cow<'a, str>` with `#[serde(borrow)]`, which borrows
    /// when it can and owns the unescaped copy when it must:
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use linerate_server::{Rejection, Router, testing::TestClient};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Note<'a> {
    ///     #[serde(borrow)]
    ///     text: Cow<'a, str>,
    /// }
    ///
    /// let router = Router::new().post("/notes", |req| -> Result<String, Rejection> {
    ///     let note: Note<'_> = req.json()?;
    ///     Ok(note.text.into_owned())
    /// });
    /// let res = TestClient::new(router)
    ///     .post("/notes")
    ///     .header("content-type", "application/json")
    ///     .body(r#"{"text":"say \"hi\""}"#)
    ///     .send();
    /// assert_eq!(res.text(), r#"say "hi""#);
    /// ```
    pub fn json<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        match media_type(self) {
            Some(m) if is_json(m) => {}
            _ => {
                return Err(Rejection::new(
                    415,
                    "expected a body with Content-Type: application/json",
                ));
            }
        }
        serde_json::from_slice(self.body()).map_err(|e| {
            use serde_json::error::Category;
            let status = match e.classify() {
                Category::Data => 422,
                Category::Syntax | Category::Eof | Category::Io => 400,
            };
            Rejection::new(status, format!("invalid JSON body: {e}"))
        })
    }

    /// The body as an HTML form (`application/x-www-form-urlencoded`). 415 for another
    /// Content-Type; 422 for a form of another shape. Values are percent-decoded, so a
    /// `&str` field can only take a value sent without escapes: use `String` (or `Cow`).
    pub fn form<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        match media_type(self) {
            Some(m) if m.eq_ignore_ascii_case(b"application/x-www-form-urlencoded") => {}
            _ => {
                return Err(Rejection::new(
                    415,
                    "expected a body with Content-Type: application/x-www-form-urlencoded",
                ));
            }
        }
        serde_urlencoded::from_bytes(self.body())
            .map_err(|e| Rejection::new(422, format!("invalid form body: {e}")))
    }

    /// The query string as `T` (an absent query is an empty one). 400 when it does not fit.
    pub fn query_as<T: Deserialize<'a>>(&self) -> Result<T, Rejection> {
        serde_urlencoded::from_str(self.query().unwrap_or(""))
            .map_err(|e| Rejection::new(400, format!("invalid query: {e}")))
    }

    /// Path parameter `{name}`, percent-decoded and parsed. 400 when it does not parse (or
    /// is not UTF-8 once decoded); a name the route does not have is a 500 (a programming
    /// error).
    pub fn param_as<T: FromStr>(&self, name: &str) -> Result<T, Rejection> {
        let Some(raw) = self.param(name) else {
            tracing::error!(name, "param_as: the route has no such parameter");
            return Err(Rejection::new(500, "no such path parameter"));
        };
        let decoded = percent_decode(raw, false)
            .ok_or_else(|| Rejection::new(400, format!("path parameter {name} is not UTF-8")))?;
        decoded
            .parse()
            .map_err(|_| Rejection::new(400, format!("invalid path parameter {name}")))
    }

    /// Field `name` as text. 400 when it is missing or not UTF-8.
    pub fn required_header(&self, name: &str) -> Result<&'a str, Rejection> {
        let v = self
            .header(name)
            .ok_or_else(|| Rejection::new(400, format!("missing field {name}")))?;
        std::str::from_utf8(v)
            .map_err(|_| Rejection::new(400, format!("field {name} is not UTF-8")))
    }
}

/// The layer that renders a router's errors its own way: rejections, and the server's own
/// answers (404, 405, 413, 500, 501, 503…) whose body the server wrote. `render` gets the
/// status and the message (the rejection's, or the status's reason) and returns the answer;
/// the original's fields (`Allow`, `Retry-After`, `WWW-Authenticate`…) and close are kept.
/// A handler's own error answer (one it built itself, not a rejection) is left alone.
pub struct ErrorRenderer<F>(pub F);

impl<F> Layer for ErrorRenderer<F>
where
    F: Fn(u16, &str) -> Response + Send + Sync + 'static,
{
    fn after(&self, _: &Extensions, resp: &mut Response) {
        if !(resp.rejection || (resp.status >= 400 && generated(resp))) {
            return;
        }
        let message = String::from_utf8_lossy(resp.body.as_bytes());
        let mut rendered = (self.0)(resp.status, message.trim_end());
        let old = std::mem::take(&mut resp.headers);
        for (name, value) in old {
            if rendered.field(&name).is_none() {
                rendered.headers.push((name, value));
            }
        }
        rendered.close |= resp.close;
        *resp = rendered;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_media_types() {
        let rows: &[(&[u8], bool)] = &[
            (b"application/json", true),
            (b"Application/JSON", true),
            (b"application/problem+json", true),
            (b"application/json5", false),
            (b"text/json", false),
            (b"+json", false),
        ];
        for &(media, want) in rows {
            assert_eq!(is_json(media), want, "{}", String::from_utf8_lossy(media));
        }
    }

    #[test]
    fn path_parameters_decode() {
        assert_eq!(percent_decode("a%20b", false).as_deref(), Some("a b"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(percent_decode("100%", false).as_deref(), Some("100%"));
        assert_eq!(percent_decode("%e2%82%ac", false).as_deref(), Some("€"));
        assert_eq!(percent_decode("%ff", false), None);
    }

    #[test]
    fn results_and_pairs_convert() {
        let ok: Result<&'static str, Rejection> = Ok("fine");
        assert_eq!(ok.into_response().body_bytes(), b"fine");
        let err: Result<&'static str, Rejection> = Err(Rejection::new(422, "bad shape"));
        let resp = err.into_response();
        assert_eq!(
            (resp.status_code(), resp.body_bytes()),
            (422, &b"bad shape\n"[..])
        );
        assert!(resp.rejection);
        let created = (201, Json([1, 2])).into_response();
        assert_eq!(created.status_code(), 201);
        assert_eq!(created.field("content-type"), Some("application/json"));
        assert_eq!(created.body_bytes(), b"[1,2]");
    }
}
