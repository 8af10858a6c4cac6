//! End to end, `--abort-on-fail`: real `volley worker` processes against a test server that
//! starts answering 500 mid-run (a build that breaks under load). The controller must stop
//! every worker within a second of the breach, which the server's own clock and counts show,
//! exit 4 and say which threshold stopped the run and when.

use crate::support;

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Behavior, TestServer, WorkerProcess, assert_valid_report, describe_output, json_report, run_volley};

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn three_workers_stop_within_a_second_of_the_breach_and_the_report_names_the_threshold() {
    // The breach sits 0.2 s into the load's second second: the controller learns of it when
    // that second's intervals arrive, about 0.8 s later.
    let breach_after = Duration::from_millis(1200);
    let server = TestServer::start(Behavior::ok(14).fail_after(breach_after, 500));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address().to_string()).collect::<Vec<_>>().join(",");
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("gates.xml");
    let began = Instant::now();
    let out = run_volley(args(&[
        "--workers",
        &list,
        "-z",
        "20s",
        "-c",
        "6",
        "--threshold",
        "p99<5s",
        "--threshold",
        "status_5xx<1%",
        "--abort-on-fail",
        "-j",
        "-o",
        &format!("junit:{}", xml.display()),
        &server.url(),
    ]));
    let took = began.elapsed();
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    assert!(took < Duration::from_secs(12), "a 20 s run aborted early took {took:?}");

    // The server's own clock: nothing arrived more than a second after it began failing.
    let breach = server.breach(breach_after).expect("the server saw requests");
    let latest = server.latest_request_at().expect("the server saw requests");
    assert!(latest > breach, "the run ended before the breach: {}", describe_output(&out));
    let lag = latest - breach;
    assert!(lag < Duration::from_secs(1), "the last request came {lag:?} after the breach");

    let r = json_report(&out);
    assert_valid_report(&r);
    assert_eq!(r["abortedBy"]["threshold"], "status_5xx<1%", "{}", r["abortedBy"]);
    let after = r["abortedBy"]["afterSeconds"].as_f64().unwrap();
    assert!((1.2..2.5).contains(&after), "aborted after {after} s");
    assert!(r["abortedBy"]["measured"].as_f64().unwrap() > 0.01, "{}", r["abortedBy"]);
    assert_eq!(r["interrupted"], false, "an abort is not a Ctrl-C");
    let verdicts = r["thresholds"].as_array().unwrap();
    let aborting: Vec<&Value> = verdicts.iter().filter(|v| v.get("abortedAfterSeconds").is_some()).collect();
    assert_eq!(aborting.len(), 1, "{verdicts:?}");
    assert_eq!((&aborting[0]["threshold"], &aborting[0]["passed"]), (&"status_5xx<1%".into(), &false.into()));
    assert_eq!(aborting[0]["abortedAfterSeconds"].as_f64(), Some(after));
    assert!(r["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("aborted after")));
    // Every worker took part and was stopped, none failed.
    let ws = r["workers"].as_array().unwrap();
    assert_eq!(ws.len(), 3);
    assert!(ws.iter().all(|w| w["failure"].is_null()), "{ws:?}");
    // What the server answered with 500 the report counts: each one, unless still in flight.
    let (report_500, aborted) = (support::number(&r, "/statusCodes/500"), support::number(&r, "/requests/aborted"));
    let server_500 = server.requests_after_breach();
    assert!(report_500 <= server_500 && server_500 <= report_500 + aborted, "{report_500} {aborted} {server_500}");

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("status_5xx<1% (measured") && stderr.contains("aborted the run after"), "{stderr}");
    let suites = junit_parser::from_reader(std::io::BufReader::new(std::fs::File::open(&xml).unwrap())).unwrap();
    assert_eq!((suites.tests, suites.failures, suites.errors), (3, 1, 0), "the run itself is no error");
}

#[test]
fn nothing_is_judged_during_the_grace_and_the_text_report_says_what_stopped_the_run() {
    // Every answer from 0.2 s on is a 500, and errors<1 is lost at the first: only the grace
    // keeps the run going until 2 s.
    let server = TestServer::start(Behavior::ok(14).fail_after(Duration::from_millis(200), 503));
    let out = run_volley(args(&[
        "-z",
        "20s",
        "-c",
        "2",
        "--threshold",
        "status_503<1",
        "--abort-on-fail",
        "--abort-grace",
        "2s",
        &server.url(),
    ]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split_once("Thresholds:\n").unwrap_or_else(|| panic!("no Thresholds section:\n{text}")).1;
    let line = section.lines().find(|l| l.contains("status_503<1")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.trim_start().starts_with("FAIL"), "{line}");
    let after: f64 = line
        .split("aborted the run after ")
        .nth(1)
        .and_then(|s| s.trim_end_matches(" s").parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((2.0..3.5).contains(&after), "{line}");
    assert!(text.contains("Warning: aborted after"), "{text}");
    // The grace counts from the run's start, which is a connect before the server's first
    // request, and the last request the server sees comes a little before the abort: the span
    // it saw may fall a few milliseconds short of 2 s. Judged during the grace, the run would
    // have stopped near 0.2 s.
    let ran = server.latest_request_at().unwrap() - server.first_request_at().unwrap();
    assert!(ran >= Duration::from_millis(1900) && ran < Duration::from_secs(4), "{ran:?}");
}

#[test]
fn abort_on_fail_without_a_threshold_is_a_usage_error() {
    let out = run_volley(args(&["--abort-on-fail", "-n", "10", "http://127.0.0.1:9/"]));
    assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
    let out = run_volley(args(&["--threshold", "p99<1s", "--abort-grace", "x", "-n", "10", "http://127.0.0.1:9/"]));
    assert_eq!(code(&out), Some(2), "{}", describe_output(&out));
}
