//! QUIC v1 packets on the wire (RFC 9000 §17) and their protection (RFC 9001 §5), for a client.
//!
//! Receiving: [`parse`] splits the next packet off a datagram (several may be coalesced, RFC 9000
//! §12.2) without keys, as offsets ([`PacketSpan`]) rather than borrowed slices, so that the same
//! `&mut [u8]` can then be unprotected in place: [`unprotect_header`] removes header protection
//! and recovers the full packet number, [`decrypt`] opens the payload where it lies.
//!
//! Sending: [`begin`] writes a header at the end of an output buffer that holds several datagrams
//! back to back (one GSO send), the caller appends frames (at most [`Builder::room`] bytes), and
//! [`finish`] pads, fills in the Length, encrypts in place and applies header protection.
//!
//! Nothing here allocates, except `Vec` growth when the output buffer lacks capacity.

use std::ops::Range;

use ring::aead;
use rustls::quic::{HeaderProtectionKey, Keys, PacketKey, Version};

use crate::quic::varint;

#[cfg(test)]
pub(crate) mod tests;

/// QUIC v1's version number.
pub(crate) const VERSION_1: u32 = 1;
/// The longest connection ID QUIC v1 allows (RFC 9000 §17.2).
pub(crate) const MAX_CID_LEN: usize = 20;
/// The AEAD tag every QUIC v1 cipher suite appends (AES-GCM and ChaCha20-Poly1305 alike).
pub(crate) const TAG_LEN: usize = 16;
/// The transport error code for a peer breaking the protocol (RFC 9000 §20.1).
pub(crate) const PROTOCOL_VIOLATION: u64 = 0x0a;

const LONG_FORM: u8 = 0x80;
const FIXED_BIT: u8 = 0x40;
const KEY_PHASE_BIT: u8 = 0x04;
const LONG_RESERVED_BITS: u8 = 0x0c;
const SHORT_RESERVED_BITS: u8 = 0x18;
const PN_LEN_BITS: u8 = 0x03;
/// Header protection samples 16 bytes starting this far past the packet number's start, as if
/// the packet number were 4 bytes long (RFC 9001 §5.4.2).
const SAMPLE_OFFSET: usize = 4;
/// The largest Length we write: it is always a 2-byte varint, written before the payload's size
/// is known.
const MAX_LENGTH: usize = 0x3fff;

/// A packet number space (RFC 9000 §12.3). `Data` is 1-RTT; this client sends no 0-RTT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    Initial,
    Handshake,
    Data,
}

/// A connection ID of up to [`MAX_CID_LEN`] bytes, held without allocating.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct ConnectionId {
    len: u8,
    bytes: [u8; MAX_CID_LEN],
}

impl ConnectionId {
    /// `None` if `bytes` is longer than QUIC v1 allows.
    pub(crate) fn new(bytes: &[u8]) -> Option<Self> {
        let mut id = ConnectionId { len: u8::try_from(bytes.len()).ok()?, bytes: [0; MAX_CID_LEN] };
        id.bytes.get_mut(..bytes.len())?.copy_from_slice(bytes);
        Some(id)
    }
}

impl std::ops::Deref for ConnectionId {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.iter() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// A byte range of a datagram, as `Copy` offsets (`Range` is not `Copy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Field {
    pub start: usize,
    pub end: usize,
}

impl Field {
    const EMPTY: Field = Field { start: 0, end: 0 };

    pub(crate) fn range(self) -> Range<usize> {
        self.start..self.end
    }

    pub(crate) fn len(self) -> usize {
        self.end - self.start
    }

    pub(crate) fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// These bytes of `datagram`, which must be the datagram the field was parsed from.
    pub(crate) fn of(self, datagram: &[u8]) -> &[u8] {
        &datagram[self.range()]
    }
}

