//! Typed extractors: the values a handler with typed arguments ([`handler`](crate::handler),
//! [`handler_async`](crate::handler_async)) takes, and the two traits that make a type one:
//! [`FromRequestParts`] (from the head, the application's state and the layers' values) and
//! [`FromRequest`] (may read the body too, so only a handler's last argument may be one).
//!
//! Owns extraction, on the worker, from a borrowed [`Request`]. Each built-in extractor is
//! made by the `req.…` accessor that does the same job (`req.json`, `req.form`,
//! `req.query_as`…), so it fails with the same [`Rejection`] and status (415, 400, 422), and
//! an [`ErrorRenderer`](crate::ErrorRenderer) renders it. Extraction never waits: the body is
//! read whole before the handler is called, and what must wait (a token looked up in Redis)
//! belongs in an async layer (`Router::around`) that attaches its result for [`Extension`].
#![forbid(unsafe_code)]

use serde::de::DeserializeOwned;

use crate::extract::{IntoResponse, Json, Rejection};
use crate::request::Request;

/// A value made from a request's head, the application's state and its layers' values,
/// without its body: any argument of a handler with typed arguments.
///
/// ```
/// use linerate_server::{FromRequestParts, Rejection, Request, Router, handler};
/// use linerate_server::testing::TestClient;
///
/// /// The caller's tenant, from `X-Tenant`.
/// struct Tenant(String);
///
/// impl FromRequestParts for Tenant {
///     type Rejection = Rejection;
///     fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
///         Ok(Tenant(req.required_header("x-tenant")?.to_string()))
///     }
/// }
///
/// let app = Router::new().get("/me", handler(|Tenant(t): Tenant| t));
/// let client = TestClient::new(app);
/// assert_eq!(client.get("/me").header("x-tenant", "acme").send().text(), "acme");
/// assert_eq!(client.get("/me").send().status(), 400);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an extractor (`FromRequestParts`)",
    label = "this argument cannot be taken from a request",
    note = "extractors: `Path<T>`, `Query<T>`, `State<T>`, `Extension<T>`, `Worker<T>`, \
            `HeaderMap`, `Method`, `Uri`, or a type of yours implementing `FromRequestParts`; \
            the last argument may also read the body: `Json<T>`, `Form<T>`, `Bytes`, `String`"
)]
pub trait FromRequestParts: Sized {
    /// What a failed extraction answers ([`Rejection`] for the built-in extractors, which
    /// an [`ErrorRenderer`](crate::ErrorRenderer) renders).
    type Rejection: IntoResponse;

    /// The value, or why the request cannot be served.
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Self::Rejection>;
}

/// A value that may read the request's body as well as its parts: the last argument of a
/// handler with typed arguments ([`Json`], [`Form`], `Bytes`, `String`, or one of yours).
/// Every [`FromRequestParts`] is one too (through the marker `M`, as in axum).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an extractor (`FromRequest`)",
    label = "this argument cannot be taken from a request",
    note = "the last argument may read the body (`Json<T>`, `Form<T>`, `Bytes`, `String`, or \
            a type of yours implementing `FromRequest`) or be any `FromRequestParts`"
)]
pub trait FromRequest<M = ViaRequest>: Sized {
    /// What a failed extraction answers.
    type Rejection: IntoResponse;

    /// The value, or why the request cannot be served.
    fn from_request(req: &Request<'_>) -> Result<Self, Self::Rejection>;
}

/// The marker of a [`FromRequest`] implemented as such.
#[doc(hidden)]
pub enum ViaRequest {}

/// The marker of a [`FromRequest`] that is a [`FromRequestParts`].
#[doc(hidden)]
pub enum ViaParts {}

impl<T: FromRequestParts> FromRequest<ViaParts> for T {
    type Rejection = T::Rejection;

    #[inline(always)]
    fn from_request(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        T::from_request_parts(req)
    }
}

/// The extraction's own outcome, for a handler that answers a failure its own way.
impl<T: FromRequestParts> FromRequestParts for Result<T, T::Rejection> {
    type Rejection = std::convert::Infallible;

    fn from_request_parts(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        Ok(T::from_request_parts(req))
    }
}

/// The extraction's own outcome, for a handler that answers a failure its own way.
impl<T: FromRequest> FromRequest for Result<T, T::Rejection> {
    type Rejection = std::convert::Infallible;

    fn from_request(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        Ok(T::from_request(req))
    }
}

/// Never made: the rejection of an extraction that cannot fail.
impl IntoResponse for std::convert::Infallible {
    fn into_response(self) -> crate::Response {
        match self {}
    }
}

/// `Deref` (and `DerefMut`) to the value an extractor holds, as axum's do.
macro_rules! deref {
    ($($name:ident),*) => {
        $(
            impl<T> std::ops::Deref for $name<T> {
                type Target = T;
                fn deref(&self) -> &T {
                    &self.0
                }
            }

            impl<T> std::ops::DerefMut for $name<T> {
                fn deref_mut(&mut self) -> &mut T {
                    &mut self.0
                }
            }
        )*
    };
}

deref!(Path, Query, Form, State, Extension);

/// The route's path parameters, percent-decoded: one (`Path<u32>` for `/users/{id}`), a
/// tuple in pattern order (`Path<(String, u32)>` for `/{team}/{id}`), or a struct by name
/// (serde's `Deserialize`). 400 for a value that does not parse or is not UTF-8 once
/// decoded (as [`Request::param_as`]); 500 when the type and the route disagree (a count or
/// a field the pattern lacks: a programming error, logged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Path<T>(pub T);

impl<T: DeserializeOwned> FromRequestParts for Path<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        crate::app::path_params::deserialize(req).map(Path)
    }
}

