//! One QUIC v1 client connection of our own, Sans-I/O: datagrams and the clock in; datagrams
//! to send, stream data, events and the next deadline out (the same shape as the quinn-proto
//! transport it stands in for on loopback-class paths).
//!
//! What it does: the handshake through rustls (Initial, Handshake and 1-RTT spaces, ALPN
//! h3, transport parameters checked), ACKs once per batch, loss detection with packet and time
//! thresholds and a probe timer, stream data sent again where lost, flow control both ways,
//! key updates both ways, connection IDs the server retires, idle timeout and keep-alive,
//! CONNECTION_CLOSE both ways. What it leaves out, on purpose: congestion control and pacing
//! (see `recovery`), 0-RTT, Retry and version negotiation (a clear error, for a Version
//! Negotiation or Retry that is really the server's), migration, MTU discovery, streams the
//! server opens both ways (HTTP/3 has none). Whatever cannot be parsed or opened is dropped and
//! counted (`dropped_packets`), never taken for the server's word (RFC 9000 §5.2).

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rustls::quic::{self as tls, KeyChange, Keys, PacketKey, PacketKeySet, Secrets};

mod send;

use super::ack::Received;
use super::frame::{self, Frame, Frames};
use super::packet::{self, ConnectionId, Space};
use super::params::{ClientParams, ServerParams};
use super::recovery::{Resend, Rtt, SentPackets};
use super::stream::{RecvEnd, RecvError, RecvStream, SendStream};
use super::streams::{Bidi, Streams};
use crate::quic::lost::Lost;
use crate::quic::surface::{Event, ReadEnd, StreamError, StreamId};

/// The length of the connection IDs we choose (ours, and the first one we send to).
pub(crate) const CID_LEN: usize = 8;
/// Uni streams the server may open: HTTP/3's three, with room for reserved (grease) ones.
const PEER_UNI_STREAMS: u64 = 16;
/// The smallest datagram that may carry an Initial packet (RFC 9000 §14.1).
const MIN_INITIAL: usize = 1200;
/// Packets under one key before we update it: far below AES-GCM's limit of 2^23 (RFC 9001
/// §6.6), and never reached in a short run.
/// Unit tests update after a few dozen, so that every test that sends a few hundred packets
/// (the in-memory server, the lossy link) runs through several updates of ours.
const KEY_UPDATE_AFTER: u64 = if cfg!(test) { 40 } else { 1 << 22 };
/// Stream data in flight unacknowledged, at most: a fixed window, not congestion control. A
/// request load never comes near it; a large upload without it would burst a whole stream
/// window at once, and QUIC servers in user space drop what overflows their queue (quic-go
/// keeps 256 packets per connection): against caddy, 1 MiB bodies lost half their packets.
const MAX_IN_FLIGHT: u64 = 128 * 1452;
/// Spare connection IDs from the server we keep (we advertise a limit of this many).
const ACTIVE_CID_LIMIT: u64 = 4;

/// QUIC transport error codes we send (RFC 9000 §20.1).
mod code {
    pub const FLOW_CONTROL_ERROR: u64 = 0x03;
    pub const STREAM_LIMIT_ERROR: u64 = 0x04;
    pub const STREAM_STATE_ERROR: u64 = 0x05;
    pub const FINAL_SIZE_ERROR: u64 = 0x06;
    pub const PROTOCOL_VIOLATION: u64 = 0x0a;
    pub const APPLICATION_ERROR: u64 = 0x0c;
    pub const CRYPTO_BUFFER_EXCEEDED: u64 = 0x0d;
    pub const CRYPTO_ERROR: u64 = 0x100;
}

/// What every connection of a run shares.
pub(crate) struct Settings {
    pub tls: Arc<rustls::ClientConfig>,
    /// The UDP payload we send at most (and announce).
    pub mtu: usize,
    pub max_datagrams: usize,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub keep_alive: Duration,
    pub initial_rtt: Duration,
    /// Our receive window on each stream; the connection's is QUIC's largest (flow control
    /// per stream is enough for a client that reads everything at once).
    pub stream_window: u64,
}

/// A fresh random connection ID of [`CID_LEN`] bytes: SipHash under the process's random keys
/// over a counter, unpredictable enough for IDs that only route packets.
fn random_cid() -> ConnectionId {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    ConnectionId::new(&h.finish().to_be_bytes()).unwrap_or_default()
}

/// The state of one packet number space.
struct PacketSpace {
    /// Initial and Handshake keys (1-RTT keys live in `OneRtt`); None once discarded.
    keys: Option<Keys>,
    next_pn: u64,
    received: Received,
    sent: SentPackets,
    /// The CRYPTO stream we send (no flow control: its limit is the largest offset).
    crypto_out: SendStream,
    /// The CRYPTO stream we receive, put in order for TLS; its window (16 MiB, far beyond any
    /// handshake) bounds what the server may send ahead.
    crypto_in: RecvStream,
    /// A PING is due (a probe with nothing to send again).
    ping: bool,
}

impl Default for PacketSpace {
    fn default() -> Self {
        PacketSpace {
            keys: None,
            next_pn: 0,
            received: Received::default(),
            sent: SentPackets::default(),
            crypto_out: SendStream::new(u64::MAX),
            crypto_in: RecvStream::default(),
            ping: false,
        }
    }
}

impl PacketSpace {
    fn wants_send(&self) -> bool {
        self.received.ack_due || self.crypto_out.has_pending() || self.ping
    }
}

