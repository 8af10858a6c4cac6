//! Sans-I/O HTTP/2 client: framing (`frame`), header compression (`hpack`) and the connection
//! state machine (`conn`). Bytes and the clock in, bytes to send and completed responses out;
//! the event loop is the only thing that touches sockets.
//!
//! Not wired into the event loop yet (issue 4 is landing in parts), hence the allowance below;
//! every part is unit-tested on byte strings.
#![allow(dead_code)]

pub(crate) mod conn;
pub(crate) mod frame;
pub(crate) mod hpack;
