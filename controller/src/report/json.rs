//! The JSON report: shb's fields (latencies in seconds) plus connect and first-byte
//! summaries, every histogram as base64 HdrHistogram V2-DEFLATE, and each worker's part with its
//! own histograms, so anyone can re-check the merge and `volley merge` can merge reports later.

use base64::Engine;
use hdrhistogram::Histogram;
use serde_json::{Map, Value, json};
use volley_engine::{Counters, ErrorKind, RingSupport, ScenarioStats, Stats, encode_histogram};

use super::digest::{Digest, HistogramDigest};
use super::{NameLine, PERCENTILES, Report, WorkerLine, per_sec};
use crate::fleet::Second;

pub(crate) fn to_json(r: &Report) -> Value {
    let c = &r.stats.counters;
    let h = &r.stats.histograms;
    json!({
        "url": r.url,
        "protocol": r.protocol.to_string(),
        "streamsPerConnection": r.streams,
        "streamLimit": r.stream_limit,
        "quicCongestion": r.quic_congestion.map(|c| c.name()),
        "threads": r.threads,
        "connections": r.connections,
        "durationSeconds": r.duration.as_secs_f64(),
        "requests": counts(c),
        "errors": errors(c),
        "errorSamples": samples(&r.error_samples),
        "requestsPerSec": r.requests_per_sec(),
        "bytesReceived": c.bytes_received,
        "bytesReceivedPerSec": per_sec(c.bytes_received, r.duration),
        "bytesSent": c.bytes_sent,
        "bytesSentPerSec": per_sec(c.bytes_sent, r.duration),
        "connectionsMade": c.connects,
        "truncatedDatagrams": c.truncated,
        "droppedPackets": c.dropped_packets,
        "statusCodes": statuses(c),
        "retryAfter": retry_after(c),
        "latencySeconds": summary(&h.latency),
        "serviceTimeSeconds": summary(&h.service),
        "schedule": schedule(r.rate, &r.stats.counters, &HistogramDigest::of(&r.stats.histograms.lateness), r.duration),
        "connectSeconds": summary(&h.connect),
        "firstByteSeconds": summary(&h.ttfb),
        "clientHoldSeconds": summary(&h.hold),
        "clampedSamples": c.clamped,
        "interrupted": r.interrupted,
        "totalsAreLowerBounds": r.totals_are_lower_bounds(),
        "clientBusy": r.client_busy,
        "clientCpuSeconds": r.client_cpu.as_secs_f64(),
        "ioUring": r.ring.as_ref().map(ring),
        "startSkewSeconds": r.start_skew().map(|d| d.as_secs_f64()),
        "warnings": r.warnings(),
        "histograms": histograms(&r.stats),
        "warmUp": r.warm_up.as_ref().map(warm_up),
        "names": r.name_lines().map(|line| name(&line, r.duration)).collect::<Vec<_>>(),
        "scenarios": scenarios(r),
        "iterations": (!r.scenarios.is_empty()).then_some(c.iterations),
        "extractFailed": (!r.scenarios.is_empty()).then_some(c.extract_failed),
        "abandoned": (!r.scenarios.is_empty()).then_some(c.abandoned),
        "redirects": (!r.scenarios.is_empty()).then_some(c.redirects),
        "think": (!r.scenarios.is_empty()).then(|| think(c)),
        "feeders": feeders(r),
        "workers": r.workers.iter().enumerate().map(|(i, w)| worker(w, r.worker_series.is_none_or(|(s, _)| s.is_detailed(i)))).collect::<Vec<_>>(),
        "workerSeries": r.worker_series.map(|(s, cut)| json!({
            "workers": s.workers,
            "detailed": s.detailed,
            "summarised": s.summarised(),
            "secondsEach": s.seconds_each,
            "cut": cut,
        })),
        "intervals": r.intervals.iter().map(|s| interval(s, r.rate.is_some())).collect::<Vec<_>>(),
    })
}

/// A scenario run's scenarios: each one's weight, its iterations (started, completed,
/// abandoned) and, for a flow, their durations with the histogram that lets saved reports
/// merge them exactly; empty without scenarios.
fn scenarios(r: &Report) -> Value {
    let empty = ScenarioStats::default();
    r.scenarios
        .iter()
        .enumerate()
        .map(|(index, line)| {
            let s = r.stats.scenarios.get(index).unwrap_or(&empty);
            json!({
                "name": line.name,
                "weight": line.weight,
                "pacingSeconds": line.pacing.map(|p| p.as_secs_f64()),
                "iterations": {
                    "started": s.started,
                    "completed": s.completed,
                    "abandoned": s.abandoned,
                    "late": s.late,
                    "missed": s.missed,
                },
                "durationSeconds": summary(&s.duration),
                "histograms": { "duration": encode(&s.duration) },
            })
        })
        .collect()
}