/// 1-RTT keys, and what key updates need.
struct OneRtt {
    local_header: Box<dyn tls::HeaderProtectionKey>,
    remote_header: Box<dyn tls::HeaderProtectionKey>,
    local: Box<dyn PacketKey>,
    remote: Box<dyn PacketKey>,
    /// The key phase bit of `local` and `remote`.
    phase: bool,
    secrets: Secrets,
    /// The next keys, made when first needed.
    next: Option<PacketKeySet>,
    /// The remote key before the last update, for packets sent before it that arrive late.
    previous_remote: Option<Box<dyn PacketKey>>,
    /// The first packet number received under the current keys.
    phase_first_received: Option<u64>,
    /// The first we sent under them (an update waits until it is acknowledged).
    phase_first_sent: Option<u64>,
    sent_with_key: u64,
}

impl OneRtt {
    fn new(keys: Keys, secrets: Secrets) -> Self {
        OneRtt {
            local_header: keys.local.header,
            remote_header: keys.remote.header,
            local: keys.local.packet,
            remote: keys.remote.packet,
            phase: false,
            secrets,
            next: None,
            previous_remote: None,
            phase_first_received: None,
            phase_first_sent: None,
            sent_with_key: 0,
        }
    }

    fn next_keys(&mut self) -> &PacketKeySet {
        self.next.get_or_insert_with(|| self.secrets.next_packet_keys())
    }

    /// Moves to the next keys (the peer's update, or ours).
    fn update(&mut self) {
        let next = match self.next.take() {
            Some(next) => next,
            None => self.secrets.next_packet_keys(),
        };
        self.previous_remote = Some(std::mem::replace(&mut self.remote, next.remote));
        self.local = next.local;
        self.phase = !self.phase;
        self.phase_first_received = None;
        self.phase_first_sent = None;
        self.sent_with_key = 0;
    }
}

/// Where the connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Handshaking,
    Established,
    /// We closed: CONNECTION_CLOSE goes once, then we wait until the deadline (RFC 9000 §10.2).
    Closing {
        until: Instant,
    },
    /// The peer closed: nothing more is sent.
    Draining {
        until: Instant,
    },
    Drained,
}

/// A frame queued for the next 1-RTT packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    ResetStream { id: u64, code: u64, final_size: u64 },
    StopSending { id: u64, code: u64 },
    MaxStreamData { id: u64, max: u64 },
    RetireConnectionId { seq: u64 },
    PathResponse([u8; 8]),
}

/// A CONNECTION_CLOSE to send.
#[derive(Debug, Clone)]
struct Close {
    application: bool,
    code: u64,
    reason: Vec<u8>,
}

pub(crate) struct Connection {
    settings: Arc<Settings>,
    tls: tls::ClientConnection,
    scid: ConnectionId,
    dcid: ConnectionId,
    dcid_seq: u64,
    /// The stateless reset token that goes with `dcid`, once the server gave one.
    reset_token: Option<[u8; 16]>,
    /// The first DCID we chose, which the server's parameters must echo.
    original_dcid: ConnectionId,
    /// The server's first SCID, which its parameters must echo; None until its first packet.
    server_scid: Option<ConnectionId>,
    /// Spare IDs the server issued (NEW_CONNECTION_ID), by sequence number.
    spare_cids: Vec<(u64, ConnectionId, [u8; 16])>,
    spaces: [PacketSpace; 3],
    one_rtt: Option<OneRtt>,
    /// The space TLS writes its next handshake bytes for.
    tls_space: Space,
    handshake_confirmed: bool,
    peer: Option<ServerParams>,
    rtt: Rtt,
    pto_count: u32,
    state: State,
    streams: Streams,
    controls: Vec<Control>,
    close: Option<Close>,
    events: VecDeque<Event>,
    connect_by: Option<Instant>,
    last_received: Instant,
    last_sent: Instant,
    idle_timeout: Duration,
    mtu: usize,
    /// Reused buffers: a received datagram decrypted in place; frames acknowledged or lost.
    rx: Vec<u8>,
    acked: Vec<Resend>,
    lost: Vec<Resend>,
    sent_packets: u64,
    /// Packets dropped unread: unparseable, of another version, undecryptable (no keys for
    /// their space, or failing authentication), or a Version Negotiation or Retry we must
    /// ignore. A datagram cut short or made up counts here, not as the server's word.
    dropped_packets: u64,
}

fn space_index(space: Space) -> usize {
    match space {
        Space::Initial => 0,
        Space::Handshake => 1,
        Space::Data => 2,
    }
}

/// A fault of the peer's, or a TLS failure: the connection closes with `code`.
#[derive(Debug, Clone)]
struct ConnError {
    code: u64,
    why: String,
}

impl ConnError {
    fn new(code: u64, why: impl Into<String>) -> Self {
        ConnError { code, why: why.into() }
    }
}

