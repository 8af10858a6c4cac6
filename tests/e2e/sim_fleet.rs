//! The controller against a simulated fleet: `volley sim-fleet` serves 200 real worker daemons
//! (gRPC service, watchdog, wire encoding) from one process, their shards run by a synthetic
//! engine that sends no load and says what it produced. The controller's merged report must
//! equal that exactly, stay bounded in size, and say that most workers' own series were
//! summarised.

use std::time::Duration;

use serde_json::Value;

use crate::support::{
    BackgroundProcess, assert_valid_report, describe_output, run_volley_timeout, volley_command, wait_until,
};

const WORKERS: usize = 200;

#[test]
fn two_hundred_simulated_workers_merge_exactly_into_a_bounded_report_that_says_what_it_summarised() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("workers.txt");
    let workers = WORKERS.to_string();
    let mut fleet = BackgroundProcess::spawn(volley_command([
        "sim-fleet",
        "--workers",
        &workers,
        "--workers-file",
        file.to_str().expect("a UTF-8 path"),
    ]));
    assert!(wait_until(Duration::from_secs(20), || file.exists() || !fleet.is_running()), "no workers file in 20 s");
    assert!(file.exists(), "sim-fleet did not start:\n{}", describe_output(&fleet.wait(Duration::from_secs(5))));

    let at = format!("@{}", file.display());
    let out = run_volley_timeout(
        ["--workers", &at, "-c", &workers, "-t", "1", "-z", "3s", "-j", "http://127.0.0.1:9/"],
        Duration::from_secs(25),
    );
    fleet.signal(libc::SIGTERM);
    let produced = fleet.wait(Duration::from_secs(10));
    assert!(out.status.success(), "{}", describe_output(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_valid_report(&report);
    let line = String::from_utf8_lossy(&produced.stdout);
    let truth: Value = serde_json::from_str(line.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("sim-fleet said no totals ({e}):\n{}", describe_output(&produced)));

    assert_eq!(truth["workers"], WORKERS);
    assert!(truth["requests"]["total"].as_u64().unwrap_or(0) > 100_000, "{truth}");
    for field in
        ["/requests/total", "/requests/ok", "/requests/errors", "/bytesSent", "/bytesReceived", "/connectionsMade"]
    {
        assert_eq!(report.pointer(field), truth.pointer(field), "{field}");
    }
    assert_eq!(report["statusCodes"], truth["statusCodes"]);
    for field in ["/latencySeconds/count", "/latencySeconds/min", "/latencySeconds/max", "/latencySeconds/percentiles"]
    {
        assert_eq!(report.pointer(field), truth.pointer(field), "{field}");
    }

    // The first 100 keep their series and histograms; the other 100 are summarised, and the
    // report says so, in JSON and in its warnings.
    let series = &report["workerSeries"];
    assert_eq!(
        (series["workers"].as_u64(), series["detailed"].as_u64(), series["summarised"].as_u64()),
        (Some(200), Some(100), Some(100))
    );
    let listed = report["workers"].as_array().expect("workers");
    assert_eq!(listed.len(), WORKERS);
    assert_eq!(listed[0]["intervals"].as_array().map(Vec::len), Some(3));
    assert!(listed[0]["histograms"]["latency"].is_string());
    assert_eq!(listed[150]["intervals"].as_array().map(Vec::len), Some(0));
    assert!(listed[150].get("histograms").is_none());
    assert!(listed[150]["latencySeconds"]["count"].as_u64().unwrap_or(0) > 0, "a summarised worker keeps its numbers");
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("100 are summarised"), "{warnings}");
    // The run's own series is every worker's: three seconds adding up to the totals.
    let intervals = report["intervals"].as_array().expect("intervals");
    let ok: u64 = intervals.iter().map(|s| s["ok"].as_u64().unwrap_or(0)).sum();
    assert_eq!(Some(ok), truth["requests"]["ok"].as_u64());

    // Bounded: a summarised worker is a few hundred bytes, a detailed one its histograms and
    // three seconds; the whole well under what 200 workers in full would take.
    let summarised = serde_json::to_string(&listed[150]).expect("JSON").len();
    assert!(summarised < 3_000, "a summarised worker takes {summarised} bytes");
    assert!(out.stdout.len() < 2_500_000, "the report is {} bytes", out.stdout.len());
}
