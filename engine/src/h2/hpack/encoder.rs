//! The request header block encoder, run once per run at start-up.
//!
//! `encode_request` uses the static table only, with literals "without indexing" (§6.2.2) for
//! everything else: the block then means the same whatever the server's dynamic table holds.
//! `RequestBlocks` adds the pair a connection sends when the server's table has room: its first
//! request adds each of those literals to the server's dynamic table (§6.2.1), and every later
//! request names them by index (§6.1), one byte a field. No Huffman coding: it would save a
//! few bytes once, at the cost of a code path to test.

use super::table::{ENTRY_OVERHEAD, STATIC_TABLE};
use crate::template::{Encoded, Framing, Out, Vocabulary, integer};

/// Encodes a request header block: `:method`, `:scheme`, `:authority`, `:path`, then the
/// regular headers (names already lowercased by the caller), in that order, as HTTP/2 wants
/// pseudo-headers first. A field matching a static entry in name and value is sent as its
/// index; one matching a name only as that index and a literal value; others as literals.
/// The plain block of `encode_request_blocks`, on its own.
#[cfg(test)]
pub(crate) fn encode_request(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
) -> Vec<u8> {
    let size = [method, scheme, authority, path].iter().map(|s| s.len() + 16).sum::<usize>()
        + headers.iter().map(|(n, v)| n.len() + v.len() + 16).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    for (name, value) in [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)] {
        field(&mut out, name, value);
    }
    for (name, value) in headers {
        field(&mut out, name, value);
    }
    out
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
                return Known::Field(i + 1);
            }
            name_index.get_or_insert(i + 1);
        }
    }
    name_index.map_or(Known::Neither, Known::Name)
}

fn field(out: &mut impl Out, name: &str, value: &str) {
    match known(name, value) {
        Known::Field(index) => integer(out, 0x80, 7, index), // §6.1 indexed field
        Known::Name(index) => {
            integer(out, 0x00, 4, index);
            value_string(out, value);
        }
        Known::Neither => {
            out.push(0x00);
            string(out, name);
            value_string(out, value);
        }
    }
}

/// The request's header blocks, for a server whose dynamic table takes `table_size` bytes more
/// and for one whose does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestBlocks {
    /// Static indices and literals without indexing: right whatever the server's table holds.
    pub plain: Vec<u8>,
    /// A connection's first request: what `plain` has as literals, added to the server's table.
    pub first: Vec<u8>,
    /// Every later request on that connection: those fields by their dynamic index.
    pub indexed: Vec<u8>,
    /// The room `first`'s entries take in the server's table (§4.1); 0 when every field is in
    /// the static table, and then the three blocks are the same.
    pub table_size: usize,
}

/// A templated request's blocks: `RequestBlocks`' with holes where values have slots. Those
/// fields are never indexed: their values change from request to request.
#[derive(Debug, Clone)]
pub(crate) struct TemplateBlocks {
    pub plain: Encoded,
    pub first: Encoded,
    pub indexed: Encoded,
}

impl RequestBlocks {
    /// Blocks that never index: `block` on every request. Tests build these around a block of
    /// their own.
    #[cfg(test)]
    pub(crate) fn plain(block: Vec<u8>) -> Self {
        RequestBlocks { first: block.clone(), indexed: block.clone(), plain: block, table_size: 0 }
    }
}

/// The request's blocks: `encode_request`'s plain block and the indexing pair (see the module
/// documentation), fields in the same order.
pub(crate) fn encode_request_blocks(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
) -> RequestBlocks {
    let fields: Vec<(&str, &str)> =
        [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)]
            .into_iter()
            .chain(headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .collect();
    encode_blocks(&fields, |_, _| true)
}

/// The blocks of a request of `fields` in the order sent (pseudo-header fields first): the
/// plain block, and the indexing pair in which the fields `indexes` picks are added to the
/// server's table by a connection's first request and named by index after; the others go
/// as in the plain block. Requests that index the same fields in the same order leave the
/// server's table the same, so any of them may be a connection's first (a mix's shared
/// fields).
pub(crate) fn encode_blocks(fields: &[(&str, &str)], indexes: impl Fn(&str, &str) -> bool) -> RequestBlocks {
    let (plain, first, indexed, table_size) = encode_into(fields, indexes, Vec::new);
    RequestBlocks { plain, first, indexed, table_size }
}

