//! The DNS wire format DNS-01 needs, sans I/O: an RFC 2136 UPDATE that adds or deletes one
//! TXT record, a TXT query, and a strict parser of the server's answer (its header, the TXT
//! strings it answers with, and its TSIG record, RFC 8945 §4.2).
//!
//! Bytes in, values out: no sockets, no clock, no key. Any input gives an [`Answer`] or a
//! [`WireError`], never a panic; every offset is checked, and a name's compression pointers
//! may only point backwards (no loop can be written).
#![forbid(unsafe_code)]

/// The longest DNS message (what a TCP message's 2-byte length can say, RFC 1035 §4.2.2).
pub const MAX_MESSAGE: usize = 65_535;
/// The longest name on the wire, its length octets and the root's included (RFC 1035 §3.1).
pub const MAX_NAME: usize = 255;
/// The longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL: usize = 63;
/// The longest character-string, one part of a TXT record (RFC 1035 §3.3).
pub const MAX_STRING: usize = 255;
/// The most compression pointers followed in one name (each must point backwards, so this
/// only bounds the work a hostile message can ask for).
pub const MAX_POINTERS: usize = 64;
/// The header's length (RFC 1035 §4.1.1).
pub const HEADER: usize = 12;

/// SOA: the zone section's type (RFC 2136 §2.3).
pub const TYPE_SOA: u16 = 6;
/// TXT (RFC 1035 §3.3.14).
pub const TYPE_TXT: u16 = 16;
/// TSIG (RFC 8945 §4.2).
pub const TYPE_TSIG: u16 = 250;
/// The Internet class.
pub const CLASS_IN: u16 = 1;
/// NONE: an update that deletes one exact RR (RFC 2136 §2.5.4).
pub const CLASS_NONE: u16 = 254;
/// ANY: TSIG's class (RFC 8945 §4.2).
pub const CLASS_ANY: u16 = 255;
/// A standard query (RFC 1035 §4.1.1).
pub const OPCODE_QUERY: u8 = 0;
/// UPDATE (RFC 2136 §1).
pub const OPCODE_UPDATE: u8 = 5;

const QR: u16 = 0x8000;
const TC: u16 = 0x0200;

/// A name that cannot be written on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameError {
    /// An empty label (`a..b`, or a leading dot).
    EmptyLabel,
    /// A label longer than [`MAX_LABEL`].
    LongLabel,
    /// Longer than [`MAX_NAME`] on the wire.
    Long,
    /// A byte other than a letter, a digit, `-` or `_`.
    Character(char),
    /// The record's name is not inside the zone it is put in.
    NotInZone { name: String, zone: String },
    /// The TXT value is longer than one character-string.
    LongValue,
}

impl std::fmt::Display for NameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NameError::EmptyLabel => f.write_str("a name with an empty label"),
            NameError::LongLabel => write!(f, "a label longer than {MAX_LABEL} bytes"),
            NameError::Long => write!(f, "a name longer than {MAX_NAME} bytes on the wire"),
            NameError::Character(c) => write!(f, "{c:?} in a name (letters, digits, - and _)"),
            NameError::NotInZone { name, zone } => write!(f, "{name} is not in the zone {zone}"),
            NameError::LongValue => write!(f, "a TXT value longer than {MAX_STRING} bytes"),
        }
    }
}

impl std::error::Error for NameError {}

/// An answer that is not a well-formed DNS message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The message ends inside a field.
    Short,
    /// A name that is malformed: a reserved label type, a forward or looping pointer, too long.
    BadName(&'static str),
    /// Bytes after the last record the counts announce.
    Trailing,
    /// A TSIG record that is not the last record of the additional section (RFC 8945 §5.1).
    TsigNotLast,
    /// A TSIG record whose class is not ANY or whose TTL is not 0.
    BadTsig,
    /// A TXT record's strings overrun its data.
    BadTxt,
    /// Longer than [`MAX_MESSAGE`].
    Long,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Short => f.write_str("the answer ends inside a field"),
            WireError::BadName(why) => write!(f, "a malformed name in the answer ({why})"),
            WireError::Trailing => f.write_str("bytes after the answer's last record"),
            WireError::TsigNotLast => f.write_str("a TSIG record that is not the last one"),
            WireError::BadTsig => f.write_str("a TSIG record with a class or TTL of its own"),
            WireError::BadTxt => f.write_str("a TXT record whose strings overrun it"),
            WireError::Long => write!(f, "an answer longer than {MAX_MESSAGE} bytes"),
        }
    }
}

impl std::error::Error for WireError {}

