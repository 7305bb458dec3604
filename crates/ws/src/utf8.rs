//! Incremental UTF-8 validation for a text message that arrives in pieces (fragments, or a
//! frame split across reads): each piece is checked as it comes, so an invalid byte fails
//! the connection at once (RFC 6455 §8.1) rather than when the message ends. At most three
//! bytes of an unfinished character are carried between pieces.
#![forbid(unsafe_code)]

/// The state between pieces: the unfinished character at the end of the last one.
#[derive(Clone, Copy, Debug, Default)]
pub struct Utf8 {
    tail: [u8; 4],
    len: u8,
}

/// The bytes are not UTF-8, and no later byte can make them so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid;

impl Utf8 {
    /// Checks the next piece.
    pub fn feed(&mut self, mut piece: &[u8]) -> Result<(), Invalid> {
        if self.len > 0 {
            // Finish the carried character with the first bytes of this piece.
            let have = usize::from(self.len);
            let take = piece.len().min(4 - have);
            self.tail[have..have + take].copy_from_slice(&piece[..take]);
            let joined = &self.tail[..have + take];
            match std::str::from_utf8(joined) {
                Ok(_) => {
                    self.len = 0;
                    piece = &piece[take..];
                }
                Err(e) if e.error_len().is_some() && e.valid_up_to() == 0 => return Err(Invalid),
                Err(e) if e.valid_up_to() == 0 => {
                    // Still unfinished: every byte of the piece was taken.
                    self.len = (have + take) as u8;
                    return Ok(());
                }
                Err(e) => {
                    // The carried character ended within `joined`; go on after it.
                    let used = e.valid_up_to() - have;
                    self.len = 0;
                    piece = &piece[used..];
                }
            }
        }
        match std::str::from_utf8(piece) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_some() => Err(Invalid),
            Err(e) => {
                let rest = &piece[e.valid_up_to()..];
                self.tail[..rest.len()].copy_from_slice(rest);
                self.len = rest.len() as u8;
                Ok(())
            }
        }
    }

    /// The message ended: valid only if no character is left unfinished.
    pub fn finish(&mut self) -> Result<(), Invalid> {
        let unfinished = self.len > 0;
        *self = Utf8::default();
        if unfinished { Err(Invalid) } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes).is_ok()
    }

    /// Fed in every split of two and byte by byte, the answer is the whole string's, and an
    /// invalid byte is refused in the piece that holds it.
    #[test]
    fn any_split_agrees_with_the_whole() {
        let rows: &[&[u8]] = &[
            b"hello",
            "κόσμε".as_bytes(),
            "\u{10FFFF}\u{FFFF}\u{800}\u{80}".as_bytes(),
            b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited", // surrogate
            b"\xf4\x90\x80\x80",                                               // over U+10FFFF
            b"\xc0\xaf",                                                       // overlong
            b"\xe0\x80\xaf",
            b"\xce",         // unfinished at the end
            b"\xf0\x9f\x98", // unfinished 4-byte
            b"\xff",
            b"ab\xed\xbf\xbf",
        ];
        for &row in rows {
            let want = whole(row);
            for split in 0..=row.len() {
                let mut v = Utf8::default();
                let got = v.feed(&row[..split]).and_then(|()| v.feed(&row[split..]));
                let got = got.and_then(|()| v.finish()).is_ok();
                assert_eq!(got, want, "{row:x?} split at {split}");
            }
            let mut v = Utf8::default();
            let got = row.iter().try_for_each(|b| v.feed(std::slice::from_ref(b)));
            assert_eq!(
                got.and_then(|()| v.finish()).is_ok(),
                want,
                "{row:x?} bytewise"
            );
        }
    }

    /// RFC 6455 §8.1 and Autobahn 6.x: a byte that can begin no valid sequence fails at
    /// once, before the message (or even its character) ends.
    #[test]
    fn fails_fast() {
        let mut v = Utf8::default();
        assert_eq!(v.feed(b"\xce\xba\xf4"), Ok(()));
        assert_eq!(v.feed(b"\x90"), Err(Invalid)); // F4 90: beyond U+10FFFF already
        let mut v = Utf8::default();
        assert_eq!(v.feed(b"\xed"), Ok(()));
        assert_eq!(v.feed(b"\xa0"), Err(Invalid)); // ED A0: a surrogate already
    }
}
