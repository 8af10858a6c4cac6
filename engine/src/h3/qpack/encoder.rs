//! The request field section encoder, run once per run at start-up (RFC 9204 §4.5).
//!
//! Required Insert Count 0 and Base 0 (the two-byte prefix `00 00`), then for each field the
//! smallest static-table form: an indexed field line when the static table has name and value,
//! a literal with a static name reference when it has the name, a literal name otherwise.
//! Literals are Huffman-coded when that makes them shorter: with no dynamic table every
//! request carries its literals (the authority, the user's fields) again, so the few bytes saved
//! are saved on every request, not once as with HTTP/2's indexing.

use super::static_table::STATIC_TABLE;
use crate::h2::hpack::huffman;
use crate::template::{Encoded, Framing, Out, Vocabulary, integer};

/// Encodes a request's field section: `:method`, `:scheme`, `:authority`, `:path`, then the
/// regular fields (names already lowercased by the caller), in that order, as HTTP/3 wants
/// pseudo-header fields first (RFC 9114 §4.3).
pub(crate) fn encode_field_section(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
) -> Vec<u8> {
    let size = 2
        + [method, scheme, authority, path].iter().map(|s| s.len() + 12).sum::<usize>()
        + headers.iter().map(|(n, v)| n.len() + v.len() + 12).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    encode_into(&mut out, method, scheme, authority, path, headers);
    out
}

/// `encode_field_section` of a templated request: holes where values have slots, which go as
/// literals without Huffman coding.
pub(crate) fn encode_section_template(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
    vocabulary: Option<&Vocabulary>,
) -> Encoded {
    let mut out = Encoded::for_templates(vocabulary);
    encode_into(&mut out, method, scheme, authority, path, headers);
    out
}

fn encode_into(
    out: &mut impl Out,
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
) {
    // §4.5.1: Required Insert Count 0; Sign 0, Delta Base 0.
    out.bytes(&[0x00, 0x00]);
    for (name, value) in [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)] {
        field(out, name, value);
    }
    for (name, value) in headers {
        field(out, name, value);
    }
}

/// How the static table knows a field.
enum Known {
    /// Name and value: the field is one index.
    Field(usize),
    /// The name only.
    Name(usize),
    Neither,
}

fn known(name: &str, value: &str) -> Known {
    let mut name_index = None;
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if n == name {
            if v == value {
                return Known::Field(i);
            }
            name_index.get_or_insert(i);
        }
    }
    name_index.map_or(Known::Neither, Known::Name)
}

fn field(out: &mut impl Out, name: &str, value: &str) {
    let mut line = Vec::with_capacity(name.len() + 4);
    match known(name, value) {
        // §4.5.2 Indexed Field Line, T=1 (static).
        Known::Field(index) => {
            integer(&mut line, 0xc0, 6, index);
            return out.bytes(&line);
        }
        // §4.5.4 Literal Field Line with Name Reference, N=0, T=1.
        Known::Name(index) => integer(&mut line, 0x50, 4, index),
        // §4.5.6 Literal Field Line with Literal Name, N=0.
        Known::Neither => string(&mut line, 0x20, 3, name.as_bytes()),
    }
    out.bytes(&line);
    out.value(value, Framing::Literal, |out| string(out, 0x00, 7, value.as_bytes()));
}

/// §4.5.4: a cookie field line, its name the static table's (5), its value not Huffman-coded:
/// what a user's jar adds at the end of a request's field section.
pub(crate) fn cookie(out: &mut Vec<u8>, value: &[u8]) {
    integer(out, 0x50, 4, COOKIE_INDEX);
    integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// `cookie`'s index in the static table (RFC 9204 Appendix A).
const COOKIE_INDEX: usize = 5;

/// §4.1.2: a string literal whose length has an N-bit prefix and whose Huffman flag is the bit
/// above it; Huffman-coded when strictly shorter.
fn string(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        integer(out, flags | 1 << prefix_bits, prefix_bits, coded);
        huffman::encode(s, out);
    } else {
        integer(out, flags, prefix_bits, s.len());
        out.extend_from_slice(s);
    }
}
