//! End to end: `--hlog FILE`, the HdrHistogram interval log, read back by an independent reader:
//! the `hdrhistogram` package from PyPI (HdrHistogram_py's HistogramLogReader and codec, through
//! tests/e2e/hlog_read.py), for a local run and for a run on two real `volley worker` processes.
//! Its intervals must add up, kind by kind, to the report's own histograms, and its seconds
//! be the report's seconds. Without Python's package the tests say so and pass, except under
//! CI, which installs it (.ci/run).

use crate::support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use hdrhistogram::Histogram;
use serde_json::Value;
use support::{
    Behavior, TestServer, WorkerProcess, assert_success, controller_command, describe_output, in_ci, json_report,
    number, one_error_line, run_volley, run_within,
};

/// Each tag of the log, where the JSON report summarises the same histogram (null, as the
/// schedule of a closed run is, when it is empty), and its histogram.
const KINDS: [(&str, &str, &str); 6] = [
    ("latency", "/latencySeconds", "latency"),
    ("service", "/serviceTimeSeconds", "serviceTime"),
    ("lateness", "/schedule/latenessSeconds", "lateness"),
    ("connect", "/connectSeconds", "connect"),
    ("ttfb", "/firstByteSeconds", "firstByte"),
    ("hold", "/clientHoldSeconds", "clientHold"),
];

/// What tests/e2e/hlog_read.py found in `path`, or None (with a note) when Python's `hdrhistogram`
/// package is missing outside CI.
pub(crate) fn read_with_hdrhistogram_py(path: &Path) -> Option<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("e2e").join("hlog_read.py");
    let out = Command::new("python3").arg(&script).arg(path).output();
    match out {
        Ok(out) if out.status.success() => Some(serde_json::from_slice(&out.stdout).expect("hlog_read.py prints JSON")),
        Ok(out) if !in_ci() && String::from_utf8_lossy(&out.stderr).contains("No module named 'hdrh'") => {
            eprintln!("skipped: Python's hdrhistogram package is missing (pip install hdrhistogram==0.10.8)");
            None
        }
        Ok(out) => panic!("hlog_read.py failed on {}\n{}", path.display(), describe_output(&out)),
        Err(e) if !in_ci() => {
            eprintln!("skipped: no python3 ({e})");
            None
        }
        Err(e) => panic!("python3: {e}"),
    }
}

/// The value HdrHistogram_py gives at percentile `p` of `h`'s samples: the sample at rank
/// round(p * n), where HdrHistogram's Rust and Java ones take ceil(p * n).
pub(crate) fn value_at_py_percentile(h: &Histogram<u64>, p: f64) -> u64 {
    value_at_rank(h, ((p * h.len() as f64 / 100.0) + 0.5).floor().max(1.0) as u64)
}

/// `ours`'s buckets (value, count) are those `hlog_read.py` found for a tag (`found`).
pub(crate) fn assert_same_buckets(ours: &Histogram<u64>, found: &Value, what: &str) {
    let recorded: Vec<(u64, u64)> =
        ours.iter_recorded().map(|v| (v.value_iterated_to(), v.count_since_last_iteration())).collect();
    let theirs: Vec<(u64, u64)> = found["recorded"]
        .as_array()
        .expect("recorded values")
        .iter()
        .map(|pair| (pair[0].as_u64().expect("a value"), pair[1].as_u64().expect("a count")))
        .collect();
    assert_eq!(recorded, theirs, "{what}: the report's buckets and those of the log's intervals added up");
}

/// The value of the `rank`-th smallest sample (from 1), as HdrHistogram reports values.
fn value_at_rank(h: &Histogram<u64>, rank: u64) -> u64 {
    let mut seen = 0;
    for v in h.iter_recorded() {
        seen += v.count_since_last_iteration();
        if seen >= rank {
            return v.value_iterated_to();
        }
    }
    h.max()
}

/// A histogram of the JSON report, as the report encodes it.
pub(crate) fn decode(b64: &Value) -> Histogram<u64> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.as_str().expect("base64 text")).expect("base64");
    volley_engine::decode_histogram(&bytes).expect("an HdrHistogram")
}

