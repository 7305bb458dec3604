//! An `items` row written straight into HttpArena's item JSON, byte for byte what serde_json
//! makes of the item struct the demo built before (kept in the tests as the reference),
//! without building it: no `String` per text column, no `serde_json::Value` for `tags`
//! (jsonb's own text, made compact, instead).
//!
//! Owns the JSON writing only; the rows come from the caller, and where jsonb's text could
//! differ from serde_json's (objects, numbers) it falls back to parsing it as before.
#![forbid(unsafe_code)]

use std::error::Error;

use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

/// A `json`/`jsonb` column's text, borrowed from the row.
struct JsonText<'a> {
    text: &'a [u8],
    /// `jsonb`: PostgreSQL printed the text itself (its `jsonb_out`), so its strings are
    /// escaped as serde_json escapes them; `json` is the text as it was stored.
    printed: bool,
}

/// A text column's bytes, borrowed from the row. PostgreSQL sends text in the connection's
/// `client_encoding`, which tokio-postgres sets to UTF8 (and the server only stores valid
/// text), so the bytes are not checked again as `&str`'s `FromSql` does.
struct Text<'a>(&'a [u8]);

impl<'a> FromSql<'a> for Text<'a> {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Text(raw))
    }

    fn accepts(ty: &Type) -> bool {
        <&str as FromSql>::accepts(ty)
    }
}

impl<'a> FromSql<'a> for JsonText<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        if *ty == Type::JSONB {
            // The binary jsonb format: a version byte (1), then the text.
            match raw.split_first() {
                Some((1, text)) => Ok(JsonText {
                    text,
                    printed: true,
                }),
                _ => Err("unsupported jsonb encoding version".into()),
            }
        } else {
            Ok(JsonText {
                text: raw,
                printed: false,
            })
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSON | Type::JSONB)
    }
}

/// One item's columns, borrowed from its row (the `ITEM_COLUMNS` of `items.rs`, in order).
struct ItemRow<'a> {
    id: i32,
    name: Text<'a>,
    category: Text<'a>,
    price: i32,
    quantity: i32,
    active: bool,
    tags: JsonText<'a>,
    score: i32,
    count: i32,
}

impl<'a> ItemRow<'a> {
    /// Panics where the row's types are not the table's, as `Row::get` does.
    fn from_row(r: &'a Row) -> ItemRow<'a> {
        ItemRow {
            id: r.get(0),
            name: r.get(1),
            category: r.get(2),
            price: r.get(3),
            quantity: r.get(4),
            active: r.get(5),
            tags: r.get(6),
            score: r.get(7),
            count: r.get(8),
        }
    }

    /// Appends HttpArena's item JSON: `{"id":…,"name":…,"category":…,"price":…,
    /// "quantity":…,"active":…,"tags":…,"rating":{"score":…,"count":…}}`.
    fn write(&self, out: &mut Vec<u8>) {
        let mut n = itoa::Buffer::new();
        out.extend_from_slice(b"{\"id\":");
        out.extend_from_slice(n.format(self.id).as_bytes());
        out.extend_from_slice(b",\"name\":");
        write_str(self.name.0, out);
        out.extend_from_slice(b",\"category\":");
        write_str(self.category.0, out);
        out.extend_from_slice(b",\"price\":");
        out.extend_from_slice(n.format(self.price).as_bytes());
        out.extend_from_slice(b",\"quantity\":");
        out.extend_from_slice(n.format(self.quantity).as_bytes());
        out.extend_from_slice(if self.active {
            b",\"active\":true,\"tags\":"
        } else {
            b",\"active\":false,\"tags\":"
        });
        write_json(&self.tags, out);
        out.extend_from_slice(b",\"rating\":{\"score\":");
        out.extend_from_slice(n.format(self.score).as_bytes());
        out.extend_from_slice(b",\"count\":");
        out.extend_from_slice(n.format(self.count).as_bytes());
        out.extend_from_slice(b"}}");
    }
}

/// Appends the JSON of one `items` row (see [`ItemRow::write`]). Panics where the row's
/// types are not the table's, as `Row::get` does.
pub(super) fn write_item(r: &Row, out: &mut Vec<u8>) {
    ItemRow::from_row(r).write(out);
}

/// Appends UTF-8 text `s` as a JSON string, escaped as serde_json escapes it.
fn write_str(s: &[u8], out: &mut Vec<u8>) {
    if s.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        // Rare in the data: serde_json's own escaper, so the bytes stay its bytes.
        let s = String::from_utf8_lossy(s);
        serde_json::to_writer(&mut *out, &*s).expect("a string serializes into a Vec");
        return;
    }
    out.push(b'"');
    out.extend_from_slice(s);
    out.push(b'"');
}

/// Appends a json/jsonb column's value as serde_json writes the `Value` it parses to.
///
/// jsonb's text is PostgreSQL's (`["fast", "new"]`: a space after `,` and `:`; strings
/// escaped as serde_json escapes them, RFC 8259 §7, with lowercase `\u00XX`), so an array
/// of strings, booleans and nulls needs only its blanks dropped. An object (serde_json sorts
/// its keys by bytes, jsonb by length first), a number (serde_json reprints `1e2` as `100.0`)
/// or `json`'s stored text is parsed and written again instead.
fn write_json(v: &JsonText<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    if v.printed && compact_plain(v.text, out) {
        return;
    }
    out.truncate(start);
    match serde_json::from_slice::<serde_json::Value>(v.text) {
        Ok(value) => serde_json::to_writer(&mut *out, &value).expect("a Value serializes"),
        // The database vouches for its json; were it not JSON, `Row::get` into a Value had
        // panicked here before.
        Err(e) => panic!("the database's json column is not JSON: {e}"),
    }
}

