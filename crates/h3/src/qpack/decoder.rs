//! The QPACK decoder (RFC 9204 §2.2, §4.3, §4.5): one connection's dynamic table, filled by
//! the peer's encoder stream, and the field sections of its requests decoded against it and
//! the static table.
//!
//! The table never holds more than the capacity this side announced
//! (SETTINGS_QPACK_MAX_TABLE_CAPACITY, [`Decoder::new`]); an encoder stream instruction split
//! across reads is held until whole, and one that could not fit the table is refused before
//! it is all in. A section that needs inserts not yet received is reported as
//! [`DecodeError::Blocked`]: the connection holds it (within SETTINGS_QPACK_BLOCKED_STREAMS)
//! or fails.

use std::collections::VecDeque;

pub use linerate_hpack::ListSize;

use super::prim::{self, Bad, Str};
use super::table::STATIC;
use crate::Code;

/// A dynamic table entry's overhead beside its name and value (RFC 9204 §3.2.1).
const ENTRY_OVERHEAD: usize = 32;

/// Why a field section was not decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// It needs this Required Insert Count, and fewer entries have been inserted (§2.1.2).
    Blocked(u64),
    /// QPACK_DECOMPRESSION_FAILED (a connection error, §2.2.3, §4.5).
    Failed,
}

impl DecodeError {
    /// The connection error for a section that cannot wait.
    pub fn code(self) -> Code {
        Code::QpackDecompressionFailed
    }
}

/// A decoded section's facts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// Non-zero: the section referred to the dynamic table, and a Section Acknowledgment is
    /// owed for its stream (§2.2.2.1, [`write_section_ack`]).
    pub required_insert_count: u64,
    /// The field section's size (RFC 9114 §4.2.2: names, values and 32 per field), or
    /// that it went past the limit [`Decoder::decode_within`] was given.
    pub list: ListSize,
}

type Entry = (Box<[u8]>, Box<[u8]>);

/// One connection's QPACK decoder.
pub struct Decoder {
    /// Oldest first: absolute index `dropped + i` is `table[i]`.
    table: VecDeque<Entry>,
    /// The entries' sizes added up (name + value + 32 each).
    size: usize,
    /// The capacity the encoder set (§4.3.1), at most `max_capacity`.
    capacity: usize,
    /// What this side announced as SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    max_capacity: usize,
    /// Entries ever inserted: the Insert Count (§3.2.4).
    inserted: u64,
    /// The Insert Count the encoder knows we have (by increments and acknowledgments).
    known: u64,
    /// An encoder stream instruction split across reads.
    pending: Vec<u8>,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Decoder {
    /// A decoder whose table holds at most `max_capacity` bytes (0: no dynamic table).
    pub fn new(max_capacity: usize) -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            capacity: 0,
            max_capacity,
            inserted: 0,
            known: 0,
            pending: Vec::new(),
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The table's size now (at most the capacity set, at most `max_capacity`).
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// The Insert Count: entries inserted so far.
    pub fn insert_count(&self) -> u64 {
        self.inserted
    }

    /// Bytes of the peer's encoder stream (§4.3), in any split. An error is a connection
    /// error of type QPACK_ENCODER_STREAM_ERROR (§2.2.3, §3.2.2, §4.3).
    pub fn encoder_stream(&mut self, input: &[u8]) -> Result<(), Code> {
        let mut buf = std::mem::take(&mut self.pending);
        let data: &[u8] = if buf.is_empty() {
            input
        } else {
            buf.extend_from_slice(input);
            &buf
        };
        let mut pos = 0;
        let result = loop {
            if pos == data.len() {
                break Ok(());
            }
            match self.instruction(data, pos) {
                Ok(next) => pos = next,
                Err(Bad::Short) => {
                    // A whole instruction is at most its entry, Huffman-coded (at most 30
                    // bits a byte), and two short lengths: more than that is not one.
                    if data.len() - pos > 4 * self.max_capacity + 64 {
                        break Err(Code::QpackEncoderStreamError);
                    }
                    let rest = data[pos..].to_vec();
                    self.pending = rest;
                    break Ok(());
                }
                Err(Bad::Invalid) => break Err(Code::QpackEncoderStreamError),
            }
        };
        if self.pending.is_empty() {
            buf.clear();
            self.pending = buf;
        }
        result
    }

    /// One encoder instruction at `b[pos..]`; the position after it.
    fn instruction(&mut self, b: &[u8], pos: usize) -> Result<usize, Bad> {
        let first = b[pos];
        if first & 0x80 != 0 {
            // Insert with Name Reference (§4.3.2): T, a 6-bit index, the value.
            let (index, at) = prim::int(b, pos, 6)?;
            let (value, end) = prim::string(b, at, 7, &mut self.value)?;
            let name: Box<[u8]> = if first & 0x40 != 0 {
                Box::from(STATIC.get(index as usize).ok_or(Bad::Invalid)?.0)
            } else {
                Box::from(&*self.relative(index).ok_or(Bad::Invalid)?.0)
            };
            let value = self.take(b, value, true);
            self.insert(name, value)?;
            Ok(end)
        } else if first & 0x40 != 0 {
            // Insert with Literal Name (§4.3.3): H, a 5-bit length, the name, the value.
            let (name, at) = prim::string(b, pos, 5, &mut self.name)?;
            let (value, end) = prim::string(b, at, 7, &mut self.value)?;
            let name = self.take(b, name, false);
            let value = self.take(b, value, true);
            self.insert(name, value)?;
            Ok(end)
        } else if first & 0x20 != 0 {
            // Set Dynamic Table Capacity (§4.3.1).
            let (capacity, end) = prim::int(b, pos, 5)?;
            if capacity > self.max_capacity as u64 {
                return Err(Bad::Invalid);
            }
            self.capacity = capacity as usize;
            self.evict(0);
            Ok(end)
        } else {
            // Duplicate (§4.3.4): a 5-bit relative index.
            let (index, end) = prim::int(b, pos, 5)?;
            let (n, v) = self.relative(index).ok_or(Bad::Invalid)?;
            let (n, v) = (n.clone(), v.clone());
            self.insert(n, v)?;
            Ok(end)
        }
    }

    /// A string just read, as an owned entry part.
    fn take(&self, b: &[u8], s: Str, value: bool) -> Box<[u8]> {
        match s {
            Str::Raw(from, to) => Box::from(&b[from..to]),
            Str::Decoded if value => Box::from(&self.value[..]),
            Str::Decoded => Box::from(&self.name[..]),
        }
    }

    /// The entry `index` places before the newest (relative indexing on the encoder stream,
    /// §3.2.5); `None` if there is none, or it was evicted.
    fn relative(&self, index: u64) -> Option<&Entry> {
        let abs = self.inserted.checked_sub(index.checked_add(1)?)?;
        self.absolute(abs)
    }

    fn absolute(&self, abs: u64) -> Option<&Entry> {
        let dropped = self.inserted - self.table.len() as u64;
        self.table
            .get(usize::try_from(abs.checked_sub(dropped)?).ok()?)
    }

    /// §3.2.2: an entry larger than the capacity is an error; older entries make room.
    fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) -> Result<(), Bad> {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.capacity {
            return Err(Bad::Invalid);
        }
        self.evict(size);
        self.size += size;
        self.table.push_back((name, value));
        self.inserted += 1;
        Ok(())
    }

