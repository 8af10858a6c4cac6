//! volley-worker: the worker daemon, and the pieces a controller shares with it.
//!
//! A worker runs its controller's shard of a load plan on the engine and streams back what
//! happens (protocol `volley.v1`, see volley-proto). The crate has three layers:
//!
//! - [`shard`]: running one shard on the engine and reporting [`shard::Event`]s. No gRPC: the
//!   controller's in-process worker calls it directly.
//! - [`wire`]: translating plans, statistics and events to and from the protocol, both ways.
//! - the daemon ([`serve`], [`spawn`]): a tonic server with the token check, TLS, the allowed
//!   targets, one run at a time, and the watchdog that stops a run whose controller went away.
//!
//! [`clock`] is the worker's clock as the protocol states it (CLOCK_MONOTONIC nanoseconds).

mod allow;
mod auth;
pub mod clock;
mod config;
mod daemon;
mod host;
mod incoming;
pub mod metrics;
mod runner;
mod service;
mod session;
pub mod shard;
mod state;
pub mod synthetic;
pub mod wire;

pub use config::{TlsFiles, WorkerConfig, WorkerError, error_chain};
pub use daemon::{RunningWorker, serve, spawn};
pub use host::physical_cores;
pub use incoming::IDLE_TIMEOUT;
pub use runner::ShardRunner;