/// Appends `text` without the blanks outside its strings, when it holds nothing but arrays,
/// strings, `true`, `false` and `null`; false (with part of it appended) when it holds more.
fn compact_plain(text: &[u8], out: &mut Vec<u8>) -> bool {
    out.reserve(text.len());
    let mut i = 0;
    while let Some(&b) = text.get(i) {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => {
                // A string, copied whole through its closing quote (an escaped byte skipped).
                let start = i;
                i += 1;
                loop {
                    match text.get(i) {
                        Some(b'"') => break,
                        Some(b'\\') => i += 2,
                        Some(_) => i += 1,
                        None => return false,
                    }
                }
                i += 1;
                out.extend_from_slice(&text[start..i]);
            }
            b'[' | b']' | b',' | b't' | b'r' | b'u' | b'e' | b'f' | b'a' | b'l' | b's' | b'n' => {
                out.push(b);
                i += 1;
            }
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    /// The item as the demo built it before (and as HttpArena's reference serializes it):
    /// what [`ItemRow::write`] must match byte for byte.
    #[derive(Serialize)]
    struct Item {
        id: i32,
        name: String,
        category: String,
        price: i32,
        quantity: i32,
        active: bool,
        tags: serde_json::Value,
        rating: Rating,
    }

    #[derive(Serialize)]
    struct Rating {
        score: i32,
        count: i32,
    }

    #[test]
    fn an_item_is_written_as_serde_json_writes_it() {
        let rows = [
            (
                42,
                "Alpha Widget 42",
                "electronics",
                30,
                5,
                true,
                r#"["fast", "new"]"#,
                42,
                127,
            ),
            (
                -7,
                "a \"quoted\" \\ na\tme é",
                "",
                0,
                -1,
                false,
                r#"[]"#,
                i32::MIN,
                i32::MAX,
            ),
            (9, "x", "y", 1, 2, true, r#"{"b": 1.50, "aa": ["z"]}"#, 0, 0),
        ];
        for (id, name, category, price, quantity, active, tags, score, count) in rows {
            let mut out = Vec::new();
            ItemRow {
                id,
                name: Text(name.as_bytes()),
                category: Text(category.as_bytes()),
                price,
                quantity,
                active,
                tags: JsonText {
                    text: tags.as_bytes(),
                    printed: true,
                },
                score,
                count,
            }
            .write(&mut out);
            let reference = Item {
                id,
                name: name.into(),
                category: category.into(),
                price,
                quantity,
                active,
                tags: serde_json::from_str(tags).unwrap(),
                rating: Rating { score, count },
            };
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&reference).unwrap()
            );
        }
        // HttpArena's own example.
        let mut out = Vec::new();
        ItemRow {
            id: 42,
            name: Text(b"Alpha Widget 42"),
            category: Text(b"electronics"),
            price: 30,
            quantity: 5,
            active: true,
            tags: JsonText {
                text: br#"["fast", "new"]"#,
                printed: true,
            },
            score: 42,
            count: 127,
        }
        .write(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"id":42,"name":"Alpha Widget 42","category":"electronics","price":30,"quantity":5,"active":true,"tags":["fast","new"],"rating":{"score":42,"count":127}}"#
        );
    }

    /// What serde_json writes for the value of `text`, as the `Value` path did.
    fn reference(text: &str) -> String {
        serde_json::to_string(&serde_json::from_str::<serde_json::Value>(text).unwrap()).unwrap()
    }

    fn written(text: &str, printed: bool) -> String {
        let mut out = b"x".to_vec();
        write_json(
            &JsonText {
                text: text.as_bytes(),
                printed,
            },
            &mut out,
        );
        assert_eq!(out[0], b'x', "what was there before is kept");
        String::from_utf8(out[1..].to_vec()).unwrap()
    }

    #[test]
    fn jsonb_text_is_written_as_serde_json_writes_its_value() {
        // Each row as PostgreSQL 15's jsonb_out prints it.
        for text in [
            r#"["fast", "new"]"#,
            r#"[]"#,
            r#""plain""#,
            r#"[true, false, null, ["a, b", "c: d"]]"#,
            r#"["quote \" and \\ back", "tab\tnew\nline", "\u001f and \b\f\r"]"#,
            r#"["é, 中, 😀", " spaced  out "]"#,
            // Objects: jsonb orders keys by length, serde_json by bytes.
            r#"{"b": 1, "aa": [2, "x"]}"#,
            // Numbers: serde_json reprints them.
            r#"[1, -2, 1.50, 1e2, 12345678901234567890123]"#,
            r#"[{"k": "v"}, 3]"#,
        ] {
            assert_eq!(written(text, true), reference(text), "jsonb {text}");
        }
    }

    #[test]
    fn json_text_is_always_parsed_again() {
        // Stored as written: escapes and blanks that jsonb would have normalised.
        for text in [r#"[ "\u0041\/" ,"b"]"#, r#"["x"  ]"#, "[\"a\"]"] {
            assert_eq!(written(text, false), reference(text), "json {text}");
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for s in [
            "Alpha Widget 42",
            "",
            "a \"quoted\" \\ name",
            "ctl \u{1}\u{1f}\n\t\u{7f}",
            "ünïcödé 中",
        ] {
            let mut out = Vec::new();
            write_str(s.as_bytes(), &mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(s).unwrap()
            );
        }
    }
}
