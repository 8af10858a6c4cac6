//! Sans-I/O HTTP/2 client: framing (`frame`), header compression (`hpack`), the connection
//! state machine (`conn`) and the session around it that counts what it reports (`session`).
//! Bytes and the clock in, bytes to send and completed responses out; the event loop is the
//! only thing that touches sockets.

pub(crate) mod conn;
pub(crate) mod frame;
pub(crate) mod hpack;
mod request;
mod session;

pub(crate) use request::{RequestFields, encode_requests, request_fields};
pub(crate) use session::{Config, Session};
