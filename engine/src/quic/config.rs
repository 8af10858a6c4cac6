//! How every QUIC connection of a run is set up, decided once per run: TLS (the same `-k` and
//! `--cacert` meaning as TCP's, ALPN h3), and which QUIC runs it: our own for loopback-class
//! paths or, with `--quic-congestion standard`, quinn-proto with its settings for a real WAN.

use std::sync::Arc;
use std::time::Duration;

use quinn_proto::crypto::rustls::QuicClientConfig;
use quinn_proto::{ClientConfig, EndpointConfig, IdleTimeout, TransportConfig, VarInt};

use super::client;
use crate::error::EngineError;
use crate::gso::{GSO_MAX_BYTES, GSO_MAX_SEGMENTS};
use crate::plan::{Plan, TlsOptions};

/// HTTP/3's ALPN token.
pub(crate) const ALPN_H3: &[u8] = b"h3";

/// The UDP payload size on loopback-class paths: what a 1500-byte Ethernet MTU carries under
/// IPv6 and UDP headers, so a LAN takes it too; loopback would take more, but responses are
/// small and one size everywhere keeps the path simple. Fixed, without MTU discovery, whose
/// probes would only cost packets in a short run.
pub(crate) const LOOPBACK_MTU: u16 = 1452;
/// QUIC's minimum (RFC 9000 §14), which every path must carry: the standard setting's MTU.
pub(crate) const MIN_MTU: u16 = 1200;
/// Flow-control windows: large enough that no window update needs to flow in a run of small
/// responses (16 MiB per stream, as HTTP/2's; the connection's is QUIC's maximum).
const STREAM_WINDOW: u32 = 16 << 20;
/// How much of our own stream data may be in flight unacknowledged (quinn-proto).
const SEND_WINDOW: u64 = 16 << 20;
/// Uni streams the server may open at once: HTTP/3's control and two QPACK streams, with room
/// for reserved (grease) stream types a server may add.
const PEER_UNI_STREAMS: u32 = 16;
/// With no packet for this long the connection is over (the server's own limit may be lower).
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// A PING this often keeps a quiet connection (parked before the start, or waiting for a slow
/// response) inside both sides' idle timeouts; under load other packets do it for free.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
/// The RTT assumed before the first sample on loopback-class paths. RFC 9002's 333 ms is for
/// unknown paths: here it would make a lost handshake packet cost a second.
const LOOPBACK_INITIAL_RTT: Duration = Duration::from_millis(10);

/// How QUIC reacts to the path: the plan's choice (`--quic-congestion`). `Loopback` is our own
/// QUIC with a fixed window (no pacing, no slow start, no backing off on loss), a fixed MTU of
/// [`LOOPBACK_MTU`] and a short initial RTT; `Standard` is quinn-proto's standard controller
/// (CUBIC, with pacing), its initial RTT, and QUIC's minimum MTU.
pub(crate) use crate::plan::QuicCongestion as Congestion;

/// Everything a run's QUIC connections share: which QUIC, and its settings.
pub(crate) enum Config {
    Own(Arc<client::Settings>),
    Quinn(QuinnConfig),
}

/// quinn-proto's side of [`Config`].
pub(crate) struct QuinnConfig {
    pub(super) client: ClientConfig,
    pub(super) endpoint: Arc<EndpointConfig>,
    pub(super) connect_timeout: Duration,
    /// Datagrams one GSO batch may carry: within the kernel's limits for one send.
    pub(super) max_datagrams: usize,
}

impl Config {
    /// The run's QUIC configuration: the plan's TLS options, congestion choice and connect
    /// timeout.
    pub(crate) fn for_plan(plan: &Plan) -> Result<Self, EngineError> {
        Self::new(&plan.tls, plan.quic_congestion, plan.connect_timeout)
    }

    /// The same from the parts of a plan.
    pub(crate) fn new(
        tls: &TlsOptions,
        congestion: Congestion,
        connect_timeout: Duration,
    ) -> Result<Self, EngineError> {
        let rustls = crate::tls::client_config(tls, &[ALPN_H3])?;
        Self::with_rustls(rustls, congestion, connect_timeout)
    }

    /// The same from a rustls configuration made elsewhere (tests trust their own CA).
    pub(crate) fn with_rustls(
        rustls: Arc<rustls::ClientConfig>,
        congestion: Congestion,
        connect_timeout: Duration,
    ) -> Result<Self, EngineError> {
        if congestion == Congestion::Loopback {
            return Ok(Config::Own(Arc::new(own_settings(rustls, connect_timeout))));
        }
        let crypto = QuicClientConfig::try_from(rustls).map_err(|e| EngineError::TlsSetup(format!("QUIC: {e}")))?;
        let mut client = ClientConfig::new(Arc::new(crypto));
        client.transport_config(Arc::new(standard_transport()));
        Ok(Config::Quinn(QuinnConfig {
            client,
            endpoint: Arc::new(EndpointConfig::default()),
            connect_timeout,
            max_datagrams: datagrams_per_send(MIN_MTU),
        }))
    }
}

/// How many datagrams of `mtu` bytes one GSO send carries, within the kernel's limits.
fn datagrams_per_send(mtu: u16) -> usize {
    (GSO_MAX_BYTES / usize::from(mtu)).min(GSO_MAX_SEGMENTS)
}

/// Our own QUIC's settings on loopback-class paths.
fn own_settings(tls: Arc<rustls::ClientConfig>, connect_timeout: Duration) -> client::Settings {
    client::Settings {
        tls,
        mtu: usize::from(LOOPBACK_MTU),
        max_datagrams: datagrams_per_send(LOOPBACK_MTU),
        connect_timeout,
        idle_timeout: IDLE_TIMEOUT,
        keep_alive: KEEP_ALIVE,
        initial_rtt: LOOPBACK_INITIAL_RTT,
        stream_window: u64::from(STREAM_WINDOW),
    }
}

/// quinn-proto's transport for a real WAN: its standard controller and initial RTT.
fn standard_transport() -> TransportConfig {
    let mut t = TransportConfig::default();
    // HTTP/3 servers open no bidirectional streams (RFC 9114 §6.1): quinn-proto then treats
    // one as the peer's protocol error.
    t.max_concurrent_bidi_streams(VarInt::from_u32(0))
        .max_concurrent_uni_streams(VarInt::from_u32(PEER_UNI_STREAMS))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::MAX)
        .send_window(SEND_WINDOW)
        .keep_alive_interval(Some(KEEP_ALIVE))
        .datagram_receive_buffer_size(None)
        .mtu_discovery_config(None)
        .initial_mtu(MIN_MTU)
        .min_mtu(MIN_MTU)
        .enable_segmentation_offload(true);
    // 30 s is far below IdleTimeout's bound (2^62 ms), so this cannot fail.
    if let Ok(idle) = IdleTimeout::try_from(IDLE_TIMEOUT) {
        t.max_idle_timeout(Some(idle));
    }
    t
}
