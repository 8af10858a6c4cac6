//! QPACK (RFC 9204), the HTTP/3 field compression, as far as a load-generating client needs it.
//!
//! We advertise SETTINGS_QPACK_MAX_TABLE_CAPACITY 0 and never insert into the server's table,
//! so there is no dynamic table on either side and no encoder or decoder stream traffic:
//!
//! - `encoder` builds the run's one request field section, once, from static-table references
//!   and literals (Required Insert Count 0, Base 0), so it means the same on every stream.
//! - `decoder` reads response field sections: it finds `:status` and steps over every other
//!   field line by its length. A section that refers to the dynamic table (a Required Insert
//!   Count other than 0, or a dynamic or post-base reference) is refused: with a capacity of 0
//!   no conformant server can send one.
//!
//! Huffman coding is HPACK's (RFC 7541 Appendix B, shared through `h2::hpack::huffman`).

mod decoder;
mod encoder;
mod static_table;

#[cfg(test)]
pub(crate) use decoder::{FieldLine, Head, Str};
pub(crate) use decoder::{HeadCache, decode_status, field_lines};
pub(crate) use encoder::{cookie, encode_field_section, encode_section_template};
#[cfg(test)]
pub(crate) use static_table::STATIC_TABLE;

/// Why a field section could not be read. All but the last two are QPACK_DECOMPRESSION_FAILED
/// connection errors (§6); a bad or repeated `:status` is a malformed response (RFC 9114 §4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QpackError {
    #[error(
        "QPACK field section needs the dynamic table (encoded Required Insert Count {0}), which we allow no capacity"
    )]
    DynamicTable(u64),
    #[error("QPACK field line refers to the dynamic table, which we allow no capacity")]
    DynamicReference,
    #[error("QPACK field section with a negative Base")]
    NegativeBase,
    #[error("QPACK static table index {0} is beyond its 99 entries")]
    StaticIndex(u64),
    #[error("QPACK integer overflows")]
    IntegerOverflow,
    #[error("QPACK field section is truncated")]
    Truncated,
    #[error("QPACK Huffman string contains EOS")]
    HuffmanEos,
    #[error("QPACK Huffman padding is longer than 7 bits or not all ones")]
    HuffmanPadding,
    #[error(":status is not three digits from 100")]
    BadStatus,
    #[error(":status appears more than once")]
    DuplicateStatus,
}

impl QpackError {
    /// A field section that decoded, but as a response no server may send.
    pub(crate) fn is_malformed_message(&self) -> bool {
        matches!(self, QpackError::BadStatus | QpackError::DuplicateStatus)
    }
}

#[cfg(test)]
mod tests;
