//! RESP2, the Redis/Valkey wire protocol, sans I/O: commands written into a caller's buffer,
//! replies read from the bytes received so far. Owns only the framing and its limits: which
//! commands to send, and what a reply means, is the private `redis` module's.
//!
//! Hand-written, not the `redis` crate's codec: that crate's multiplexed connection spent
//! about 10,000 instructions on every `GET` of a 1 KiB value (its generic value parser, a
//! channel and a task per call; callgrind, docs/benchmarks.md "the tier's client"), which
//! made a second-tier hit cost the edge more than the tier it saves a trip to.

use std::fmt;

/// The largest bulk string taken: Redis's own `proto-max-bulk-len` default (512 MB). A
/// longer length is a protocol error, not an allocation.
pub const MAX_BULK: usize = 512 << 20;
/// The most elements an array reply may have (only short arrays are asked for here).
pub const MAX_ARRAY: usize = 1024;
/// How deep arrays may nest.
pub const MAX_DEPTH: usize = 4;
/// The longest simple-string, error or integer line.
pub const MAX_LINE: usize = 64 * 1024;

/// One reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+OK` and the like.
    Simple(Vec<u8>),
    /// `-ERR …`: the server refused the command.
    Error(String),
    /// `:N`.
    Integer(i64),
    /// `$N` and its bytes, or `$-1` (none: a missing key).
    Bulk(Option<Vec<u8>>),
    /// `*N` and its elements, or `*-1`.
    Array(Option<Vec<Reply>>),
}

/// Bytes that are not a RESP2 reply: the connection cannot be read further.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a RESP reply: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// Appends the command `args` (its name first) as a RESP array of bulk strings.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    push_decimal(out, args.len() as u64);
    out.extend_from_slice(b"\r\n");
    for a in args {
        out.push(b'$');
        push_decimal(out, a.len() as u64);
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends `n` in decimal (no `fmt`: this runs once per argument of every command).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The first reply in `buf` and the bytes it took, `Ok(None)` if `buf` holds only part of
/// one, or an error if it cannot be a reply.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, Malformed> {
    let mut at = 0;
    Ok(reply(buf, &mut at, 0)?.map(|r| (r, at)))
}

fn reply(buf: &[u8], at: &mut usize, depth: usize) -> Result<Option<Reply>, Malformed> {
    let Some(&kind) = buf.get(*at) else {
        return Ok(None);
    };
    let Some(line) = line(buf, *at + 1)? else {
        return Ok(None);
    };
    let after = *at + 1 + line.len() + 2;
    let reply = match kind {
        b'+' => Reply::Simple(line.to_vec()),
        b'-' => Reply::Error(String::from_utf8_lossy(line).into_owned()),
        b':' => Reply::Integer(integer(line)?),
        b'$' => match length(line, MAX_BULK, "a bulk length out of bounds")? {
            None => Reply::Bulk(None),
            Some(n) => {
                let Some(end) = buf.get(after..after + n + 2) else {
                    return Ok(None);
                };
                if &end[n..] != b"\r\n" {
                    return Err(Malformed("a bulk string not ended by CRLF"));
                }
                *at = after + n + 2;
                return Ok(Some(Reply::Bulk(Some(end[..n].to_vec()))));
            }
        },
        b'*' => match length(line, MAX_ARRAY, "an array length out of bounds")? {
            None => Reply::Array(None),
            Some(n) => {
                if depth == MAX_DEPTH {
                    return Err(Malformed("arrays nested too deep"));
                }
                let mut next = after;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    match reply(buf, &mut next, depth + 1)? {
                        Some(r) => items.push(r),
                        None => return Ok(None),
                    }
                }
                *at = next;
                return Ok(Some(Reply::Array(Some(items))));
            }
        },
        _ => return Err(Malformed("an unknown type byte")),
    };
    *at = after;
    Ok(Some(reply))
}

