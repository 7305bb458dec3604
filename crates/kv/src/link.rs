//! A Redis connection for a caller with an event loop of its own, sans I/O: the proxy's
//! worker asks its turn's `GET`s on a socket in its own epoll set, with no thread between
//! it and the server. Bytes in, answers out: [`Link::ask`] queues one `MGET` (one `GET`
//! for a single key) under the caller's ticket, [`Link::take_output`] is what to send,
//! [`Link::received`] reads replies and hands each ask's values back in order. The
//! greeting (AUTH, SELECT) goes first on the connection and its replies are read before
//! any answer; an error reply there, or bytes that are not RESP, break the link (the
//! caller closes it and fails what it held).
//!
//! Owns the framing of asks and answers only: the socket, the timeout, the health and the
//! counters are the caller's and [`crate::Tier`]'s ([`crate::Tier::settle`]).

use std::collections::VecDeque;

use crate::resp::{self, Reply};

/// An ask's outcome: each key's stored bytes (`None`: missing) in the ask's order.
pub type Values = Vec<Option<Vec<u8>>>;

/// Why a link cannot go on (the caller closes it and fails what it held).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken(pub String);

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One connection's state. See the module doc.
#[derive(Debug)]
pub struct Link {
    /// Bytes to send, the greeting first.
    out: Vec<u8>,
    /// Bytes received and not yet a whole reply.
    input: Vec<u8>,
    /// Replies to the greeting still to come.
    greeting: usize,
    /// Asks sent or queued and not yet answered: their tickets and key counts, in order.
    waiting: VecDeque<(u64, usize)>,
}

impl Link {
    /// A link whose connection first sends `greeting` (commands getting `replies` replies:
    /// [`crate::Tier::link_spec`]'s).
    pub fn new(greeting: &[u8], replies: usize) -> Link {
        Link {
            out: greeting.to_vec(),
            input: Vec::new(),
            greeting: replies,
            waiting: VecDeque::new(),
        }
    }

    /// Queues the values of `keys` (not empty), answered under `ticket`.
    pub fn ask(&mut self, ticket: u64, keys: &[String]) {
        let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
        args.push(if keys.len() == 1 { b"GET" } else { b"MGET" });
        args.extend(keys.iter().map(|k| k.as_bytes()));
        resp::command(&mut self.out, &args);
        self.waiting.push_back((ticket, keys.len()));
    }

    /// Whether bytes wait to be sent.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// The bytes to send, taken whole; `spare` (a buffer sent before, or an empty one)
    /// takes their place, so that a link allocates no buffer a send.
    pub fn take_output(&mut self, mut spare: Vec<u8>) -> Vec<u8> {
        spare.clear();
        std::mem::replace(&mut self.out, spare)
    }

    /// Whether an ask is waiting for its answer.
    pub fn waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// The tickets of every ask not yet answered, in order, leaving none: for a link that
    /// broke or timed out.
    pub fn abandon(&mut self) -> impl Iterator<Item = u64> + '_ {
        self.waiting.drain(..).map(|(t, _)| t)
    }

    /// Reads `bytes`: each ask answered whole is pushed to `answers` with its ticket (an
    /// error reply to an ask is a `Broken` answer for it alone). `Err` when the link cannot
    /// go on: bytes that are not RESP, a reply no ask waits for, or a refused greeting.
    pub fn received(
        &mut self,
        bytes: &[u8],
        answers: &mut Vec<(u64, Result<Values, Broken>)>,
    ) -> Result<(), Broken> {
        // Read in place when nothing is held (the usual case: a reply whole in one read).
        let held = !self.input.is_empty();
        if held {
            self.input.extend_from_slice(bytes);
        }
        let input = std::mem::take(&mut self.input);
        let buf = if held { &input[..] } else { bytes };
        let mut at = 0;
        let outcome = loop {
            let (reply, used) = match resp::parse(&buf[at..]) {
                Ok(Some(r)) => r,
                Ok(None) => break Ok(()),
                Err(e) => break Err(Broken(e.to_string())),
            };
            at += used;
            if self.greeting > 0 {
                self.greeting -= 1;
                if let Reply::Error(e) = reply {
                    break Err(Broken(e));
                }
                continue;
            }
            let Some((ticket, keys)) = self.waiting.pop_front() else {
                break Err(Broken("a reply to no command".into()));
            };
            answers.push((ticket, values(reply, keys)));
        };
        // The part of a reply not yet whole is kept for the next read.
        let rest = &buf[at.min(buf.len())..];
        if held {
            let mut input = input;
            input.drain(..at.min(input.len()));
            self.input = input;
        } else {
            self.input.extend_from_slice(rest);
        }
        outcome
    }
}

