//! What a run is asked to do: the plan the engine executes, and how it is split over workers
//! and threads (`split`).

mod checks;
mod extract;
mod ramp;
mod redirects;
mod requests;
mod source_addrs;
mod split;
mod stages;
mod think;
mod validate;

pub use checks::{
    Check, CheckCounts, JsonValue, KEPT_BODY_BYTES, MAX_CHECKS, MAX_KEPT_BODY_BYTES, MAX_KEPT_CHECKS, OnFailure,
    Pattern, Rule, TextTest, json_pointer,
};
pub(crate) use checks::{KeptResponse, ParsedJson};
pub(crate) use extract::SET_COOKIE;
pub use extract::{Extractor, MAX_EXTRACTORS, MAX_VALUE_BYTES, MAX_VARIABLES, Source, is_variable_name};
pub(crate) use ramp::ConnectionRamp;
pub use ramp::{ConnectionIndices, connections_at};
pub use redirects::{DEFAULT_REDIRECTS, MAX_REDIRECTS};
pub(crate) use redirects::{Hops, LOCATION, LOCATION_VAR, Redirects, path_and_query};
pub(crate) use requests::StepOf;
pub use requests::{
    MAX_NAMES, MAX_PACING, MAX_REQUESTS, MAX_SCENARIOS, Mix, NamedRequest, Order, Requests, Scenario, is_request_path,
};
pub(crate) use source_addrs::validate_source_addrs;
pub(crate) use stages::Curve;
pub use stages::{MAX_STAGES, Stage, requested_between, stage_at};
pub use think::Think;
pub use validate::{PlanError, Setting};

use std::net::IpAddr;
use std::time::Duration;

use crate::feeder::Feeder;
use crate::target::Target;
use crate::template::Vocabulary;

/// The most connections one plan may have, as the command line allows.
pub const MAX_CONNECTIONS: usize = 1_000_000;

/// The most engine threads one plan may have: several times the cores of the largest machines,
/// so a real plan never meets it, while a plan off the wire cannot ask for millions.
pub const MAX_THREADS: usize = 1024;

/// The longest duration a plan may hold (run length and timeouts alike): a year is beyond any
/// load test, and it keeps every `Instant + Duration` the engine computes far from overflow,
/// whoever built the plan (the command line, or a controller over the wire).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a thread may hold completions that arrived, collecting a larger batch before it
/// handles them, unless the plan says otherwise. Every response's latency includes the hold it
/// was observed after (measured and reported as the client hold). Against one nginx core with
/// 512 HTTP/2 requests in flight, 500 µs brought the client's CPU per request from 8.7 µs
/// (never holding) to 1.5 µs and raised the server's throughput by a third, the median latency
/// falling from 6.5 to 4.9 ms; 250 µs gave 1.8 µs, 1 ms 1.3 µs (bench/README.md). Loads too
/// light to batch are never held.
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_micros(500);

/// The longest hold a plan may ask for: beyond it the client's own delay would dwarf most
/// latencies worth measuring.
pub const MAX_HOLD: Duration = Duration::from_millis(100);

/// The largest request body a plan may carry, locally and on workers alike: it travels to each
/// worker inside one shard message, whose limit (80 MiB) leaves 16 MiB for the rest.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// The most requests per second a plan may ask for: one every nanosecond, the clock's grain.
pub const MAX_RATE: u64 = 1_000_000_000;

/// The most HTTP/2 or HTTP/3 streams a plan may keep in flight per connection: stream ids
/// allow about a billion, but no server allows more than a few thousand at once, and each one
/// in flight costs memory here.
pub const MAX_STREAMS: u32 = 65_536;

/// The most source addresses one plan may spread its connections over: each adds a local port
/// range's worth of connections to one target address (28,232 by default), so 1,024 of them
/// reach far beyond the connections a plan may have, while a CIDR written one digit short
/// (a /8 for a /28) is refused rather than expanded into millions.
pub const MAX_SOURCE_ADDRS: usize = 1024;

