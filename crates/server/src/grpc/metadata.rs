//! A call's custom metadata (PROTOCOL-HTTP2.md "Custom-Metadata"): ASCII values and `-bin`
//! binary ones, read from a request's fields and written as an answer's fields or trailers.
//!
//! Owns the names and values a handler may set (checked when set, so what goes out is always
//! sendable) and the reading of a request's (reserved fields left out, `-bin` values
//! base64-decoded, ASCII values outside 0x20–0x7E dropped as the spec says).
#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::fmt;

use linerate_grpc::metadata as wire;

use super::{Code, Status};

/// A call's metadata: names lowercase, in order, a name possibly more than once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    entries: Vec<(Cow<'static, str>, Value)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    Ascii(String),
    Binary(Vec<u8>),
}

/// A metadata name or value that cannot be sent: a name that is not lowercase token
/// characters, one gRPC reserves, an ASCII value outside 0x20–0x7E, or a binary value under
/// a name without `-bin` (or the reverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidMetadata;

impl fmt::Display for InvalidMetadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid gRPC metadata name or value")
    }
}

impl std::error::Error for InvalidMetadata {}

impl Metadata {
    /// No metadata.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The first ASCII value of `name` (lowercase).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries.iter().find_map(|(n, v)| match v {
            Value::Ascii(s) if n == name => Some(s.as_str()),
            _ => None,
        })
    }

    /// The first binary value of `name` (a `-bin` name, lowercase), decoded.
    pub fn get_bin(&self, name: &str) -> Option<&[u8]> {
        self.entries.iter().find_map(|(n, v)| match v {
            Value::Binary(b) if n == name => Some(b.as_slice()),
            _ => None,
        })
    }

    /// Adds an ASCII value.
    pub fn insert(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<String>,
    ) -> Result<(), InvalidMetadata> {
        let (name, value) = (name.into(), value.into());
        if !sendable_name(&name) || wire::is_binary(name.as_bytes()) {
            return Err(InvalidMetadata);
        }
        if !wire::is_ascii_value(value.as_bytes()) {
            return Err(InvalidMetadata);
        }
        self.entries.push((name, Value::Ascii(value)));
        Ok(())
    }

    /// Adds a binary value under a `-bin` name (sent base64-encoded).
    pub fn insert_bin(
        &mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Vec<u8>>,
    ) -> Result<(), InvalidMetadata> {
        let name = name.into();
        if !sendable_name(&name) || !wire::is_binary(name.as_bytes()) {
            return Err(InvalidMetadata);
        }
        self.entries.push((name, Value::Binary(value.into())));
        Ok(())
    }

    /// The entries: name and value, ASCII values as `Ok(&str)`, binary ones as `Err(&[u8])`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Result<&str, &[u8]>)> {
        self.entries.iter().map(|(n, v)| {
            let v = match v {
                Value::Ascii(s) => Ok(s.as_str()),
                Value::Binary(b) => Err(b.as_slice()),
            };
            (n.as_ref(), v)
        })
    }

    /// Takes one of a request's fields (name lowercase) if it is metadata: reserved ones
    /// are left out, `-bin` values decoded (each comma-separated value one entry), ASCII
    /// values outside 0x20–0x7E dropped (the spec: they must not fail the call). A `-bin`
    /// value that is not base64 is INTERNAL.
    pub(crate) fn take_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), Status> {
        if wire::is_reserved(name) || !wire::is_valid_name(name) {
            return Ok(());
        }
        let name = String::from_utf8_lossy(name).into_owned();
        if wire::is_binary(name.as_bytes()) {
            for v in wire::bin_values(value) {
                let bytes = wire::decode_bin(v).map_err(|_| {
                    Status::new(Code::Internal, format!("metadata {name}: not base64"))
                })?;
                self.entries
                    .push((Cow::Owned(name.clone()), Value::Binary(bytes)));
            }
        } else if wire::is_ascii_value(value) {
            let value = String::from_utf8_lossy(value).into_owned();
            self.entries.push((Cow::Owned(name), Value::Ascii(value)));
        }
        Ok(())
    }

    /// The entries as fields to send: binary values base64-encoded (unpadded).
    pub(crate) fn fields(&self) -> impl Iterator<Item = (Cow<'static, str>, Cow<'static, str>)> {
        self.entries.iter().map(|(n, v)| {
            let v = match v {
                Value::Ascii(s) => Cow::Owned(s.clone()),
                Value::Binary(b) => Cow::Owned(wire::encode_bin(b)),
            };
            (n.clone(), v)
        })
    }
}

/// A name a handler may set: lowercase token characters, not reserved by gRPC or HTTP.
fn sendable_name(name: &str) -> bool {
    let b = name.as_bytes();
    wire::is_valid_name(b) && !wire::is_reserved(b)
}
