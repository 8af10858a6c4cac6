//! Translation between the engine's types and the protocol's (`volley.v1`), both ways.
//!
//! The worker uses one direction and the controller the other; keeping both here means the two
//! sides cannot drift apart. Everything coming off the wire is checked: a shard the engine
//! could not run, a histogram that does not decode or an unknown error kind is a [`WireError`],
//! never a panic.

use std::net::IpAddr;
use std::time::Duration;

use volley_engine::{
    Check, CheckCounts, CheckPattern, CheckRule, CheckText, ConnectionIndices, Counters, Engine, EngineChoice,
    ErrorKind, ExtractSource, Extractor, HistogramError, JsonValue, Load, MAX_CHECKS, MAX_EXTRACTORS, MAX_NAMES,
    MAX_REDIRECTS, MAX_REQUESTS, MAX_SCENARIOS, MAX_SOURCE_ADDRS, MAX_VARIABLES, Mix, NameStats, NamedRequest,
    OnFailure, Order, Plan, Protocol, QuicCongestion, Rate, RequestSpec, Requests, RingSupport, Scenario,
    ScenarioStats, Stage, Stats, Stop, Table, Target, TargetError, Think, TlsOptions, Vocabulary, decode_histogram,
    encode_histogram, new_histogram,
};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1;

use crate::shard::{Event, Outcome};

mod feeders;

pub use feeders::{Assembly, CHUNK_BYTES, feeder_rows};

/// Why a message from the other side cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("incompatible protocol: the peer speaks {theirs}, this side speaks {ours}")]
    Protocol { theirs: u32, ours: u32 },
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("invalid shard: {0}")]
    Shard(String),
    #[error("invalid statistics: {0}")]
    Stats(String),
    #[error("invalid statistics: {0}")]
    Histogram(#[from] HistogramError),
    #[error("unknown error kind '{0}'")]
    ErrorKind(String),
    #[error("io_uring is not usable on the worker: {0}")]
    IoUring(String),
    #[error("a run event without its content")]
    EmptyEvent,
}

/// One worker's part of `plan` as the protocol carries it, with the plan's threads.
pub fn shard_to_proto(plan: &Plan) -> v1::Shard {
    // The one request travels in the shard's own fields, a mix in `mix` with those empty.
    let (one, mix, order) = match &plan.requests {
        Requests::One(spec) => (Some(spec), Vec::new(), None),
        Requests::Mix(mix) => {
            (None, mix.requests.iter().map(mix_request_to_proto).collect(), Some(order_to_proto(&mix.order)))
        }
    };
    v1::Shard {
        protocol: PROTOCOL_VERSION,
        url: plan.target.to_string(),
        method: one.map(|spec| spec.method.clone()).unwrap_or_default(),
        headers: one.map(|spec| headers_to_proto(&spec.headers)).unwrap_or_default(),
        body: one.map(|spec| spec.body.clone()).unwrap_or_default(),
        mix,
        order,
        connections: u32::try_from(plan.connections).unwrap_or(u32::MAX),
        threads: u32::try_from(plan.threads).unwrap_or(u32::MAX),
        stop: Some(match plan.stop {
            Stop::Requests(n) => v1::shard::Stop::Requests(n),
            Stop::Duration(d) => v1::shard::Stop::DurationNanos(nanos(d)),
        }),
        connect_timeout_nanos: nanos(plan.connect_timeout),
        request_timeout_nanos: plan.request_timeout.map_or(0, nanos),
        keepalive: plan.keepalive,
        insecure: plan.tls.insecure,
        extra_ca_pem: plan.tls.extra_ca_pem.clone(),
        http_version: match plan.protocol {
            Protocol::Http1 => 1,
            Protocol::Http2 { .. } => 2,
            Protocol::Http3 { .. } => 3,
        },
        streams: match plan.protocol {
            Protocol::Http1 => 1,
            Protocol::Http2 { streams } | Protocol::Http3 { streams } => streams,
        },
        max_hold_nanos: Some(nanos(plan.max_hold)),
        warm_up_nanos: plan.warm_up.map_or(0, nanos),
        load: Some(load_to_proto(&plan.load)),
        quic_congestion: match plan.quic_congestion {
            QuicCongestion::Loopback => 0,
            QuicCongestion::Standard => 1,
        },
        source_addrs: plan.source_addrs.iter().map(IpAddr::to_string).collect(),
        feeders: plan.feeders.iter().map(feeders::feeder_to_proto).collect(),
        engine: plan.engine.name().to_string(),
        kept_body_bytes: plan.kept_body_bytes as u64,
    }
}

fn headers_to_proto(headers: &[(String, String)]) -> Vec<v1::Header> {
    headers.iter().map(|(name, value)| v1::Header { name: name.clone(), value: value.clone() }).collect()
}

