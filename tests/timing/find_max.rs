//! End to end: `volley find-max`, a capacity search, against in-test servers whose capacity is
//! known (a token bucket answering 503 beyond X requests/s; latency that grows past a knee at
//! X), locally and over two real `volley worker` processes. Each search is bounded: short steps,
//! a --max-rate and a --max-steps, and the run's own timeout.

use crate::support;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{
    BackgroundProcess, Behavior, KNEE_WINDOW, TestServer, WorkerProcess, assert_valid_find_max, describe_output,
    one_error_line, run_volley, run_volley_timeout, scenario_file, volley_command,
};

/// A scenario whose users each start an iteration (one request) every 20 ms: 50 requests/s a
/// user.
fn paced() -> String {
    support::paced_scenario("20ms")
}

/// A search's own flags for these tests: 2 s steps, bounded.
const SHORT: [&str; 6] = ["--step-duration", "2s", "--max-rate", "5000", "--max-steps", "12"];

/// `volley find-max` with [`SHORT`] steps, `pause` between them, `flags`, `-j`.
fn find_max(pause: &str, flags: &[&str], url: &str) -> Output {
    let args = [&["find-max"], &SHORT[..], &["--step-pause", pause], flags, &["-j", url]].concat();
    run_volley_timeout(args, Duration::from_secs(90))
}

/// The search's JSON, checked against schema/find-max.schema.json.
fn search_json(out: &Output) -> Value {
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e})\n{}", describe_output(out)));
    assert_valid_find_max(&doc);
    doc
}

fn capacity(doc: &Value) -> u64 {
    doc["capacityPerSec"].as_u64().unwrap_or_else(|| panic!("no capacity in {doc:#}"))
}

/// The steps as (rate, verdict), for assertions.
fn steps(doc: &Value) -> Vec<(u64, String)> {
    doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| (s["requestedPerSec"].as_u64().unwrap(), s["verdict"].as_str().unwrap().to_string()))
        .collect()
}

