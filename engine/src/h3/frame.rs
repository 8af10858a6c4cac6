//! HTTP/3 framing (RFC 9114 §7): a streaming frame decoder for one stream's bytes, the SETTINGS
//! a client cares about, and encoders for what a client sends (its control stream, a request).
//!
//! A frame is a type and a length (both varints) and a payload. The decoder takes a stream's
//! bytes in whatever pieces QUIC hands them over and gives frames out as soon as they can be
//! read: DATA payloads as they arrive, without copying; HEADERS, SETTINGS and the one-varint
//! frames whole, borrowed from the input when they arrived in one piece and gathered into one
//! reused buffer only when they did not; unknown types skipped by their length. Which frame is
//! allowed on which stream is the business of the stream's reader (`response`, `uni`).

use bytes::BufMut;

use super::H3Error;
use crate::quic::varint;

/// Frame types (RFC 9114 §7.2).
pub(crate) mod kind {
    pub(crate) const DATA: u64 = 0x00;
    pub(crate) const HEADERS: u64 = 0x01;
    pub(crate) const CANCEL_PUSH: u64 = 0x03;
    pub(crate) const SETTINGS: u64 = 0x04;
    pub(crate) const PUSH_PROMISE: u64 = 0x05;
    pub(crate) const GOAWAY: u64 = 0x07;
    pub(crate) const MAX_PUSH_ID: u64 = 0x0d;

    /// HTTP/2's frame types that HTTP/3 reserves (§7.2.8: PRIORITY, PING, WINDOW_UPDATE,
    /// CONTINUATION): receiving one is a connection error wherever it comes.
    pub(crate) fn is_http2_reserved(kind: u64) -> bool {
        matches!(kind, 0x02 | 0x06 | 0x08 | 0x09)
    }
}

/// Settings identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5).
pub(crate) mod setting {
    pub(crate) const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
    pub(crate) const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
    pub(crate) const QPACK_BLOCKED_STREAMS: u64 = 0x07;

    /// HTTP/2's settings without an HTTP/3 meaning: receiving one is H3_SETTINGS_ERROR.
    pub(crate) fn is_http2_reserved(id: u64) -> bool {
        matches!(id, 0x00 | 0x02..=0x05)
    }
}

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub(crate) mod stream_type {
    pub(crate) const CONTROL: u64 = 0x00;
    pub(crate) const PUSH: u64 = 0x01;
    pub(crate) const QPACK_ENCODER: u64 = 0x02;
    pub(crate) const QPACK_DECODER: u64 = 0x03;
}

/// HEADERS frames larger than this are refused (H3_EXCESSIVE_LOAD on that stream) rather than
/// gathered: a response's field section is a few hundred bytes, and 1 MiB is already eight times
/// what nginx lets a whole response header grow to by default.
pub(crate) const MAX_HEADERS_LEN: usize = 1 << 20;
/// SETTINGS larger than this are a connection error: ours is 5 bytes, a server's a few dozen.
pub(crate) const MAX_SETTINGS_LEN: usize = 16 << 10;

/// The settings of a server's SETTINGS frame that a client reads. Unknown identifiers (and
/// reserved ones for greasing) are ignored, as §7.2.4 requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Settings {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY: our encoder never uses the dynamic table, whatever it is.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE: the largest request field section the server takes.
    pub max_field_section_size: Option<u64>,
    pub qpack_blocked_streams: u64,
}

impl Settings {
    /// Reads a SETTINGS payload: identifier and value pairs of varints. A pair cut short is
    /// H3_FRAME_ERROR; HTTP/2's identifiers, or one of ours twice, H3_SETTINGS_ERROR.
    pub(crate) fn parse(mut payload: &[u8]) -> Result<Settings, H3Error> {
        let malformed = H3Error::MalformedFrame { frame: "SETTINGS", len: payload.len() as u64 };
        let mut settings = Settings::default();
        // Duplicates are checked among the identifiers we read: that is O(1) per setting and all
        // a client relies on (§7.2.4 makes the check a MAY).
        let mut seen = 0u8;
        while !payload.is_empty() {
            let (id, n) = varint::decode(payload).ok_or(malformed)?;
            let (value, m) = varint::decode(&payload[n..]).ok_or(malformed)?;
            payload = &payload[n + m..];
            if setting::is_http2_reserved(id) {
                return Err(H3Error::ReservedSetting { id });
            }
            let bit = match id {
                setting::QPACK_MAX_TABLE_CAPACITY => {
                    settings.qpack_max_table_capacity = value;
                    1
                }
                setting::MAX_FIELD_SECTION_SIZE => {
                    settings.max_field_section_size = Some(value);
                    2
                }
                setting::QPACK_BLOCKED_STREAMS => {
                    settings.qpack_blocked_streams = value;
                    4
                }
                _ => 0,
            };
            if seen & bit != 0 {
                return Err(H3Error::DuplicateSetting { id });
            }
            seen |= bit;
        }
        Ok(settings)
    }
}

