//! End to end: responses that carry `Retry-After` are counted per status, with the largest
//! delay-seconds asked and the dates apart, over HTTP/1.1, HTTP/2 and HTTP/3, locally and across
//! real `volley worker` processes, and checked against what the server itself sent.

use crate::support;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::h3_server::{H3Options, H3TestServer};
use support::{
    Behavior, TestServer, WorkerProcess, assert_success, controller_command, describe_output, json_report, number,
    run_volley, run_within,
};

const DATE: &str = "Fri, 31 Dec 1999 23:59:59 GMT";
const REQUESTS: u64 = 700;

/// Every 7th request gets a 429 with a date, every 5th (else) a 503 asking for 30 s, every 3rd
/// (else) a 503 asking for 2 s; the rest a plain 200.
fn busy_server() -> TestServer {
    TestServer::start(
        Behavior::ok(14).retry_after_every(7, 429, DATE).retry_after_every(5, 503, "30").retry_after_every(3, 503, "2"),
    )
}

/// What the server sent, as a report must count it: responses per status, the largest
/// delay-seconds value, and how many were dates.
struct Sent {
    per_status: BTreeMap<String, u64>,
    largest: u64,
    dates: u64,
}

impl Sent {
    fn of(retry_afters_sent: &BTreeMap<(u16, String), u64>) -> Sent {
        let mut sent = Sent { per_status: BTreeMap::new(), largest: 0, dates: 0 };
        for ((status, value), &n) in retry_afters_sent {
            *sent.per_status.entry(status.to_string()).or_default() += n;
            match value.parse::<u64>() {
                Ok(seconds) => sent.largest = sent.largest.max(seconds),
                Err(_) => sent.dates += n,
            }
        }
        sent
    }

    fn total(&self) -> u64 {
        self.per_status.values().sum()
    }
}

/// The report's `retryAfter` says exactly what the server sent, and every 429 and 503 it
/// counted carried one.
fn assert_counted(report: &Value, server: &TestServer) {
    assert_eq!(server.requests(), REQUESTS, "the server saw every request");
    assert_counted_as_sent(report, &server.retry_afters_sent());
}

fn assert_counted_as_sent(report: &Value, retry_afters_sent: &BTreeMap<(u16, String), u64>) {
    let sent = Sent::of(retry_afters_sent);
    assert!(
        sent.per_status.len() == 2 && sent.dates > 0 && sent.largest == 30,
        "the server's mix: {:?}",
        sent.per_status
    );
    let retry = &report["retryAfter"];
    let counted: BTreeMap<String, u64> = retry["statusCodes"]
        .as_object()
        .unwrap_or_else(|| panic!("no retryAfter.statusCodes in {report}"))
        .iter()
        .map(|(code, n)| (code.clone(), n.as_u64().unwrap()))
        .collect();
    assert_eq!(counted, sent.per_status, "{retry}");
    assert_eq!(number(report, "/retryAfter/responses"), sent.total());
    assert_eq!(number(report, "/retryAfter/largestSeconds"), sent.largest);
    assert_eq!(number(report, "/retryAfter/dates"), sent.dates);
    for (status, n) in &sent.per_status {
        assert_eq!(number(report, &format!("/statusCodes/{status}")), *n, "status {status}");
    }
}

fn run_json(args: &[&str]) -> Value {
    let out = run_volley(args);
    assert_success(&out);
    json_report(&out)
}

#[test]
fn retry_after_over_http1_is_counted_per_status_as_the_server_sent_it() {
    let server = busy_server();
    let report = run_json(&["-n", &REQUESTS.to_string(), "-c", "4", "-t", "2", "-j", &server.url()]);
    assert_counted(&report, &server);
}

#[test]
fn retry_after_over_http2_is_counted_per_status_as_the_server_sent_it() {
    let server = busy_server();
    let report =
        run_json(&["--http2", "-p", "8", "-n", &REQUESTS.to_string(), "-c", "2", "-t", "1", "-j", &server.url()]);
    assert_eq!(report["protocol"], "HTTP/2");
    assert_counted(&report, &server);
}

#[test]
fn retry_after_over_http3_is_counted_per_status_as_the_server_sent_it() {
    let rules = [(7, 429, DATE), (5, 503, "30"), (3, 503, "2")];
    let server = H3TestServer::start(H3Options {
        retry_after_every: rules.iter().map(|&(n, status, value)| (n, status, value.to_string())).collect(),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let ca = server.cert().write_ca(dir.path());
    let report = run_json(&[
        "--http3",
        "-p",
        "8",
        "-n",
        &REQUESTS.to_string(),
        "-c",
        "2",
        "-t",
        "1",
        "--cacert",
        ca.to_str().unwrap(),
        "-j",
        &server.url(),
    ]);
    assert_eq!(report["protocol"], "HTTP/3");
    assert_eq!(server.requests(), REQUESTS, "the server answered every request");
    assert_counted_as_sent(&report, &server.retry_afters_sent());
}

#[test]
fn a_plain_server_gets_no_retry_after_line_and_zero_counts() {
    let server = TestServer::start(Behavior::ok(14).status_every(5, 503));
    let out = run_volley(["-n", "100", "-c", "2", &server.url()]);
    assert_success(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Retry-After"), "{}", describe_output(&out));
    let report = run_json(&["-n", "100", "-c", "2", "-j", &server.url()]);
    assert_eq!(number(&report, "/retryAfter/responses"), 0);
    assert_eq!(report["retryAfter"]["largestSeconds"], Value::Null);
}

fn run_with_workers(args: &[&str]) -> Output {
    run_within(controller_command(args), Duration::from_secs(60))
}

#[test]
fn retry_after_from_two_workers_adds_up_in_the_text_report_and_fails_a_threshold() {
    let server = busy_server();
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = run_with_workers(&[
        "--workers",
        &format!("{},{}", a.address(), b.address()),
        "-n",
        &REQUESTS.to_string(),
        "-c",
        "4",
        "-t",
        "1",
        "--threshold",
        "retry_after<1",
        "--threshold",
        "retry_after<=60%",
        "-o",
        &format!("json:{}", json.display()),
        &server.url(),
    ]);
    assert_eq!(out.status.code(), Some(4), "retry_after<1 fails\n{}", describe_output(&out));
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    support::assert_valid_report(&report);
    assert_counted(&report, &server);
    let sent = Sent::of(&server.retry_afters_sent());
    // Each worker's part is in its own line of the JSON, and they add up to the run's.
    let parts: u64 = report["workers"].as_array().unwrap().iter().map(|w| number(w, "/retryAfter/responses")).sum();
    assert_eq!(parts, sent.total());
    let per_status: Vec<String> = sent.per_status.iter().map(|(code, n)| format!("{code}: {n}")).collect();
    let line = format!(
        "Retry-After:  {} responses ({}), largest 30 s, {} as a date",
        sent.total(),
        per_status.join(", "),
        sent.dates
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&line), "no line '{line}' in\n{}", describe_output(&out));
    // The count fails the first threshold; its share (380 of 700) holds under the second.
    let verdicts = &report["thresholds"];
    assert_eq!(verdicts[0]["passed"], false, "{verdicts}");
    assert_eq!(verdicts[0]["measured"].as_f64(), Some(sent.total() as f64), "{verdicts}");
    assert_eq!(verdicts[1]["passed"], true, "{verdicts}");
}