/// What kind of packet a [`PacketSpan`] is, with the fields only that kind has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Initial,
    /// A client never receives 0-RTT: to be skipped.
    ZeroRtt,
    Handshake,
    /// The token is in [`PacketSpan::token`].
    Retry {
        integrity_tag: Field,
    },
    /// Big-endian 4-byte versions; read them with [`Versions`].
    VersionNegotiation {
        versions: Field,
    },
    Short,
    /// A long header of a version other than 1 (and not Version Negotiation): only its
    /// connection IDs can be read (RFC 8999).
    UnsupportedVersion(u32),
}

impl Kind {
    /// The packet number space of a protected packet we can open; `None` for the rest.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn space(self) -> Option<Space> {
        match self {
            Kind::Initial => Some(Space::Initial),
            Kind::Handshake => Some(Space::Handshake),
            Kind::Short => Some(Space::Data),
            _ => None,
        }
    }

    fn is_protected(self) -> bool {
        matches!(self, Kind::Initial | Kind::ZeroRtt | Kind::Handshake | Kind::Short)
    }
}

/// One packet of a datagram, its header parsed, still protected: where it and its fields lie in
/// the datagram. The next packet (if any) starts at `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketSpan {
    pub kind: Kind,
    /// The packet's first byte.
    pub start: usize,
    /// Where the protected packet number starts; `end` for packets without one (Retry,
    /// Version Negotiation, unsupported versions).
    pub pn_offset: usize,
    /// One past the packet's last byte (its AEAD tag's, for protected packets).
    pub end: usize,
    pub dcid: Field,
    /// Empty for short headers.
    pub scid: Field,
    /// The token of an Initial or a Retry; empty otherwise.
    pub token: Field,
}

impl PacketSpan {
    /// The header as borrowed slices of `datagram`, which must be the datagram `parse` read.
    pub(crate) fn header<'a>(&self, datagram: &'a [u8]) -> Header<'a> {
        let dcid = self.dcid.of(datagram);
        let scid = self.scid.of(datagram);
        match self.kind {
            Kind::Initial => Header::Initial { dcid, scid, token: self.token.of(datagram) },
            Kind::ZeroRtt => Header::ZeroRtt,
            Kind::Handshake => Header::Handshake { dcid, scid },
            Kind::Retry { integrity_tag } => {
                Header::Retry { scid, token: self.token.of(datagram), integrity_tag: integrity_tag.of(datagram) }
            }
            Kind::VersionNegotiation { versions } => {
                Header::VersionNegotiation { dcid, scid, versions: Versions(versions.of(datagram)) }
            }
            Kind::Short => Header::Short { dcid },
            Kind::UnsupportedVersion(version) => Header::UnsupportedVersion(version),
        }
    }
}

/// A packet's header as slices of the datagram, for reading once the datagram is no longer
/// being written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Header<'a> {
    Initial { dcid: &'a [u8], scid: &'a [u8], token: &'a [u8] },
    Handshake { dcid: &'a [u8], scid: &'a [u8] },
    ZeroRtt,
    Retry { scid: &'a [u8], token: &'a [u8], integrity_tag: &'a [u8] },
    VersionNegotiation { dcid: &'a [u8], scid: &'a [u8], versions: Versions<'a> },
    Short { dcid: &'a [u8] },
    UnsupportedVersion(u32),
}

/// The versions a Version Negotiation packet lists.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) struct Versions<'a>(&'a [u8]);

impl Iterator for Versions<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let (version, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*version))
    }
}

/// A packet we cannot take. Those with a [`PacketError::code`] end the connection; every other
/// one only drops the packet (and, from `parse`, the rest of the datagram), silently, as RFC 9000
/// §12.2 and RFC 9001 §5.5 ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PacketError {
    #[error("a QUIC packet ends inside its header")]
    Truncated,
    #[error("a QUIC packet's Length of {length} bytes runs past the {room} bytes left in its datagram")]
    LengthBeyondDatagram { length: u64, room: usize },
    #[error("a QUIC packet has its fixed bit clear")]
    FixedBitClear,
    #[error("a QUIC v1 packet carries a connection ID of {len} bytes, above 20")]
    ConnectionIdTooLong { len: usize },
    #[error("a Version Negotiation packet's version list of {len} bytes is not a non-empty multiple of 4")]
    MalformedVersionNegotiation { len: usize },
    #[error("a Retry packet is too short for its integrity tag")]
    MalformedRetry,
    #[error("a {len}-byte QUIC packet is too short for a header-protection sample")]
    TooShortForSample { len: usize },
    #[error("a {kind:?} packet has no packet protection to remove")]
    NotProtected { kind: Kind },
    #[error("removing a QUIC packet's header protection failed")]
    HeaderProtection,
    #[error("a QUIC packet failed authentication")]
    Decrypt,
    #[error("a QUIC packet has reserved header bits set")]
    ReservedBits,
    #[error("a QUIC packet carries no frames")]
    NoFrames,
    #[error("encrypting a QUIC packet failed")]
    Encrypt,
}