/// The feeders, and what was taken of them: rows taken over all of them, and the engine
/// threads whose share of a shard feeder ran out. Null without feeders.
fn feeders(r: &Report) -> Value {
    if r.feeders.is_empty() {
        return Value::Null;
    }
    let c = &r.stats.counters;
    json!({
        "feeders": r.feeders.iter().map(|f| json!({ "name": f.name, "mode": f.mode, "rows": f.rows })).collect::<Vec<_>>(),
        "rowsTaken": c.feeder_rows,
        "threadsRanOut": c.ran_out,
        "dataRanOut": c.ran_out > 0,
    })
}

/// The warm-up's own numbers, in none of the others: its requests, statuses, latency (with its
/// histogram) and connections.
fn warm_up(w: &super::WarmUp) -> Value {
    let (c, h) = (&w.stats.counters, &w.stats.histograms);
    json!({
        "seconds": w.seconds,
        "requests": counts(c),
        "errors": errors(c),
        "statusCodes": statuses(c),
        "connectionsMade": c.connects,
        "latencySeconds": summary(&h.latency),
        "histograms": { "latency": encode(&h.latency) },
    })
}

/// Think-time pauses and their total, in seconds: what a flow's users spent between steps,
/// outside every latency.
fn think(c: &Counters) -> Value {
    json!({ "pauses": c.thinks, "totalSeconds": c.think_nanos as f64 / 1e9 })
}

/// One name of a mix: its outcomes, statuses and latencies, with the histograms that let
/// saved reports merge it exactly. Its counters hold nothing else (bytes, connections and the
/// schedule are the run's).
fn name(line: &NameLine, duration: std::time::Duration) -> Value {
    let s = &line.stats;
    let c = &s.counters;
    json!({
        "name": line.name,
        "requests": { "total": c.total(), "ok": c.ok, "errors": c.errors() },
        "requestsPerSec": per_sec(c.total(), duration),
        "errors": errors(c),
        "statusCodes": statuses(c),
        "latencySeconds": summary(&s.latency),
        "firstByteSeconds": summary(&s.ttfb),
        "extractFailed": c.extract_failed,
        "abandoned": c.abandoned,
        "redirects": c.redirects,
        "think": think(c),
        "checks": line
            .check_lines()
            .map(|(name, c)| json!({ "name": name, "passed": c.passed, "failed": c.failed }))
            .collect::<Vec<_>>(),
        "histograms": {
            "format": "HdrHistogram V2+DEFLATE, base64, nanoseconds",
            "latency": encode(&s.latency),
            "firstByte": encode(&s.ttfb),
        },
    })
}

fn ring(ring: &RingSupport) -> Value {
    json!({
        "kernel": ring.kernel,
        "tunedFlags": ring.tuned,
        "batchedWaits": ring.min_wait,
        "engine": ring.engine.name(),
        "fallback": ring.fallback,
    })
}

fn histograms(s: &Stats) -> Value {
    let h = &s.histograms;
    json!({
        "format": "HdrHistogram V2+DEFLATE, base64, nanoseconds",
        "latency": encode(&h.latency),
        "connect": encode(&h.connect),
        "firstByte": encode(&h.ttfb),
        "clientHold": encode(&h.hold),
        "serviceTime": encode(&h.service),
        "lateness": encode(&h.lateness),
    })
}

/// The open model's own truth: the rate asked for and achieved (requests sent per second),
/// the send lateness, and the requests that did not go out on time. Null in the closed model.
fn schedule(rate: Option<u64>, c: &Counters, lateness: &HistogramDigest, duration: std::time::Duration) -> Value {
    let Some(rate) = rate else { return Value::Null };
    json!({
        "requestedPerSec": rate,
        "achievedPerSec": super::achieved_rate(lateness.count, duration),
        "sent": lateness.count,
        "late": c.late,
        "lateAfterSeconds": 0.001,
        "latenessSeconds": digest(lateness),
        "blocked": c.blocked,
        "unsent": c.unsent,
    })
}