/// How load is offered: the one place that says whether a plan is the closed or the open model,
/// and what its stages count.
#[derive(Debug, Clone, PartialEq)]
pub enum Load {
    /// Each connection (or stream) sends its next request as soon as the last is answered.
    Closed {
        /// The number of open connections ramps through these stages from 0, linearly within
        /// each (k6's ramping VUs), up to the plan's connections; the targets are the whole
        /// run's counts (a split leaves them as they are). Empty: every connection is open from
        /// the start.
        ramp: Vec<Stage>,
        /// Which of the whole run's connections this plan's are: what the ramp opens and
        /// closes, so that every part opens its own.
        indices: ConnectionIndices,
    },
    /// Requests due on a schedule whatever the server does, each taken by the next connection
    /// (or stream) free.
    Open {
        /// Requests per second; with stages, where the first starts from (then it may be 0).
        rate: Rate,
        /// The rate ramps through these, linearly within each; empty for a constant rate. The
        /// run should last their sum: nothing is due after the last.
        stages: Vec<Stage>,
        /// With stages: request k of this plan is due once k + `phase` requests' worth of its
        /// ramp has accumulated, in (0, 1]. A whole plan's is ½ (each request in the middle of
        /// its unit); a split gives part i of P `(phase + i) / P`, so that the parts' requests
        /// interleave evenly at every rate, where a time offset would push a part's last
        /// requests past the run's end.
        phase: f64,
        /// Which of the whole run's connections this plan's are (as in the closed model): what
        /// a template's `{{vu}}` numbers.
        indices: ConnectionIndices,
    },
}

impl Load {
    /// The closed model with every connection open from the start.
    pub fn closed() -> Load {
        Load::Closed { ramp: Vec::new(), indices: ConnectionIndices::WHOLE }
    }

    /// The closed model, the number of open connections ramping through `ramp` from 0.
    pub fn ramp(ramp: Vec<Stage>) -> Load {
        Load::Closed { ramp, indices: ConnectionIndices::WHOLE }
    }

    /// The open model at a constant `per_second`, the first request due at the start.
    pub fn rate(per_second: u64) -> Load {
        Load::Open {
            rate: Rate::per_second(per_second),
            stages: Vec::new(),
            phase: 0.5,
            indices: ConnectionIndices::WHOLE,
        }
    }

    /// The open model ramping through `stages` from `from` requests per second.
    pub fn staged_rate(from: u64, stages: Vec<Stage>) -> Load {
        Load::Open { rate: Rate::per_second(from), stages, phase: 0.5, indices: ConnectionIndices::WHOLE }
    }

    /// The stages, whatever they count (connections or requests per second); empty without.
    pub fn stages(&self) -> &[Stage] {
        match self {
            Load::Closed { ramp, .. } => ramp,
            Load::Open { stages, .. } => stages,
        }
    }

    /// Which of the whole run's connections this plan's are.
    pub fn indices(&self) -> ConnectionIndices {
        match self {
            Load::Closed { indices, .. } | Load::Open { indices, .. } => *indices,
        }
    }

    pub fn is_open(&self) -> bool {
        matches!(self, Load::Open { .. })
    }
}

/// An open-model rate: requests due at fixed, uniform spacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests per second, at most [`MAX_RATE`]. With stages, the rate the first stage starts
    /// from, which may be 0.
    pub per_second: u64,
    /// When the first request is due after the start. Splitting a rate over parts staggers
    /// them by this, so that their requests interleave instead of coming in bursts of one per
    /// part.
    pub offset: Duration,
}

impl Rate {
    /// `per_second` requests per second, the first due at the start.
    pub fn per_second(per_second: u64) -> Rate {
        Rate { per_second, offset: Duration::ZERO }
    }
}

/// When a run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Exactly this many requests are attempted, across all threads and connections.
    Requests(u64),
    /// Requests keep going until this long after the start; those in flight then are counted
    /// as aborted, not as errors.
    Duration(Duration),
}

