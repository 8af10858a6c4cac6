//! One request stream's response (RFC 9114 §4.1): fed the stream's bytes as they arrive, it
//! gives the final status, counts the body, and at the stream's end says whether the response
//! was whole.
//!
//! A response is zero or more informational (1xx) HEADERS, the final HEADERS, any number of
//! DATA frames, and optionally trailers (one more HEADERS); unknown frames may come anywhere
//! and are skipped. DATA before the final HEADERS, or anything but unknown frames after the
//! trailers, is H3_FRAME_UNEXPECTED; control-stream frames here are too; PUSH_PROMISE is
//! H3_ID_ERROR, since we never send MAX_PUSH_ID.

use super::H3Error;
use super::frame::{Frame, FrameDecoder};
use super::qpack;
use crate::session::{Fields, Kept, KeptChecks};
use crate::stats::RetryAfter;

/// A response read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    /// DATA payload bytes.
    pub body_bytes: u64,
    /// The final HEADERS' `retry-after`, if it had one.
    pub retry_after: Option<RetryAfter>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the final HEADERS (informational responses may come).
    Head,
    /// After the final HEADERS: DATA or trailers may come.
    Body,
    /// After the trailers: only the end may come.
    Trailers,
}

/// The reader of one response stream.
#[derive(Debug)]
pub(crate) struct ResponseStream {
    frames: FrameDecoder,
    phase: Phase,
    status: Option<u16>,
    body_bytes: u64,
    retry_after: Option<RetryAfter>,
    /// What is kept for its step's checks.
    kept: Option<Kept>,
    keep: Keep,
}

/// What a response keeps for its step's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// No check reads it.
    Nothing,
    /// Into the `Kept` given at the start: what it keeps of the body, and of the final head's
    /// fields when `fields`.
    Given { fields: bool },
    /// Only these fields of the final head (a jar's, redirects'), into a `Kept` made when the
    /// head has one. Most heads have none; taking, preparing and giving back a spare for each
    /// cost a scenario with a jar about 20 ns a response.
    Only(Fields),
}

impl Default for ResponseStream {
    fn default() -> Self {
        ResponseStream {
            frames: FrameDecoder::default(),
            phase: Phase::Head,
            status: None,
            body_bytes: 0,
            retry_after: None,
            kept: None,
            keep: Keep::Nothing,
        }
    }
}

impl ResponseStream {
    /// Reads the next bytes of the stream, in whatever pieces they come. After an error the
    /// stream is done: a connection error (see [`H3Error::is_connection_error`]) ends the
    /// connection, another this stream only. `heads` is the connection's: its responses share it.
    pub(crate) fn receive(&mut self, mut input: &[u8], heads: &mut qpack::HeadCache) -> Result<(), H3Error> {
        let ResponseStream { frames, phase, status, body_bytes, retry_after, kept, keep } = self;
        while let Some(frame) = frames.next(&mut input)? {
            match (frame, *phase) {
                (Frame::Headers(section), Phase::Head) => {
                    let head = heads.decode(section)?;
                    match head.status {
                        None => return Err(H3Error::MissingStatus),
                        Some(101) => return Err(H3Error::SwitchingProtocols),
                        // Informational: the final response is still to come.
                        Some(100..=199) => {}
                        Some(code) => {
                            *status = Some(code);
                            *retry_after = head.retry_after;
                            *phase = Phase::Body;
                            match (*keep, &mut *kept) {
                                (Keep::Given { fields: true }, Some(kept))
                                    if head.cookie_or_location || kept.keeps_every_field() =>
                                {
                                    keep_fields_of(section, kept);
                                }
                                (Keep::Only(fields), kept) if head.cookie_or_location => {
                                    keep_fields_of(section, kept.insert(Kept::of_fields(fields)));
                                }
                                _ => {}
                            }
                        }
                    }
                }
                (Frame::Headers(section), Phase::Body) => {
                    if qpack::decode_status(section)?.is_some() {
                        return Err(H3Error::StatusInTrailers);
                    }
                    *phase = Phase::Trailers;
                }
                (Frame::Data(piece), Phase::Body) => {
                    *body_bytes += piece.len() as u64;
                    if let Some(kept) = kept {
                        kept.push(piece);
                    }
                }
                (Frame::Unknown(_), _) => {}
                (Frame::PushPromise, _) => return Err(H3Error::Push { frame: "PUSH_PROMISE" }),
                (frame, _) => return Err(H3Error::FrameUnexpected { frame: frame.name(), stream: "request" }),
            }
        }
        Ok(())
    }

    /// Keeps what `checks` read in `kept`.
    pub(crate) fn keep(&mut self, mut kept: Kept, checks: &KeptChecks) {
        checks.prepare(&mut kept);
        self.keep = Keep::Given { fields: checks.wants_headers() };
        self.kept = Some(kept);
    }

    /// Keeps `fields` of the final head, if it has any of them ([`KeptChecks::only_fields`]).
    pub(crate) fn keep_only(&mut self, fields: Fields) {
        self.keep = if fields == Fields::NONE { Keep::Nothing } else { Keep::Only(fields) };
    }

    /// What was kept: always after `keep`; after `keep_only`, when the final head had one of
    /// its fields.
    pub(crate) fn take_kept(&mut self) -> Option<Kept> {
        self.kept.take()
    }

    /// The final status, once its HEADERS are in.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn status(&self) -> Option<u16> {
        self.status
    }

    /// DATA payload bytes so far.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// At the stream's end (QUIC's FIN): the response, if it was whole.
    pub(crate) fn finish(&self) -> Result<Response, H3Error> {
        self.frames.finish()?;
        match self.status {
            Some(status) => Ok(Response { status, body_bytes: self.body_bytes, retry_after: self.retry_after }),
            None => Err(H3Error::IncompleteResponse),
        }
    }
}

/// The fields of a final head that `kept` keeps, decoded, into it. The head's framing was read
/// once already; a field whose Huffman string does not decode is left out, as the plain reading
/// steps over fields it does not need without decoding them, so that checks never fail a
/// response the run would otherwise count. A value is decoded only for a name kept: a jar
/// keeps only `set-cookie`, and decoding every other value (a date, a server's name, Huffman
/// coded) cost a scenario's HTTP/3 responses 0.3 to 0.5 µs each.
fn keep_fields_of(section: &[u8], kept: &mut Kept) {
    let Ok(lines) = qpack::field_lines(section) else { return };
    let (mut name, mut value) = (Vec::new(), Vec::new());
    for line in lines.map_while(Result::ok) {
        name.clear();
        value.clear();
        if line.name.decode_to(&mut name).is_ok() && kept.keeps_field(&name) && line.value.decode_to(&mut value).is_ok()
        {
            kept.push_field(&name, &value);
        }
    }
}
