//! HTTP/1.1: the request encoder (done once at start-up), the response scanner, and the
//! session that carries one request at a time on a connection.

mod request;
mod scanner;
mod session;

pub(crate) use request::{Template, encode_request, encode_template};
pub(crate) use session::{Config, Session};
