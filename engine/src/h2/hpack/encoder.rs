//! The request header block encoder, run once per run at start-up.
//!
//! It uses the static table only, with literals "without indexing" (§6.2.2) for everything
//! else: the block then means the same whatever the server's dynamic table holds, so the same
//! bytes go out on every stream of every connection. No Huffman coding: it would save a few
//! bytes once, at the cost of a code path to test.

use super::table::STATIC_TABLE;

/// Encodes a request header block: `:method`, `:scheme`, `:authority`, `:path`, then the
/// regular headers (names already lowercased by the caller), in that order, as HTTP/2 wants
/// pseudo-headers first. A field matching a static entry in name and value is sent as its
/// index; one matching a name only as that index and a literal value; others as literals.
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

fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    let mut name_index = None;
    for (i, &(n, v)) in STATIC_TABLE.iter().enumerate() {
        if n == name {
            if v == value {
                integer(out, 0x80, 7, i + 1); // §6.1 indexed field
                return;
            }
            name_index.get_or_insert(i + 1);
        }
    }
    match name_index {
        Some(index) => {
            integer(out, 0x00, 4, index);
            string(out, value);
        }
        None => literal(out, name, value),
    }
}

/// §6.2.2: a literal field without indexing, with a new (literal) name.
pub(crate) fn literal(out: &mut Vec<u8>, name: &str, value: &str) {
    out.push(0x00);
    string(out, name);
    string(out, value);
}

/// §5.1: `value` with an N-bit prefix, `flags` in the bits above it.
fn integer(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, mut value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
}

/// §5.2, not Huffman-coded.
fn string(out: &mut Vec<u8>, s: &str) {
    integer(out, 0x00, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::{Decoded, Decoder};
    use super::*;

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
        assert_eq!(d.decode(&block).unwrap(), Decoded { status: None, header_bytes: bytes });
        assert!(d.table_entries().is_empty());
    }
}
