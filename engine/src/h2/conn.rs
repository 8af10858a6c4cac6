//! One client HTTP/2 connection as a Sans-I/O state machine (RFC 9113): received plaintext and
//! the clock go in; bytes to send and completed responses come out.
//!
//! Made for a load generator: every stream sends one of the run's requests (a header block
//! encoded once per run, and a body), and of a response only its status, its timing and the
//! size of its body matter. So streams carry no headers or body buffers; the only per-connection
//! buffers are reused for the whole connection's life (received bytes that end mid-frame, a
//! header block split across CONTINUATION frames, and the output), and nothing is allocated per
//! response. Receive windows are large and released in batches so that a fast server is never
//! held back by our WINDOW_UPDATEs, and few of them are sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::frame::{self, Frame, FrameError, code, setting};
use super::hpack::{self, HpackError};
use crate::plan::SET_COOKIE;
use crate::session::{Extracted, Kept, KeptCheckTable, OpenStreams, SpareKept, judge, kept_checks};
use crate::stats::RetryAfter;
use crate::template::{self, Fill};

/// Our receive window, for every stream and for the connection.
const RECV_WINDOW: u32 = 16 << 20;
/// Consumed receive window is handed back once this much has piled up: few WINDOW_UPDATEs,
/// and the peer never runs dry.
const RELEASE_AT: u32 = RECV_WINDOW / 2;
/// How many streams we open before the peer's SETTINGS say how many it allows: RFC 9113 §6.5.2
/// recommends servers allow at least 100.
const ASSUMED_PEER_STREAMS: u32 = 100;
/// A response header block larger than this is refused rather than buffered.
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// The HPACK dynamic table a peer may use until it has acknowledged our HEADER_TABLE_SIZE 0.
const DEFAULT_HEADER_TABLE: usize = 4096;
/// The largest stream id a client may use.
const MAX_STREAM_ID: u32 = frame::MAX_WINDOW;

/// What we ask of the peer, in our SETTINGS.
const OUR_SETTINGS: [(u16, u32); 4] = [
    // We never index, and the decoder needs no table once the peer has seen this.
    (setting::HEADER_TABLE_SIZE, 0),
    (setting::ENABLE_PUSH, 0),
    (setting::INITIAL_WINDOW_SIZE, RECV_WINDOW),
    (setting::MAX_FRAME_SIZE, frame::DEFAULT_MAX_FRAME_SIZE),
];

/// Something the caller must count or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// A complete response (END_STREAM seen, after HEADERS [+ DATA] [+ trailers]); `due` is
    /// when its request was due, `sent_at` when it was started; `first_byte_at` when its first HEADERS frame arrived.
    Response {
        stream: u32,
        request: u32,
        status: u16,
        due: Instant,
        sent_at: Instant,
        first_byte_at: Instant,
        body_bytes: u64,
    },
    /// The response that follows, on `stream`, was judged by its checks on what is kept (see
    /// `session::Event::Judged`).
    Judged { stream: u32, failed: u64, extracted: Extracted },
    /// The response that follows, on `stream`, carried `retry-after` in its final HEADERS.
    RetryAfter { stream: u32, status: u16, value: RetryAfter },
    /// The peer reset one stream (RST_STREAM): a stream error; the connection goes on.
    StreamReset { stream: u32, request: u32, code: u32, sent_at: Instant },
    /// GOAWAY: the streams in `unanswered` (above `last_stream_id`: their ids, when they were
    /// sent and which requests they carried) will not be answered and are
    /// already closed: report them as failed, do not resend them on this connection. Streams
    /// below finish; no new streams start; reconnect when `open_streams() == 0`. A `code` other
    /// than NO_ERROR means the peer saw an error (report it as a protocol error).
    GoAway { last_stream_id: u32, code: u32, unanswered: Vec<(u32, Instant, u32)> },
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS is below what we want: `can_start` is held to it.
    StreamsLimited { limit: u32 },
}