/// `encode_blocks` of a templated request, whose slots may name `vocabulary`'s feeder columns
/// (none: not templated, written as it is): the fields `indexes` picks must have no slots.
pub(crate) fn encode_template_blocks(
    fields: &[(&str, &str)],
    indexes: impl Fn(&str, &str) -> bool,
    vocabulary: Option<&Vocabulary>,
) -> TemplateBlocks {
    let (plain, first, indexed, _) = encode_into(fields, indexes, || Encoded::for_templates(vocabulary));
    TemplateBlocks { plain, first, indexed }
}

/// The plain block, the indexing pair and the room its entries take (see `encode_blocks`).
fn encode_into<O: Out>(
    fields: &[(&str, &str)],
    indexes: impl Fn(&str, &str) -> bool,
    new: impl Fn() -> O,
) -> (O, O, O, usize) {
    let mut plain = new();
    for (name, value) in fields {
        field(&mut plain, name, value);
    }
    let added = fields.iter().filter(|(n, v)| indexes(n, v) && !matches!(known(n, v), Known::Field(_))).count();
    let (mut first, mut indexed) = (new(), new());
    let mut table_size = 0;
    let mut inserted = 0;
    for &(name, value) in fields {
        match known(name, value) {
            Known::Field(index) => {
                integer(&mut first, 0x80, 7, index);
                integer(&mut indexed, 0x80, 7, index);
                continue;
            }
            _ if !indexes(name, value) => {
                field(&mut first, name, value);
                field(&mut indexed, name, value);
                continue;
            }
            // §6.2.1: literal with incremental indexing, the name by index where it can be.
            Known::Name(index) => integer(&mut first, 0x40, 6, index),
            Known::Neither => {
                first.push(0x40);
                string(&mut first, name);
            }
        }
        value_string(&mut first, value);
        table_size += name.len() + value.len() + ENTRY_OVERHEAD;
        inserted += 1;
        // Once all are in, the newest is the first dynamic index (§2.3.3).
        integer(&mut indexed, 0x80, 7, STATIC_TABLE.len() + 1 + added - inserted);
    }
    (plain, first, indexed, table_size)
}

/// §6.2.2: a literal field without indexing, with a new (literal) name: what tests' servers send.
#[cfg(test)]
pub(crate) fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    string(out, name);
    string(out, value);
}

/// §6.2.2: a cookie field without indexing, its name the static table's (32): what a user's jar
/// adds at the end of a request's block, which leaves the dynamic table as it was.
pub(crate) fn cookie(out: &mut Vec<u8>, value: &[u8]) {
    integer(out, 0x00, 4, COOKIE_INDEX);
    integer(out, 0x00, 7, value.len());
    out.extend_from_slice(value);
}

/// `cookie`'s index in the static table (RFC 7541 Appendix A).
const COOKIE_INDEX: usize = 32;

/// §6.3: a dynamic table size update, which must open a header block.
pub(crate) fn size_update(out: &mut Vec<u8>, size: usize) {
    integer(out, 0x20, 5, size);
}

/// §5.2, not Huffman-coded.
fn string(out: &mut impl Out, s: &str) {
    integer(out, 0x00, 7, s.len());
    out.bytes(s.as_bytes());
}

/// A field's value: a hole when it has slots and `out` fills them.
fn value_string(out: &mut impl Out, value: &str) {
    out.value(value, Framing::Literal, |out| string(out, value));
}

#[cfg(test)]
mod tests {
    use super::super::{Decoded, Decoder};
    use super::*;

    #[test]
    fn a_cookie_field_decodes_as_cookie_and_adds_nothing_to_the_table() {
        assert_eq!(STATIC_TABLE[COOKIE_INDEX - 1].0, "cookie");
        let mut block = Vec::new();
        cookie(&mut block, b"sid=1; a=b");
        assert_eq!(&block[..2], &[0x0f, 0x11], "cookie is 32 = 15 + 17");
        let mut decoder = Decoder::new(4096);
        let mut fields = Vec::new();
        decoder
            .decode_collecting(&block, &mut |name: &[u8], value: &[u8]| fields.push((name.to_vec(), value.to_vec())))
            .expect("decodes");
        assert_eq!(fields, vec![(b"cookie".to_vec(), b"sid=1; a=b".to_vec())]);
        assert_eq!(decoder.table_size(), 0);
    }

