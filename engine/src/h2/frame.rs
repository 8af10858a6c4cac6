//! HTTP/2 framing (RFC 9113 §4 and §6): the 9-byte frame header, a decoder that splits a byte
//! string into frames whose payloads borrow from it, and encoders for what a client sends.
//!
//! Sans-I/O and allocation-free: `decode` looks at whatever bytes the caller has buffered and
//! says how many it used; the encoders append to a caller-owned buffer so that every stream of a
//! connection shares one write. The decoder enforces everything that can be checked on one frame
//! alone (our SETTINGS_MAX_FRAME_SIZE, padding, fixed payload lengths, which frames belong on
//! stream 0); rules that need connection state live in `conn`.

/// What a client sends first on every HTTP/2 connection (RFC 9113 §3.4), before its SETTINGS.
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The length of every frame header.
pub(crate) const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE until a peer says otherwise, and the smallest value it may say.
pub(crate) const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The largest SETTINGS_MAX_FRAME_SIZE a peer may announce.
pub(crate) const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;
/// The largest flow-control window (RFC 9113 §6.9.1).
pub(crate) const MAX_WINDOW: u32 = (1 << 31) - 1;
/// Every flow-control window starts here until SETTINGS or WINDOW_UPDATE change it.
pub(crate) const DEFAULT_WINDOW: u32 = 65_535;

/// Frame type codes (RFC 9113 §6).
pub(crate) mod kind {
    pub(crate) const DATA: u8 = 0x0;
    pub(crate) const HEADERS: u8 = 0x1;
    pub(crate) const PRIORITY: u8 = 0x2;
    pub(crate) const RST_STREAM: u8 = 0x3;
    pub(crate) const SETTINGS: u8 = 0x4;
    pub(crate) const PUSH_PROMISE: u8 = 0x5;
    pub(crate) const PING: u8 = 0x6;
    pub(crate) const GOAWAY: u8 = 0x7;
    pub(crate) const WINDOW_UPDATE: u8 = 0x8;
    pub(crate) const CONTINUATION: u8 = 0x9;
}

/// Frame flags. END_STREAM and ACK share a bit; which one it is depends on the frame type.
pub(crate) mod flag {
    pub(crate) const END_STREAM: u8 = 0x1;
    pub(crate) const ACK: u8 = 0x1;
    pub(crate) const END_HEADERS: u8 = 0x4;
    pub(crate) const PADDED: u8 = 0x8;
    pub(crate) const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameter identifiers (RFC 9113 §6.5.2), all of them: tests and messages use those
/// the client never sends.
#[allow(dead_code)]
pub(crate) mod setting {
    pub(crate) const HEADER_TABLE_SIZE: u16 = 0x1;
    pub(crate) const ENABLE_PUSH: u16 = 0x2;
    pub(crate) const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub(crate) const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub(crate) const MAX_FRAME_SIZE: u16 = 0x5;
    pub(crate) const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// Error codes for RST_STREAM and GOAWAY (RFC 9113 §7), all of them (see `setting`).
#[allow(dead_code)]
pub(crate) mod code {
    pub(crate) const NO_ERROR: u32 = 0x0;
    pub(crate) const PROTOCOL_ERROR: u32 = 0x1;
    pub(crate) const INTERNAL_ERROR: u32 = 0x2;
    pub(crate) const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub(crate) const STREAM_CLOSED: u32 = 0x5;
    pub(crate) const FRAME_SIZE_ERROR: u32 = 0x6;
    pub(crate) const REFUSED_STREAM: u32 = 0x7;
    pub(crate) const CANCEL: u32 = 0x8;
    pub(crate) const COMPRESSION_ERROR: u32 = 0x9;
    pub(crate) const ENHANCE_YOUR_CALM: u32 = 0xb;

