//! The server's unidirectional streams (RFC 9114 §6.2): each opens with a stream type, read
//! here in whatever pieces it comes, and is then read by its kind's rules.
//!
//! - Control (0x00): one per connection; its first frame must be SETTINGS (else
//!   H3_MISSING_SETTINGS) and no SETTINGS may follow; GOAWAY ids must name request streams and
//!   never grow (H3_ID_ERROR); DATA, HEADERS, PUSH_PROMISE, MAX_PUSH_ID (which only clients
//!   send) and HTTP/2's reserved types are H3_FRAME_UNEXPECTED; CANCEL_PUSH is H3_ID_ERROR,
//!   since we allow no pushes; unknown frames are skipped.
//! - Push (0x01): refused with H3_ID_ERROR: we never send MAX_PUSH_ID (§4.6).
//! - QPACK encoder (0x02) and decoder (0x03): one of each per connection, accepted and drained.
//!   With no dynamic table the server has nothing to say on them that we need.
//! - Any other type (extensions, greasing): drained, as §6.2 allows.
//!
//! Closing the control stream or a QPACK stream is H3_CLOSED_CRITICAL_STREAM; a second stream
//! of one of those kinds is H3_STREAM_CREATION_ERROR.

use super::H3Error;
use super::frame::{Frame, FrameDecoder, Settings, stream_type};
use crate::quic::varint;

/// What the server's control stream tells the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlEvent {
    Settings(Settings),
    /// GOAWAY: requests on streams from this id on were not processed (§5.2).
    GoAway(u64),
}

/// The critical unidirectional streams the server has opened on a connection.
#[derive(Debug, Default)]
pub(crate) struct SeenStreams {
    control: bool,
    qpack_encoder: bool,
    qpack_decoder: bool,
}

impl SeenStreams {
    /// Marks a stream of `kind` as opened; a second one is an error.
    fn open(&mut self, kind: Critical) -> Result<(), H3Error> {
        let seen = match kind {
            Critical::Control => &mut self.control,
            Critical::QpackEncoder => &mut self.qpack_encoder,
            Critical::QpackDecoder => &mut self.qpack_decoder,
        };
        if std::mem::replace(seen, true) {
            return Err(H3Error::DuplicateStream { kind: kind.name() });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Critical {
    Control,
    QpackEncoder,
    QpackDecoder,
}

impl Critical {
    fn name(self) -> &'static str {
        match self {
            Critical::Control => "control",
            Critical::QpackEncoder => "QPACK encoder",
            Critical::QpackDecoder => "QPACK decoder",
        }
    }
}

#[derive(Debug)]
enum State {
    /// The stream type, `bytes[..len]` of it so far.
    Type {
        bytes: [u8; 8],
        len: u8,
    },
    Control(ControlStream),
    /// Read and dropped; `Some` for a QPACK stream, which may not close.
    Drain(Option<Critical>),
}

/// One unidirectional stream the server opened.
#[derive(Debug)]
pub(crate) struct UniStream {
    state: State,
}

impl Default for UniStream {
    fn default() -> Self {
        UniStream { state: State::Type { bytes: [0; 8], len: 0 } }
    }
}

impl UniStream {
    /// Reads the stream's next bytes; what its control frames say is pushed onto `events`.
    /// `seen` is the connection's, shared by all its unidirectional streams.
    pub(crate) fn receive(
        &mut self,
        seen: &mut SeenStreams,
        mut input: &[u8],
        events: &mut Vec<ControlEvent>,
    ) -> Result<(), H3Error> {
        if let State::Type { bytes, len } = &mut self.state {
            let old = *len as usize;
            let need = if old == 0 {
                match input.first() {
                    Some(&first) => varint::len_from_first(first),
                    None => return Ok(()),
                }
            } else {
                varint::len_from_first(bytes[0])
            };
            let take = (need - old).min(input.len());
            bytes[old..old + take].copy_from_slice(&input[..take]);
            input = &input[take..];
            *len = (old + take) as u8;
            if old + take < need {
                return Ok(());
            }
            let (kind, _) = varint::decode(&bytes[..need]).ok_or(H3Error::TruncatedFrame)?;
            self.state = match kind {
                stream_type::CONTROL => {
                    seen.open(Critical::Control)?;
                    State::Control(ControlStream::default())
                }
                stream_type::PUSH => return Err(H3Error::PushStream),
                stream_type::QPACK_ENCODER => {
                    seen.open(Critical::QpackEncoder)?;
                    State::Drain(Some(Critical::QpackEncoder))
                }
                stream_type::QPACK_DECODER => {
                    seen.open(Critical::QpackDecoder)?;
                    State::Drain(Some(Critical::QpackDecoder))
                }
                _ => State::Drain(None),
            };
        }
        match &mut self.state {
            State::Control(control) => control.receive(input, events),
            _ => Ok(()),
        }
    }

    /// The server ended or reset the stream: an error if it was a critical one. A stream that
    /// ended before its type was whole was nothing.
    pub(crate) fn finish(&self) -> Result<(), H3Error> {
        match self.state {
            State::Control(_) => Err(H3Error::ClosedCriticalStream { kind: Critical::Control.name() }),
            State::Drain(Some(kind)) => Err(H3Error::ClosedCriticalStream { kind: kind.name() }),
            _ => Ok(()),
        }
    }

    /// Whether the reader wants the stream's bytes at all; a driver may stop reading (with
    /// STOP_SENDING, H3_NO_ERROR) a stream that it does not, if the QUIC layer allows.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_drained(&self) -> bool {
        matches!(self.state, State::Drain(None))
    }
}

/// The server's control stream after its type.
#[derive(Debug, Default)]
pub(crate) struct ControlStream {
    frames: FrameDecoder,
    settings: bool,
    goaway: Option<u64>,
}

impl ControlStream {
    fn receive(&mut self, mut input: &[u8], events: &mut Vec<ControlEvent>) -> Result<(), H3Error> {
        let ControlStream { frames, settings, goaway } = self;
        while let Some(frame) = frames.next(&mut input)? {
            if !*settings {
                let Frame::Settings(s) = frame else {
                    return Err(H3Error::MissingSettings);
                };
                *settings = true;
                events.push(ControlEvent::Settings(s));
                continue;
            }
            match frame {
                Frame::GoAway(id) => {
                    // §5.2: a server's GOAWAY names a client-initiated bidirectional stream, and
                    // a later one may not name a higher one.
                    if id % 4 != 0 {
                        return Err(H3Error::GoawayNotARequestStream { id });
                    }
                    if let Some(previous) = *goaway
                        && id > previous
                    {
                        return Err(H3Error::GoawayIncreased { previous, id });
                    }
                    *goaway = Some(id);
                    events.push(ControlEvent::GoAway(id));
                }
                Frame::CancelPush(_) => return Err(H3Error::Push { frame: "CANCEL_PUSH" }),
                Frame::Unknown(_) => {}
                frame => return Err(H3Error::FrameUnexpected { frame: frame.name(), stream: "control" }),
            }
        }
        Ok(())
    }
}