impl PacketError {
    /// The transport error to close the connection with, for the errors that end it (only
    /// ever reported for packets that authenticated); `None` means: drop the packet.
    pub(crate) fn code(self) -> Option<u64> {
        match self {
            PacketError::ReservedBits | PacketError::NoFrames => Some(PROTOCOL_VIOLATION),
            _ => None,
        }
    }
}

/// Reads a header front to back; every read past the end is [`PacketError::Truncated`].
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u8(&mut self) -> Result<u8, PacketError> {
        let b = *self.buf.get(self.pos).ok_or(PacketError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn u32(&mut self) -> Result<u32, PacketError> {
        let f = self.field(4)?;
        let bytes: [u8; 4] = self.buf[f.range()].try_into().map_err(|_| PacketError::Truncated)?;
        Ok(u32::from_be_bytes(bytes))
    }

    fn varint(&mut self) -> Result<u64, PacketError> {
        let rest = self.buf.get(self.pos..).ok_or(PacketError::Truncated)?;
        let (value, len) = varint::decode(rest).ok_or(PacketError::Truncated)?;
        self.pos += len;
        Ok(value)
    }

    fn field(&mut self, len: usize) -> Result<Field, PacketError> {
        let end = self.pos.checked_add(len).filter(|&end| end <= self.buf.len()).ok_or(PacketError::Truncated)?;
        let field = Field { start: self.pos, end };
        self.pos = end;
        Ok(field)
    }

    /// A varint length followed by that many bytes.
    fn prefixed(&mut self) -> Result<Field, PacketError> {
        let len = self.varint()?;
        self.field(usize::try_from(len).map_err(|_| PacketError::Truncated)?)
    }
}

/// Splits off the packet starting at `datagram[at]`. `dcid_len` is the length of our own
/// connection ID, which short headers do not carry. A short header, a Retry, a Version
/// Negotiation and a long header of another version run to the datagram's end; a long header
/// packet ends where its Length says. Errors leave nothing to read in the rest of the datagram.
pub(crate) fn parse(datagram: &[u8], at: usize, dcid_len: usize) -> Result<PacketSpan, PacketError> {
    let mut r = Reader { buf: datagram, pos: at };
    let first = r.u8()?;
    if first & LONG_FORM == 0 {
        if first & FIXED_BIT == 0 {
            return Err(PacketError::FixedBitClear);
        }
        let dcid = r.field(dcid_len)?;
        return Ok(PacketSpan {
            kind: Kind::Short,
            start: at,
            pn_offset: r.pos,
            end: datagram.len(),
            dcid,
            scid: Field::EMPTY,
            token: Field::EMPTY,
        });
    }
    let version = r.u32()?;
    let dcid_len = usize::from(r.u8()?);
    let dcid = r.field(dcid_len)?;
    let scid_len = usize::from(r.u8()?);
    let scid = r.field(scid_len)?;
    let to_end =
        |kind, token| PacketSpan { kind, start: at, pn_offset: datagram.len(), end: datagram.len(), dcid, scid, token };
    // Version Negotiation and other versions keep only the invariant header (RFC 8999), whose
    // connection IDs may be up to 255 bytes and whose fixed bit means nothing.
    if version == 0 {
        let versions = Field { start: r.pos, end: datagram.len() };
        if versions.is_empty() || !versions.len().is_multiple_of(4) {
            return Err(PacketError::MalformedVersionNegotiation { len: versions.len() });
        }
        return Ok(to_end(Kind::VersionNegotiation { versions }, Field::EMPTY));
    }
    if version != VERSION_1 {
        return Ok(to_end(Kind::UnsupportedVersion(version), Field::EMPTY));
    }
    for len in [dcid_len, scid_len] {
        if len > MAX_CID_LEN {
            return Err(PacketError::ConnectionIdTooLong { len });
        }
    }
    if first & FIXED_BIT == 0 {
        return Err(PacketError::FixedBitClear);
    }
    let (kind, token) = match (first >> 4) & 0x03 {
        0 => (Kind::Initial, r.prefixed()?),
        1 => (Kind::ZeroRtt, Field::EMPTY),
        2 => (Kind::Handshake, Field::EMPTY),
        _ => {
            let tag_start = datagram.len().checked_sub(TAG_LEN).filter(|&s| s >= r.pos);
            let tag_start = tag_start.ok_or(PacketError::MalformedRetry)?;
            let integrity_tag = Field { start: tag_start, end: datagram.len() };
            return Ok(to_end(Kind::Retry { integrity_tag }, Field { start: r.pos, end: tag_start }));
        }
    };
    let length = r.varint()?;
    let pn_offset = r.pos;
    let room = datagram.len() - pn_offset;
    let end = usize::try_from(length)
        .ok()
        .filter(|&len| len <= room)
        .map(|len| pn_offset + len)
        .ok_or(PacketError::LengthBeyondDatagram { length, room })?;
    Ok(PacketSpan { kind, start: at, pn_offset, end, dcid, scid, token })
}

/// QUIC v1's Retry integrity key and nonce (RFC 9001 §5.8).
const RETRY_KEY: [u8; 16] =
    [0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e];
const RETRY_NONCE: [u8; 12] = [0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb];

/// Whether Retry `span` of `datagram` carries the tag its server computes over `original_dcid`,
/// the Destination Connection ID of our first Initial (RFC 9001 §5.8): AES-128-GCM under QUIC
/// v1's fixed key and nonce, the Retry Pseudo-Packet as associated data, nothing encrypted.
pub(crate) fn retry_integrity_is_valid(datagram: &[u8], span: &PacketSpan, original_dcid: &[u8]) -> bool {
    let Kind::Retry { integrity_tag } = span.kind else { return false };
    let Ok(odcid_len) = u8::try_from(original_dcid.len()) else { return false };
    let mut pseudo = Vec::with_capacity(1 + original_dcid.len() + (integrity_tag.start - span.start));
    pseudo.push(odcid_len);
    pseudo.extend_from_slice(original_dcid);
    pseudo.extend_from_slice(&datagram[span.start..integrity_tag.start]);
    let Ok(key) = aead::UnboundKey::new(&aead::AES_128_GCM, &RETRY_KEY) else { return false };
    let Ok(mut tag) = <[u8; TAG_LEN]>::try_from(integrity_tag.of(datagram)) else { return false };
    let nonce = aead::Nonce::assume_unique_for_key(RETRY_NONCE);
    aead::LessSafeKey::new(key).open_in_place(nonce, aead::Aad::from(&pseudo[..]), &mut tag).is_ok()
}

/// A packet with its header protection removed: the full packet number and what the first byte
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unprotected {
    pub pn: u64,
    /// 1 to 4.
    pub pn_len: usize,
    /// The key phase bit of a short header; false for long headers.
    pub key_phase: bool,
}

/// Removes header protection from packet `span` of `datagram` in place (RFC 9001 §5.4) and
/// decodes its packet number against `largest_received`, the largest packet number received so
/// far in its space (RFC 9000 Appendix A.3).
///
/// Afterwards the first byte and the packet number are in the clear in `datagram`; the sample,
/// and so the payload, are untouched. Header protection keys do not change with key updates, so
/// the key phase read here chooses the packet key for [`decrypt`].
pub(crate) fn unprotect_header(
    datagram: &mut [u8],
    span: &PacketSpan,
    header_key: &dyn HeaderProtectionKey,
    largest_received: Option<u64>,
) -> Result<Unprotected, PacketError> {
    if !span.kind.is_protected() {
        return Err(PacketError::NotProtected { kind: span.kind });
    }
    let packet = datagram.get_mut(span.start..span.end).ok_or(PacketError::Truncated)?;
    let len = packet.len();
    let pn_at = span.pn_offset - span.start;
    let sample_at = pn_at + SAMPLE_OFFSET;
    if sample_at + header_key.sample_len() > len {
        return Err(PacketError::TooShortForSample { len });
    }
    let (header, rest) = packet.split_at_mut(sample_at);
    let sample = &rest[..header_key.sample_len()];
    let (first, after_first) = header.split_first_mut().ok_or(PacketError::Truncated)?;
    // All four bytes that may be the packet number: the key unmasks only as many as the
    // unmasked first byte says (rustls reads the length after unmasking it).
    let pn_bytes = &mut after_first[pn_at - 1..];
    header_key.decrypt_in_place(sample, first, pn_bytes).map_err(|_| PacketError::HeaderProtection)?;
    let pn_len = usize::from(*first & PN_LEN_BITS) + 1;
    let truncated = pn_bytes[..pn_len].iter().fold(0u64, |pn, &b| (pn << 8) | u64::from(b));
    Ok(Unprotected {
        pn: decode_packet_number(truncated, pn_len, largest_received),
        pn_len,
        key_phase: span.kind == Kind::Short && *first & KEY_PHASE_BIT != 0,
    })
}

/// Decrypts packet `span` of `datagram` in place, after [`unprotect_header`], and returns where
/// its plaintext payload (the frames) lies in `datagram`.
///
/// A packet that fails authentication ([`PacketError::Decrypt`]) is to be dropped silently (RFC
/// 9001 §5.5; count it against the key's integrity limit). It cannot be tried again with another
/// key: its header is unprotected and its ciphertext is left unspecified (ring zeroes it). Its
/// last 16 bytes (the tag, where a stateless reset token would be, RFC 9000 §10.3.1) stay as
/// received, and nothing outside `span` is touched: the datagram's other packets are unharmed.
///
/// Only an authenticated packet is checked further: reserved header bits that are set
/// ([`PacketError::ReservedBits`], RFC 9000 §17.2) and an empty payload ([`PacketError::NoFrames`],
/// §12.4) are connection errors, see [`PacketError::code`].
pub(crate) fn decrypt(
    datagram: &mut [u8],
    span: &PacketSpan,
    unprotected: &Unprotected,
    packet_key: &dyn PacketKey,
) -> Result<Range<usize>, PacketError> {
    let packet = datagram.get_mut(span.start..span.end).ok_or(PacketError::Truncated)?;
    let header_len = span.pn_offset - span.start + unprotected.pn_len;
    if header_len + packet_key.tag_len() > packet.len() {
        return Err(PacketError::TooShortForSample { len: packet.len() });
    }
    let (header, payload) = packet.split_at_mut(header_len);
    let plain_len =
        packet_key.decrypt_in_place(unprotected.pn, header, payload).map_err(|_| PacketError::Decrypt)?.len();
    let reserved = if header[0] & LONG_FORM != 0 { LONG_RESERVED_BITS } else { SHORT_RESERVED_BITS };
    if header[0] & reserved != 0 {
        return Err(PacketError::ReservedBits);
    }
    if plain_len == 0 {
        return Err(PacketError::NoFrames);
    }
    let start = span.start + header_len;
    Ok(start..start + plain_len)
}

/// The packet number of a received packet from its `pn_len`-byte truncation and the largest
/// packet number received so far in its space (RFC 9000 Appendix A.3): the one nearest to the
/// next expected.
pub(crate) fn decode_packet_number(truncated: u64, pn_len: usize, largest: Option<u64>) -> u64 {
    let expected = largest.map_or(0, |largest| largest + 1);
    let window = 1u64 << (8 * pn_len);
    let half_window = window / 2;
    let candidate = (expected & !(window - 1)) | truncated;
    if expected.checked_sub(half_window).is_some_and(|low| candidate <= low) && candidate < (1 << 62) - window {
        candidate + window
    } else if candidate > expected + half_window && candidate >= window {
        candidate - window
    } else {
        candidate
    }
}

/// A packet number to send and how many bytes of it go on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PacketNumber {
    pub full: u64,
    /// 1 to 4.
    pub len: usize,
}