    /// The code's name as RFC 9113 §7 spells it, for error messages.
    pub(crate) fn name(code: u32) -> String {
        const NAMES: [&str; 14] = [
            "NO_ERROR",
            "PROTOCOL_ERROR",
            "INTERNAL_ERROR",
            "FLOW_CONTROL_ERROR",
            "SETTINGS_TIMEOUT",
            "STREAM_CLOSED",
            "FRAME_SIZE_ERROR",
            "REFUSED_STREAM",
            "CANCEL",
            "COMPRESSION_ERROR",
            "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY",
            "HTTP_1_1_REQUIRED",
        ];
        match NAMES.get(code as usize) {
            Some(name) => (*name).to_string(),
            None => format!("error code {code:#x}"),
        }
    }
}

/// A frame the peer got wrong on its own terms. Every one is a connection error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    #[error("frame of {len} bytes exceeds our SETTINGS_MAX_FRAME_SIZE of {max}")]
    TooLarge { len: u32, max: u32 },
    #[error("{kind} frame with an invalid payload length {len}")]
    BadLength { kind: &'static str, len: u32 },
    #[error("{kind} frame whose padding length {pad} does not fit its {len}-byte payload")]
    BadPadding { kind: &'static str, pad: u8, len: u32 },
    #[error("{kind} frame on stream 0")]
    StreamZero { kind: &'static str },
    #[error("{kind} frame on stream {stream}; it belongs on stream 0")]
    NotStreamZero { kind: &'static str, stream: u32 },
    #[error("WINDOW_UPDATE with an increment of 0")]
    ZeroIncrement,
}

/// A frame header (RFC 9113 §4.1). The reserved bit of the stream id is dropped on reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    pub(crate) fn parse(b: &[u8; HEADER_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub(crate) fn write(self, out: &mut Vec<u8>) {
        debug_assert!(self.len <= MAX_FRAME_SIZE_LIMIT);
        let len = self.len.to_be_bytes();
        out.extend_from_slice(&[len[1], len[2], len[3], self.kind, self.flags]);
        out.extend_from_slice(&(self.stream & MAX_WINDOW).to_be_bytes());
    }
}

/// A HEADERS or PRIORITY frame's priority fields, which we read only to step over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Priority {
    pub dependency: u32,
    pub exclusive: bool,
    pub weight: u8,
}

impl Priority {
    fn parse(b: &[u8]) -> Option<Priority> {
        let d = b.get(..5)?;
        let dep = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
        Some(Priority { dependency: dep & MAX_WINDOW, exclusive: dep & !MAX_WINDOW != 0, weight: d[4] })
    }
}

/// The parameters of a SETTINGS frame, still in their wire form (a multiple of 6 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SettingsParams<'a>(&'a [u8]);

impl<'a> SettingsParams<'a> {
    /// (identifier, value) pairs in the order sent; later ones override earlier ones.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u16, u32)> + 'a {
        self.0.chunks_exact(6).map(|c| (u16::from_be_bytes([c[0], c[1]]), u32::from_be_bytes([c[2], c[3], c[4], c[5]])))
    }
}

/// One decoded frame; payloads borrow from the bytes given to `decode`, padding stripped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// `flow_len` is the whole payload length including padding: what flow control counts.
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        flow_len: u32,
    },
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    Settings {
        ack: bool,
        params: SettingsParams<'a>,
    },
    PushPromise {
        stream: u32,
        promised: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream_id: u32,
        code: u32,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    /// A frame type this implementation does not know; RFC 9113 §4.1 says to ignore it.
    Unknown {
        kind: u8,
        stream: u32,
    },
}

/// Decodes the first frame in `buf`: `split`, then `parse`. The tests read frames whole;
/// the receive loop splits first, to handle the common frames from their header.
#[cfg(test)]
pub(crate) fn decode(buf: &[u8], max_frame_size: u32) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(raw) = split(buf, max_frame_size)? else { return Ok(None) };
    Ok(Some((parse(raw.head, raw.payload)?, raw.len)))
}

/// A whole frame, not yet read by its type.
pub(crate) struct RawFrame<'a> {
    pub head: Head,
    pub payload: &'a [u8],
    /// Header and payload: the bytes it takes.
    pub len: usize,
}

