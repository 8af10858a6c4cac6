//! HPACK (RFC 7541), the HTTP/2 header compression, as far as a load-generating client needs it.
//!
//! - `encode_request` builds the one request header block of a run, once, at start-up, from
//!   static-table indices and literals without indexing, so it never depends on (or changes)
//!   the server's view of a dynamic table and can be resent verbatim on every stream.
//!   `encode_request_blocks` adds the pair that puts those literals into the server's dynamic
//!   table with a connection's first request and names them by index on every later one.
//! - `Decoder` reads response header blocks. We advertise SETTINGS_HEADER_TABLE_SIZE 0, but a
//!   peer may use its default 4096-byte dynamic table and Huffman coding until it has seen our
//!   SETTINGS, so the decoder keeps a full dynamic table; it parses only `:status` and steps over
//!   the other values, measuring them.
//!
//! Sans-I/O: byte strings in, results out.

mod decoder;
mod encoder;
pub(crate) mod huffman;
mod table;

#[cfg(test)]
pub(crate) use decoder::Decoded;
pub(crate) use decoder::Decoder;
#[cfg(test)]
pub(crate) use encoder::encode_request;
#[cfg(test)]
pub(crate) use encoder::literal;
pub(crate) use encoder::{
    RequestBlocks, TemplateBlocks, cookie, encode_blocks, encode_request_blocks, encode_template_blocks, size_update,
};

/// Why a header block could not be decoded. Every one is a connection error of type
/// COMPRESSION_ERROR (RFC 7540 §4.3): the dynamic table can no longer be trusted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum HpackError {
    #[error("HPACK index 0 is not a valid table index")]
    IndexZero,
    #[error("HPACK index {index} is beyond the table ({len} entries)")]
    IndexOutOfRange { index: usize, len: usize },
    #[error("HPACK integer overflows")]
    IntegerOverflow,
    #[error("HPACK header block is truncated")]
    Truncated,
    #[error("HPACK Huffman string contains EOS")]
    HuffmanEos,
    #[error("HPACK Huffman padding is longer than 7 bits or not all ones")]
    HuffmanPadding,
    #[error("HPACK dynamic table size update to {size} exceeds the advertised maximum {max}")]
    SizeUpdateTooLarge { size: usize, max: usize },
    #[error("HPACK dynamic table size update after the first header field")]
    SizeUpdateNotAtStart,
    #[error(":status is not three digits from 100")]
    BadStatus,
    #[error(":status appears more than once")]
    DuplicateStatus,
}

#[cfg(test)]
mod crosscheck;
#[cfg(test)]
mod fuzz;
