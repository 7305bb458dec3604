//! The gRPC API: `bank.Bank` (bench/bank/bank.proto) over the same [`Store`] and [`Tokens`]
//! as REST, under the same auth layer (rest.rs's `auth`, whose 401 the engine makes
//! UNAUTHENTICATED): the methods see only authenticated calls. They answer NOT_FOUND an unknown account,
//! FAILED_PRECONDITION insufficient funds, INVALID_ARGUMENT an amount not above zero or an
//! account paying itself, UNAUTHENTICATED no or an unknown bearer, UNAVAILABLE PostgreSQL or
//! Redis unreachable.

use std::sync::Arc;

use linerate_server::grpc::{Code, Request, Response, Status};

use super::pb;
use super::store::{BankError, NewTransfer, Store};

/// The gRPC status of a [`BankError`].
pub fn status(e: BankError) -> Status {
    let code = match e {
        BankError::Unauthenticated => Code::Unauthenticated,
        BankError::NotFound => Code::NotFound,
        BankError::InsufficientFunds => Code::FailedPrecondition,
        BankError::Invalid(_) => Code::InvalidArgument,
        BankError::Unavailable(_) => Code::Unavailable,
        BankError::Internal(_) => Code::Internal,
    };
    Status::new(code, e.to_string())
}

/// `bank.Bank` (see the module doc).
pub struct Bank {
    pub store: Arc<dyn Store>,
}

impl pb::bank_server::Bank for Bank {
    async fn get_account(
        &self,
        req: Request<pb::GetAccountRequest>,
    ) -> Result<Response<pb::Account>, Status> {
        let id = req.get_ref().id;
        let a = self
            .store
            .account(id)
            .await
            .map_err(status)?
            .ok_or_else(|| status(BankError::NotFound))?;
        Ok(Response::new(pb::Account {
            id: a.id,
            owner: a.owner,
            balance: a.balance,
        }))
    }

    async fn transfer(
        &self,
        req: Request<pb::TransferRequest>,
    ) -> Result<Response<pb::TransferReply>, Status> {
        let m = req.get_ref();
        let t = NewTransfer {
            from: m.from,
            to: m.to,
            amount: m.amount,
        };
        let id = self.store.transfer(t).await.map_err(status)?;
        Ok(Response::new(pb::TransferReply { id }))
    }
}