/// An ask's reply read as its `keys` values.
fn values(reply: Reply, keys: usize) -> Result<Values, Broken> {
    match reply {
        Reply::Bulk(v) if keys == 1 => Ok(vec![v]),
        Reply::Array(Some(items)) if items.len() == keys => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(v) => Ok(v),
                other => Err(Broken(format!("unexpected reply to MGET: {other:?}"))),
            })
            .collect(),
        Reply::Error(e) => Err(Broken(e)),
        other => Err(Broken(format!("unexpected reply to GET: {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn asks_go_after_the_greeting_and_answers_come_back_by_ticket() {
        let mut link = Link::new(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n", 1);
        link.ask(7, &keys(&["a"]));
        link.ask(8, &keys(&["b", "c"]));
        let out = link.take_output(Vec::new());
        assert_eq!(
            out,
            b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n\
              *3\r\n$4\r\nMGET\r\n$1\r\nb\r\n$1\r\nc\r\n"
                .to_vec()
        );
        assert!(!link.has_output());
        let mut answers = Vec::new();
        // The greeting's reply, the first answer whole, the second split mid-value.
        link.received(b"+OK\r\n$2\r\nhi\r\n*2\r\n$-1\r\n$3\r\nab", &mut answers)
            .unwrap();
        assert_eq!(answers, vec![(7, Ok(vec![Some(b"hi".to_vec())]))]);
        assert!(link.waiting());
        answers.clear();
        link.received(b"c\r\n", &mut answers).unwrap();
        assert_eq!(answers, vec![(8, Ok(vec![None, Some(b"abc".to_vec())]))]);
        assert!(!link.waiting());
    }

    #[test]
    fn every_split_of_the_replies_reads_the_same() {
        let replies: &[u8] = b"+OK\r\n*3\r\n$1\r\nx\r\n$-1\r\n$4\r\nyyyy\r\n$-1\r\n-ERR no\r\n";
        for split in 0..=replies.len() {
            let mut link = Link::new(b"", 1);
            link.ask(1, &keys(&["a", "b", "c"]));
            link.ask(2, &keys(&["d"]));
            link.ask(3, &keys(&["e"]));
            let mut answers = Vec::new();
            link.received(&replies[..split], &mut answers).unwrap();
            link.received(&replies[split..], &mut answers).unwrap();
            assert_eq!(
                answers,
                vec![
                    (
                        1,
                        Ok(vec![Some(b"x".to_vec()), None, Some(b"yyyy".to_vec())])
                    ),
                    (2, Ok(vec![None])),
                    // An error reply answers its own ask, and the link goes on.
                    (3, Err(Broken("ERR no".into()))),
                ],
                "split at {split}"
            );
        }
    }

    /// The greeting and its replies, the keys asked, the bytes received, why they break it.
    type Row = (
        &'static [u8],
        usize,
        &'static [&'static str],
        &'static [u8],
        &'static str,
    );

    #[test]
    fn what_breaks_a_link() {
        let table: &[Row] = &[
            (b"", 0, &["a"], b"?x\r\n", "not RESP"),
            (b"", 0, &[], b"$1\r\nx\r\n", "a reply to no command"),
            (
                b"AUTH",
                1,
                &["a"],
                b"-WRONGPASS\r\n$1\r\nx\r\n",
                "a refused greeting",
            ),
        ];
        for &(greeting, replies, asked, input, why) in table {
            let mut link = Link::new(greeting, replies);
            if !asked.is_empty() {
                link.ask(1, &keys(asked));
            }
            let mut answers = Vec::new();
            assert!(link.received(input, &mut answers).is_err(), "{why}");
            assert!(answers.is_empty(), "{why}");
            assert_eq!(link.abandon().count(), asked.len().min(1), "{why}");
        }
    }

    #[test]
    fn an_answer_of_the_wrong_shape_is_an_error_for_its_ask() {
        let mut link = Link::new(b"", 0);
        link.ask(1, &keys(&["a", "b"]));
        let mut answers = Vec::new();
        link.received(b"*1\r\n$1\r\nx\r\n", &mut answers).unwrap();
        assert!(matches!(&answers[..], [(1, Err(_))]));
    }
}