/// The first whole frame in `buf`. `Ok(None)` means more bytes are needed. A frame longer than `max_frame_size` (what we
/// advertised) is refused as soon as its header is seen, so it is never buffered.
// Inlined into the receive loop, the frame is not stored and read back on its way out (the
// read-back stalled on the stores: a quarter of `Connection::process` at h2c 16 × 32).
#[inline]
pub(crate) fn split(buf: &[u8], max_frame_size: u32) -> Result<Option<RawFrame<'_>>, FrameError> {
    let Some(head) = buf.first_chunk::<HEADER_LEN>() else { return Ok(None) };
    let head = Head::parse(head);
    if head.len > max_frame_size {
        return Err(FrameError::TooLarge { len: head.len, max: max_frame_size });
    }
    let end = HEADER_LEN + head.len as usize;
    let Some(payload) = buf.get(HEADER_LEN..end) else { return Ok(None) };
    Ok(Some(RawFrame { head, payload, len: end }))
}

/// A frame's payload read by its type, with every rule RFC 9113 sets on it.
pub(crate) fn parse(head: Head, p: &[u8]) -> Result<Frame<'_>, FrameError> {
    let Head { len, kind, flags, stream } = head;
    let bad_len = |kind| FrameError::BadLength { kind, len };
    let on_stream = |kind| if stream == 0 { Err(FrameError::StreamZero { kind }) } else { Ok(()) };
    let on_zero = |kind| if stream != 0 { Err(FrameError::NotStreamZero { kind, stream }) } else { Ok(()) };
    Ok(match kind {
        kind::DATA => {
            on_stream("DATA")?;
            let data = unpad("DATA", flags, p)?;
            Frame::Data { stream, data, end_stream: flags & flag::END_STREAM != 0, flow_len: len }
        }
        kind::HEADERS => {
            on_stream("HEADERS")?;
            let mut block = unpad("HEADERS", flags, p)?;
            let mut priority = None;
            if flags & flag::PRIORITY != 0 {
                priority = Some(Priority::parse(block).ok_or(bad_len("HEADERS"))?);
                block = block.get(5..).unwrap_or_default();
            }
            Frame::Headers {
                stream,
                block,
                end_stream: flags & flag::END_STREAM != 0,
                end_headers: flags & flag::END_HEADERS != 0,
                priority,
            }
        }
        kind::PRIORITY => {
            on_stream("PRIORITY")?;
            match Priority::parse(p) {
                Some(priority) if len == 5 => Frame::Priority { stream, priority },
                _ => return Err(bad_len("PRIORITY")),
            }
        }
        kind::RST_STREAM => {
            on_stream("RST_STREAM")?;
            let b: [u8; 4] = p.try_into().map_err(|_| bad_len("RST_STREAM"))?;
            Frame::RstStream { stream, code: u32::from_be_bytes(b) }
        }
        kind::SETTINGS => {
            on_zero("SETTINGS")?;
            let ack = flags & flag::ACK != 0;
            if (ack && len != 0) || !len.is_multiple_of(6) {
                return Err(bad_len("SETTINGS"));
            }
            Frame::Settings { ack, params: SettingsParams(p) }
        }
        kind::PUSH_PROMISE => {
            on_stream("PUSH_PROMISE")?;
            let rest = unpad("PUSH_PROMISE", flags, p)?;
            let (id, block) = rest.split_first_chunk::<4>().ok_or(bad_len("PUSH_PROMISE"))?;
            Frame::PushPromise {
                stream,
                promised: u32::from_be_bytes(*id) & MAX_WINDOW,
                block,
                end_headers: flags & flag::END_HEADERS != 0,
            }
        }
        kind::PING => {
            on_zero("PING")?;
            let data: [u8; 8] = p.try_into().map_err(|_| bad_len("PING"))?;
            Frame::Ping { ack: flags & flag::ACK != 0, data }
        }
        kind::GOAWAY => {
            on_zero("GOAWAY")?;
            let (fixed, debug) = p.split_first_chunk::<8>().ok_or(bad_len("GOAWAY"))?;
            let [a, b, c, d, e, f, g, h] = *fixed;
            Frame::GoAway {
                last_stream_id: u32::from_be_bytes([a, b, c, d]) & MAX_WINDOW,
                code: u32::from_be_bytes([e, f, g, h]),
                debug,
            }
        }
        kind::WINDOW_UPDATE => {
            let b: [u8; 4] = p.try_into().map_err(|_| bad_len("WINDOW_UPDATE"))?;
            let increment = u32::from_be_bytes(b) & MAX_WINDOW;
            if increment == 0 {
                // Strictly a stream error when on a stream; a load generator gains nothing by
                // keeping a connection whose peer miscounts windows, so it is fatal either way.
                return Err(FrameError::ZeroIncrement);
            }
            Frame::WindowUpdate { stream, increment }
        }
        kind::CONTINUATION => {
            on_stream("CONTINUATION")?;
            Frame::Continuation { stream, block: p, end_headers: flags & flag::END_HEADERS != 0 }
        }
        other => Frame::Unknown { kind: other, stream },
    })
}

