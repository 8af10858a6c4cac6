//! The bearer token every RPC must carry when the worker has one.
//!
//! Checked by a tonic interceptor, before any handler runs, so a caller without the token
//! learns nothing and starts nothing.

use std::sync::Arc;

use tonic::{Request, Status};

/// What a caller without the right token is told; the same whether the token was missing or
/// wrong, so it cannot tell which.
const REFUSAL: &str = "volley worker: wrong or missing token";

#[derive(Clone)]
pub(crate) struct Auth {
    /// None: every caller is let in (a loopback-only worker without a token).
    token: Option<Arc<[u8]>>,
}

impl Auth {
    pub(crate) fn new(token: Option<&str>) -> Auth {
        Auth { token: token.map(|t| Arc::from(t.as_bytes())) }
    }

    /// Whether `authorization` (the header's value) carries the token.
    pub(crate) fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(token) = &self.token else { return true };
        let Some(given) = authorization.and_then(|v| v.strip_prefix(b"Bearer ")) else { return false };
        constant_time_eq(given, token)
    }
}

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request.metadata().get("authorization").map(|v| v.as_bytes());
        if self.admits(header) { Ok(request) } else { Err(Status::unauthenticated(REFUSAL)) }
    }
}

/// Compares without stopping at the first differing byte, so the time taken does not tell an
/// attacker how much of a guess was right. Only the length can show, and a length says little.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0xff);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::service::Interceptor;

    fn request_with(auth: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(a) = auth {
            r.metadata_mut().insert("authorization", a.parse().expect("ASCII"));
        }
        r
    }

    #[test]
    fn equal_means_equal() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"secret2", b"secret"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(!constant_time_eq(b"a\xff", b"a"));
    }

    #[test]
    fn the_right_token_is_let_in() {
        let mut auth = Auth::new(Some("s3cret"));
        assert!(auth.call(request_with(Some("Bearer s3cret"))).is_ok());
    }

    #[test]
    fn a_wrong_or_missing_token_is_refused_the_same_way() {
        let mut auth = Auth::new(Some("s3cret"));
        for given in
            [None, Some("Bearer wrong"), Some("Bearer s3cret2"), Some("s3cret"), Some("Basic s3cret"), Some("Bearer ")]
        {
            let status = auth.call(request_with(given)).expect_err("refused");
            assert_eq!(status.code(), tonic::Code::Unauthenticated, "{given:?}");
            assert_eq!(status.message(), REFUSAL);
        }
    }

    #[test]
    fn without_a_token_everyone_is_let_in() {
        let mut auth = Auth::new(None);
        assert!(auth.call(request_with(None)).is_ok());
        assert!(auth.call(request_with(Some("Bearer whatever"))).is_ok());
    }
}