fn mix_request_to_proto(r: &NamedRequest) -> v1::MixRequest {
    v1::MixRequest {
        name: r.name.clone(),
        method: r.spec.method.clone(),
        path_and_query: r.path_and_query.clone(),
        headers: headers_to_proto(&r.spec.headers),
        body: r.spec.body.clone(),
        templated: r.templated,
        checks: r.checks.iter().map(check_to_proto).collect(),
        extract: r.extract.iter().map(extractor_to_proto).collect(),
        think: r.think.map(think_to_proto),
        cookies: r.cookies,
        follow_redirects: u32::from(r.follow_redirects),
    }
}

fn think_to_proto(think: Think) -> v1::Think {
    let pause = match think {
        Think::Fixed(d) => v1::think::Pause::FixedNanos(nanos(d)),
        Think::Uniform(low, high) => {
            v1::think::Pause::Uniform(v1::ThinkRange { low_nanos: nanos(low), high_nanos: nanos(high) })
        }
        Think::Exponential(mean) => v1::think::Pause::ExponentialMeanNanos(nanos(mean)),
    };
    v1::Think { pause: Some(pause) }
}

/// A think time as it came; its length is `Plan::validate`'s to judge.
fn think_from_proto(t: &v1::Think) -> Result<Think, WireError> {
    match &t.pause {
        Some(v1::think::Pause::FixedNanos(n)) => Ok(Think::Fixed(Duration::from_nanos(*n))),
        Some(v1::think::Pause::Uniform(r)) => {
            Ok(Think::Uniform(Duration::from_nanos(r.low_nanos), Duration::from_nanos(r.high_nanos)))
        }
        Some(v1::think::Pause::ExponentialMeanNanos(n)) => Ok(Think::Exponential(Duration::from_nanos(*n))),
        None => Err(WireError::Shard("a think time without a pause".into())),
    }
}

fn extractor_to_proto(e: &Extractor) -> v1::Extractor {
    let source = match &e.from {
        ExtractSource::Json { pointer } => v1::extractor::Source::JsonPointer(pointer.clone()),
        ExtractSource::Header { name } => v1::extractor::Source::Header(name.clone()),
        ExtractSource::Regex { pattern, group } => v1::extractor::Source::Regex(v1::RegexSource {
            pattern: pattern.as_str().to_string(),
            group: saturate(*group),
        }),
        ExtractSource::Cookie { name } => v1::extractor::Source::Cookie(name.clone()),
    };
    v1::Extractor { var: e.var.clone(), source: Some(source) }
}

/// An extractor as it came: its pattern compiled; its names and group are `Plan::validate`'s
/// to judge, with the variables' uses.
fn extractor_from_proto(e: &v1::Extractor) -> Result<Extractor, WireError> {
    let invalid = |why: &str| WireError::Shard(format!("extractor of '{}': {why}", e.var.escape_debug()));
    let from = match &e.source {
        Some(v1::extractor::Source::JsonPointer(pointer)) => ExtractSource::Json { pointer: pointer.clone() },
        Some(v1::extractor::Source::Header(name)) => ExtractSource::Header { name: name.clone() },
        Some(v1::extractor::Source::Regex(regex)) => ExtractSource::Regex {
            pattern: CheckPattern::new(&regex.pattern).map_err(|e| invalid(&format!("a bad pattern: {e}")))?,
            group: regex.group as usize,
        },
        Some(v1::extractor::Source::Cookie(name)) => ExtractSource::Cookie { name: name.clone() },
        None => return Err(invalid("an extractor without a source")),
    };
    Ok(Extractor { var: e.var.clone(), from })
}

fn check_to_proto(c: &Check) -> v1::Check {
    let rule = match &c.rule {
        CheckRule::Status(ranges) => v1::check::Rule::Status(v1::StatusRule {
            ranges: ranges
                .iter()
                .map(|r| v1::StatusRange { from: u32::from(*r.start()), to: u32::from(*r.end()) })
                .collect(),
        }),
        CheckRule::LatencyBelow(bound) => v1::check::Rule::LatencyBelowNanos(nanos(*bound)),
        CheckRule::BodyContains(needle) => v1::check::Rule::BodyContains(needle.clone()),
        CheckRule::BodyMatches(pattern) => v1::check::Rule::BodyMatches(pattern.as_str().to_string()),
        CheckRule::BodySize(range) => {
            v1::check::Rule::BodySize(v1::SizeRange { from: *range.start(), to: *range.end() })
        }
        CheckRule::Json { pointer, equals } => v1::check::Rule::Json(v1::JsonRule {
            pointer: pointer.clone(),
            equals: equals.as_ref().map(|v| v.0.to_string()),
        }),
        CheckRule::Header { name, test } => v1::check::Rule::Header(v1::HeaderRule {
            name: name.clone(),
            test: match test {
                CheckText::Exists => None,
                CheckText::Equals(v) => Some(v1::header_rule::Test::Equals(v.clone())),
                CheckText::Contains(v) => Some(v1::header_rule::Test::Contains(v.clone())),
                CheckText::Matches(p) => Some(v1::header_rule::Test::Matches(p.as_str().to_string())),
            },
        }),
    };
    v1::Check { name: c.name.clone(), rule: Some(rule), abort: c.on_failure == OnFailure::Abort }
}