/// A request: what every connection sends, or one request of a mix (its path apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestSpec {
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RequestSpec {
    pub fn new(method: &str, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        RequestSpec { method: method.to_string(), headers, body }
    }

    /// Whether it sets field `name` (any case).
    pub fn has_header(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    pub(crate) fn is_head(&self) -> bool {
        self.method.eq_ignore_ascii_case("HEAD")
    }

    /// Methods whose requests carry a body by convention get `Content-Length: 0` when empty.
    pub(crate) fn method_expects_body(&self) -> bool {
        ["POST", "PUT", "PATCH"].iter().any(|m| self.method.eq_ignore_ascii_case(m))
    }
}

/// The HTTP version a run speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// One request at a time per connection.
    #[default]
    Http1,
    /// `streams` requests in flight on every connection (fewer if the server allows fewer):
    /// prior knowledge (h2c) on http://, ALPN h2 on https://.
    Http2 { streams: u32 },
    /// `streams` requests in flight on every connection, over QUIC (UDP) with ALPN h3; https://
    /// only.
    Http3 { streams: u32 },
}

impl Protocol {
    /// Every protocol this engine can run, by name (`http/1.1`, `h2`, `h3`): what a worker
    /// tells its controller it can do.
    pub const NAMES: [&'static str; 3] = ["http/1.1", "h2", "h3"];

    /// The protocol's name, as in [`Protocol::NAMES`].
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::Http2 { .. } => "h2",
            Protocol::Http3 { .. } => "h3",
        }
    }
}

/// The most threads a plan can use: a thread keeps at least one connection and, in the open
/// model, one request per second at the plan's peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadLimit {
    most: usize,
}

impl ThreadLimit {
    /// The threads to run on when `wanted` are asked for (`-t`, or the machine's cores): as
    /// many, down to what the plan can use. The one place a thread count is decided; everyone
    /// else takes it as it is, and [`Plan::validate`] refuses what is out of bounds (0, or
    /// more than [`MAX_THREADS`]) with its own words.
    pub fn threads_for(self, wanted: usize) -> usize {
        wanted.min(self.most)
    }
}

/// How HTTP/3's QUIC treats the path it runs over (`--quic-congestion`); nothing else uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuicCongestion {
    /// Loopback-class paths (the default): no pacing, a fixed window that loss does not
    /// shrink, a fixed MTU and a short initial RTT, so that the client never throttles itself
    /// where the path is not what congests.
    #[default]
    Loopback,
    /// A real WAN: quinn-proto's standard controller (CUBIC, with pacing and backing off on
    /// loss), RFC 9002's initial RTT and QUIC's minimum MTU.
    Standard,
}

impl QuicCongestion {
    /// Every choice, by name, as the command line and the report spell them.
    pub const ALL: [QuicCongestion; 2] = [QuicCongestion::Loopback, QuicCongestion::Standard];

    pub fn name(self) -> &'static str {
        match self {
            QuicCongestion::Loopback => "loopback",
            QuicCongestion::Standard => "standard",
        }
    }
}

/// How TLS certificates are checked, like curl: verified against the bundled web roots by
/// default, plus any extra CA certificates; `insecure` skips verification.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub insecure: bool,
    /// Extra trusted CA certificates, PEM.
    pub extra_ca_pem: Vec<u8>,
}