impl PacketNumber {
    /// `full`, encoded in as few bytes as let the peer decode it while packets from the largest
    /// it acknowledged on (`largest_acked`, in the same space) may still be in flight: twice the
    /// unacknowledged range must fit (RFC 9000 §17.1, Appendix A.2).
    pub(crate) fn new(full: u64, largest_acked: Option<u64>) -> Self {
        let unacked = match largest_acked {
            Some(acked) => full.saturating_sub(acked).max(1),
            None => full + 1,
        };
        // The RFC's log2(unacked) + 1 bits: `len` bytes fit when unacked <= 2^(8 * len - 1).
        let len = (1..4).find(|&len| unacked <= 1 << (8 * len - 1)).unwrap_or(4);
        PacketNumber { full, len }
    }

    fn truncated(self) -> [u8; 4] {
        (self.full as u32).to_be_bytes()
    }
}

/// A packet [`begin`] started in an output buffer, to be given to [`finish`].
#[must_use = "a begun packet must be finished, or the buffer truncated to its start"]
#[derive(Debug)]
pub(crate) struct Builder {
    start: usize,
    /// Where the 2-byte Length placeholder is; `None` for short headers.
    length_at: Option<usize>,
    pn_offset: usize,
    pn: PacketNumber,
}

impl Builder {
    /// Where the frames start in the output buffer.
    pub(crate) fn payload_start(&self) -> usize {
        self.pn_offset + self.pn.len
    }