/// One frame, or a piece of one, as the decoder hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// Payload bytes of a DATA frame, as they arrive: a frame comes as one or more pieces, the
    /// first given as soon as its header is read (empty if none of its payload is there yet, so
    /// every DATA frame is seen, even an empty one).
    Data(&'a [u8]),
    /// A HEADERS frame's whole payload: one QPACK field section.
    Headers(&'a [u8]),
    Settings(Settings),
    GoAway(u64),
    CancelPush(u64),
    MaxPushId(u64),
    /// PUSH_PROMISE, reported at its header; its payload is skipped, since a client that allows
    /// no pushes refuses it whatever it promises.
    PushPromise,
    /// One of HTTP/2's types that HTTP/3 reserves, reported at its header and skipped.
    Http2Reserved(u64),
    /// Any other type (extensions, greasing): reported at its header, skipped by its length.
    Unknown(u64),
}

impl Frame<'_> {
    /// The frame's name, for errors.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Frame::Data(_) => "DATA",
            Frame::Headers(_) => "HEADERS",
            Frame::Settings(_) => "SETTINGS",
            Frame::GoAway(_) => "GOAWAY",
            Frame::CancelPush(_) => "CANCEL_PUSH",
            Frame::MaxPushId(_) => "MAX_PUSH_ID",
            Frame::PushPromise => "PUSH_PROMISE",
            Frame::Http2Reserved(_) => "a reserved HTTP/2",
            Frame::Unknown(_) => "an unknown",
        }
    }
}

/// The longest frame header: two 8-byte varints.
const MAX_HEAD_LEN: usize = 16;

#[derive(Debug)]
enum State {
    /// Between frames, or inside a frame header that came in pieces (`bytes[..len]`).
    Head { bytes: [u8; MAX_HEAD_LEN], len: u8 },
    /// Inside a DATA frame's payload.
    Data { remaining: u64 },
    /// Inside the payload of a frame that is skipped.
    Skip { remaining: u64 },
    /// Gathering the payload of a frame that is handed out whole into `buf`, `len` bytes.
    Gather { kind: u64, len: usize },
}

const BETWEEN_FRAMES: State = State::Head { bytes: [0; MAX_HEAD_LEN], len: 0 };

/// The frame decoder of one stream. Feed it with [`FrameDecoder::next`] until it says it needs
/// more; at the stream's end, [`FrameDecoder::finish`] says whether it ended between frames.
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    state: State,
    /// A whole-payload frame that arrived in pieces, gathered; reused for every such frame.
    buf: Vec<u8>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder { state: BETWEEN_FRAMES, buf: Vec::new() }
    }
}

impl FrameDecoder {
    /// The next frame (or piece of DATA) from `input`, consuming what it used; `Ok(None)` when
    /// `input` is used up and the decoder needs more. After an error the stream cannot be read
    /// further.
    pub(crate) fn next<'s, 'a: 's>(&'s mut self, input: &mut &'a [u8]) -> Result<Option<Frame<'s>>, H3Error> {
        loop {
            match &mut self.state {
                State::Head { bytes, len } => {
                    let Some((kind, length)) = read_head(bytes, len, input) else {
                        return Ok(None);
                    };
                    if let Some(frame) = self.start(kind, length, input)? {
                        return Ok(Some(frame));
                    }
                    // A gathered frame that is not complete yet: the loop sees `Gather`.
                }
                State::Data { remaining } => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let n = (*remaining).min(input.len() as u64) as usize;
                    *remaining -= n as u64;
                    if *remaining == 0 {
                        self.state = BETWEEN_FRAMES;
                    }
                    let (piece, rest) = input.split_at(n);
                    *input = rest;
                    return Ok(Some(Frame::Data(piece)));
                }
                State::Skip { remaining } => {
                    if input.is_empty() {
                        return Ok(None);
                    }
                    let n = (*remaining).min(input.len() as u64) as usize;
                    *remaining -= n as u64;
                    if *remaining == 0 {
                        self.state = BETWEEN_FRAMES;
                    }
                    *input = &input[n..];
                }
                State::Gather { kind, len } => {
                    let (kind, len) = (*kind, *len);
                    let n = (len - self.buf.len()).min(input.len());
                    self.buf.extend_from_slice(&input[..n]);
                    *input = &input[n..];
                    if self.buf.len() < len {
                        return Ok(None);
                    }
                    self.state = BETWEEN_FRAMES;
                    return whole(kind, &self.buf).map(Some);
                }
            }
        }
    }

    /// Begins a frame whose header was just read. Returns the frame (or its first piece) if it
    /// can be given out now.
    fn start<'a>(&mut self, kind: u64, length: u64, input: &mut &'a [u8]) -> Result<Option<Frame<'a>>, H3Error> {
        let max = match kind {
            kind::DATA => {
                let n = length.min(input.len() as u64) as usize;
                if length > n as u64 {
                    self.state = State::Data { remaining: length - n as u64 };
                }
                let (piece, rest) = input.split_at(n);
                *input = rest;
                return Ok(Some(Frame::Data(piece)));
            }
            kind::HEADERS => MAX_HEADERS_LEN,
            kind::SETTINGS => MAX_SETTINGS_LEN,
            kind::GOAWAY | kind::CANCEL_PUSH | kind::MAX_PUSH_ID => 8,
            _ => {
                if length > 0 {
                    self.state = State::Skip { remaining: length };
                }
                return Ok(Some(match kind {
                    kind::PUSH_PROMISE => Frame::PushPromise,
                    k if kind::is_http2_reserved(k) => Frame::Http2Reserved(k),
                    k => Frame::Unknown(k),
                }));
            }
        };
        if length > max as u64 {
            return Err(match kind {
                kind::HEADERS => H3Error::HeadersTooLarge { len: length, max },
                kind::SETTINGS => H3Error::FrameTooLarge { frame: "SETTINGS", len: length, max },
                _ => H3Error::MalformedFrame { frame: one_varint_name(kind), len: length },
            });
        }
        let len = length as usize;
        if input.len() >= len {
            let (payload, rest) = input.split_at(len);
            *input = rest;
            return whole(kind, payload).map(Some);
        }
        self.buf.clear();
        self.buf.extend_from_slice(input);
        *input = &[];
        self.state = State::Gather { kind, len };
        Ok(None)
    }

    /// At the stream's end: it must end between frames (§7.1: a truncated last frame is
    /// H3_FRAME_ERROR).
    pub(crate) fn finish(&self) -> Result<(), H3Error> {
        match self.state {
            State::Head { len: 0, .. } => Ok(()),
            _ => Err(H3Error::TruncatedFrame),
        }
    }
}

