//! Collecting a body for the store while it streams to the client: [`Fill`] keeps a copy of
//! each piece until the body passes the store's maximum object size, then drops the copy and
//! keeps nothing more. It never holds back, shortens or alters what the caller forwards: the
//! caller sends every piece as it came, whatever `Fill` decides (an object over the
//! limit streams through uncached, its bytes never cut).

use crate::shared::Shared;

/// A body being collected for the store.
#[derive(Debug)]
pub struct Fill {
    max: usize,
    state: State,
}

#[derive(Debug)]
enum State {
    Collecting(Vec<u8>),
    /// Over the limit (or declared so by Content-Length): nothing kept.
    TooBig,
}

impl Fill {
    /// Starts collecting a body for an object of at most `max` bytes. `declared` is the
    /// Content-Length when the answer has one: a body declared over the limit is not
    /// collected at all, and the buffer is sized once for one declared under it.
    pub fn new(max: usize, declared: Option<u64>) -> Fill {
        let state = match declared {
            Some(n) if n > max as u64 => State::TooBig,
            Some(n) => State::Collecting(Vec::with_capacity(n as usize)),
            None => State::Collecting(Vec::new()),
        };
        Fill { max, state }
    }

    /// Copies `piece` (already forwarded, or about to be) unless the body has passed the
    /// limit; whether it is still being collected.
    pub fn push(&mut self, piece: &[u8]) -> bool {
        if let State::Collecting(buf) = &mut self.state {
            if buf.len() + piece.len() > self.max {
                self.state = State::TooBig;
                return false;
            }
            buf.extend_from_slice(piece);
            return true;
        }
        false
    }

    /// Whether the body is still being collected.
    pub fn collecting(&self) -> bool {
        matches!(self.state, State::Collecting(_))
    }

    /// The whole body, when the answer ended cleanly (`complete`: the framing said so — the
    /// Content-Length reached or the last chunk read) and stayed under the limit; `None`
    /// otherwise, and then nothing may be stored (a cut body must never be served as whole).
    pub fn finish(self, complete: bool) -> Option<Shared> {
        match self.state {
            // Kept as collected, no copy when it was sized by its Content-Length; one that
            // grew as it came gives back what it grew past (the store counts only the bytes).
            State::Collecting(mut buf) if complete => {
                buf.shrink_to_fit();
                Some(Shared::new(buf))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_under_the_limit() {
        let mut f = Fill::new(10, None);
        assert!(f.push(b"hello"));
        assert!(f.push(b"world"));
        assert_eq!(f.finish(true).as_deref(), Some(&b"helloworld"[..]));
    }

    #[test]
    fn over_the_limit_keeps_nothing() {
        let mut f = Fill::new(10, None);
        assert!(f.push(b"hello"));
        assert!(!f.push(b"world!"), "11 bytes");
        assert!(!f.collecting());
        assert!(!f.push(b""), "stays over");
        assert_eq!(f.finish(true), None);
    }

    #[test]
    fn declared_over_the_limit_is_never_collected() {
        let mut f = Fill::new(10, Some(11));
        assert!(!f.collecting());
        assert!(!f.push(b"x"));
        assert_eq!(f.finish(true), None);
        assert!(Fill::new(10, Some(10)).collecting());
    }

    #[test]
    fn a_cut_body_is_never_stored() {
        // The upstream closed before the declared length (or the last chunk): the bytes
        // collected are a prefix, which must not be stored as the whole.
        let mut f = Fill::new(100, Some(20));
        f.push(b"0123456789");
        assert_eq!(f.finish(false), None);
    }
}
