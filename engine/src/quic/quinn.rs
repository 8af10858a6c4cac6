//! One QUIC connection on quinn-proto, Sans-I/O: datagrams and the clock in, datagrams to send,
//! stream data, events and the next deadline out. quinn-proto's `Endpoint` and `Connection`
//! live here and nowhere else; `Transport` chooses between this and our own QUIC.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::HandshakeData;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, ReadError, ReadableError, StreamEvent, VarInt,
    WriteError,
};

use super::config::QuinnConfig;
use super::lost::Lost;
use super::surface::{Datagrams, Event, ReadEnd, StreamError, StreamId};
use crate::error::EngineError;

/// Received datagrams are copied into one buffer per connection: quinn-proto decrypts them in
/// place and keeps stream data as slices of it until it is read, after which the allocation is
/// taken back for the next datagrams.
const RX_CHUNK: usize = 16 * 1024;

pub(crate) struct QuinnTransport {
    endpoint: Endpoint,
    handle: ConnectionHandle,
    conn: Connection,
    remote: SocketAddr,
    rx: BytesMut,
    /// Where the endpoint writes stateless answers, which a client's never sends.
    scratch: Vec<u8>,
    max_datagrams: usize,
    /// The handshake must be done by then (quinn-proto would wait for its idle timeout).
    connect_by: Option<Instant>,
    connected: bool,
    /// Events not yet handed out, ours before quinn-proto's.
    events: VecDeque<Event>,
    lost: bool,
    /// Datagrams the endpoint did not hand to our connection (another version, unparseable,
    /// another connection ID).
    dropped: u64,
}

impl QuinnTransport {
    /// Starts a connection to `server` (its first datagrams wait in `poll_transmit`).
    pub(crate) fn connect(
        config: &QuinnConfig,
        server: SocketAddr,
        server_name: &str,
        now: Instant,
    ) -> Result<Self, EngineError> {
        let mut endpoint = Endpoint::new(config.endpoint.clone(), None, false, None);
        let (handle, conn) = endpoint
            .connect(now, config.client.clone(), server, server_name)
            .map_err(|e| EngineError::TlsSetup(format!("QUIC connect to {server_name}: {e}")))?;
        Ok(QuinnTransport {
            endpoint,
            handle,
            conn,
            remote: server,
            rx: BytesMut::with_capacity(RX_CHUNK),
            scratch: Vec::new(),
            max_datagrams: config.max_datagrams,
            connect_by: Some(now + config.connect_timeout),
            connected: false,
            events: VecDeque::new(),
            lost: false,
            dropped: 0,
        })
    }

    /// Takes what one receive brought: one datagram, or several of `segment_size` bytes each
    /// (the last may be shorter) when the kernel coalesced them (UDP GRO).
    pub(crate) fn receive(&mut self, now: Instant, bytes: &[u8], segment_size: Option<usize>) {
        let segment = segment_size.filter(|&s| s > 0).unwrap_or(bytes.len()).max(1);
        for datagram in bytes.chunks(segment) {
            // Takes the allocation back once quinn-proto let go of every earlier datagram in it,
            // else starts another of RX_CHUNK: an allocation per buffer, not per datagram.
            self.rx.reserve(datagram.len());
            self.rx.extend_from_slice(datagram);
            let data = self.rx.split();
            match self.endpoint.handle(now, self.remote, None, None, data, &mut self.scratch) {
                Some(DatagramEvent::ConnectionEvent(handle, event)) if handle == self.handle => {
                    self.conn.handle_event(event);
                }
                // Dropped by the endpoint (another version, unparseable, not our connection ID), or a
                // stateless reset of some stranger's packet, or a new connection, which a client
                // endpoint does not accept: nothing for us.
                _ => self.dropped += 1,
            }
        }
        self.pump_endpoint_events();
    }

    /// Writes the next batch of datagrams into `buf` (cleared first): up to the batch size, all
    /// of one size but the last, for one UDP send with GSO. None when nothing is due.
    pub(crate) fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Datagrams> {
        buf.clear();
        let transmit = self.conn.poll_transmit(now, self.max_datagrams, buf)?;
        self.pump_endpoint_events();
        Some(Datagrams { len: transmit.size, segment_size: transmit.segment_size.unwrap_or(transmit.size) })
    }

