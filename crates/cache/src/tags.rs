//! Surrogate keys: the tags an origin puts on an answer, in Fastly's
//! `Surrogate-Key` (tags separated by spaces) or Cloudflare's `Cache-Tag` (separated by
//! commas), so that one purge of a tag removes every answer that carries it. Both fields are
//! the cache's, not the client's: the proxy removes them from every answer it sends.
//!
//! Pure parsing over a stored answer's fields; bounded: at most [`MAX_TAGS_PER_ENTRY`] tags
//! an answer, each at most [`MAX_TAG_LEN`] bytes (a longer one is not a tag: it is ignored,
//! so a purge of it purges nothing, as no purge can name more than the bound).

use crate::fields::OwnedField;

/// The most tags one answer carries: those past it (in field order) are ignored, so a purge
/// of one of them does not reach that answer. Fastly's limit on a `Surrogate-Key` is of the
/// same order (16 KiB of keys).
pub const MAX_TAGS_PER_ENTRY: usize = 128;

/// The longest tag, in bytes (Fastly's is 1,024; Cloudflare's 1,024 for the whole field).
pub const MAX_TAG_LEN: usize = 256;

/// Whether `name` is a field that tags an answer (`Surrogate-Key`, `Cache-Tag`), ASCII
/// case-insensitively: such a field is removed from what clients get.
pub fn is_tag_field(name: &[u8]) -> bool {
    match name.len() {
        9 => name.eq_ignore_ascii_case(b"cache-tag"),
        13 => name.eq_ignore_ascii_case(b"surrogate-key"),
        _ => false,
    }
}

/// The tags `fields` carry, in order, each once at most as often as it is written, within
/// the bounds above.
pub fn tags<'a, N: AsRef<[u8]>, V: AsRef<[u8]>>(
    fields: &'a [(N, V)],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    fields
        .iter()
        .filter_map(|(n, v)| {
            let n = n.as_ref();
            let split: fn(&u8) -> bool = match n.len() {
                9 if n.eq_ignore_ascii_case(b"cache-tag") => |b| *b == b',',
                13 if n.eq_ignore_ascii_case(b"surrogate-key") => |b| *b == b' ' || *b == b'\t',
                _ => return None,
            };
            Some(v.as_ref().split(split))
        })
        .flatten()
        .map(|t| t.trim_ascii())
        .filter(|t| !t.is_empty() && t.len() <= MAX_TAG_LEN)
        .take(MAX_TAGS_PER_ENTRY)
}

/// Whether `fields` (a stored answer's) carry `tag`.
pub fn has_tag(fields: &[OwnedField], tag: &[u8]) -> bool {
    tags(fields).any(|t| t == tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_read_from_both_fields_within_the_bounds() {
        let long = "x".repeat(MAX_TAG_LEN + 1);
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b"Surrogate-Key", b"  a b\tc "),
            (b"cache-tag", b"d, e ,,f"),
            (b"Cache-Control", b"max-age=1"),
            (b"SURROGATE-KEY", long.as_bytes()),
        ];
        let got: Vec<&[u8]> = tags(&fields).collect();
        assert_eq!(got, [&b"a"[..], b"b", b"c", b"d", b"e", b"f"]);
        // A Surrogate-Key's commas and a Cache-Tag's spaces are the tag's own bytes.
        let fields: Vec<(&[u8], &[u8])> = vec![(b"Surrogate-Key", b"a,b"), (b"Cache-Tag", b"c d")];
        let got: Vec<&[u8]> = tags(&fields).collect();
        assert_eq!(got, [&b"a,b"[..], b"c d"]);
        let many = (0..MAX_TAGS_PER_ENTRY + 5)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let fields: Vec<(&[u8], &[u8])> = vec![(b"Surrogate-Key", many.as_bytes())];
        assert_eq!(tags(&fields).count(), MAX_TAGS_PER_ENTRY);
        assert!(is_tag_field(b"Cache-Tag") && is_tag_field(b"surrogate-KEY"));
        assert!(!is_tag_field(b"Cache-Tags") && !is_tag_field(b"surrogate-keys"));
    }
}
