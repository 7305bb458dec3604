//! Handlers with typed arguments: [`handler`] makes a sync handler of a function whose
//! arguments are extractors, [`handler_async`] an `async` one; each is registered with the
//! router's usual methods (`.get("/users/{id}", handler(get_user))`, `.get_async(…,
//! OnWorker, handler_async(get_user))`), which keep taking `|req| …` closures with their
//! types inferred.
//!
//! Owns the calling convention: every argument but the last is a [`FromRequestParts`], the
//! last may read the body ([`FromRequest`]); they are made in order on the worker, and the
//! first that fails answers with its rejection (the handler is not called). A route
//! registered without these wrappers runs none of this code.
#![forbid(unsafe_code)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::app::extractors::{FromRequest, FromRequestParts};
use crate::deferred::OwnedRequest;
use crate::extract::IntoResponse;
use crate::request::Request;
use crate::response::Response;

/// A sync function whose arguments are extractors and whose result is [`IntoResponse`]:
/// what [`handler`] takes. Implemented for `Fn(A1, …, An) -> R` up to 8 arguments, where
/// `A1…An-1` are [`FromRequestParts`] and `An` is [`FromRequest`]. `Args` only tells the
/// implementations apart.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler with typed arguments",
    label = "an argument is not an extractor, or the result is not `IntoResponse`",
    note = "each argument must be an extractor (`Path<T>`, `Query<T>`, `State<T>`, \
            `Extension<T>`, `Worker<T>`, `HeaderMap`, `Method`, `Uri`, or a type of yours \
            implementing `FromRequestParts`), and only the last may read the body \
            (`Json<T>`, `Form<T>`, `Bytes`, `String`, or your `FromRequest`)",
    note = "a sync handler returns `IntoResponse`: an `async fn` is registered with \
            `handler_async` on a `…_async` route"
)]
pub trait Handler<Args>: Send + Sync + 'static {
    /// Extracts the arguments from `req` and calls the function, or answers the first
    /// extractor's rejection.
    fn call(&self, req: &Request<'_>) -> Response;
}

/// An `async` function whose arguments are extractors and whose output is
/// [`IntoResponse`]: what [`handler_async`] takes. Implemented as [`Handler`] is, for
/// functions returning a `Send + 'static` future.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an async handler with typed arguments",
    label = "an argument is not an extractor, or it does not return a `Send + 'static` future \
             of an `IntoResponse`",
    note = "each argument must be an extractor (`Path<T>`, `Query<T>`, `State<T>`, \
            `Extension<T>`, `Worker<T>`, `HeaderMap`, `Method`, `Uri`, or a type of yours \
            implementing `FromRequestParts`), and only the last may read the body \
            (`Json<T>`, `Form<T>`, `Bytes`, `String`, or your `FromRequest`)",
    note = "a sync function is registered with `handler` on a sync route"
)]
pub trait AsyncHandler<Args>: Send + Sync + 'static {
    /// What the function's future resolves to.
    type Output: IntoResponse;
    /// The function's future.
    type Future: Future<Output = Self::Output> + Send + 'static;

    /// Extracts the arguments from `req` and calls the function (its future), or answers
    /// the first extractor's rejection.
    fn call(&self, req: &Request<'_>) -> Result<Self::Future, Response>;
}

/// A sync handler made of `f`, a function whose arguments are extractors: register it as
/// any (`.get("/users/{id}", handler(get_user))`, `route`, in a group, under layers).
///
/// ```
/// use linerate_server::testing::TestClient;
/// use linerate_server::{Json, Path, Query, Rejection, Router, State, handler};
///
/// #[derive(Clone)]
/// struct Db { name: &'static str }
/// #[derive(serde::Deserialize)]
/// struct Page { page: u32 }
/// #[derive(serde::Deserialize)]
/// struct NewUser { name: String }
///
/// fn get_user(Path(id): Path<u32>, Query(p): Query<Page>, State(db): State<Db>) -> String {
///     format!("user {id}, page {} of {}", p.page, db.name)
/// }
///
/// fn create(Json(user): Json<NewUser>) -> (u16, String) {
///     (201, user.name)
/// }
///
/// let app = Router::new()
///     .get("/users/{id}", handler(get_user))
///     .post("/users", handler(create))
///     .get("/plain/{id}", |req| req.param("id").unwrap_or("").to_string()) // still inferred
///     .with_state(Db { name: "main" });
/// let client = TestClient::new(app);
/// assert_eq!(client.get("/users/7?page=2").send().text(), "user 7, page 2 of main");
/// assert_eq!(client.get("/users/x?page=2").send().status(), 400);
/// let res = client.post("/users").header("content-type", "application/json")
///     .body(r#"{"name":"ann"}"#).send();
/// assert_eq!((res.status(), res.text()), (201, "ann".to_string()));
/// ```
///
/// A wrong argument is a compile error that names it:
///
/// ```compile_fail,E0277
/// use linerate_server::{Path, Router, handler};
///
/// struct Db; // not an extractor
///
/// fn get_user(Path(id): Path<u32>, db: Db) -> String {
///     format!("{id}")
/// }
///
/// let app = Router::new().get("/users/{id}", handler(get_user));
/// ```
pub fn handler<Args, H: Handler<Args>>(
    f: H,
) -> impl Fn(&Request<'_>) -> Response + Send + Sync + 'static {
    move |req| f.call(req)
}

/// An `async` handler made of `f`, an `async` function whose arguments are extractors,
/// for the `…_async` routes (`.get_async("/users/{id}", OnWorker, handler_async(get_user))`).
/// The arguments are extracted on the worker before the future is made, so the future owns
/// them and not the request (whose body is freed then).
///
/// ```
/// use linerate_server::testing::TestClient;
/// use linerate_server::{Json, OnWorker, Path, Router, handler_async};
///
/// #[derive(serde::Deserialize)]
/// struct Transfer { amount: u64 }
///
/// async fn transfer(Path(from): Path<u32>, Json(t): Json<Transfer>) -> String {
///     format!("{} from {from}", t.amount)
/// }
///
/// let app = Router::new().post_async("/accounts/{id}/transfers", OnWorker, handler_async(transfer));
/// let res = TestClient::new(app).post("/accounts/3/transfers")
///     .header("content-type", "application/json").body(r#"{"amount":5}"#).send();
/// assert_eq!(res.text(), "5 from 3");
/// ```
pub fn handler_async<Args, H: AsyncHandler<Args>>(
    f: H,
) -> impl Fn(OwnedRequest) -> Answer<H::Future> + Send + Sync + 'static {
    move |req| match f.call(&req.request()) {
        Ok(future) => Answer {
            state: State::Running { future },
        },
        Err(rejected) => Answer {
            state: State::Rejected {
                response: Some(rejected),
            },
        },
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`handler_async`] route: the handler's own, or an extractor's
    /// rejection at once.
    pub struct Answer<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Running { #[pin] future: F },
        Rejected { response: Option<Response> },
    }
}

