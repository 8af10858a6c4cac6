//! QUIC v1 frames (RFC 9000 §12.4 and §19): a parser that walks a decrypted packet payload and
//! yields frames borrowing from it, and encoders for the frames a client sends.
//!
//! Sans-I/O and allocation-free, because the parser runs on every packet a load generator
//! receives. It checks everything one frame alone can show to be wrong (truncation, unknown
//! types, ACK ranges below packet 0, connection ID lengths, stream offsets past 2^62 - 1, stream
//! limits past 2^60); rules that need connection state (stream direction, flow control, which
//! frames a packet type may carry) belong to the connection.

use crate::quic::varint;

/// The transport error code for every [`FrameError`] (RFC 9000 §20.1).
pub(crate) const FRAME_ENCODING_ERROR: u64 = 0x07;

/// The largest stream count MAX_STREAMS and STREAMS_BLOCKED may carry (RFC 9000 §19.11): more
/// streams than that would need stream ids past 2^62 - 1.
const MAX_STREAM_COUNT: u64 = 1 << 60;

/// The longest connection ID QUIC v1 allows (RFC 9000 §17.2).
const MAX_CID_LEN: usize = 20;

/// Frame type codes (RFC 9000 §19 and §12.4).
mod kind {
    pub(super) const PADDING: u64 = 0x00;
    pub(super) const PING: u64 = 0x01;
    pub(super) const ACK: u64 = 0x02;
    pub(super) const ACK_ECN: u64 = 0x03;
    pub(super) const RESET_STREAM: u64 = 0x04;
    pub(super) const STOP_SENDING: u64 = 0x05;
    pub(super) const CRYPTO: u64 = 0x06;
    pub(super) const NEW_TOKEN: u64 = 0x07;
    /// STREAM is 0x08 to 0x0f: the low three bits are flags.
    pub(super) const STREAM: u64 = 0x08;
    pub(super) const STREAM_LAST: u64 = 0x0f;
    pub(super) const STREAM_FIN: u64 = 0x01;
    pub(super) const STREAM_LEN: u64 = 0x02;
    pub(super) const STREAM_OFF: u64 = 0x04;
    pub(super) const MAX_DATA: u64 = 0x10;
    pub(super) const MAX_STREAM_DATA: u64 = 0x11;
    pub(super) const MAX_STREAMS_BIDI: u64 = 0x12;
    pub(super) const MAX_STREAMS_UNI: u64 = 0x13;
    pub(super) const DATA_BLOCKED: u64 = 0x14;
    pub(super) const STREAM_DATA_BLOCKED: u64 = 0x15;
    pub(super) const STREAMS_BLOCKED_BIDI: u64 = 0x16;
    pub(super) const STREAMS_BLOCKED_UNI: u64 = 0x17;
    pub(super) const NEW_CONNECTION_ID: u64 = 0x18;
    pub(super) const RETIRE_CONNECTION_ID: u64 = 0x19;
    pub(super) const PATH_CHALLENGE: u64 = 0x1a;
    pub(super) const PATH_RESPONSE: u64 = 0x1b;
    pub(super) const CONNECTION_CLOSE: u64 = 0x1c;
    pub(super) const CONNECTION_CLOSE_APP: u64 = 0x1d;
    pub(super) const HANDSHAKE_DONE: u64 = 0x1e;
}

/// One frame, borrowing from the decrypted packet payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A run of PADDING bytes, however long.
    Padding,
    Ping,
    /// ACK and ACK with ECN counts; the counts are read and dropped.
    Ack(Ack<'a>),
    ResetStream {
        id: u64,
        code: u64,
        final_size: u64,
    },
    StopSending {
        id: u64,
        code: u64,
    },
    Crypto {
        offset: u64,
        data: &'a [u8],
    },
    /// Never empty.
    NewToken {
        token: &'a [u8],
    },
    Stream {
        id: u64,
        offset: u64,
        data: &'a [u8],
        fin: bool,
    },
    MaxData(u64),
    MaxStreamData {
        id: u64,
        max: u64,
    },
    /// `max` is at most 2^60.
    MaxStreams {
        bidi: bool,
        max: u64,
    },
    DataBlocked(u64),
    StreamDataBlocked {
        id: u64,
        limit: u64,
    },
    /// `limit` is at most 2^60.
    StreamsBlocked {
        bidi: bool,
        limit: u64,
    },
    /// `cid` is 1 to 20 bytes and `retire_prior_to <= seq`.
    NewConnectionId {
        seq: u64,
        retire_prior_to: u64,
        cid: &'a [u8],
        reset_token: [u8; 16],
    },
    RetireConnectionId {
        seq: u64,
    },
    PathChallenge([u8; 8]),
    PathResponse([u8; 8]),
    /// 0x1c (transport: `frame_type` is `Some`) or 0x1d (`application`: `frame_type` is `None`).
    ConnectionClose {
        application: bool,
        code: u64,
        frame_type: Option<u64>,
        reason: &'a [u8],
    },
    HandshakeDone,
}