impl Connection {
    /// Starts a connection; its Initial waits in `poll_transmit`.
    pub(crate) fn connect(settings: Arc<Settings>, server_name: &str, now: Instant) -> Result<Self, String> {
        let scid = random_cid();
        let dcid = random_cid();
        let params = ClientParams {
            initial_max_data: crate::quic::varint::MAX,
            initial_max_stream_data_bidi_local: settings.stream_window,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: settings.stream_window,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: PEER_UNI_STREAMS,
            max_idle_timeout_ms: settings.idle_timeout.as_millis() as u64,
            max_udp_payload_size: settings.mtu as u64,
            active_connection_id_limit: ACTIVE_CID_LIMIT,
            initial_source_connection_id: scid,
        };
        let mut encoded = Vec::new();
        params.encode(&mut encoded);
        let name = crate::tls::server_name(server_name).map_err(|e| e.to_string())?;
        let tls = tls::ClientConnection::new(settings.tls.clone(), tls::Version::V1, name, encoded)
            .map_err(|e| format!("QUIC's TLS: {e}"))?;
        let mut spaces: [PacketSpace; 3] = Default::default();
        spaces[0].keys = Some(packet::initial_keys(&dcid));
        let mut conn = Connection {
            tls,
            scid,
            dcid,
            dcid_seq: 0,
            reset_token: None,
            original_dcid: dcid,
            server_scid: None,
            spare_cids: Vec::new(),
            spaces,
            one_rtt: None,
            tls_space: Space::Initial,
            handshake_confirmed: false,
            peer: None,
            rtt: Rtt::new(settings.initial_rtt),
            pto_count: 0,
            state: State::Handshaking,
            streams: Streams::default(),
            controls: Vec::new(),
            close: None,
            events: VecDeque::new(),
            connect_by: Some(now + settings.connect_timeout),
            last_received: now,
            last_sent: now,
            idle_timeout: settings.idle_timeout,
            mtu: settings.mtu,
            rx: Vec::with_capacity(settings.mtu),
            acked: Vec::new(),
            lost: Vec::new(),
            sent_packets: 0,
            dropped_packets: 0,
            settings,
        };
        conn.write_tls();
        Ok(conn)
    }

    /// Takes what one receive brought: one datagram, or several of `segment_size` bytes.
    pub(crate) fn receive(&mut self, now: Instant, bytes: &[u8], segment_size: Option<usize>) {
        if !matches!(self.state, State::Handshaking | State::Established) {
            return;
        }
        let segment = segment_size.filter(|&s| s > 0).unwrap_or(bytes.len()).max(1);
        let mut rx = std::mem::take(&mut self.rx);
        for datagram in bytes.chunks(segment) {
            rx.clear();
            rx.extend_from_slice(datagram);
            if let Err(e) = self.datagram(now, &mut rx) {
                self.fail(now, e);
            }
            if !matches!(self.state, State::Handshaking | State::Established) {
                break;
            }
        }
        self.rx = rx;
    }

    fn datagram(&mut self, now: Instant, buf: &mut [u8]) -> Result<(), ConnError> {
        let mut at = 0;
        while at < buf.len() {
            let Ok(span) = packet::parse(buf, at, CID_LEN) else {
                // The rest of the datagram cannot be found either (RFC 9000 §12.2).
                self.dropped_packets += 1;
                return Ok(());
            };
            at = span.end;
            let space = match span.kind {
                packet::Kind::Initial => Space::Initial,
                packet::Kind::Handshake => Space::Handshake,
                packet::Kind::Short => Space::Data,
                packet::Kind::VersionNegotiation { .. } => {
                    if self.is_version_negotiation_for_us(buf, &span) {
                        self.lose(Lost::no_common_version());
                    } else {
                        self.dropped_packets += 1;
                    }
                    return Ok(());
                }
                // Another version's packet: a client discards it (RFC 9000 §5.2.2), and with it
                // the rest of the datagram, whose packets it cannot find. Half of all random
                // datagrams look like one (the long-header bit set, a version other than 1).
                packet::Kind::UnsupportedVersion(_) => {
                    self.dropped_packets += 1;
                    return Ok(());
                }
                packet::Kind::Retry { .. } => {
                    if self.is_retry_for_us(buf, &span) {
                        self.lose(Lost::connect(
                            "the server asked for a QUIC Retry, which volley's own QUIC does not do: \
                             run with --quic-congestion standard"
                                .into(),
                        ));
                    } else {
                        self.dropped_packets += 1;
                    }
                    return Ok(());
                }
                packet::Kind::ZeroRtt => {
                    self.dropped_packets += 1;
                    continue;
                }
            };
            self.packet(now, buf, &span, space)?;
        }
        Ok(())
    }

    /// Whether a Version Negotiation ends the attempt (RFC 9000 §6.2): only before any packet
    /// of the server's was processed, only when it echoes our connection IDs (§17.2.1: its
    /// Destination Connection ID is our Source Connection ID, its Source Connection ID the
    /// Destination Connection ID of our first Initial), and only when it does not list version
    /// 1, which §6.2 says to discard. Any other is stray, forged or random, and is dropped.
    fn is_version_negotiation_for_us(&self, buf: &[u8], span: &packet::PacketSpan) -> bool {
        let packet::Header::VersionNegotiation { dcid, scid, mut versions } = span.header(buf) else {
            return false;
        };
        self.server_scid.is_none()
            && dcid == &*self.scid
            && scid == &*self.original_dcid
            && !versions.any(|v| v == packet::VERSION_1)
    }

    /// Whether a Retry is the server's answer to our Initial (RFC 9000 §17.2.5.2): the first
    /// packet from it, addressed to our connection ID, with a token, and with an integrity tag
    /// that authenticates under our first Destination Connection ID (RFC 9001 §5.8).
    fn is_retry_for_us(&self, buf: &[u8], span: &packet::PacketSpan) -> bool {
        self.server_scid.is_none()
            && span.dcid.of(buf) == &*self.scid
            && !span.token.is_empty()
            && packet::retry_integrity_is_valid(buf, span, &self.original_dcid)
    }

