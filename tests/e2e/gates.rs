//! End to end, CI gates: `--threshold` judged on merged data, the exit statuses, and the `-o`
//! files read back by parsers that are not ours (junit-parser for JUnit, the jsonschema crate
//! for the JSON Schema). The target is an in-test hyper server with a fixed delay, a share of
//! 500s and a share of slow answers, so each threshold has a known side to fall on.

use crate::support;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{
    Behavior, TestServer, WorkerProcess, assert_valid_report, describe_output, free_port, json_report, number,
    one_error_line, run_volley,
};

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// `--threshold T` for each of `thresholds`, then `rest`.
fn gated(thresholds: &[&str], rest: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = thresholds.iter().flat_map(|t| ["--threshold".to_string(), t.to_string()]).collect();
    args.extend(rest.iter().map(|s| s.to_string()));
    args
}

/// The verdict of `threshold` in a JSON report: (passed, measured).
fn verdict(report: &Value, threshold: &str) -> (bool, Option<f64>) {
    let all = report["thresholds"].as_array().unwrap_or_else(|| panic!("no thresholds in {report}"));
    let v = all
        .iter()
        .find(|v| v["threshold"] == threshold)
        .unwrap_or_else(|| panic!("{threshold} is not among {}", report["thresholds"]));
    (v["passed"].as_bool().unwrap(), v["measured"].as_f64())
}

#[test]
fn each_latency_rate_and_status_threshold_passes_and_fails_where_the_server_puts_it() {
    // 10 connections, each answer at least 20 ms late: at most 500 requests/s. Every 10th
    // request is a 500: exactly 20 of 200.
    let server = TestServer::start(Behavior::ok(14).delay(Duration::from_millis(20)).status_every(10, 500));
    // (threshold, should pass)
    let cases = [
        ("p50>=20ms", true),
        ("p50<20ms", false),
        ("p99.99<5s", true),
        ("p99<10ms", false),
        ("mean>=20ms", true),
        ("mean<20ms", false),
        ("max<5s", true),
        ("max<20ms", false),
        ("min>=20ms", true),
        ("connect_p99<1s", true),
        ("connect_p99<1ns", false),
        ("first_byte_p99>=20ms", true),
        ("first_byte_p99<20ms", false),
        ("rps<=500", true),
        ("rps>500", false),
        ("error_rate<=0%", true),
        ("errors>0", false),
        ("status_5xx<=10%", true),
        ("status_5xx<10%", false),
        ("status_500>=20", true),
        ("status_500<20", false),
        ("status_200>=180", true),
        ("status_2xx>180", false),
    ];
    let thresholds: Vec<&str> = cases.iter().map(|(t, _)| *t).collect();
    let out = run_volley(gated(&thresholds, &["-n", "200", "-c", "10", "-j", &server.url()]));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let r = json_report(&out);
    assert_eq!(server.requests(), 200);
    for (t, pass) in cases {
        assert_eq!(verdict(&r, t).0, pass, "{t}: {}", r["thresholds"]);
    }
    assert_eq!(r["thresholdsPassed"], false);
    // Measured values are the report's own merged numbers, in the metric's unit.
    assert_eq!(verdict(&r, "p99<10ms").1, r["latencySeconds"]["percentiles"]["p99"].as_f64());
    assert_eq!(verdict(&r, "p99.99<5s").1, r["latencySeconds"]["percentiles"]["p99.99"].as_f64());
    assert_eq!(verdict(&r, "first_byte_p99<20ms").1, r["firstByteSeconds"]["percentiles"]["p99"].as_f64());
    assert_eq!(verdict(&r, "rps>500").1, r["requestsPerSec"].as_f64());
    assert_eq!(verdict(&r, "status_5xx<10%").1, Some(0.1));
    assert_eq!(verdict(&r, "status_500<20").1, Some(20.0));
    // stderr names exactly the thresholds that failed.
    let line = one_error_line(&out);
    assert!(line.starts_with("volley: error: thresholds failed: p50<20ms (measured "), "{line}");
    for (t, pass) in cases {
        assert_eq!(!line.contains(&format!("{t} (measured")), pass, "{t}: {line}");
    }
}