/// `text` (`example.com`, `example.com.`) in wire form, lowercase: the canonical form TSIG
/// digests (RFC 8945 §4.3.3). The root is `""` or `"."`.
pub fn encode_name(text: &str) -> Result<Vec<u8>, NameError> {
    let text = text.strip_suffix('.').unwrap_or(text);
    let mut out = Vec::with_capacity(text.len() + 2);
    if !text.is_empty() {
        for label in text.split('.') {
            if label.is_empty() {
                return Err(NameError::EmptyLabel);
            }
            if label.len() > MAX_LABEL {
                return Err(NameError::LongLabel);
            }
            if let Some(c) = label
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
            {
                return Err(NameError::Character(c));
            }
            out.push(label.len() as u8);
            out.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
        }
    }
    out.push(0);
    if out.len() > MAX_NAME {
        return Err(NameError::Long);
    }
    Ok(out)
}

/// Whether `name` is `zone` or below it (both as text, case-insensitive, a final dot
/// ignored).
pub fn in_zone(name: &str, zone: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    let zone = zone.strip_suffix('.').unwrap_or(zone).to_ascii_lowercase();
    zone.is_empty()
        || name == zone
        || name
            .strip_suffix(&zone)
            .is_some_and(|head| head.ends_with('.'))
}

/// What an UPDATE does to the one TXT record it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Add it with this TTL (RFC 2136 §2.5.1); other TXT records at the name are kept.
    Add { ttl: u32 },
    /// Delete that exact record (RFC 2136 §2.5.4: class NONE, TTL 0).
    Delete,
}

fn header(out: &mut Vec<u8>, id: u16, flags: u16, counts: [u16; 4]) {
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags.to_be_bytes());
    for c in counts {
        out.extend_from_slice(&c.to_be_bytes());
    }
}

/// An UPDATE of `zone` (RFC 2136 §2): no prerequisite, one update RR for the TXT record
/// `name` holding the one string `value`. Unsigned: [`crate::acme::dns::tsig`] signs it.
pub fn update(
    id: u16,
    zone: &str,
    name: &str,
    value: &[u8],
    change: Change,
) -> Result<Vec<u8>, NameError> {
    if !in_zone(name, zone) {
        return Err(NameError::NotInZone {
            name: name.to_string(),
            zone: zone.to_string(),
        });
    }
    if value.len() > MAX_STRING {
        return Err(NameError::LongValue);
    }
    let zone = encode_name(zone)?;
    let owner = encode_name(name)?;
    let mut out = Vec::with_capacity(HEADER + zone.len() + owner.len() + value.len() + 16);
    // ZOCOUNT 1, PRCOUNT 0, UPCOUNT 1, ADCOUNT 0 (RFC 2136 §2.2).
    header(&mut out, id, u16::from(OPCODE_UPDATE) << 11, [1, 0, 1, 0]);
    out.extend_from_slice(&zone);
    out.extend_from_slice(&TYPE_SOA.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.extend_from_slice(&owner);
    out.extend_from_slice(&TYPE_TXT.to_be_bytes());
    let (class, ttl) = match change {
        Change::Add { ttl } => (CLASS_IN, ttl),
        Change::Delete => (CLASS_NONE, 0),
    };
    out.extend_from_slice(&class.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(value.len() as u16 + 1).to_be_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value);
    Ok(out)
}

/// A query for the TXT records at `name` (recursion not desired: it asks the zone's own
/// server).
pub fn query_txt(id: u16, name: &str) -> Result<Vec<u8>, NameError> {
    let owner = encode_name(name)?;
    let mut out = Vec::with_capacity(HEADER + owner.len() + 4);
    header(&mut out, id, u16::from(OPCODE_QUERY) << 11, [1, 0, 0, 0]);
    out.extend_from_slice(&owner);
    out.extend_from_slice(&TYPE_TXT.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// A message's header fields that decide what to do with it before it is parsed whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub id: u16,
    /// QR: an answer, not a request.
    pub answer: bool,
    pub opcode: u8,
    /// TC: cut to fit a datagram; ask again over TCP.
    pub truncated: bool,
    /// The header's 4-bit RCODE (RFC 1035 §4.1.1; 9 NOTAUTH, 10 NOTZONE: RFC 2136 §2.2).
    pub rcode: u8,
    /// QDCOUNT (ZOCOUNT), ANCOUNT (PRCOUNT), NSCOUNT (UPCOUNT), ARCOUNT.
    pub counts: [u16; 4],
}

/// The header of `msg`.
pub fn parse_header(msg: &[u8]) -> Result<Header, WireError> {
    let h = msg.get(..HEADER).ok_or(WireError::Short)?;
    let word = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let flags = word(2);
    Ok(Header {
        id: word(0),
        answer: flags & QR != 0,
        opcode: ((flags >> 11) & 0xF) as u8,
        truncated: flags & TC != 0,
        rcode: (flags & 0xF) as u8,
        counts: [word(4), word(6), word(8), word(10)],
    })
}

/// The TSIG record closing a message (RFC 8945 §4.2), as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tsig<'a> {
    /// Where the record begins: the MAC covers the message up to here, with ARCOUNT one less
    /// and the ID set back to `original_id` (RFC 8945 §4.3.1).
    pub start: usize,
    /// The key's name, wire form, lowercase.
    pub key: Vec<u8>,
    /// The algorithm's name, wire form, lowercase.
    pub algorithm: Vec<u8>,
    /// Seconds since the epoch (48 bits).
    pub time_signed: u64,
    pub fudge: u16,
    pub mac: &'a [u8],
    pub original_id: u16,
    /// The TSIG error (RFC 8945 §3: 16 BADSIG, 17 BADKEY, 18 BADTIME, 22 BADTRUNC).
    pub error: u16,
    pub other: &'a [u8],
}

/// A DNS message read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer<'a> {
    pub header: Header,
    /// The answer section's TXT records of class IN, each its strings joined.
    pub txt: Vec<Vec<u8>>,
    pub tsig: Option<Tsig<'a>>,
}

