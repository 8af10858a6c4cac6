//! The JSON report: shb's fields (latencies in seconds) plus connect and first-byte
//! summaries and every histogram as base64 HdrHistogram V2-DEFLATE, so reports can be merged.

use base64::Engine;
use hdrhistogram::Histogram;
use serde_json::{Map, Value, json};
use volley_engine::{ErrorKind, encode_histogram};

use super::{PERCENTILES, Report, per_sec};

pub(crate) fn to_json(r: &Report) -> Value {
    let c = &r.stats.counters;
    let h = &r.stats.histograms;
    let statuses: Map<String, Value> = c.statuses().map(|(code, n)| (code.to_string(), json!(n))).collect();
    let errors: Map<String, Value> =
        ErrorKind::ALL.iter().map(|k| (k.name().to_string(), json!(c.errors_of(*k)))).collect();
    let samples: Map<String, Value> =
        r.error_samples.iter().map(|(k, why)| (k.name().to_string(), json!(why))).collect();
    json!({
        "url": r.url,
        "protocol": r.protocol,
        "threads": r.threads,
        "connections": r.connections,
        "durationSeconds": r.duration.as_secs_f64(),
        "requests": {
            "total": c.total(),
            "ok": c.ok,
            "errors": c.errors(),
            "connectErrors": c.errors_of(ErrorKind::Connect),
            "aborted": c.aborted,
        },
        "errors": errors,
        "errorSamples": samples,
        "requestsPerSec": r.requests_per_sec(),
        "bytesReceived": c.bytes_received,
        "bytesReceivedPerSec": per_sec(c.bytes_received, r.duration),
        "bytesSent": c.bytes_sent,
        "bytesSentPerSec": per_sec(c.bytes_sent, r.duration),
        "connectionsMade": c.connects,
        "statusCodes": statuses,
        "latencySeconds": summary(&h.latency),
        "connectSeconds": summary(&h.connect),
        "firstByteSeconds": summary(&h.ttfb),
        "clampedSamples": c.clamped,
        "interrupted": r.interrupted,
        "clientBusy": r.client_busy,
        "ioUring": {
            "kernel": r.ring.kernel,
            "tunedFlags": r.ring.tuned,
            "batchedWaits": r.ring.min_wait,
        },
        "warnings": r.warnings(),
        "histograms": {
            "format": "HdrHistogram V2+DEFLATE, base64, nanoseconds",
            "latency": encode(&h.latency),
            "connect": encode(&h.connect),
            "firstByte": encode(&h.ttfb),
        },
    })
}

fn summary(h: &Histogram<u64>) -> Value {
    if h.is_empty() {
        return json!({ "count": 0 });
    }
    let percentiles: Map<String, Value> =
        PERCENTILES.iter().map(|(label, q)| (format!("p{label}"), json!(secs(h.value_at_quantile(*q))))).collect();
    json!({
        "count": h.len(),
        "min": secs(h.min()),
        "mean": h.mean() / 1e9,
        "max": secs(h.max()),
        "percentiles": percentiles,
    })
}

fn secs(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

fn encode(h: &Histogram<u64>) -> String {
    base64::engine::general_purpose::STANDARD.encode(encode_histogram(h))
}
