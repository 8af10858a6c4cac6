//! What can go wrong reading a server's HTTP/3 streams, typed, each with the HTTP/3 or QPACK
//! error code (RFC 9114 §8.1, RFC 9204 §6) a client closes the connection or the stream with.

use super::qpack::QpackError;

/// HTTP/3 and QPACK error codes, as sent in CONNECTION_CLOSE, RESET_STREAM and STOP_SENDING.
#[allow(dead_code)]
pub(crate) mod code {
    pub(crate) const H3_NO_ERROR: u64 = 0x0100;
    pub(crate) const H3_GENERAL_PROTOCOL_ERROR: u64 = 0x0101;
    pub(crate) const H3_INTERNAL_ERROR: u64 = 0x0102;
    pub(crate) const H3_STREAM_CREATION_ERROR: u64 = 0x0103;
    pub(crate) const H3_CLOSED_CRITICAL_STREAM: u64 = 0x0104;
    pub(crate) const H3_FRAME_UNEXPECTED: u64 = 0x0105;
    pub(crate) const H3_FRAME_ERROR: u64 = 0x0106;
    pub(crate) const H3_EXCESSIVE_LOAD: u64 = 0x0107;
    pub(crate) const H3_ID_ERROR: u64 = 0x0108;
    pub(crate) const H3_SETTINGS_ERROR: u64 = 0x0109;
    pub(crate) const H3_MISSING_SETTINGS: u64 = 0x010a;
    pub(crate) const H3_REQUEST_REJECTED: u64 = 0x010b;
    pub(crate) const H3_REQUEST_CANCELLED: u64 = 0x010c;
    pub(crate) const H3_REQUEST_INCOMPLETE: u64 = 0x010d;
    pub(crate) const H3_MESSAGE_ERROR: u64 = 0x010e;
    pub(crate) const H3_CONNECT_ERROR: u64 = 0x010f;
    pub(crate) const H3_VERSION_FALLBACK: u64 = 0x0110;
    pub(crate) const QPACK_DECOMPRESSION_FAILED: u64 = 0x0200;
    pub(crate) const QPACK_ENCODER_STREAM_ERROR: u64 = 0x0201;
    pub(crate) const QPACK_DECODER_STREAM_ERROR: u64 = 0x0202;
}

/// Something the server got wrong. [`H3Error::code`] is what to tell it, and
/// [`H3Error::is_connection_error`] whether the whole connection ends or only the stream.
/// No String inside: a hostile server must not cost an allocation per error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum H3Error {
    #[error("HTTP/3 {frame} frame is not allowed on a {stream} stream")]
    FrameUnexpected { frame: &'static str, stream: &'static str },
    #[error("the server's HTTP/3 control stream did not start with SETTINGS")]
    MissingSettings,
    #[error("HTTP/3 {frame} frame with a malformed payload of {len} bytes")]
    MalformedFrame { frame: &'static str, len: u64 },
    #[error("an HTTP/3 stream ended inside a frame")]
    TruncatedFrame,
    #[error("HTTP/3 {frame} frame of {len} bytes is larger than the {max} bytes we accept")]
    FrameTooLarge { frame: &'static str, len: u64, max: usize },
    #[error("response headers of {len} bytes are larger than the {max} bytes we accept")]
    HeadersTooLarge { len: u64, max: usize },
    #[error("the server sent HTTP/2's setting {id:#x}, which HTTP/3 reserves")]
    ReservedSetting { id: u64 },
    #[error("the server sent setting {id:#x} twice")]
    DuplicateSetting { id: u64 },
    #[error("the server opened a push stream, though we allow no pushes")]
    PushStream,
    #[error("the server sent {frame}, though we allow no pushes")]
    Push { frame: &'static str },
    #[error("GOAWAY names stream {id}, which is not a request stream")]
    GoawayNotARequestStream { id: u64 },
    #[error("GOAWAY raised its stream id from {previous} to {id}")]
    GoawayIncreased { previous: u64, id: u64 },
    #[error("the server opened a second HTTP/3 {kind} stream")]
    DuplicateStream { kind: &'static str },
    #[error("the server closed its HTTP/3 {kind} stream")]
    ClosedCriticalStream { kind: &'static str },
    #[error("the response ended before its headers")]
    IncompleteResponse,
    #[error("response status 101, which HTTP/3 does not allow")]
    SwitchingProtocols,
    #[error("response headers without :status")]
    MissingStatus,
    #[error("response trailers with :status")]
    StatusInTrailers,
    #[error(transparent)]
    Qpack(#[from] QpackError),
}

impl H3Error {
    /// The error code the client sends for it.
    pub(crate) fn code(&self) -> u64 {
        match self {
            H3Error::FrameUnexpected { .. } => code::H3_FRAME_UNEXPECTED,
            H3Error::MissingSettings => code::H3_MISSING_SETTINGS,
            H3Error::MalformedFrame { .. } | H3Error::TruncatedFrame => code::H3_FRAME_ERROR,
            H3Error::FrameTooLarge { .. } | H3Error::HeadersTooLarge { .. } => code::H3_EXCESSIVE_LOAD,
            H3Error::ReservedSetting { .. } | H3Error::DuplicateSetting { .. } => code::H3_SETTINGS_ERROR,
            H3Error::PushStream
            | H3Error::Push { .. }
            | H3Error::GoawayNotARequestStream { .. }
            | H3Error::GoawayIncreased { .. } => code::H3_ID_ERROR,
            H3Error::DuplicateStream { .. } => code::H3_STREAM_CREATION_ERROR,
            H3Error::ClosedCriticalStream { .. } => code::H3_CLOSED_CRITICAL_STREAM,
            H3Error::IncompleteResponse
            | H3Error::SwitchingProtocols
            | H3Error::MissingStatus
            | H3Error::StatusInTrailers => code::H3_MESSAGE_ERROR,
            H3Error::Qpack(e) if e.is_malformed_message() => code::H3_MESSAGE_ERROR,
            H3Error::Qpack(_) => code::QPACK_DECOMPRESSION_FAILED,
        }
    }

    /// Whether it ends the connection (RFC 9114 §8: most do) rather than one request stream
    /// (a malformed response, §4.1.2, or a frame larger than we are willing to hold).
    pub(crate) fn is_connection_error(&self) -> bool {
        !matches!(self, H3Error::HeadersTooLarge { .. }) && self.code() != code::H3_MESSAGE_ERROR
    }
}
