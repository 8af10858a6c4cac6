//! The HTTP/1.1 response scanner: finds where each response ends, reads only the status line,
//! Content-Length, Transfer-Encoding and Connection (and Retry-After, which is counted), and
//! steps over everything else.
//!
//! Sans-I/O: bytes in, events out. Nothing is allocated per response: a line is read in place
//! when it lies whole inside one `feed`, and only a line the scanner must read that straddles
//! two feeds is copied into a small fixed buffer. Body bytes of a known length are counted,
//! never looked at. Framing follows RFC 9112 §6.3.

use memchr::memchr;

use crate::session::{Kept, KeptChecks};
use crate::stats::RetryAfter;

/// The largest response head (status line, header lines and the blank line) accepted.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Room for a status line, chunk-size line or framing header line straddling two feeds. A
/// framing header line longer than this is refused whether it straddles or not, so the outcome
/// never depends on how the bytes happened to be split.
const LINE_CAP: usize = 256;

/// A complete final (non-1xx) response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Response {
    pub status: u16,
    /// The server said `Connection: close` (or spoke HTTP/1.0 without keep-alive): the
    /// connection must not be reused.
    pub close: bool,
    /// What its `Retry-After` said (the last one, if several came).
    pub retry_after: Option<RetryAfter>,
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

const BAD_STATUS: ScanError = ScanError::Malformed("bad status line");
const BAD_CHUNK: ScanError = ScanError::Malformed("bad chunk size");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing of the response seen yet.
    Start,
    /// An interim (1xx) head just ended; the next head's status line follows.
    Interim,
    /// In the status line; any part of it already seen is in `buf`.
    Status,
    /// In a status line longer than `buf`, whose prefix is in `buf`.
    StatusRest,
    /// At the first byte of a header line (or of the blank line ending the head).
    LineStart,
    /// A header line began with CR, so it must be the blank line.
    HeadCr,
    /// In a header line starting with c, t or r (maybe one that is read); any part already seen
    /// is in `buf`.
    Candidate,
    /// Stepping over a header line nobody reads.
    Skip,
    /// In a Content-Length body; this many bytes left.
    Body(u64),
    /// In a chunk-size line; any part already seen is in `buf`.
    ChunkSize,
    /// In a chunk extension too long for `buf`; the chunk's size is known.
    ChunkExt(u64),
    /// In chunk data; this many bytes left.
    ChunkData(u64),
    /// After chunk data, before its CRLF.
    ChunkCr,
    /// After chunk data and a CR.
    ChunkLf,
    /// At the first byte of a trailer line (or of the blank line ending the body).
    TrailerStart,
    /// A trailer line began with CR, so it must be the blank line.
    TrailerCr,
    /// Stepping over a trailer line.
    TrailerSkip,
    /// The body runs until the peer closes.
    UntilClose,
    /// The response is complete; `start` prepares for the next one.
    Done,
    /// Stays failed until `start`.
    Failed(ScanError),
}

impl State {
    fn in_head(self) -> bool {
        matches!(
            self,
            State::Start
                | State::Interim
                | State::Status
                | State::StatusRest
                | State::LineStart
                | State::HeadCr
                | State::Candidate
                | State::Skip
        )
    }
}

/// The header fields that are read: those that decide framing, and Retry-After.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    ContentLength,
    TransferEncoding,
    Connection,
    RetryAfter,
}