#[test]
fn the_error_rate_threshold_counts_failed_requests_and_the_text_report_lists_every_verdict() {
    // Every 10th request waits 3 s, past --timeout: exactly 10 of 100 fail as timeouts.
    let server = TestServer::start(Behavior::ok(14).slow_every(10, Duration::from_secs(3)));
    let cases = [
        ("error_rate<=10%", true),
        ("error_rate<10%", false),
        ("errors>=10", true),
        ("errors<10", false),
        ("status_200<=90", true),
    ];
    let thresholds: Vec<&str> = cases.iter().map(|(t, _)| *t).collect();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let json_out = format!("json:{}", json.display());
    let out = run_volley(gated(
        &thresholds,
        &["-n", "100", "-c", "10", "--timeout", "300ms", "-o", &json_out, &server.url()],
    ));
    assert_eq!(code(&out), Some(4), "{}", describe_output(&out));
    let r: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_valid_report(&r);
    assert_eq!(number(&r, "/errors/timeout"), 10, "{r}");
    for (t, pass) in cases {
        assert_eq!(verdict(&r, t).0, pass, "{t}: {}", r["thresholds"]);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split_once("Thresholds:\n").unwrap_or_else(|| panic!("no Thresholds section:\n{text}")).1;
    for (t, pass) in cases {
        let line = section.lines().find(|l| l.contains(t)).unwrap_or_else(|| panic!("{t} missing:\n{section}"));
        let mark = if pass { "pass" } else { "FAIL" };
        assert!(line.trim_start().starts_with(mark), "{line}");
    }
    assert!(section.lines().any(|l| l.contains("error_rate<10%") && l.contains("measured 10.000%")), "{section}");
}

#[test]
fn exit_statuses_rank_usage_over_could_not_run_over_lost_workers_over_failed_thresholds() {
    let server = TestServer::start(Behavior::ok(14));
    let url = server.url();

    let all_pass = run_volley(gated(&["p99<5s", "status_200>=50"], &["-n", "50", "-c", "5", &url]));
    assert_eq!(code(&all_pass), Some(0), "{}", describe_output(&all_pass));
    let one_fails = run_volley(gated(&["p99<5s", "status_200>50"], &["-n", "50", "-c", "5", &url]));
    assert_eq!(code(&one_fails), Some(4), "{}", describe_output(&one_fails));
    assert_eq!(server.requests(), 100);

    // Usage: found before any load starts.
    for args in [
        gated(&["p99<5"], &["-n", "50", &url]),
        gated(&["p99<5ms"], &["-o", "xml:out.xml", "-n", "50", &url]),
        gated(&["p99<5ms"], &["-o", "out.json", "-n", "50", &url]),
    ] {
        let out = run_volley(&args);
        assert_eq!(code(&out), Some(2), "{args:?}\n{}", describe_output(&out));
        assert!(one_error_line(&out).starts_with("volley: error: "), "{}", describe_output(&out));
    }
    // An output that cannot be written: the run cannot be recorded, so it does not start.
    let out = run_volley(gated(&["p99<5ms"], &["-o", "junit:/nonexistent/dir/gates.xml", "-n", "50", &url]));
    assert_eq!(code(&out), Some(1), "{}", describe_output(&out));
    assert!(one_error_line(&out).contains("/nonexistent/dir/gates.xml"), "{}", describe_output(&out));
    assert_eq!(server.requests(), 100, "no load before the arguments are all good");

    // Could not run (nothing listens there) beats the threshold that failed with it.
    let nobody = format!("http://127.0.0.1:{}/", free_port());
    let out = run_volley(gated(&["p99<5s"], &["-n", "10", "-c", "2", "--connect-timeout", "1s", &nobody]));
    assert_eq!(code(&out), Some(1), "{}", describe_output(&out));

    // A lost worker beats a failed threshold: the verdicts cover only part of the load.
    let worker = WorkerProcess::start(&[]);
    let gone = format!("127.0.0.1:{}", free_port());
    let list = format!("{},{gone}", worker.address());
    let out = run_volley(gated(&["status_200>=200"], &["--workers", &list, "-n", "200", "-c", "4", "-j", &url]));
    assert_eq!(code(&out), Some(3), "{}", describe_output(&out));
    let r = json_report(&out);
    assert!(!verdict(&r, "status_200>=200").0, "{}", r["thresholds"]);
}

#[test]
fn thresholds_are_judged_on_the_merged_data_of_both_workers_not_on_either_part() {
    let server = TestServer::start(Behavior::ok(14).status_every(10, 500));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let list = format!("{},{}", a.address(), b.address());
    // 200 requests, 100 per worker: 180 are 200s and 20 are 500s in all, whoever sent them.
    let thresholds = ["status_200>=180", "status_2xx>100", "status_5xx>=10%", "status_5xx<=10%", "p99<5s"];
    let out = run_volley(gated(&thresholds, &["--workers", &list, "-n", "200", "-c", "4", "-j", &server.url()]));
    assert_eq!(code(&out), Some(0), "{}", describe_output(&out));
    let r = json_report(&out);
    assert_eq!(server.requests(), 200);
    assert_eq!(r["thresholdsPassed"], true);
    // Neither worker alone had more than 100 answers of any status, so judged on either part
    // the count thresholds would have failed.
    for w in r["workers"].as_array().unwrap() {
        assert_eq!(number(w, "/requests/total"), 100, "{w}");
    }
    assert_eq!(verdict(&r, "status_200>=180").1, Some(180.0));
    assert_eq!(verdict(&r, "status_5xx>=10%").1, Some(0.1));
    assert_eq!(verdict(&r, "p99<5s").1, r["latencySeconds"]["percentiles"]["p99"].as_f64());
}

#[test]
fn every_output_format_reads_back_with_the_reports_totals() {
    let server = TestServer::start(Behavior::ok(14).delay(Duration::from_millis(2)).status_every(10, 500));
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let spec = |format: &str, name: &str| format!("{format}:{}", path(name).display());
    let outputs = [
        spec("json", "run.json"),
        spec("jsonl", "runs.jsonl"),
        spec("csv", "series.csv"),
        spec("junit", "gates.xml"),
        spec("md", "summary.md"),
    ];
    let mut args = gated(&["p99<5s", "status_5xx<5%"], &["-z", "2s", "-c", "4", "-j"]);
    for o in &outputs {
        args.extend(["-o".to_string(), o.clone()]);
    }
    args.push(server.url());
    let first = run_volley(&args);
    assert_eq!(code(&first), Some(4), "{}", describe_output(&first));
    let first = json_report(&first);
    let second = run_volley(&args);
    assert_eq!(code(&second), Some(4), "{}", describe_output(&second));
    let r = json_report(&second);
    let (total, ok, errors) =
        (number(&r, "/requests/total"), number(&r, "/requests/ok"), number(&r, "/requests/errors"));
    assert!(total > 100, "{r}");

    // json: the same report as stdout.
    let saved: Value = serde_json::from_slice(&std::fs::read(path("run.json")).unwrap()).unwrap();
    assert_valid_report(&saved);
    assert_eq!(saved["requests"], r["requests"]);
    assert_eq!(saved["thresholds"], r["thresholds"]);

    // jsonl: one line per run, appended.
    let lines: Vec<Value> = std::fs::read_to_string(path("runs.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each jsonl line is one JSON report"))
        .collect();
    assert_eq!(lines.len(), 2);
    lines.iter().for_each(assert_valid_report);
    assert_eq!(lines[0]["requests"], first["requests"]);
    assert_eq!(lines[1]["requests"], r["requests"]);

    // csv: the per-second series adds up to the totals.
    let csv = std::fs::read_to_string(path("series.csv")).unwrap();
    let mut rows = csv.lines();
    assert_eq!(rows.next(), Some("second,requests,ok,errors,p50_seconds,p99_seconds"));
    let (mut sum_requests, mut sum_ok, mut sum_errors, mut seconds) = (0, 0, 0, 0);
    let mut first_second = None;
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), 6, "{row}");
        let num = |i: usize| cells[i].parse::<u64>().unwrap_or_else(|_| panic!("{row}"));
        // One row per second, in order, none missing.
        let start = *first_second.get_or_insert(num(0));
        assert_eq!(num(0), start + seconds, "{csv}");
        assert_eq!(num(1), num(2) + num(3), "{row}");
        if num(1) > 0 {
            assert!(cells[4].parse::<f64>().unwrap() <= cells[5].parse::<f64>().unwrap(), "{row}");
        }
        seconds += 1;
        sum_requests += num(1);
        sum_ok += num(2);
        sum_errors += num(3);
    }
    assert_eq!(seconds as usize, r["intervals"].as_array().unwrap().len(), "{csv}");
    assert_eq!((sum_requests, sum_ok, sum_errors), (total, ok, errors), "{csv}");

    // A timed run ends with some requests in flight, so the share of 500s is near 10%, not exact.
    let share = verdict(&r, "status_5xx<5%").1.unwrap();
    assert!((0.09..0.11).contains(&share), "{share}");
    let share = format!("{:.3}%", share * 100.0);

    // junit: read back by junit-parser, one testcase per threshold plus the run.
    let xml = std::fs::read(path("gates.xml")).unwrap();
    let suites = junit_parser::from_reader(std::io::Cursor::new(&xml)).expect("JUnit XML");
    assert_eq!((suites.tests, suites.failures, suites.errors), (3, 1, 0));
    let cases = &suites.suites[0].cases;
    let names: Vec<&str> = cases.iter().map(|c| c.original_name.as_str()).collect();
    assert_eq!(names, ["run", "p99<5s", "status_5xx<5%"]);
    assert!(cases[0].status.is_success() && cases[1].status.is_success());
    match &cases[2].status {
        junit_parser::TestStatus::Failure(f) => {
            assert!(f.message.contains(&format!("status_5xx was {share}, expected < 5.000%")), "{}", f.message)
        }
        other => panic!("expected a failure: {other:?}"),
    }

    // md: the verdict, each threshold and the totals.
    let md = std::fs::read_to_string(path("summary.md")).unwrap();
    assert!(md.starts_with("### volley: thresholds failed\n"), "{md}");
    assert!(md.contains("| `p99<5s` |") && md.contains("| pass |"), "{md}");
    assert!(md.contains(&format!("| `status_5xx<5%` | {share} | **FAIL** |")), "{md}");
    assert!(md.contains(&format!("| {total} | {ok} | {errors} |")), "{md}");
}

#[test]
fn junit_marks_a_run_that_lost_a_worker_as_an_error_even_when_its_thresholds_held() {
    let server = TestServer::start(Behavior::ok(14));
    let worker = WorkerProcess::start(&[]);
    let gone = format!("127.0.0.1:{}", free_port());
    let list = format!("{},{gone}", worker.address());
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("gates.xml");
    let out = run_volley(gated(
        &["p99<5s"],
        &["--workers", &list, "-n", "100", "-c", "4", "-o", &format!("junit:{}", xml.display()), &server.url()],
    ));
    assert_eq!(code(&out), Some(3), "{}", describe_output(&out));
    let suites = junit_parser::from_reader(std::io::BufReader::new(std::fs::File::open(&xml).unwrap())).unwrap();
    assert_eq!((suites.tests, suites.failures, suites.errors), (2, 0, 1));
    match &suites.suites[0].cases[0].status {
        junit_parser::TestStatus::Error(e) => assert!(e.message.contains(&gone), "{}", e.message),
        other => panic!("expected an error: {other:?}"),
    }
}
