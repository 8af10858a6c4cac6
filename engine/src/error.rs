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
    #[error("invalid plan: {0}")]
    Invalid(#[from] crate::plan::PlanError),
    #[error(
        "{per_thread} connections on one thread need as many open files, but this process may open only {hard} (ulimit -n): raise the limit (ulimit -n, LimitNOFILE= for a service) or use more threads (-t)"
    )]
    FileLimit { per_thread: u64, hard: u64 },
    #[error(
        "{var}='{value}': give a UDP receive buffer size in bytes from {min} to {max}, or leave it unset for {max}"
    )]
    UdpBuffer { var: &'static str, value: String, min: usize, max: usize },
    /// A source address (`Plan::source_addrs`) no socket here can be bound to.
    #[error("source address {addr} is not an address of this machine ({why}): add it to an interface, or leave it out")]
    SourceAddr { addr: std::net::IpAddr, why: String },
    #[error("engine thread failed: {0}")]
    Thread(String),
    /// The system would not start another thread (a task limit such as `ulimit -u`, a cgroup's
    /// pids.max or systemd's TasksMax); the threads already started were stopped.
    #[error(
        "cannot start engine thread {thread} of {threads}: {source} (is a limit on tasks, such as ulimit -u or \
         systemd TasksMax, too low? ask for fewer threads with -t)"
    )]
    Spawn { thread: usize, threads: usize, source: std::io::Error },
}
