//! The HTTP/1.1 response scanner: finds where each response ends, reads only the status line,
//! Content-Length, Transfer-Encoding and Connection, and steps over everything else.
//!
//! Sans-I/O: bytes in, events out. Nothing is allocated per response.

/// A complete final (non-1xx) response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    /// The server said `Connection: close` (or spoke HTTP/1.0 without keep-alive): the
    /// connection must not be reused.
    pub close: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScanError {
    #[error("malformed response: {0}")]
    Malformed(&'static str),
    #[error("response header section larger than {0} bytes")]
    HeadersTooLarge(usize),
    #[error("connection closed before the response was complete")]
    Truncated,
}

#[derive(Debug, Default)]
pub(crate) struct Scanner {}

impl Scanner {
    pub(crate) fn new() -> Self {
        Scanner {}
    }

    /// Prepares for the response to the next request. `head` is true when that request was a
    /// HEAD request, whose response never has a body.
    pub(crate) fn start(&mut self, head: bool) {
        let _ = head;
    }

    /// Feeds received bytes. Returns how many bytes were consumed and, when a final response
    /// ended inside `data`, that response. Bytes after the end of a response are not consumed.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<(usize, Option<Response>), ScanError> {
        let _ = data;
        Err(ScanError::Malformed("scanner not written yet"))
    }

    /// The peer closed the connection. A response delimited by the close completes here.
    pub(crate) fn eof(&mut self) -> Result<Option<Response>, ScanError> {
        Err(ScanError::Truncated)
    }

    /// True when bytes of a response have been seen but the response is not complete.
    pub(crate) fn in_response(&self) -> bool {
        false
    }
}
