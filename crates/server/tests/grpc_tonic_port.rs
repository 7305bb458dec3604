//! A tonic service's handlers moved to linerate with only their `use` lines changed: the
//! bank's `bank.Bank` (bench/bank/bank.proto, the example's checked-in generated code) on an
//! in-memory ledger, its bodies written as a tonic team writes them (`Status::not_found`,
//! `e.code() == Code::NotFound`, `e.message()`, `request.get_ref()`, `request.into_inner()`,
//! `request.metadata().get(…)`, `Response::new`), called in process through the generated
//! client with tonic's client idioms, the statuses read back as tonic's accessors read them.

/// The example's generated messages, server trait and client, where the client looks for
/// them (`crate::bank::pb`).
mod bank {
    #[allow(clippy::all, dead_code)]
    pub mod pb {
        include!("../examples/bank/generated.rs");
    }
}

#[allow(clippy::all)]
mod bank_client {
    include!("../examples/bank/generated_client.rs");
}

/// The service as the tonic team wrote it. Against tonic 0.14 the same module compiles with
/// `use tonic::{Code, Request, Response, Status};`, the tonic-build module's paths, and
/// `#[tonic::async_trait]` over the impl (linerate's trait takes plain `async fn`s).
mod ported {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use crate::bank::pb::bank_server::Bank;
    use crate::bank::pb::{Account, GetAccountRequest, TransferReply, TransferRequest};
    use linerate_server::grpc::{Code, Request, Response, Status};

    pub struct Ledger {
        pub accounts: Mutex<HashMap<i64, Account>>,
        pub transfers: Mutex<i64>,
    }

    impl Ledger {
        fn account(&self, id: i64) -> Result<Account, Status> {
            let accounts = self.accounts.lock().unwrap();
            match accounts.get(&id) {
                Some(a) => Ok(a.clone()),
                None => Err(Status::not_found(format!("account {id}"))),
            }
        }
    }

    impl Bank for Ledger {
        async fn get_account(
            &self,
            request: Request<GetAccountRequest>,
        ) -> Result<Response<Account>, Status> {
            if request.metadata().get("x-user").is_none() {
                return Err(Status::unauthenticated("no x-user"));
            }
            let id = request.get_ref().id;
            let account = self.account(id)?;
            Ok(Response::new(account))
        }

        async fn transfer(
            &self,
            request: Request<TransferRequest>,
        ) -> Result<Response<TransferReply>, Status> {
            let m = request.into_inner();
            if m.amount <= 0 {
                return Err(Status::invalid_argument("the amount must be above zero"));
            }
            if m.from == m.to {
                return Err(Status::new(
                    Code::InvalidArgument,
                    "an account cannot pay itself",
                ));
            }
            let payer = self.account(m.from)?;
            match self.account(m.to) {
                Ok(_) => {}
                Err(e) if e.code() == Code::NotFound => {
                    return Err(Status::not_found(format!("payee: {}", e.message())));
                }
                Err(e) => return Err(e),
            }
            if payer.balance < m.amount {
                return Err(Status::failed_precondition("insufficient funds"));
            }
            let mut accounts = self.accounts.lock().unwrap();
            accounts.get_mut(&m.from).unwrap().balance -= m.amount;
            accounts.get_mut(&m.to).unwrap().balance += m.amount;
            let mut n = self.transfers.lock().unwrap();
            *n += 1;
            Ok(Response::new(TransferReply { id: *n }))
        }
    }
}

use std::collections::HashMap;
use std::sync::Mutex;

use bank::pb::bank_server::BankServer;
use bank::pb::{Account, GetAccountRequest, TransferRequest};
use bank_client::bank_client::BankClient;
use linerate_server::Router;
use linerate_server::grpc::{Code, Request, Status};
use linerate_server::testing::TestClient;

fn client() -> TestClient {
    let accounts = (1..=2)
        .map(|id| {
            let owner = format!("owner {id}");
            (
                id,
                Account {
                    id,
                    owner,
                    balance: 100,
                },
            )
        })
        .collect::<HashMap<_, _>>();
    let ledger = ported::Ledger {
        accounts: Mutex::new(accounts),
        transfers: Mutex::new(0),
    };
    TestClient::new(Router::new().grpc(BankServer::new(ledger)))
}

fn transfer(client: &TestClient, from: i64, to: i64, amount: i64) -> Result<i64, Status> {
    client.block_on(async {
        let mut bank = BankClient::new(client.grpc_channel());
        let request = Request::new(TransferRequest { from, to, amount });
        let reply = bank.transfer(request).await?;
        Ok(reply.into_inner().id)
    })
}