impl Field {
    /// Whether the field decides where the response ends: such a field is held to `LINE_CAP`
    /// and may not be folded, since a misread would misframe everything after it.
    fn frames(self) -> bool {
        self != Field::RetryAfter
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Length {
    #[default]
    Absent,
    Is(u64),
    /// Kept rather than raised at once: a Transfer-Encoding makes Content-Length irrelevant.
    Bad(&'static str),
}

/// What one response head said about framing.
#[derive(Debug, Clone, Copy, Default)]
struct Facts {
    status: u16,
    http10: bool,
    conn_close: bool,
    keep_alive: bool,
    /// A Transfer-Encoding field was present.
    te: bool,
    /// chunked is the final transfer coding.
    chunked: bool,
    length: Length,
    /// The previous header line was a framing one, so an obs-fold line would change its value.
    fold_guard: bool,
    close: bool,
    retry_after: Option<RetryAfter>,
}

impl Facts {
    /// A whole header line starting with c, t or r (without its LF).
    fn header(&mut self, raw: &[u8]) -> Result<(), ScanError> {
        if raw.len() > LINE_CAP {
            return self.overlong(raw.get(..LINE_CAP).unwrap_or(raw));
        }
        let line = strip_cr(raw);
        let Some((field, value)) = split_field(line) else {
            self.fold_guard = false;
            return Ok(());
        };
        self.fold_guard = field.frames();
        match field {
            Field::RetryAfter => self.retry_after = Some(RetryAfter::parse(value)),
            Field::ContentLength => {
                self.length = match (self.length, content_length(value)) {
                    (Length::Bad(why), _) | (_, Err(why)) => Length::Bad(why),
                    (Length::Absent, Ok(n)) => Length::Is(n),
                    (Length::Is(a), Ok(n)) if a == n => Length::Is(a),
                    (Length::Is(_), Ok(_)) => Length::Bad("conflicting Content-Length values"),
                };
            }
            Field::TransferEncoding => {
                self.te = true;
                // Codings accumulate across fields: only the last one named matters.
                if let Some(last) = value.split(|&b| b == b',').rev().map(trim).find(|c| !c.is_empty()) {
                    let name = trim(last.split(|&b| b == b';').next().unwrap_or(last));
                    self.chunked = name.eq_ignore_ascii_case(b"chunked");
                }
            }
            Field::Connection => {
                for token in value.split(|&b| b == b',').map(trim) {
                    if token.eq_ignore_ascii_case(b"close") {
                        self.conn_close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        self.keep_alive = true;
                    }
                }
            }
        }
        Ok(())
    }

    /// A c/t/r header line longer than `LINE_CAP`, of which `prefix` is the first `LINE_CAP`
    /// bytes. A Retry-After that long is neither delay-seconds nor a date, but it came.
    fn overlong(&mut self, prefix: &[u8]) -> Result<(), ScanError> {
        match split_field(prefix) {
            Some((field, _)) if field.frames() => return Err(ScanError::Malformed("framing header line too long")),
            Some(_) => self.retry_after = Some(RetryAfter::Date),
            None => {}
        }
        self.fold_guard = false;
        Ok(())
    }
}

pub(crate) struct Scanner {
    state: State,
    /// The request being answered was HEAD.
    head_request: bool,
    facts: Facts,
    /// Bytes of the current head consumed so far.
    head_bytes: usize,
    buf: [u8; LINE_CAP],
    buf_len: usize,
    /// What is kept of the response for its checks (see `keep`).
    kept: Option<Box<Kept>>,
    keeping: bool,
    /// The current head's bytes, when its fields are kept: read into `kept` once it is whole.
    raw_head: Vec<u8>,
    keeping_head: bool,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner").field("state", &self.state).field("head_request", &self.head_request).finish()
    }
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    /// A scanner ready for the response to a non-HEAD request.
    pub(crate) fn new() -> Self {
        Scanner {
            state: State::Start,
            head_request: false,
            facts: Facts::default(),
            head_bytes: 0,
            buf: [0; LINE_CAP],
            buf_len: 0,
            kept: None,
            keeping: false,
            raw_head: Vec::new(),
            keeping_head: false,
        }
    }

    /// Keeps what `checks` read of the response to the request just started (after `start`):
    /// read with `kept` once the response is complete.
    pub(crate) fn keep(&mut self, checks: &KeptChecks) {
        checks.prepare(self.kept.get_or_insert_default());
        self.keeping = true;
        self.keeping_head = checks.wants_headers();
        self.raw_head.clear();
    }

    /// What was kept of the last response, if `keep` was asked for it: its final head's fields
    /// are read here, once.
    pub(crate) fn kept(&mut self) -> Option<&Kept> {
        if !self.keeping {
            return None;
        }
        let kept = self.kept.get_or_insert_default();
        if self.keeping_head {
            self.keeping_head = false;
            // A field's value with its obs-fold continuations (RFC 9112 §5.2), each joined by a
            // space, before it is kept.
            let mut field: Option<(&[u8], Vec<u8>)> = None;
            for line in self.raw_head.split(|&b| b == b'\n').skip(1) {
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if let (Some(b' ' | b'\t'), Some((_, value))) = (line.first(), field.as_mut()) {
                    value.push(b' ');
                    value.extend_from_slice(trim(line));
                    continue;
                }
                if let Some((name, value)) = field.take() {
                    kept.push_field(name, &value);
                }
                if let Some(colon) = memchr(b':', line)
                    && let (Some(name), Some(value)) = (line.get(..colon), line.get(colon + 1..))
                {
                    field = Some((name, trim(value).to_vec()));
                }
            }
            if let Some((name, value)) = field {
                kept.push_field(name, &value);
            }
        }
        Some(kept)
    }

    /// Prepares for the response to the next request. `head` is true when that request was a
    /// HEAD request, whose response never has a body.
    pub(crate) fn start(&mut self, head: bool) {
        self.state = State::Start;
        self.head_request = head;
        self.keeping = false;
        self.keeping_head = false;
    }

    /// Feeds received bytes. Returns how many bytes were consumed and, when a final response
    /// ended inside `data`, that response. Bytes after the end of a response are not consumed:
    /// once a response is complete, nothing more is consumed until `start`. Without a
    /// response, all of `data` is consumed. An error sticks until `start`.
    pub(crate) fn feed(&mut self, data: &[u8]) -> Result<(usize, Option<Response>), ScanError> {
        match self.state {
            State::Done => Ok((0, None)),
            State::Failed(e) => Err(e),
            _ => self.scan(data).inspect_err(|&e| self.state = State::Failed(e)),
        }
    }

    /// The peer closed the connection. A response delimited by the close completes here; a
    /// response cut short, or one not begun at all, is `Truncated`. `Ok(None)` when no response
    /// was pending (the last one completed and `start` was not called since).
    pub(crate) fn eof(&mut self) -> Result<Option<Response>, ScanError> {
        match self.state {
            State::Done => Ok(None),
            State::UntilClose => {
                self.state = State::Done;
                Ok(Some(self.response()))
            }
            State::Failed(e) => Err(e),
            State::Start => Err(ScanError::Truncated),
            _ => {
                self.state = State::Failed(ScanError::Truncated);
                Err(ScanError::Truncated)
            }
        }
    }

    /// True when bytes of a response have been seen but the response is not complete.
    #[allow(dead_code, reason = "part of the interface the event loop is written against")]
    pub(crate) fn in_response(&self) -> bool {
        !matches!(self.state, State::Start | State::Done)
    }

    fn response(&self) -> Response {
        Response { status: self.facts.status, close: self.facts.close, retry_after: self.facts.retry_after }
    }

    fn scan(&mut self, data: &[u8]) -> Result<(usize, Option<Response>), ScanError> {
        let mut pos = 0;
        while let Some(rest) = data.get(pos..).filter(|r| !r.is_empty()) {
            let n = if self.state.in_head() {
                if matches!(self.state, State::Start | State::Interim) {
                    self.begin_head();
                }
                let budget = MAX_HEADER_BYTES.saturating_sub(self.head_bytes);
                if budget == 0 {
                    return Err(ScanError::HeadersTooLarge(MAX_HEADER_BYTES));
                }
                let n = self.head_step(rest.get(..budget).unwrap_or(rest))?;
                self.head_bytes = self.head_bytes.saturating_add(n);
                if self.keeping_head {
                    self.raw_head.extend_from_slice(rest.get(..n).unwrap_or_default());
                }
                n
            } else {
                let in_body = matches!(self.state, State::Body(_) | State::ChunkData(_) | State::UntilClose);
                let n = self.body_step(rest)?;
                if in_body
                    && self.keeping
                    && let Some(kept) = self.kept.as_deref_mut()
                {
                    kept.push(rest.get(..n).unwrap_or_default());
                }
                n
            };
            pos = pos.saturating_add(n);
            if self.state == State::Done {
                return Ok((pos, Some(self.response())));
            }
        }
        Ok((pos, None))
    }

    fn begin_head(&mut self) {
        self.state = State::Status;
        self.facts = Facts::default();
        self.head_bytes = 0;
        self.buf_len = 0;
        // An informational head's fields are not the response's.
        self.raw_head.clear();
    }

    /// Copies as much of `bytes` as fits into `buf`; false when some did not fit.
    fn append(&mut self, bytes: &[u8]) -> bool {
        let free = self.buf.get_mut(self.buf_len..).unwrap_or_default();
        let take = bytes.len().min(free.len());
        if let (Some(dst), Some(src)) = (free.get_mut(..take), bytes.get(..take)) {
            dst.copy_from_slice(src);
        }
        self.buf_len += take;
        take == bytes.len()
    }

    fn buffered(&self) -> &[u8] {
        self.buf.get(..self.buf_len).unwrap_or_default()
    }

    /// One step inside a head over `win`, which is non-empty and within the head's byte budget.
    /// Returns the bytes consumed; zero only when the state changed.
    fn head_step(&mut self, win: &[u8]) -> Result<usize, ScanError> {
        let Some(&first) = win.first() else { return Ok(0) };
        match self.state {
            State::Status => match memchr(b'\n', win) {
                Some(i) => {
                    let line = win.get(..i).unwrap_or_default();
                    let (status, http10) = if self.buf_len == 0 {
                        parse_status(line, true)?
                    } else {
                        let whole = self.append(line);
                        parse_status(self.buffered(), whole)?
                    };
                    self.facts.status = status;
                    self.facts.http10 = http10;
                    self.state = State::LineStart;
                    Ok(i + 1)
                }
                None => {
                    let fits = self.append(win);
                    // Catches a server that is not speaking HTTP/1 without waiting for a newline.
                    if !status_prefix_ok(self.buffered()) {
                        return Err(BAD_STATUS);
                    }
                    if !fits {
                        self.state = State::StatusRest;
                    }
                    Ok(win.len())
                }
            },
            State::StatusRest => match memchr(b'\n', win) {
                Some(i) => {
                    let (status, http10) = parse_status(self.buffered(), false)?;
                    self.facts.status = status;
                    self.facts.http10 = http10;
                    self.state = State::LineStart;
                    Ok(i + 1)
                }
                None => Ok(win.len()),
            },
            State::LineStart => match first {
                b'\n' => {
                    self.end_head()?;
                    Ok(1)
                }
                b'\r' => {
                    self.state = State::HeadCr;
                    Ok(1)
                }
                // A byte compare that every header line gets anyway: lines starting otherwise
                // (most of a typical response's) never reach the field names below.
                b'c' | b'C' | b't' | b'T' | b'r' | b'R' => {
                    self.buf_len = 0;
                    self.state = State::Candidate;
                    Ok(0)
                }
                b' ' | b'\t' if self.facts.fold_guard => Err(ScanError::Malformed("obs-fold in a framing header")),
                _ => {
                    self.facts.fold_guard = false;
                    match memchr(b'\n', win) {
                        Some(i) => Ok(i + 1),
                        None => {
                            self.state = State::Skip;
                            Ok(win.len())
                        }
                    }
                }
            },
            State::HeadCr => {
                if first != b'\n' {
                    return Err(ScanError::Malformed("bare CR in the header section"));
                }
                self.end_head()?;
                Ok(1)
            }
            State::Candidate => match memchr(b'\n', win) {
                Some(i) => {
                    let line = win.get(..i).unwrap_or_default();
                    if self.buf_len == 0 {
                        self.facts.header(line)?;
                    } else if self.append(line) {
                        self.facts.header(self.buf.get(..self.buf_len).unwrap_or_default())?;
                    } else {
                        self.facts.overlong(&self.buf)?;
                    }
                    self.state = State::LineStart;
                    Ok(i + 1)
                }
                None => {
                    let fits = self.append(win);
                    let prefix = self.buf.get(..self.buf_len).unwrap_or_default();
                    if !fits {
                        self.facts.overlong(prefix)?;
                        self.state = State::Skip;
                    } else if memchr(b':', win).is_some() && split_field(prefix).is_none() {
                        // The name is complete and nobody reads it: stop copying.
                        self.facts.fold_guard = false;
                        self.state = State::Skip;
                    }
                    Ok(win.len())
                }
            },
            State::Skip => match memchr(b'\n', win) {
                Some(i) => {
                    self.state = State::LineStart;
                    Ok(i + 1)
                }
                None => Ok(win.len()),
            },
            // Start and Interim become Status before any step; body states never get here.
            _ => Ok(win.len()),
        }
    }

    /// The blank line ending a head: decides the body's framing (RFC 9112 §6.3).
    fn end_head(&mut self) -> Result<(), ScanError> {
        let f = &mut self.facts;
        match f.status {
            101 => return Err(ScanError::Malformed("101 Switching Protocols without an upgrade request")),
            100..=199 => {
                self.state = State::Interim;
                return Ok(());
            }
            _ => {}
        }
        f.close = f.conn_close || (f.http10 && !f.keep_alive);
        if self.head_request || f.status == 204 || f.status == 304 {
            self.state = State::Done;
            return Ok(());
        }
        if f.te {
            if f.http10 {
                // RFC 9112 §6.1: the framing of such a message is faulty.
                return Err(ScanError::Malformed("Transfer-Encoding in an HTTP/1.0 response"));
            }
            // With Content-Length too, the connection must close after this response.
            if f.length != Length::Absent {
                f.close = true;
            }
            self.state = if f.chunked {
                self.buf_len = 0;
                State::ChunkSize
            } else {
                f.close = true;
                State::UntilClose
            };
            return Ok(());
        }
        self.state = match f.length {
            Length::Absent => {
                f.close = true;
                State::UntilClose
            }
            Length::Bad(why) => return Err(ScanError::Malformed(why)),
            Length::Is(0) => State::Done,
            Length::Is(n) => State::Body(n),
        };
        Ok(())
    }

    /// One step in a body over `rest`, which is non-empty. Returns the bytes consumed.
    fn body_step(&mut self, rest: &[u8]) -> Result<usize, ScanError> {
        let first = rest.first().copied().unwrap_or(0);
        match self.state {
            State::Body(left) => {
                let (n, left) = take(left, rest.len());
                self.state = if left == 0 { State::Done } else { State::Body(left) };
                Ok(n)
            }
            State::UntilClose => Ok(rest.len()),
            State::ChunkSize => match memchr(b'\n', rest) {
                Some(i) => {
                    let line = rest.get(..i).unwrap_or_default();
                    let size = if self.buf_len == 0 {
                        parse_chunk_size(line, true)?
                    } else {
                        let whole = self.append(line);
                        parse_chunk_size(self.buffered(), whole)?
                    };
                    self.state = after_chunk_line(size);
                    Ok(i + 1)
                }
                None => {
                    if !self.append(rest) {
                        // The size and the start of an extension are in `buf`; the rest of
                        // the extension is stepped over.
                        let size = parse_chunk_size(self.buffered(), false)?;
                        self.state = State::ChunkExt(size);
                    }
                    Ok(rest.len())
                }
            },
            State::ChunkExt(size) => match memchr(b'\n', rest) {
                Some(i) => {
                    self.state = after_chunk_line(size);
                    Ok(i + 1)
                }
                None => Ok(rest.len()),
            },
            State::ChunkData(left) => {
                let (n, left) = take(left, rest.len());
                self.state = if left == 0 { State::ChunkCr } else { State::ChunkData(left) };
                Ok(n)
            }
            State::ChunkCr | State::ChunkLf => {
                self.state = match (self.state, first) {
                    (State::ChunkCr, b'\r') => State::ChunkLf,
                    (_, b'\n') => {
                        self.buf_len = 0;
                        State::ChunkSize
                    }
                    _ => return Err(ScanError::Malformed("chunk data not followed by CRLF")),
                };
                Ok(1)
            }
            State::TrailerStart => match first {
                b'\n' => {
                    self.state = State::Done;
                    Ok(1)
                }
                b'\r' => {
                    self.state = State::TrailerCr;
                    Ok(1)
                }
                _ => {
                    self.state = State::TrailerSkip;
                    Ok(0)
                }
            },
            State::TrailerCr => {
                if first != b'\n' {
                    return Err(ScanError::Malformed("bare CR in the trailer section"));
                }
                self.state = State::Done;
                Ok(1)
            }
            State::TrailerSkip => match memchr(b'\n', rest) {
                Some(i) => {
                    self.state = State::TrailerStart;
                    Ok(i + 1)
                }
                None => Ok(rest.len()),
            },
            // Head states go to `head_step`; Done and Failed never reach `scan`.
            _ => Ok(rest.len()),
        }
    }
}

/// Takes up to `left` of `avail` bytes: (taken, left afterwards).
fn take(left: u64, avail: usize) -> (usize, u64) {
    match usize::try_from(left) {
        Ok(l) if l < avail => (l, 0),
        _ => (avail, left.saturating_sub(avail as u64)),
    }
}

fn after_chunk_line(size: u64) -> State {
    if size == 0 { State::TrailerStart } else { State::ChunkData(size) }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn is_ows(b: &u8) -> bool {
    *b == b' ' || *b == b'\t'
}

fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().take_while(|b| is_ows(b)).count();
    s.get(n..).unwrap_or_default()
}

fn trim(s: &[u8]) -> &[u8] {
    let s = trim_start(s);
    let n = s.iter().rev().take_while(|b| is_ows(b)).count();
    s.get(..s.len() - n).unwrap_or_default()
}

/// The field a header line (or its first `LINE_CAP` bytes) names, if it is one that is read,
/// and its value.
fn split_field(line: &[u8]) -> Option<(Field, &[u8])> {
    let colon = memchr(b':', line)?;
    let name = line.get(..colon)?;
    // Whitespace before the colon is invalid; reading through it beats misframing the body.
    let name = name.get(..name.len() - name.iter().rev().take_while(|b| is_ows(b)).count())?;
    let field = if name.eq_ignore_ascii_case(b"content-length") {
        Field::ContentLength
    } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
        Field::TransferEncoding
    } else if name.eq_ignore_ascii_case(b"connection") {
        Field::Connection
    } else if name.eq_ignore_ascii_case(b"retry-after") {
        Field::RetryAfter
    } else {
        return None;
    };
    Some((field, trim(line.get(colon + 1..).unwrap_or_default())))
}

/// A Content-Length value; identical values repeated as a list are accepted (RFC 9110 §8.6).
fn content_length(value: &[u8]) -> Result<u64, &'static str> {
    let mut out = None;
    for part in value.split(|&b| b == b',').map(trim) {
        if part.is_empty() {
            return Err("bad Content-Length");
        }
        let mut n: u64 = 0;
        for &b in part {
            if !b.is_ascii_digit() {
                return Err("bad Content-Length");
            }
            n = n.checked_mul(10).and_then(|n| n.checked_add(u64::from(b - b'0'))).ok_or("bad Content-Length")?;
        }
        match out {
            Some(prev) if prev != n => return Err("conflicting Content-Length values"),
            _ => out = Some(n),
        }
    }
    out.ok_or("bad Content-Length")
}

