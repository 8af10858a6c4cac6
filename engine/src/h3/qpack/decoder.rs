//! Reading a response's field section (RFC 9204 §4.5) without a dynamic table.
//!
//! `field_lines` walks the representations one by one, borrowing names and values from the
//! section as they are (a static entry, or a literal's raw bytes and whether it is
//! Huffman-coded), so stepping over a field costs its length and nothing more. `decode_head`
//! looks only at the fields that may be `:status` or `retry-after`: decoding a Huffman string
//! is reserved for those.

use super::QpackError;
use super::static_table::STATIC_TABLE;
use crate::h2::hpack::{HpackError, huffman};
use crate::plan::{LOCATION, SET_COOKIE};
use crate::stats::RetryAfter;

/// A name or a value as the section carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Str<'a> {
    /// From the static table.
    Static(&'static str),
    /// A string literal: its bytes as sent, Huffman-coded or not.
    Literal { huffman: bool, raw: &'a [u8] },
}

impl Str<'_> {
    /// Decodes into `head` if it fits there: the decoded length, or `None` if it is longer.
    fn decode_into<const N: usize>(&self, head: &mut [u8; N]) -> Result<Option<usize>, QpackError> {
        match *self {
            Str::Static(s) => Ok(copy(s.as_bytes(), head)),
            Str::Literal { huffman: false, raw } => Ok(copy(raw, head)),
            // Huffman codes are at least 5 bits, so a string over N * 8 / 5 bytes decodes to
            // more than N; it is not decoded at all.
            Str::Literal { huffman: true, raw } if raw.len() > N * 8 / 5 => Ok(None),
            Str::Literal { huffman: true, raw } => {
                let mut len = 0;
                huffman::decode(raw, |b| {
                    if let Some(slot) = head.get_mut(len) {
                        *slot = b;
                    }
                    len += 1;
                })
                .map_err(from_huffman)?;
                Ok((len <= N).then_some(len))
            }
        }
    }

    /// The decoded bytes, for tests that read every field.
    #[cfg(test)]
    pub(crate) fn to_vec(self) -> Result<Vec<u8>, QpackError> {
        let mut out = Vec::new();
        self.decode_to(&mut out)?;
        Ok(out)
    }

    /// Appends the decoded bytes to `out`.
    pub(crate) fn decode_to(self, out: &mut Vec<u8>) -> Result<(), QpackError> {
        match self {
            Str::Static(s) => out.extend_from_slice(s.as_bytes()),
            Str::Literal { huffman: false, raw } => out.extend_from_slice(raw),
            Str::Literal { huffman: true, raw } => huffman::decode(raw, |b| out.push(b)).map_err(from_huffman)?,
        }
        Ok(())
    }
}

fn copy<const N: usize>(src: &[u8], head: &mut [u8; N]) -> Option<usize> {
    let dst = head.get_mut(..src.len())?;
    dst.copy_from_slice(src);
    Some(src.len())
}

fn from_huffman(e: HpackError) -> QpackError {
    match e {
        HpackError::HuffmanEos => QpackError::HuffmanEos,
        _ => QpackError::HuffmanPadding,
    }
}

/// One field line: a name and a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldLine<'a> {
    pub name: Str<'a>,
    pub value: Str<'a>,
}

/// The field lines of a section, in order; see [`field_lines`].
pub(crate) struct FieldLines<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// Reads a section's prefix (§4.5.1) and returns its field lines. The prefix must say the
/// section needs no dynamic table: an encoded Required Insert Count of 0 (with a capacity of 0,
/// §4.5.1.1 allows no other) and a Base that is not negative.
pub(crate) fn field_lines(section: &[u8]) -> Result<FieldLines<'_>, QpackError> {
    let mut lines = FieldLines { buf: section, pos: 0 };
    let required_insert_count = lines.integer(8)?;
    if required_insert_count != 0 {
        return Err(QpackError::DynamicTable(required_insert_count));
    }
    // Sign bit set: Base = Required Insert Count - Delta Base - 1, below 0 here.
    let sign = lines.peek()? & 0x80 != 0;
    lines.integer(7)?;
    if sign {
        return Err(QpackError::NegativeBase);
    }
    Ok(lines)
}