/// An ACK frame, its ranges validated when parsed: [`Ack::ranges`] yields packet-number ranges
/// as `(smallest, largest)` inclusive pairs, largest range first.
///
/// Equality compares the encoding: the same ranges written with longer varints differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ack<'a> {
    /// The largest packet number acknowledged.
    pub(crate) largest: u64,
    /// The ACK Delay field as sent, not yet scaled by the peer's ack_delay_exponent.
    pub(crate) delay: u64,
    first_range: u64,
    /// The (gap, length) varint pairs after the first range, `count` of them.
    ranges: &'a [u8],
    count: u64,
}

impl<'a> Ack<'a> {
    /// The acknowledged ranges, largest first.
    pub(crate) fn ranges(&self) -> AckRanges<'a> {
        AckRanges {
            // The parser checked first_range <= largest.
            first: Some((self.largest - self.first_range, self.largest)),
            smallest: self.largest - self.first_range,
            rest: self.ranges,
            remaining: self.count,
        }
    }
}

/// The ranges of an [`Ack`]: inclusive `(smallest, largest)` packet-number pairs, descending.
#[derive(Debug, Clone)]
pub(crate) struct AckRanges<'a> {
    first: Option<(u64, u64)>,
    /// The smallest packet number of the range yielded last.
    smallest: u64,
    rest: &'a [u8],
    remaining: u64,
}

impl Iterator for AckRanges<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        if self.remaining == 0 {
            return None;
        }
        // The parser validated these bytes; the `?`s only keep a broken invariant from panicking.
        let (gap, n) = varint::decode(self.rest)?;
        let (len, m) = varint::decode(self.rest.get(n..)?)?;
        self.rest = self.rest.get(n + m..)?;
        let largest = self.smallest.checked_sub(gap + 2)?;
        let smallest = largest.checked_sub(len)?;
        self.smallest = smallest;
        self.remaining -= 1;
        Some((smallest, largest))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX).saturating_add(usize::from(self.first.is_some()));
        (n, Some(n))
    }
}

/// Exact because the parser checked that all `count` ranges are there and valid.
impl ExactSizeIterator for AckRanges<'_> {}

/// Why a payload's frames cannot be read. Every one closes the connection with
/// FRAME_ENCODING_ERROR ([`FrameError::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("a frame runs past the end of its packet")]
    Truncated,
    /// RFC 9000 §12.4: a frame type we do not know, including extensions we never negotiate
    /// (DATAGRAM).
    #[error("unknown frame type {0:#x}")]
    UnknownType(u64),
    /// The frame's name, e.g. "ACK".
    #[error("malformed {0} frame")]
    Malformed(&'static str),
}

impl FrameError {
    /// The transport error code to close the connection with.
    pub(crate) fn code(&self) -> u64 {
        FRAME_ENCODING_ERROR
    }
}

/// The frames of one packet payload, in order. After an error it yields nothing more: a frame's
/// end cannot be known past a frame that failed.
#[derive(Debug, Clone)]
pub(crate) struct Frames<'a> {
    rest: &'a [u8],
}

impl<'a> Frames<'a> {
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        Frames { rest: payload }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, FrameError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let mut r = Reader(self.rest);
        let frame = parse(&mut r);
        self.rest = if frame.is_ok() { r.0 } else { &[] };
        Some(frame)
    }
}

impl std::iter::FusedIterator for Frames<'_> {}

