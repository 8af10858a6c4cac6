//! End to end: `--rate`, the open model. Requests are due on a schedule whatever the server
//! does; latency counts from when each was due (coordinated omission corrected) beside the
//! service time from when it was sent; the rate splits exactly over workers; the client says
//! how well it kept the schedule.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{
    Behavior, TestServer, WorkerProcess, assert_success, json_report, number, one_error_line, run_volley,
    run_volley_timeout,
};
use volley_serve::{ServeConfig, Server};

fn seconds(r: &Value, pointer: &str) -> f64 {
    r.pointer(pointer).and_then(Value::as_f64).unwrap_or_else(|| panic!("no {pointer} in {r}"))
}

/// The server stalls once, `STALL` long, `STALL_AFTER` into the run: whatever arrives then is
/// answered when it ends.
const STALL_AFTER: Duration = Duration::from_secs(2);
const STALL: Duration = Duration::from_secs(1);
const RATE: u64 = 200;
/// Few connections, so that the requests caught in the stall are well under 1% of the run's
/// and cannot reach a p99 of their own.
const CONNECTIONS: u64 = 4;

fn stalling_server() -> TestServer {
    TestServer::start(Behavior::ok(10).stall(STALL_AFTER, STALL))
}

#[test]
fn a_stall_shows_in_the_latency_from_due_but_not_in_the_service_time_or_a_closed_run() {
    let _alone = crate::one_at_a_time();
    let server = stalling_server();
    let (rate, c) = (RATE.to_string(), CONNECTIONS.to_string());
    let out = run_volley(["--rate", &rate, "-z", "5s", "-c", &c, "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    let p99 = seconds(&r, "/latencySeconds/percentiles/p99");
    let service_p99 = seconds(&r, "/serviceTimeSeconds/percentiles/p99");
    // Corrected: the requests due during the stall waited for it, up to its whole second.
    assert!(p99 >= 0.5, "latency p99 from due {p99} s hides a 1 s stall: {r}");
    // Service time: only the CONNECTIONS requests sent into the stall saw it, 4 of 1000.
    assert!(service_p99 < 0.1, "service-time p99 {service_p99} s");
    assert_eq!(number(&r, "/serviceTimeSeconds/count"), number(&r, "/requests/ok"));

    // What the stall implies: RATE requests came due during it; CONNECTIONS went out on time
    // (and were held by the server), the rest waited for a connection and went out late.
    let implied = RATE * STALL.as_secs() - CONNECTIONS;
    let (late, blocked) = (number(&r, "/schedule/late"), number(&r, "/schedule/blocked"));
    let near = |n: u64| n as f64 >= implied as f64 * 0.85 && n as f64 <= implied as f64 * 1.15;
    assert!(near(blocked), "{blocked} requests due with no connection free; the stall implies about {implied}");
    // Each of those went out late. Others may be late too on a busy machine: late is more than
    // 1 ms after due, and on these 2-core VMs 3 runs of the epoll engine in about 20 (one in
    // CI; not reproduced with two CPU hogs beside it, so likely the hypervisor's steal) sent 60
    // to 100 more late than blocked. A loop that sent the whole run late would still be
    // caught: about 1,000 late against a bound near 400.
    let sent = number(&r, "/schedule/sent");
    assert!(late as f64 >= blocked as f64 * 0.9, "{late} requests sent late, fewer than the {blocked} that waited");
    assert!(
        late <= blocked + sent / 5,
        "{late} requests sent late of {sent}, {blocked} blocked; the stall implies about {implied}: {}",
        r["schedule"]
    );
    assert_eq!(number(&r, "/schedule/unsent"), 0, "the backlog was sent before the end");
    assert_eq!(number(&r, "/schedule/requestedPerSec"), RATE);
    let blocked_seconds: u64 = r["intervals"].as_array().unwrap().iter().map(|s| number(s, "/blocked")).sum();
    assert_eq!(blocked_seconds, blocked, "the per-second counts add up");

    // The same kind of server under the closed model: the stall holds CONNECTIONS requests and
    // the client with them, so it sends nothing meanwhile and the stall vanishes from p99.
    let server = stalling_server();
    let out = run_volley(["-z", "5s", "-c", &c, "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let closed = json_report(&out);
    let closed_p99 = seconds(&closed, "/latencySeconds/percentiles/p99");
    assert!(closed_p99 < 0.1, "closed-model p99 {closed_p99} s");
    assert!(seconds(&closed, "/latencySeconds/max") >= 0.9, "the closed run did meet the stall: {closed}");
    assert_eq!(closed["schedule"], Value::Null);
    assert_eq!(number(&closed, "/serviceTimeSeconds/count"), 0);
}

#[test]
fn the_text_report_sets_latency_from_due_beside_service_time_and_the_rate_asked_beside_the_rate_achieved() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let out = run_volley(["--rate", "100", "-n", "50", "-c", "2", "-t", "1", &server.url()]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Rate:         100/s requested, ",
        "Schedule:     ",
        "Send lateness (ms):",
        "Latency (ms):   from due (corrected)   service time (from sent)",
        "  99% in ",
    ] {
        assert!(text.contains(line), "no '{line}' in\n{text}");
    }
    assert_eq!(server.requests(), 50);
}

#[test]
fn a_rate_split_over_three_workers_sends_exactly_n_and_each_worker_keeps_its_share() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    // 301 a second over 3 workers: shares of 101, 100 and 100; 903 requests in about 3 s.
    let out = run_volley(["--workers", &list, "--rate", "301", "-n", "903", "-c", "6", "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 903, "{r}");
    assert_eq!(server.requests(), 903, "the server counts exactly -n");
    assert_eq!(number(&r, "/schedule/requestedPerSec"), 301);
    let mut shares: Vec<u64> = Vec::new();
    for w in r["workers"].as_array().unwrap() {
        let asked = number(w, "/schedule/requestedPerSec");
        let achieved = seconds(w, "/schedule/achievedPerSec");
        // Each worker's budget follows its share, so each runs about 3 s at its own rate.
        assert!((achieved - asked as f64).abs() <= asked as f64 * 0.02, "worker asked {asked}/s achieved {achieved}/s");
        assert_eq!(number(w, "/requests/ok"), number(w, "/schedule/sent"));
        shares.push(asked);
    }
    shares.sort_unstable();
    assert_eq!(shares, vec![100, 100, 101], "whole shares adding up to the rate");
}

#[test]
fn the_achieved_rate_is_within_one_percent_of_the_rate_asked_for() {
    let _alone = crate::one_at_a_time();
    let server = Server::start(ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), ..ServeConfig::default() }).unwrap();
    let url = format!("http://{}/", server.local_addr());
    let out = run_volley(["--rate", "2000", "-z", "3s", "-c", "8", "-t", "2", "-j", &url]);
    assert_success(&out);
    let r = json_report(&out);
    let achieved = seconds(&r, "/schedule/achievedPerSec");
    assert!((achieved - 2000.0).abs() <= 20.0, "achieved {achieved}/s of 2000/s");
    // Every whole second sent its 2000, give or take the requests a late wake-up moved across
    // a second's edge.
    for s in r["intervals"].as_array().unwrap() {
        let sent = number(s, "/achievedRate");
        assert!(sent.abs_diff(2000) <= 20, "second {}: {sent} sent", s["second"]);
    }
    assert_eq!(number(&r, "/schedule/unsent"), 0);
    let sent = number(&r, "/schedule/sent");
    assert!(sent.abs_diff(6000) <= 2, "{sent} sent in 3 s at 2000/s");
}

/// With `--rate`, a request may wait up to a fifth of `--max-hold` past its due instant for the
/// ones due after it, to leave with them: `--max-hold 50ms` lets them wait 10 ms, and the send
/// lateness shows it; `--max-hold 0` sends each at its own instant. Either way the server sees
/// exactly `-n`.
#[test]
fn a_larger_max_hold_lets_requests_wait_for_the_next_ones_and_the_lateness_says_so() {
    let _alone = crate::one_at_a_time();
    let lateness = |max_hold: &str| {
        let server = TestServer::start(Behavior::ok(10));
        let args = ["--rate", "2000", "-n", "2000", "-c", "64", "-t", "1", "--max-hold", max_hold, "-j"];
        let out = run_volley(args.iter().copied().chain([server.url().as_str()]));
        assert_success(&out);
        let r = json_report(&out);
        assert_eq!(number(&r, "/requests/ok"), 2000, "{max_hold}: {r}");
        assert_eq!(server.requests(), 2000, "{max_hold}: the server's count");
        let p = |q: &str| seconds(&r, &format!("/schedule/latenessSeconds/percentiles/{q}"));
        (p("p50"), p("p90"))
    };
    // Due every 500 µs, bunched up to 10 ms: the median request waits about 5 ms.
    let (p50, p90) = lateness("50ms");
    assert!((0.002..0.008).contains(&p50), "--max-hold 50ms: median lateness {p50} s");
    assert!(p90 < 0.012, "--max-hold 50ms: p90 lateness {p90} s is beyond the 10 ms allowed");
    let (p50, _) = lateness("0");
    assert!(p50 < 0.001, "--max-hold 0: median lateness {p50} s");
}

#[test]
fn a_rate_that_is_zero_negative_or_not_a_number_is_a_usage_error() {
    for (rate, says) in [
        ("0", "--rate: '0' is zero"),
        ("-5", "--rate: '-5' is negative"),
        ("abc", "--rate: 'abc' is not a number"),
        ("2.5", "--rate: '2.5' is not a whole number"),
    ] {
        // Nothing listens there: a usage error comes before any connection.
        let out = run_volley_timeout(["--rate", rate, "http://127.0.0.1:9/"], Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "--rate {rate}");
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: ") && line.contains(says), "--rate {rate}: {line}");
    }
}

#[test]
fn a_rate_beyond_what_the_connections_can_carry_is_warned_about_and_the_run_still_goes() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let out = run_volley(["--rate", "50000", "-n", "200", "-c", "2", "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("volley: warning: --rate 50000 asks each of the 2 connections"), "{err}");
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 200);
    assert_eq!(server.requests(), 200);
}
