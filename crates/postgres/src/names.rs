//! Names the pool writes into SQL itself: `LISTEN` channels and savepoints. Each is quoted as
//! an identifier, so any text is taken exactly as given (case kept, as `pg_notify` takes a
//! channel) and none can end the statement early. A name PostgreSQL would not keep as given
//! is refused here rather than changed: empty, holding a NUL, or longer than
//! [`MAX_NAME_BYTES`] (which PostgreSQL would cut short, listening on another channel than
//! the one asked for).
#![forbid(unsafe_code)]

use crate::error::Error;

/// The longest identifier PostgreSQL keeps whole (`NAMEDATALEN` - 1); longer ones are cut.
pub const MAX_NAME_BYTES: usize = 63;

/// `name` as a quoted SQL identifier (`"` doubled inside); [`Error::BadName`] for a name
/// PostgreSQL would not keep as given.
pub(crate) fn quote(name: &str) -> Result<String, Error> {
    let why = if name.is_empty() {
        Some("empty")
    } else if name.len() > MAX_NAME_BYTES {
        Some("longer than 63 bytes")
    } else if name.contains('\0') {
        Some("holds a NUL")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(Error::BadName {
            name: name.to_string(),
            why,
        });
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_or_refused() {
        let long = "x".repeat(MAX_NAME_BYTES);
        let longer = "x".repeat(MAX_NAME_BYTES + 1);
        let cases: [(&str, Result<String, &str>); 7] = [
            ("jobs", Ok("\"jobs\"".into())),
            // Case is kept: `LISTEN "Jobs"` hears pg_notify('Jobs', …), not `NOTIFY jobs`.
            ("Jobs", Ok("\"Jobs\"".into())),
            // A quote is doubled, so the name cannot end the statement.
            (
                "a\"; DROP TABLE t; --",
                Ok("\"a\"\"; DROP TABLE t; --\"".into()),
            ),
            (&long, Ok(format!("\"{long}\""))),
            ("", Err("empty")),
            (&longer, Err("longer than 63 bytes")),
            ("a\0b", Err("holds a NUL")),
        ];
        for (name, want) in cases {
            let got = quote(name).map_err(|e| match e {
                Error::BadName { why, .. } => why,
                other => panic!("{other}"),
            });
            assert_eq!(got, want, "{name:?}");
        }
    }
}
