//! The OpenMetrics text a scrape gets (`application/openmetrics-text; version=1.0.0`).
//!
//! Counters are cumulative over the life of the process that serves them (every run of a worker
//! daemon adds to them), so `rate()` and `increase()` work across runs; gauges describe the
//! last complete second of the run in progress, and are 0 between runs.

use std::fmt::Write;

use volley_engine::ErrorKind;

use super::buckets::{BOUNDS_NS, le_label};
use super::tally::Tally;

/// The media type of [`render`]'s text.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the last complete second of the run in progress looked like.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Gauges {
    pub running: bool,
    /// Requests finished in the last complete second.
    pub rate: u64,
    /// Requests in flight, averaged over that second.
    pub in_flight: f64,
}

/// The whole exposition, ending in `# EOF`.
pub(crate) fn render(t: &Tally, g: &Gauges, runs: u64) -> String {
    let mut out = String::with_capacity(4096);
    let o = &mut out;
    counter(o, "volley_requests", None, "Requests finished: ok (a complete response, whatever its status) or failed.");
    sample(o, "volley_requests_total", "", t.requests);
    counter(o, "volley_responses", None, "Complete responses, by HTTP status.");
    for (code, n) in &t.status {
        sample(o, "volley_responses_total", &format!("{{status=\"{code}\"}}"), *n);
    }
    counter(o, "volley_errors", None, "Failed requests, by kind: connect, timeout, reset, protocol, tls.");
    for (kind, n) in ErrorKind::ALL.iter().zip(t.errors) {
        sample(o, "volley_errors_total", &format!("{{kind=\"{}\"}}", kind.name()), n);
    }
    counter(
        o,
        "volley_aborted_requests",
        None,
        "Requests in flight when a timed or stopped run ended: neither ok nor failed.",
    );
    sample(o, "volley_aborted_requests_total", "", t.aborted);
    counter(o, "volley_connections", None, "Connections set up (TCP, with TLS and HTTP/2 set-up where used).");
    sample(o, "volley_connections_total", "", t.connects);
    counter(o, "volley_sent_bytes", Some("bytes"), "Bytes sent to the target.");
    sample(o, "volley_sent_bytes_total", "", t.bytes_sent);
    counter(o, "volley_received_bytes", Some("bytes"), "Bytes received from the target.");
    sample(o, "volley_received_bytes_total", "", t.bytes_received);
    counter(o, "volley_runs", None, "Runs ended (finished, stopped or failed) since this process started.");
    sample(o, "volley_runs_total", "", runs);

    gauge(o, "volley_running", "1 while a run's load is going, 0 otherwise.");
    sample(o, "volley_running", "", u64::from(g.running));
    gauge(o, "volley_request_rate", "Requests finished in the last complete second of the run: the achieved rate.");
    sample(o, "volley_request_rate", "", g.rate);
    gauge(
        o,
        "volley_in_flight_requests",
        "Requests in flight, averaged over the last complete second (Little's law: its responses' latencies summed, over one second).",
    );
    let _ = writeln!(o, "volley_in_flight_requests {}", finite(g.in_flight));

    let name = "volley_request_duration_seconds";
    let _ = writeln!(o, "# TYPE {name} histogram");
    let _ = writeln!(o, "# UNIT {name} seconds");
    let _ = writeln!(
        o,
        "# HELP {name} Latency of complete responses, from sending the request to the last byte of its response."
    );
    let mut cumulative = 0u64;
    for (bound, n) in BOUNDS_NS.iter().zip(&t.buckets) {
        cumulative = cumulative.saturating_add(*n);
        sample(o, "volley_request_duration_seconds_bucket", &format!("{{le=\"{}\"}}", le_label(*bound)), cumulative);
    }
    let count = t.responses();
    sample(o, "volley_request_duration_seconds_bucket", "{le=\"+Inf\"}", count);
    sample(o, "volley_request_duration_seconds_count", "", count);
    let _ = writeln!(o, "volley_request_duration_seconds_sum {}", finite(t.latency_sum));
    if !t.names.is_empty() {
        names(o, &t.names);
    }
    out.push_str("# EOF\n");
    out
}