fn check_from_proto(c: &v1::Check) -> Result<Check, WireError> {
    let invalid = |why: &str| WireError::Shard(format!("check '{}': {why}", c.name.escape_debug()));
    if c.name.is_empty() || c.name.chars().any(char::is_control) {
        return Err(invalid("a check's name is not empty and has no control characters"));
    }
    let rule = match &c.rule {
        Some(v1::check::Rule::Status(status)) => {
            if status.ranges.is_empty() {
                return Err(invalid("a status check without a status"));
            }
            let ranges = status
                .ranges
                .iter()
                .map(|r| match (status_code(r.from), status_code(r.to)) {
                    (Ok(from), Ok(to)) if (100..=to).contains(&from) => Ok(from..=to),
                    _ => Err(invalid("a status check's range is not one of status codes, low to high")),
                })
                .collect::<Result<_, _>>()?;
            CheckRule::Status(ranges)
        }
        Some(v1::check::Rule::LatencyBelowNanos(0)) => {
            return Err(invalid("a latency bound of 0, which no response passes"));
        }
        Some(v1::check::Rule::LatencyBelowNanos(n)) => CheckRule::LatencyBelow(Duration::from_nanos(*n)),
        Some(v1::check::Rule::BodyContains(needle)) if needle.is_empty() => {
            return Err(invalid("a body check for nothing, which every body passes"));
        }
        Some(v1::check::Rule::BodyContains(needle)) => CheckRule::BodyContains(needle.clone()),
        Some(v1::check::Rule::BodyMatches(text)) => {
            CheckRule::BodyMatches(CheckPattern::new(text).map_err(|e| invalid(&format!("a bad pattern: {e}")))?)
        }
        Some(v1::check::Rule::BodySize(r)) if r.from > r.to => {
            return Err(invalid("a body size range from high to low"));
        }
        Some(v1::check::Rule::BodySize(r)) => CheckRule::BodySize(r.from..=r.to),
        Some(v1::check::Rule::Json(json)) => {
            if !(json.pointer.is_empty() || json.pointer.starts_with('/')) {
                return Err(invalid("a JSON pointer that is neither empty nor starts with /"));
            }
            let equals = match &json.equals {
                None => None,
                Some(text) => Some(JsonValue(
                    serde_json::from_str(text).map_err(|e| invalid(&format!("a JSON value that is not JSON: {e}")))?,
                )),
            };
            CheckRule::Json { pointer: json.pointer.clone(), equals }
        }
        Some(v1::check::Rule::Header(header)) => {
            if !is_token(&header.name) || header.name.bytes().any(|b| b.is_ascii_uppercase()) {
                return Err(invalid("a header check's name is not a lowercase field name"));
            }
            let test = match &header.test {
                None => CheckText::Exists,
                Some(v1::header_rule::Test::Equals(v)) => CheckText::Equals(v.clone()),
                Some(v1::header_rule::Test::Contains(v)) if v.is_empty() => {
                    return Err(invalid("a header check for nothing, which every value passes"));
                }
                Some(v1::header_rule::Test::Contains(v)) => CheckText::Contains(v.clone()),
                Some(v1::header_rule::Test::Matches(text)) => {
                    CheckText::Matches(CheckPattern::new(text).map_err(|e| invalid(&format!("a bad pattern: {e}")))?)
                }
            };
            CheckRule::Header { name: header.name.clone(), test }
        }
        None => return Err(invalid("a check without a rule")),
    };
    let on_failure = if c.abort { OnFailure::Abort } else { OnFailure::Continue };
    Ok(Check { name: c.name.clone(), rule, on_failure })
}

fn order_to_proto(order: &Order) -> v1::shard::Order {
    match order {
        Order::InTurn => v1::shard::Order::InTurn(v1::InTurn {}),
        Order::Random { seed } => v1::shard::Order::RandomSeed(*seed),
        Order::Scenarios { scenarios, seed } => v1::shard::Order::Scenarios(v1::Scenarios {
            scenarios: scenarios
                .iter()
                .map(|s| v1::Scenario {
                    name: s.name.clone(),
                    weight: s.weight,
                    steps: s.steps,
                    pacing_nanos: s.pacing.map_or(0, nanos),
                })
                .collect(),
            seed: *seed,
        }),
    }
}

fn load_to_proto(load: &Load) -> v1::shard::Load {
    let stages = |stages: &[Stage]| -> Vec<v1::Stage> {
        stages.iter().map(|s| v1::Stage { duration_nanos: nanos(s.duration), target: s.target }).collect()
    };
    match load {
        Load::Closed { ramp, indices } => v1::shard::Load::Closed(v1::ClosedLoad {
            ramp: stages(ramp),
            connection_first: indices.first,
            connection_step: indices.step,
        }),
        Load::Open { rate, stages: steps, phase, indices } => v1::shard::Load::Open(v1::OpenLoad {
            rate: rate.per_second,
            rate_offset_nanos: nanos(rate.offset),
            stages: stages(steps),
            stage_phase: *phase,
            connection_first: indices.first,
            connection_step: indices.step,
        }),
    }
}

