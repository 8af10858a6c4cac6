//! The response header block decoder.
//!
//! A load generator needs little from a response's headers: the status, and `retry-after` when
//! a server asks the client to back off. But every field must still be decoded far enough to
//! keep the dynamic table identical to the server's (insertions, size updates, Huffman), and to
//! measure the block. So names and values are read into memory only when they enter the
//! dynamic table or might be one of those two; everything else is validated and counted in
//! place.

use super::HpackError;
use super::huffman;
use super::table::{DynamicTable, STATIC_TABLE};
use crate::plan::SET_COOKIE;
use crate::stats::RetryAfter;

/// What a header block says, as far as we need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decoded {
    /// `:status`, or `None` for a block without one (trailers).
    pub status: Option<u16>,
    /// Sum of the decoded name and value lengths of all fields.
    pub header_bytes: usize,
    /// What a `retry-after` field said (the last one, if several came).
    pub retry_after: Option<RetryAfter>,
}

/// Where a block's fields go when all of them are wanted: each name and value, decoded.
pub(crate) type Collect<'a> = &'a mut dyn FnMut(&[u8], &[u8]);

/// The HPACK decoder of one connection: its dynamic table and the limit we advertised.
#[derive(Debug)]
pub(crate) struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE in force: the ceiling for the peer's size updates.
    max_table_size: usize,
    /// The Huffman-coded values last validated, by field position.
    seen: [Seen; SEEN_FIELDS],
    /// The last block that left the table alone, and what it said.
    last: LastBlock,
}

/// A server that keeps no dynamic table sends the same block for the same response, byte for
/// byte, until its date changes (nginx: once a second). Such a block decodes to the same thing
/// and changes nothing, so one compare of its bytes replaces walking its fields again.
#[derive(Debug, Default)]
struct LastBlock {
    raw: Vec<u8>,
    decoded: Option<Decoded>,
    /// The block was walked for its set-cookie fields and had none
    /// (`Decoder::decode_set_cookies`).
    no_set_cookie: bool,
}

/// Longer blocks are always walked, so the memory stays small.
const LAST_BLOCK_MAX_LEN: usize = 256;

/// A Huffman-coded value that was validated, and its decoded length. Servers repeat most
/// response fields byte for byte (nginx: server, content-type and content-length every time,
/// date once a second), and the same bytes validate the same: comparing them costs far less
/// than walking the code again, which was a tenth of the client's CPU at 64 x 100 against nginx.
#[derive(Debug, Default)]
struct Seen {
    raw: Vec<u8>,
    len: usize,
}

/// Fields per block whose values are remembered; later ones are always walked.
const SEEN_FIELDS: usize = 8;
/// Longer values are always walked, so the memory stays small (8 x 64 bytes a connection).
const SEEN_MAX_LEN: usize = 64;

const STATUS: &[u8] = b":status";
const RETRY_AFTER: &[u8] = b"retry-after";
/// Longer `retry-after` values are neither delay-seconds nor a date: counted as a date, as
/// HTTP/1.1's scanner counts one too long to read.
const RETRY_AFTER_MAX_LEN: usize = 32;

/// The fields whose values are read; every other value is only measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Status,
    RetryAfter,
    Neither,
}

impl Read {
    /// Which field `name` is. A length compare first, so other names cost a byte compare or two.
    fn field(name: Option<&[u8]>) -> Read {
        match name {
            Some(STATUS) => Read::Status,
            Some(RETRY_AFTER) => Read::RetryAfter,
            _ => Read::Neither,
        }
    }
}

