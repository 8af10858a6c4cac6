//! The report of a run: built once from merged statistics, printed as text or JSON.

mod json;
mod text;

use std::time::Duration;

use volley_engine::{ErrorKind, RingSupport, RunResult, Stats};

pub(crate) use json::to_json;
pub(crate) use text::to_text;

/// Percentiles the report lists, as (label, quantile).
pub(crate) const PERCENTILES: [(&str, f64); 9] = [
    ("10", 0.10),
    ("25", 0.25),
    ("50", 0.50),
    ("75", 0.75),
    ("90", 0.90),
    ("95", 0.95),
    ("99", 0.99),
    ("99.9", 0.999),
    ("99.99", 0.9999),
];

/// Engine threads busier than this were probably the bottleneck, not the server.
const SATURATED: f64 = 0.90;

pub(crate) struct Report {
    pub url: String,
    pub protocol: &'static str,
    pub threads: usize,
    pub connections: usize,
    pub duration: Duration,
    pub stats: Stats,
    pub interrupted: bool,
    pub error_samples: Vec<(ErrorKind, String)>,
    /// Engine threads' CPU time over their wall time, 0 to 1.
    pub client_busy: Option<f64>,
    /// What the kernel's io_uring offered the engine.
    pub ring: RingSupport,
}

impl Report {
    pub(crate) fn from_run(url: String, run: RunResult) -> Self {
        let wall = run.duration.as_secs_f64() * run.threads as f64;
        let client_busy = (wall > 0.0).then(|| run.client_cpu.as_secs_f64() / wall);
        Report {
            url,
            protocol: "HTTP/1.1",
            threads: run.threads,
            connections: run.connections,
            duration: run.duration,
            stats: run.stats,
            interrupted: run.interrupted,
            error_samples: run.error_samples,
            client_busy,
            ring: run.ring,
        }
    }

    pub(crate) fn requests_per_sec(&self) -> f64 {
        per_sec(self.stats.counters.total(), self.duration)
    }

    /// What the numbers above cannot show on their own.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let c = &self.stats.counters;
        let mut w = Vec::new();
        if self.interrupted {
            w.push("interrupted: the run was stopped before its end; the numbers cover what was done".to_string());
        }
        if c.aborted > 0 {
            w.push(format!(
                "{} requests were in flight when the run stopped: the server may have seen them, but they are neither ok nor errors",
                c.aborted
            ));
        }
        if c.clamped > 0 {
            w.push(format!("{} samples were beyond the histogram's 1 h range and were recorded as 1 h", c.clamped));
        }
        if let Some(busy) = self.client_busy.filter(|b| *b >= SATURATED) {
            w.push(format!(
                "the client was saturated ({:.0}% of its threads' time on CPU): latencies include time waiting for the client; use more threads (-t) or machines",
                busy * 100.0
            ));
        }
        w
    }

    /// The command's result once the report is printed: failed, interrupted, or fine.
    pub(crate) fn outcome(&self) -> Result<(), crate::error::CliError> {
        match self.failure() {
            Some(why) => Err(crate::error::CliError::RunFailed(why)),
            None if self.interrupted => Err(crate::error::CliError::Interrupted),
            None => Ok(()),
        }
    }

    /// Why the run cannot count as a success, when it cannot.
    pub(crate) fn failure(&self) -> Option<String> {
        let c = &self.stats.counters;
        if c.ok > 0 || c.errors() == 0 {
            return None;
        }
        let (kind, why) =
            self.error_samples.first().map(|(k, w)| (k.name(), w.as_str())).unwrap_or(("unknown", "no detail"));
        if c.connects == 0 && c.errors_of(ErrorKind::Connect) > 0 {
            return Some(format!("could not connect to {}: {why}", self.url));
        }
        Some(format!("no request succeeded: all {} failed ({kind}: {why})", c.errors()))
    }
}

pub(crate) fn per_sec(n: u64, d: Duration) -> f64 {
    let secs = d.as_secs_f64();
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}