/// A cursor over the unread bytes of a payload.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    #[inline]
    fn varint(&mut self) -> Result<u64, FrameError> {
        let (value, len) = varint::decode(self.0).ok_or(FrameError::Truncated)?;
        self.0 = self.0.get(len..).ok_or(FrameError::Truncated)?;
        Ok(value)
    }

    #[inline]
    fn bytes(&mut self, len: u64) -> Result<&'a [u8], FrameError> {
        let len = usize::try_from(len).map_err(|_| FrameError::Truncated)?;
        let (head, tail) = self.0.split_at_checked(len).ok_or(FrameError::Truncated)?;
        self.0 = tail;
        Ok(head)
    }

    /// A varint length, then that many bytes.
    #[inline]
    fn counted(&mut self) -> Result<&'a [u8], FrameError> {
        let len = self.varint()?;
        self.bytes(len)
    }

    #[inline]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], FrameError> {
        let (head, tail) = self.0.split_first_chunk::<N>().ok_or(FrameError::Truncated)?;
        self.0 = tail;
        Ok(*head)
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

fn parse<'a>(r: &mut Reader<'a>) -> Result<Frame<'a>, FrameError> {
    // Every frame type we know fits one byte; longer encodings of them are read all the same.
    let ty = match r.0 {
        [b, rest @ ..] if *b < 0x40 => {
            r.0 = rest;
            u64::from(*b)
        }
        _ => r.varint()?,
    };
    Ok(match ty {
        kind::STREAM..=kind::STREAM_LAST => {
            let id = r.varint()?;
            let offset = if ty & kind::STREAM_OFF != 0 { r.varint()? } else { 0 };
            let data = if ty & kind::STREAM_LEN != 0 { r.counted()? } else { r.rest() };
            // RFC 9000 §19.8: offsets past 2^62 - 1 are a FRAME_ENCODING_ERROR. No overflow: both
            // terms are below 2^62.
            if offset + data.len() as u64 > varint::MAX {
                return Err(FrameError::Malformed("STREAM"));
            }
            Frame::Stream { id, offset, data, fin: ty & kind::STREAM_FIN != 0 }
        }
        kind::PADDING => {
            let run = r.0.iter().position(|&b| b != 0).unwrap_or(r.0.len());
            r.0 = &r.0[run..];
            Frame::Padding
        }
        kind::ACK | kind::ACK_ECN => Frame::Ack(parse_ack(r, ty == kind::ACK_ECN)?),
        kind::PING => Frame::Ping,
        kind::CRYPTO => {
            let offset = r.varint()?;
            let data = r.counted()?;
            // RFC 9000 §19.6: the same 2^62 - 1 limit as STREAM.
            if offset + data.len() as u64 > varint::MAX {
                return Err(FrameError::Malformed("CRYPTO"));
            }
            Frame::Crypto { offset, data }
        }
        kind::MAX_DATA => Frame::MaxData(r.varint()?),
        kind::MAX_STREAM_DATA => Frame::MaxStreamData { id: r.varint()?, max: r.varint()? },
        kind::MAX_STREAMS_BIDI | kind::MAX_STREAMS_UNI => {
            let max = r.varint()?;
            if max > MAX_STREAM_COUNT {
                return Err(FrameError::Malformed("MAX_STREAMS"));
            }
            Frame::MaxStreams { bidi: ty == kind::MAX_STREAMS_BIDI, max }
        }
        kind::RESET_STREAM => Frame::ResetStream { id: r.varint()?, code: r.varint()?, final_size: r.varint()? },
        kind::STOP_SENDING => Frame::StopSending { id: r.varint()?, code: r.varint()? },
        kind::NEW_TOKEN => {
            let token = r.counted()?;
            // RFC 9000 §19.7: an empty token is a FRAME_ENCODING_ERROR.
            if token.is_empty() {
                return Err(FrameError::Malformed("NEW_TOKEN"));
            }
            Frame::NewToken { token }
        }
        kind::DATA_BLOCKED => Frame::DataBlocked(r.varint()?),
        kind::STREAM_DATA_BLOCKED => Frame::StreamDataBlocked { id: r.varint()?, limit: r.varint()? },
        kind::STREAMS_BLOCKED_BIDI | kind::STREAMS_BLOCKED_UNI => {
            let limit = r.varint()?;
            if limit > MAX_STREAM_COUNT {
                return Err(FrameError::Malformed("STREAMS_BLOCKED"));
            }
            Frame::StreamsBlocked { bidi: ty == kind::STREAMS_BLOCKED_BIDI, limit }
        }
        kind::NEW_CONNECTION_ID => {
            let seq = r.varint()?;
            let retire_prior_to = r.varint()?;
            // The length is one byte, not a varint.
            let [len] = r.array::<1>()?;
            let cid = r.bytes(u64::from(len))?;
            let reset_token = r.array::<16>()?;
            if cid.is_empty() || cid.len() > MAX_CID_LEN || retire_prior_to > seq {
                return Err(FrameError::Malformed("NEW_CONNECTION_ID"));
            }
            Frame::NewConnectionId { seq, retire_prior_to, cid, reset_token }
        }
        kind::RETIRE_CONNECTION_ID => Frame::RetireConnectionId { seq: r.varint()? },
        kind::PATH_CHALLENGE => Frame::PathChallenge(r.array()?),
        kind::PATH_RESPONSE => Frame::PathResponse(r.array()?),
        kind::CONNECTION_CLOSE | kind::CONNECTION_CLOSE_APP => {
            let application = ty == kind::CONNECTION_CLOSE_APP;
            let code = r.varint()?;
            let frame_type = if application { None } else { Some(r.varint()?) };
            let reason = r.counted()?;
            Frame::ConnectionClose { application, code, frame_type, reason }
        }
        kind::HANDSHAKE_DONE => Frame::HandshakeDone,
        _ => return Err(FrameError::UnknownType(ty)),
    })
}