#[test]
fn a_tonic_handler_ported_with_its_imports_only_answers_as_under_tonic() {
    let client = client();
    let get = |id: i64, user: Option<&str>| {
        client.block_on(async {
            let mut bank = BankClient::new(client.grpc_channel());
            let mut request = Request::new(GetAccountRequest { id });
            if let Some(user) = user {
                request.metadata_mut().insert("x-user", user).unwrap();
            }
            bank.get_account(request).await
        })
    };
    let account = get(1, Some("ann")).unwrap().into_inner();
    assert_eq!((account.id, account.balance), (1, 100));
    // grpc-status 5 and its message, read as tonic reads them.
    let e = get(9, Some("ann")).unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::NotFound, "account 9"));
    assert!(e.details().is_empty());
    // The fields stay, for the code that reads them.
    assert_eq!((e.code, e.message.as_str()), (Code::NotFound, "account 9"));
    assert_eq!(get(1, None).unwrap_err().code(), Code::Unauthenticated);

    assert_eq!(transfer(&client, 1, 2, 30), Ok(1));
    let e = transfer(&client, 1, 7, 30).unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "payee: account 7")
    );
    let e = transfer(&client, 1, 2, 1000).unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::FailedPrecondition, "insufficient funds")
    );
    assert_eq!(
        transfer(&client, 1, 2, 0).unwrap_err().code(),
        Code::InvalidArgument
    );
    let e = transfer(&client, 2, 2, 5).unwrap_err();
    let want = Status::invalid_argument("an account cannot pay itself");
    assert_eq!((e.code(), e.message()), (want.code(), want.message()));
    assert_eq!(get(2, Some("ann")).unwrap().into_inner().balance, 130);
}

#[test]
fn status_constructors_and_codes_are_named_as_tonics() {
    type Make = fn(&'static str) -> Status;
    let table: [(Make, Code, i32); 16] = [
        (Status::cancelled, Code::Cancelled, 1),
        (Status::unknown, Code::Unknown, 2),
        (Status::invalid_argument, Code::InvalidArgument, 3),
        (Status::deadline_exceeded, Code::DeadlineExceeded, 4),
        (Status::not_found, Code::NotFound, 5),
        (Status::already_exists, Code::AlreadyExists, 6),
        (Status::permission_denied, Code::PermissionDenied, 7),
        (Status::resource_exhausted, Code::ResourceExhausted, 8),
        (Status::failed_precondition, Code::FailedPrecondition, 9),
        (Status::aborted, Code::Aborted, 10),
        (Status::out_of_range, Code::OutOfRange, 11),
        (Status::unimplemented, Code::Unimplemented, 12),
        (Status::internal, Code::Internal, 13),
        (Status::unavailable, Code::Unavailable, 14),
        (Status::data_loss, Code::DataLoss, 15),
        (Status::unauthenticated, Code::Unauthenticated, 16),
    ];
    for (make, code, n) in table {
        let s = make("why");
        assert_eq!(
            (s.code(), s.message(), s.details()),
            (code, "why", &b""[..])
        );
        assert_eq!((i32::from(code), Code::from(n)), (n, code));
        assert!(!code.description().is_empty());
    }
    assert_eq!(Status::ok().code(), Code::Ok);
    assert_eq!(Code::from(99), Code::Unknown);
    assert_eq!(
        Code::NotFound.description(),
        "Some requested entity was not found"
    );
    let s = Status::with_details(Code::Aborted, "x", bytes::Bytes::from_static(b"\x08\x0a"));
    assert_eq!(s.details(), b"\x08\x0a");
}

/// A failed call's `Status::metadata` goes out with its status (a trailers-only answer's head
/// over HTTP/2, the trailer frame over gRPC-Web), and a client reads it back from the status,
/// as tonic's `Status::metadata`.
#[test]
fn a_failed_calls_status_metadata_reaches_the_client() {
    use linerate_grpc::proto::grpc::health::v1::{HealthCheckRequest, HealthCheckResponse};
    use linerate_server::grpc::{Method, Response, Service};

    struct Busy;
    impl Service for Busy {
        fn name(&self) -> &'static str {
            "test.Busy"
        }
        fn methods(self) -> Vec<Method> {
            vec![Method::unary(
                "/test.Busy/Check",
                |_: Request<HealthCheckRequest>| {
                    let mut status = Status::unavailable("later");
                    status
                        .metadata_mut()
                        .insert("retry-after-ms", "50")
                        .unwrap();
                    status
                        .metadata_mut()
                        .insert_bin("x-why-bin", vec![0, 1])
                        .unwrap();
                    std::future::ready(Err::<Response<HealthCheckResponse>, _>(status))
                },
            )]
        }
    }
    let client = TestClient::new(Router::new().grpc(Busy));
    let e = client
        .block_on(async {
            let grpc = linerate_server::grpc::client::Grpc::new(client.grpc_channel());
            grpc.unary::<_, HealthCheckResponse>(
                "/test.Busy/Check",
                Request::new(HealthCheckRequest::default()),
            )
            .await
        })
        .unwrap_err();
    assert_eq!((e.code(), e.message()), (Code::Unavailable, "later"));
    assert_eq!(e.metadata().get("retry-after-ms"), Some("50"));
    assert_eq!(e.metadata().get_bin("x-why-bin"), Some(&[0u8, 1][..]));
    // gRPC-Web: the trailer frame carries them.
    let r = client
        .post("/test.Busy/Check")
        .header("content-type", "application/grpc-web+proto")
        .body(vec![0, 0, 0, 0, 0])
        .send();
    let body = String::from_utf8_lossy(r.body()).into_owned();
    assert!(body.contains("grpc-status:14\r\n"), "{body:?}");
    assert!(body.contains("retry-after-ms:50\r\n"), "{body:?}");
    assert!(body.contains("x-why-bin:AAE\r\n"), "{body:?}");
}
