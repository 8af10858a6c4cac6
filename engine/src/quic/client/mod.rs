//! Our own QUIC v1 client, for loopback-class paths: what a load generator needs of QUIC and
//! no more, so that a request costs a few small structures instead of quinn-proto's full
//! per-stream machinery (which was about 45% of volley's own CPU per HTTP/3 request).
//!
//! - `packet`: headers, packet numbers, protection (rustls's QUIC keys), coalesced packets.
//! - `frame`: the frames of RFC 9000 §19, parsed without copying and encoded.
//! - `params`: transport parameters, ours and the server's.
//! - `ack`: the packet numbers received, for our ACKs.
//! - `recovery`: what we sent and the peer has yet to acknowledge; loss detection, RTT.
//! - `stream`: one stream's sending and receiving halves; `streams`: a connection's streams.
//! - `conn`: the connection: handshake, spaces, streams, timers, events; `conn/send.rs`
//!   its sending half.

mod ack;
mod conn;
mod frame;
mod packet;
mod params;
mod recovery;
mod stream;
mod streams;

pub(crate) use conn::{Connection, Settings};