/// The rest of an ACK frame after its type (RFC 9000 §19.3), checking that no range reaches
/// below packet 0 so that [`AckRanges`] need not.
fn parse_ack<'a>(r: &mut Reader<'a>, ecn: bool) -> Result<Ack<'a>, FrameError> {
    const MALFORMED: FrameError = FrameError::Malformed("ACK");
    let largest = r.varint()?;
    let delay = r.varint()?;
    let count = r.varint()?;
    let first_range = r.varint()?;
    let mut smallest = largest.checked_sub(first_range).ok_or(MALFORMED)?;
    let start = r.0;
    // A huge count ends in Truncated: every pair takes at least two bytes.
    for _ in 0..count {
        let gap = r.varint()?;
        let len = r.varint()?;
        // gap + 2 cannot overflow: gap is below 2^62.
        let largest = smallest.checked_sub(gap + 2).ok_or(MALFORMED)?;
        smallest = largest.checked_sub(len).ok_or(MALFORMED)?;
    }
    let ranges = &start[..start.len() - r.0.len()];
    if ecn {
        // ECT(0), ECT(1) and ECN-CE counts: we do not use ECN.
        r.varint()?;
        r.varint()?;
        r.varint()?;
    }
    Ok(Ack { largest, delay, first_range, ranges, count })
}

/// Whether a packet carrying `frame` must be acknowledged (RFC 9000 §13.2.1).
pub(crate) fn is_ack_eliciting(frame: &Frame) -> bool {
    !matches!(frame, Frame::Padding | Frame::Ack(_) | Frame::ConnectionClose { .. })
}

/// Appends `n` PADDING bytes.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn encode_padding(out: &mut Vec<u8>, n: usize) {
    out.resize(out.len() + n, 0);
}

pub(crate) fn encode_ping(out: &mut Vec<u8>) {
    out.push(kind::PING as u8);
}

/// Appends an ACK frame (without ECN counts). `ranges`: inclusive `(smallest, largest)`
/// packet-number ranges, largest first, disjoint and not adjacent; at least one (with none,
/// nothing is written). `delay` is already scaled by our ack-delay exponent.
pub(crate) fn encode_ack(out: &mut Vec<u8>, ranges: impl IntoIterator<Item = (u64, u64)>, delay: u64) {
    let mut ranges = ranges.into_iter();
    let first = ranges.next();
    debug_assert!(first.is_some(), "an ACK frame needs a range");
    let Some((mut smallest, largest)) = first else { return };
    debug_assert!(smallest <= largest);
    out.push(kind::ACK as u8);
    varint::encode(largest, out);
    varint::encode(delay, out);
    // The range count comes before the ranges but is known only after them: write the ranges,
    // then the count, and rotate the count into place (a few bytes, no allocation).
    let count_at = out.len();
    varint::encode(largest - smallest, out);
    let mut count = 0u64;
    for (next_smallest, next_largest) in ranges {
        debug_assert!(next_smallest <= next_largest && next_largest + 2 <= smallest, "ranges must descend, apart");
        varint::encode(smallest - next_largest - 2, out);
        varint::encode(next_largest - next_smallest, out);
        smallest = next_smallest;
        count += 1;
    }
    let ranges_end = out.len();
    varint::encode(count, out);
    let count_len = out.len() - ranges_end;
    out[count_at..].rotate_right(count_len);
}

