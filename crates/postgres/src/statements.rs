//! The application's statements: registered by name and SQL before the pool starts, prepared
//! on every connection when it opens (again on each reconnect), and found on the request path
//! by a [`StatementId`], an index into the connection's prepared list (no hashing, no lock).
//!
//! Invariant: every connection of a pool holds its statements in registration order, so one
//! id names the same statement on all of them.
#![forbid(unsafe_code)]

use tokio_postgres::{Client, Statement};

use crate::error::PgOpenError;

/// A registered statement, as [`Builder::prepare`](crate::Builder::prepare) returns it: the
/// index of the statement among its pool's, valid on every connection of that pool (one from
/// another builder names another statement, or panics when used).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatementId(pub(crate) u32);

impl StatementId {
    /// The statement's place in registration order (0 for the first registered).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One registered statement.
#[derive(Debug, Clone)]
struct Spec {
    name: Box<str>,
    sql: Box<str>,
}

/// The registered statements, in registration order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Specs(Vec<Spec>);

impl Specs {
    /// Registers `sql` as `name`; its id is its place. A duplicate name is refused at connect
    /// ([`Specs::duplicate`]), so that registering stays infallible and chainable.
    pub(crate) fn add(&mut self, name: &str, sql: &str) -> StatementId {
        let id = u32::try_from(self.0.len()).expect("fewer than 2^32 statements");
        self.0.push(Spec {
            name: name.into(),
            sql: sql.into(),
        });
        StatementId(id)
    }

    /// The id of the statement registered as `name` (the first, if registered twice).
    pub(crate) fn id(&self, name: &str) -> Option<StatementId> {
        let at = self.0.iter().position(|s| &*s.name == name)?;
        Some(StatementId(at as u32))
    }

    /// A name registered twice, if any.
    pub(crate) fn duplicate(&self) -> Option<&str> {
        self.0.iter().enumerate().find_map(|(i, s)| {
            self.0[..i]
                .iter()
                .any(|earlier| earlier.name == s.name)
                .then_some(&*s.name)
        })
    }

    /// The first statement that would open a transaction or leave session state on a shared
    /// connection, with what it uses (`shared_sql.rs`).
    pub(crate) fn session_effect(&self) -> Option<(&str, &'static str)> {
        self.0
            .iter()
            .find_map(|s| crate::shared_sql::session_effect(&s.sql).map(|what| (&*s.name, what)))
    }

    /// The name of statement `index`.
    pub(crate) fn name(&self, index: usize) -> &str {
        &self.0[index].name
    }

    /// Prepares every statement on `client`, in order.
    pub(crate) async fn prepare(&self, client: &Client) -> Result<Box<[Statement]>, PgOpenError> {
        let mut prepared = Vec::with_capacity(self.0.len());
        for (i, spec) in self.0.iter().enumerate() {
            let st = client
                .prepare(&spec.sql)
                .await
                .map_err(|e| PgOpenError::Prepare(i, e))?;
            prepared.push(st);
        }
        Ok(prepared.into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_places_and_names_find_them() {
        let mut specs = Specs::default();
        let rows = [
            ("user_by_id", "SELECT name FROM users WHERE id = $1"),
            ("all_users", "SELECT id, name FROM users"),
            ("rename", "UPDATE users SET name = $2 WHERE id = $1"),
        ];
        for (i, (name, sql)) in rows.iter().enumerate() {
            assert_eq!(specs.add(name, sql).index(), i, "{name}");
        }
        for (i, (name, _)) in rows.iter().enumerate() {
            assert_eq!(specs.id(name), Some(StatementId(i as u32)), "{name}");
            assert_eq!(specs.name(i), *name);
        }
        assert_eq!(specs.id("missing"), None);
        assert_eq!(specs.duplicate(), None);
    }

    #[test]
    fn a_name_registered_twice_is_found() {
        for (names, twice) in [
            (&["a", "b", "a"][..], Some("a")),
            (&["a", "b", "c", "b"][..], Some("b")),
            (&["a", "b", "c"][..], None),
            (&[][..], None),
        ] {
            let mut specs = Specs::default();
            for name in names {
                specs.add(name, "SELECT 1");
            }
            assert_eq!(specs.duplicate(), twice, "{names:?}");
        }
    }
}
