//! The HPACK Huffman code (RFC 7541 §5.2, Appendix B), which QPACK uses too: decoding, which
//! servers use for most literals, and the encoder of HTTP/3's request literals.
//!
//! Decoding walks a 4-bit-at-a-time state machine built at compile time from the code table,
//! so a string costs two table look-ups per byte and no allocation. States are the 256
//! internal nodes of the code tree; since no code is shorter than 5 bits, a nibble completes at
//! most one symbol.

use super::HpackError;

/// Codes (right-aligned) of the 256 byte symbols; EOS is `EOS_CODE`.
const CODES: [u32; 256] = [
    0x1ff8, 0x7fffd8, 0xfffffe2, 0xfffffe3, 0xfffffe4, 0xfffffe5, 0xfffffe6, 0xfffffe7, 0xfffffe8, 0xffffea,
    0x3ffffffc, 0xfffffe9, 0xfffffea, 0x3ffffffd, 0xfffffeb, 0xfffffec, 0xfffffed, 0xfffffee, 0xfffffef, 0xffffff0,
    0xffffff1, 0xffffff2, 0x3ffffffe, 0xffffff3, 0xffffff4, 0xffffff5, 0xffffff6, 0xffffff7, 0xffffff8, 0xffffff9,
    0xffffffa, 0xffffffb, 0x14, 0x3f8, 0x3f9, 0xffa, 0x1ff9, 0x15, 0xf8, 0x7fa, 0x3fa, 0x3fb, 0xf9, 0x7fb, 0xfa, 0x16,
    0x17, 0x18, 0x0, 0x1, 0x2, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x5c, 0xfb, 0x7ffc, 0x20, 0xffb, 0x3fc,
    0x1ffa, 0x21, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d,
    0x6e, 0x6f, 0x70, 0x71, 0x72, 0xfc, 0x73, 0xfd, 0x1ffb, 0x7fff0, 0x1ffc, 0x3ffc, 0x22, 0x7ffd, 0x3, 0x23, 0x4,
    0x24, 0x5, 0x25, 0x26, 0x27, 0x6, 0x74, 0x75, 0x28, 0x29, 0x2a, 0x7, 0x2b, 0x76, 0x2c, 0x8, 0x9, 0x2d, 0x77, 0x78,
    0x79, 0x7a, 0x7b, 0x7ffe, 0x7fc, 0x3ffd, 0x1ffd, 0xffffffc, 0xfffe6, 0x3fffd2, 0xfffe7, 0xfffe8, 0x3fffd3,
    0x3fffd4, 0x3fffd5, 0x7fffd9, 0x3fffd6, 0x7fffda, 0x7fffdb, 0x7fffdc, 0x7fffdd, 0x7fffde, 0xffffeb, 0x7fffdf,
    0xffffec, 0xffffed, 0x3fffd7, 0x7fffe0, 0xffffee, 0x7fffe1, 0x7fffe2, 0x7fffe3, 0x7fffe4, 0x1fffdc, 0x3fffd8,
    0x7fffe5, 0x3fffd9, 0x7fffe6, 0x7fffe7, 0xffffef, 0x3fffda, 0x1fffdd, 0xfffe9, 0x3fffdb, 0x3fffdc, 0x7fffe8,
    0x7fffe9, 0x1fffde, 0x7fffea, 0x3fffdd, 0x3fffde, 0xfffff0, 0x1fffdf, 0x3fffdf, 0x7fffeb, 0x7fffec, 0x1fffe0,
    0x1fffe1, 0x3fffe0, 0x1fffe2, 0x7fffed, 0x3fffe1, 0x7fffee, 0x7fffef, 0xfffea, 0x3fffe2, 0x3fffe3, 0x3fffe4,
    0x7ffff0, 0x3fffe5, 0x3fffe6, 0x7ffff1, 0x3ffffe0, 0x3ffffe1, 0xfffeb, 0x7fff1, 0x3fffe7, 0x7ffff2, 0x3fffe8,
    0x1ffffec, 0x3ffffe2, 0x3ffffe3, 0x3ffffe4, 0x7ffffde, 0x7ffffdf, 0x3ffffe5, 0xfffff1, 0x1ffffed, 0x7fff2,
    0x1fffe3, 0x3ffffe6, 0x7ffffe0, 0x7ffffe1, 0x3ffffe7, 0x7ffffe2, 0xfffff2, 0x1fffe4, 0x1fffe5, 0x3ffffe8,
    0x3ffffe9, 0xffffffd, 0x7ffffe3, 0x7ffffe4, 0x7ffffe5, 0xfffec, 0xfffff3, 0xfffed, 0x1fffe6, 0x3fffe9, 0x1fffe7,
    0x1fffe8, 0x7ffff3, 0x3fffea, 0x3fffeb, 0x1ffffee, 0x1ffffef, 0xfffff4, 0xfffff5, 0x3ffffea, 0x7ffff4, 0x3ffffeb,
    0x7ffffe6, 0x3ffffec, 0x3ffffed, 0x7ffffe7, 0x7ffffe8, 0x7ffffe9, 0x7ffffea, 0x7ffffeb, 0xffffffe, 0x7ffffec,
    0x7ffffed, 0x7ffffee, 0x7ffffef, 0x7fffff0, 0x3ffffee,
];

