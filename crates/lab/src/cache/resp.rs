//! RESP2 (the Redis serialization protocol, version 2) for the lab's two commands: GET and SET
//! encoded as arrays of bulk strings, and the replies they call for read strictly.
//!
//! Sans I/O: bytes out into a caller's buffer, a reply read from the front of one. A reply
//! GET and SET never get (an integer, an array, a RESP3 type) is [`ProtoError::Unexpected`].
//! `info` reads the one other bulk reply the lab asks for (`INFO`), as text fields.

use super::codec::{Decoded, Op, ProtoError, Reply, length, line, push_decimal, value};

/// Appends one request: `GET key`, or `SET key value`.
pub fn encode(out: &mut Vec<u8>, op: Op, key: &[u8], val: &[u8]) {
    match op {
        Op::Get => out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n"),
        Op::Set => out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n"),
    }
    bulk(out, key);
    if op == Op::Set {
        bulk(out, val);
    }
}

/// Appends a command of bulk strings (the lab's `INFO`, `DBSIZE`).
pub fn command(out: &mut Vec<u8>, words: &[&[u8]]) {
    out.push(b'*');
    push_decimal(out, words.len());
    out.extend_from_slice(b"\r\n");
    for w in words {
        bulk(out, w);
    }
}

fn bulk(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'$');
    push_decimal(out, s.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(s);
    out.extend_from_slice(b"\r\n");
}

/// Reads the reply at the front of `buf`.
pub fn decode(buf: &[u8]) -> Result<Decoded, ProtoError> {
    let Some((head, taken)) = line(buf)? else {
        return Ok(Decoded::Incomplete);
    };
    let Some((&kind, rest)) = head.split_first() else {
        return Err(ProtoError::Unexpected);
    };
    let reply = match kind {
        // SET's only success reply; any other simple string is not one GET or SET gets.
        b'+' if rest == b"OK" => Reply::Stored,
        b'-' => Reply::Error(1..head.len()),
        b'$' if rest == b"-1" => Reply::Miss,
        b'$' => {
            let n = length(rest)?;
            return Ok(match value(buf, taken, n)? {
                Some((span, end)) => Decoded::Reply(Reply::Value(span), end),
                None => Decoded::Incomplete,
            });
        }
        _ => return Err(ProtoError::Unexpected),
    };
    Ok(Decoded::Reply(reply, taken))
}

/// The value of `name` in `INFO`'s text (`name:value` lines).
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The keys of database 0 in `INFO keyspace`'s `db0:keys=N,expires=…` line (0 when absent:
/// Redis leaves an empty database out).
pub fn info_keys(info: &str) -> u64 {
    info_field(info, "db0")
        .and_then(|v| v.split(',').find_map(|kv| kv.strip_prefix("keys=")))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        encode(&mut out, Op::Get, b"k:1", b"ignored");
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nk:1\r\n");
        out.clear();
        encode(&mut out, Op::Set, b"k:1", b"hello");
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$3\r\nk:1\r\n$5\r\nhello\r\n");
        out.clear();
        // A value with CR LF inside travels as it is: bulk strings are length-prefixed.
        encode(&mut out, Op::Set, b"k", b"a\r\nb");
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n");
        out.clear();
        command(&mut out, &[b"INFO", b"stats"]);
        assert_eq!(out, b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n");
    }

    #[test]
    fn replies_read_strictly() {
        use Decoded::*;
        use ProtoError::*;
        for (wire, want) in [
            // SET's success.
            (&b"+OK\r\n"[..], Ok(Reply(super::Reply::Stored, 5))),
            // GET's miss: the null bulk string.
            (b"$-1\r\n", Ok(Reply(super::Reply::Miss, 5))),
            // GET's hit, with what follows left alone (pipelining).
            (
                b"$3\r\nabc\r\n+OK\r\n",
                Ok(Reply(super::Reply::Value(4..7), 9)),
            ),
            (b"$0\r\n\r\n", Ok(Reply(super::Reply::Value(4..4), 6))),
            // A value holding CR LF is framed by its length, not by the CRLF.
            (
                b"$4\r\na\r\nb\r\n",
                Ok(Reply(super::Reply::Value(4..8), 10)),
            ),
            // Error replies are framed: the connection goes on.
            (
                b"-OOM command not allowed\r\n",
                Ok(Reply(super::Reply::Error(1..24), 26)),
            ),
            // Incomplete at every stage.
            (b"", Ok(Incomplete)),
            (b"+OK\r", Ok(Incomplete)),
            (b"$3\r\nab", Ok(Incomplete)),
            (b"$3\r\nabc\r", Ok(Incomplete)),
            // Strictness.
            (b"$3\r\nabcd\r\n", Err(BadTerminator)),
            (b"+OK\n", Err(BadTerminator)),
            (b"$03\r\nabc\r\n", Err(BadLength)),
            (b"$-2\r\n", Err(BadLength)),
            (b"$x\r\n", Err(BadLength)),
            (b"$999999999\r\n", Err(ValueTooLarge)),
            (b":1\r\n", Err(Unexpected)),
            (b"*1\r\n$1\r\na\r\n", Err(Unexpected)),
            (b"+QUEUED\r\n", Err(Unexpected)),
            (b"_\r\n", Err(Unexpected)),
            (b"\r\n", Err(Unexpected)),
        ] {
            assert_eq!(decode(wire), want, "{:?}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn a_reply_split_anywhere_reads_the_same() {
        let wire = b"$5\r\nhello\r\n";
        for cut in 0..wire.len() {
            assert_eq!(
                decode(&wire[..cut]),
                Ok(Decoded::Incomplete),
                "cut at {cut}"
            );
        }
        assert_eq!(
            decode(wire),
            Ok(Decoded::Reply(Reply::Value(4..9), wire.len()))
        );
    }

    #[test]
    fn info_fields() {
        let info = "# Stats\r\nevicted_keys:42\r\nkeyspace_hits:7\r\n# Keyspace\r\ndb0:keys=1000,expires=0,avg_ttl=0\r\n";
        assert_eq!(info_field(info, "evicted_keys"), Some("42"));
        assert_eq!(info_field(info, "evicted"), None, "a whole name only");
        assert_eq!(info_keys(info), 1000);
        assert_eq!(info_keys("# Keyspace\r\n"), 0);
    }
}