    /// One packet of a datagram: opened, checked, its frames taken.
    fn packet(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        span: &packet::PacketSpan,
        space: Space,
    ) -> Result<(), ConnError> {
        let i = space_index(space);
        let largest = self.spaces[i].received.largest();
        let plain = match space {
            Space::Data => {
                let Some(one) = self.one_rtt.as_mut() else {
                    self.dropped_packets += 1;
                    return Ok(());
                };
                let Ok(head) = packet::unprotect_header(buf, span, one.remote_header.as_ref(), largest) else {
                    self.dropped_packets += 1;
                    return Ok(());
                };
                let (key, update): (&dyn PacketKey, bool) = if head.key_phase == one.phase {
                    (one.remote.as_ref(), false)
                } else if let Some(prev) = one.previous_remote.as_deref()
                    && one.phase_first_received.is_none_or(|first| head.pn < first)
                {
                    // Sent before the update: late, or the peer has yet to see ours.
                    (prev, false)
                } else {
                    (one.next_keys().remote.as_ref(), true)
                };
                let plain = match packet::decrypt(buf, span, &head, key) {
                    Ok(plain) => plain,
                    Err(e) => {
                        // A packet we cannot open that ends in the server's token is its
                        // stateless reset (RFC 9000 §10.3): it lost the connection.
                        if span.end - span.start >= 21
                            && self.reset_token.is_some_and(|t| buf[span.end - 16..span.end] == t)
                        {
                            self.state = State::Draining { until: self.last_received };
                            self.lose(Lost::stateless_reset());
                            return Ok(());
                        }
                        return self.packet_error(e);
                    }
                };
                if update {
                    // The peer updated its keys: ours follow (RFC 9001 §6.2).
                    one.update();
                }
                if one.phase_first_received.is_none() && head.key_phase == one.phase {
                    one.phase_first_received = Some(head.pn);
                }
                (head, plain)
            }
            _ => {
                let Some(keys) = self.spaces[i].keys.as_ref() else {
                    self.dropped_packets += 1;
                    return Ok(());
                };
                let Ok(head) = packet::unprotect_header(buf, span, keys.remote.header.as_ref(), largest) else {
                    self.dropped_packets += 1;
                    return Ok(());
                };
                let plain = match packet::decrypt(buf, span, &head, keys.remote.packet.as_ref()) {
                    Ok(plain) => plain,
                    Err(e) => return self.packet_error(e),
                };
                (head, plain)
            }
        };
        let (head, plain) = plain;
        if self.spaces[i].received.contains(head.pn) {
            return Ok(());
        }
        if self.server_scid.is_none() {
            // The server's first packet names the ID we send to from now on (RFC 9000 §7.2).
            let scid = ConnectionId::new(span.scid.of(buf)).unwrap_or_default();
            self.server_scid = Some(scid);
            self.dcid = scid;
        }
        self.last_received = now;
        let mut eliciting = false;
        let payload = &buf[plain];
        for frame in Frames::new(payload) {
            let frame = frame.map_err(|e| ConnError::new(e.code(), format!("the server sent {e}")))?;
            eliciting |= frame::is_ack_eliciting(&frame);
            self.frame(now, space, frame)?;
            if matches!(self.state, State::Drained | State::Draining { .. }) {
                return Ok(());
            }
        }
        self.spaces[i].received.insert(head.pn, now, eliciting);
        Ok(())
    }

    fn frame(&mut self, now: Instant, space: Space, frame: Frame<'_>) -> Result<(), ConnError> {
        let handshake_space = space != Space::Data;
        match frame {
            Frame::Padding | Frame::Ping => {}
            Frame::Ack(ack) => self.on_ack(now, space, &ack)?,
            Frame::Crypto { offset, data } => self.on_crypto(space, offset, data)?,
            Frame::ConnectionClose { application, code, reason, .. } => {
                self.state = State::Draining { until: now + self.rtt.pto_base() * 3 };
                let reason = String::from_utf8_lossy(reason).into_owned();
                self.lose(Lost::closed_by_peer(application, code, &reason, self.handshake_done()));
            }
            _ if handshake_space => {
                return Err(ConnError::new(code::PROTOCOL_VIOLATION, "a frame not allowed in a handshake packet"));
            }
            Frame::HandshakeDone => self.confirm_handshake(),
            Frame::Stream { id, offset, data, fin } => self.on_stream(id, offset, data, fin)?,
            Frame::ResetStream { id, code, final_size } => {
                let Some(recv) = self.recv_for_peer(id)? else { return Ok(()) };
                if recv.on_reset(code, final_size).map_err(recv_error)? && !recv.signalled {
                    recv.signalled = true;
                    self.events.push_back(Event::Readable(StreamId(id)));
                }
            }
            Frame::StopSending { id, code } => {
                if id & 1 == 1 {
                    return Err(ConnError::new(code::STREAM_STATE_ERROR, "STOP_SENDING on a stream we do not send on"));
                }
                if let Some(send) = self.streams.send(id)
                    && !send.is_done()
                {
                    self.events.push_back(Event::Stopped { stream: StreamId(id), code });
                }
            }
            Frame::MaxData(max) => {
                self.streams.max_data = self.streams.max_data.max(max);
                self.requeue_all();
            }
            Frame::MaxStreamData { id, max } => {
                if let Some(send) = self.streams.send(id) {
                    send.max_data = send.max_data.max(max);
                    self.streams.enqueue(id);
                }
            }
            Frame::MaxStreams { bidi, max } => {
                if bidi && max > self.streams.bidi_limit {
                    self.streams.bidi_limit = max;
                    self.events.push_back(Event::BiAvailable);
                } else if !bidi {
                    self.streams.uni_limit = self.streams.uni_limit.max(max);
                }
            }
            Frame::NewConnectionId { seq, retire_prior_to, cid, reset_token } => {
                self.on_new_cid(seq, retire_prior_to, cid, reset_token)?
            }
            Frame::PathChallenge(data) => self.controls.push(Control::PathResponse(data)),
            Frame::NewToken { .. }
            | Frame::DataBlocked(_)
            | Frame::StreamDataBlocked { .. }
            | Frame::StreamsBlocked { .. }
            | Frame::RetireConnectionId { .. }
            | Frame::PathResponse(_) => {}
        }
        Ok(())
    }

