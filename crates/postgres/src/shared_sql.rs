//! Which statements may run on a shared connection. The pool's pipelined connections carry
//! several requests' statements at once, so a statement registered for them must leave the
//! session as it found it: no transaction opened or ended (`BEGIN` would pull the next
//! requests' statements into this one's transaction, and its `ROLLBACK` would undo their
//! acknowledged writes), no session state (`SET`, `LISTEN`, cursors, temporary tables,
//! session advisory locks, `set_config`). [`session_effect`] finds such a statement by its
//! words (comments, strings, quoted names and dollar quotes skipped), before any connection
//! opens; those statements run on a [`Session`](crate::Session), which one request holds alone.
//!
//! What it cannot see: a server-side function whose body sets session state. A prepared
//! statement is one command (PostgreSQL refuses several), and no function can open a
//! transaction block, so transactions are always caught.
#![forbid(unsafe_code)]

/// The first command words that open or end a transaction, or leave state on the session.
const SESSION_COMMANDS: &[&str] = &[
    "ABORT",
    "BEGIN",
    "CLOSE",
    "COMMIT",
    "DEALLOCATE",
    "DECLARE",
    "DISCARD",
    "END",
    "EXECUTE",
    "FETCH",
    "LISTEN",
    "LOAD",
    "LOCK",
    "MOVE",
    "PREPARE",
    "RELEASE",
    "RESET",
    "ROLLBACK",
    "SAVEPOINT",
    "SET",
    "START",
    "UNLISTEN",
];

/// Functions whose effect outlives the statement on the session (the `_xact_` advisory locks
/// end with the statement's own transaction, so they are not here).
const SESSION_FUNCTIONS: &[&str] = &[
    "dblink_connect",
    "pg_advisory_lock",
    "pg_advisory_lock_shared",
    "pg_advisory_unlock",
    "pg_advisory_unlock_all",
    "pg_advisory_unlock_shared",
    "pg_try_advisory_lock",
    "pg_try_advisory_lock_shared",
    "set_config",
];

/// What in `sql` would open a transaction or leave state on the session, named as written in
/// SQL (`"BEGIN"`, `"set_config"`, `"CREATE TEMP"`); `None` for a statement that leaves the
/// session as it found it.
pub(crate) fn session_effect(sql: &str) -> Option<&'static str> {
    let words = Words::new(sql);
    let mut first: Option<String> = None;
    let mut prev = String::new();
    for (word, call) in words {
        let upper = word.to_ascii_uppercase();
        let Some(command) = first.as_deref() else {
            if let Some(found) = SESSION_COMMANDS.iter().find(|c| **c == upper) {
                return Some(found);
            }
            first = Some(upper.clone());
            prev = upper;
            continue;
        };
        if call {
            let lower = word.to_ascii_lowercase();
            if let Some(found) = SESSION_FUNCTIONS.iter().find(|f| **f == lower) {
                return Some(found);
            }
        }
        // CREATE [OR REPLACE] [GLOBAL | LOCAL] TEMP[ORARY] …, and SELECT … INTO TEMP ….
        let temp = upper == "TEMP" || upper == "TEMPORARY";
        let after_create = matches!(prev.as_str(), "CREATE" | "REPLACE" | "GLOBAL" | "LOCAL")
            && command == "CREATE";
        let select_into = prev == "INTO" && command == "SELECT";
        if temp && (after_create || select_into) {
            return Some("CREATE TEMP");
        }
        prev = upper;
    }
    None
}

/// The words of a statement outside comments, string literals, quoted identifiers and dollar
/// quotes, each with whether a `(` follows it (a function call).
struct Words<'a> {
    sql: &'a [u8],
    at: usize,
}