impl<F> Future for Answer<F>
where
    F: Future,
    F::Output: IntoResponse,
{
    type Output = Response;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        match self.project().state.project() {
            StateProj::Running { future } => future.poll(cx).map(IntoResponse::into_response),
            StateProj::Rejected { response } => Poll::Ready(
                response
                    .take()
                    .unwrap_or_else(|| crate::app::dispatch::text_status(500)),
            ),
        }
    }
}

/// A function of no argument.
impl<F, R> Handler<()> for F
where
    F: Fn() -> R + Send + Sync + 'static,
    R: IntoResponse,
{
    #[inline]
    fn call(&self, _: &Request<'_>) -> Response {
        self().into_response()
    }
}

/// An `async` function of no argument.
impl<F, Fut> AsyncHandler<()> for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoResponse,
{
    type Output = Fut::Output;
    type Future = Fut;

    #[inline]
    fn call(&self, _: &Request<'_>) -> Result<Fut, Response> {
        Ok(self())
    }
}

/// The value of an extractor, or the handler's answer is its rejection.
macro_rules! take {
    ($e:expr) => {
        match $e {
            Ok(value) => value,
            Err(rejection) => return rejection.into_response(),
        }
    };
}

/// [`take`] for [`AsyncHandler::call`].
macro_rules! take_async {
    ($e:expr) => {
        match $e {
            Ok(value) => value,
            Err(rejection) => return Err(rejection.into_response()),
        }
    };
}

/// `Handler` and `AsyncHandler` for functions of the parts extractors `$P` and a last
/// argument `L`.
macro_rules! handlers {
    ($($P:ident $p:ident),*) => {
        impl<F, R, M, $($P,)* L> Handler<(M, $($P,)* L,)> for F
        where
            F: Fn($($P,)* L) -> R + Send + Sync + 'static,
            R: IntoResponse,
            $($P: FromRequestParts,)*
            L: FromRequest<M>,
        {
            #[inline]
            fn call(&self, req: &Request<'_>) -> Response {
                $(let $p = take!($P::from_request_parts(req));)*
                let last = take!(L::from_request(req));
                self($($p,)* last).into_response()
            }
        }

        impl<F, Fut, M, $($P,)* L> AsyncHandler<(M, $($P,)* L,)> for F
        where
            F: Fn($($P,)* L) -> Fut + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoResponse,
            $($P: FromRequestParts,)*
            L: FromRequest<M>,
        {
            type Output = Fut::Output;
            type Future = Fut;

            #[inline]
            fn call(&self, req: &Request<'_>) -> Result<Fut, Response> {
                $(let $p = take_async!($P::from_request_parts(req));)*
                let last = take_async!(L::from_request(req));
                Ok(self($($p,)* last))
            }
        }
    };
}

handlers!();
handlers!(P1 p1);
handlers!(P1 p1, P2 p2);
handlers!(P1 p1, P2 p2, P3 p3);
handlers!(P1 p1, P2 p2, P3 p3, P4 p4);
handlers!(P1 p1, P2 p2, P3 p3, P4 p4, P5 p5);
handlers!(P1 p1, P2 p2, P3 p3, P4 p4, P5 p5, P6 p6);
handlers!(P1 p1, P2 p2, P3 p3, P4 p4, P5 p5, P6 p6, P7 p7);