/// The plan a worker runs for `shard`, exactly as the controller decided it (threads too).
/// What the protocol cannot say wrong (a missing stop or load, an unknown version) is refused
/// here; every limit of a run is the engine's one check, [`Plan::validate`].
pub fn shard_from_proto(shard: &v1::Shard) -> Result<Plan, WireError> {
    shard_with_feeders(shard, Vec::new())
}

/// [`shard_from_proto`] of a shard whose feeders' rows came after it, in `tables` (one per
/// feeder, in order: [`Assembly::finish`]).
pub fn shard_with_feeders(shard: &v1::Shard, tables: Vec<Table>) -> Result<Plan, WireError> {
    let invalid = |why: &str| WireError::Shard(why.to_string());
    if shard.protocol != PROTOCOL_VERSION {
        return Err(WireError::Protocol { theirs: shard.protocol, ours: PROTOCOL_VERSION });
    }
    let target = Target::parse(&shard.url)?;
    let stop = match shard.stop {
        Some(v1::shard::Stop::Requests(n)) => Stop::Requests(n),
        Some(v1::shard::Stop::DurationNanos(d)) => Stop::Duration(Duration::from_nanos(d)),
        None => return Err(invalid("neither a request count nor a duration")),
    };
    let protocol = match shard.http_version {
        0 | 1 => Protocol::Http1,
        2 => Protocol::Http2 { streams: shard.streams },
        3 => Protocol::Http3 { streams: shard.streams },
        v => return Err(WireError::Shard(format!("HTTP version {v} is not supported by this worker"))),
    };
    let requests = requests_from_proto(shard)?;
    // `Plan::new` takes the one request; a mix takes its place.
    let mut plan = Plan::new(target, RequestSpec::new("GET", Vec::new(), Vec::new()), shard.connections as usize, stop);
    plan.requests = requests;
    plan.protocol = protocol;
    plan.threads = shard.threads as usize;
    plan.connect_timeout = Duration::from_nanos(shard.connect_timeout_nanos);
    plan.request_timeout = match shard.request_timeout_nanos {
        0 => None,
        n => Some(Duration::from_nanos(n)),
    };
    if let Some(hold) = shard.max_hold_nanos {
        plan.max_hold = Duration::from_nanos(hold);
    }
    if shard.kept_body_bytes > 0 {
        // Past the limit it is refused by `Plan::validate`, as from the command line.
        plan.kept_body_bytes = usize::try_from(shard.kept_body_bytes).unwrap_or(usize::MAX);
    }
    plan.load = match &shard.load {
        Some(load) => load_from_proto(load),
        None => return Err(invalid("no load: neither the closed nor the open model")),
    };
    if shard.warm_up_nanos > 0 {
        plan.warm_up = Some(Duration::from_nanos(shard.warm_up_nanos));
    }
    plan.quic_congestion = match shard.quic_congestion {
        0 => QuicCongestion::Loopback,
        1 => QuicCongestion::Standard,
        v => return Err(WireError::Shard(format!("QUIC congestion control {v} is not known to this worker"))),
    };
    plan.source_addrs = source_addrs_from_proto(&shard.source_addrs)?;
    plan.engine = match shard.engine.as_str() {
        "" => EngineChoice::Auto,
        name => EngineChoice::parse(name)
            .ok_or_else(|| WireError::Shard(format!("engine '{name}' is not known to this worker")))?,
    };
    plan.keepalive = shard.keepalive;
    plan.tls = TlsOptions { insecure: shard.insecure, extra_ca_pem: shard.extra_ca_pem.clone() };
    plan.feeders = feeders::feeders_from_proto(shard, tables)?;
    plan.validate().map_err(|e| WireError::Shard(e.to_string()))?;
    Ok(plan)
}

/// The source addresses, counted before any is parsed; the rest is `Plan::validate`'s to judge.
fn source_addrs_from_proto(addrs: &[String]) -> Result<Vec<IpAddr>, WireError> {
    if addrs.len() > MAX_SOURCE_ADDRS {
        return Err(WireError::Shard(format!(
            "{} source addresses is more than the {MAX_SOURCE_ADDRS} a run may have",
            addrs.len()
        )));
    }
    addrs
        .iter()
        .map(|a| a.parse().map_err(|_| WireError::Shard(format!("bad source address '{}'", a.escape_debug()))))
        .collect()
}

