//! volley-engine: the load engine.
//!
//! One OS thread per `threads`, each owning one io_uring and its share of the connections; no
//! async runtime. Protocol code is Sans-I/O (the `h1`, `h2` and `h3` sessions, `tls`, `quic`): it
//! takes bytes and the clock and returns bytes, events and deadlines, and only `driver` touches
//! sockets. The engine knows nothing of gRPC or of the report: it takes a [`Plan`] (checked by
//! [`Plan::validate`]), hands out one [`Snapshot`] per second, and returns [`Stats`] that merge
//! exactly with any other engine's.

mod driver;
mod engine;
mod error;
mod fd_limit;
mod feeder;
mod gate;
mod gso;
mod h1;
mod h2;
mod h3;
mod plan;
mod quic;
mod random;
mod ring;
mod run;
mod session;
mod stats;
mod target;
mod template;
#[cfg(test)]
mod test_rng;
mod tls;

pub use driver::check_source_addrs;
pub use engine::{EPOLL_COST, Engine, EngineChoice, choose_engine, fallback_line};
pub use error::EngineError;
pub use feeder::{
    DEFAULT_MAX_FEEDER_BYTES, Feeder, FeederMode, MAX_COLUMNS, MAX_FEEDERS, MAX_TABLE_BYTES, Table, TableError,
    is_feeder_name,
};
pub use plan::{
    Check, CheckCounts, ConnectionIndices, DEFAULT_MAX_HOLD, DEFAULT_REDIRECTS, Extractor, JsonValue, KEPT_BODY_BYTES,
    Load, MAX_BODY_BYTES, MAX_CHECKS, MAX_CONNECTIONS, MAX_DURATION, MAX_EXTRACTORS, MAX_HOLD, MAX_KEPT_BODY_BYTES,
    MAX_KEPT_CHECKS, MAX_NAMES, MAX_PACING, MAX_RATE, MAX_REDIRECTS, MAX_REQUESTS, MAX_SCENARIOS, MAX_SOURCE_ADDRS,
    MAX_STAGES, MAX_STREAMS, MAX_THREADS, MAX_VALUE_BYTES, MAX_VARIABLES, Mix, NamedRequest, OnFailure, Order,
    Pattern as CheckPattern, Plan, PlanError, Protocol, QuicCongestion, Rate, RequestSpec, Requests, Rule as CheckRule,
    Scenario, Setting, Source as ExtractSource, Stage, Stop, TextTest as CheckText, Think, ThreadLimit, TlsOptions,
    connections_at, is_request_path, is_variable_name, json_pointer, requested_between, stage_at,
};
pub use ring::{RingSupport, kernel_release, probe_io_uring};
pub use run::{Progress, RunControl, RunResult, UDP_BUFFER_VAR, run};
pub use stats::{
    Counters, ErrorKind, HistogramError, Histograms, Merge, NameStats, Names, RetryAfter, RetryAfterCounts,
    ScenarioStats, Scenarios, Snapshot, Stats, decode_histogram, encode_histogram, new_histogram,
};
pub use target::{Scheme, Target, TargetError};
pub use template::{TEMPLATE_BUILT_INS, TemplateError, Vocabulary, check_template, template_skeleton};
