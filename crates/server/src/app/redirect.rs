//! Redirect targets: the `Location` template of a site's redirect rule, checked once when the
//! sites are built (and by the configuration checker, through [`Redirect::check`]), then
//! filled in one pass per redirected request.
//!
//! One pass matters: a path may hold `{` and `}` (browsers send them raw), so a path that
//! reads `/{query}` must come out as itself, never be substituted a second time.
#![forbid(unsafe_code)]

use std::fmt;

use crate::config::Redirect;

/// The placeholders a template may name, as the docs list them.
pub(crate) const PLACEHOLDERS: &str = "{path}, {rest}, {query}, {host}";

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Lit(String),
    /// The request's path.
    Path,
    /// The path after the rule's prefix.
    Rest,
    /// `?` and the query, or nothing.
    Query,
    /// The host the request named (lowercase, without port or trailing dot), as nginx's
    /// `$host`.
    Host,
}

/// A checked redirect target.
#[derive(Clone, Debug)]
pub(crate) struct Template {
    pieces: Vec<Piece>,
    pub(crate) uses_host: bool,
}

/// What is wrong with a redirect target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectError {
    /// Empty, or holding a space or a control.
    Invalid,
    /// `{name}` that is none of `{path}`, `{rest}`, `{query}` and `{host}`.
    UnknownPlaceholder(String),
    /// A `{` without its `}`, or a `}` alone.
    Unbalanced,
}

impl fmt::Display for RedirectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectError::Invalid => {
                write!(
                    f,
                    "redirect target must be a URL without spaces or controls"
                )
            }
            RedirectError::UnknownPlaceholder(p) => write!(
                f,
                "redirect target names {{{p}}}, which is not a placeholder (they are {PLACEHOLDERS})"
            ),
            RedirectError::Unbalanced => {
                write!(f, "redirect target has an unmatched '{{' or '}}'")
            }
        }
    }
}

impl std::error::Error for RedirectError {}

impl Redirect {
    /// Whether `to` is a target the server can fill in (what a configuration checker asks).
    pub fn check(&self) -> Result<(), RedirectError> {
        Template::parse(&self.to).map(|_| ())
    }
}

impl Template {
    pub(crate) fn parse(to: &str) -> Result<Template, RedirectError> {
        if to.is_empty() || to.bytes().any(|b| b.is_ascii_control() || b == b' ') {
            return Err(RedirectError::Invalid);
        }
        let mut pieces = Vec::new();
        let mut rest = to;
        while !rest.is_empty() {
            let open = rest.find('{');
            let close = rest.find('}');
            match (open, close) {
                (None, None) => {
                    pieces.push(Piece::Lit(rest.to_string()));
                    break;
                }
                (Some(o), Some(c)) if o < c => {
                    if o > 0 {
                        pieces.push(Piece::Lit(rest[..o].to_string()));
                    }
                    pieces.push(match &rest[o + 1..c] {
                        "path" => Piece::Path,
                        "rest" => Piece::Rest,
                        "query" => Piece::Query,
                        "host" => Piece::Host,
                        other => return Err(RedirectError::UnknownPlaceholder(other.to_string())),
                    });
                    rest = &rest[c + 1..];
                }
                _ => return Err(RedirectError::Unbalanced),
            }
        }
        let uses_host = pieces.contains(&Piece::Host);
        Ok(Template { pieces, uses_host })
    }

    /// The `Location` for a request: `path` (with the rule's prefix of `prefix_len` bytes),
    /// its query, and the host it named (asked only when the template uses it).
    pub(crate) fn fill(
        &self,
        path: &str,
        prefix_len: usize,
        query: Option<&str>,
        host: impl FnOnce() -> String,
    ) -> String {
        let host = if self.uses_host {
            host()
        } else {
            String::new()
        };
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Path => out.push_str(path),
                Piece::Rest => out.push_str(path.get(prefix_len..).unwrap_or("")),
                Piece::Query => {
                    if let Some(q) = query {
                        out.push('?');
                        out.push_str(q);
                    }
                }
                Piece::Host => out.push_str(&host),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_checked_and_filled_in_one_pass() {
        let fill = |to: &str, path: &str, query: Option<&str>| {
            Template::parse(to)
                .unwrap()
                .fill(path, 4, query, || "example.com".to_string())
        };
        assert_eq!(
            fill("https://{host}{path}{query}", "/old/a", Some("x=1")),
            "https://example.com/old/a?x=1"
        );
        assert_eq!(fill("/new{rest}", "/old/a", None), "/new/a");
        // A path that reads like a placeholder comes out as sent (`{` and `}` are accepted
        // in paths, as browsers send them).
        assert_eq!(
            fill("/n{path}", "/old{query}{host}", None),
            "/n/old{query}{host}"
        );
        assert_eq!(
            fill("https://{host}/{host}", "/x", None),
            "https://example.com/example.com"
        );
        let err = |to: &str| Template::parse(to).unwrap_err();
        assert_eq!(
            err("https://{hst}/"),
            RedirectError::UnknownPlaceholder("hst".into())
        );
        assert_eq!(err("https://{host/"), RedirectError::Unbalanced);
        assert_eq!(err("https://host}/"), RedirectError::Unbalanced);
        assert_eq!(err("a b"), RedirectError::Invalid);
        assert_eq!(err(""), RedirectError::Invalid);
        assert!(
            err("/{x}")
                .to_string()
                .contains("{path}, {rest}, {query}, {host}"),
            "{}",
            err("/{x}")
        );
    }
}
