//! Translation between the engine's types and the protocol's (`volley.v1`), both ways.
//!
//! The worker uses one direction and the controller the other; keeping both here means the two
//! sides cannot drift apart. Everything coming off the wire is checked: a shard the engine
//! could not run, a histogram that does not decode or an unknown error kind is a [`WireError`],
//! never a panic.

use std::time::Duration;

use volley_engine::{
    ConnectionIndices, ErrorKind, HistogramError, MAX_CONNECTIONS, MAX_DURATION, MAX_HOLD, MAX_RATE, MAX_STAGES,
    MAX_THREADS, Plan, Protocol, QuicCongestion, Rate, RequestSpec, RingSupport, Stage, Stats, Stop, Target,
    TargetError, TlsOptions, decode_histogram, encode_histogram, new_histogram,
};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1;

use crate::shard::{Event, Outcome};

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

/// One worker's part of `plan` as the protocol carries it. `threads` None leaves the thread
/// count to the worker (its physical cores, capped at the connections).
pub fn shard_to_proto(plan: &Plan, threads: Option<u32>) -> v1::Shard {
    let (requests, duration_nanos) = match plan.stop {
        Stop::Requests(n) => (n, 0),
        Stop::Duration(d) => (0, nanos(d)),
    };
    v1::Shard {
        protocol: PROTOCOL_VERSION,
        url: plan.target.to_string(),
        method: plan.request.method.clone(),
        headers: plan
            .request
            .headers
            .iter()
            .map(|(name, value)| v1::Header { name: name.clone(), value: value.clone() })
            .collect(),
        body: plan.request.body.clone(),
        connections: u32::try_from(plan.connections).unwrap_or(u32::MAX),
        threads: threads.unwrap_or(0),
        requests,
        duration_nanos,
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
        rate: plan.rate.map_or(0, |r| r.per_second),
        rate_offset_nanos: plan.rate.map_or(0, |r| nanos(r.offset)),
        warm_up_nanos: plan.warm_up.map_or(0, nanos),
        stages: plan.stages.iter().map(|s| v1::Stage { duration_nanos: nanos(s.duration), target: s.target }).collect(),
        stage_phase: plan.stage_phase,
        ramp_connections: plan.ramps_connections(),
        connection_first: plan.connection_indices.first,
        connection_step: plan.connection_indices.step,
        quic_congestion: match plan.quic_congestion {
            QuicCongestion::Loopback => 0,
            QuicCongestion::Standard => 1,
        },
    }
}

