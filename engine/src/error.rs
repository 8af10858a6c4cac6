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
    #[error(
        "{per_thread} connections on one thread need as many open files, but this process may open only {hard} (ulimit -n): raise the limit (ulimit -n, LimitNOFILE= for a service) or use more threads (-t)"
    )]
    FileLimit { per_thread: u64, hard: u64 },
    #[error("engine thread failed: {0}")]
    Thread(String),
}
