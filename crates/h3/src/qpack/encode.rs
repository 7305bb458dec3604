//! The stateless QPACK encoder (the server's responses, a client's requests). Fields refer
//! only to the static table
//! (a whole field by its index where one matches, else its name by index and the value as a
//! literal, else both literal), so every section starts with a zero Required Insert Count
//! and Base (§4.5.1), nothing is ever inserted, the encoder stream carries nothing, and a
//! peer's table capacity cannot make it allocate. Values go out unhuffmaned: the encoding
//! costs a copy.

use linerate_hpack::string;

use super::prim::write_int;
use super::table::lookup;

/// Appends the field section prefix: Required Insert Count 0, Base 0.
#[inline]
pub fn prefix(out: &mut Vec<u8>) {
    out.extend_from_slice(&[0x00, 0x00]);
}

/// Appends `:status`: one byte where the static table has the code (200, 304, 404…).
#[inline]
pub fn status(out: &mut Vec<u8>, code: u16) {
    let index = match code {
        103 => 24,
        200 => 25,
        304 => 26,
        404 => 27,
        503 => 28,
        100 => 63,
        204 => 64,
        206 => 65,
        302 => 66,
        400 => 67,
        403 => 68,
        421 => 69,
        425 => 70,
        500 => 71,
        _ => {
            // Literal Field Line with Name Reference to `:status` (static 24).
            write_int(out, 0x50, 4, 24);
            let mut buf = itoa::Buffer::new();
            return string(out, buf.format(code).as_bytes());
        }
    };
    write_int(out, 0xc0, 6, index);
}

/// Appends a field (its name lowercase, as HTTP/3 requires).
pub fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    match lookup(name) {
        Some((first, entries)) => {
            if let Some(&(_, index)) = entries.iter().find(|(v, _)| *v == value) {
                // Indexed Field Line, static.
                return write_int(out, 0xc0, 6, u64::from(index));
            }
            // Literal Field Line with Name Reference, static, N = 0.
            write_int(out, 0x50, 4, u64::from(first));
        }
        None => {
            // Literal Field Line with Literal Name, N = 0, H = 0.
            write_int(out, 0x20, 3, name.len() as u64);
            out.extend_from_slice(name);
        }
    }
    string(out, value);
}

/// Appends a request's pseudo-header fields (RFC 9114 §4.3.1), in the order HTTP/3 clients
/// send them: `:method`, `:scheme`, `:authority`, `:path`. The common ones (GET, POST, https,
/// `/`) are one byte each; the caller writes the section's [`prefix`] first and its regular
/// fields after.
pub fn request(out: &mut Vec<u8>, method: &[u8], scheme: &[u8], authority: &[u8], path: &[u8]) {
    field(out, b":method", method);
    field(out, b":scheme", scheme);
    field(out, b":authority", authority);
    field(out, b":path", path);
}