/// A reader over a message: every read checks the bounds.
struct Reader<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(WireError::Short)?;
        let got = self.msg.get(self.at..end).ok_or(WireError::Short)?;
        self.at = end;
        Ok(got)
    }

    fn u16(&mut self) -> Result<u16, WireError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, WireError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u48(&mut self) -> Result<u64, WireError> {
        let b = self.take(6)?;
        Ok(b.iter().fold(0u64, |n, &x| (n << 8) | u64::from(x)))
    }

    /// A name at the cursor, its pointers followed: (wire form lowercase); the cursor moves
    /// past the name as written here (up to and including its first pointer).
    fn name(&mut self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::new();
        let mut p = self.at;
        let mut resume = None;
        let mut pointers = 0;
        loop {
            let len = usize::from(*self.msg.get(p).ok_or(WireError::Short)?);
            match len & 0xC0 {
                0x00 if len == 0 => {
                    out.push(0);
                    self.at = resume.unwrap_or(p + 1);
                    return Ok(out);
                }
                0x00 => {
                    let label = self.msg.get(p + 1..p + 1 + len).ok_or(WireError::Short)?;
                    if out.len() + 1 + len + 1 > MAX_NAME {
                        return Err(WireError::BadName("longer than 255 bytes"));
                    }
                    out.push(len as u8);
                    out.extend(label.iter().map(u8::to_ascii_lowercase));
                    p += 1 + len;
                }
                0xC0 => {
                    let low = usize::from(*self.msg.get(p + 1).ok_or(WireError::Short)?);
                    let target = ((len & 0x3F) << 8) | low;
                    // RFC 1035 §4.1.4: a pointer names a prior occurrence.
                    if target >= p {
                        return Err(WireError::BadName("a pointer that does not point back"));
                    }
                    pointers += 1;
                    if pointers > MAX_POINTERS {
                        return Err(WireError::BadName("too many pointers"));
                    }
                    resume.get_or_insert(p + 2);
                    p = target;
                }
                _ => return Err(WireError::BadName("a reserved label type")),
            }
        }
    }
}