impl<'a> FieldLines<'a> {
    fn peek(&self) -> Result<u8, QpackError> {
        self.buf.get(self.pos).copied().ok_or(QpackError::Truncated)
    }

    /// An integer with an N-bit prefix (RFC 7541 §5.1, as RFC 9204 §4.1.1 uses it). Values
    /// above u32::MAX are refused: no index or length gets near it.
    fn integer(&mut self, prefix_bits: u32) -> Result<u64, QpackError> {
        let mask = ((1u32 << prefix_bits) - 1) as u8;
        let mut value = u64::from(self.peek()? & mask);
        self.pos += 1;
        if value < u64::from(mask) {
            return Ok(value);
        }
        let mut shift = 0u32;
        loop {
            let b = self.peek()?;
            self.pos += 1;
            if shift > 28 {
                return Err(QpackError::IntegerOverflow);
            }
            value += u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        if value > u64::from(u32::MAX) {
            return Err(QpackError::IntegerOverflow);
        }
        Ok(value)
    }

    /// A string literal whose length has an N-bit prefix and whose Huffman flag is the bit
    /// just above it (§4.1.2).
    fn string(&mut self, prefix_bits: u32) -> Result<Str<'a>, QpackError> {
        let huffman = self.peek()? & (1 << prefix_bits) != 0;
        let len = self.integer(prefix_bits)? as usize;
        let end = self.pos.checked_add(len).filter(|&end| end <= self.buf.len()).ok_or(QpackError::Truncated)?;
        let raw = &self.buf[self.pos..end];
        self.pos = end;
        Ok(Str::Literal { huffman, raw })
    }

    fn static_entry(index: u64) -> Result<(&'static str, &'static str), QpackError> {
        STATIC_TABLE.get(index as usize).copied().ok_or(QpackError::StaticIndex(index))
    }

    fn line(&mut self) -> Result<FieldLine<'a>, QpackError> {
        let first = self.peek()?;
        if first & 0x80 != 0 {
            // §4.5.2 Indexed Field Line: 1 T index(6); T=0 is the dynamic table.
            if first & 0x40 == 0 {
                return Err(QpackError::DynamicReference);
            }
            let (name, value) = Self::static_entry(self.integer(6)?)?;
            return Ok(FieldLine { name: Str::Static(name), value: Str::Static(value) });
        }
        if first & 0x40 != 0 {
            // §4.5.4 Literal Field Line with Name Reference: 01 N T index(4), then the value.
            if first & 0x10 == 0 {
                return Err(QpackError::DynamicReference);
            }
            let (name, _) = Self::static_entry(self.integer(4)?)?;
            let value = self.string(7)?;
            return Ok(FieldLine { name: Str::Static(name), value });
        }
        if first & 0x20 != 0 {
            // §4.5.6 Literal Field Line with Literal Name: 001 N H length(3), name, value.
            let name = self.string(3)?;
            let value = self.string(7)?;
            return Ok(FieldLine { name, value });
        }
        // §4.5.3 Indexed Field Line with Post-Base Index (0001) and §4.5.5 Literal Field Line
        // with Post-Base Name Reference (0000): both name dynamic entries.
        Err(QpackError::DynamicReference)
    }
}

impl<'a> Iterator for FieldLines<'a> {
    type Item = Result<FieldLine<'a>, QpackError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let line = self.line();
        if line.is_err() {
            // Nothing after an error can be read.
            self.pos = self.buf.len();
        }
        Some(line)
    }
}

const STATUS: &[u8] = b":status";
const RETRY_AFTER: &[u8] = b"retry-after";
/// Longer `retry-after` values are neither delay-seconds nor a date: counted as a date, as
/// HTTP/1.1's scanner and the HPACK decoder count one too long to read.
const RETRY_AFTER_MAX_LEN: usize = 32;

/// What a response's field section says that volley reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Head {
    /// `None` for a section without (trailers).
    pub status: Option<u16>,
    /// The last `retry-after` field's value.
    pub retry_after: Option<RetryAfter>,
    /// A `set-cookie` or `location` field is among them: all that a jar and redirects read, so
    /// a scenario's response without either is not walked again to keep its fields.
    pub cookie_or_location: bool,
}