/// Why the connection cannot go on. Every one is reported as a protocol error; the connection
/// must be closed (a GOAWAY saying why is already queued in the output).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    #[error("HTTP/2 framing error: {0}")]
    Frame(#[from] FrameError),
    #[error("HTTP/2 header compression error: {0}")]
    Hpack(#[from] HpackError),
    #[error("HTTP/2 protocol error: {0}")]
    Protocol(&'static str),
    #[error("HTTP/2 flow-control error: {0}")]
    FlowControl(&'static str),
}

impl ConnError {
    /// The GOAWAY error code that tells the peer what it did wrong.
    pub(crate) fn code(&self) -> u32 {
        match self {
            ConnError::Frame(FrameError::TooLarge { .. } | FrameError::BadLength { .. }) => code::FRAME_SIZE_ERROR,
            ConnError::Frame(_) | ConnError::Protocol(_) => code::PROTOCOL_ERROR,
            ConnError::Hpack(_) => code::COMPRESSION_ERROR,
            ConnError::FlowControl(_) => code::FLOW_CONTROL_ERROR,
        }
    }
}

/// One request in flight, in one cache line. At 64 × 100 a thread's streams do not stay in
/// L2, and touching a response's stream for the first time was half of `process` while it
/// spanned two lines; so its times are nanoseconds from `sent_at`, its id lives beside it in
/// `OpenStreams` and a `retry-after` value in `Connection::retry_after`.
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
struct Stream {
    sent_at: Instant,
    /// When the request was due, from `sent_at`: 0 in the closed model, below 0 when it left late.
    due: i64,
    /// When its first HEADERS frame arrived, from `sent_at`; `NO_BYTE_YET` until then.
    first_byte: u64,
    body_bytes: u64,
    /// How much of the request body went out (bodies are at most `MAX_BODY_BYTES`).
    body_sent: u32,
    /// Which of the run's requests it carries.
    request: u32,
    /// May go negative when the peer lowers SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.9.2);
    /// within ±(2^31 - 1), which the frames that change it are checked against.
    send_window: i32,
    recv_window: i32,
    /// Received DATA not yet handed back with WINDOW_UPDATE.
    recv_unreleased: u32,
    /// The final (non-1xx) status once its HEADERS arrived; 0 before.
    status: u16,
    /// Its final HEADERS carried `retry-after`: the value waits in `Connection::retry_after`.
    retry_after: bool,
    /// What it receives is kept for its checks, in `Connection::kept`.
    kept: bool,
}

const _: () = assert!(std::mem::size_of::<Stream>() == 64);

/// `Stream::first_byte` before any of the response arrived.
const NO_BYTE_YET: u64 = u64::MAX;

/// Nanoseconds from `base` to `t`, below 0 when `t` is earlier (saturating at about 292 years).
/// The closed model's requests are due when sent: that case costs a comparison, not a subtraction.
fn nanos_from(base: Instant, t: Instant) -> i64 {
    if t == base {
        return 0;
    }
    match t.checked_duration_since(base) {
        Some(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        None => i64::try_from(base.duration_since(t).as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The instant `nanos` from `base`, as `nanos_from` measured it.
fn at_nanos(base: Instant, nanos: i64) -> Instant {
    if nanos == 0 {
        return base;
    }
    let d = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 { base + d } else { base.checked_sub(d).unwrap_or(base) }
}

/// A window after `change`, or `None` when it leaves ±(2^31 - 1).
fn changed_window(window: i32, change: i64) -> Option<i32> {
    let w = i64::from(window) + change;
    (w.unsigned_abs() <= u64::from(frame::MAX_WINDOW)).then_some(w as i32)
}

/// A header block whose HEADERS frame lacked END_HEADERS; its fragments are in `Connection::block`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    stream: u32,
    end_stream: bool,
}

/// The block a request sends (see `Connection::next_block`).
enum Block {
    First,
    Indexed,
    Plain,
    /// The plain block after a dynamic table size update to this size.
    SizeUpdate(u32),
}

/// Which of the request's header blocks the next request sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Indexing {
    /// No request yet: the first one adds its fields to the server's table, if there is room.
    NotYet,
    /// The fields are in the server's table: requests name them by index.
    Indexed,
    /// The plain block on every request: the server's table has no room, or no longer has.
    Plain,
}

/// One of the run's requests as HTTP/2 sends it: its header blocks and its body.
#[derive(Debug)]
pub(crate) struct Request {
    pub blocks: hpack::RequestBlocks,
    pub body: Box<[u8]>,
    /// With slots, the blocks and body it is sent as, filled per request.
    pub template: Option<Box<Template>>,
}

/// A templated request's blocks with holes, and its body.
#[derive(Debug)]
pub(crate) struct Template {
    pub blocks: hpack::TemplateBlocks,
    /// It has slots to fill: without, only its user's cookies make it worth filling.
    pub slots: bool,
    /// With slots, filled per request into the stream's place in `Connection::filled_bodies`
    /// (and without content-length, which the body's end gives); None: `Request::body`.
    pub body: Option<template::Template>,
}

/// The body stream at place `place` sends for `request`: its own filled one, or the run's.
#[inline]
fn body_of<'a>(requests: &'a [Request], filled: &'a [Vec<u8>], place: usize, request: u32) -> &'a [u8] {
    let r = &requests[request as usize];
    match r.template.as_ref().is_some_and(|t| t.body.is_some()) {
        true => filled.get(place).map_or(&[], Vec::as_slice),
        false => &r.body,
    }
}

pub(crate) struct Connection {
    /// The run's requests, shared by every connection. Each one's indexing pair adds the same
    /// fields to the server's table (a mix's shared ones), so any may be a connection's first.
    requests: Arc<[Request]>,
    indexing: Indexing,
    /// SETTINGS_HEADER_TABLE_SIZE: the room the server's decoder gives our encoder.
    peer_header_table: u32,
    /// The server lowered its table below what our fields need: the next block must open with
    /// a dynamic table size update (RFC 7541 §4.2) to this size.
    table_size_update: Option<u32>,
    want_streams: u32,
    /// Open streams (client ids are odd: `id >> 1` numbers them).
    streams: OpenStreams<Stream>,
    /// The `retry-after` values of open streams whose final HEADERS carried one, by stream id.
    retry_after: Vec<(u32, RetryAfter)>,
    /// Per request, its checks on header fields and body; empty when none has.
    kept_checks: KeptCheckTable,
    /// What is kept of open streams whose requests have such checks, by stream id.
    kept: Vec<(u32, Kept)>,
    spare_kept: SpareKept,
    next_stream_id: u32,
    /// Streams whose body has not all gone out.
    bodies_pending: usize,
    out: Vec<u8>,
    /// Received bytes that end inside a frame.
    inbuf: Vec<u8>,
    /// Fragments of a header block being continued.
    block: Vec<u8>,
    /// Templated requests' filled bodies, by their stream's place in `streams`.
    filled_bodies: Vec<Vec<u8>>,
    /// A templated request's filled header block.
    filled_block: Vec<u8>,
    pending: Option<Pending>,
    hpack: hpack::Decoder,
    peer_settings_seen: bool,
    peer_max_streams: Option<u32>,
    peer_initial_window: u32,
    peer_max_frame: u32,
    /// The limit last reported with StreamsLimited.
    reported_limit: Option<u32>,
    settings_acked: bool,
    send_window: i64,
    recv_window: i64,
    recv_unreleased: u32,
    /// The last stream id of the lowest GOAWAY received.
    goaway: Option<u32>,
    /// Streams below this id were started before the output was last taken: their HEADERS
    /// left in a send.
    taken_below: u32,
    failed: bool,
}

impl Connection {
    /// `requests`: the run's requests, encoded once per run and shared (at least one);
    /// `want_streams`: streams to keep in flight (-p).
    /// Queues the preface, our SETTINGS and a WINDOW_UPDATE raising the connection window.
    pub(crate) fn new(requests: Arc<[Request]>, want_streams: u32) -> Self {
        let mut out = Vec::with_capacity(4096);
        frame::encode_preface(&mut out, &OUR_SETTINGS);
        frame::encode_window_update(&mut out, 0, RECV_WINDOW - frame::DEFAULT_WINDOW);
        Connection {
            requests,
            indexing: Indexing::NotYet,
            peer_header_table: DEFAULT_HEADER_TABLE as u32,
            table_size_update: None,
            want_streams: want_streams.max(1),
            streams: OpenStreams::new(want_streams, 1),
            retry_after: Vec::new(),
            kept_checks: Arc::from([]),
            kept: Vec::new(),
            spare_kept: SpareKept::default(),
            next_stream_id: 1,
            bodies_pending: 0,
            out,
            inbuf: Vec::new(),
            block: Vec::new(),
            filled_bodies: Vec::new(),
            filled_block: Vec::new(),
            pending: None,
            hpack: hpack::Decoder::new(DEFAULT_HEADER_TABLE),
            peer_settings_seen: false,
            peer_max_streams: None,
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            reported_limit: None,
            settings_acked: false,
            send_window: i64::from(frame::DEFAULT_WINDOW),
            recv_window: i64::from(RECV_WINDOW),
            recv_unreleased: 0,
            goaway: None,
            taken_below: 1,
            failed: false,
        }
    }

    /// How many more requests may start now: min(want, the peer's MAX_CONCURRENT_STREAMS) minus
    /// the open streams; 0 after GOAWAY, after an error, or once stream ids run out.
    pub(crate) fn can_start(&self) -> u32 {
        if self.is_goaway() || self.failed {
            return 0;
        }
        let peer = self.peer_max_streams.unwrap_or(ASSUMED_PEER_STREAMS);
        self.want_streams.min(peer).saturating_sub(self.open_streams() as u32)
    }

    /// Starts `request` (an index into the run's requests, which the caller keeps in range),
    /// due at `due`: a new stream id, HEADERS (+CONTINUATION) and as much of the body as the
    /// windows allow queued; the rest follows WINDOW_UPDATEs. Returns the stream id.
    /// Whether the checks of `request` read a response's header fields.
    fn wants_fields(&self, request: u32) -> bool {
        kept_checks(&self.kept_checks, request).is_some_and(|c| c.wants_headers())
    }

    /// Keeps what the checks of requests with checks on the response read, and judges them.
    pub(crate) fn with_kept_checks(mut self, table: KeptCheckTable) -> Self {
        self.kept_checks = table;
        self
    }

    pub(crate) fn start_request(&mut self, now: Instant, due: Instant, request: u32) -> Option<u32> {
        self.start(now, due, request, None)
    }

    /// Whether request `request` is filled from `fill` when it starts (with `start_filled`):
    /// it has a template that `fill` needs (`Fill::needed_by`).
    pub(crate) fn fills(&self, request: u32, fill: &Fill<'_>) -> bool {
        self.requests.get(request as usize).and_then(|r| r.template.as_deref()).is_some_and(|t| fill.needed_by(t.slots))
    }

    /// `start_request` of a templated request, its slots filled from `fill`.
    pub(crate) fn start_filled(
        &mut self,
        now: Instant,
        due: Instant,
        request: u32,
        fill: &mut Fill<'_>,
    ) -> Option<u32> {
        self.start(now, due, request, Some(fill))
    }

    fn start(&mut self, now: Instant, due: Instant, request: u32, fill: Option<&mut Fill<'_>>) -> Option<u32> {
        if self.can_start() == 0 {
            return None;
        }
        let id = self.next_stream_id;
        self.next_stream_id += 2;
        // The place the stream will take: where a filled body waits.
        let place = self.streams.next_place();
        let has_body = match fill {
            Some(fill) if self.fills(request, fill) => {
                // Shared with the template while it fills this connection's buffers.
                let requests = self.requests.clone();
                let template = requests[request as usize].template.as_deref()?;
                let has_body = match &template.body {
                    Some(body) => {
                        if self.filled_bodies.len() <= place {
                            self.filled_bodies.resize_with(place + 1, Vec::new);
                        }
                        let filled = &mut self.filled_bodies[place];
                        filled.clear();
                        body.render(fill, filled);
                        !filled.is_empty()
                    }
                    None => !requests[request as usize].body.is_empty(),
                };
                self.encode_filled_headers(id, template, fill, !has_body);
                has_body
            }
            _ => {
                let has_body = !self.requests[request as usize].body.is_empty();
                self.encode_request_headers(id, request, !has_body);
                has_body
            }
        };
        let stream = Stream {
            sent_at: now,
            due: nanos_from(now, due),
            first_byte: NO_BYTE_YET,
            body_bytes: 0,
            body_sent: 0,
            request,
            // Both at most 2^31 - 1: SETTINGS checks the peer's, and ours is a constant.
            send_window: self.peer_initial_window as i32,
            recv_window: RECV_WINDOW as i32,
            recv_unreleased: 0,
            status: 0,
            retry_after: false,
            kept: kept_checks(&self.kept_checks, request).is_some(),
        };
        if let Some(checks) = kept_checks(&self.kept_checks, request) {
            let mut kept = self.spare_kept.take();
            checks.prepare(&mut kept);
            self.kept.push((id, kept));
        }
        let at = self.streams.insert(u64::from(id), stream);
        debug_assert_eq!(at, place);
        if has_body {
            self.bodies_pending += 1;
            self.send_bodies();
        }
        Some(id)
    }

    /// The request's HEADERS on stream `id`: the block that adds its fields to the server's
    /// table on the first request, the indexed block after, the plain one where the server's
    /// table has no room for them.
    fn encode_request_headers(&mut self, id: u32, request: u32, end_stream: bool) {
        let table_size = self.requests[request as usize].blocks.table_size;
        let which = self.next_block(table_size);
        let blocks = &self.requests[request as usize].blocks;
        let block = match which {
            Block::First => &blocks.first,
            Block::Indexed => &blocks.indexed,
            Block::Plain => &blocks.plain,
            Block::SizeUpdate(size) => {
                let mut block = Vec::with_capacity(blocks.plain.len() + 6);
                hpack::size_update(&mut block, size as usize);
                block.extend_from_slice(&blocks.plain);
                frame::encode_headers(&mut self.out, id, &block, end_stream, self.peer_max_frame);
                return;
            }
        };
        frame::encode_headers(&mut self.out, id, block, end_stream, self.peer_max_frame);
    }

    /// `encode_request_headers` of a templated request, its holes filled from `fill`.
    fn encode_filled_headers(&mut self, id: u32, template: &Template, fill: &mut Fill<'_>, end_stream: bool) {
        let table_size = self.requests[0].blocks.table_size;
        self.filled_block.clear();
        let blocks = &template.blocks;
        let block = match self.next_block(table_size) {
            Block::First => &blocks.first,
            Block::Indexed => &blocks.indexed,
            Block::Plain => &blocks.plain,
            Block::SizeUpdate(size) => {
                hpack::size_update(&mut self.filled_block, size as usize);
                &blocks.plain
            }
        };
        block.render(fill, &mut self.filled_block);
        if !fill.cookie.is_empty() {
            hpack::cookie(&mut self.filled_block, fill.cookie);
        }
        frame::encode_headers(&mut self.out, id, &self.filled_block, end_stream, self.peer_max_frame);
    }

    /// Which block the next request sends, its fields taking `table_size` in the server's
    /// table; it settles the indexing on the connection's first request.
    fn next_block(&mut self, table_size: usize) -> Block {
        if self.indexing == Indexing::NotYet {
            let room = table_size > 0 && table_size <= self.peer_header_table as usize;
            self.indexing = if room { Indexing::Indexed } else { Indexing::Plain };
            if room {
                return Block::First;
            }
        }
        if let Some(size) = self.table_size_update.take() {
            return Block::SizeUpdate(size);
        }
        if self.indexing == Indexing::Indexed { Block::Indexed } else { Block::Plain }
    }

    /// Feeds received plaintext; pushes what happened onto `events` (the caller's reused Vec).
    /// Events pushed before an error stand. After an error the connection is dead: a GOAWAY
    /// saying why is queued, which the caller may flush from `take_output` before closing; the
    /// streams still open (`open_streams`) are the caller's to count as failed.
    pub(crate) fn receive(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) -> Result<(), ConnError> {
        if self.failed {
            return Err(ConnError::Protocol("data received after a connection error"));
        }
        let result = self.receive_inner(bytes, now, events);
        if let Err(e) = &result {
            self.failed = true;
            // We accept no streams from the peer, so the last stream id is 0.
            frame::encode_goaway(&mut self.out, 0, e.code(), b"");
        }
        result
    }

    /// Cancels every stream whose request started before `cutoff` (RST_STREAM CANCEL queued):
    /// they ran out of time. `expired` is told each one's request; returns how many.
    pub(crate) fn expire(&mut self, cutoff: Instant, mut expired: impl FnMut(u32)) -> u32 {
        let mut n = 0;
        for i in 0..self.streams.places() {
            if self.streams.is_open(i) && self.streams.get(i).sent_at < cutoff {
                let (id, s, _) = self.remove(i);
                frame::encode_rst_stream(&mut self.out, id, code::CANCEL);
                expired(s.request);
                n += 1;
            }
        }
        n
    }

    /// Appends everything queued to send: one buffer, so all streams share one socket write.
    pub(crate) fn take_output(&mut self, out: &mut Vec<u8>) {
        self.taken_below = self.next_stream_id;
        if out.is_empty() {
            // Swap rather than copy; both buffers keep their capacity.
            std::mem::swap(out, &mut self.out);
        } else {
            out.extend_from_slice(&self.out);
            self.out.clear();
        }
    }

    /// Whether anything waits in `take_output`.
    pub(crate) fn wants_write(&self) -> bool {
        !self.out.is_empty()
    }

    #[cfg(test)]
    pub(crate) fn peer_max_concurrent_streams(&self) -> Option<u32> {
        self.peer_max_streams
    }

    /// No new streams will start: the peer sent GOAWAY (or stream ids ran out). Reconnect once
    /// `open_streams() == 0`.
    pub(crate) fn is_goaway(&self) -> bool {
        self.goaway.is_some() || self.next_stream_id > MAX_STREAM_ID
    }

    /// The peer's SETTINGS arrived: its limits are known.
    pub(crate) fn peer_settings_seen(&self) -> bool {
        self.peer_settings_seen
    }

    /// The request each open stream carries.
    pub(crate) fn open_requests(&self) -> impl Iterator<Item = u32> + '_ {
        self.streams.iter().map(|(_, s)| s.request)
    }

    pub(crate) fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// When the oldest open stream started.
    pub(crate) fn oldest_stream_start(&self) -> Option<Instant> {
        self.streams.iter().map(|(_, s)| s.sent_at).min()
    }

    /// Open streams whose HEADERS were taken with `take_output`: the server may have seen them.
    pub(crate) fn sent_open_streams(&self) -> usize {
        self.streams.iter().filter(|&(id, _)| id < u64::from(self.taken_below)).count()
    }

    /// The peer acknowledged our SETTINGS.
    #[cfg(test)]
    pub(crate) fn settings_acked(&self) -> bool {
        self.settings_acked
    }

    fn receive_inner(&mut self, bytes: &[u8], now: Instant, events: &mut Vec<Event>) -> Result<(), ConnError> {
        let seen = self.inbuf.len();
        if !self.peer_settings_seen && seen < 5 {
            // A server that does not speak HTTP/2 answers our preface in HTTP/1.x; its status
            // line would otherwise read as an absurd frame length.
            let n = (5 - seen).min(bytes.len());
            if seen + n == 5 && self.inbuf.iter().chain(&bytes[..n]).eq(b"HTTP/") {
                return Err(ConnError::Protocol("the server answered in HTTP/1.x, not HTTP/2"));
            }
        }
        if self.inbuf.is_empty() {
            // The common case: whole frames straight from the caller's buffer, no copy.
            let used = self.process(bytes, now, events)?;
            self.inbuf.extend_from_slice(&bytes[used..]);
        } else {
            let mut buf = std::mem::take(&mut self.inbuf);
            buf.extend_from_slice(bytes);
            let result = self.process(&buf, now, events);
            if let Ok(used) = result {
                buf.drain(..used);
            }
            self.inbuf = buf;
            result?;
        }
        self.send_bodies();
        Ok(())
    }

    /// Handles every whole frame in `buf`; returns how many bytes they took.
    fn process(&mut self, buf: &[u8], now: Instant, events: &mut Vec<Event>) -> Result<usize, ConnError> {
        let mut used = 0;
        let mut prefetched = 0;
        loop {
            if used >= prefetched {
                prefetched = self.prefetch_streams(buf, used);
            }
            let Some(raw) = frame::split(&buf[used..], frame::DEFAULT_MAX_FRAME_SIZE)? else { break };
            used += raw.len;
            if !self.plain_frame(raw.head, raw.payload, now, events)? {
                self.on_frame(frame::parse(raw.head, raw.payload)?, now, events)?;
            }
        }
        Ok(used)
    }

    /// Nearly every frame of a run: a DATA frame without padding, or a HEADERS frame that is a
    /// whole header block without padding or priority, between header blocks. Handled
    /// straight from its header, without the `Frame` that `on_frame` matches on (building and
    /// moving that was a sixth of HTTP/2's own time at 64 × 100); false for any other frame,
    /// which is left to `frame::parse` and `on_frame`.
    fn plain_frame(
        &mut self,
        head: frame::Head,
        payload: &[u8],
        now: Instant,
        events: &mut Vec<Event>,
    ) -> Result<bool, ConnError> {
        use frame::{flag, kind};
        if head.stream == 0
            || head.flags & (flag::PADDED | flag::PRIORITY) != 0
            || self.pending.is_some()
            || !self.peer_settings_seen
        {
            return Ok(false);
        }
        let end_stream = head.flags & flag::END_STREAM != 0;
        match head.kind {
            kind::DATA => self.on_data(head.stream, payload, end_stream, head.len, events)?,
            kind::HEADERS if head.flags & flag::END_HEADERS != 0 => {
                self.on_headers(head.stream, payload, end_stream, true, now, events)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn on_frame(&mut self, f: Frame<'_>, now: Instant, events: &mut Vec<Event>) -> Result<(), ConnError> {
        if let Some(p) = self.pending {
            // A header block is one unit: nothing may come between its frames (RFC 9113 §6.10).
            match f {
                Frame::Continuation { stream, .. } if stream == p.stream => {}
                _ => return Err(ConnError::Protocol("header block interrupted before END_HEADERS")),
            }
        }
        if !self.peer_settings_seen && !matches!(f, Frame::Settings { ack: false, .. }) {
            return Err(ConnError::Protocol("the server's first frame was not SETTINGS"));
        }
        match f {
            Frame::Data { stream, data, end_stream, flow_len } => {
                self.on_data(stream, data, end_stream, flow_len, events)
            }
            Frame::Headers { stream, block, end_stream, end_headers, .. } => {
                self.on_headers(stream, block, end_stream, end_headers, now, events)
            }
            Frame::Continuation { block, end_headers, .. } => {
                let Some(p) = self.pending else {
                    return Err(ConnError::Protocol("CONTINUATION without a HEADERS frame before it"));
                };
                if self.block.len() + block.len() > MAX_HEADER_BLOCK {
                    return Err(ConnError::Protocol("response header block larger than 1 MiB"));
                }
                self.block.extend_from_slice(block);
                if end_headers {
                    self.pending = None;
                    let assembled = std::mem::take(&mut self.block);
                    let i = self.index(p.stream);
                    let result = self.on_header_block(p.stream, i, &assembled, p.end_stream, events);
                    self.block = assembled;
                    self.block.clear();
                    result?;
                }
                Ok(())
            }
            Frame::RstStream { stream, code } => {
                self.check_stream(stream)?;
                if let Some(i) = self.index(stream) {
                    let (_, s, _) = self.remove(i);
                    events.push(Event::StreamReset { stream, request: s.request, code, sent_at: s.sent_at });
                }
                Ok(())
            }
            Frame::Settings { ack: true, .. } => {
                self.settings_acked = true;
                // The peer's encoder now works within our HEADER_TABLE_SIZE of 0.
                self.hpack.set_max_table_size(0);
                Ok(())
            }
            Frame::Settings { ack: false, params } => {
                self.peer_settings_seen = true;
                for (id, value) in params.iter() {
                    self.apply_setting(id, value, events)?;
                }
                frame::encode_settings_ack(&mut self.out);
                Ok(())
            }
            Frame::Ping { ack, data } => {
                if !ack {
                    frame::encode_ping(&mut self.out, true, data);
                }
                Ok(())
            }
            Frame::GoAway { last_stream_id, code, .. } => {
                // A later GOAWAY may only lower the last id; never let it raise it again.
                let last = self.goaway.map_or(last_stream_id, |old| old.min(last_stream_id));
                self.goaway = Some(last);
                let mut unanswered = Vec::new();
                for i in 0..self.streams.places() {
                    if self.streams.is_open(i) && self.streams.id(i) > u64::from(last) {
                        let (id, s, _) = self.remove(i);
                        unanswered.push((id, s.sent_at, s.request));
                    }
                }
                unanswered.sort_unstable_by_key(|&(id, ..)| id);
                events.push(Event::GoAway { last_stream_id, code, unanswered });
                Ok(())
            }
            Frame::WindowUpdate { stream: 0, increment } => {
                self.send_window += i64::from(increment);
                if self.send_window > i64::from(frame::MAX_WINDOW) {
                    return Err(ConnError::FlowControl("connection window above 2^31-1"));
                }
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => {
                self.check_stream(stream)?;
                if let Some(i) = self.index(stream) {
                    let s = self.streams.get_mut(i);
                    s.send_window = changed_window(s.send_window, i64::from(increment))
                        .ok_or(ConnError::FlowControl("stream window above 2^31-1"))?;
                }
                Ok(())
            }
            Frame::PushPromise { .. } => Err(ConnError::Protocol("PUSH_PROMISE although we disabled push")),
            Frame::Priority { .. } | Frame::Unknown { .. } => Ok(()),
        }
    }

    fn on_data(
        &mut self,
        stream: u32,
        data: &[u8],
        end_stream: bool,
        flow_len: u32,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        self.check_stream(stream)?;
        // The connection window counts every DATA frame, even one for a stream already closed.
        self.recv_window -= i64::from(flow_len);
        if self.recv_window < 0 {
            return Err(ConnError::FlowControl("the server overran the connection window"));
        }
        self.recv_unreleased += flow_len;
        if self.recv_unreleased >= RELEASE_AT {
            frame::encode_window_update(&mut self.out, 0, self.recv_unreleased);
            self.recv_window += i64::from(self.recv_unreleased);
            self.recv_unreleased = 0;
        }
        let Some(i) = self.index(stream) else { return Ok(()) };
        let s = self.streams.get_mut(i);
        if s.status == 0 {
            return Err(ConnError::Protocol("DATA before the response HEADERS"));
        }
        s.recv_window = match changed_window(s.recv_window, -i64::from(flow_len)) {
            Some(w) if w >= 0 => w,
            _ => return Err(ConnError::FlowControl("the server overran a stream window")),
        };
        s.body_bytes += data.len() as u64;
        if s.kept
            && let Some((_, kept)) = self.kept.iter_mut().find(|(id, _)| *id == stream)
        {
            kept.push(data);
        }
        if end_stream {
            self.complete(i, events);
        } else {
            s.recv_unreleased += flow_len;
            if s.recv_unreleased >= RELEASE_AT {
                frame::encode_window_update(&mut self.out, stream, s.recv_unreleased);
                // Never above RECV_WINDOW: what was unreleased came out of it.
                s.recv_window += s.recv_unreleased as i32;
                s.recv_unreleased = 0;
            }
        }
        Ok(())
    }

    /// A whole header block of `stream`, at `streams[i]` if still open: decoded even for a
    /// closed stream, since it may change the dynamic table that later blocks refer to.
    fn on_header_block(
        &mut self,
        stream: u32,
        i: Option<usize>,
        block: &[u8],
        end_stream: bool,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        let kept = if self.kept.is_empty() { None } else { i.map(|i| *self.streams.get(i)) };
        let decoded = match kept {
            // The head of a response whose fields a check reads: every field decoded into what
            // is kept of it (an informational head's are forgotten when the next one comes).
            Some(s) if s.kept && s.status == 0 && self.wants_fields(s.request) => {
                let only_set_cookie = kept_checks(&self.kept_checks, s.request).is_some_and(|c| c.only_set_cookie());
                match self.kept.iter_mut().find(|(id, _)| *id == stream) {
                    // Only a jar reads them: a head without set-cookie costs what `decode` does.
                    Some((_, kept)) if only_set_cookie => {
                        kept.clear_fields();
                        self.hpack.decode_set_cookies(block, &mut |value| kept.push_field(SET_COOKIE, value))?
                    }
                    Some((_, kept)) => {
                        kept.clear_fields();
                        self.hpack.decode_collecting(block, &mut |name, value| kept.push_field(name, value))?
                    }
                    None => self.hpack.decode(block)?,
                }
            }
            _ => self.hpack.decode(block)?,
        };
        let Some(i) = i else { return Ok(()) };
        let s = self.streams.get_mut(i);
        if s.status == 0 {
            let status = decoded.status.ok_or(ConnError::Protocol("response HEADERS without :status"))?;
            if (100..200).contains(&status) {
                // Informational: the final response is still to come.
                if end_stream {
                    return Err(ConnError::Protocol("an informational response ended its stream"));
                }
                return Ok(());
            }
            s.status = status;
            if let Some(value) = decoded.retry_after {
                s.retry_after = true;
                self.retry_after.push((stream, value));
            }
        } else if !end_stream {
            return Err(ConnError::Protocol("trailers without END_STREAM"));
        }
        if end_stream {
            self.complete(i, events);
        }
        Ok(())
    }

    /// The response on `streams[i]` is complete.
    fn complete(&mut self, i: usize, events: &mut Vec<Event>) {
        if self.streams.get(i).kept {
            let (id, request) = (self.streams.id(i) as u32, self.streams.get(i).request);
            if let Some((_, kept)) = self.kept.iter().find(|(k, _)| *k == id)
                && let Some((failed, extracted)) = judge(&self.kept_checks, request, kept)
            {
                events.push(Event::Judged { stream: id, failed, extracted });
            }
        }
        let (id, s, retry_after) = self.remove(i);
        if (s.body_sent as usize) < body_of(&self.requests, &self.filled_bodies, i, s.request).len() {
            // The server answered before reading the whole body; stop sending it (RFC 9113 §8.1).
            frame::encode_rst_stream(&mut self.out, id, code::NO_ERROR);
        }
        let first_byte_at = match s.first_byte {
            NO_BYTE_YET => s.sent_at,
            nanos => s.sent_at + Duration::from_nanos(nanos),
        };
        if let Some(value) = retry_after {
            events.push(Event::RetryAfter { stream: id, status: s.status, value });
        }
        events.push(Event::Response {
            stream: id,
            request: s.request,
            status: s.status,
            due: at_nanos(s.sent_at, s.due),
            sent_at: s.sent_at,
            first_byte_at,
            body_bytes: s.body_bytes,
        });
    }

    /// Closes `streams[i]`: returns its id, what it held and its `retry-after` value, taken
    /// out of the side list. Its slot may go on pointing here; `index` checks.
    fn remove(&mut self, i: usize) -> (u32, Stream, Option<RetryAfter>) {
        let s = *self.streams.get(i);
        let id = self.streams.remove(i) as u32;
        if (s.body_sent as usize) < body_of(&self.requests, &self.filled_bodies, i, s.request).len() {
            self.bodies_pending -= 1;
        }
        let retry_after = if s.retry_after {
            let at = self.retry_after.iter().position(|&(stream, _)| stream == id);
            at.map(|at| self.retry_after.swap_remove(at).1)
        } else {
            None
        };
        if s.kept
            && let Some(at) = self.kept.iter().position(|&(stream, _)| stream == id)
        {
            let (_, kept) = self.kept.swap_remove(at);
            self.spare_kept.give(kept);
        }
        (id, s, retry_after)
    }

    /// A HEADERS frame's header block fragment (padding and priority already stepped over).
    fn on_headers(
        &mut self,
        stream: u32,
        block: &[u8],
        end_stream: bool,
        end_headers: bool,
        now: Instant,
        events: &mut Vec<Event>,
    ) -> Result<(), ConnError> {
        self.check_stream(stream)?;
        let i = self.index(stream);
        if let Some(i) = i {
            let s = self.streams.get_mut(i);
            if s.first_byte == NO_BYTE_YET {
                s.first_byte = now.saturating_duration_since(s.sent_at).as_nanos() as u64;
            }
        }
        if end_headers {
            // The usual case: the whole block in one frame, decoded in place.
            self.on_header_block(stream, i, block, end_stream, events)
        } else {
            self.block.clear();
            self.block.extend_from_slice(block);
            self.pending = Some(Pending { stream, end_stream });
            Ok(())
        }
    }

    /// Asks the CPU for the streams that the next `PREFETCH` HEADERS frames from `buf[at..]`
    /// answer, all at once, before they are handled one by one; returns where it stopped. With
    /// many streams open their memory is out of cache, and fetched one at a time the misses
    /// were half of `process`. A few at a time, so the first are not evicted by the last.
    fn prefetch_streams(&self, buf: &[u8], mut at: usize) -> usize {
        const PREFETCH: usize = 16;
        let mut fetched = 0;
        while fetched < PREFETCH
            && let Some(head) = buf.get(at..).and_then(|b| b.first_chunk::<{ frame::HEADER_LEN }>())
        {
            let head = frame::Head::parse(head);
            if head.kind == frame::kind::HEADERS && self.streams.prefetch(u64::from(head.stream)) {
                fetched += 1;
            }
            at += frame::HEADER_LEN + head.len as usize;
        }
        at
    }

    fn index(&self, stream: u32) -> Option<usize> {
        self.streams.index(u64::from(stream))
    }

    /// A frame may name a stream we opened (open or closed since), never one we did not.
    fn check_stream(&self, stream: u32) -> Result<(), ConnError> {
        if stream.is_multiple_of(2) || stream >= self.next_stream_id {
            return Err(ConnError::Protocol("frame for a stream the client never opened"));
        }
        Ok(())
    }

    fn apply_setting(&mut self, id: u16, value: u32, events: &mut Vec<Event>) -> Result<(), ConnError> {
        match id {
            setting::ENABLE_PUSH if value > 1 => Err(ConnError::Protocol("SETTINGS_ENABLE_PUSH above 1")),
            setting::MAX_CONCURRENT_STREAMS => {
                self.peer_max_streams = Some(value);
                if value < self.want_streams && self.reported_limit != Some(value) {
                    self.reported_limit = Some(value);
                    events.push(Event::StreamsLimited { limit: value });
                }
                Ok(())
            }
            setting::INITIAL_WINDOW_SIZE => {
                if value > frame::MAX_WINDOW {
                    return Err(ConnError::FlowControl("SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1"));
                }
                // The change applies to every open stream's window (RFC 9113 §6.9.2).
                let delta = i64::from(value) - i64::from(self.peer_initial_window);
                self.peer_initial_window = value;
                for (_, s) in self.streams.iter_mut() {
                    s.send_window = changed_window(s.send_window, delta)
                        .ok_or(ConnError::FlowControl("stream window beyond 2^31-1"))?;
                }
                Ok(())
            }
            setting::MAX_FRAME_SIZE => {
                if !(frame::DEFAULT_MAX_FRAME_SIZE..=frame::MAX_FRAME_SIZE_LIMIT).contains(&value) {
                    return Err(ConnError::Protocol("SETTINGS_MAX_FRAME_SIZE out of range"));
                }
                self.peer_max_frame = value;
                Ok(())
            }
            setting::HEADER_TABLE_SIZE => {
                self.peer_header_table = value;
                if self.indexing == Indexing::Indexed && (value as usize) < self.requests[0].blocks.table_size {
                    // The server's table evicts what our indexed block names: plain from now on,
                    // after telling it our table shrank.
                    self.indexing = Indexing::Plain;
                    self.table_size_update = Some(value);
                }
                Ok(())
            }
            // Unknown settings must be ignored.
            _ => Ok(()),
        }
    }

    /// Sends as much of every waiting body as the windows allow, stream by stream.
    fn send_bodies(&mut self) {
        if self.bodies_pending == 0 {
            return;
        }
        for place in 0..self.streams.places() {
            if self.send_window <= 0 {
                break;
            }
            if !self.streams.is_open(place) {
                continue;
            }
            let id = self.streams.id(place);
            let s = self.streams.get_mut(place);
            let body = body_of(&self.requests, &self.filled_bodies, place, s.request);
            let sent = s.body_sent as usize;
            let left = body.len() - sent.min(body.len());
            if left == 0 || s.send_window <= 0 {
                continue;
            }
            let n = (left as i64).min(i64::from(s.send_window)).min(self.send_window) as usize;
            let end = sent + n;
            let last = end == body.len();
            frame::encode_data(&mut self.out, id as u32, &body[sent..end], last, self.peer_max_frame);
            // Within the body's length, itself within MAX_BODY_BYTES.
            s.body_sent = end as u32;
            // n is at most the stream's window, which is positive here.
            s.send_window -= n as i32;
            self.send_window -= n as i64;
            if last {
                self.bodies_pending -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