/// `msg` read whole: the header, the question section skipped, the answer section's TXT
/// records, the TSIG record if there is one (it must be the last record), and nothing after.
pub fn parse(msg: &[u8]) -> Result<Answer<'_>, WireError> {
    if msg.len() > MAX_MESSAGE {
        return Err(WireError::Long);
    }
    let header = parse_header(msg)?;
    let mut r = Reader { msg, at: HEADER };
    for _ in 0..header.counts[0] {
        r.name()?;
        r.take(4)?;
    }
    let [_, an, ns, ar] = header.counts;
    let total = usize::from(an) + usize::from(ns) + usize::from(ar);
    let mut txt = Vec::new();
    let mut tsig = None;
    for i in 0..total {
        let start = r.at;
        let owner = r.name()?;
        let rtype = r.u16()?;
        let class = r.u16()?;
        let ttl = r.u32()?;
        let len = usize::from(r.u16()?);
        let rdata_at = r.at;
        let rdata = r.take(len)?;
        if rtype == TYPE_TSIG {
            if i + 1 != total || i < usize::from(an) + usize::from(ns) {
                return Err(WireError::TsigNotLast);
            }
            if class != CLASS_ANY || ttl != 0 {
                return Err(WireError::BadTsig);
            }
            let mut t = Reader { msg, at: rdata_at };
            let algorithm = t.name()?;
            let time_signed = t.u48()?;
            let fudge = t.u16()?;
            let mac_len = usize::from(t.u16()?);
            let mac = t.take(mac_len)?;
            let original_id = t.u16()?;
            let error = t.u16()?;
            let other_len = usize::from(t.u16()?);
            let other = t.take(other_len)?;
            if t.at != r.at {
                return Err(WireError::BadTsig);
            }
            tsig = Some(Tsig {
                start,
                key: owner,
                algorithm,
                time_signed,
                fudge,
                mac,
                original_id,
                error,
                other,
            });
        } else if i < usize::from(an) && rtype == TYPE_TXT && class == CLASS_IN {
            let mut joined = Vec::with_capacity(rdata.len());
            let mut rest = rdata;
            while let Some((&n, tail)) = rest.split_first() {
                let part = tail.get(..usize::from(n)).ok_or(WireError::BadTxt)?;
                joined.extend_from_slice(part);
                rest = &tail[usize::from(n)..];
            }
            txt.push(joined);
        }
    }
    if r.at != msg.len() {
        return Err(WireError::Trailing);
    }
    Ok(Answer { header, txt, tsig })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_written_lowercase_with_their_lengths() {
        assert_eq!(encode_name("Ab.c.").unwrap(), b"\x02ab\x01c\x00");
        assert_eq!(encode_name("").unwrap(), b"\x00");
        assert_eq!(encode_name(".").unwrap(), b"\x00");
        assert_eq!(encode_name("a..b"), Err(NameError::EmptyLabel));
        assert_eq!(encode_name(&"a".repeat(64)), Err(NameError::LongLabel));
        let long = vec!["a".repeat(63); 4].join(".");
        assert_eq!(encode_name(&long), Err(NameError::Long));
        assert_eq!(encode_name("a b"), Err(NameError::Character(' ')));
    }

    #[test]
    fn a_name_is_in_its_zone_and_its_parent_s_not_in_a_sibling_s() {
        assert!(in_zone("_acme-challenge.fleet.test", "fleet.test."));
        assert!(in_zone("fleet.test", "FLEET.test"));
        assert!(!in_zone("_acme-challenge.notfleet.test", "fleet.test"));
        assert!(!in_zone("test", "fleet.test"));
    }

    // RFC 2136 §2.2-§2.5: header, zone section (SOA, IN), no prerequisite, one update RR.
    #[test]
    fn an_update_adds_then_deletes_one_exact_txt_record() {
        let add = update(
            0x1234,
            "fleet.test",
            "_acme-challenge.fleet.test",
            b"v",
            Change::Add { ttl: 60 },
        )
        .unwrap();
        let mut want = vec![0x12, 0x34, 0x28, 0, 0, 1, 0, 0, 0, 1, 0, 0];
        want.extend_from_slice(b"\x05fleet\x04test\x00\x00\x06\x00\x01");
        want.extend_from_slice(b"\x0f_acme-challenge\x05fleet\x04test\x00");
        want.extend_from_slice(&[0, 16, 0, 1, 0, 0, 0, 60, 0, 2, 1, b'v']);
        assert_eq!(add, want);
        let delete = update(
            1,
            "fleet.test",
            "_acme-challenge.fleet.test",
            b"v",
            Change::Delete,
        )
        .unwrap();
        // Class NONE, TTL 0, the same RDATA (RFC 2136 §2.5.4).
        assert_eq!(
            &delete[delete.len() - 12..],
            &[0, 16, 0, 254, 0, 0, 0, 0, 0, 2, 1, b'v']
        );
        assert!(matches!(
            update(
                1,
                "other.test",
                "_acme-challenge.fleet.test",
                b"v",
                Change::Delete
            ),
            Err(NameError::NotInZone { .. })
        ));
        assert_eq!(
            update(1, "t", "a.t", &[b'x'; 256], Change::Delete),
            Err(NameError::LongValue)
        );
    }

    /// An answer to `query_txt(7, "a.test")` with two TXT records (one in two strings), the
    /// owner names compressed to the question's.
    fn txt_answer() -> Vec<u8> {
        let mut m = query_txt(7, "a.test").unwrap();
        m[2] = 0x84; // QR, AA
        m[7] = 2; // ANCOUNT
        for rdata in [&b"\x02hi"[..], b"\x01a\x02bc"] {
            m.extend_from_slice(&[0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, rdata.len() as u8]);
            m.extend_from_slice(rdata);
        }
        m
    }

    #[test]
    fn a_txt_answer_gives_each_record_s_strings_joined() {
        let m = txt_answer();
        let a = parse(&m).unwrap();
        assert_eq!(a.header.id, 7);
        assert!(a.header.answer);
        assert_eq!(a.header.rcode, 0);
        assert_eq!(a.txt, vec![b"hi".to_vec(), b"abc".to_vec()]);
        assert_eq!(a.tsig, None);
        // Every prefix is short; a byte more is trailing.
        for end in 0..m.len() {
            assert!(parse(&m[..end]).is_err(), "prefix {end}");
        }
        let mut longer = m.clone();
        longer.push(0);
        assert_eq!(parse(&longer), Err(WireError::Trailing));
    }

    #[test]
    fn a_txt_record_whose_string_overruns_it_is_refused() {
        let mut m = txt_answer();
        let last = m.len() - 3; // the "\x02bc" string's length
        m[last] = 3;
        assert_eq!(parse(&m), Err(WireError::BadTxt));
    }

    // RFC 1035 §4.1.4: a pointer to a prior occurrence; a loop or a forward one is refused.
    #[test]
    fn a_pointer_loop_or_forward_pointer_is_refused() {
        let mut m = txt_answer();
        m[HEADER + 8 + 4] = 0xC0; // the first answer's owner: a pointer to itself
        m[HEADER + 8 + 5] = (HEADER + 8 + 4) as u8;
        assert!(matches!(parse(&m), Err(WireError::BadName(_))));
        let mut m = txt_answer();
        m[HEADER + 8 + 5] = 200; // forward
        assert!(matches!(parse(&m), Err(WireError::BadName(_))));
        let mut m = txt_answer();
        m[HEADER] = 0x80; // a reserved label type
        assert!(matches!(parse(&m), Err(WireError::BadName(_))));
    }

    fn tsig_rr(error: u16, mac: &[u8]) -> Vec<u8> {
        let mut rr = b"\x08linerate\x00\x00\xfa\x00\xff\x00\x00\x00\x00".to_vec();
        let mut rdata = encode_name("hmac-sha256").unwrap();
        rdata.extend_from_slice(&[0, 0, 0x65, 0x4f, 0, 1, 1, 44]); // time 0x654f0001, fudge 300
        rdata.extend_from_slice(&(mac.len() as u16).to_be_bytes());
        rdata.extend_from_slice(mac);
        rdata.extend_from_slice(&[0, 7]);
        rdata.extend_from_slice(&error.to_be_bytes());
        rdata.extend_from_slice(&[0, 0]);
        rr.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        rr.extend_from_slice(&rdata);
        rr
    }

    // RFC 8945 §4.2: the TSIG RR's fields; §5.1: it is the last record.
    #[test]
    fn a_tsig_record_is_read_and_must_be_last() {
        let mut m = txt_answer();
        let start = m.len();
        m[11] = 1; // ARCOUNT
        m.extend_from_slice(&tsig_rr(16, b""));
        let a = parse(&m).unwrap();
        let t = a.tsig.unwrap();
        assert_eq!(t.start, start);
        assert_eq!(t.key, b"\x08linerate\x00");
        assert_eq!(t.algorithm, encode_name("hmac-sha256").unwrap());
        assert_eq!(t.time_signed, 0x654f_0001);
        assert_eq!(t.fudge, 300);
        assert_eq!(t.original_id, 7);
        assert_eq!(t.error, 16);
        assert!(t.mac.is_empty());
        assert_eq!(parse(&m[..m.len() - 1]), Err(WireError::Short));

        // A TSIG in the answer section, then a TXT: not last.
        let mut m = query_txt(7, "a.test").unwrap();
        m[2] = 0x80;
        m[7] = 2;
        m.extend_from_slice(&tsig_rr(0, &[1; 32]));
        m.extend_from_slice(&[0xC0, 12, 0, 16, 0, 1, 0, 0, 0, 60, 0, 1, 0]);
        assert_eq!(parse(&m), Err(WireError::TsigNotLast));
    }

    #[test]
    fn the_header_says_truncated_and_the_rcode() {
        let mut m = txt_answer();
        m[2] |= 0x02;
        m[3] = 9;
        let h = parse_header(&m).unwrap();
        assert!(h.truncated);
        assert_eq!(h.rcode, 9);
        assert_eq!(h.opcode, OPCODE_QUERY);
        assert_eq!(parse_header(&m[..11]), Err(WireError::Short));
    }
}
