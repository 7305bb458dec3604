//! memcached's meta protocol (memcached 1.6's `protocol.txt`, "Meta Commands") for the lab's
//! two commands: `mg <key> v` and `ms <key> <size>`, and the replies they call for read
//! strictly; also `stats`' lines, for the counters the lab reads.
//!
//! Sans I/O, like `resp`. The meta commands are used rather than the text protocol's get/set
//! because their replies are one short code each (`HD`, `EN`, `VA <size>`): the same number of
//! reply lines per request as RESP, so neither server is charged for a longer reply framing.

use super::codec::{Decoded, Op, ProtoError, Reply, length, line, push_decimal, value};

/// Appends one request: `mg <key> v` (return the value), or `ms <key> <size>` and the value.
/// Keys are the caller's: at most 250 bytes, no spaces or control bytes (memcached's rule).
pub fn encode(out: &mut Vec<u8>, op: Op, key: &[u8], val: &[u8]) {
    match op {
        Op::Get => {
            out.extend_from_slice(b"mg ");
            out.extend_from_slice(key);
            out.extend_from_slice(b" v\r\n");
        }
        Op::Set => {
            out.extend_from_slice(b"ms ");
            out.extend_from_slice(key);
            out.push(b' ');
            push_decimal(out, val.len());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(val);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Reads the reply at the front of `buf`.
pub fn decode(buf: &[u8]) -> Result<Decoded, ProtoError> {
    let Some((head, taken)) = line(buf)? else {
        return Ok(Decoded::Incomplete);
    };
    let reply = match head {
        b"HD" => Reply::Stored,
        b"NS" => Reply::NotStored,
        b"EN" => Reply::Miss,
        b"ERROR" => Reply::Error(0..head.len()),
        _ if head.starts_with(b"SERVER_ERROR ") || head.starts_with(b"CLIENT_ERROR ") => {
            Reply::Error(0..head.len())
        }
        _ => {
            // `VA <size> <flags>*`: the lab asks for no flags but `v`, which is not echoed.
            let Some(size) = head.strip_prefix(b"VA ") else {
                return Err(ProtoError::Unexpected);
            };
            let digits = size.split(|&b| b == b' ').next().unwrap_or_default();
            let n = length(digits)?;
            return Ok(match value(buf, taken, n)? {
                Some((span, end)) => Decoded::Reply(Reply::Value(span), end),
                None => Decoded::Incomplete,
            });
        }
    };
    Ok(Decoded::Reply(reply, taken))
}

/// `stats`' (name, value) pairs.
pub type Stats = Vec<(String, String)>;

/// Reads a whole `stats` reply (`STAT <name> <value>` lines up to `END`) at the front of
/// `buf`: the pairs and the bytes taken, or `None` until `END` is here.
pub fn stats(buf: &[u8]) -> Result<Option<(Stats, usize)>, ProtoError> {
    let mut at = 0;
    let mut pairs = Vec::new();
    loop {
        let Some((l, n)) = line(&buf[at..])? else {
            return Ok(None);
        };
        at += n;
        if l == b"END" {
            return Ok(Some((pairs, at)));
        }
        let text = std::str::from_utf8(l).map_err(|_| ProtoError::Unexpected)?;
        let mut words = text
            .strip_prefix("STAT ")
            .ok_or(ProtoError::Unexpected)?
            .splitn(2, ' ');
        let (Some(k), Some(v)) = (words.next(), words.next()) else {
            return Err(ProtoError::Unexpected);
        };
        pairs.push((k.to_string(), v.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_meta_commands() {
        let mut out = Vec::new();
        encode(&mut out, Op::Get, b"k:1", b"ignored");
        assert_eq!(out, b"mg k:1 v\r\n");
        out.clear();
        encode(&mut out, Op::Set, b"k:1", b"hello");
        assert_eq!(out, b"ms k:1 5\r\nhello\r\n");
        out.clear();
        // The data block is length-framed: CR LF inside a value is data.
        encode(&mut out, Op::Set, b"k", b"a\r\nb");
        assert_eq!(out, b"ms k 4\r\na\r\nb\r\n");
    }

    #[test]
    fn replies_read_strictly() {
        use Decoded::*;
        use ProtoError::*;
        for (wire, want) in [
            // protocol.txt, Meta Set: HD stored, NS not stored.
            (&b"HD\r\n"[..], Ok(Reply(super::Reply::Stored, 4))),
            (b"NS\r\n", Ok(Reply(super::Reply::NotStored, 4))),
            // Meta Get: EN a miss, VA <size> then the data block.
            (b"EN\r\n", Ok(Reply(super::Reply::Miss, 4))),
            (
                b"VA 3\r\nabc\r\nHD\r\n",
                Ok(Reply(super::Reply::Value(6..9), 11)),
            ),
            (
                b"VA 3 t-1\r\nabc\r\n",
                Ok(Reply(super::Reply::Value(10..13), 15)),
            ),
            (b"VA 0\r\n\r\n", Ok(Reply(super::Reply::Value(6..6), 8))),
            (
                b"VA 4\r\na\r\nb\r\n",
                Ok(Reply(super::Reply::Value(6..10), 12)),
            ),
            // Errors are framed lines.
            (b"ERROR\r\n", Ok(Reply(super::Reply::Error(0..5), 7))),
            (
                b"SERVER_ERROR out of memory storing object\r\n",
                Ok(Reply(super::Reply::Error(0..41), 43)),
            ),
            (
                b"CLIENT_ERROR bad data chunk\r\n",
                Ok(Reply(super::Reply::Error(0..27), 29)),
            ),
            // Incomplete.
            (b"", Ok(Incomplete)),
            (b"HD\r", Ok(Incomplete)),
            (b"VA 3\r\nab", Ok(Incomplete)),
            // Strictness.
            (b"VA 3\r\nabcd\r\n", Err(BadTerminator)),
            (b"HD\n", Err(BadTerminator)),
            (b"VA\r\n", Err(Unexpected)),
            (b"VA \r\n", Err(BadLength)),
            (b"VA -1\r\n", Err(BadLength)),
            (b"VA 03\r\n", Err(BadLength)),
            (b"VA 999999999\r\n", Err(ValueTooLarge)),
            (b"VALUE k 0 3\r\nabc\r\nEND\r\n", Err(Unexpected)),
            (b"STORED\r\n", Err(Unexpected)),
            (b"hd\r\n", Err(Unexpected)),
            (b"\r\n", Err(Unexpected)),
        ] {
            assert_eq!(decode(wire), want, "{:?}", String::from_utf8_lossy(wire));
        }
    }

    #[test]
    fn a_reply_split_anywhere_reads_the_same() {
        let wire = b"VA 5\r\nhello\r\n";
        for cut in 0..wire.len() {
            assert_eq!(
                decode(&wire[..cut]),
                Ok(Decoded::Incomplete),
                "cut at {cut}"
            );
        }
        assert_eq!(
            decode(wire),
            Ok(Decoded::Reply(Reply::Value(6..11), wire.len()))
        );
    }

    #[test]
    fn stats_lines() {
        let wire = b"STAT pid 1\r\nSTAT evictions 12\r\nSTAT version 1.6.18\r\nEND\r\nHD\r\n";
        let (pairs, n) = stats(wire).unwrap().unwrap();
        assert_eq!(n, wire.len() - 4);
        assert_eq!(pairs[1], ("evictions".into(), "12".into()));
        assert_eq!(stats(&wire[..20]), Ok(None));
        assert_eq!(stats(b"STAT x\r\nEND\r\n"), Err(ProtoError::Unexpected));
        assert_eq!(stats(b"VALUE x\r\nEND\r\n"), Err(ProtoError::Unexpected));
    }
}