/// Appends a STREAM frame's header: the type (OFF bit when `offset > 0`, LEN bit always, FIN
/// bit if `fin`), id, offset and length. The caller appends the `len` data bytes.
pub(crate) fn encode_stream_header(out: &mut Vec<u8>, id: u64, offset: u64, len: usize, fin: bool) {
    let mut ty = kind::STREAM | kind::STREAM_LEN;
    if offset > 0 {
        ty |= kind::STREAM_OFF;
    }
    if fin {
        ty |= kind::STREAM_FIN;
    }
    out.push(ty as u8);
    varint::encode(id, out);
    if offset > 0 {
        varint::encode(offset, out);
    }
    varint::encode(len as u64, out);
}

/// How many bytes [`encode_stream_header`] writes.
pub(crate) fn stream_header_len(id: u64, offset: u64, len: usize) -> usize {
    let offset_len = if offset > 0 { varint::encoded_len(offset) } else { 0 };
    1 + varint::encoded_len(id) + offset_len + varint::encoded_len(len as u64)
}

/// Appends a CRYPTO frame's header; the caller appends the `len` data bytes.
pub(crate) fn encode_crypto_header(out: &mut Vec<u8>, offset: u64, len: usize) {
    out.push(kind::CRYPTO as u8);
    varint::encode(offset, out);
    varint::encode(len as u64, out);
}

/// How many bytes [`encode_crypto_header`] writes.
pub(crate) fn crypto_header_len(offset: u64, len: usize) -> usize {
    1 + varint::encoded_len(offset) + varint::encoded_len(len as u64)
}

pub(crate) fn encode_reset_stream(out: &mut Vec<u8>, id: u64, code: u64, final_size: u64) {
    out.push(kind::RESET_STREAM as u8);
    varint::encode(id, out);
    varint::encode(code, out);
    varint::encode(final_size, out);
}

pub(crate) fn encode_stop_sending(out: &mut Vec<u8>, id: u64, code: u64) {
    out.push(kind::STOP_SENDING as u8);
    varint::encode(id, out);
    varint::encode(code, out);
}

#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn encode_max_data(out: &mut Vec<u8>, max: u64) {
    out.push(kind::MAX_DATA as u8);
    varint::encode(max, out);
}

pub(crate) fn encode_max_stream_data(out: &mut Vec<u8>, id: u64, max: u64) {
    out.push(kind::MAX_STREAM_DATA as u8);
    varint::encode(id, out);
    varint::encode(max, out);
}

#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn encode_max_streams(out: &mut Vec<u8>, bidi: bool, max: u64) {
    debug_assert!(max <= MAX_STREAM_COUNT);
    out.push(if bidi { kind::MAX_STREAMS_BIDI } else { kind::MAX_STREAMS_UNI } as u8);
    varint::encode(max, out);
}

pub(crate) fn encode_retire_connection_id(out: &mut Vec<u8>, seq: u64) {
    out.push(kind::RETIRE_CONNECTION_ID as u8);
    varint::encode(seq, out);
}

/// Appends a PATH_RESPONSE echoing a PATH_CHALLENGE's `data`.
pub(crate) fn encode_path_response(out: &mut Vec<u8>, data: [u8; 8]) {
    out.push(kind::PATH_RESPONSE as u8);
    out.extend_from_slice(&data);
}

/// Appends CONNECTION_CLOSE: the application variant (0x1d) or the transport one (0x1c), whose
/// Frame Type field is written as 0 (unknown): a client closing does not blame one frame.
pub(crate) fn encode_connection_close(out: &mut Vec<u8>, application: bool, code: u64, reason: &[u8]) {
    if application {
        out.push(kind::CONNECTION_CLOSE_APP as u8);
        varint::encode(code, out);
    } else {
        out.push(kind::CONNECTION_CLOSE as u8);
        varint::encode(code, out);
        varint::encode(0, out);
    }
    varint::encode(reason.len() as u64, out);
    out.extend_from_slice(reason);
}

#[cfg(test)]
mod tests;