/// Lengths in bits of `CODES`.
const LENGTHS: [u8; 256] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12,
    10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6,
    5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22,
    22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20,
    22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28,
    27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28,
    27, 27, 27, 27, 27, 26,
];

/// EOS, symbol 256: 30 ones. It must never appear in a string (§5.2).
const EOS_CODE: u32 = 0x3fff_ffff;
const EOS_LEN: u8 = 30;
const EOS: u16 = 256;

/// One transition of the decoding machine: from a state, on a nibble.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

/// The nibble completed a symbol: emit `sym`.
const EMIT: u8 = 1;
/// The nibble completed EOS.
const FAIL: u8 = 2;
/// Ending here is valid: the bits since the last symbol are all ones and at most 7 of them.
const ACCEPT: u8 = 4;

/// A child in the code tree: an internal node index, or a leaf symbol with this bit set.
const LEAF: u16 = 0x8000;

const fn code(sym: usize) -> (u32, u8) {
    if sym == EOS as usize { (EOS_CODE, EOS_LEN) } else { (CODES[sym], LENGTHS[sym]) }
}

const fn build() -> [[Step; 16]; 256] {
    // The code is complete with 257 leaves, so it has exactly 256 internal nodes; node 0 is
    // the root, so 0 as a child means "not yet built".
    let mut nodes = [[0u16; 2]; 256];
    let mut accept = [false; 256];
    accept[0] = true;
    let mut next_node = 1usize;
    let mut sym = 0;
    while sym <= EOS as usize {
        let (c, len) = code(sym);
        let mut node = 0usize;
        let mut ones = true;
        let mut depth = 0;
        let mut bit = len as u32;
        while bit > 1 {
            bit -= 1;
            let b = ((c >> bit) & 1) as usize;
            ones = ones && b == 1;
            depth += 1;
            if nodes[node][b] == 0 {
                nodes[node][b] = next_node as u16;
                accept[next_node] = ones && depth <= 7;
                next_node += 1;
            }
            node = nodes[node][b] as usize;
        }
        nodes[node][(c & 1) as usize] = LEAF | sym as u16;
        sym += 1;
    }
    assert!(next_node == 256);

    let mut table = [[Step { next: 0, sym: 0, flags: 0 }; 16]; 256];
    let mut state = 0;
    while state < 256 {
        let mut nibble = 0;
        while nibble < 16 {
            let mut node = state;
            let mut step = Step { next: 0, sym: 0, flags: 0 };
            let mut i = 4;
            while i > 0 {
                i -= 1;
                let child = nodes[node][(nibble >> i) & 1];
                if child & LEAF != 0 {
                    let s = child & !LEAF;
                    if s == EOS {
                        step.flags |= FAIL;
                    } else {
                        step.flags |= EMIT;
                        step.sym = s as u8;
                    }
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            step.next = node as u8;
            if accept[node] {
                step.flags |= ACCEPT;
            }
            table[state][nibble] = step;
            nibble += 1;
        }
        state += 1;
    }
    table
}

static DECODE: [[Step; 16]; 256] = build();

/// Decodes a Huffman-coded string, handing each byte to `emit` (a counter when the caller
/// only needs the length, a buffer otherwise). Rejects EOS and padding that is longer than
/// 7 bits or not all ones (§5.2).
#[inline]
pub(crate) fn decode(src: &[u8], mut emit: impl FnMut(u8)) -> Result<(), HpackError> {
    let mut state = 0usize;
    let mut flags = ACCEPT;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = DECODE[state][nibble as usize];
            if step.flags & FAIL != 0 {
                return Err(HpackError::HuffmanEos);
            }
            if step.flags & EMIT != 0 {
                emit(step.sym);
            }
            state = step.next as usize;
            flags = step.flags;
        }
    }
    if flags & ACCEPT == 0 {
        return Err(HpackError::HuffmanPadding);
    }
    Ok(())
}