    /// Drops the oldest entries until `room` more bytes fit the capacity.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.capacity {
            let Some((n, v)) = self.table.pop_front() else {
                break;
            };
            self.size -= n.len() + v.len() + ENTRY_OVERHEAD;
        }
    }

    /// Decodes one whole encoded field section, calling `field` with each name and value in
    /// order. On success, a non-zero [`Decoded::required_insert_count`] is owed a Section
    /// Acknowledgment on the decoder stream.
    pub fn decode(
        &mut self,
        section: &[u8],
        field: impl FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, DecodeError> {
        self.decode_within(section, usize::MAX, field)
    }

    /// [`Decoder::decode`], handing out fields only while the section's decoded size stays
    /// within `limit` (SETTINGS_MAX_FIELD_SECTION_SIZE): past it the rest is still read and
    /// checked (every reference must be valid), but a section that names one large table
    /// entry thousands of times (a QPACK bomb) is never expanded.
    pub fn decode_within(
        &mut self,
        section: &[u8],
        limit: usize,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, DecodeError> {
        let fail = |_| DecodeError::Failed;
        let (encoded, pos) = prim::int(section, 0, 8).map_err(fail)?;
        let required = self.required_insert_count(encoded)?;
        let sign = *section.get(pos).ok_or(DecodeError::Failed)? & 0x80 != 0;
        let (delta, mut pos) = prim::int(section, pos, 7).map_err(fail)?;
        let base = if sign {
            // §4.5.1.2: Base = Required Insert Count - Delta Base - 1, never below 0.
            required.checked_sub(delta + 1).ok_or(DecodeError::Failed)?
        } else {
            required.checked_add(delta).ok_or(DecodeError::Failed)?
        };
        if required > self.inserted {
            return Err(DecodeError::Blocked(required));
        }
        let Decoder {
            table,
            inserted,
            name,
            value,
            ..
        } = self;
        let dropped = *inserted - table.len() as u64;
        // §2.2.3: a reference at or past the Required Insert Count, or to an evicted entry.
        let dynamic = |abs: Option<u64>| -> Result<&Entry, DecodeError> {
            let abs = abs.filter(|&a| a < required && a >= dropped);
            let abs = abs.ok_or(DecodeError::Failed)?;
            Ok(&table[(abs - dropped) as usize])
        };
        let static_entry = |index: u64| STATIC.get(index as usize).ok_or(DecodeError::Failed);
        let mut size = 0usize;
        // Each field's size is counted before it is handed out.
        let mut field = |n: &[u8], v: &[u8]| {
            size = size.saturating_add(n.len() + v.len() + ENTRY_OVERHEAD);
            if size <= limit {
                field(n, v);
            }
        };
        while pos < section.len() {
            let first = section[pos];
            if first & 0x80 != 0 {
                // Indexed Field Line (§4.5.2): T, a 6-bit index.
                let (index, next) = prim::int(section, pos, 6).map_err(fail)?;
                pos = next;
                let (n, v) = if first & 0x40 != 0 {
                    let (n, v) = static_entry(index)?;
                    (*n, *v)
                } else {
                    let (n, v) = dynamic(base.checked_sub(index + 1))?;
                    (&n[..], &v[..])
                };
                field(n, v);
            } else if first & 0x40 != 0 {
                // Literal Field Line with Name Reference (§4.5.4): N, T, a 4-bit index.
                let (index, next) = prim::int(section, pos, 4).map_err(fail)?;
                let (s, next) = prim::string(section, next, 7, value).map_err(fail)?;
                pos = next;
                let n = if first & 0x10 != 0 {
                    static_entry(index)?.0
                } else {
                    &dynamic(base.checked_sub(index + 1))?.0[..]
                };
                field(n, text(section, s, value));
            } else if first & 0x20 != 0 {
                // Literal Field Line with Literal Name (§4.5.6): N, H, a 3-bit length.
                let (ns, next) = prim::string(section, pos, 3, name).map_err(fail)?;
                let (vs, next) = prim::string(section, next, 7, value).map_err(fail)?;
                pos = next;
                field(text(section, ns, name), text(section, vs, value));
            } else if first & 0x10 != 0 {
                // Indexed Field Line with Post-Base Index (§4.5.3): a 4-bit index.
                let (index, next) = prim::int(section, pos, 4).map_err(fail)?;
                pos = next;
                let (n, v) = dynamic(base.checked_add(index))?;
                field(n, v);
            } else {
                // Literal Field Line with Post-Base Name Reference (§4.5.5): N, a 3-bit index.
                let (index, next) = prim::int(section, pos, 3).map_err(fail)?;
                let (s, next) = prim::string(section, next, 7, value).map_err(fail)?;
                pos = next;
                let n = &dynamic(base.checked_add(index))?.0[..];
                field(n, text(section, s, value));
            }
        }
        if required > self.known {
            // The acknowledgment tells the encoder this many inserts arrived (§4.4.1).
            self.known = required;
        }
        Ok(Decoded {
            required_insert_count: required,
            list: if size <= limit {
                ListSize::Within(size)
            } else {
                ListSize::Over
            },
        })
    }

    /// §4.5.1.1: the Required Insert Count from its encoding.
    fn required_insert_count(&self, encoded: u64) -> Result<u64, DecodeError> {
        if encoded == 0 {
            return Ok(0);
        }
        let max_entries = (self.max_capacity / ENTRY_OVERHEAD) as u64;
        let full_range = 2 * max_entries;
        if encoded > full_range {
            return Err(DecodeError::Failed);
        }
        let max_value = self.inserted + max_entries;
        let max_wrapped = (max_value / full_range) * full_range;
        let mut required = max_wrapped + encoded - 1;
        if required > max_value {
            if required <= full_range {
                return Err(DecodeError::Failed);
            }
            required -= full_range;
        }
        if required == 0 {
            return Err(DecodeError::Failed);
        }
        Ok(required)
    }

    /// Appends an Insert Count Increment (§4.4.3) for the inserts the encoder has not been
    /// told of, if any: sent after reading the encoder stream, so that the encoder may refer
    /// to them without blocking.
    pub fn write_increment(&mut self, out: &mut Vec<u8>) {
        let new = self.inserted - self.known;
        if new > 0 {
            prim::write_int(out, 0x00, 6, new);
            self.known = self.inserted;
        }
    }
}

/// A string's bytes: in the section, or decoded into `buf`.
fn text<'a>(section: &'a [u8], s: Str, buf: &'a [u8]) -> &'a [u8] {
    match s {
        Str::Raw(from, to) => &section[from..to],
        Str::Decoded => buf,
    }
}

/// Appends a Section Acknowledgment for `stream` (§4.4.1).
pub fn write_section_ack(out: &mut Vec<u8>, stream: u64) {
    prim::write_int(out, 0x80, 7, stream);
}

/// Appends a Stream Cancellation for `stream` (§4.4.2): a request stream reset or given up
/// before its sections were decoded.
pub fn write_stream_cancellation(out: &mut Vec<u8>, stream: u64) {
    prim::write_int(out, 0x40, 6, stream);
}