/// Reads a frame header, from `input` directly when it is there whole, else through `bytes`
/// (the part of it seen before). Consumes only the header's bytes.
fn read_head(bytes: &mut [u8; MAX_HEAD_LEN], len: &mut u8, input: &mut &[u8]) -> Option<(u64, u64)> {
    if *len == 0
        && let Some((kind, n)) = varint::decode(input)
        && let Some((length, m)) = varint::decode(&input[n..])
    {
        *input = &input[n + m..];
        return Some((kind, length));
    }
    let old = *len as usize;
    let take = (MAX_HEAD_LEN - old).min(input.len());
    bytes[old..old + take].copy_from_slice(&input[..take]);
    let seen = &bytes[..old + take];
    let parsed =
        varint::decode(seen).and_then(|(kind, n)| varint::decode(&seen[n..]).map(|(len, m)| (kind, len, n + m)));
    match parsed {
        Some((kind, length, used)) => {
            *input = &input[used - old..];
            *len = 0;
            Some((kind, length))
        }
        None => {
            *input = &input[take..];
            *len = (old + take) as u8;
            None
        }
    }
}

/// A frame whose payload is whole.
fn whole(kind: u64, payload: &[u8]) -> Result<Frame<'_>, H3Error> {
    Ok(match kind {
        kind::HEADERS => Frame::Headers(payload),
        kind::SETTINGS => Frame::Settings(Settings::parse(payload)?),
        _ => {
            let malformed = H3Error::MalformedFrame { frame: one_varint_name(kind), len: payload.len() as u64 };
            let value = match varint::decode(payload) {
                Some((value, n)) if n == payload.len() => value,
                _ => return Err(malformed),
            };
            match kind {
                kind::GOAWAY => Frame::GoAway(value),
                kind::CANCEL_PUSH => Frame::CancelPush(value),
                _ => Frame::MaxPushId(value),
            }
        }
    })
}

fn one_varint_name(kind: u64) -> &'static str {
    match kind {
        kind::GOAWAY => "GOAWAY",
        kind::CANCEL_PUSH => "CANCEL_PUSH",
        _ => "MAX_PUSH_ID",
    }
}

/// Appends a frame header.
pub(crate) fn encode_head(kind: u64, len: u64, out: &mut impl BufMut) {
    varint::encode(kind, out);
    varint::encode(len, out);
}

/// Appends our control stream's opening: its stream type and our SETTINGS, which say the
/// server's encoder may not use a dynamic table (capacity 0, no blocked streams). Both are the
/// defaults, sent anyway so that a server's log shows what we asked for.
pub(crate) fn encode_control_stream(out: &mut Vec<u8>) {
    varint::encode(stream_type::CONTROL, out);
    let settings = [(setting::QPACK_MAX_TABLE_CAPACITY, 0), (setting::QPACK_BLOCKED_STREAMS, 0)];
    let len = settings.iter().map(|&(id, v)| varint::encoded_len(id) + varint::encoded_len(v)).sum::<usize>();
    encode_head(kind::SETTINGS, len as u64, out);
    for (id, value) in settings {
        varint::encode(id, out);
        varint::encode(value, out);
    }
}

/// Appends a request stream's frames before its body: HEADERS with `field_section`, then, when
/// there is a body, the header of the one DATA frame that carries it (the body's bytes follow
/// it on the stream).
pub(crate) fn encode_request_head(field_section: &[u8], body_len: usize, out: &mut impl BufMut) {
    encode_head(kind::HEADERS, field_section.len() as u64, out);
    out.put_slice(field_section);
    if body_len > 0 {
        encode_head(kind::DATA, body_len as u64, out);
    }
}

#[cfg(test)]
pub(crate) mod tests;