/// The one request, or the mix: with a mix, the one request's fields are empty and its order
/// is given; without one, no order is.
fn requests_from_proto(shard: &v1::Shard) -> Result<Requests, WireError> {
    let invalid = |why: &str| WireError::Shard(why.to_string());
    if shard.mix.is_empty() {
        if shard.order.is_some() {
            return Err(invalid("an order for a mix without requests"));
        }
        return Ok(Requests::One(request_from_proto(&shard.method, &shard.headers, &shard.body)?));
    }
    // Counted before any is copied; how many names they have is `Plan::validate`'s to judge.
    if shard.mix.len() > MAX_REQUESTS {
        return Err(WireError::Shard(format!(
            "{} requests is more than the {MAX_REQUESTS} a mix may list",
            shard.mix.len()
        )));
    }
    if !shard.method.is_empty() || !shard.headers.is_empty() || !shard.body.is_empty() {
        return Err(invalid("a mix beside the one request's method, headers or body"));
    }
    let order = match &shard.order {
        Some(v1::shard::Order::InTurn(v1::InTurn {})) => Order::InTurn,
        Some(v1::shard::Order::RandomSeed(seed)) => Order::Random { seed: *seed },
        Some(v1::shard::Order::Scenarios(s)) => {
            // Counted before any is copied; the rest is `Plan::validate`'s to judge.
            if s.scenarios.len() > MAX_SCENARIOS {
                return Err(invalid("more scenarios than a run may have"));
            }
            let scenarios = s
                .scenarios
                .iter()
                .map(|s| Scenario {
                    name: s.name.clone(),
                    weight: s.weight,
                    steps: s.steps,
                    pacing: (s.pacing_nanos > 0).then(|| Duration::from_nanos(s.pacing_nanos)),
                })
                .collect();
            Order::Scenarios { scenarios, seed: s.seed }
        }
        None => return Err(invalid("a mix without an order")),
    };
    let mut requests = Vec::with_capacity(shard.mix.len());
    // Counted before any pattern is compiled, as checks are.
    if let Some(r) = shard.mix.iter().find(|r| r.extract.len() > MAX_EXTRACTORS) {
        return Err(WireError::Shard(format!(
            "{}: more than the {MAX_EXTRACTORS} extractors a step may have",
            r.name.escape_debug()
        )));
    }
    // The variables in the order the plan's vocabulary gives them, so that a path's `{{var}}`
    // is taken as the slot it is; refused past a run's most as they are collected, which keeps
    // the search for each among those before it short.
    let mut variables: Vec<&str> = Vec::new();
    for e in shard.mix.iter().flat_map(|r| &r.extract) {
        if !variables.contains(&e.var.as_str()) {
            if variables.len() == MAX_VARIABLES {
                return Err(invalid("more variables than a run may have"));
            }
            variables.push(&e.var);
        }
    }
    let vocabulary = Vocabulary::new(shard.feeders.iter().map(|f| (f.name.clone(), f.columns.clone())))
        .with_variables(variables.into_iter().map(String::from));
    for r in &shard.mix {
        // Counted before any is compiled: a step's checks have distinct names, so no more than
        // a run's may be on one step.
        if r.checks.len() > MAX_CHECKS {
            return Err(WireError::Shard(format!("{}: more checks than a run may have", r.name.escape_debug())));
        }
        let request = NamedRequest {
            name: r.name.clone(),
            path_and_query: r.path_and_query.clone(),
            spec: request_from_proto(&r.method, &r.headers, &r.body)?,
            templated: r.templated,
            checks: r.checks.iter().map(check_from_proto).collect::<Result<_, _>>()?,
            extract: r.extract.iter().map(extractor_from_proto).collect::<Result<_, _>>()?,
            think: r.think.as_ref().map(think_from_proto).transpose()?,
            cookies: r.cookies,
            follow_redirects: u8::try_from(r.follow_redirects).ok().filter(|&n| n <= MAX_REDIRECTS).ok_or_else(
                || WireError::Shard(format!("{}: more redirects to follow than a step may", r.name.escape_debug())),
            )?,
        };
        // Checked here too, so that the refusal names the path; the URL's own path is held to
        // the same rule by `Target::parse`.
        if !request.has_request_path(&vocabulary) {
            return Err(WireError::Shard(format!(
                "{}: bad path '{}'",
                r.name.escape_debug(),
                r.path_and_query.escape_debug()
            )));
        }
        requests.push(request);
    }
    // Distinct check names and the count of checks are `Plan::validate`'s to judge.
    Ok(Requests::Mix(Mix { requests, order }))
}

/// A request's method, headers and body, checked before the engine writes them out.
fn request_from_proto(method: &str, headers: &[v1::Header], body: &[u8]) -> Result<RequestSpec, WireError> {
    if !is_token(method) {
        return Err(WireError::Shard(format!("bad method '{}'", method.escape_debug())));
    }
    // The engine writes these into the request as they are: a line break would smuggle in a
    // request of its own.
    for h in headers {
        if !is_token(&h.name) || h.value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
            return Err(WireError::Shard(format!("bad header '{}'", h.name.escape_debug())));
        }
    }
    Ok(RequestSpec::new(method, headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(), body.to_vec()))
}

