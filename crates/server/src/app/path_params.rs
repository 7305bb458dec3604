//! [`Path`](crate::Path)'s deserializer: a route's captured parameters as one value (the
//! route's only parameter), a tuple or sequence (in pattern order) or a struct or map (by
//! name), each value percent-decoded and parsed as the target type asks.
//!
//! Owns the mapping from serde's requests to the spans the router captured: nothing is
//! copied unless a value is percent-encoded or the target owns its text. A value that does
//! not parse is the client's error (400, as `Request::param_as`); a type that does not fit
//! the route (another count, a field the pattern lacks) is the program's (500, logged).
#![forbid(unsafe_code)]

use std::borrow::Cow;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};

use crate::extract::Rejection;
use crate::request::{Request, percent_decode};

/// The route's parameters as `T`.
pub(crate) fn deserialize<T: DeserializeOwned>(req: &Request<'_>) -> Result<T, Rejection> {
    let path = req.path();
    let params = Params {
        names: req.names,
        values: &req.params.spans[..req.params.len.min(req.names.len())],
        path,
    };
    T::deserialize(params).map_err(Error::rejection)
}

/// Why the parameters do not make the type.
#[derive(Debug)]
pub(crate) enum Error {
    /// The type takes `wanted` values; the route has `route`.
    Count { wanted: usize, route: usize },
    /// The type has a field the route's pattern does not name.
    MissingField(&'static str),
    /// Parameter `name` is not UTF-8 once decoded.
    NotUtf8(String),
    /// Parameter `name` does not parse as its type (serde's reason).
    Invalid { name: String, reason: String },
    /// Serde's reason, no parameter known yet.
    Message(String),
}

impl Error {
    fn rejection(self) -> Rejection {
        match self {
            Error::Count { wanted, route } => {
                tracing::error!(wanted, route, "Path: the type and the route disagree");
                Rejection::new(
                    500,
                    format!("Path takes {wanted} parameters, the route has {route}"),
                )
            }
            Error::MissingField(field) => {
                tracing::error!(field, "Path: the route has no such parameter");
                Rejection::new(500, format!("no path parameter {field}"))
            }
            Error::NotUtf8(name) => {
                Rejection::new(400, format!("path parameter {name} is not UTF-8"))
            }
            Error::Invalid { name, reason } => {
                Rejection::new(400, format!("invalid path parameter {name}: {reason}"))
            }
            Error::Message(reason) => {
                Rejection::new(400, format!("invalid path parameters: {reason}"))
            }
        }
    }

    /// This error, about parameter `name` when it said none.
    fn about(self, name: &str) -> Error {
        match self {
            Error::Message(reason) => Error::Invalid {
                name: name.to_string(),
                reason,
            },
            other => other,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Error {
        Error::Message(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Error {
        Error::MissingField(field)
    }
}

/// All of a route's parameters.
#[derive(Clone, Copy)]
struct Params<'r> {
    names: &'r [String],
    values: &'r [(u16, u16)],
    path: &'r str,
}

impl<'r> Params<'r> {
    fn value(&self, i: usize) -> Value<'r> {
        let (s, e) = self.values[i];
        Value {
            name: &self.names[i],
            raw: self.path.get(s as usize..e as usize).unwrap_or(""),
        }
    }

    fn values(self) -> impl Iterator<Item = Value<'r>> {
        (0..self.values.len()).map(move |i| self.value(i))
    }

    /// The only parameter, for a type that takes one value.
    fn only(&self) -> Result<Value<'r>, Error> {
        match self.values.len() {
            1 => Ok(self.value(0)),
            route => Err(Error::Count { wanted: 1, route }),
        }
    }

    fn seq(
        self,
        wanted: Option<usize>,
    ) -> Result<SeqDeserializer<impl Iterator<Item = Value<'r>>, Error>, Error> {
        match wanted {
            Some(wanted) if wanted != self.values.len() => Err(Error::Count {
                wanted,
                route: self.values.len(),
            }),
            _ => Ok(SeqDeserializer::new(self.values())),
        }
    }
}

/// A type that takes one value asks the only parameter.
macro_rules! only {
    ($($method:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                self.only()?.$method(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Params<'_> {
    type Error = Error;

    only!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_identifier
    );

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut seq = self.seq(None)?;
        let value = visitor.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(value)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Error> {
        let mut seq = self.seq(Some(len))?;
        let value = visitor.visit_seq(&mut seq)?;
        seq.end()?;
        Ok(value)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_tuple(len, visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let mut map = MapDeserializer::new(self.values().map(|v| (v.name, v)));
        let value = visitor.visit_map(&mut map)?;
        map.end()?;
        Ok(value)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.only()?.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

/// One parameter: its name and its text as sent (still percent-encoded).
#[derive(Clone, Copy)]
struct Value<'r> {
    name: &'r str,
    raw: &'r str,
}

impl<'r> Value<'r> {
    fn decoded(&self) -> Result<Cow<'r, str>, Error> {
        percent_decode(self.raw, false).ok_or_else(|| Error::NotUtf8(self.name.to_string()))
    }

    /// The text parsed as `T`, for a visitor's `visit`.
    fn parse<T: std::str::FromStr>(&self) -> Result<T, Error> {
        self.decoded()?.parse().map_err(|_| Error::Invalid {
            name: self.name.to_string(),
            reason: format!("expected {}", std::any::type_name::<T>()),
        })
    }
}

impl<'de> IntoDeserializer<'de, Error> for Value<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// A number, `bool` or `char` parsed from the text.
macro_rules! parsed {
    ($($method:ident => $visit:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
                let v = self.parse()?;
                visitor.$visit::<Error>(v).map_err(|e| e.about(self.name))
            }
        )*
    };
}

/// A shape one parameter cannot have.
macro_rules! refused {
    ($($method:ident),*) => {
        $(
            fn $method<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
                Err(Error::Invalid {
                    name: self.name.to_string(),
                    reason: "a path parameter is one value".into(),
                })
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for Value<'_> {
    type Error = Error;

    parsed!(
        deserialize_bool => visit_bool, deserialize_i8 => visit_i8, deserialize_i16 => visit_i16,
        deserialize_i32 => visit_i32, deserialize_i64 => visit_i64,
        deserialize_i128 => visit_i128, deserialize_u8 => visit_u8,
        deserialize_u16 => visit_u16, deserialize_u32 => visit_u32,
        deserialize_u64 => visit_u64, deserialize_u128 => visit_u128,
        deserialize_f32 => visit_f32, deserialize_f64 => visit_f64,
        deserialize_char => visit_char
    );

    refused!(deserialize_seq, deserialize_map);

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match self.decoded()? {
            Cow::Borrowed(s) => visitor.visit_str::<Error>(s),
            Cow::Owned(s) => visitor.visit_string::<Error>(s),
        };
        result.map_err(|e| e.about(self.name))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match self.decoded()? {
            Cow::Borrowed(s) => visitor.visit_bytes::<Error>(s.as_bytes()),
            Cow::Owned(s) => visitor.visit_byte_buf::<Error>(s.into_bytes()),
        };
        result.map_err(|e| e.about(self.name))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    /// A unit variant by its name (`/orders/{status}` into an enum).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let text = self.decoded()?.into_owned();
        visitor
            .visit_enum(IntoDeserializer::<Error>::into_deserializer(text))
            .map_err(|e| e.about(self.name))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}