/// A bulk string's or an array's length: `None` for -1 (none), else at most `max`.
fn length(line: &[u8], max: usize, why: &'static str) -> Result<Option<usize>, Malformed> {
    match integer(line)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .map(Some)
            .ok_or(Malformed(why)),
    }
}

/// The line starting at `from`, without its CRLF; `None` if its end has not arrived.
fn line(buf: &[u8], from: usize) -> Result<Option<&[u8]>, Malformed> {
    let rest = buf.get(from..).unwrap_or_default();
    match rest.iter().position(|&b| b == b'\r') {
        Some(i) if i > MAX_LINE => Err(Malformed("a line too long")),
        Some(i) => match rest.get(i + 1) {
            Some(b'\n') => Ok(Some(&rest[..i])),
            Some(_) => Err(Malformed("CR without LF")),
            None => Ok(None),
        },
        None if rest.len() > MAX_LINE => Err(Malformed("a line too long")),
        None => Ok(None),
    }
}

fn integer(line: &[u8]) -> Result<i64, Malformed> {
    let (neg, digits) = match line.split_first() {
        Some((b'-', d)) => (true, d),
        _ => (false, line),
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Malformed("not an integer"));
    }
    let n = digits
        .iter()
        .try_fold(0i64, |n, &d| {
            n.checked_mul(10)?.checked_add(i64::from(d - b'0'))
        })
        .ok_or(Malformed("an integer out of range"))?;
    Ok(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        command(&mut out, &[b"SET", b"k", b"", b"PX", b"1500"]);
        assert_eq!(
            out,
            b"*5\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n$2\r\nPX\r\n$4\r\n1500\r\n"
        );
        let mut n = Vec::new();
        for v in [0, 7, 10, 123, u64::MAX] {
            n.clear();
            push_decimal(&mut n, v);
            assert_eq!(n, v.to_string().as_bytes());
        }
    }

    #[test]
    fn replies_table() {
        use Reply::*;
        let ok: &[(&[u8], Reply)] = &[
            (b"+OK\r\n", Simple(b"OK".to_vec())),
            (b"-ERR wrong\r\n", Error("ERR wrong".into())),
            (b":0\r\n", Integer(0)),
            (b":-12\r\n", Integer(-12)),
            (b":9223372036854775807\r\n", Integer(i64::MAX)),
            (b"$-1\r\n", Bulk(None)),
            (b"$0\r\n\r\n", Bulk(Some(vec![]))),
            // A value may hold CR, LF and NUL: only its length frames it.
            (b"$5\r\na\r\n\0b\r\n", Bulk(Some(b"a\r\n\0b".to_vec()))),
            (b"*-1\r\n", Array(None)),
            (b"*0\r\n", Array(Some(vec![]))),
            (
                b"*2\r\n+OK\r\n$1\r\nx\r\n",
                Array(Some(vec![
                    Simple(b"OK".to_vec()),
                    Bulk(Some(b"x".to_vec())),
                ])),
            ),
        ];
        for (wire, want) in ok {
            assert_eq!(
                parse(wire),
                Ok(Some((want.clone(), wire.len()))),
                "{wire:?}"
            );
            // Every proper prefix is "not yet", never an error or a reply.
            for cut in 0..wire.len() {
                assert_eq!(parse(&wire[..cut]), Ok(None), "{wire:?} cut at {cut}");
            }
        }
        // Two replies back to back: the first, and its length.
        assert_eq!(parse(b":1\r\n:2\r\n"), Ok(Some((Reply::Integer(1), 4))));
        let bad: &[&[u8]] = &[
            b"?x\r\n",
            b":\r\n",
            b":1a\r\n",
            b":99999999999999999999\r\n",
            b"+OK\rX",
            b"$3\r\nabcd\r\n",
            b"$-2\r\n",
            b"$536870913\r\n",
            b"*1025\r\n",
            b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n",
        ];
        for wire in bad {
            assert!(parse(wire).is_err(), "{wire:?}");
        }
        let long = [b"+".as_slice(), &vec![b'a'; MAX_LINE + 2]].concat();
        assert!(parse(&long).is_err());
    }
}