/// A response field section's `:status` and `retry-after`, and whether it has a `set-cookie` or
/// `location`. Every other field is stepped over by its length; only names that may be one of
/// these (by their length) are decoded, and only the first two's values.
pub(crate) fn decode_head(section: &[u8]) -> Result<Head, QpackError> {
    let mut head = Head::default();
    for line in field_lines(section)? {
        let line = line?;
        let mut name = [0u8; 11];
        let name = match line.name {
            Str::Static(name) => name.as_bytes(),
            literal => match literal.decode_into(&mut name)? {
                Some(n) => &name[..n],
                None => continue,
            },
        };
        head.cookie_or_location |= name.eq_ignore_ascii_case(SET_COOKIE) || name.eq_ignore_ascii_case(LOCATION);
        if name == STATUS {
            if head.status.is_some() {
                return Err(QpackError::DuplicateStatus);
            }
            let mut digits = [0u8; 3];
            head.status = match line.value.decode_into(&mut digits)? {
                // 000 to 099 are no status (RFC 9110 §15), as in HTTP/2's decoder.
                Some(3) if digits.iter().all(u8::is_ascii_digit) && digits[0] != b'0' => {
                    Some(digits.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')))
                }
                _ => return Err(QpackError::BadStatus),
            };
        } else if name == RETRY_AFTER {
            let mut value = [0u8; RETRY_AFTER_MAX_LEN];
            head.retry_after = Some(match line.value.decode_into(&mut value)? {
                Some(n) => RetryAfter::parse(&value[..n]),
                None => RetryAfter::Date,
            });
        }
    }
    Ok(head)
}

/// Sections longer than this are decoded every time rather than kept.
const HEAD_CACHE_MAX: usize = 256;

/// Sections kept, each in the slot its bytes hash to: a request mix's answers come in a few
/// kinds (each path's own length, etag or last-modified; a redirect), and one kept section
/// was replaced at nearly every response of a mix, which then walked every head again.
const HEAD_CACHE_SLOTS: usize = 8;

/// Final field sections decoded on a connection and what they said. Servers repeat their
/// response fields byte for byte (a date changes once a second), so a section equal to one
/// kept is compared, not walked again: decoding is a pure function of the bytes.
#[derive(Debug, Default)]
pub(crate) struct HeadCache {
    kept: [(Vec<u8>, Head); HEAD_CACHE_SLOTS],
}

impl HeadCache {
    /// [`decode_head`], from the cache when `section` is one kept.
    pub(crate) fn decode(&mut self, section: &[u8]) -> Result<Head, QpackError> {
        let (kept, kept_head) = &mut self.kept[slot_of(section)];
        if !section.is_empty() && kept.as_slice() == section {
            return Ok(*kept_head);
        }
        let head = decode_head(section)?;
        if section.len() <= HEAD_CACHE_MAX {
            kept.clear();
            kept.extend_from_slice(section);
            *kept_head = head;
        }
        Ok(head)
    }
}

/// The cache slot of `section`: a hash of its length and of three of its 8-byte words (first,
/// middle, last), since hashing every byte cost as much as walking the head. Heads that differ
/// elsewhere may share a slot, and the slot's compare tells them apart.
fn slot_of(section: &[u8]) -> usize {
    let word = |at: usize| {
        let mut word = [0u8; 8];
        let bytes = section.get(at..).unwrap_or_default();
        let n = bytes.len().min(8);
        word[..n].copy_from_slice(&bytes[..n]);
        u64::from_le_bytes(word)
    };
    let len = section.len();
    let mut hash = len as u64;
    for at in [0, len / 2, len.saturating_sub(8)] {
        hash = (hash ^ word(at)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    (hash % HEAD_CACHE_SLOTS as u64) as usize
}

/// A response field section's `:status`, or `None` for one without (trailers).
pub(crate) fn decode_status(section: &[u8]) -> Result<Option<u16>, QpackError> {
    decode_head(section).map(|head| head.status)
}
