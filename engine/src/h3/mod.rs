//! Sans-I/O HTTP/3 (RFC 9114) and QPACK (RFC 9204) for the client: what goes over QUIC streams,
//! not QUIC itself.
//!
//! - `frame`: HTTP/3 frames (with `quic::varint`), a streaming decoder for one stream's bytes
//!   in any pieces, and encoders for our control stream and a request.
//! - `qpack`: the static table, the request field section encoder, and the response decoder
//!   that finds `:status` and refuses the dynamic table (we advertise a capacity of 0).
//! - `response`: one request stream's response: status, body bytes, end, or an error.
//! - `uni`: the server's unidirectional streams (control, push, QPACK, unknown) and the control
//!   stream's rules (SETTINGS first and once, GOAWAY).
//! - `request`: `Config`, what every connection of a run sends, encoded once.
//! - `error`: `H3Error`, each with the HTTP/3 or QPACK code to close the connection or stream.
//! - `session`: one connection as the loop sees it: the QUIC transport, our control stream,
//!   the server's streams, a stream per request, and HTTP/3's counting rules.

pub(crate) mod error;
pub(crate) mod frame;
pub(crate) mod qpack;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod session;
pub(crate) mod uni;

pub(crate) use error::H3Error;
pub(crate) use request::Config;
pub(crate) use session::{Session, Setup};

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod streams_tests;