/// The payload without its pad-length byte and padding, when PADDED is set.
fn unpad<'a>(kind: &'static str, flags: u8, p: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if flags & flag::PADDED == 0 {
        return Ok(p);
    }
    let bad = |pad| FrameError::BadPadding { kind, pad, len: p.len() as u32 };
    let (&pad, rest) = p.split_first().ok_or(bad(0))?;
    // Padding as long as the payload or longer is a protocol error (RFC 9113 §6.1).
    let keep = rest.len().checked_sub(pad as usize).ok_or(bad(pad))?;
    Ok(rest.get(..keep).unwrap_or_default())
}

/// Appends a frame header.
pub(crate) fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    Head { len: len as u32, kind, flags, stream }.write(out);
}

/// Appends one frame of any type with `payload` as is (used for what has no dedicated encoder,
/// and by tests to play a server).
pub(crate) fn encode_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    write_head(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

/// The client connection preface followed by our SETTINGS.
pub(crate) fn encode_preface(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    out.extend_from_slice(PREFACE);
    encode_settings(out, settings);
}

pub(crate) fn encode_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_head(out, settings.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub(crate) fn encode_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub(crate) fn encode_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    encode_frame(out, kind::PING, if ack { flag::ACK } else { 0 }, 0, &data);
}

pub(crate) fn encode_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    encode_frame(out, kind::WINDOW_UPDATE, 0, stream, &(increment & MAX_WINDOW).to_be_bytes());
}

pub(crate) fn encode_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    encode_frame(out, kind::RST_STREAM, 0, stream, &code.to_be_bytes());
}

pub(crate) fn encode_goaway(out: &mut Vec<u8>, last_stream_id: u32, code: u32, debug: &[u8]) {
    write_head(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream_id & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

/// A header block as HEADERS plus as many CONTINUATION frames as the peer's
/// SETTINGS_MAX_FRAME_SIZE requires. END_STREAM goes on the HEADERS frame (RFC 9113 §8.1).
pub(crate) fn encode_headers(out: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame_size: u32) {
    let max = max_frame_size.max(1) as usize;
    let mut chunks = block.chunks(max);
    let first = chunks.next().unwrap_or_default();
    let mut kind = kind::HEADERS;
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    let mut chunk = first;
    loop {
        let next = chunks.next();
        if next.is_none() {
            flags |= flag::END_HEADERS;
        }
        encode_frame(out, kind, flags, stream, chunk);
        match next {
            Some(c) => chunk = c,
            None => return,
        }
        kind = kind::CONTINUATION;
        flags = 0;
    }
}

/// `data` as DATA frames no larger than `max_frame_size`. The caller has already cut `data` to
/// what the flow-control windows allow. An empty `data` with `end_stream` is one empty frame.
pub(crate) fn encode_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool, max_frame_size: u32) {
    if data.is_empty() {
        if end_stream {
            write_head(out, 0, kind::DATA, flag::END_STREAM, stream);
        }
        return;
    }
    let max = max_frame_size.max(1) as usize;
    let mut chunks = data.chunks(max).peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        encode_frame(out, kind::DATA, if last && end_stream { flag::END_STREAM } else { 0 }, stream, chunk);
    }
}

#[cfg(test)]
mod tests;