    /// A PING this long after the last packet either way keeps both idle timers from running
    /// out (the server's may be shorter than ours).
    fn keep_alive(&self) -> Duration {
        self.settings.keep_alive.min(self.idle_timeout / 3)
    }

    fn handshake_done(&self) -> bool {
        self.state != State::Handshaking
    }

    fn on_ack(&mut self, now: Instant, space: Space, ack: &frame::Ack<'_>) -> Result<(), ConnError> {
        let i = space_index(space);
        if ack.largest >= self.spaces[i].next_pn {
            return Err(ConnError::new(code::PROTOCOL_VIOLATION, "an ACK for a packet never sent"));
        }
        let (mut acked, mut lost) = (std::mem::take(&mut self.acked), std::mem::take(&mut self.lost));
        let sample = self.spaces[i].sent.on_ack(ack.ranges(), now, &self.rtt, |f| acked.push(f), |f| lost.push(f));
        if let Some(sent) = sample {
            let ack_delay = match (&self.peer, space == Space::Data && self.handshake_confirmed) {
                (Some(p), true) => Duration::from_micros(ack.delay << p.ack_delay_exponent)
                    .min(Duration::from_millis(p.max_ack_delay_ms)),
                _ => Duration::ZERO,
            };
            self.rtt.update(now.saturating_duration_since(sent), ack_delay);
            self.pto_count = 0;
        }
        for f in acked.drain(..) {
            self.on_acked(space, f);
        }
        self.on_lost_frames(space, &mut lost);
        self.acked = acked;
        self.lost = lost;
        Ok(())
    }

    fn on_acked(&mut self, space: Space, f: Resend) {
        match f {
            Resend::Stream { id, offset, len, fin } => {
                if let Some(send) = self.streams.send(id) {
                    send.on_acked(offset, len as usize, fin);
                    self.streams.retire_if_done(id);
                }
            }
            Resend::Crypto { offset, len } => {
                self.spaces[space_index(space)].crypto_out.on_acked(offset, len as usize, false)
            }
            _ => {}
        }
    }

    fn on_lost_frames(&mut self, space: Space, lost: &mut Vec<Resend>) {
        let i = space_index(space);
        for f in lost.drain(..) {
            match f {
                Resend::Stream { id, offset, len, fin } => {
                    if let Some(send) = self.streams.send(id) {
                        send.on_lost(offset, len as usize, fin);
                        self.streams.enqueue(id);
                    }
                }
                Resend::Crypto { offset, len } => self.spaces[i].crypto_out.on_lost(offset, len as usize, false),
                Resend::ResetStream { id, code, final_size } => {
                    self.controls.push(Control::ResetStream { id, code, final_size })
                }
                Resend::StopSending { id, code } => {
                    if self.streams.recv(id).is_some_and(|r| !r.ended) {
                        self.controls.push(Control::StopSending { id, code });
                    }
                }
                Resend::MaxStreamData { id } => {
                    if let Some(r) = self.streams.recv(id) {
                        let max = r.window;
                        self.controls.push(Control::MaxStreamData { id, max });
                    }
                }
                Resend::RetireConnectionId { seq } => self.controls.push(Control::RetireConnectionId { seq }),
            }
        }
    }

    fn requeue_all(&mut self) {
        self.streams.enqueue_all();
    }