/// A complete load plan for one engine.
///
/// Built with [`Plan::new`], the one place its defaults live (other crates cannot write it as a
/// literal), then adjusted field by field.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Plan {
    /// The origin every request goes to, and the one request's path.
    pub target: Target,
    pub requests: Requests,
    pub protocol: Protocol,
    pub connections: usize,
    pub threads: usize,
    pub stop: Stop,
    pub connect_timeout: Duration,
    /// A request without its full response after this long is an error of kind timeout.
    pub request_timeout: Option<Duration>,
    /// With false, every request gets a fresh connection (`Connection: close`).
    pub keepalive: bool,
    pub tls: TlsOptions,
    /// How long a thread may hold completions to collect a larger batch: less CPU per request,
    /// at the price of up to this much added to a latency. Zero handles every completion as it
    /// comes. At most [`MAX_HOLD`].
    pub max_hold: Duration,
    /// How much of a body is kept for its step's checks and extractors (1 to
    /// [`MAX_KEPT_BODY_BYTES`]; [`KEPT_BODY_BYTES`] by default).
    pub kept_body_bytes: usize,
    /// The closed or the open model, with their stages.
    pub load: Load,
    /// The first this many whole seconds of the load are counted apart (`RunResult::warm_up`);
    /// a request budget (`-n`) counts only the requests after it.
    pub warm_up: Option<Duration>,
    /// HTTP/3: how QUIC's congestion control treats the path.
    pub quic_congestion: QuicCongestion,
    /// The I/O beneath the loops: io_uring, epoll, or (auto) io_uring where it works.
    pub engine: crate::engine::kind::EngineChoice,
    /// The local addresses connections are bound to, each connection to one of them in turn,
    /// so that one engine reaches one target address through more than one local port range;
    /// all of the target's family, at most [`MAX_SOURCE_ADDRS`]. Empty: the kernel picks, by
    /// route. A split's parts keep the whole list (threads share the machine's addresses).
    pub source_addrs: Vec<IpAddr>,
    /// Test data for the requests' templates (`{{users.email}}`); at most [`MAX_FEEDERS`].
    pub feeders: Vec<Feeder>,
}

impl Plan {
    /// A plan of `connections` connections sending `request` to `target` until `stop`, with the
    /// command line's defaults for the rest: HTTP/1.1, one thread, keep-alive, a 5 s connect
    /// timeout, a 30 s request timeout, certificates verified, completions held at most
    /// [`DEFAULT_MAX_HOLD`], the closed model with every connection open from the start, QUIC for loopback-class paths.
    pub fn new(target: Target, request: RequestSpec, connections: usize, stop: Stop) -> Self {
        Plan {
            target,
            requests: Requests::One(request),
            protocol: Protocol::Http1,
            connections,
            threads: 1,
            stop,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Some(Duration::from_secs(30)),
            keepalive: true,
            tls: TlsOptions::default(),
            max_hold: DEFAULT_MAX_HOLD,
            kept_body_bytes: KEPT_BODY_BYTES,
            load: Load::closed(),
            warm_up: None,
            quic_congestion: QuicCongestion::Loopback,
            engine: crate::engine::kind::EngineChoice::Auto,
            source_addrs: Vec::new(),
            feeders: Vec::new(),
        }
    }

    /// The most requests per second the plan asks for at any time (its rate, or its stages'
    /// highest); None in the closed model.
    pub fn peak_rate(&self) -> Option<u64> {
        match &self.load {
            Load::Open { rate, stages, .. } => Some(Curve::peak(rate.per_second, stages)),
            Load::Closed { .. } => None,
        }
    }

    /// The threads this plan runs on when `wanted` are asked for (`-t`, or the machine's
    /// cores). See [`ThreadLimit::threads_for`].
    pub fn threads_for(&self, wanted: usize) -> usize {
        self.thread_limit().threads_for(wanted)
    }

    /// What bounds this plan's threads, apart from the plan: for deciding them where the
    /// machine's cores become known (a worker's Hello), long after the plan was encoded.
    pub fn thread_limit(&self) -> ThreadLimit {
        let peak = self.peak_rate().map_or(usize::MAX, |r| usize::try_from(r).unwrap_or(usize::MAX));
        ThreadLimit { most: self.connections.min(peak) }
    }

    /// What its templates' slots may name: its feeders' columns, and the variables its
    /// extractors set.
    pub fn vocabulary(&self) -> Vocabulary {
        Vocabulary::of(&self.feeders).with_variables(self.requests.variables())
    }

    /// The whole seconds of warm-up (0 without).
    pub(crate) fn warm_up_seconds(&self) -> u32 {
        self.warm_up.map_or(0, |d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
    }
}
