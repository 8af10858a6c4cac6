//! The per-second series as CSV: one row per second of the run, merged over the workers,
//! latencies in seconds as in the JSON report.

use std::fmt::Write;

use crate::report::Report;

pub(crate) fn series(report: &Report) -> String {
    let mut out = String::from("second,requests,ok,errors,p50_seconds,p99_seconds\n");
    let secs = |ns: Option<u64>| ns.map(|n| format!("{:.9}", n as f64 / 1e9)).unwrap_or_default();
    for s in &report.intervals {
        let _ = writeln!(out, "{},{},{},{},{},{}", s.second, s.ok + s.errors, s.ok, s.errors, secs(s.p50), secs(s.p99));
    }
    out
}
