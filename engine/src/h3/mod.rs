//! Sans-I/O HTTP/3 (RFC 9114) and QPACK (RFC 9204) for the client: what goes over QUIC streams,
//! not QUIC itself.
//!
//! - `varint`, `frame`: QUIC's variable-length integers; HTTP/3 frames, a streaming decoder
//!   for one stream's bytes in any pieces, and encoders for our control stream and a request.
//! - `qpack`: the static table, the request field section encoder, and the response decoder
//!   that finds `:status` and refuses the dynamic table (we advertise a capacity of 0).
//! - `response`: one request stream's response: status, body bytes, end, or an error.
//! - `uni`: the server's unidirectional streams (control, push, QPACK, unknown) and the control
//!   stream's rules (SETTINGS first and once, GOAWAY).
//! - `request`: `Config`, what every connection of a run sends, encoded once.
//! - `error`: `H3Error`, each with the HTTP/3 or QPACK code to close the connection or stream.
//!
//! Not here yet: the session that joins these to the QUIC transport in the event loop (it
//! opens the control stream and request streams, feeds each stream's bytes to its reader and
//! counts what they say, as `h2::session` does).

pub(crate) mod error;
pub(crate) mod frame;
pub(crate) mod qpack;
pub(crate) mod request;
pub(crate) mod response;
pub(crate) mod uni;
pub(crate) mod varint;

pub(crate) use error::H3Error;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod streams_tests;