fn load_from_proto(load: &v1::shard::Load) -> Load {
    // Copied as they are (the message's size bounds them): `Plan::validate` judges them.
    let stages = |stages: &[v1::Stage]| -> Vec<Stage> {
        stages.iter().map(|s| Stage { duration: Duration::from_nanos(s.duration_nanos), target: s.target }).collect()
    };
    match load {
        v1::shard::Load::Closed(closed) => Load::Closed {
            ramp: stages(&closed.ramp),
            indices: ConnectionIndices { first: closed.connection_first, step: closed.connection_step },
        },
        v1::shard::Load::Open(open) => Load::Open {
            rate: Rate { per_second: open.rate, offset: Duration::from_nanos(open.rate_offset_nanos) },
            stages: stages(&open.stages),
            phase: open.stage_phase,
            indices: ConnectionIndices { first: open.connection_first, step: open.connection_step },
        },
    }
}

/// How many names and scenarios a shard's mix has: the indices its worker's statistics may be
/// kept under. Statistics past them are refused before they are decoded, so a worker cannot
/// make the controller hold histograms nobody asked for (each can grow to 264 KiB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds {
    pub names: usize,
    pub scenarios: usize,
}

impl Bounds {
    /// A mix of `names` names and no scenarios.
    pub fn names(names: usize) -> Bounds {
        Bounds { names, scenarios: 0 }
    }
}

/// The bounds of the statistics of `shard` (see [`Bounds`]).
pub fn shard_bounds(shard: &v1::Shard) -> Bounds {
    let scenarios = match &shard.order {
        Some(v1::shard::Order::Scenarios(s)) => s.scenarios.len(),
        _ => 0,
    };
    Bounds {
        names: shard.mix.iter().map(|r| r.name.as_str()).collect::<std::collections::HashSet<_>>().len(),
        scenarios,
    }
}

/// An HTTP token (RFC 9110): what a method or a header name may consist of.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub fn stats_to_proto(stats: &Stats) -> v1::Stats {
    let h = &stats.histograms;
    v1::Stats {
        counters: Some(counters_to_proto(&stats.counters)),
        latency: encode_histogram(&h.latency),
        connect: encode_histogram(&h.connect),
        first_byte: encode_histogram(&h.ttfb),
        hold: encode_histogram(&h.hold),
        // The closed model leaves these empty: sent as no bytes, which decode as empty.
        service: encode_unless_empty(&h.service),
        lateness: encode_unless_empty(&h.lateness),
        // Only the names something was counted for (`Names` keeps no others); a name with
        // errors only has no latency, sent as no bytes.
        names: stats
            .names
            .iter()
            .map(|(index, name)| v1::NameStats {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                counters: Some(Box::new(counters_to_proto(&name.counters))),
                latency: encode_unless_empty(&name.latency),
                first_byte: encode_unless_empty(&name.ttfb),
                checks: name.checks.iter().map(|c| v1::CheckCounts { passed: c.passed, failed: c.failed }).collect(),
            })
            .collect(),
        scenarios: stats
            .scenarios
            .iter()
            .map(|(index, s)| v1::ScenarioStats {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                started: s.started,
                completed: s.completed,
                abandoned: s.abandoned,
                late: s.late,
                missed: s.missed,
                duration: encode_unless_empty(&s.duration),
            })
            .collect(),
    }
}

fn counters_to_proto(c: &Counters) -> v1::Counters {
    v1::Counters {
        ok: c.ok,
        errors_connect: c.errors_of(ErrorKind::Connect),
        errors_timeout: c.errors_of(ErrorKind::Timeout),
        errors_reset: c.errors_of(ErrorKind::Reset),
        errors_protocol: c.errors_of(ErrorKind::Protocol),
        errors_tls: c.errors_of(ErrorKind::Tls),
        status: c.statuses().map(|(code, n)| (u32::from(code), n)).collect(),
        bytes_sent: c.bytes_sent,
        bytes_received: c.bytes_received,
        connects: c.connects,
        aborted: c.aborted,
        clamped: c.clamped,
        refused: c.refused,
        late: c.late,
        blocked: c.blocked,
        unsent: c.unsent,
        iterations: c.iterations,
        feeder_rows: c.feeder_rows,
        ran_out: c.ran_out,
        extract_failed: c.extract_failed,
        abandoned: c.abandoned,
        redirects: c.redirects,
        thinks: c.thinks,
        think_nanos: c.think_nanos,
        retry_after: c.retry_after.statuses().map(|(code, n)| (u32::from(code), n)).collect(),
        retry_after_largest_seconds: c.retry_after.largest_seconds,
        retry_after_dates: c.retry_after.dates,
        truncated: c.truncated,
        dropped_packets: c.dropped_packets,
    }
}