/// The steps as `rate: verdict (what failed)` lines, for assertion messages.
fn table(doc: &Value) -> String {
    let rows = doc["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| format!("{}/s: {} {}", s["requestedPerSec"], s["verdict"], s["failed"]));
    rows.collect::<Vec<_>>().join("\n")
}

fn within_ten_percent(found: u64, x: u64) -> bool {
    (found as f64 - x as f64).abs() <= 0.10 * x as f64
}

#[test]
fn find_max_lands_within_ten_percent_of_a_rate_limit_that_answers_503_beyond_it() {
    const X: u64 = 640;
    let server = TestServer::start(Behavior::ok(10).rate_limit(X));
    let _alone = crate::one_at_a_time();
    let out = find_max(
        "500ms",
        // The latency SLO is loose: a busy test machine stalls a request now and then.
        &["--slo", "status_5xx<1%", "--slo", "p99<200ms", "--start", "100", "-c", "16"],
        &server.url(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let doc = search_json(&out);
    let found = capacity(&doc);
    assert!(within_ten_percent(found, X), "found {found}/s for a limit of {X}/s:\n{}", table(&doc));
    assert_eq!(doc["outcome"], "found");
    // The server did turn requests away on the steps above its limit, and the failed steps say
    // which SLO failed.
    assert!(server.rate_limited() > 0);
    let failed: Vec<&Value> = doc["steps"].as_array().unwrap().iter().filter(|s| s["verdict"] == "fail").collect();
    assert!(!failed.is_empty(), "{doc:#}");
    for step in failed {
        let why = step["failed"].as_array().unwrap();
        assert!(why.iter().any(|w| w.as_str().unwrap().starts_with("status_5xx<1%")), "{step:#}");
        assert!(step["requestedPerSec"].as_u64().unwrap() > found);
    }
}

#[test]
fn find_max_lands_within_ten_percent_of_a_latency_knee_with_a_p99_slo() {
    const X: u64 = 400;
    // 10% above the knee waits 1 s, 2% above it 200 ms: steep, so that the SLO can sit well
    // above the stalls of a busy test machine (tens of ms) and still place the knee within 2%.
    let server = TestServer::start(Behavior::ok(10).knee(X, Duration::from_secs(10)));
    let _alone = crate::one_at_a_time();
    // Steps apart by the server's window, so that each is measured on its own.
    let pause = format!("{}ms", KNEE_WINDOW.as_millis());
    let out = find_max(&pause, &["--slo", "p99<200ms", "--start", "60", "-c", "32"], &server.url());
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let doc = search_json(&out);
    let found = capacity(&doc);
    assert!(within_ten_percent(found, X), "found {found}/s for a knee at {X}/s:\n{}", table(&doc));
    // Below the knee, steps held their cadence and every request was answered.
    for step in doc["steps"].as_array().unwrap().iter().filter(|s| s["verdict"] == "pass") {
        assert!(step["cadence"].as_f64().unwrap() >= 0.99, "{step:#}");
        assert_eq!(step["requests"]["errors"], 0, "{step:#}");
    }
}

#[test]
fn find_max_across_two_workers_lands_within_ten_percent_of_a_rate_limit() {
    const X: u64 = 500;
    let server = TestServer::start(Behavior::ok(10).rate_limit(X));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let _alone = crate::one_at_a_time();
    let out = find_max(
        "500ms",
        &["--workers", &list, "--slo", "status_5xx<1%", "--start", "80", "-c", "16", "-t", "1"],
        &server.url(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let doc = search_json(&out);
    let found = capacity(&doc);
    assert!(within_ten_percent(found, X), "found {found}/s for a limit of {X}/s:\n{}", table(&doc));
    assert_eq!(doc["workers"], 2);
}

#[test]
fn with_a_paced_scenario_find_max_counts_the_users_a_rate_limit_serves_on_cadence() {
    // 10 users make 500 requests/s, under the server's 520; 11 make 550, over it.
    let server = TestServer::start(Behavior::ok(10).rate_limit(520));
    let (_dir, file) = scenario_file("paced.toml", server.url().trim_end_matches('/'), &paced());
    let _alone = crate::one_at_a_time();
    let args = [
        "find-max",
        "--slo",
        "status_5xx<1%",
        "--start",
        "2",
        "--max-users",
        "64",
        "--step-duration",
        "2s",
        "--max-steps",
        "12",
        "--step-pause",
        "500ms",
        "-j",
        "--scenario",
        &file,
    ];
    let out = run_volley_timeout(args, Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let doc = search_json(&out);
    assert_eq!((doc["searched"].as_str(), doc["outcome"].as_str()), (Some("users"), Some("found")), "{doc:#}");
    let users = |s: &Value| s["users"].as_u64().expect("a step's users");
    let rows: Vec<String> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("{}: {} {}", users(s), s["verdict"], s["failed"]))
        .collect();
    let found = doc["capacityUsers"].as_u64().unwrap_or_else(|| panic!("no capacity in {doc:#}"));
    assert!((9..=10).contains(&found), "found {found} users for a limit of 10.4:\n{}", rows.join("\n"));
    assert!(server.rate_limited() > 0, "the steps above it were turned away");
    for step in doc["steps"].as_array().unwrap() {
        let count = |field: &str| step["iterations"][field].as_u64().unwrap_or_else(|| panic!("{field}: {step:#}"));
        let (started, missed) = (count("started"), count("missed"));
        // Each user starts an iteration every 20 ms: 100 in a 2 s step, give or take one.
        let expected = users(step) * 100;
        assert!(started.abs_diff(expected) <= users(step), "{} users started {started}: {step:#}", users(step));
        if step["verdict"] == "pass" {
            assert!(missed * 99 <= started, "{step:#}");
        } else {
            assert!(users(step) > found, "{step:#}");
            let why = step["failed"].as_array().unwrap();
            assert!(why.iter().any(|w| w.as_str().unwrap().starts_with("status_5xx<1%")), "{step:#}");
        }
    }
}

#[test]
fn paced_users_a_slow_server_keeps_behind_their_slots_fail_the_first_step_on_cadence() {
    // An answer takes 30 ms, a user's slots come every 20 ms: each user starts two iterations
    // where three came due, and a third of its slots are missed by the step's end.
    let server = TestServer::start(Behavior::ok(10).delay(Duration::from_millis(30)));
    let (_dir, file) = scenario_file("paced.toml", server.url().trim_end_matches('/'), &paced());
    let _alone = crate::one_at_a_time();
    let args = ["find-max", "--slo", "p99<10s", "--start", "2", "--step-duration", "1s", "--scenario", &file];
    let out = run_volley_timeout(args, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(5), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(line.starts_with("volley: error: no capacity found: the first step, 2 users, failed: cadence "), "{line}");
    assert!(line.contains("% of the slots due (below 99%: "), "{line}");
    let kept = line.split("cadence ").nth(1).and_then(|l| l.split('%').next()).unwrap_or_default();
    let kept: f64 = kept.parse().unwrap_or_else(|_| panic!("{line}"));
    assert!((55.0..=80.0).contains(&kept), "about two thirds of the slots: {line}");
    let text = String::from_utf8_lossy(&out.stdout);
    for wanted in [
        "paced users)",
        "and the cadence (99% of the slots due or more started, latency counted from the slot)",
        "doubling from 2 users up to 10000 users",
        " step      users  iterations/s       kept ",
        "No capacity:  even the first step, 2 users, failed; try a lower --start, or a longer pacing",
    ] {
        assert!(text.contains(wanted), "no '{wanted}' in\n{text}");
    }
}

#[test]
fn the_text_report_has_the_table_of_steps_and_the_capacity_and_o_json_writes_the_search() {
    let server = TestServer::start(Behavior::ok(10).rate_limit(250));
    let args =
        ["find-max", "--slo", "errors<0.1%", "--slo", "status_5xx<1%", "--start", "100", "--step-duration", "1s"];
    let url = server.url();
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("search.json");
    let json = format!("json:{}", file.display());
    let args = [&args[..], &["--step-pause", "0", "--precision", "50%", "-c", "8", "-o", &json, &url]].concat();
    let _alone = crate::one_at_a_time();
    let out = run_volley(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    // -o json:FILE writes the search as -j prints it, beside the text.
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("-o json:FILE")).expect("JSON");
    assert_valid_find_max(&doc);
    assert_eq!((doc["capacityPerSec"].as_u64(), doc["firstFailedPerSec"].as_u64()), (Some(200), Some(300)));
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "Capacity search: http://127.0.0.1:",
        "SLOs:         errors<0.1%, status_5xx<1%, and the cadence (requests sent at 99% of the rate or more)",
        " step     rate/s  achieved/s     p50 ms     p99 ms    errors       5xx  verdict",
        "FAIL  status_5xx<1% (measured ",
        "Capacity:     200 requests/s held every SLO and the cadence; 300/s did not (50.0% above, within the 50% asked)",
    ] {
        assert!(text.contains(line), "no '{line}' in\n{text}");
    }
    // 100 and 200 held, 400 failed, then 300 failed too, which is within the 50% asked.
    let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with(char::is_numeric)).collect();
    assert_eq!(rows.len(), 4, "{text}");
}

#[test]
fn a_first_step_that_fails_exits_5_with_the_table_and_one_line_saying_why() {
    let server = TestServer::start(Behavior::ok(10).rate_limit(50));
    let _alone = crate::one_at_a_time();
    let out = find_max("500ms", &["--slo", "status_5xx<1%", "--start", "200", "-c", "4"], &server.url());
    assert_eq!(out.status.code(), Some(5), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(
        line.starts_with(
            "volley: error: no capacity found: the first step, 200 requests/s, failed: status_5xx<1% (measured "
        ),
        "{line}"
    );
    let doc = search_json(&out);
    assert_eq!(doc["outcome"], "firstStepFailed");
    assert_eq!(doc["capacityPerSec"], Value::Null);
    assert_eq!(steps(&doc), vec![(200, "fail".to_string())]);
}

#[test]
fn ctrl_c_stops_the_search_and_prints_what_it_found_so_far() {
    let server = TestServer::start(Behavior::ok(10));
    let mut cmd = volley_command([
        "find-max",
        "--slo",
        "p99<1s",
        "--start",
        "50",
        "--step-duration",
        "1s",
        "--step-pause",
        "500ms",
        "-c",
        "4",
        "-j",
        &server.url(),
    ]);
    cmd.env_remove("VOLLEY_TOKEN");
    let _alone = crate::one_at_a_time();
    let mut search = BackgroundProcess::spawn(cmd);
    // Step 1 takes about a second, the pause half of one: by 3.5 s a later step is under way.
    std::thread::sleep(Duration::from_millis(3500));
    search.signal(libc::SIGINT);
    let out = search.wait(Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(130), "{}", describe_output(&out));
    let doc = search_json(&out);
    assert_eq!(doc["outcome"], "interrupted");
    assert!(capacity(&doc) >= 50, "{doc:#}");
    let last = doc["steps"].as_array().unwrap().last().cloned().unwrap();
    assert!(last["verdict"] == "interrupted" || last["verdict"] == "pass", "{last:#}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("interrupted"), "{}", describe_output(&out));
}

#[test]
fn bad_search_flags_are_usage_errors_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--slo", "p99<20"], "--slo 'p99<20': '20' needs a unit"),
        (&["--slo", "p99"], "--slo 'p99': expected METRIC<VALUE"),
        (&["--start", "100"], "find-max needs at least one --slo"),
        (&["--slo", "p99<20ms", "--start", "0"], "--start: '0' is zero"),
        (&["--slo", "p99<20ms", "--start", "1000", "--max-rate", "500"], "--max-rate (500) is below --start (1000)"),
        (&["--slo", "p99<20ms", "--step-duration", "fast"], "--step-duration: invalid duration 'fast'"),
        (&["--slo", "p99<20ms", "--step-duration", "0s"], "--step-duration: duration must be more than zero"),
        (&["--slo", "p99<20ms", "--step-duration", "100ms"], "--step-duration: '100ms' is shorter than 1s"),
        (&["--slo", "p99<20ms", "--precision", "0"], "--precision: '0' must be above 0%"),
        (&["--slo", "p99<20ms", "--max-steps", "0"], "--max-steps: '0' is zero"),
        (&["--slo", "p99<20ms", "--rate", "100"], "find-max: --rate does not apply"),
        (&["--slo", "p99<20ms", "-n", "100"], "find-max: -n/--requests does not apply"),
        (&["--slo", "p99<20ms", "-o", "csv:x.csv"], "find-max writes only json:FILE"),
    ];
    // Nothing listens there: a usage error comes before any connection.
    let (_dir, paced_file) = scenario_file("paced.toml", "http://127.0.0.1:9", &paced());
    let paced_cases: &[(&[&str], &str)] = &[
        (&["--slo", "p99<20ms", "-c", "4"], "find-max: -c/--connections does not apply: with a paced scenario"),
        (
            &["--slo", "p99<20ms", "--max-rate", "100"],
            "--max-rate does not apply: a paced scenario's search counts users",
        ),
        (&["--slo", "p99<20ms", "--start", "0"], "--start: '0' is zero: give at least 1 user"),
        (&["--slo", "p99<20ms", "--start", "1.5"], "--start: '1.5' is not a whole number of users"),
        (&["--slo", "p99<20ms", "--start", "10", "--max-users", "5"], "--max-users (5) is below --start (10)"),
    ];
    let unpaced = [&["--slo", "p99<20ms", "--max-users", "10"][..], &["http://127.0.0.1:9/"]].concat();
    let plain = cases.iter().map(|(flags, says)| ([*flags, &["http://127.0.0.1:9/"][..]].concat(), *says));
    let scenario = paced_cases.iter().map(|(flags, says)| ([*flags, &["--scenario", &paced_file][..]].concat(), *says));
    let rate = std::iter::once((unpaced, "--max-users is for a paced scenario"));
    for (flags, says) in plain.chain(scenario).chain(rate) {
        let out = run_volley_timeout([&["find-max"][..], &flags].concat(), Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{flags:?}\n{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: ") && line.contains(says), "{flags:?}: {line}");
    }
}
