//! In-memory [`Store`] and [`Tokens`]: the service's routes without PostgreSQL or Redis, for
//! tests. One lock over the whole ledger makes every transfer atomic, as the database's
//! transaction does; nothing is kept past the process.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::store::{Account, BankError, BoxFuture, NewTransfer, Store, Tokens, check_transfer};

/// Accounts and the transfers made between them.
#[derive(Default)]
pub struct MemoryStore {
    ledger: Mutex<Ledger>,
}

#[derive(Default)]
struct Ledger {
    accounts: BTreeMap<i64, Account>,
    /// Every transfer made, in order; a transfer's id is its place here, from 1.
    transfers: Vec<NewTransfer>,
}

impl MemoryStore {
    /// Accounts `1..=n`, each owned by `owner N` and holding `balance` cents.
    pub fn seeded(n: i64, balance: i64) -> MemoryStore {
        let store = MemoryStore::default();
        {
            let mut ledger = store.ledger.lock().unwrap();
            for id in 1..=n {
                let owner = format!("owner {id}");
                ledger.accounts.insert(id, Account { id, owner, balance });
            }
        }
        store
    }

    /// The sum of every balance (what a transfer must never change).
    pub fn total(&self) -> i64 {
        let ledger = self.ledger.lock().unwrap();
        ledger.accounts.values().map(|a| a.balance).sum()
    }

    /// How many transfers were made.
    pub fn transfers(&self) -> usize {
        self.ledger.lock().unwrap().transfers.len()
    }
}

impl Store for MemoryStore {
    fn account(&self, id: i64) -> BoxFuture<Result<Option<Account>, BankError>> {
        let found = self.ledger.lock().unwrap().accounts.get(&id).cloned();
        Box::pin(std::future::ready(Ok(found)))
    }

    fn transfer(&self, t: NewTransfer) -> BoxFuture<Result<i64, BankError>> {
        let done = check_transfer(&t).and_then(|()| {
            let mut ledger = self.ledger.lock().unwrap();
            let accounts = &mut ledger.accounts;
            let have = accounts.get(&t.from).ok_or(BankError::NotFound)?.balance;
            if !accounts.contains_key(&t.to) {
                return Err(BankError::NotFound);
            }
            if have < t.amount {
                return Err(BankError::InsufficientFunds);
            }
            accounts.entry(t.from).and_modify(|a| a.balance -= t.amount);
            accounts.entry(t.to).and_modify(|a| a.balance += t.amount);
            ledger.transfers.push(t);
            Ok(ledger.transfers.len() as i64)
        });
        Box::pin(std::future::ready(done))
    }
}

/// Bearer tokens and their owners, or a token store that is down.
#[derive(Default)]
pub struct MemoryTokens {
    owners: HashMap<String, String>,
    down: bool,
}

impl MemoryTokens {
    /// `token` belongs to `owner`.
    pub fn with(mut self, token: &str, owner: &str) -> MemoryTokens {
        self.owners.insert(token.to_string(), owner.to_string());
        self
    }

    /// A token store that answers nothing (Redis stopped).
    pub fn down() -> MemoryTokens {
        MemoryTokens {
            down: true,
            ..MemoryTokens::default()
        }
    }
}

impl Tokens for MemoryTokens {
    fn owner(&self, token: &str) -> BoxFuture<Result<Option<String>, BankError>> {
        let answer = match self.down {
            true => Err(BankError::Unavailable("the token store".into())),
            false => Ok(self.owners.get(token).cloned()),
        };
        Box::pin(std::future::ready(answer))
    }
}