/// The statistics in `stats`; an absent part (counters, a histogram's bytes) is empty. Those of
/// a name or scenario past `bounds` are refused before they are decoded.
pub fn stats_from_proto(stats: &v1::Stats, bounds: Bounds) -> Result<Stats, WireError> {
    let mut out = Stats::new();
    if let Some(c) = &stats.counters {
        out.counters = counters_from_proto(c)?;
    }
    let h = &mut out.histograms;
    for (into, bytes) in [
        (&mut h.latency, &stats.latency),
        (&mut h.connect, &stats.connect),
        (&mut h.ttfb, &stats.first_byte),
        (&mut h.hold, &stats.hold),
        (&mut h.service, &stats.service),
        (&mut h.lateness, &stats.lateness),
    ] {
        *into = histogram_from_proto(bytes)?;
    }
    let names = bounds.names.min(MAX_NAMES);
    for name in &stats.names {
        let index = name.index as usize;
        if index >= names {
            return Err(WireError::Stats(match names {
                0 => format!("statistics for name {index} in a run without a mix"),
                _ => format!("statistics for name {index}, past the {names} names of its mix"),
            }));
        }
        if out.names.get(index).is_some() {
            return Err(WireError::Stats(format!("statistics for name {index} twice")));
        }
        if name.checks.len() > MAX_CHECKS {
            return Err(WireError::Stats(format!("counts of {} checks for name {index}", name.checks.len())));
        }
        *out.names.entry(index) = NameStats {
            counters: name.counters.as_deref().map(counters_from_proto).transpose()?.unwrap_or_default(),
            latency: histogram_from_proto(&name.latency)?,
            ttfb: histogram_from_proto(&name.first_byte)?,
            checks: name.checks.iter().map(|c| CheckCounts { passed: c.passed, failed: c.failed }).collect(),
        };
    }
    let scenarios = bounds.scenarios.min(MAX_SCENARIOS);
    for scenario in &stats.scenarios {
        let index = scenario.index as usize;
        if index >= scenarios {
            return Err(WireError::Stats(match scenarios {
                0 => format!("statistics for scenario {index} in a run without scenarios"),
                _ => format!("statistics for scenario {index}, past the {scenarios} scenarios of its run"),
            }));
        }
        if out.scenarios.get(index).is_some() {
            return Err(WireError::Stats(format!("statistics for scenario {index} twice")));
        }
        *out.scenarios.entry(index) = ScenarioStats {
            started: scenario.started,
            completed: scenario.completed,
            abandoned: scenario.abandoned,
            late: scenario.late,
            missed: scenario.missed,
            duration: histogram_from_proto(&scenario.duration)?,
        };
    }
    Ok(out)
}

fn counters_from_proto(c: &v1::Counters) -> Result<Counters, WireError> {
    let mut into = Counters::default();
    into.ok = c.ok;
    for (kind, n) in [
        (ErrorKind::Connect, c.errors_connect),
        (ErrorKind::Timeout, c.errors_timeout),
        (ErrorKind::Reset, c.errors_reset),
        (ErrorKind::Protocol, c.errors_protocol),
        (ErrorKind::Tls, c.errors_tls),
    ] {
        into.add_errors(kind, n);
    }
    for (&code, &n) in &c.status {
        into.add_status(status_code(code)?, n);
    }
    for (&code, &n) in &c.retry_after {
        into.retry_after.add_status(status_code(code)?, n);
    }
    into.retry_after.largest_seconds = c.retry_after_largest_seconds;
    into.retry_after.dates = c.retry_after_dates;
    into.bytes_sent = c.bytes_sent;
    into.bytes_received = c.bytes_received;
    into.connects = c.connects;
    into.aborted = c.aborted;
    into.clamped = c.clamped;
    into.refused = c.refused;
    into.late = c.late;
    into.blocked = c.blocked;
    into.unsent = c.unsent;
    into.iterations = c.iterations;
    into.feeder_rows = c.feeder_rows;
    into.ran_out = c.ran_out;
    into.extract_failed = c.extract_failed;
    into.abandoned = c.abandoned;
    into.redirects = c.redirects;
    into.thinks = c.thinks;
    into.think_nanos = c.think_nanos;
    into.truncated = c.truncated;
    into.dropped_packets = c.dropped_packets;
    Ok(into)
}

/// A histogram's bytes; none is an empty histogram.
fn histogram_from_proto(bytes: &[u8]) -> Result<hdrhistogram::Histogram<u64>, WireError> {
    Ok(if bytes.is_empty() { new_histogram() } else { decode_histogram(bytes)? })
}

fn encode_unless_empty(h: &hdrhistogram::Histogram<u64>) -> Vec<u8> {
    if h.is_empty() { Vec::new() } else { encode_histogram(h) }
}

fn status_code(code: u32) -> Result<u16, WireError> {
    u16::try_from(code)
        .ok()
        .filter(|&code| code <= 999)
        .ok_or_else(|| WireError::Stats(format!("status code {code} is not three digits")))
}

pub fn error_samples_to_proto(samples: &[(ErrorKind, String)]) -> Vec<v1::ErrorSample> {
    samples
        .iter()
        .map(|(kind, message)| v1::ErrorSample { kind: kind.name().to_string(), message: message.clone() })
        .collect()
}

pub fn error_samples_from_proto(samples: &[v1::ErrorSample]) -> Result<Vec<(ErrorKind, String)>, WireError> {
    samples
        .iter()
        .map(|s| {
            let kind = ErrorKind::ALL
                .into_iter()
                .find(|k| k.name() == s.kind)
                .ok_or_else(|| WireError::ErrorKind(s.kind.clone()))?;
            Ok((kind, s.message.clone()))
        })
        .collect()
}