/// A mix's names: each one's requests, responses by status, errors by kind and latency
/// histogram, under a `name` label, in families of their own so that summing a run's series
/// never counts a request twice.
fn names(o: &mut String, names: &std::collections::BTreeMap<String, Tally>) {
    let label = |name: &str| format!("name=\"{}\"", escape(name));
    counter(o, "volley_name_requests", None, "Requests of a mix finished, by the name of the request.");
    for (name, t) in names {
        sample(o, "volley_name_requests_total", &format!("{{{}}}", label(name)), t.requests);
    }
    counter(o, "volley_name_responses", None, "Complete responses of a mix, by name and HTTP status.");
    for (name, t) in names {
        for (code, n) in &t.status {
            sample(o, "volley_name_responses_total", &format!("{{{},status=\"{code}\"}}", label(name)), *n);
        }
    }
    counter(o, "volley_name_errors", None, "Failed requests of a mix, by name and kind.");
    for (name, t) in names {
        for (kind, n) in ErrorKind::ALL.iter().zip(t.errors) {
            sample(o, "volley_name_errors_total", &format!("{{{},kind=\"{}\"}}", label(name), kind.name()), n);
        }
    }
    if names.values().any(|t| !t.checks.is_empty()) {
        counter(o, "volley_name_checks", None, "Responses a scenario's check judged, by name, check and result.");
        for (name, t) in names {
            for (check, [passed, failed]) in &t.checks {
                let labels = format!("{},check=\"{}\"", label(name), escape(check));
                sample(o, "volley_name_checks_total", &format!("{{{labels},result=\"passed\"}}"), *passed);
                sample(o, "volley_name_checks_total", &format!("{{{labels},result=\"failed\"}}"), *failed);
            }
        }
    }
    let family = "volley_name_request_duration_seconds";
    let _ = writeln!(o, "# TYPE {family} histogram");
    let _ = writeln!(o, "# UNIT {family} seconds");
    let _ = writeln!(o, "# HELP {family} Latency of a mix's complete responses, by the name of the request.");
    for (name, t) in names {
        let name = label(name);
        let mut cumulative = 0u64;
        for (bound, n) in BOUNDS_NS.iter().zip(&t.buckets) {
            cumulative = cumulative.saturating_add(*n);
            sample(o, &format!("{family}_bucket"), &format!("{{{name},le=\"{}\"}}", le_label(*bound)), cumulative);
        }
        let count = t.responses();
        sample(o, &format!("{family}_bucket"), &format!("{{{name},le=\"+Inf\"}}"), count);
        sample(o, &format!("{family}_count"), &format!("{{{name}}}"), count);
        let _ = writeln!(o, "{family}_sum{{{name}}} {}", finite(t.latency_sum));
    }
}

/// A label value as the exposition format writes it: backslash, double quote and line feed
/// escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn counter(out: &mut String, name: &str, unit: Option<&str>, help: &str) {
    let _ = writeln!(out, "# TYPE {name} counter");
    if let Some(unit) = unit {
        let _ = writeln!(out, "# UNIT {name} {unit}");
    }
    let _ = writeln!(out, "# HELP {name} {help}");
}

fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# TYPE {name} gauge");
    let _ = writeln!(out, "# HELP {name} {help}");
}

fn sample(out: &mut String, name: &str, labels: &str, value: u64) {
    let _ = writeln!(out, "{name}{labels} {value}");
}

/// A float as OpenMetrics takes it: Rust prints no exponent, and a NaN from absurd input is 0.
fn finite(x: f64) -> f64 {
    if x.is_finite() && x >= 0.0 { x } else { 0.0 }
}