/// One worker with everything needed to re-check the merge: its counters and histograms; a
/// summarised one (`detailed` false: past the run's `SeriesBudget`) without its histograms.
fn worker(w: &WorkerLine, detailed: bool) -> Value {
    let mut v = json!({
        "address": w.address,
        "name": w.info.as_ref().map(|i| &i.name),
        "version": w.info.as_ref().map(|i| &i.version),
        "cores": w.info.as_ref().map(|i| i.cores),
        "kernel": w.info.as_ref().map(|i| &i.kernel),
        "connections": w.connections,
        "threads": w.threads,
        "durationSeconds": w.duration.as_secs_f64(),
        "clientCpuSeconds": w.client_cpu.as_secs_f64(),
        "interrupted": w.interrupted,
        "startOffsetSeconds": w.start_offset.map(|o| o as f64 / 1e9),
        "failure": w.failure,
        "partial": w.partial,
        "ioUring": w.ring.as_ref().map(ring),
        "intervals": w.intervals.iter().map(|s| interval(s, w.rate.is_some())).collect::<Vec<_>>(),
    });
    // A summarised worker's numbers come from its digest, the same fields but its histograms.
    let numbers = match (&w.stats, &w.digest) {
        (Some(s), _) => Some((&s.counters, Digest::of(s))),
        (None, Some(d)) => Some((&d.counters, (**d).clone())),
        (None, None) => None,
    };
    if let (Some((c, d)), Some(obj)) = (numbers, v.as_object_mut()) {
        obj.insert("requests".into(), counts(c));
        obj.insert("requestsPerSec".into(), json!(per_sec(c.total(), w.duration)));
        obj.insert("errors".into(), errors(c));
        obj.insert("errorSamples".into(), samples(&w.error_samples));
        obj.insert("statusCodes".into(), statuses(c));
        obj.insert("retryAfter".into(), retry_after(c));
        obj.insert("bytesReceived".into(), json!(c.bytes_received));
        obj.insert("bytesSent".into(), json!(c.bytes_sent));
        obj.insert("connectionsMade".into(), json!(c.connects));
        obj.insert("truncatedDatagrams".into(), json!(c.truncated));
        obj.insert("droppedPackets".into(), json!(c.dropped_packets));
        obj.insert("clampedSamples".into(), json!(c.clamped));
        obj.insert("latencySeconds".into(), digest(&d.latency));
        obj.insert("serviceTimeSeconds".into(), digest(&d.service));
        obj.insert("schedule".into(), schedule(w.rate, c, &d.lateness, w.duration));
        if let (Some(s), true) = (&w.stats, detailed) {
            obj.insert("histograms".into(), histograms(s));
        }
    }
    v
}

fn interval(s: &Second, open_model: bool) -> Value {
    let mut v = json!({
        "second": s.second,
        "requests": s.ok.saturating_add(s.errors),
        "ok": s.ok,
        "errors": s.errors,
        "p50Seconds": s.p50.map(secs),
        "p90Seconds": s.p90.map(secs),
        "p99Seconds": s.p99.map(secs),
        "maxSeconds": s.max.map(secs),
        "statusCodes": Value::Object(s.statuses.iter().map(|(code, n)| (code.to_string(), json!(n))).collect()),
        "warmUp": s.label.warm_up,
    });
    if let (Some(stage), Some(obj)) = (s.label.stage, v.as_object_mut()) {
        obj.insert("stage".into(), json!(stage));
    }
    if let (Some(target), Some(obj)) = (s.label.target_connections, v.as_object_mut()) {
        obj.insert("targetConnections".into(), json!(target));
    }
    if let (true, Some(obj)) = (open_model, v.as_object_mut()) {
        obj.insert("requestedRate".into(), json!(s.label.requested));
        // Requests sent in this one second: its achieved rate.
        obj.insert("achievedRate".into(), json!(s.sent));
        obj.insert("late".into(), json!(s.late));
        obj.insert("blocked".into(), json!(s.blocked));
        obj.insert("serviceP50Seconds".into(), json!(s.service_p50.map(secs)));
        obj.insert("serviceP99Seconds".into(), json!(s.service_p99.map(secs)));
    }
    v
}

fn counts(c: &Counters) -> Value {
    json!({
        "total": c.total(),
        "ok": c.ok,
        "errors": c.errors(),
        "connectErrors": c.errors_of(ErrorKind::Connect),
        "aborted": c.aborted,
        "refused": c.refused,
    })
}

fn errors(c: &Counters) -> Value {
    Value::Object(ErrorKind::ALL.iter().map(|k| (k.name().to_string(), json!(c.errors_of(*k)))).collect())
}

fn samples(s: &[(ErrorKind, String)]) -> Value {
    Value::Object(s.iter().map(|(k, why)| (k.name().to_string(), json!(why))).collect())
}

fn statuses(c: &Counters) -> Value {
    Value::Object(c.statuses().map(|(code, n)| (code.to_string(), json!(n))).collect())
}

/// Responses that carried Retry-After: per status, the largest delay-seconds, the dates.
fn retry_after(c: &Counters) -> Value {
    let r = &c.retry_after;
    json!({
        "responses": r.total(),
        "statusCodes": Value::Object(r.statuses().map(|(code, n)| (code.to_string(), json!(n))).collect()),
        "largestSeconds": r.largest_seconds,
        "dates": r.dates,
    })
}

fn summary(h: &Histogram<u64>) -> Value {
    digest(&HistogramDigest::of(h))
}

/// A histogram's count, min, mean, max and percentiles, in seconds.
fn digest(d: &HistogramDigest) -> Value {
    if d.count == 0 {
        return json!({ "count": 0 });
    }
    let percentiles: Map<String, Value> =
        PERCENTILES.iter().zip(d.percentiles).map(|((label, _), v)| (format!("p{label}"), json!(secs(v)))).collect();
    json!({
        "count": d.count,
        "min": secs(d.min),
        "mean": d.mean / 1e9,
        "max": secs(d.max),
        "percentiles": percentiles,
    })
}

fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn encode(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode_histogram(h))
}

#[cfg(test)]
mod tests;
