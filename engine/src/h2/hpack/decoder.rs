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

    /// Decodes one complete header block (HEADERS + CONTINUATION payloads concatenated).
    /// Returns the :status (None if the block has no :status, e.g. trailers) and the block's
    /// decoded size (sum of name+value lengths). Any error leaves the table out of step with
    /// the peer's: the connection must end with COMPRESSION_ERROR.
    pub(crate) fn decode(&mut self, block: &[u8]) -> Result<Decoded, HpackError> {
        // A block decoded into a table that holds nothing, and that opens without a size
        // update, leaves the table as it was: its result depends on its bytes alone.
        let pure = self.table.holds_nothing() && block.first().is_some_and(|&b| b & 0xe0 != 0x20);
        if !pure {
            return self.decode_fields(block);
        }
        if let Some(decoded) = self.last.decoded.filter(|_| self.last.raw == block) {
            return Ok(decoded);
        }
        let decoded = self.decode_fields(block)?;
        if block.len() <= LAST_BLOCK_MAX_LEN {
            self.last.raw.clear();
            self.last.raw.extend_from_slice(block);
            self.last.decoded = Some(decoded);
        }
        Ok(decoded)
    }

    /// Walks a block's fields, as `decode` describes.
    fn decode_fields(&mut self, block: &[u8]) -> Result<Decoded, HpackError> {
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
                match Read::field(Some(name)) {
                    Read::Status => set_status(&mut out, Some(value))?,
                    Read::RetryAfter => set_retry_after(&mut out, Some(value)),
                    Read::Neither => {}
                }
            } else if first & 0x40 != 0 {
                // §6.2.1 literal with incremental indexing. Into a table that can hold nothing
                // it reads as one without: nothing to build, nothing to insert.
                if self.table.holds_nothing() {
                    self.literal_plain(&mut r, &mut out, 6, field)?;
                } else {
                    self.literal_indexed(&mut r, &mut out)?;
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
                self.literal_plain(&mut r, &mut out, 4, field)?;
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

    fn literal_indexed(&mut self, r: &mut Reader<'_>, out: &mut Decoded) -> Result<(), HpackError> {
        let index = r.integer(6)?;
        // The new entry is built in full before insertion, because inserting may evict the
        // very entry its name came from (§4.4).
        let mut buf = self.table.take_buf();
        if index == 0 {
            let (huffman, raw) = r.string()?;
            push_string(&mut buf, huffman, raw)?;
        } else {
            buf.extend_from_slice(self.lookup(index)?.0);
        }
        let name_len = buf.len();
        let (huffman, raw) = r.string()?;
        push_string(&mut buf, huffman, raw)?;
        out.header_bytes += buf.len();
        match Read::field(buf.get(..name_len)) {
            Read::Status => set_status(out, buf.get(name_len..))?,
            Read::RetryAfter => set_retry_after(out, buf.get(name_len..)),
            Read::Neither => {}
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
    ) -> Result<(), HpackError> {
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
pub(crate) mod tests {
    use super::*;

    /// Bytes from the RFC's hex dumps (whitespace ignored).
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
    }

    fn table(d: &Decoder) -> Vec<(String, String)> {
        d.table_entries()
    }

    fn entries(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    fn int(bytes: &[u8], prefix: u32) -> Result<usize, HpackError> {
        let mut r = Reader { buf: bytes, pos: 0 };
        let v = r.integer(prefix)?;
        assert_eq!(r.pos, bytes.len());
        Ok(v)
    }

    #[test]
    fn c1_integers() {
        assert_eq!(int(&[0x0a], 5), Ok(10)); // C.1.1
        assert_eq!(int(&[0x1f, 0x9a, 0x0a], 5), Ok(1337)); // C.1.2
        assert_eq!(int(&[0xff, 0x9a, 0x0a], 5), Ok(1337)); // bits above the prefix are not ours
        assert_eq!(int(&[0x2a], 8), Ok(42)); // C.1.3
        assert_eq!(int(&[0x1f, 0x00], 5), Ok(31));
        assert_eq!(int(&[0x1f, 0xe0, 0xff, 0xff, 0xff, 0x0f], 5), Ok(u32::MAX as usize));
    }

    fn sum(list: &[(&str, &str)]) -> usize {
        list.iter().map(|(n, v)| n.len() + v.len()).sum()
    }

    /// nginx 1.22's first two response blocks on a connection whose SETTINGS said
    /// HEADER_TABLE_SIZE 0: a size update to 0, then `server`, `date`, `content-type` and
    /// `content-length` as literals with incremental indexing, every time.
    const NGINX_FIRST: &str =
        "20887689aa6355e580ae212e1f6196df697e940054be52282009c5022b8dbf704da98b46ff5f87497ca58ae819aa5c023134";
    const NGINX_NEXT: &str =
        "887689aa6355e580ae212e1f6196df697e940054be52282009c5022b8dbf704e298b46ff5f87497ca58ae819aa5c023134";

    #[test]
    fn literals_with_indexing_into_a_table_of_no_room_read_the_same_and_keep_nothing() {
        let mut none = Decoder::new(4096);
        none.set_max_table_size(0);
        let mut room = Decoder::new(4096);
        // The same fields into a table with room: what the decoder must read either way.
        let with_room = room.decode(&hex(NGINX_NEXT)).unwrap();
        assert_eq!(room.table_entries().len(), 4);
        for block in [NGINX_FIRST, NGINX_NEXT, NGINX_NEXT] {
            let got = none.decode(&hex(block)).unwrap();
            assert_eq!(got.status, Some(200));
            assert_eq!(got.header_bytes, with_room.header_bytes);
            assert!(none.table_entries().is_empty());
            assert_eq!(none.table_size(), 0);
        }
        // A status other than the static table's comes as a literal with indexing of name 8,
        // here Huffman-coded "404"; a bad pad in any field still fails the block.
        let mut coded = Vec::new();
        huffman::encode(b"404", &mut coded);
        let mut status = hex("48");
        status.push(0x80 | coded.len() as u8);
        status.extend_from_slice(&coded);
        assert_eq!(none.decode(&status).unwrap().status, Some(404));
        let mut bad_pad = hex("5f");
        bad_pad.extend_from_slice(&[0x81, 0x00]);
        assert!(matches!(none.decode(&bad_pad), Err(HpackError::HuffmanPadding)));
        assert!(none.table_entries().is_empty());
    }

    #[test]
    fn a_value_validated_before_is_known_by_its_bytes_and_a_changed_one_is_checked_again() {
        let mut d = Decoder::new(0);
        let field = |value: &[u8]| {
            let mut coded = Vec::new();
            huffman::encode(value, &mut coded);
            // server (static 54), literal without indexing, Huffman value.
            let mut block = vec![0x0f, 54 - 15];
            block.push(0x80 | coded.len() as u8);
            block.extend_from_slice(&coded);
            block
        };
        let nginx = field(b"nginx/1.22.1");
        for _ in 0..3 {
            assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
        }
        assert_eq!(d.decode(&field(b"h2o")).unwrap().header_bytes, 6 + 3);
        // The same length as the value remembered, one byte changed to an invalid pad.
        let mut broken = nginx.clone();
        *broken.last_mut().unwrap() &= 0xfe;
        assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
        assert!(d.decode(&broken).is_err());
        assert_eq!(d.decode(&nginx).unwrap().header_bytes, 6 + 12);
    }

    #[test]
    fn c2_1_literal_with_indexing() {
        let mut d = Decoder::new(4096);
        let got = d.decode(&hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")).unwrap();
        assert_eq!(
            got,
            Decoded { status: None, header_bytes: sum(&[("custom-key", "custom-header")]), retry_after: None }
        );
        assert_eq!(table(&d), entries(&[("custom-key", "custom-header")]));
        assert_eq!(d.table_size(), 55);
    }

    #[test]
    fn c2_2_literal_without_indexing() {
        let mut d = Decoder::new(4096);
        let got = d.decode(&hex("040c 2f73 616d 706c 652f 7061 7468")).unwrap();
        assert_eq!(got, Decoded { status: None, header_bytes: sum(&[(":path", "/sample/path")]), retry_after: None });
        assert!(table(&d).is_empty());
    }

    #[test]
    fn c2_3_literal_never_indexed() {
        let mut d = Decoder::new(4096);
        let got = d.decode(&hex("1008 7061 7373 776f 7264 0673 6563 7265 74")).unwrap();
        assert_eq!(got, Decoded { status: None, header_bytes: sum(&[("password", "secret")]), retry_after: None });
        assert!(table(&d).is_empty());
    }

    #[test]
    fn c2_4_indexed() {
        let mut d = Decoder::new(4096);
        let got = d.decode(&hex("82")).unwrap();
        assert_eq!(got, Decoded { status: None, header_bytes: sum(&[(":method", "GET")]), retry_after: None });
        assert!(table(&d).is_empty());
    }

    const REQ1: &[(&str, &str)] =
        &[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")];
    const REQ2: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/"),
        (":authority", "www.example.com"),
        ("cache-control", "no-cache"),
    ];
    const REQ3: &[(&str, &str)] = &[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", "/index.html"),
        (":authority", "www.example.com"),
        ("custom-key", "custom-value"),
    ];

    fn requests(blocks: [&str; 3]) {
        let mut d = Decoder::new(4096);
        let want_tables = [
            (vec![(":authority", "www.example.com")], 57),
            (vec![("cache-control", "no-cache"), (":authority", "www.example.com")], 110),
            (
                vec![("custom-key", "custom-value"), ("cache-control", "no-cache"), (":authority", "www.example.com")],
                164,
            ),
        ];
        for ((block, list), (want, size)) in blocks.iter().zip([REQ1, REQ2, REQ3]).zip(want_tables) {
            let got = d.decode(&hex(block)).unwrap();
            assert_eq!(got, Decoded { status: None, header_bytes: sum(list), retry_after: None });
            assert_eq!(table(&d), entries(&want));
            assert_eq!(d.table_size(), size);
        }
    }

    #[test]
    fn c3_requests_without_huffman() {
        requests([
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ]);
    }

    #[test]
    fn c4_requests_with_huffman() {
        requests([
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ]);
    }

    const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
    const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
    const LOC: &str = "https://www.example.com";
    const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

    fn responses(blocks: [&str; 3]) {
        let mut d = Decoder::new(256);
        let lists: [&[(&str, &str)]; 3] = [
            &[(":status", "302"), ("cache-control", "private"), ("date", DATE1), ("location", LOC)],
            &[(":status", "307"), ("cache-control", "private"), ("date", DATE1), ("location", LOC)],
            &[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", DATE2),
                ("location", LOC),
                ("content-encoding", "gzip"),
                ("set-cookie", COOKIE),
            ],
        ];
        let want_tables = [
            (vec![("location", LOC), ("date", DATE1), ("cache-control", "private"), (":status", "302")], 222),
            (vec![(":status", "307"), ("location", LOC), ("date", DATE1), ("cache-control", "private")], 222),
            (vec![("set-cookie", COOKIE), ("content-encoding", "gzip"), ("date", DATE2)], 215),
        ];
        for (((block, list), status), (want, size)) in blocks.iter().zip(lists).zip([302, 307, 200]).zip(want_tables) {
            let got = d.decode(&hex(block)).unwrap();
            assert_eq!(got, Decoded { status: Some(status), header_bytes: sum(list), retry_after: None });
            assert_eq!(table(&d), entries(&want));
            assert_eq!(d.table_size(), size);
        }
    }

    #[test]
    fn c5_responses_without_huffman() {
        responses([
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32
             3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970
             7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61
             6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
        ]);
    }

    #[test]
    fn c6_responses_with_huffman() {
        responses([
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad
             1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2
             e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ]);
    }

    fn err(block: &[u8]) -> HpackError {
        Decoder::new(4096).decode(block).unwrap_err()
    }

    #[test]
    fn rejects_index_zero() {
        assert_eq!(err(&[0x80]), HpackError::IndexZero);
    }

    #[test]
    fn rejects_index_out_of_range() {
        // 62 is the first dynamic index; the table is empty.
        assert_eq!(err(&[0xbe]), HpackError::IndexOutOfRange { index: 62, len: 61 });
        // A literal's indexed name too.
        assert_eq!(err(&[0x0f, 0x30, 0x00]), HpackError::IndexOutOfRange { index: 63, len: 61 });
        assert_eq!(err(&[0x7f, 0x01, 0x00]), HpackError::IndexOutOfRange { index: 64, len: 61 });
    }

    #[test]
    fn rejects_integer_overflow() {
        // Index 127 + 2^35: too long an encoding.
        assert_eq!(err(&[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), HpackError::IntegerOverflow);
        // Above u32::MAX in five continuation bytes.
        assert_eq!(err(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), HpackError::IntegerOverflow);
        // Overlong zero padding is refused the same way, not looped on.
        let mut long = vec![0xff];
        long.extend(std::iter::repeat_n(0x80, 1000));
        long.push(0);
        assert_eq!(err(&long), HpackError::IntegerOverflow);
    }

    #[test]
    fn rejects_huffman_eos() {
        // Literal, new name "a", Huffman value of 4 bytes of ones (contains EOS).
        assert_eq!(err(&[0x00, 0x01, b'a', 0x84, 0xff, 0xff, 0xff, 0xff]), HpackError::HuffmanEos);
    }

    #[test]
    fn rejects_huffman_padding_too_long() {
        // '0' (00000) + 111 then a whole byte of ones: 11 bits of padding.
        assert_eq!(err(&[0x00, 0x01, b'a', 0x82, 0x07, 0xff]), HpackError::HuffmanPadding);
    }

    #[test]
    fn rejects_huffman_padding_not_ones() {
        // '0' (00000) then 000.
        assert_eq!(err(&[0x00, 0x01, b'a', 0x81, 0x00]), HpackError::HuffmanPadding);
        // The same in a name, in an indexed insertion.
        assert_eq!(err(&[0x40, 0x81, 0x00, 0x00]), HpackError::HuffmanPadding);
    }

    #[test]
    fn rejects_size_update_above_max() {
        // 4097 > 4096: 0x3f then 4097 - 31 = 4066 = 0xe2 0x1f.
        assert_eq!(err(&[0x3f, 0xe2, 0x1f]), HpackError::SizeUpdateTooLarge { size: 4097, max: 4096 });
        let mut d = Decoder::new(4096);
        d.set_max_table_size(0);
        assert_eq!(d.decode(&[0x21]), Err(HpackError::SizeUpdateTooLarge { size: 1, max: 0 }));
        assert_eq!(d.decode(&[0x20, 0x88]).unwrap().status, Some(200));
    }

    #[test]
    fn rejects_size_update_after_a_field() {
        assert_eq!(err(&[0x88, 0x20]), HpackError::SizeUpdateNotAtStart);
        // Two at the start are fine (§4.2: a lowered then raised limit).
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&[0x20, 0x3f, 0xe1, 0x1f, 0x88]).unwrap().status, Some(200));
    }

    #[test]
    fn rejects_truncated() {
        for block in [
            &[0xff][..],               // integer continuation missing
            &[0x40],                   // no name
            &[0x40, 0x03, b'a', b'b'], // name cut short
            &[0x40, 0x01, b'a'],       // no value
            &[0x0f, 0x1f, 0x05, b'x'], // value cut short (location)
            &[0x48, 0x83, 0x64],       // Huffman value cut short
        ] {
            assert_eq!(err(block), HpackError::Truncated, "{block:02x?}");
        }
    }

    #[test]
    fn rejects_status_not_three_digits_from_100() {
        for block in [
            &[0x48, 0x02, b'2', b'0'][..],                                 // too short
            &[0x48, 0x03, b'0', b'0', b'0'],                               // below 100
            &[0x48, 0x04, b'2', b'0', b'0', b'0'],                         // too long
            &[0x08, 0x03, b'2', b'0', b'x'],                               // not a digit, without indexing
            &[0x00, 0x07, b':', b's', b't', b'a', b't', b'u', b's', 0x00], // literal name, empty
        ] {
            assert_eq!(err(block), HpackError::BadStatus, "{block:02x?}");
        }
    }

    #[test]
    fn rejects_duplicate_status() {
        assert_eq!(err(&[0x88, 0x8d]), HpackError::DuplicateStatus);
    }

    #[test]
    fn status_from_every_representation() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.decode(&[0x8d]).unwrap(), Decoded { status: Some(404), header_bytes: 10, retry_after: None });
        assert_eq!(d.decode(&[0x08, 0x03, b'1', b'0', b'3']).unwrap().status, Some(103));
        // Huffman-coded literal name ":status" and value "302".
        let mut block = vec![0x00];
        let mut name = Vec::new();
        huffman::encode(b":status", &mut name);
        block.push(0x80 | name.len() as u8);
        block.extend_from_slice(&name);
        block.extend_from_slice(&[0x82, 0x64, 0x02]);
        assert_eq!(d.decode(&block).unwrap(), Decoded { status: Some(302), header_bytes: 10, retry_after: None });
        // Inserted, then indexed from the dynamic table.
        assert_eq!(d.decode(&[0x48, 0x03, b'4', b'2', b'9']).unwrap().status, Some(429));
        assert_eq!(d.decode(&[0xbe]).unwrap().status, Some(429));
        // Trailers: no status.
        assert_eq!(d.decode(&[]).unwrap(), Decoded { status: None, header_bytes: 0, retry_after: None });
    }

    #[test]
    fn retry_after_from_every_representation() {
        let mut d = Decoder::new(4096);
        let retry = |d: &mut Decoder, block: &[u8]| d.decode(block).unwrap().retry_after;
        // Static index 53 is retry-after with an empty value: not delay-seconds.
        assert_eq!(retry(&mut d, &[0x88, 0x80 | 53]), Some(RetryAfter::Date));
        // Its name by index, the value a plain literal, without and never indexed.
        assert_eq!(retry(&mut d, &[0x88, 0x0f, 53 - 15, 0x03, b'1', b'2', b'0']), Some(RetryAfter::Seconds(120)));
        assert_eq!(retry(&mut d, &[0x88, 0x1f, 53 - 15, 0x01, b'7']), Some(RetryAfter::Seconds(7)));
        // Huffman-coded value and Huffman-coded literal name.
        let mut block = vec![0x88, 0x00];
        let (mut name, mut value) = (Vec::new(), Vec::new());
        huffman::encode(b"retry-after", &mut name);
        huffman::encode(b"Fri, 31 Dec 1999 23:59:59 GMT", &mut value);
        block.push(0x80 | name.len() as u8);
        block.extend_from_slice(&name);
        block.push(0x80 | value.len() as u8);
        block.extend_from_slice(&value);
        assert_eq!(retry(&mut d, &block), Some(RetryAfter::Date));
        // Inserted into the dynamic table, then indexed from it (index 62).
        assert_eq!(retry(&mut d, &[0x88, 0x40 | 53, 0x02, b'4', b'5']), Some(RetryAfter::Seconds(45)));
        assert_eq!(retry(&mut d, &[0x88, 0xbe]), Some(RetryAfter::Seconds(45)));
        // Into a table that holds nothing (prefix of 6 bits, as nginx sends under our size 0).
        let mut none = Decoder::new(4096);
        none.set_max_table_size(0);
        assert_eq!(retry(&mut none, &[0x20, 0x88, 0x40 | 53, 0x02, b'3', b'0']), Some(RetryAfter::Seconds(30)));
        // Too long to keep: counted as a date. Two in a block: the last one.
        let mut long = vec![0x88, 0x0f, 53 - 15, 40];
        long.extend_from_slice(&[b'9'; 40]);
        assert_eq!(retry(&mut d, &long), Some(RetryAfter::Date));
        assert_eq!(
            retry(&mut d, &[0x88, 0x0f, 53 - 15, 0x01, b'1', 0x0f, 53 - 15, 0x01, b'2']),
            Some(RetryAfter::Seconds(2))
        );
        // Names that only look like it, and a block without it.
        assert_eq!(retry(&mut d, &[0x88, 0x00, 0x05, b'r', b'e', b't', b'r', b'y', 0x01, b'1']), None);
        assert_eq!(
            retry(
                &mut d,
                &[0x88, 0x00, 0x0c, b'r', b'e', b't', b'r', b'y', b'-', b'a', b'f', b't', b'e', b'r', b's', 0x01, b'1']
            ),
            None
        );
        assert_eq!(retry(&mut d, &[0x88]), None);
    }

    #[test]
    fn a_lowered_limit_shrinks_the_table_when_the_peer_says_so() {
        let mut d = Decoder::new(4096);
        d.decode(&hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")).unwrap();
        assert_eq!(d.table_size(), 55);
        d.set_max_table_size(0);
        // A peer that has not (yet) sent its size update still indexes into its old table.
        assert_eq!(d.decode(&[0xbe]).unwrap().header_bytes, "custom-keycustom-header".len());
        assert_eq!(d.table_size(), 55);
        // Its size update empties it.
        d.decode(&[0x20]).unwrap();
        assert_eq!(d.table_size(), 0);
        assert_eq!(d.decode(&[0xbe]), Err(HpackError::IndexOutOfRange { index: 62, len: 61 }));
    }

    #[test]
    fn a_repeated_block_reads_as_walking_it_would_whatever_came_between() {
        // Blocks that keep the table empty, and ones that size it, fill it and point into it.
        let blocks = [
            NGINX_FIRST,
            NGINX_NEXT,
            "88",
            "8d",
            "880f260135",
            "3fe11f 4001 7801 62 88",
            "88be",
            "2088",
            "40 0178 0163 88",
            "0f2681",
            "",
        ]
        .map(hex);
        let mut remembering = Decoder::new(4096);
        let mut walking = Decoder::new(4096);
        let mut rng = crate::test_rng::Rng(0x5eed_b10c);
        for step in 0..2000 {
            let block = &blocks[rng.below(blocks.len())];
            let want = walking.decode_fields(block);
            assert_eq!(remembering.decode(block), want, "step {step}, block {block:02x?}");
            assert_eq!(remembering.table_entries(), walking.table_entries(), "step {step}");
            if want.is_err() {
                // A failed block ends the connection; start both afresh.
                remembering = Decoder::new(4096);
                walking = Decoder::new(4096);
            }
        }
    }
}
