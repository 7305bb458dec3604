//! The REST API: `GET /accounts/{id}` (the account as JSON) and `POST /transfers` (JSON
//! `{"from","to","amount"}` → 201 `{"id"}`), under one async auth layer (the bearer checked
//! against [`Tokens`]), every error a JSON `{"status","error"}`:
//! 400 a body that is not JSON (or a path id that is not a number), 401 no or an unknown
//! bearer, 404 an unknown account, 409 insufficient funds, 415 not JSON, 422 a body of the
//! wrong shape or values no balance makes valid, 503 PostgreSQL or Redis unreachable.
//! Answers are gzip or br compressed when asked for (the server's own compression).

use std::sync::Arc;

use linerate_server::{
    ErrorRenderer, IntoResponse, Json, Next, OnWorker, OwnedRequest, Rejection, Response, Router,
};
use serde::Serialize;

use super::store::{Account, BankError, NewTransfer, Store, Tokens, authenticate};

/// The HTTP status of a [`BankError`].
pub fn status(e: &BankError) -> u16 {
    match e {
        BankError::Unauthenticated => 401,
        BankError::NotFound => 404,
        BankError::InsufficientFunds => 409,
        BankError::Invalid(_) => 422,
        BankError::Unavailable(_) => 503,
        BankError::Internal(_) => 500,
    }
}

/// A handler's failure: the service's own, or a request it could not read.
enum ApiError {
    Bank(BankError),
    Rejected(Rejection),
}

impl From<BankError> for ApiError {
    fn from(e: BankError) -> ApiError {
        ApiError::Bank(e)
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        ApiError::Rejected(r)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Rejected(r) => r.into_response(),
            ApiError::Bank(e) => {
                let mut resp = Rejection::new(status(&e), e.to_string()).into_response();
                if e == BankError::Unauthenticated {
                    let _ = resp.set_header("WWW-Authenticate", "Bearer");
                }
                resp
            }
        }
    }
}

#[derive(Serialize)]
struct Created {
    id: i64,
}

// W4: `async fn get_account(State(store): State<Arc<dyn Store>>, Path(id): Path<i64>)`.
async fn get_account(store: Arc<dyn Store>, req: OwnedRequest) -> Result<Json<Account>, ApiError> {
    let id: i64 = req.request().param_as("id")?;
    let account = store.account(id).await?.ok_or(BankError::NotFound)?;
    Ok(Json(account))
}

// W4: `async fn transfer(State(store): State<Arc<dyn Store>>, Json(t): Json<NewTransfer>)`.
async fn transfer(
    store: Arc<dyn Store>,
    req: OwnedRequest,
) -> Result<(u16, Json<Created>), ApiError> {
    let t: NewTransfer = req.request().json()?;
    let id = store.transfer(t).await?;
    Ok((201, Json(Created { id })))
}

/// The bearer check: one [`Tokens`] lookup, then the route, or a 401 (503 when the token
/// store cannot answer).
// W1: this layer goes over the gRPC routes too (`Router::around` covering `Router::grpc`),
// and grpc.rs's per-method check goes.
async fn auth(tokens: Arc<dyn Tokens>, req: OwnedRequest, next: Next) -> Response {
    let field = req.header("authorization").map(<[u8]>::to_vec);
    match authenticate(&*tokens, field.as_deref()).await {
        Ok(_owner) => next.run(req).await,
        Err(e) => ApiError::Bank(e).into_response(),
    }
}

/// The REST routes, under the auth layer, with JSON errors.
pub fn routes(store: Arc<dyn Store>, tokens: Arc<dyn Tokens>) -> Router {
    let read = store.clone();
    Router::new()
        .get_async("/accounts/{id}", OnWorker, move |req| {
            get_account(read.clone(), req)
        })
        .post_async("/transfers", OnWorker, move |req| {
            transfer(store.clone(), req)
        })
        .around(move |req, next| auth(tokens.clone(), req, next))
        // W3: tower-http's `CompressionLayer` here instead of the server's compression.
        .layer(ErrorRenderer(|status, message: &str| {
            #[derive(Serialize)]
            struct Problem<'a> {
                status: u16,
                error: &'a str,
            }
            (
                status,
                Json(Problem {
                    status,
                    error: message,
                }),
            )
                .into_response()
        }))
}