    #[test]
    fn uses_static_indices_and_literals() {
        let block = encode_request("GET", "https", "example.com", "/", &[("accept".into(), "*/*".into())]);
        let mut want = vec![0x82, 0x87, 0x01, 11];
        want.extend_from_slice(b"example.com");
        want.push(0x84);
        want.extend_from_slice(&[0x0f, 0x04, 3]); // accept is 19 = 15 + 4
        want.extend_from_slice(b"*/*");
        assert_eq!(block, want);
    }

    #[test]
    fn the_first_request_indexes_what_the_static_table_lacks_and_later_ones_name_it() {
        let headers = [
            ("user-agent".into(), "volley/1".into()),
            ("x-custom".into(), "v".into()),
            ("accept".into(), "*/*".into()),
        ];
        let blocks = encode_request_blocks("GET", "http", "127.0.0.1:8080", "/", &headers);
        assert_eq!(blocks.plain, encode_request("GET", "http", "127.0.0.1:8080", "/", &headers));
        // :authority, user-agent, x-custom and accept are added, oldest first.
        let sizes = [10 + 14, 10 + 8, 8 + 1, 6 + 3].iter().map(|n| n + 32).sum::<usize>();
        assert_eq!(blocks.table_size, sizes);
        // 2: GET, 6: http, 4: "/" are static; the four added are 65 (oldest) to 62 (newest).
        assert_eq!(blocks.indexed, vec![0x82, 0x86, 0x80 | 65, 0x84, 0x80 | 64, 0x80 | 63, 0x80 | 62]);
        let mut want = vec![0x82, 0x86, 0x41, 14];
        want.extend_from_slice(b"127.0.0.1:8080");
        want.push(0x84);
        want.extend_from_slice(&[0x40 | 58, 8]);
        want.extend_from_slice(b"volley/1");
        want.extend_from_slice(&[0x40, 8]);
        want.extend_from_slice(b"x-custom");
        want.extend_from_slice(&[1, b'v', 0x40 | 19, 3]);
        want.extend_from_slice(b"*/*");
        assert_eq!(blocks.first, want);
        // A decoder that reads the first block reads the indexed one as the same fields.
        let mut d = Decoder::new(4096);
        let first = d.decode(&blocks.first).unwrap();
        assert_eq!(d.table_size(), sizes);
        assert_eq!(d.decode(&blocks.indexed).unwrap(), first);
        assert_eq!(d.decode(&blocks.indexed).unwrap(), first);
        assert_eq!(d.table_size(), sizes);
    }

    #[test]
    fn a_request_of_static_fields_only_adds_nothing() {
        for (method, path) in [("POST", "/index.html"), ("GET", "/")] {
            let gzip = [("accept-encoding".into(), "gzip, deflate".into())];
            let blocks = encode_request_blocks(method, "https", "", path, &gzip);
            assert_eq!(blocks.first, blocks.plain);
            assert_eq!(blocks.first, blocks.indexed);
            assert_eq!(blocks.table_size, 0);
        }
    }

    #[test]
    fn unknown_names_and_long_values() {
        let long = "v".repeat(300);
        let block = encode_request("PATCH", "http", "h", "/index.html", &[("x-custom".into(), long.clone())]);
        let mut want = vec![0x02, 5];
        want.extend_from_slice(b"PATCH");
        want.extend_from_slice(&[0x86, 0x01, 1, b'h', 0x85, 0x00, 8]);
        want.extend_from_slice(b"x-custom");
        want.extend_from_slice(&[0x7f, 0xad, 0x01]); // 300 = 127 + 173
        want.extend_from_slice(long.as_bytes());
        assert_eq!(block, want);
        // Our own decoder reads it without touching its table.
        let mut d = Decoder::new(4096);
        let bytes = 7 + 5 + 7 + 4 + 10 + 1 + 5 + 11 + 8 + 300;
        assert_eq!(d.decode(&block).unwrap(), Decoded { status: None, header_bytes: bytes, retry_after: None });
        assert!(d.table_entries().is_empty());
    }
}
