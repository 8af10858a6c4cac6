//! HTTP/1.1: the request encoder (done once at start-up) and the response scanner.

mod request;
mod scanner;

pub(crate) use request::encode_request;
pub(crate) use scanner::{Response, Scanner};