/// Reads HPACK primitives (§5) from a block, never past its end.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// An integer with an N-bit prefix (§5.1). Values above u32::MAX, or encodings longer than
    /// that needs, are refused: no legitimate index, length or size gets near it, and the cap
    /// keeps the arithmetic far from overflow.
    fn integer(&mut self, prefix_bits: u32) -> Result<usize, HpackError> {
        let first = *self.buf.get(self.pos).ok_or(HpackError::Truncated)?;
        self.pos += 1;
        let mask = ((1u32 << prefix_bits) - 1) as u8;
        let mut value = u64::from(first & mask);
        if value < u64::from(mask) {
            return Ok(value as usize);
        }
        let mut shift = 0u32;
        loop {
            let b = *self.buf.get(self.pos).ok_or(HpackError::Truncated)?;
            self.pos += 1;
            if shift > 28 {
                return Err(HpackError::IntegerOverflow);
            }
            value += u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
        if value > u64::from(u32::MAX) {
            return Err(HpackError::IntegerOverflow);
        }
        Ok(value as usize)
    }

    /// A string literal (§5.2): whether it is Huffman-coded, and its raw bytes.
    fn string(&mut self) -> Result<(bool, &'a [u8]), HpackError> {
        let huffman = *self.buf.get(self.pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
        let len = self.integer(7)?;
        let end = self.pos.checked_add(len).filter(|&end| end <= self.buf.len()).ok_or(HpackError::Truncated)?;
        let raw = &self.buf[self.pos..end];
        self.pos = end;
        Ok((huffman, raw))
    }
}

/// A string's decoded form, when only its length and whether it equals a short constant
/// matter: the first `N` decoded bytes kept on the stack, the rest only counted.
struct Short<const N: usize> {
    head: [u8; N],
    len: usize,
}

impl<const N: usize> Short<N> {
    fn read(huffman: bool, raw: &[u8]) -> Result<Self, HpackError> {
        let mut s = Short { head: [0; N], len: 0 };
        if huffman {
            huffman::decode(raw, |b| {
                if let Some(slot) = s.head.get_mut(s.len) {
                    *slot = b;
                }
                s.len += 1;
            })?;
        } else {
            let n = raw.len().min(N);
            s.head[..n].copy_from_slice(&raw[..n]);
            s.len = raw.len();
        }
        Ok(s)
    }

    /// The decoded bytes, if they all fit in the head.
    fn bytes(&self) -> Option<&[u8]> {
        self.head.get(..self.len)
    }
}

/// Appends a string literal's decoded bytes to `out`.
fn push_string(out: &mut Vec<u8>, huffman: bool, raw: &[u8]) -> Result<(), HpackError> {
    if huffman {
        // Huffman codes are at least 5 bits, so this bounds the decoded length.
        out.reserve(raw.len() * 8 / 5);
        huffman::decode(raw, |b| out.push(b))
    } else {
        out.extend_from_slice(raw);
        Ok(())
    }
}

/// A `retry-after` value, `None` when it was too long to keep.
fn set_retry_after(out: &mut Decoded, value: Option<&[u8]>) {
    out.retry_after = Some(value.map_or(RetryAfter::Date, RetryAfter::parse));
}

fn set_status(out: &mut Decoded, value: Option<&[u8]>) -> Result<(), HpackError> {
    if out.status.is_some() {
        return Err(HpackError::DuplicateStatus);
    }
    match value {
        // 000 to 099 are no status (RFC 9110 §15): a status of 0 means none yet to the connection.
        Some(&[a, b, c]) if [a, b, c].iter().all(u8::is_ascii_digit) && a != b'0' => {
            out.status = Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'));
            Ok(())
        }
        _ => Err(HpackError::BadStatus),
    }
}

impl Decoder {
    /// `max_table_size`: the SETTINGS_HEADER_TABLE_SIZE we advertised (the client advertises 0,
    /// but the peer may use the default 4096 until it sees our SETTINGS, so start at 4096 and
    /// let `set_max_table_size` lower it).
    pub(crate) fn new(max_table_size: usize) -> Self {
        Decoder {
            table: DynamicTable::new(max_table_size),
            max_table_size,
            seen: Default::default(),
            last: LastBlock::default(),
        }
    }

    /// Applies a new SETTINGS_HEADER_TABLE_SIZE once the peer has acknowledged it: the limit
    /// for the size updates it sends from now on. The table itself shrinks when the peer's
    /// encoder says so with a size update, which §4.2 requires at the start of its next block;
    /// some servers (h2o 2.2) never send one and go on indexing into the old size, and the
    /// decoder still follows them, since their table is the one their indices point into.
    pub(crate) fn set_max_table_size(&mut self, size: usize) {
        self.max_table_size = size;
    }

    /// `decode`, handing every field's name and value to `collect` as well: for a response
    /// whose header fields a check reads.
    pub(crate) fn decode_collecting(&mut self, block: &[u8], mut collect: Collect<'_>) -> Result<Decoded, HpackError> {
        self.decode_fields(block, Some(&mut collect))
    }

    /// Decodes one complete header block (HEADERS + CONTINUATION payloads concatenated).
    /// Returns the :status (None if the block has no :status, e.g. trailers) and the block's
    /// decoded size (sum of name+value lengths). Any error leaves the table out of step with
    /// the peer's: the connection must end with COMPRESSION_ERROR.
    pub(crate) fn decode(&mut self, block: &[u8]) -> Result<Decoded, HpackError> {
        if !self.is_pure(block) {
            return self.decode_fields(block, None);
        }
        if let Some(decoded) = self.last.decoded.filter(|_| self.last.raw == block) {
            return Ok(decoded);
        }
        let decoded = self.decode_fields(block, None)?;
        self.remember(block, decoded, false);
        Ok(decoded)
    }

    /// `decode`, handing `collect` the value of each `set-cookie` field: for a response whose
    /// cookies a user's jar keeps. A block like the last one, which had none, costs what
    /// `decode` does, so a server that sets no cookie costs the jar one compare a response.
    pub(crate) fn decode_set_cookies(
        &mut self,
        block: &[u8],
        collect: &mut dyn FnMut(&[u8]),
    ) -> Result<Decoded, HpackError> {
        let pure = self.is_pure(block);
        if pure
            && self.last.no_set_cookie
            && let Some(decoded) = self.last.decoded.filter(|_| self.last.raw == block)
        {
            return Ok(decoded);
        }
        let mut found = false;
        let decoded = self.decode_fields(
            block,
            Some(&mut |name: &[u8], value: &[u8]| {
                if name == SET_COOKIE {
                    found = true;
                    collect(value);
                }
            }),
        )?;
        if pure {
            self.remember(block, decoded, !found);
        }
        Ok(decoded)
    }

    /// Whether decoding `block` leaves the table as it was, so that its result depends on its
    /// bytes alone: the table holds nothing and the block opens without a size update.
    fn is_pure(&self, block: &[u8]) -> bool {
        self.table.holds_nothing() && block.first().is_some_and(|&b| b & 0xe0 != 0x20)
    }

    /// Keeps a pure block (see `is_pure`) and what it decoded to, if it is short enough.
    fn remember(&mut self, block: &[u8], decoded: Decoded, no_set_cookie: bool) {
        if block.len() <= LAST_BLOCK_MAX_LEN {
            self.last.raw.clear();
            self.last.raw.extend_from_slice(block);
            self.last.decoded = Some(decoded);
            self.last.no_set_cookie = no_set_cookie;
        }
    }

    /// Walks a block's fields, as `decode` describes.
    fn decode_fields(&mut self, block: &[u8], mut collect: Option<Collect<'_>>) -> Result<Decoded, HpackError> {
        let mut r = Reader { buf: block, pos: 0 };
        let mut out = Decoded { status: None, header_bytes: 0, retry_after: None };
        let mut field_seen = false;
        let mut field = 0;
        while let Some(&first) = block.get(r.pos) {
            if first & 0x80 != 0 {
                // §6.1 indexed field.
                let index = r.integer(7)?;
                let (name, value) = self.lookup(index)?;
                out.header_bytes += name.len() + value.len();
                if let Some(collect) = collect.as_mut() {
                    collect(name, value);
                }
                match Read::field(Some(name)) {
                    Read::Status => set_status(&mut out, Some(value))?,
                    Read::RetryAfter => set_retry_after(&mut out, Some(value)),
                    Read::Neither => {}
                }
            } else if first & 0x40 != 0 {
                // §6.2.1 literal with incremental indexing. Into a table that can hold nothing
                // it reads as one without: nothing to build, nothing to insert.
                if self.table.holds_nothing() {
                    self.literal_plain(&mut r, &mut out, 6, field, collect.as_mut())?;
                } else {
                    self.literal_indexed(&mut r, &mut out, collect.as_mut())?;
                }
            } else if first & 0x20 != 0 {
                // §6.3 dynamic table size update: only before the first field (§4.2).
                if field_seen {
                    return Err(HpackError::SizeUpdateNotAtStart);
                }
                let size = r.integer(5)?;
                if size > self.max_table_size {
                    return Err(HpackError::SizeUpdateTooLarge { size, max: self.max_table_size });
                }
                self.table.set_capacity(size);
                continue;
            } else {
                // §6.2.2 without indexing (0000) and §6.2.3 never indexed (0001): both leave
                // the table alone.
                self.literal_plain(&mut r, &mut out, 4, field, collect.as_mut())?;
            }
            field_seen = true;
            field += 1;
        }
        Ok(out)
    }

    /// A field of the unified index space (§2.3.3).
    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        if index == 0 {
            return Err(HpackError::IndexZero);
        }
        if let Some((name, value)) = STATIC_TABLE.get(index - 1) {
            return Ok((name.as_bytes(), value.as_bytes()));
        }
        self.table
            .get(index - 1 - STATIC_TABLE.len())
            .ok_or(HpackError::IndexOutOfRange { index, len: STATIC_TABLE.len() + self.table.len() })
    }

    fn literal_indexed(
        &mut self,
        r: &mut Reader<'_>,
        out: &mut Decoded,
        collect: Option<&mut Collect<'_>>,
    ) -> Result<(), HpackError> {
        let index = r.integer(6)?;
        // The new entry is built in full before insertion, because inserting may evict the
        // very entry its name came from (§4.4).
        let mut buf = self.table.take_buf();
        let name_len = self.read_literal(r, index, &mut buf)?;
        out.header_bytes += buf.len();
        match Read::field(buf.get(..name_len)) {
            Read::Status => set_status(out, buf.get(name_len..))?,
            Read::RetryAfter => set_retry_after(out, buf.get(name_len..)),
            Read::Neither => {}
        }
        if let (Some(collect), Some(name), Some(value)) = (collect, buf.get(..name_len), buf.get(name_len..)) {
            collect(name, value);
        }
        self.table.insert(buf, name_len);
        Ok(())
    }

    /// A literal that leaves the table alone, its name index in an N-bit prefix (4 for
    /// §6.2.2 and §6.2.3, 6 for §6.2.1 into a table that holds nothing): only the values of
    /// `:status` and `retry-after` are decoded, everything else validated and counted in place.
    /// `field` is its position in the block.
    fn literal_plain(
        &mut self,
        r: &mut Reader<'_>,
        out: &mut Decoded,
        prefix_bits: u32,
        field: usize,
        collect: Option<&mut Collect<'_>>,
    ) -> Result<(), HpackError> {
        if let Some(collect) = collect {
            return self.literal_plain_collected(r, out, prefix_bits, collect);
        }
        let index = r.integer(prefix_bits)?;
        let (name_len, read) = if index == 0 {
            let (huffman, raw) = r.string()?;
            let name = Short::<{ RETRY_AFTER.len() }>::read(huffman, raw)?;
            (name.len, Read::field(name.bytes()))
        } else {
            let name = self.lookup(index)?.0;
            (name.len(), Read::field(Some(name)))
        };
        let (huffman, raw) = r.string()?;
        let value_len = match read {
            Read::Status => {
                let value = Short::<4>::read(huffman, raw)?;
                set_status(out, value.bytes())?;
                value.len
            }
            Read::RetryAfter => {
                let value = Short::<RETRY_AFTER_MAX_LEN>::read(huffman, raw)?;
                set_retry_after(out, value.bytes());
                value.len
            }
            Read::Neither if huffman => self.huffman_len(field, raw)?,
            Read::Neither => raw.len(),
        };
        out.header_bytes += name_len + value_len;
        Ok(())
    }

    /// A literal's name (the table's entry at `index`, or the block's own when 0) and value,
    /// decoded one after the other into `buf`: returns the name's length.
    fn read_literal(&self, r: &mut Reader<'_>, index: usize, buf: &mut Vec<u8>) -> Result<usize, HpackError> {
        if index == 0 {
            let (huffman, raw) = r.string()?;
            push_string(buf, huffman, raw)?;
        } else {
            buf.extend_from_slice(self.lookup(index)?.0);
        }
        let name_len = buf.len();
        let (huffman, raw) = r.string()?;
        push_string(buf, huffman, raw)?;
        Ok(name_len)
    }

    /// `literal_plain` for a block whose every field is wanted: the name and value decoded
    /// in full and handed to `collect`.
    fn literal_plain_collected(
        &mut self,
        r: &mut Reader<'_>,
        out: &mut Decoded,
        prefix_bits: u32,
        collect: &mut Collect<'_>,
    ) -> Result<(), HpackError> {
        let index = r.integer(prefix_bits)?;
        let mut buf = Vec::new();
        let name_len = self.read_literal(r, index, &mut buf)?;
        out.header_bytes += buf.len();
        let (name, value) = buf.split_at(name_len);
        match Read::field(Some(name)) {
            Read::Status => set_status(out, Some(value))?,
            // As the plain walk counts it: a value too long to keep is a date.
            Read::RetryAfter => set_retry_after(out, Some(value).filter(|v| v.len() <= RETRY_AFTER_MAX_LEN)),
            Read::Neither => {}
        }
        collect(name, value);
        Ok(())
    }

    /// The decoded length of a Huffman-coded value at position `field`, validating it unless
    /// the same bytes were validated there before.
    fn huffman_len(&mut self, field: usize, raw: &[u8]) -> Result<usize, HpackError> {
        let Some(seen) = self.seen.get_mut(field).filter(|_| raw.len() <= SEEN_MAX_LEN) else {
            return huffman::decoded_len(raw);
        };
        if seen.raw == raw {
            return Ok(seen.len);
        }
        let len = huffman::decoded_len(raw)?;
        seen.raw.clear();
        seen.raw.extend_from_slice(raw);
        seen.len = len;
        Ok(len)
    }

    /// The dynamic table, newest first, for tests.
    #[cfg(test)]
    pub(crate) fn table_entries(&self) -> Vec<(String, String)> {
        self.table.entries()
    }

    /// The dynamic table's §4.1 size, for tests.
    #[cfg(test)]
    pub(crate) fn table_size(&self) -> usize {
        self.table.size()
    }
}

#[cfg(test)]
pub(crate) mod tests;
