//! QUIC for HTTP/3: quinn-proto's Sans-I/O state machine behind a narrow seam, driven only by
//! the engine's loop (no async runtime, no quinn endpoint driver).
//!
//! [`Transport`] is one client connection: `receive` datagrams (several at once from UDP GRO),
//! `poll_transmit` batches for one GSO send, `poll_timeout`/`handle_timeout`, streams
//! (`open_bi`, `write`, `finish`, `read`, our and the peer's uni streams) and [`Event`]s out.
//! Nothing of quinn-proto shows through it, so an own QUIC could take its place if a profile
//! says quinn-proto costs too much. [`Config`] is decided once per run: ALPN h3, rustls with
//! ring and the same `-k`/`--cacert` meaning as TCP's TLS, large flow-control windows and, on
//! loopback-class paths (the default), no pacing, a fixed window and a fixed MTU; the plan's
//! `quic_congestion` chooses the standard controller for a real WAN.

mod config;
mod congestion;
mod lost;
mod transport;
pub(crate) mod varint;

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
pub(crate) use config::Congestion;
pub(crate) use config::{ALPN_H3, Config};
pub(crate) use lost::Lost;
#[cfg(test)]
pub(crate) use transport::{Datagrams, StreamError};
pub(crate) use transport::{Event, ReadEnd, StreamId, Transport};