/// The engine a worker runs, as the protocol describes it: io_uring (with what it offered), or
/// epoll (with why io_uring was not used, when auto fell back).
pub fn ring_to_proto(ring: &RingSupport) -> v1::IoUring {
    v1::IoUring {
        available: ring.engine == Engine::IoUring,
        error: ring.fallback.clone().unwrap_or_default(),
        tuned: ring.tuned,
        batched_waits: ring.min_wait,
        engine: ring.engine.name().to_string(),
    }
}

/// An unusable io_uring, with the one-line reason, and no engine to run on.
pub fn ring_unavailable_to_proto(reason: &str) -> v1::IoUring {
    v1::IoUring {
        available: false,
        error: reason.to_string(),
        tuned: false,
        batched_waits: false,
        engine: String::new(),
    }
}

/// The engine a worker reported, or why it has none. The protocol carries the kernel release
/// apart (in Hello), hence `kernel`.
pub fn ring_from_proto(ring: &v1::IoUring, kernel: &str) -> Result<RingSupport, WireError> {
    let engine = match ring.engine.as_str() {
        "" if ring.available => Engine::IoUring,
        "" => return Err(WireError::IoUring(ring.error.clone())),
        name => Engine::parse(name).ok_or_else(|| WireError::Shard(format!("engine '{name}' is not known here")))?,
    };
    let fallback = (engine == Engine::Epoll && !ring.error.is_empty()).then(|| ring.error.clone());
    Ok(RingSupport { kernel: kernel.to_string(), tuned: ring.tuned, min_wait: ring.batched_waits, engine, fallback })
}

pub fn event_to_proto(event: Event) -> v1::RunEvent {
    use v1::run_event::Event as E;
    let event = match event {
        Event::Accepted { threads, connections, ring } => E::Accepted(v1::Accepted {
            threads: saturate(threads),
            connections: saturate(connections),
            io_uring: Some(ring_to_proto(&ring)),
        }),
        Event::Ready { connected, failed } => E::Ready(v1::Ready { connected, failed }),
        Event::Started { at_nanos } => E::Started(v1::Started { at_worker_nanos: at_nanos }),
        Event::Interval { second, delta } => E::Interval(v1::Interval { second, delta: Some(stats_to_proto(&delta)) }),
        Event::Finished(outcome) => E::Finished(v1::Finished {
            stats: Some(stats_to_proto(&outcome.stats)),
            duration_nanos: nanos(outcome.duration),
            threads: saturate(outcome.threads),
            connections: saturate(outcome.connections),
            client_cpu_nanos: nanos(outcome.client_cpu),
            interrupted: outcome.interrupted,
            error_samples: error_samples_to_proto(&outcome.error_samples),
            stream_limit: outcome.stream_limit.unwrap_or(0),
            warm_up: outcome.warm_up.as_ref().map(stats_to_proto),
            stopped_by: outcome.stopped_by.clone().unwrap_or_default(),
        }),
        Event::Failed(reason) => E::Failed(v1::Failed { reason }),
    };
    v1::RunEvent { event: Some(event) }
}

/// The event a worker sent, for a shard of `bounds` (see [`stats_from_proto`]). Accepted's
/// io_uring has no kernel release here (Hello has it).
pub fn event_from_proto(event: v1::RunEvent, bounds: Bounds) -> Result<Event, WireError> {
    use v1::run_event::Event as E;
    let empty = v1::Stats::default();
    Ok(match event.event.ok_or(WireError::EmptyEvent)? {
        E::Accepted(a) => Event::Accepted {
            threads: a.threads as usize,
            connections: a.connections as usize,
            ring: ring_from_proto(&a.io_uring.unwrap_or_default(), "")?,
        },
        E::Ready(r) => Event::Ready { connected: r.connected, failed: r.failed },
        E::Started(s) => Event::Started { at_nanos: s.at_worker_nanos },
        E::Interval(i) => {
            Event::Interval { second: i.second, delta: stats_from_proto(i.delta.as_ref().unwrap_or(&empty), bounds)? }
        }
        E::Finished(f) => Event::Finished(Box::new(Outcome {
            stats: stats_from_proto(f.stats.as_ref().unwrap_or(&empty), bounds)?,
            duration: Duration::from_nanos(f.duration_nanos),
            threads: f.threads as usize,
            connections: f.connections as usize,
            client_cpu: Duration::from_nanos(f.client_cpu_nanos),
            interrupted: f.interrupted,
            error_samples: error_samples_from_proto(&f.error_samples)?,
            stream_limit: Some(f.stream_limit).filter(|&l| l > 0),
            warm_up: f.warm_up.as_ref().map(|w| stats_from_proto(w, bounds)).transpose()?,
            stopped_by: Some(f.stopped_by).filter(|why| !why.is_empty()),
        })),
        E::Failed(f) => Event::Failed(f.reason),
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
