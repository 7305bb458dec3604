//! The service's seams: [`Store`] (accounts and transfers) and [`Tokens`] (who a bearer token
//! belongs to), the errors both APIs map to their statuses, and the checks every call makes
//! before it touches either (a transfer's values, the bearer's form). Knows no wire format
//! and no database: `postgres.rs`/`redis_tokens.rs` implement the seams for the service,
//! `memory.rs` for tests.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// A seam's answer, awaited on the worker's runtime.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One account, as both APIs show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Account {
    pub id: i64,
    pub owner: String,
    /// In cents.
    pub balance: i64,
}

/// A transfer asked for (`POST /transfers`' body, gRPC's `TransferRequest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTransfer {
    pub from: i64,
    pub to: i64,
    /// In cents.
    pub amount: i64,
}

/// Why a call failed; each API maps it to its status (REST: `rest::status`, gRPC:
/// `grpc::status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BankError {
    /// No bearer token, or one that [`Tokens`] does not know (401 / UNAUTHENTICATED).
    Unauthenticated,
    /// No such account (404 / NOT_FOUND).
    NotFound,
    /// The payer's balance is below the amount (409 / FAILED_PRECONDITION).
    InsufficientFunds,
    /// A transfer no balance could make valid: an amount not above zero, an account paying
    /// itself (422 / INVALID_ARGUMENT).
    Invalid(&'static str),
    /// PostgreSQL or Redis cannot be reached: the call fails, closed (503 / UNAVAILABLE).
    Unavailable(String),
    /// A query failed otherwise (500 / INTERNAL); logged where it happens.
    Internal(String),
}

impl fmt::Display for BankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BankError::Unauthenticated => f.write_str("a valid bearer token is required"),
            BankError::NotFound => f.write_str("no such account"),
            BankError::InsufficientFunds => f.write_str("insufficient funds"),
            BankError::Invalid(why) => f.write_str(why),
            BankError::Unavailable(what) => write!(f, "{what} is unavailable"),
            BankError::Internal(_) => f.write_str("the query failed"),
        }
    }
}

/// Where accounts and transfers live.
pub trait Store: Send + Sync + 'static {
    /// The account `id`, or `None`.
    fn account(&self, id: i64) -> BoxFuture<Result<Option<Account>, BankError>>;

    /// Moves `t.amount` from `t.from` to `t.to` atomically (both or neither), after
    /// [`check_transfer`]; the transfer's id.
    fn transfer(&self, t: NewTransfer) -> BoxFuture<Result<i64, BankError>>;
}

/// Who bearer tokens belong to.
pub trait Tokens: Send + Sync + 'static {
    /// The owner of `token`, or `None` for a token nobody has.
    fn owner(&self, token: &str) -> BoxFuture<Result<Option<String>, BankError>>;
}

/// What no store needs to see: an amount not above zero, an account paying itself.
pub fn check_transfer(t: &NewTransfer) -> Result<(), BankError> {
    if t.amount <= 0 {
        return Err(BankError::Invalid("the amount must be above zero"));
    }
    if t.from == t.to {
        return Err(BankError::Invalid("an account cannot pay itself"));
    }
    Ok(())
}

/// The token of an `Authorization: Bearer TOKEN` field (REST's header, gRPC's metadata).
/// The scheme is case-insensitive (RFC 9110 §11.1).
pub fn bearer(field: Option<&[u8]>) -> Option<&str> {
    let field = std::str::from_utf8(field?).ok()?;
    let (scheme, token) = field.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The caller's owner name, or why there is none: the one auth check both APIs make (one
/// Redis `GET` per call). A token store that cannot answer fails the call closed.
pub async fn authenticate(tokens: &dyn Tokens, field: Option<&[u8]>) -> Result<String, BankError> {
    let token = bearer(field).ok_or(BankError::Unauthenticated)?;
    tokens.owner(token).await?.ok_or(BankError::Unauthenticated)
}