/// The plan a worker runs for `shard`. Threads 0 become `default_threads`; threads are capped
/// at the connections, since a thread without a connection has nothing to do. More connections
/// or threads than the command line allows are refused.
pub fn shard_from_proto(shard: &v1::Shard, default_threads: usize) -> Result<Plan, WireError> {
    let invalid = |why: &str| WireError::Shard(why.to_string());
    if shard.protocol != PROTOCOL_VERSION {
        return Err(WireError::Protocol { theirs: shard.protocol, ours: PROTOCOL_VERSION });
    }
    let target = Target::parse(&shard.url)?;
    if shard.connections == 0 {
        return Err(invalid("connections must be at least 1"));
    }
    // The same limits as the command line: a shard off the wire must not have the worker set
    // up millions of connections or start thousands of threads.
    if shard.connections as usize > MAX_CONNECTIONS {
        return Err(WireError::Shard(format!(
            "{} connections is more than the {MAX_CONNECTIONS} a worker takes",
            shard.connections
        )));
    }
    if shard.threads as usize > MAX_THREADS {
        return Err(WireError::Shard(format!(
            "{} threads is more than the {MAX_THREADS} a worker takes",
            shard.threads
        )));
    }
    let stop = match (shard.requests, shard.duration_nanos) {
        (0, 0) => return Err(invalid("neither a request count nor a duration")),
        (n, 0) => Stop::Requests(n),
        (0, d) => Stop::Duration(Duration::from_nanos(d)),
        _ => return Err(invalid("both a request count and a duration")),
    };
    if shard.connect_timeout_nanos == 0 {
        return Err(invalid("the connect timeout must not be zero"));
    }
    if !is_token(&shard.method) {
        return Err(WireError::Shard(format!("bad method '{}'", shard.method.escape_debug())));
    }
    // The engine writes these into the request as they are: a line break would smuggle in a
    // request of its own.
    for h in &shard.headers {
        if !is_token(&h.name) || h.value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
            return Err(WireError::Shard(format!("bad header '{}'", h.name.escape_debug())));
        }
    }
    let protocol = match shard.http_version {
        0 | 1 => Protocol::Http1,
        2 if shard.streams == 0 => return Err(invalid("HTTP/2 with 0 streams per connection")),
        2 => Protocol::Http2 { streams: shard.streams },
        3 if shard.streams == 0 => return Err(invalid("HTTP/3 with 0 streams per connection")),
        3 => Protocol::Http3 { streams: shard.streams },
        v => return Err(WireError::Shard(format!("HTTP version {v} is not supported by this worker"))),
    };
    let connections = shard.connections as usize;
    let threads = match shard.threads {
        0 => default_threads.clamp(1, MAX_THREADS),
        n => n as usize,
    };
    let request = RequestSpec::new(
        &shard.method,
        shard.headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect(),
        shard.body.clone(),
    );
    let mut plan = Plan::new(target, request, connections, stop);
    plan.protocol = protocol;
    plan.threads = threads.min(connections);
    plan.connect_timeout = Duration::from_nanos(shard.connect_timeout_nanos);
    plan.request_timeout = match shard.request_timeout_nanos {
        0 => None,
        n => Some(Duration::from_nanos(n)),
    };
    if let Some(hold) = shard.max_hold_nanos {
        plan.max_hold = Duration::from_nanos(hold);
        if plan.max_hold > MAX_HOLD {
            return Err(WireError::Shard(format!(
                "a hold of {:?} is more than the {MAX_HOLD:?} a worker takes",
                plan.max_hold
            )));
        }
    }
    if shard.stages.len() > MAX_STAGES {
        return Err(WireError::Shard(format!(
            "{} stages is more than the {MAX_STAGES} a worker takes",
            shard.stages.len()
        )));
    }
    if shard.ramp_connections {
        plan.stages = connection_stages(shard, connections)?;
        plan.connection_indices = ConnectionIndices { first: shard.connection_first, step: shard.connection_step };
    } else if shard.rate > 0 || !shard.stages.is_empty() {
        // With stages, the rate is where the first starts, and may be 0.
        plan.stages = shard
            .stages
            .iter()
            .map(|s| Stage { duration: Duration::from_nanos(s.duration_nanos), target: s.target })
            .collect();
        let offset = Duration::from_nanos(shard.rate_offset_nanos);
        if offset > MAX_DURATION {
            return Err(invalid("a rate offset beyond 365 days"));
        }
        plan.rate = Some(Rate { per_second: shard.rate, offset });
        if !plan.stages.is_empty() {
            if !(shard.stage_phase > 0.0 && shard.stage_phase <= 1.0) {
                return Err(invalid("a stage phase outside (0, 1]"));
            }
            plan.stage_phase = shard.stage_phase;
        }
        let peak = plan.peak_rate().unwrap_or(0);
        if peak > MAX_RATE {
            return Err(WireError::Shard(format!(
                "a rate of {peak} requests per second is more than the {MAX_RATE} a worker takes"
            )));
        }
        if peak == 0 {
            return Err(invalid("stages that never ask for a request"));
        }
        if peak < plan.threads as u64 {
            // A thread keeps at least one request per second.
            plan.threads = peak as usize;
        }
    }
    if shard.warm_up_nanos > 0 {
        plan.warm_up = Some(Duration::from_nanos(shard.warm_up_nanos));
    }
    plan.quic_congestion = match shard.quic_congestion {
        0 => QuicCongestion::Loopback,
        1 => QuicCongestion::Standard,
        v => return Err(WireError::Shard(format!("QUIC congestion control {v} is not known to this worker"))),
    };
    plan.keepalive = shard.keepalive;
    plan.tls = TlsOptions { insecure: shard.insecure, extra_ca_pem: shard.extra_ca_pem.clone() };
    // The rules the command line keeps hold for a shard too: the engine's one check.
    plan.validate().map_err(|e| WireError::Shard(e.to_string()))?;
    Ok(plan)
}

