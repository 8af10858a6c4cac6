//! How a worker daemon is set up, and why it may refuse to start.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::Exporter;
use crate::runner::ShardRunner;

/// Everything the daemon needs; the command line (in the controller crate) fills it in.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The bearer token every RPC must carry. Required when `listen` is not a loopback address.
    pub token: Option<String>,
    /// Serve gRPC over TLS with this certificate and key.
    pub tls: Option<TlsFiles>,
    /// Require client certificates signed by this CA (PEM); needs `tls`.
    pub client_ca: Option<PathBuf>,
    /// Targets this worker may send load to: CIDRs, addresses or host names. Empty: any.
    pub allow_targets: Vec<String>,
    /// The name Hello reports; the host name when None.
    pub name: Option<String>,
    /// A connection whose peer sends nothing for this long is closed ([`crate::IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// `--prometheus`: the endpoint (already listening) that shows this worker's runs.
    pub metrics: Option<Arc<Exporter>>,
    /// What runs an admitted shard: the engine, unless a simulated fleet says otherwise.
    pub runner: ShardRunner,
}

impl WorkerConfig {
    /// A worker on `listen` with no token, no TLS and no limits (loopback only).
    pub fn new(listen: SocketAddr) -> WorkerConfig {
        WorkerConfig {
            listen,
            token: None,
            tls: None,
            client_ca: None,
            allow_targets: Vec::new(),
            name: None,
            idle_timeout: crate::IDLE_TIMEOUT,
            metrics: None,
            runner: ShardRunner::engine(),
        }
    }
}

/// The worker's own certificate chain and private key, PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Why the daemon did not start, or stopped. Each is one line that says what to change.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(
        "refusing to listen on {0} without a token: anyone who reaches it could send load anywhere; \
         give a token (--token-file or VOLLEY_TOKEN) or listen on a loopback address"
    )]
    NoToken(SocketAddr),
    /// io_uring cannot be used here: a worker that would fail every shard says so at start-up.
    #[error("{0}")]
    IoUring(String),
    #[error("the worker token is empty")]
    EmptyToken,
    #[error("cannot read the {what} '{}': {source}", path.display())]
    ReadFile { what: &'static str, path: PathBuf, source: io::Error },
    #[error("a client CA needs TLS: give the worker's own certificate and key too")]
    ClientCaWithoutTls,
    #[error("bad TLS set-up for the worker: {0}")]
    Tls(String),
    /// An `allow_targets` entry that is neither a network nor a host name.
    #[error("{0}")]
    AllowList(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot start the worker's runtime: {0}")]
    Runtime(io::Error),
    #[error("cannot wait for signals: {0}")]
    Signal(io::Error),
    #[error("the worker's server failed: {0}")]
    Serve(String),
}

/// An error and its sources in one line: tonic's own messages ("transport error") say little.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = s.source();
    }
    line
}
