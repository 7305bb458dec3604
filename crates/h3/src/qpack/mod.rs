//! QPACK (RFC 9204), sans I/O: [`Decoder`] reads the client's field sections against the
//! static table and a dynamic table its encoder stream fills, and writes what the decoder
//! stream owes (Section Acknowledgments, Insert Count Increments, Stream Cancellations);
//! [`encode`] writes the server's sections without a dynamic table. The static table and
//! the encoder's look-up into it are in `table`, integers and strings in `prim`.

mod decoder;
pub mod encode;
mod prim;
mod table;

pub use decoder::{
    DecodeError, Decoded, Decoder, ListSize, write_section_ack, write_stream_cancellation,
};

/// Reads the peer's decoder stream (§4.4) for an encoder that never inserts (the server's,
/// [`encode`]): Stream Cancellations are taken; a Section Acknowledgment or an Insert Count
/// Increment acknowledges what was never sent, a connection error of type
/// QPACK_DECODER_STREAM_ERROR (§4.4.1, §4.4.3). Returns the bytes used (an instruction split
/// across reads is left for the next call).
pub fn read_decoder_stream(b: &[u8]) -> Result<usize, crate::Code> {
    let mut pos = 0;
    while pos < b.len() {
        if b[pos] & 0xc0 != 0x40 {
            return Err(crate::Code::QpackDecoderStreamError);
        }
        match prim::int(b, pos, 6) {
            Ok((_, next)) => pos = next,
            Err(prim::Bad::Short) => break,
            Err(prim::Bad::Invalid) => return Err(crate::Code::QpackDecoderStreamError),
        }
    }
    Ok(pos)
}

#[cfg(test)]
mod tests;