impl<'a> Words<'a> {
    fn new(sql: &'a str) -> Words<'a> {
        Words {
            sql: sql.as_bytes(),
            at: 0,
        }
    }

    fn peek(&self, ahead: usize) -> u8 {
        self.sql.get(self.at + ahead).copied().unwrap_or(0)
    }

    /// Skips past the end of a quoted run that began just before `at`, closed by `close`; a
    /// doubled `close` stands for itself, and with `backslash` a `\` escapes the next byte.
    fn skip_quoted(&mut self, close: u8, backslash: bool) {
        while self.at < self.sql.len() {
            let b = self.sql[self.at];
            self.at += 1;
            if backslash && b == b'\\' {
                self.at += 1;
            } else if b == close {
                if self.peek(0) == close {
                    self.at += 1;
                } else {
                    return;
                }
            }
        }
    }

    /// Skips a `/* … */` comment (nested, as PostgreSQL reads them) whose `/*` is at `at`.
    fn skip_block_comment(&mut self) {
        let mut depth = 0usize;
        while self.at < self.sql.len() {
            if self.peek(0) == b'/' && self.peek(1) == b'*' {
                depth += 1;
                self.at += 2;
            } else if self.peek(0) == b'*' && self.peek(1) == b'/' {
                depth -= 1;
                self.at += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.at += 1;
            }
        }
    }

    /// At a `$`: skips a dollar-quoted string (`$tag$ … $tag$`) and returns true, or returns
    /// false for a parameter (`$1`) or a lone `$`.
    fn skip_dollar_quote(&mut self) -> bool {
        let start = self.at;
        if self.peek(1).is_ascii_digit() {
            return false;
        }
        let mut end = start + 1;
        while end < self.sql.len() && is_word_byte(self.sql[end]) {
            end += 1;
        }
        if self.sql.get(end) != Some(&b'$') {
            return false;
        }
        let tag = &self.sql[start..=end];
        let body = end + 1;
        self.at = match self.sql[body..].windows(tag.len()).position(|w| w == tag) {
            Some(i) => body + i + tag.len(),
            None => self.sql.len(),
        };
        true
    }
}

impl Words<'_> {
    /// Whether the next byte past white space is `(`.
    fn call_follows(&self) -> bool {
        let mut next = self.at;
        while next < self.sql.len() && self.sql[next].is_ascii_whitespace() {
            next += 1;
        }
        self.sql.get(next) == Some(&b'(')
    }
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

impl<'a> Iterator for Words<'a> {
    type Item = (&'a str, bool);

    fn next(&mut self) -> Option<(&'a str, bool)> {
        while self.at < self.sql.len() {
            let b = self.sql[self.at];
            match b {
                b'-' if self.peek(1) == b'-' => {
                    while self.at < self.sql.len() && self.sql[self.at] != b'\n' {
                        self.at += 1;
                    }
                }
                b'/' if self.peek(1) == b'*' => self.skip_block_comment(),
                b'\'' => {
                    self.at += 1;
                    self.skip_quoted(b'\'', false);
                }
                // A quoted name is a word too: `"set_config"(…)` calls set_config.
                b'"' => {
                    let start = self.at + 1;
                    self.at += 1;
                    self.skip_quoted(b'"', false);
                    let end = self.at.saturating_sub(1).max(start);
                    let word = std::str::from_utf8(&self.sql[start..end]).unwrap_or("");
                    return Some((word, self.call_follows()));
                }
                b'$' => {
                    if !self.skip_dollar_quote() {
                        self.at += 1;
                        while self.at < self.sql.len() && self.sql[self.at].is_ascii_digit() {
                            self.at += 1;
                        }
                    }
                }
                // E'…' strings take backslash escapes.
                b'E' | b'e' if self.peek(1) == b'\'' => {
                    self.at += 2;
                    self.skip_quoted(b'\'', true);
                }
                _ if is_word_byte(b) && !b.is_ascii_digit() => {
                    let start = self.at;
                    while self.at < self.sql.len()
                        && (is_word_byte(self.sql[self.at]) || self.sql[self.at] == b'$')
                    {
                        self.at += 1;
                    }
                    // Whole words only: a word boundary is an ASCII byte, so this is UTF-8.
                    let word = std::str::from_utf8(&self.sql[start..self.at]).unwrap_or("");
                    return Some((word, self.call_follows()));
                }
                _ if b.is_ascii_digit() => {
                    while self.at < self.sql.len()
                        && (self.sql[self.at].is_ascii_alphanumeric() || self.sql[self.at] == b'.')
                    {
                        self.at += 1;
                    }
                }
                _ => self.at += 1,
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_that_leave_state_on_the_session_are_found() {
        for (sql, want) in [
            // Transaction control (PostgreSQL's SQL commands reference).
            ("BEGIN", Some("BEGIN")),
            ("begin isolation level serializable", Some("BEGIN")),
            ("  -- open one\n  START TRANSACTION", Some("START")),
            ("/* a /* nested */ comment */ commit", Some("COMMIT")),
            ("END", Some("END")),
            ("ROLLBACK", Some("ROLLBACK")),
            ("ABORT", Some("ABORT")),
            ("SAVEPOINT a", Some("SAVEPOINT")),
            ("RELEASE SAVEPOINT a", Some("RELEASE")),
            ("PREPARE TRANSACTION 'x'", Some("PREPARE")),
            // Session state.
            ("SET search_path = app", Some("SET")),
            ("set local statement_timeout = 5", Some("SET")),
            ("RESET ALL", Some("RESET")),
            ("LISTEN jobs", Some("LISTEN")),
            ("UNLISTEN *", Some("UNLISTEN")),
            ("DECLARE c CURSOR WITH HOLD FOR SELECT 1", Some("DECLARE")),
            ("FETCH 10 FROM c", Some("FETCH")),
            ("CLOSE c", Some("CLOSE")),
            ("DISCARD ALL", Some("DISCARD")),
            ("LOCK TABLE users", Some("LOCK")),
            ("LOAD 'auto_explain'", Some("LOAD")),
            ("SELECT pg_advisory_lock($1)", Some("pg_advisory_lock")),
            (
                "select PG_TRY_ADVISORY_LOCK (1, 2)",
                Some("pg_try_advisory_lock"),
            ),
            (
                "SELECT pg_catalog.set_config('a.b', $1, false)",
                Some("set_config"),
            ),
            (
                "WITH x AS (SELECT 1) SELECT pg_advisory_unlock_all()",
                Some("pg_advisory_unlock_all"),
            ),
            ("CREATE TEMP TABLE t (a int)", Some("CREATE TEMP")),
            (
                "create or replace temporary view v as select 1",
                Some("CREATE TEMP"),
            ),
            (
                "CREATE GLOBAL TEMPORARY TABLE t (a int)",
                Some("CREATE TEMP"),
            ),
            ("SELECT * INTO TEMP t FROM users", Some("CREATE TEMP")),
            // Statements that leave nothing behind.
            ("SELECT name FROM users WHERE id = $1", None),
            ("UPDATE users SET name = $2 WHERE id = $1", None),
            ("INSERT INTO todos (title) VALUES ($1) RETURNING id", None),
            (
                "WITH moved AS (DELETE FROM a RETURNING *) INSERT INTO b SELECT * FROM moved",
                None,
            ),
            ("SELECT pg_advisory_xact_lock($1)", None),
            ("SELECT temp FROM weather", None),
            ("INSERT INTO temp VALUES (1)", None),
            ("CREATE TABLE begin_log (a int)", None),
            ("SELECT 'BEGIN; SET x = 1'", None),
            ("SELECT E'it\\'s; SET x' AS s", None),
            ("SELECT \"set_config\"(1)", Some("set_config")),
            ("SELECT \"BEGIN\" FROM t", None),
            ("SELECT $body$ LISTEN x $body$", None),
            ("SELECT $$pg_advisory_lock(1)$$", None),
            ("SELECT 1 -- SET x = 1", None),
            ("SELECT $1::int + 2e5", None),
            ("SELECT set_config_value FROM settings", None),
            ("", None),
        ] {
            assert_eq!(session_effect(sql), want, "{sql}");
        }
    }
}