/// The decoded length of a Huffman-coded string, validating it fully.
#[inline]
pub(crate) fn decoded_len(src: &[u8]) -> Result<usize, HpackError> {
    let mut n = 0;
    decode(src, |_| n += 1)?;
    Ok(n)
}

/// The length of `src` Huffman-coded, padding included.
pub(crate) fn encoded_len(src: &[u8]) -> usize {
    src.iter().map(|&b| usize::from(LENGTHS[b as usize])).sum::<usize>().div_ceil(8)
}

/// Encodes `src`, padding with the EOS prefix. HTTP/2's request is sent as plain literals;
/// HTTP/3's literals are Huffman-coded where that is shorter (`h3::qpack::encoder`).
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits = 0u32;
    for &b in src {
        let (c, len) = code(b as usize);
        acc = (acc << len) | c as u64;
        bits += len as u32;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) as u8) | ((1u8 << pad) - 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(src: &[u8]) -> Result<Vec<u8>, HpackError> {
        let mut out = Vec::new();
        decode(src, |b| out.push(b))?;
        Ok(out)
    }

    #[test]
    fn rfc_examples() {
        // RFC 7541 C.4.1 and C.6.1.
        let www = [0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff];
        assert_eq!(dec(&www).unwrap(), b"www.example.com");
        assert_eq!(dec(&[0x64, 0x02]).unwrap(), b"302");
        assert_eq!(dec(&[]).unwrap(), b"");
    }

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        for n in [0, 1, 2, 7, 100, all.len()] {
            let mut enc = Vec::new();
            encode(&all[..n], &mut enc);
            assert_eq!(dec(&enc).unwrap(), &all[..n]);
            assert_eq!(decoded_len(&enc).unwrap(), n);
            assert_eq!(encoded_len(&all[..n]), enc.len());
        }
    }

    #[test]
    fn rejects_eos() {
        // 32 ones: EOS (30 ones) completes inside.
        assert!(matches!(dec(&[0xff, 0xff, 0xff, 0xff]), Err(HpackError::HuffmanEos)));
    }

    #[test]
    fn rejects_padding_longer_than_7_bits() {
        // '0' is 00000; then 3 + 8 one bits of padding.
        assert!(matches!(dec(&[0x07, 0xff]), Err(HpackError::HuffmanPadding)));
        assert!(matches!(dec(&[0xff]), Err(HpackError::HuffmanPadding)));
    }

    #[test]
    fn rejects_padding_not_all_ones() {
        // '0' (00000) then 000: zeros are not a valid pad.
        assert!(matches!(dec(&[0x00]), Err(HpackError::HuffmanPadding)));
        // '0' then 110: a partial code that is not all ones.
        assert!(matches!(dec(&[0x06]), Err(HpackError::HuffmanPadding)));
    }
}
