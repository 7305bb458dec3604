//! `examples/bank/` (the accounts/transfers service) in process: its router through
//! the test client, on the in-memory store and tokens, over REST (HTTP/1.1 and HTTP/2) and
//! gRPC (its generated client over `TestClient::grpc_channel`): one bearer check over both passing and failing (and failing closed when the token
//! store is down), a transfer moving money and conserving it, insufficient funds, unknown
//! accounts, bad bodies; the cache's hits and what a transfer makes it forget; and the
//! checked-in gRPC code against the .proto.

#[path = "../examples/bank/main.rs"]
#[allow(dead_code)]
mod bank;

/// bank.proto's generated client alone, over the example's messages (`crate::bank::pb`): the
/// example serves and never calls, so its own `generated.rs` has no client.
#[allow(clippy::all)]
mod bank_client {
    include!("../examples/bank/generated_client.rs");
}

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bank::proto::{Account, GetAccountRequest, TransferReply, TransferRequest};
use bank::{MemoryStore, MemoryTokens};
use bank_client::bank_client::BankClient;
use linerate_server::grpc::{self, Request, Status};
use linerate_server::testing::{TestClient, TestResponse};
use serde::Deserialize;

/// Accounts in the test ledger, and what each starts with (cents).
const ACCOUNTS: i64 = 3;
const BALANCE: i64 = 10_000;

/// A client on a fresh ledger with one good token (`good`), and the ledger.
fn bank() -> (TestClient, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::seeded(ACCOUNTS, BALANCE));
    let tokens = Arc::new(MemoryTokens::default().with("good", "owner 1"));
    (TestClient::new(bank::app(store.clone(), tokens)), store)
}

#[derive(Deserialize, Debug)]
struct Problem {
    status: u16,
    error: String,
}

#[derive(Deserialize, Debug)]
struct Created {
    id: i64,
}

fn transfer(client: &TestClient, token: &str, body: &str) -> TestResponse {
    client
        .post("/transfers")
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
}

/// A call through the generated client (`bank_client::BankClient`), served in process over
/// `TestClient::grpc_channel` (HTTP/2 framing, the same routes and layers): the status code
/// it ended with, as the wire writes it, and its answer.
fn rpc<Req, Resp, F, Fut>(
    client: &TestClient,
    token: Option<&str>,
    m: Req,
    f: F,
) -> (String, Option<Resp>)
where
    F: FnOnce(BankClient, Request<Req>) -> Fut,
    Fut: std::future::Future<Output = Result<grpc::Response<Resp>, Status>>,
{
    let mut req = Request::new(m);
    if let Some(t) = token {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {t}"))
            .unwrap();
    }
    let called = client.block_on(f(BankClient::new(client.grpc_channel()), req));
    match called {
        Ok(resp) => ("0".to_string(), Some(resp.into_inner())),
        Err(status) => ((status.code as i32).to_string(), None),
    }
}

fn get(client: &TestClient, token: Option<&str>, id: i64) -> (String, Option<Account>) {
    rpc(
        client,
        token,
        GetAccountRequest { id },
        |mut c, r| async move { c.get_account(r).await },
    )
}

fn send(
    client: &TestClient,
    token: Option<&str>,
    t: TransferRequest,
) -> (String, Option<TransferReply>) {
    rpc(
        client,
        token,
        t,
        |mut c, r| async move { c.transfer(r).await },
    )
}

#[test]
fn bank_rest_get_account_with_a_good_bearer() {
    let (client, _) = bank();
    for http2 in [false, true] {
        let mut req = client
            .get("/accounts/2")
            .header("authorization", "Bearer good");
        if http2 {
            req = req.http2();
        }
        let res = req.send();
        assert_eq!(res.status(), 200);
        let a: bank::Account = res.json().unwrap();
        assert_eq!(
            a,
            bank::Account {
                id: 2,
                owner: "owner 2".into(),
                balance: BALANCE
            }
        );
    }
}