/// The log read by the other implementation says what the report says: per kind, the counts
/// of its intervals add up to the report's count, the percentiles, min and max of their sum
/// are the report's (within HdrHistogram's equivalence), its seconds carry the report's
/// seconds' responses, and its intervals cover the run.
fn assert_log_is_the_report(log: &Value, report: &Value) {
    let seconds = report["intervals"].as_array().expect("intervals");
    assert!(seconds.len() >= 2, "a run of several seconds: {report}");
    let duration = report["durationSeconds"].as_f64().unwrap();
    for (tag, summary, histogram) in KINDS {
        let found = &log["tags"][tag];
        let intervals = found["intervals"].as_array().unwrap_or_else(|| panic!("no tag {tag} in {log}"));
        let counts: Vec<u64> = intervals.iter().map(|i| number(i, "/count")).collect();
        let expected = report.pointer(summary).and_then(|s| s["count"].as_u64()).unwrap_or(0);
        assert_eq!(counts.iter().sum::<u64>(), expected, "{tag}: the intervals' counts {counts:?}");
        assert_eq!(number(found, "/count"), expected, "{tag}");
        // One interval a second, merged over the workers, then at most one for the rest.
        assert!(
            intervals.len() == seconds.len() || intervals.len() == seconds.len() + 1,
            "{tag}: {} intervals for {} seconds",
            intervals.len(),
            seconds.len()
        );
        for (i, (interval, second)) in intervals.iter().zip(seconds).enumerate() {
            assert_eq!(interval["start"].as_f64(), Some(i as f64), "{tag} {interval}");
            assert_eq!(interval["length"].as_f64(), Some(1.0), "{tag} {interval}");
            if tag == "latency" {
                assert_eq!(number(interval, "/count"), number(second, "/ok"), "second {}", i + 1);
            }
        }
        let last = intervals.last().unwrap();
        let end = last["start"].as_f64().unwrap() + last["length"].as_f64().unwrap();
        assert!(
            (end - duration).abs() < 0.002 || intervals.len() == seconds.len(),
            "{tag}: ends at {end} of {duration}"
        );
        let ours = decode(&report["histograms"][histogram]);
        assert_eq!(ours.len(), expected);
        if expected == 0 {
            continue;
        }
        // The same samples, bucket for bucket.
        assert_same_buckets(&ours, found, tag);
        // Their percentiles are ours. HdrHistogram_py's rank rule is not the Rust crate's, so
        // the report's own p99.99 may be the next sample up: each is compared with the sample
        // its rule names.
        for (p, theirs) in found["percentiles"].as_object().unwrap() {
            let theirs = theirs.as_u64().unwrap();
            let mine = value_at_py_percentile(&ours, p.parse::<f64>().unwrap());
            assert!(ours.equivalent(mine, theirs), "{tag} p{p}: the report's {mine} ns, the log's {theirs} ns");
            // "99.9e-2" parses to the very quantile the report uses (0.999), where 99.9 / 100.0
            // is one ulp above it: with 10,000 samples that is the next rank up.
            let q = format!("{p}e-2").parse::<f64>().unwrap();
            let reported = report.pointer(summary).unwrap()["percentiles"][format!("p{p}")].as_f64().unwrap();
            assert_eq!(reported, ours.value_at_quantile(q) as f64 / 1e9, "{tag} p{p} as the report printed it");
        }
        assert!(ours.equivalent(ours.min(), number(found, "/min")), "{tag} min");
        assert!(ours.equivalent(ours.max(), number(found, "/max")), "{tag} max");
    }
}

fn run(args: &[&str]) -> Output {
    run_within(controller_command(args), Duration::from_secs(60))
}

#[test]
fn a_local_runs_interval_log_read_by_hdrhistogram_py_adds_up_to_the_report_per_kind() {
    let server = TestServer::start(Behavior::ok(100).slow_every(50, Duration::from_millis(3)));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    // 2.5 s: two whole seconds and the rest, with every kind of sample (a connection's set-up
    // lands in the first second; hold needs 32 requests in flight).
    let out = run(&["-z", "2500ms", "-c", "40", "-t", "2", "--hlog", log.to_str().unwrap(), "-j", &server.url()]);
    assert_success(&out);
    let report = json_report(&out);
    let Some(read) = read_with_hdrhistogram_py(&log) else { return };
    assert_log_is_the_report(&read, &report);
}

#[test]
fn two_workers_seconds_at_a_rate_are_logged_merged_and_add_up_to_the_report_per_kind() {
    let server = TestServer::start(Behavior::ok(100).slow_every(50, Duration::from_millis(3)));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let workers = format!("{},{}", a.address(), b.address());
    let out = run(&[
        "--workers",
        &workers,
        "--rate",
        "4000",
        "-z",
        "2500ms",
        "-c",
        "8",
        "-t",
        "1",
        "--hlog",
        log.to_str().unwrap(),
        "-j",
        &server.url(),
    ]);
    assert_success(&out);
    let report = json_report(&out);
    assert_eq!(report["workers"].as_array().map(Vec::len), Some(2));
    assert!(number(&report, "/serviceTimeSeconds/count") > 0, "an open-model run has service times");
    let Some(read) = read_with_hdrhistogram_py(&log) else { return };
    assert_log_is_the_report(&read, &report);
}

#[test]
fn a_flows_iteration_durations_are_logged_per_scenario_over_two_workers_and_add_up_to_the_report() {
    let server = volley_serve::Server::start(volley_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..volley_serve::ServeConfig::default()
    })
    .unwrap();
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.hlog");
    let workers = format!("{},{}", a.address(), b.address());
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios/login.toml");
    let (log_path, url) = (log.to_str().unwrap(), server.url());
    let out = run(&[
        "--workers",
        &workers,
        "-z",
        "2500ms",
        "-c",
        "4",
        "-t",
        "1",
        "--hlog",
        log_path,
        "-j",
        "--scenario",
        example,
        &url,
    ]);
    assert_success(&out);
    let report = json_report(&out);
    let visit = &report["scenarios"][0];
    assert_eq!(visit["name"], "visit");
    let Some(read) = read_with_hdrhistogram_py(&log) else { return };
    let logged = &read["tags"]["duration@visit"];
    // Every completed iteration's duration is in the log once: in the second it completed in,
    // or in the rest after the last whole second.
    let completed = number(visit, "/durationSeconds/count");
    assert!(completed > 0 && completed == number(visit, "/iterations/completed"), "{visit}");
    assert_eq!(logged["count"].as_u64(), Some(completed), "{logged}");
    assert!(logged["intervals"].as_array().map_or(0, Vec::len) >= 2, "seconds of their own: {logged}");
    let ours = decode(&visit["histograms"]["duration"]);
    assert!(ours.equivalent(ours.max(), number(logged, "/max")), "{logged}");
}

#[test]
fn an_interval_log_that_cannot_be_written_is_a_usage_error_before_any_load() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run_volley(["-n", "10", "--hlog", "/nonexistent-dir/run.hlog", &server.url()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(line.starts_with("volley: error: --hlog /nonexistent-dir/run.hlog: cannot write it:"), "{line}");
    assert_eq!(server.requests(), 0, "no load before the check");
    assert_eq!(server.connections(), 0);
}
