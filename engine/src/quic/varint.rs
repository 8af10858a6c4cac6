//! QUIC variable-length integers (RFC 9000 §16), which HTTP/3 uses for frame types, lengths,
//! stream types, settings and ids: the two high bits of the first byte give the length (1, 2, 4
//! or 8 bytes), the rest is the value, big-endian, up to 2^62 - 1.

use bytes::BufMut;

/// The largest value a varint holds.
pub(crate) const MAX: u64 = (1 << 62) - 1;

/// The length of the varint starting with `first`.
pub(crate) fn len_from_first(first: u8) -> usize {
    1 << (first >> 6)
}

/// Decodes the varint at the start of `buf`: its value and length, or `None` if `buf` ends
/// before it does. Any encoding is accepted, including longer ones than the value needs
/// (RFC 9000 §16 allows them).
pub(crate) fn decode(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = len_from_first(first);
    let bytes = buf.get(..len)?;
    let mut value = u64::from(first & 0x3f);
    for &b in &bytes[1..] {
        value = (value << 8) | u64::from(b);
    }
    Some((value, len))
}

/// How many bytes `value` takes in its shortest encoding.
pub(crate) fn encoded_len(value: u64) -> usize {
    match value {
        0..=0x3f => 1,
        0x40..=0x3fff => 2,
        0x4000..=0x3fff_ffff => 4,
        _ => 8,
    }
}

/// Appends `value` in its shortest encoding, to a `Vec` or a `BytesMut`. Values above [`MAX`]
/// cannot be encoded; callers only encode lengths and constants, far below it.
pub(crate) fn encode(value: u64, out: &mut impl BufMut) {
    debug_assert!(value <= MAX);
    match encoded_len(value) {
        1 => out.put_u8(value as u8),
        2 => out.put_u16(0x4000 | value as u16),
        4 => out.put_u32(0x8000_0000 | value as u32),
        _ => out.put_u64(0xc000_0000_0000_0000 | value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_9000_appendix_a_examples_decode() {
        let cases: [(&[u8], u64); 5] = [
            (&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c], 151_288_809_941_952_652),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
            // The same 37 in two bytes: longer encodings than needed are valid.
            (&[0x40, 0x25], 37),
        ];
        for (bytes, value) in cases {
            assert_eq!(decode(bytes), Some((value, bytes.len())), "{bytes:02x?}");
        }
    }

    #[test]
    fn a_varint_cut_short_needs_more() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x7b]), None);
        assert_eq!(decode(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8]), None);
    }

    #[test]
    fn encoding_is_shortest_and_round_trips_at_every_boundary() {
        for value in [0, 1, 0x3f, 0x40, 0x3fff, 0x4000, 0x3fff_ffff, 0x4000_0000, MAX] {
            let mut out = Vec::new();
            encode(value, &mut out);
            assert_eq!(out.len(), encoded_len(value));
            assert_eq!(len_from_first(out[0]), out.len());
            assert_eq!(decode(&out), Some((value, out.len())));
        }
        let mut out = Vec::new();
        encode(15_293, &mut out);
        assert_eq!(out, [0x7b, 0xbd]);
    }
}