#[test]
fn bank_rest_refuses_a_missing_or_unknown_bearer() {
    let (client, store) = bank();
    for auth in [
        None,
        Some("Bearer bad"),
        Some("Basic Z29vZA=="),
        Some("Bearer "),
    ] {
        let mut req = client.get("/accounts/1");
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let res = req.send();
        assert_eq!(res.status(), 401, "{auth:?}");
        assert_eq!(res.header("www-authenticate"), Some("Bearer"));
        let p: Problem = res.json().unwrap();
        assert_eq!(p.status, 401);
    }
    assert_eq!(
        transfer(&client, "bad", r#"{"from":1,"to":2,"amount":5}"#).status(),
        401
    );
    assert_eq!(store.transfers(), 0, "no transfer without a good bearer");
    // The scheme is case-insensitive (RFC 9110 §11.1).
    let res = client
        .get("/accounts/1")
        .header("authorization", "bearer good")
        .send();
    assert_eq!(res.status(), 200);
}

#[test]
fn bank_auth_fails_closed_when_the_token_store_is_down() {
    let store = Arc::new(MemoryStore::seeded(ACCOUNTS, BALANCE));
    let client = TestClient::new(bank::app(store.clone(), Arc::new(MemoryTokens::down())));
    let res = client
        .get("/accounts/1")
        .header("authorization", "Bearer good")
        .send();
    assert_eq!(res.status(), 503);
    let res = get(&client, Some("good"), 1);
    assert_eq!(res, ("14".to_string(), None), "UNAVAILABLE");
    assert_eq!(
        transfer(&client, "good", r#"{"from":1,"to":2,"amount":5}"#).status(),
        503
    );
    assert_eq!(store.transfers(), 0);
}

#[test]
fn bank_rest_transfer_moves_money_and_conserves_it() {
    let (client, store) = bank();
    let res = transfer(&client, "good", r#"{"from":1,"to":2,"amount":2500}"#);
    assert_eq!(res.status(), 201, "{}", res.text());
    let created: Created = res.json().unwrap();
    assert_eq!(created.id, 1);
    let balance = |id: i64| {
        let res = client
            .get(&format!("/accounts/{id}"))
            .header("authorization", "Bearer good")
            .send();
        res.json::<bank::Account>().unwrap().balance
    };
    assert_eq!(
        (balance(1), balance(2), balance(3)),
        (BALANCE - 2500, BALANCE + 2500, BALANCE)
    );
    // Many more, back and forth and round: the total never moves.
    for i in 0..30i64 {
        let (from, to) = (i % 3 + 1, (i + 1) % 3 + 1);
        let body = format!(r#"{{"from":{from},"to":{to},"amount":{}}}"#, 100 + i);
        assert_eq!(transfer(&client, "good", &body).status(), 201);
    }
    assert_eq!(store.total(), ACCOUNTS * BALANCE);
    assert_eq!(store.transfers(), 31);
}

#[test]
fn bank_rest_transfer_refuses_insufficient_funds_and_moves_nothing() {
    let (client, store) = bank();
    let res = transfer(
        &client,
        "good",
        &format!(r#"{{"from":1,"to":2,"amount":{}}}"#, BALANCE + 1),
    );
    assert_eq!(res.status(), 409);
    assert_eq!(res.json::<Problem>().unwrap().error, "insufficient funds");
    // The whole balance is not too much.
    let res = transfer(
        &client,
        "good",
        &format!(r#"{{"from":1,"to":2,"amount":{BALANCE}}}"#),
    );
    assert_eq!(res.status(), 201);
    assert_eq!(
        transfer(&client, "good", r#"{"from":1,"to":3,"amount":1}"#).status(),
        409
    );
    assert_eq!(store.transfers(), 1);
    assert_eq!(store.total(), ACCOUNTS * BALANCE);
}

#[test]
fn bank_rest_unknown_accounts_are_404() {
    let (client, store) = bank();
    let res = client
        .get("/accounts/99")
        .header("authorization", "Bearer good")
        .send();
    assert_eq!(res.status(), 404);
    assert_eq!(res.json::<Problem>().unwrap().error, "no such account");
    for body in [
        r#"{"from":99,"to":1,"amount":1}"#,
        r#"{"from":1,"to":99,"amount":1}"#,
    ] {
        assert_eq!(transfer(&client, "good", body).status(), 404, "{body}");
    }
    assert_eq!(store.transfers(), 0);
    assert_eq!(
        store.total(),
        ACCOUNTS * BALANCE,
        "a transfer to nobody takes nothing"
    );
}

#[test]
fn bank_rest_bad_bodies_and_ids() {
    let (client, store) = bank();
    let cases = [
        ("{", 400),                                 // not JSON
        (r#"{"from":1,"to":2}"#, 422),              // no amount
        (r#"{"from":1,"to":2,"amount":"5"}"#, 422), // a string amount
        (r#"{"from":1,"to":2,"amount":0}"#, 422),   // nothing to move
        (r#"{"from":1,"to":2,"amount":-5}"#, 422),  // a debit in disguise
        (r#"{"from":2,"to":2,"amount":5}"#, 422),   // paying itself
    ];
    for (body, want) in cases {
        let res = transfer(&client, "good", body);
        assert_eq!(res.status(), want, "{body}: {}", res.text());
        assert_eq!(
            res.json::<Problem>().unwrap().status,
            want,
            "{body}: JSON errors"
        );
    }
    let res = client
        .post("/transfers")
        .header("authorization", "Bearer good")
        .body(r#"{"from":1,"to":2,"amount":5}"#)
        .send();
    assert_eq!(res.status(), 415, "no content-type");
    let res = client
        .get("/accounts/one")
        .header("authorization", "Bearer good")
        .send();
    assert_eq!(res.status(), 400);
    assert_eq!(store.transfers(), 0);
}

#[test]
fn bank_grpc_get_account_with_a_good_bearer() {
    let (client, _) = bank();
    let res = get(&client, Some("good"), 3);
    let (status, account) = res;
    assert_eq!(status, "0");
    assert_eq!(
        account,
        Some(Account {
            id: 3,
            owner: "owner 3".into(),
            balance: BALANCE
        })
    );
}

#[test]
fn bank_grpc_refuses_a_missing_or_unknown_bearer() {
    let (client, store) = bank();
    for token in [None, Some("bad")] {
        let res = get(&client, token, 1);
        assert_eq!(res, ("16".to_string(), None), "UNAUTHENTICATED");
        let t = TransferRequest {
            from: 1,
            to: 2,
            amount: 5,
        };
        let res = send(&client, token, t);
        assert_eq!(res.0, "16");
    }
    assert_eq!(store.transfers(), 0);
}

#[test]
fn bank_grpc_transfer_conserves_money_and_maps_errors() {
    let (client, store) = bank();
    let t = |from, to, amount| TransferRequest { from, to, amount };
    let res = send(&client, Some("good"), t(1, 2, 700));
    assert_eq!(res, ("0".to_string(), Some(TransferReply { id: 1 })));
    let res = get(&client, Some("good"), 1);
    assert_eq!(res.1.unwrap().balance, BALANCE - 700);
    let cases = [
        (t(1, 2, BALANCE), "9"), // FAILED_PRECONDITION: 700 short
        (t(1, 99, 1), "5"),      // NOT_FOUND
        (t(99, 1, 1), "5"),
        (t(1, 2, 0), "3"), // INVALID_ARGUMENT
        (t(1, 1, 1), "3"),
    ];
    for (req, want) in cases {
        let res = send(&client, Some("good"), req);
        assert_eq!(res.0, want, "{req:?}");
    }
    let res = get(&client, Some("good"), 42);
    assert_eq!(res.0, "5");
    assert_eq!(store.transfers(), 1);
    assert_eq!(store.total(), ACCOUNTS * BALANCE);
}

/// Tokens that count the lookups that reach them (what the cache saves).
struct Counted(MemoryTokens, AtomicUsize);

impl bank::Tokens for Counted {
    fn owner(&self, token: &str) -> bank::BoxFuture<Result<Option<String>, bank::BankError>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.owner(token)
    }
}

/// The cache (`bank ADDR CACHE_MS`): a token's owner is asked once and then kept, an unknown
/// token is asked every time; an account read is kept, and a transfer through the service
/// forgets both its accounts, so the next read (REST or gRPC) shows the new balances.
#[test]
fn bank_cache_keeps_hits_and_forgets_what_a_transfer_changes() {
    let ttl = std::time::Duration::from_secs(3600);
    let store = Arc::new(MemoryStore::seeded(ACCOUNTS, BALANCE));
    let counted = Arc::new(Counted(
        MemoryTokens::default().with("good", "owner 1"),
        AtomicUsize::new(0),
    ));
    let client = TestClient::new(bank::app(
        Arc::new(bank::CachedStore::new(store.clone(), ttl)),
        Arc::new(bank::CachedTokens::new(counted.clone(), ttl)),
    ));
    let balance = |id: i64| {
        let res = client
            .get(&format!("/accounts/{id}"))
            .header("authorization", "Bearer good")
            .send();
        assert_eq!(res.status(), 200);
        res.json::<bank::Account>().unwrap().balance
    };
    assert_eq!((balance(1), balance(2)), (BALANCE, BALANCE));
    assert_eq!(counted.1.load(Ordering::SeqCst), 1, "the owner was kept");
    for _ in 0..2 {
        let res = client
            .get("/accounts/1")
            .header("authorization", "Bearer bad")
            .send();
        assert_eq!(res.status(), 401);
    }
    assert_eq!(
        counted.1.load(Ordering::SeqCst),
        3,
        "an unknown token is asked each time"
    );
    let res = transfer(&client, "good", r#"{"from":1,"to":2,"amount":250}"#);
    assert_eq!(res.status(), 201);
    assert_eq!((balance(1), balance(2)), (BALANCE - 250, BALANCE + 250));
    let res = send(
        &client,
        Some("good"),
        TransferRequest {
            from: 2,
            to: 1,
            amount: 50,
        },
    );
    assert_eq!(res.0, "0");
    assert_eq!(
        get(&client, Some("good"), 2).1.unwrap().balance,
        BALANCE + 200
    );
    assert_eq!(balance(1), BALANCE - 200);
    assert_eq!(store.total(), ACCOUNTS * BALANCE);
    // A TTL of zero keeps nothing.
    let zero = bank::Ttl::<i64, i64>::new(std::time::Duration::ZERO);
    zero.put(1, 1);
    assert_eq!(zero.get(&1), None);
    let kept = bank::Ttl::<i64, i64>::new(ttl);
    kept.put(1, 7);
    assert_eq!(kept.get(&1), Some(7));
    kept.forget(&1);
    assert_eq!(kept.get(&1), None);
}

/// The gRPC code checked in as `examples/bank/generated.rs` (the messages and the server) and
/// `generated_client.rs` (the client alone) is what `linerate_grpc::build` makes of
/// `bench/bank/bank.proto` now (a stale copy would serve or call an old API). With
/// `LINERATE_BLESS=1` the files are written anew instead.
#[test]
fn bank_generated_code_is_what_the_proto_compiles_to() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto = root.join("../../bench/bank");
    let out = std::env::temp_dir().join(format!("linerate-bank-proto-{}", std::process::id()));
    let made = |name: &str, builder: linerate_grpc::build::Builder| {
        let dir = out.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        builder
            .out_dir(&dir)
            .compile(&["bank.proto"], &[&proto])
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::read_to_string(dir.join("bank.rs")).unwrap()
    };
    let server = made(
        "server",
        linerate_grpc::build::configure().build_client(false),
    );
    let client = made(
        "client",
        linerate_grpc::build::configure()
            .build_server(false)
            .extern_path(".bank", "crate::bank::pb"),
    );
    let _ = std::fs::remove_dir_all(&out);
    for (file, made) in [("generated.rs", server), ("generated_client.rs", client)] {
        let kept = root.join("examples/bank").join(file);
        if std::env::var_os("LINERATE_BLESS").is_some() {
            std::fs::write(&kept, &made).unwrap();
        }
        let checked_in = std::fs::read_to_string(&kept).unwrap_or_default();
        assert!(
            checked_in == made,
            "examples/bank/{file} is stale: run this test with LINERATE_BLESS=1"
        );
    }
}
