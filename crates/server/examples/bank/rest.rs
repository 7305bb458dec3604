//! The REST API: `GET /accounts/{id}` (the account as JSON) and `POST /transfers` (JSON
//! `{"from","to","amount"}` → 201 `{"id"}`), with typed extractors in the handlers'
//! signatures, every error a JSON `{"status","error"}`:
//! 400 a body that is not JSON (or a path id that is not a number), 401 no or an unknown
//! bearer, 404 an unknown account, 409 insufficient funds, 415 not JSON, 422 a body of the
//! wrong shape or values no balance makes valid, 503 PostgreSQL or Redis unreachable.
//! Answers are gzip or br compressed when asked for, by tower-http's `CompressionLayer`. The auth
//! layer ([`auth`]) covers these routes and the gRPC ones alike (main.rs puts it over both).

use std::sync::Arc;

use linerate_server::{
    ErrorRenderer, IntoResponse, Json, Next, OnWorker, OwnedRequest, Path, Rejection, Response,
    Router, State, handler_async,
};
use serde::Serialize;
use tower_http::compression::CompressionLayer;

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

async fn get_account(
    State(store): State<Arc<dyn Store>>,
    Path(id): Path<i64>,
) -> Result<Json<Account>, ApiError> {
    let account = store.account(id).await?.ok_or(BankError::NotFound)?;
    Ok(Json(account))
}

async fn transfer(
    State(store): State<Arc<dyn Store>>,
    Json(t): Json<NewTransfer>,
) -> Result<(u16, Json<Created>), ApiError> {
    let id = store.transfer(t).await?;
    Ok((201, Json(Created { id })))
}

/// The bearer check, one layer over REST and gRPC: one [`Tokens`] lookup, then the route,
/// or a 401 (503 when the token store cannot answer). On a gRPC route the engine turns
/// them into UNAUTHENTICATED and UNAVAILABLE, trailers-only, with this text as the message.
pub async fn auth(req: OwnedRequest, next: Next) -> Response {
    let tokens = req.state::<Arc<dyn Tokens>>().clone();
    let field = req.header("authorization").map(<[u8]>::to_vec);
    match authenticate(&*tokens, field.as_deref()).await {
        Ok(_owner) => next.run(req).await,
        Err(e) => ApiError::Bank(e).into_response(),
    }
}

/// The REST routes, compressed (gzip, br) by tower-http, with JSON errors (the store is the
/// application's state, `Router::with_state`).
pub fn routes() -> Router {
    Router::new()
        .get_async("/accounts/{id}", OnWorker, handler_async(get_account))
        .post_async("/transfers", OnWorker, handler_async(transfer))
        .tower_layer(CompressionLayer::new())
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