    /// How many more frame bytes fit so that the sealed packet (with its tag) takes at most
    /// `max_packet_len` bytes, given `out` as it is now. [`finish`] pads packet number and
    /// frames to at least 4 bytes (for the header-protection sample), so it stays within this
    /// as long as the room right after `begin` was at least 3.
    pub(crate) fn room(&self, out: &[u8], max_packet_len: usize) -> usize {
        let limit = match self.length_at {
            Some(_) => max_packet_len.min(self.pn_offset - self.start + MAX_LENGTH),
            None => max_packet_len,
        };
        limit.saturating_sub(out.len() - self.start + TAG_LEN)
    }
}

/// Starts a packet at the end of `out`: its header up to and including the packet number. A
/// long header's Length is a 2-byte placeholder until [`finish`]. `scid` and `token` are for long
/// headers and Initials only; `key_phase` for short headers only. Connection IDs are at most 20
/// bytes.
pub(crate) fn begin(
    out: &mut Vec<u8>,
    space: Space,
    dcid: &[u8],
    scid: &[u8],
    token: &[u8],
    pn: PacketNumber,
    key_phase: bool,
) -> Builder {
    debug_assert!(dcid.len() <= MAX_CID_LEN && scid.len() <= MAX_CID_LEN);
    debug_assert!((1..=4).contains(&pn.len));
    let start = out.len();
    let pn_len_bits = (pn.len - 1) as u8;
    let long_type = match space {
        Space::Initial => Some(0x00),
        Space::Handshake => Some(0x20),
        Space::Data => None,
    };
    let length_at = match long_type {
        Some(long_type) => {
            out.push(LONG_FORM | FIXED_BIT | long_type | pn_len_bits);
            out.extend_from_slice(&VERSION_1.to_be_bytes());
            out.push(dcid.len() as u8);
            out.extend_from_slice(dcid);
            out.push(scid.len() as u8);
            out.extend_from_slice(scid);
            if space == Space::Initial {
                varint::encode(token.len() as u64, out);
                out.extend_from_slice(token);
            }
            let at = out.len();
            out.extend_from_slice(&[0x40, 0x00]);
            Some(at)
        }
        None => {
            let phase = if key_phase { KEY_PHASE_BIT } else { 0 };
            out.push(FIXED_BIT | phase | pn_len_bits);
            out.extend_from_slice(dcid);
            None
        }
    };
    let pn_offset = out.len();
    out.extend_from_slice(&pn.truncated()[4 - pn.len..]);
    Builder { start, length_at, pn_offset, pn }
}