    /// When `handle_timeout` is next due.
    pub(crate) fn poll_timeout(&mut self) -> Option<Instant> {
        let quinn = self.conn.poll_timeout();
        match (quinn, self.connect_by) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        if let Some(by) = self.connect_by
            && now >= by
            && !self.lost
        {
            self.connect_by = None;
            self.lost = true;
            self.events.push_back(Event::Lost(Lost::connect_timeout()));
            return;
        }
        self.conn.handle_timeout(now);
        self.pump_endpoint_events();
    }

    /// The next event, if any.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        if let Some(event) = self.events.pop_front() {
            return Some(event);
        }
        // Once lost, nothing more happens: not even what quinn-proto still holds after our own
        // connect deadline gave up on it.
        if self.lost {
            return None;
        }
        loop {
            let event = self.conn.poll()?;
            if let Some(event) = self.translate(event) {
                return Some(event);
            }
        }
    }

    fn translate(&mut self, event: quinn_proto::Event) -> Option<Event> {
        use quinn_proto::Event as Q;
        match event {
            Q::Connected => {
                self.connected = true;
                self.connect_by = None;
                Some(Event::Connected { alpn: self.alpn() })
            }
            Q::ConnectionLost { reason } => {
                self.lost = true;
                self.connect_by = None;
                Some(Event::Lost(Lost::from_quinn(reason, self.connected)))
            }
            Q::Stream(StreamEvent::Opened { dir: Dir::Uni }) => Some(Event::UniOpened),
            Q::Stream(StreamEvent::Readable { id }) => Some(Event::Readable(ours(id))),
            Q::Stream(StreamEvent::Writable { id }) => Some(Event::Writable(ours(id))),
            Q::Stream(StreamEvent::Stopped { id, error_code }) => {
                Some(Event::Stopped { stream: ours(id), code: error_code.into_inner() })
            }
            Q::Stream(StreamEvent::Available { dir: Dir::Bi }) => Some(Event::BiAvailable),
            // Bidirectional streams from the server are refused by our limit of 0; our uni
            // streams are few and opened at once; a send stream fully acknowledged and
            // datagrams (not enabled) need nothing.
            Q::Stream(_) | Q::HandshakeDataReady | Q::DatagramReceived | Q::DatagramsUnblocked => None,
        }
    }

    fn alpn(&self) -> Option<Vec<u8>> {
        let data = self.conn.crypto_session().handshake_data()?;
        data.downcast::<HandshakeData>().ok()?.protocol
    }

    /// Opens a request stream; None while the peer's stream limit is reached (`BiAvailable`
    /// says when to try again).
    pub(crate) fn open_bi(&mut self) -> Option<StreamId> {
        self.conn.streams().open(Dir::Bi).map(ours)
    }

    /// Opens one of our unidirectional streams (HTTP/3's control stream).
    pub(crate) fn open_uni(&mut self) -> Option<StreamId> {
        self.conn.streams().open(Dir::Uni).map(ours)
    }

    /// A unidirectional stream the peer opened, if one is waiting. Read it at once: what came
    /// with the frame that opened it is not announced again as `Readable`.
    pub(crate) fn accept_uni(&mut self) -> Option<StreamId> {
        self.conn.streams().accept(Dir::Uni).map(ours)
    }

    /// Queues `bytes` on `stream`; returns how many were taken (fewer when flow control or the
    /// send window is full: `Writable` says when to go on). Taken as `Bytes`, which QUIC keeps
    /// until they are acknowledged without copying them: a copy and an allocation for every
    /// request otherwise.
    pub(crate) fn write(&mut self, stream: StreamId, bytes: Bytes) -> Result<usize, StreamError> {
        match self.conn.send_stream(quinn_id(stream)).write_chunks(&mut [bytes]) {
            Ok(written) => Ok(written.bytes),
            Err(WriteError::Blocked) => Ok(0),
            Err(WriteError::Stopped(code)) => Err(StreamError::Stopped(code.into_inner())),
            Err(WriteError::ClosedStream) => Err(StreamError::Closed),
        }
    }

    /// Ends our side of `stream` after what was written.
    pub(crate) fn finish(&mut self, stream: StreamId) -> Result<(), StreamError> {
        self.conn.send_stream(quinn_id(stream)).finish().map_err(|e| match e {
            quinn_proto::FinishError::Stopped(code) => StreamError::Stopped(code.into_inner()),
            quinn_proto::FinishError::ClosedStream => StreamError::Closed,
        })
    }

    /// Abandons `stream` both ways with `code` (a request given up on): RESET_STREAM for what
    /// we send, STOP_SENDING for what the peer does. Either side already over is left alone.
    pub(crate) fn cancel(&mut self, stream: StreamId, code: u64) {
        let code = VarInt::from_u64(code).unwrap_or(VarInt::from_u32(0));
        if quinn_id(stream).dir() == Dir::Bi || quinn_id(stream).initiator() == self.conn.side() {
            let _ = self.conn.send_stream(quinn_id(stream)).reset(code);
        }
        if quinn_id(stream).dir() == Dir::Bi || quinn_id(stream).initiator() != self.conn.side() {
            let _ = self.conn.recv_stream(quinn_id(stream)).stop(code);
        }
    }

    /// Ends our sending side of `stream` with `code` (RESET_STREAM), leaving its receiving side
    /// alone: what a STOP_SENDING from the peer calls for. Already over, it is left alone.
    pub(crate) fn reset_send(&mut self, stream: StreamId, code: u64) {
        let code = VarInt::from_u64(code).unwrap_or(VarInt::from_u32(0));
        let _ = self.conn.send_stream(quinn_id(stream)).reset(code);
    }

    /// Hands what arrived on `stream`, in order, to `each`, and says where it stopped.
    pub(crate) fn read(&mut self, stream: StreamId, mut each: impl FnMut(&[u8])) -> Result<ReadEnd, StreamError> {
        let mut recv = self.conn.recv_stream(quinn_id(stream));
        let mut chunks = match recv.read(true) {
            Ok(chunks) => chunks,
            // An ordered read after an unordered one cannot happen: every read here is ordered.
            Err(ReadableError::ClosedStream | ReadableError::IllegalOrderedRead) => return Err(StreamError::Closed),
        };
        let end = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => each(&chunk.bytes),
                Ok(None) => break ReadEnd::Finished,
                Err(ReadError::Blocked) => break ReadEnd::Blocked,
                Err(ReadError::Reset(code)) => break ReadEnd::Reset(code.into_inner()),
            }
        };
        // Whether flow-control credit is due is left to the next poll_transmit, which the
        // caller makes once per batch anyway.
        let _ = chunks.finalize();
        Ok(end)
    }

    /// Closes the connection with an application `code` (HTTP/3's); the CONNECTION_CLOSE
    /// leaves with the next `poll_transmit`.
    pub(crate) fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        let code = VarInt::from_u64(code).unwrap_or(VarInt::from_u32(0));
        self.conn.close(now, code, Bytes::copy_from_slice(reason));
    }

    /// The handshake is done.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_connected(&self) -> bool {
        self.connected
    }

    /// The connection's own state after a close (ours or the peer's) has run out: nothing more
    /// will be sent or received.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn is_drained(&self) -> bool {
        self.conn.is_drained()
    }

    /// Datagrams quinn-proto counted as lost, and sent in all (for reports and tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn lost_and_sent_packets(&self) -> (u64, u64) {
        let stats = self.conn.stats();
        (stats.path.lost_packets, stats.path.sent_packets)
    }

    /// Datagrams dropped before reaching the connection (see `dropped`).
    pub(crate) fn dropped_packets(&self) -> u64 {
        self.dropped
    }

    fn pump_endpoint_events(&mut self) {
        while let Some(event) = self.conn.poll_endpoint_events() {
            if let Some(event) = self.endpoint.handle_event(self.handle, event) {
                self.conn.handle_event(event);
            }
        }
    }
}

/// Stream IDs between ours (the number on the wire) and quinn-proto's.
fn ours(id: quinn_proto::StreamId) -> StreamId {
    StreamId(VarInt::from(id).into_inner())
}

fn quinn_id(stream: StreamId) -> quinn_proto::StreamId {
    // Every stream number fits a varint: they come from QUIC itself.
    quinn_proto::StreamId::from(VarInt::from_u64(stream.0).unwrap_or(VarInt::from_u32(0)))
}