/// A closed-model ramp's stages (the whole run's connection counts) and which of the run's
/// connections the shard's are: within the limits of a run, so that the engine's checks never
/// see them fail.
fn connection_stages(shard: &v1::Shard, connections: usize) -> Result<Vec<Stage>, WireError> {
    let invalid = |why: &str| WireError::Shard(why.to_string());
    if shard.rate > 0 {
        return Err(invalid("a connection ramp with a rate"));
    }
    if shard.stages.is_empty() || shard.stages.iter().all(|s| s.target == 0) {
        return Err(invalid("a connection ramp that never opens a connection"));
    }
    if shard.stages.iter().any(|s| s.target > MAX_CONNECTIONS as u64) {
        return Err(WireError::Shard(format!("a stage of more than the {MAX_CONNECTIONS} connections a run may have")));
    }
    let last =
        shard.connection_step.checked_mul(connections as u64 - 1).and_then(|l| l.checked_add(shard.connection_first));
    if shard.connection_step == 0 || last.is_none_or(|l| l >= MAX_CONNECTIONS as u64) {
        return Err(invalid("connection indices beyond the connections a run may have"));
    }
    Ok(shard
        .stages
        .iter()
        .map(|s| Stage { duration: Duration::from_nanos(s.duration_nanos), target: s.target })
        .collect())
}

/// An HTTP token (RFC 9110): what a method or a header name may consist of.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub fn stats_to_proto(stats: &Stats) -> v1::Stats {
    let c = &stats.counters;
    let h = &stats.histograms;
    v1::Stats {
        counters: Some(v1::Counters {
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
            retry_after: c.retry_after.statuses().map(|(code, n)| (u32::from(code), n)).collect(),
            retry_after_largest_seconds: c.retry_after.largest_seconds,
            retry_after_dates: c.retry_after.dates,
            truncated: c.truncated,
            dropped_packets: c.dropped_packets,
        }),
        latency: encode_histogram(&h.latency),
        connect: encode_histogram(&h.connect),
        first_byte: encode_histogram(&h.ttfb),
        hold: encode_histogram(&h.hold),
        // The closed model leaves these empty: sent as no bytes, which decode as empty.
        service: encode_unless_empty(&h.service),
        lateness: encode_unless_empty(&h.lateness),
    }
}

/// The statistics in `stats`; an absent part (counters, a histogram's bytes) is empty.
pub fn stats_from_proto(stats: &v1::Stats) -> Result<Stats, WireError> {
    let mut out = Stats::new();
    if let Some(c) = &stats.counters {
        let into = &mut out.counters;
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
        into.truncated = c.truncated;
        into.dropped_packets = c.dropped_packets;
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
        *into = if bytes.is_empty() { new_histogram() } else { decode_histogram(bytes)? };
    }
    Ok(out)
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

/// A usable io_uring as the protocol describes it.
pub fn ring_to_proto(ring: &RingSupport) -> v1::IoUring {
    v1::IoUring { available: true, error: String::new(), tuned: ring.tuned, batched_waits: ring.min_wait }
}

/// An unusable io_uring, with the one-line reason.
pub fn ring_unavailable_to_proto(reason: &str) -> v1::IoUring {
    v1::IoUring { available: false, error: reason.to_string(), tuned: false, batched_waits: false }
}

/// The io_uring a worker reported, or why it has none. The protocol carries the kernel
/// release apart (in Hello), hence `kernel`.
pub fn ring_from_proto(ring: &v1::IoUring, kernel: &str) -> Result<RingSupport, WireError> {
    if !ring.available {
        return Err(WireError::IoUring(ring.error.clone()));
    }
    Ok(RingSupport { kernel: kernel.to_string(), tuned: ring.tuned, min_wait: ring.batched_waits })
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

/// The event a worker sent. Accepted's io_uring has no kernel release here (Hello has it).
pub fn event_from_proto(event: v1::RunEvent) -> Result<Event, WireError> {
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
            Event::Interval { second: i.second, delta: stats_from_proto(i.delta.as_ref().unwrap_or(&empty))? }
        }
        E::Finished(f) => Event::Finished(Box::new(Outcome {
            stats: stats_from_proto(f.stats.as_ref().unwrap_or(&empty))?,
            duration: Duration::from_nanos(f.duration_nanos),
            threads: f.threads as usize,
            connections: f.connections as usize,
            client_cpu: Duration::from_nanos(f.client_cpu_nanos),
            interrupted: f.interrupted,
            error_samples: error_samples_from_proto(&f.error_samples)?,
            stream_limit: Some(f.stream_limit).filter(|&l| l > 0),
            warm_up: f.warm_up.as_ref().map(stats_from_proto).transpose()?,
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