/// Whether `prefix`, the start of a status line, can still become a valid one.
fn status_prefix_ok(prefix: &[u8]) -> bool {
    prefix.iter().take(13).enumerate().all(|(i, &b)| match i {
        0..=6 => b"HTTP/1.".get(i) == Some(&b),
        7 | 10 | 11 => b.is_ascii_digit(),
        8 => b == b' ',
        9 => (b'1'..=b'9').contains(&b),
        _ => b == b' ' || b == b'\r',
    })
}

/// Parses a status line: (status, spoke HTTP/1.0). `whole` is false when `raw` is only the
/// first `LINE_CAP` bytes of a longer line.
fn parse_status(raw: &[u8], whole: bool) -> Result<(u16, bool), ScanError> {
    let line = if whole { strip_cr(raw) } else { raw };
    if line.len() < 12 || !status_prefix_ok(line) || line.get(12).is_some_and(|&b| b != b' ') {
        return Err(BAD_STATUS);
    }
    let status = line.get(9..12).unwrap_or_default().iter().fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    Ok((status, line.get(7) == Some(&b'0')))
}

/// Parses a chunk-size line: `size [BWS ; extensions]`. `whole` is false when `raw` is only the
/// first `LINE_CAP` bytes of a longer line, whose size must then end inside those bytes.
fn parse_chunk_size(raw: &[u8], whole: bool) -> Result<u64, ScanError> {
    let line = if whole { strip_cr(raw) } else { raw };
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 16 {
        return Err(BAD_CHUNK);
    }
    let mut size: u64 = 0;
    for &b in line.get(..digits).unwrap_or_default() {
        let d = char::from(b).to_digit(16).ok_or(BAD_CHUNK)?;
        size = size.checked_mul(16).and_then(|s| s.checked_add(u64::from(d))).ok_or(BAD_CHUNK)?;
    }
    match trim_start(line.get(digits..).unwrap_or_default()).first() {
        None if whole => Ok(size),
        Some(b';') => Ok(size),
        _ => Err(BAD_CHUNK),
    }
}

#[cfg(test)]
mod tests;