    fn on_crypto(&mut self, space: Space, offset: u64, data: &[u8]) -> Result<(), ConnError> {
        let s = &mut self.spaces[space_index(space)];
        match s.crypto_in.on_data(offset, data, false) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(_) => {
                return Err(ConnError::new(code::CRYPTO_BUFFER_EXCEEDED, "more CRYPTO data than any handshake needs"));
            }
        }
        let mut fresh = Vec::new();
        s.crypto_in.read(|b| fresh.extend_from_slice(b));
        self.read_tls(&fresh)
    }

    fn read_tls(&mut self, data: &[u8]) -> Result<(), ConnError> {
        if let Err(e) = self.tls.read_hs(data) {
            let alert = self.tls.alert().map_or(80, u8::from);
            return Err(ConnError::new(
                code::CRYPTO_ERROR + u64::from(alert),
                crate::quic::lost::local_tls(alert, &e.to_string()),
            ));
        }
        self.write_tls();
        if self.state == State::Handshaking && !self.tls.is_handshaking() && self.one_rtt.is_some() {
            // Read only now: while it resumes a session, rustls answers with the parameters it
            // remembered from the ticket until the server's own arrive.
            let bytes = self.tls.quic_transport_parameters().unwrap_or_default();
            let params = ServerParams::decode(bytes).map_err(|e| ConnError::new(e.code(), e.to_string()))?;
            self.apply_params(params)?;
            self.state = State::Established;
            self.connect_by = None;
            let alpn = self.tls.alpn_protocol().map(<[u8]>::to_vec);
            self.events.push_back(Event::Connected { alpn });
        }
        Ok(())
    }

    /// Takes what TLS has to send, and the keys it hands over on the way.
    fn write_tls(&mut self) {
        loop {
            let space = self.tls_space;
            let mut out = Vec::new();
            let change = self.tls.write_hs(&mut out);
            if !out.is_empty() {
                self.spaces[space_index(space)].crypto_out.write(Bytes::from(out));
            }
            match change {
                None => break,
                Some(KeyChange::Handshake { keys }) => {
                    self.spaces[1].keys = Some(keys);
                    self.tls_space = Space::Handshake;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    self.one_rtt = Some(OneRtt::new(keys, next));
                    self.tls_space = Space::Data;
                }
            }
        }
    }

    fn apply_params(&mut self, p: ServerParams) -> Result<(), ConnError> {
        if p.original_destination_connection_id != self.original_dcid
            || Some(p.initial_source_connection_id) != self.server_scid
        {
            let why = format!(
                "the server's transport parameters name other connection IDs ({:?} for our {:?}, {:?} for its {:?})",
                p.original_destination_connection_id,
                self.original_dcid,
                p.initial_source_connection_id,
                self.server_scid
            );
            return Err(ConnError::new(0x08, why));
        }
        self.streams.max_data = p.initial_max_data;
        self.streams.send_window_bidi = p.initial_max_stream_data_bidi_remote;
        self.streams.send_window_uni = p.initial_max_stream_data_uni;
        self.streams.bidi_limit = p.initial_max_streams_bidi;
        self.streams.uni_limit = p.initial_max_streams_uni;
        if p.max_idle_timeout_ms > 0 {
            self.idle_timeout = self.idle_timeout.min(Duration::from_millis(p.max_idle_timeout_ms));
        }
        self.mtu = self.mtu.min(p.max_udp_payload_size as usize).max(MIN_INITIAL);
        if self.dcid_seq == 0 {
            self.reset_token = p.stateless_reset_token;
        }
        self.peer = Some(p);
        Ok(())
    }

    fn confirm_handshake(&mut self) {
        if !self.handshake_confirmed {
            self.handshake_confirmed = true;
            let hs = &mut self.spaces[1];
            hs.keys = None;
            hs.sent.discard();
            // Nothing more goes out in a discarded space.
            hs.crypto_out.reset = true;
            hs.received.ack_due = false;
            hs.ping = false;
        }
    }

    fn discard_initial(&mut self) {
        let s = &mut self.spaces[0];
        if s.keys.take().is_some() {
            s.sent.discard();
            s.crypto_out.reset = true;
            s.received.ack_due = false;
            s.ping = false;
        }
    }

    /// The receiving half for a frame from the peer: None for a stream of ours already over.
    fn recv_for_peer(&mut self, id: u64) -> Result<Option<&mut RecvStream>, ConnError> {
        match id & 3 {
            0 => {
                if (id >> 2) >= self.streams.bidi_opened {
                    return Err(ConnError::new(code::STREAM_STATE_ERROR, "data on a request stream we never opened"));
                }
                Ok(self.streams.bidi_mut(id).map(|b| &mut b.recv))
            }
            1 => Err(ConnError::new(code::STREAM_LIMIT_ERROR, "a bidirectional stream opened by the server")),
            2 => Err(ConnError::new(code::STREAM_STATE_ERROR, "data on a stream only we send on")),
            _ => {
                let index = id >> 2;
                if index >= PEER_UNI_STREAMS {
                    return Err(ConnError::new(code::STREAM_LIMIT_ERROR, "more unidirectional streams than we allow"));
                }
                while (self.streams.peer_uni.len() as u64) <= index {
                    let stream = RecvStream::new(self.settings.stream_window);
                    self.streams.peer_uni.push(stream);
                    self.events.push_back(Event::UniOpened);
                }
                Ok(self.streams.peer_uni.get_mut(index as usize))
            }
        }
    }

    fn on_stream(&mut self, id: u64, offset: u64, data: &[u8], fin: bool) -> Result<(), ConnError> {
        let Some(recv) = self.recv_for_peer(id)? else { return Ok(()) };
        if recv.on_data(offset, data, fin).map_err(recv_error)? && !recv.signalled {
            recv.signalled = true;
            self.events.push_back(Event::Readable(StreamId(id)));
        }
        Ok(())
    }

    fn on_new_cid(
        &mut self,
        seq: u64,
        retire_prior_to: u64,
        cid: &[u8],
        reset_token: [u8; 16],
    ) -> Result<(), ConnError> {
        if seq >= retire_prior_to && seq != self.dcid_seq && !self.spare_cids.iter().any(|&(s, _, _)| s == seq) {
            self.spare_cids.push((seq, ConnectionId::new(cid).unwrap_or_default(), reset_token));
        }
        self.spare_cids.retain(|&(s, _, _)| {
            let keep = s >= retire_prior_to;
            if !keep {
                self.controls.push(Control::RetireConnectionId { seq: s });
            }
            keep
        });
        if self.dcid_seq < retire_prior_to {
            self.controls.push(Control::RetireConnectionId { seq: self.dcid_seq });
            self.spare_cids.sort_unstable_by_key(|&(s, _, _)| s);
            let Some((seq, cid, token)) = (!self.spare_cids.is_empty()).then(|| self.spare_cids.remove(0)) else {
                return Err(ConnError::new(code::PROTOCOL_VIOLATION, "every connection ID retired"));
            };
            self.dcid_seq = seq;
            self.dcid = cid;
            self.reset_token = Some(token);
        }
        if self.spare_cids.len() as u64 >= ACTIVE_CID_LIMIT {
            return Err(ConnError::new(0x09, "more connection IDs than we allow"));
        }
        Ok(())
    }

    /// Closes with a transport error found on our side; the requests go with `Lost`.
    fn fail(&mut self, now: Instant, e: ConnError) {
        if matches!(self.state, State::Drained | State::Draining { .. } | State::Closing { .. }) {
            return;
        }
        let lost = if (code::CRYPTO_ERROR..code::CRYPTO_ERROR + 0x100).contains(&e.code) {
            Lost::tls(e.why.clone())
        } else {
            Lost::protocol(format!("the server broke QUIC: {}", e.why))
        };
        self.close = Some(Close { application: false, code: e.code, reason: Vec::new() });
        self.state = State::Closing { until: now + self.rtt.pto_base() * 3 };
        self.lose(lost);
    }

    fn lose(&mut self, lost: Lost) {
        if self.state == State::Handshaking || self.state == State::Established {
            self.state = State::Drained;
        }
        self.connect_by = None;
        self.events.push_back(Event::Lost(lost));
    }

    /// Closes with an application `code` (HTTP/3's); CONNECTION_CLOSE leaves with the next
    /// `poll_transmit`.
    pub(crate) fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        if matches!(self.state, State::Handshaking | State::Established) {
            // Before the handshake is done an application close must go as a transport one
            // (RFC 9000 §10.2.3).
            let application = self.state == State::Established;
            let code = if application { code } else { code::APPLICATION_ERROR };
            self.close = Some(Close { application, code, reason: reason.to_vec() });
            self.state = State::Closing { until: now + self.rtt.pto_base() * 3 };
        }
    }

    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.state == State::Established
    }

    pub(crate) fn is_drained(&self) -> bool {
        self.state == State::Drained
    }

    pub(crate) fn lost_and_sent_packets(&self) -> (u64, u64) {
        (self.spaces.iter().map(|s| s.sent.lost).sum(), self.sent_packets)
    }

    /// Packets received and dropped unread (see `dropped_packets`).
    pub(crate) fn dropped_packets(&self) -> u64 {
        self.dropped_packets
    }

    /// A packet that failed to open: dropped and counted, unless it authenticated and broke a
    /// rule.
    fn packet_error(&mut self, e: packet::PacketError) -> Result<(), ConnError> {
        match e.code() {
            Some(code) => Err(ConnError::new(code, format!("the server sent {e}"))),
            None => {
                self.dropped_packets += 1;
                Ok(())
            }
        }
    }

    // Streams.

    pub(crate) fn open_bi(&mut self) -> Option<StreamId> {
        if self.state != State::Established || self.streams.bidi_opened >= self.streams.bidi_limit {
            return None;
        }
        let id = self.streams.bidi_opened << 2;
        self.streams.bidi_opened += 1;
        let streams = &mut self.streams;
        let slot = match streams.free.pop() {
            Some(slot) => slot,
            None => {
                streams.slots.push(Bidi::default());
                (streams.slots.len() - 1) as u32
            }
        };
        let stream = &mut streams.slots[slot as usize];
        stream.send.reuse(streams.send_window_bidi);
        stream.recv.reuse(self.settings.stream_window);
        streams.bidi.push_back(slot);
        Some(StreamId(id))
    }

    pub(crate) fn open_uni(&mut self) -> Option<StreamId> {
        let n = self.streams.uni.len() as u64;
        if n >= self.streams.uni_limit {
            return None;
        }
        self.streams.uni.push(SendStream::new(self.streams.send_window_uni));
        Some(StreamId((n << 2) | 2))
    }

    pub(crate) fn accept_uni(&mut self) -> Option<StreamId> {
        let i = self.streams.peer_uni_accepted;
        (i < self.streams.peer_uni.len()).then(|| {
            self.streams.peer_uni_accepted += 1;
            StreamId(((i as u64) << 2) | 3)
        })
    }

    /// Queues `bytes` on `stream`: all of them (flow control holds them back when sending,
    /// not here, so `Writable` never comes).
    pub(crate) fn write(&mut self, stream: StreamId, bytes: Bytes) -> Result<usize, StreamError> {
        let send = self.streams.send(stream.0).ok_or(StreamError::Closed)?;
        if send.fin || send.reset {
            return Err(StreamError::Closed);
        }
        let n = bytes.len();
        send.write(bytes);
        self.streams.enqueue(stream.0);
        Ok(n)
    }

    pub(crate) fn finish(&mut self, stream: StreamId) -> Result<(), StreamError> {
        let send = self.streams.send(stream.0).ok_or(StreamError::Closed)?;
        if send.fin || send.reset {
            return Err(StreamError::Closed);
        }
        send.fin = true;
        self.streams.enqueue(stream.0);
        Ok(())
    }

    pub(crate) fn cancel(&mut self, stream: StreamId, code: u64) {
        self.reset_send(stream, code);
        let id = stream.0;
        if let Some(recv) = self.streams.recv(id)
            && !recv.ended
        {
            recv.ended = true;
            self.controls.push(Control::StopSending { id, code });
        }
        self.streams.retire_if_done(id);
    }

    pub(crate) fn reset_send(&mut self, stream: StreamId, code: u64) {
        let id = stream.0;
        if let Some(send) = self.streams.send(id)
            && !send.is_done()
        {
            send.reset = true;
            let final_size = send.final_size_if_reset();
            self.controls.push(Control::ResetStream { id, code, final_size });
        }
        self.streams.retire_if_done(id);
    }

    pub(crate) fn read(&mut self, stream: StreamId, each: impl FnOnce(&[u8])) -> Result<ReadEnd, StreamError> {
        let id = stream.0;
        let recv = self.streams.recv(id).ok_or(StreamError::Closed)?;
        if recv.ended {
            return Err(StreamError::Closed);
        }
        let end = match recv.read(each) {
            RecvEnd::Blocked => ReadEnd::Blocked,
            RecvEnd::Finished => ReadEnd::Finished,
            RecvEnd::Reset(code) => ReadEnd::Reset(code),
        };
        if let Some(max) = recv.window_update() {
            self.controls.push(Control::MaxStreamData { id, max });
        }
        self.streams.retire_if_done(id);
        Ok(end)
    }

    // Timers.

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut at: Option<Instant> = None;
        let mut at_least = |t: Option<Instant>| {
            if let Some(t) = t {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        match self.state {
            State::Drained => return None,
            State::Closing { until } | State::Draining { until } => return Some(until),
            _ => {}
        }
        at_least(self.connect_by);
        at_least(Some(self.last_received + self.idle_timeout));
        if self.state == State::Established {
            at_least(Some(self.last_received.max(self.last_sent) + self.keep_alive()));
        }
        at_least(self.loss_or_probe().map(|(t, _, _)| t));
        at
    }

    /// The earliest loss-time or probe deadline, its space, and whether it is a probe.
    fn loss_or_probe(&self) -> Option<(Instant, usize, bool)> {
        let loss =
            (0..3).filter_map(|i| self.spaces[i].sent.loss_time.map(|t| (t, i, false))).min_by_key(|&(t, _, _)| t);
        if loss.is_some() {
            return loss;
        }
        let backoff = 1u32 << self.pto_count.min(16);
        let max_ack_delay = self.peer.as_ref().map_or(Duration::ZERO, |p| Duration::from_millis(p.max_ack_delay_ms));
        let probe = (0..3)
            .filter(|&i| self.spaces[i].sent.has_in_flight())
            // 1-RTT probes wait until the handshake is confirmed (RFC 9002 §6.2.1).
            .filter(|&i| i < 2 || self.handshake_confirmed)
            .filter_map(|i| {
                let pto = self.rtt.pto_base() + if i == 2 { max_ack_delay } else { Duration::ZERO };
                self.spaces[i].sent.last_sent.map(|t| (t + pto * backoff, i, true))
            })
            .min_by_key(|&(t, _, _)| t);
        if probe.is_some() || self.handshake_confirmed {
            return probe;
        }
        // Nothing of ours in flight before the handshake is confirmed: the server may be
        // waiting on its anti-amplification limit, so the client probes anyway (RFC 9002
        // §6.2.2.1), in the highest handshake space it has keys for.
        let i = if self.spaces[1].keys.is_some() {
            1
        } else if self.spaces[0].keys.is_some() {
            0
        } else {
            2
        };
        Some((self.last_sent + self.rtt.pto_base() * backoff, i, true))
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Drained => return,
            State::Closing { until } | State::Draining { until } => {
                if now >= until {
                    self.state = State::Drained;
                }
                return;
            }
            _ => {}
        }
        if self.connect_by.is_some_and(|by| now >= by) {
            self.lose(Lost::connect_timeout());
            return;
        }
        if now >= self.last_received + self.idle_timeout {
            let lost = if self.state == State::Established { Lost::idle() } else { Lost::connect_timeout() };
            self.lose(lost);
            return;
        }
        if self.state == State::Established && now >= self.last_received.max(self.last_sent) + self.keep_alive() {
            self.spaces[2].ping = true;
        }
        if let Some((t, i, probe)) = self.loss_or_probe()
            && now >= t
        {
            let space = [Space::Initial, Space::Handshake, Space::Data][i];
            let mut lost = std::mem::take(&mut self.lost);
            if probe {
                self.pto_count += 1;
                let s = &mut self.spaces[i];
                s.sent.probe_oldest(|f| lost.push(f));
                s.ping = true;
            } else {
                let rtt = self.rtt;
                self.spaces[i].sent.detect_lost(now, &rtt, |f| lost.push(f));
            }
            self.on_lost_frames(space, &mut lost);
            self.lost = lost;
        }
    }
}

fn recv_error(e: RecvError) -> ConnError {
    match e {
        RecvError::FlowControl => ConnError::new(code::FLOW_CONTROL_ERROR, "more stream data than our window allows"),
        RecvError::FinalSize => ConnError::new(code::FINAL_SIZE_ERROR, "a stream's final size changed"),
    }
}
