//! QUIC for HTTP/3, Sans-I/O, driven only by the engine's loop (no async runtime).
//!
//! [`Transport`] is one client connection: `receive` datagrams (several at once from UDP GRO),
//! `poll_transmit` batches for one GSO send, `poll_timeout`/`handle_timeout`, streams
//! (`open_bi`, `write`, `finish`, `read`, our and the peer's uni streams) and [`Event`]s out.
//! Behind it runs one of two QUICs, chosen per run by the plan's `quic_congestion`:
//! - `client`, our own, on loopback-class paths (the default): lean per-stream state, ACKs and
//!   sends once per batch, no congestion control or pacing, a fixed MTU and a fixed window.
//! - `quinn`, quinn-proto's state machine, for `--quic-congestion standard`: its CUBIC,
//!   pacing and QUIC's minimum MTU for a real WAN.
//!
//! [`Config`] is decided once per run: ALPN h3, rustls with ring and the same `-k`/`--cacert`
//! meaning as TCP's TLS, large flow-control windows.

mod client;
mod config;
mod lost;
mod quinn;
mod surface;
mod transport;
pub(crate) mod varint;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
pub(crate) use config::Congestion;
pub(crate) use config::{ALPN_H3, Config};
pub(crate) use lost::Lost;
#[cfg(test)]
pub(crate) use surface::{Datagrams, StreamError};
pub(crate) use surface::{Event, ReadEnd, StreamId};
pub(crate) use transport::Transport;
