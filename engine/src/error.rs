//! Errors that stop a run before or instead of producing statistics.

use crate::target::TargetError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// io_uring cannot be used here; the message says why and how to fix it.
    #[error("{0}")]
    IoUringUnavailable(String),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("TLS set-up: {0}")]
    TlsSetup(String),
    #[error("invalid plan: {0}")]
    Plan(&'static str),
    #[error("engine thread failed: {0}")]
    Thread(String),
}