/// Seals the packet `builder` started, which runs to the end of `out`, and returns its length.
///
/// Pads it with PADDING frames (zero bytes) so that the header-protection sample exists
/// (RFC 9001 §5.4.2) and, with `pad_to`, until the whole packet takes that many bytes (the
/// client's Initial datagrams must reach 1200, RFC 9000 §14.1); fills in the Length; encrypts the
/// payload in place and appends the tag; applies header protection. On an error (which the
/// AEADs of QUIC v1 never give for packets of a datagram's size) the packet is removed from
/// `out`.
pub(crate) fn finish(
    out: &mut Vec<u8>,
    builder: Builder,
    header_key: &dyn HeaderProtectionKey,
    packet_key: &dyn PacketKey,
    pad_to: Option<usize>,
) -> Result<usize, PacketError> {
    let result = seal(out, &builder, header_key, packet_key, pad_to);
    if result.is_err() {
        out.truncate(builder.start);
    }
    result
}

fn seal(
    out: &mut Vec<u8>,
    builder: &Builder,
    header_key: &dyn HeaderProtectionKey,
    packet_key: &dyn PacketKey,
    pad_to: Option<usize>,
) -> Result<usize, PacketError> {
    let tag_len = packet_key.tag_len();
    let sample_len = header_key.sample_len();
    let payload_start = builder.payload_start();
    // The sample starts 4 bytes into the packet number and must lie inside the packet, whose
    // frames must also not be empty (RFC 9000 §12.4).
    let min_plain = (SAMPLE_OFFSET + sample_len).saturating_sub(builder.pn.len + tag_len).max(1);
    let mut plain_end = out.len().max(payload_start + min_plain);
    if let Some(pad_to) = pad_to {
        plain_end = plain_end.max((builder.start + pad_to).saturating_sub(tag_len));
    }
    out.resize(plain_end, 0);
    if let Some(at) = builder.length_at {
        let length = plain_end + tag_len - builder.pn_offset;
        if length > MAX_LENGTH {
            return Err(PacketError::Encrypt);
        }
        out[at..at + 2].copy_from_slice(&(0x4000 | length as u16).to_be_bytes());
    }
    let (header, payload) = out[builder.start..].split_at_mut(payload_start - builder.start);
    let tag = packet_key.encrypt_in_place(builder.pn.full, header, payload).map_err(|_| PacketError::Encrypt)?;
    out.extend_from_slice(tag.as_ref());

    let pn_at = builder.pn_offset - builder.start;
    let (header, rest) = out[builder.start..].split_at_mut(pn_at + SAMPLE_OFFSET);
    let sample = rest.get(..sample_len).ok_or(PacketError::Encrypt)?;
    let (first, after_first) = header.split_first_mut().ok_or(PacketError::Encrypt)?;
    let pn_bytes = &mut after_first[pn_at - 1..pn_at - 1 + builder.pn.len];
    header_key.encrypt_in_place(sample, first, pn_bytes).map_err(|_| PacketError::Encrypt)?;
    Ok(out.len() - builder.start)
}

/// The Initial keys of a connection whose first Initial went to `client_dcid` (RFC 9001 §5.2),
/// from the client's side: `local` seals, `remote` opens.
pub(crate) fn initial_keys(client_dcid: &[u8]) -> Keys {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("ring's TLS13_AES_128_GCM_SHA256 is a TLS 1.3 suite that supports QUIC");
    suite.keys(client_dcid, rustls::Side::Client, Version::V1)
}