/// The query string as `T` ([`Request::query_as`]: an absent query is an empty one; 400 when
/// it does not fit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Query<T>(pub T);

impl<T: DeserializeOwned> FromRequestParts for Query<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        req.query_as().map(Query)
    }
}

/// The body as JSON ([`Request::json`]: 415 unless Content-Type is JSON, 400 for a body
/// that is not JSON, 422 for JSON of another shape). The same type answers JSON.
impl<T: DeserializeOwned> FromRequest for Json<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request(req: &Request<'_>) -> Result<Self, Rejection> {
        req.json().map(Json)
    }
}

/// The body as an HTML form ([`Request::form`]: 415 for another Content-Type, 422 for a
/// form of another shape).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Form<T>(pub T);

impl<T: DeserializeOwned> FromRequest for Form<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request(req: &Request<'_>) -> Result<Self, Rejection> {
        req.form().map(Form)
    }
}

/// A clone of the application's state of type `T` ([`Router::with_state`](crate::Router::with_state)),
/// as axum's `State`: give a large value behind an `Arc` (or a handle such as a pool), and
/// the clone is a reference count. One value per type, so `State<Db>` and `State<Cache>` are
/// two arguments where axum takes one state and `FromRef`. 500 when the router has none of
/// that type (a programming error, logged; [`Request::state`] panics alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State<T>(pub T);

impl<T: Clone + Send + Sync + 'static> FromRequestParts for State<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        match req.ctx.state().get::<T>() {
            Some(t) => Ok(State(t.clone())),
            None => Err(missing("state", std::any::type_name::<T>())),
        }
    }
}

/// A clone of the value of type `T` a layer attached to the request ([`Request::extension`];
/// an async layer's with `OwnedRequest::extensions_mut`). 500 when none did: the route is
/// not under the layer that attaches it (a programming error, logged).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extension<T>(pub T);

impl<T: Clone + Send + Sync + 'static> FromRequestParts for Extension<T> {
    type Rejection = Rejection;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        match req.extension::<T>() {
            Some(t) => Ok(Extension(t.clone())),
            None => Err(missing("extension", std::any::type_name::<T>())),
        }
    }
}

/// The 500 of a value the application was to provide and did not (state, an extension, a
/// per-worker value), with a log line naming its type.
#[cold]
pub(crate) fn missing(what: &'static str, type_name: &'static str) -> Rejection {
    tracing::error!(what, type_name, "an extractor found no value of its type");
    Rejection::new(500, format!("no {what} of type {type_name}"))
}

/// The request's fields, copied into an `http::HeaderMap` (names lower-cased, in order).
/// Each field costs a copy of its value: [`Request::header`] reads one in place. 400 for a
/// field the `http` crate cannot hold (the parser admits none such today).
impl FromRequestParts for http::HeaderMap {
    type Rejection = Rejection;

    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        let fields = req.headers();
        let mut map = http::HeaderMap::with_capacity(fields.size_hint().0);
        for (name, value) in fields {
            let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name),
                http::HeaderValue::from_bytes(value),
            ) else {
                return Err(Rejection::new(
                    400,
                    format!("field {} cannot be held", String::from_utf8_lossy(name)),
                ));
            };
            map.append(name, value);
        }
        Ok(map)
    }
}

/// The method ([`Request::method`]; `Method::Other` for an extension method).
impl FromRequestParts for crate::Method {
    type Rejection = std::convert::Infallible;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        Ok(req.method())
    }
}

/// The method as `http::Method` (an extension method included).
impl FromRequestParts for http::Method {
    type Rejection = Rejection;

    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        http::Method::from_bytes(req.method_str().as_bytes())
            .map_err(|_| Rejection::new(400, "invalid method"))
    }
}

/// The request-target as `http::Uri` (origin form: path and query). 400 for one it refuses.
impl FromRequestParts for http::Uri {
    type Rejection = Rejection;

    fn from_request_parts(req: &Request<'_>) -> Result<Self, Rejection> {
        http::Uri::try_from(req.target()).map_err(|_| Rejection::new(400, "invalid target"))
    }
}

/// The HTTP version ([`Request::version`]).
impl FromRequestParts for crate::Version {
    type Rejection = std::convert::Infallible;

    #[inline]
    fn from_request_parts(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        Ok(req.version())
    }
}

/// The body, copied ([`Request::body`] reads it in place).
impl FromRequest for bytes::Bytes {
    type Rejection = std::convert::Infallible;

    fn from_request(req: &Request<'_>) -> Result<Self, Self::Rejection> {
        Ok(bytes::Bytes::copy_from_slice(req.body()))
    }
}

/// The body as text. 400 when it is not UTF-8.
impl FromRequest for String {
    type Rejection = Rejection;

    fn from_request(req: &Request<'_>) -> Result<Self, Rejection> {
        match std::str::from_utf8(req.body()) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(Rejection::new(400, "the body is not UTF-8")),
        }
    }
}
