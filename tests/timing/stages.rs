//! End to end: `--stages` (a rate that ramps, stage by stage, or without `--rate` the number of
//! open connections) and `--warm-up` (the first seconds counted apart), against the in-test
//! server, which counts what it received and when and logs its open connections, locally and
//! over two real workers.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    Behavior, TestServer, WorkerProcess, assert_success, json_report, number, one_error_line, run_volley,
    run_volley_timeout,
};

fn seconds(r: &Value, pointer: &str) -> f64 {
    r.pointer(pointer).and_then(Value::as_f64).unwrap_or_else(|| panic!("no {pointer} in {r}"))
}

fn intervals(r: &Value) -> &Vec<Value> {
    r["intervals"].as_array().unwrap_or_else(|| panic!("no intervals in {r}"))
}

/// What the server received in each second from `start`.
fn per_second(arrivals: &[Instant], start: Instant, seconds: usize) -> Vec<u64> {
    let mut counts = vec![0u64; seconds + 1];
    for at in arrivals {
        let i = at.saturating_duration_since(start).as_secs() as usize;
        counts[i.min(seconds)] += 1;
    }
    counts
}

#[test]
fn the_rate_follows_the_stages_second_by_second_and_the_total_is_exact() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    // From 0 up to 200/s, up to 600/s, down to 0, a second each: 100, 400 and 300 requests.
    let out = run_volley(["--rate", "0", "--stages", "1s:200,1s:600,1s:0", "-c", "8", "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    let duration = seconds(&r, "/durationSeconds");
    assert!((2.9..3.3).contains(&duration), "the run lasts the stages' sum: {duration} s");
    assert_eq!(number(&r, "/requests/ok"), 800, "{r}");
    assert_eq!(number(&r, "/requests/aborted"), 0, "the last request is due before the end");
    assert_eq!(server.requests(), 800, "the server counts the stages' total exactly");
    assert_eq!(number(&r, "/schedule/unsent"), 0);
    let series = intervals(&r);
    assert_eq!(series.len(), 3, "{r}");
    for (i, (want, stage)) in [(100u64, 1u64), (400, 2), (300, 3)].into_iter().enumerate() {
        let s = &series[i];
        assert_eq!(number(s, "/stage"), stage);
        assert_eq!(number(s, "/requestedRate"), want, "second {}", i + 1);
        let sent = number(s, "/achievedRate");
        assert!(sent.abs_diff(want) <= 10, "second {}: {sent} sent of {want} asked", i + 1);
        assert_eq!(s["warmUp"], Value::Bool(false));
    }
    // The server's own clock: the ramp from 0 puts the first request 71 ms in (100·t² = ½).
    let arrivals = server.arrivals();
    let start = arrivals[0] - Duration::from_micros(70_711);
    let got = per_second(&arrivals, start, 3);
    for (i, want) in [100u64, 400, 300].into_iter().enumerate() {
        assert!(got[i].abs_diff(want) <= 10, "second {}: the server saw {} of {want}: {got:?}", i + 1, got[i]);
    }
    assert_eq!(got[3], 0, "nothing after the last stage: {got:?}");
}

/// The ramp of the connection tests, 0 → 8 over 1 s, 8 for 1 s, 8 → 0 over 1 s: connection j
/// opens at (j + ½)/8 s and closes (7 − j + ½)/8 s into the last stage, each once.
const CONNECTION_RAMP: &str = "1s:8,1s:8,1s:0";

/// The server's own log of open connections follows [`CONNECTION_RAMP`], and the run lost
/// nothing: every request the server saw was answered and counted, none aborted.
fn assert_open_connections_follow_the_ramp(server: &TestServer, r: &Value, what: &str) {
    let (peak, first) = server.open_connections_peak();
    assert_eq!(peak, 8, "{what}: at most -c open, and all of them in the flat stage");
    assert_eq!(server.connections(), 8, "{what}: each connection opened once, and kept open until the ramp closed it");
    // The first connection opens half a connection's worth in: 62.5 ms after the start.
    let start = first.expect("connections were made") - Duration::from_micros(62_500);
    // Sampled where the ramp is a whole number, 62.5 ms from any change (the count is the
    // ramp rounded): on a busy two-core machine an accept or a close may reach the server's
    // log late, and the start is estimated from the first accept, so one connection either
    // way is allowed at a sample, as long as the ramp is followed from sample to sample.
    let mut off = 0;
    for k in 1..24u64 {
        let at = Duration::from_millis(k * 125);
        let want = match k {
            0..=8 => k as i64,
            9..=16 => 8,
            _ => 24 - k as i64,
        };
        let open = server.open_connections_at(start + at);
        assert!(open.abs_diff(want) <= 1, "{what}: {open} open at {at:?}, the ramp has {want}");
        off += u32::from(open != want);
    }
    assert!(off <= 4, "{what}: {off} of 23 samples off by one");
    assert_eq!(server.open_connections_at(start + Duration::from_millis(3100)), 0, "{what}: all closed at the end");
    assert_eq!(number(r, "/requests/aborted"), 0, "{what}: a connection the ramp closes finishes its requests");
    assert_eq!(number(r, "/requests/errors"), 0, "{what}: {r}");
    assert_eq!(server.requests(), number(r, "/requests/ok"), "{what}: every request the server saw is counted");
    let duration = seconds(r, "/durationSeconds");
    assert!((2.9..3.3).contains(&duration), "{what}: the run lasts the stages' sum: {duration} s");
    let series = intervals(r);
    let stages: Vec<u64> = series.iter().map(|s| number(s, "/stage")).collect();
    let targets: Vec<u64> = series.iter().map(|s| number(s, "/targetConnections")).collect();
    assert_eq!((stages, targets), (vec![1, 2, 3], vec![8, 8, 0]), "{what}: {r}");
    assert!(series.iter().all(|s| s.get("requestedRate").is_none()), "a closed-model ramp asks for no rate");
}

#[test]
fn without_a_rate_the_stages_ramp_the_open_connections_and_no_request_is_lost() {
    let _alone = crate::one_at_a_time();
    // Each response takes 20 ms, so a connection the ramp closes has a request in flight; over
    // HTTP/2 four of them (a connection retiring finishes its streams and starts none).
    for protocol in [&[][..], &["--http2", "-p", "4"][..]] {
        let server = TestServer::start(Behavior::ok(10).delay(Duration::from_millis(20)));
        let url = server.url();
        let mut args = vec!["--stages", CONNECTION_RAMP, "-t", "2", "-j"];
        args.extend(protocol);
        args.push(&url);
        let out = run_volley(args);
        assert_success(&out);
        let r = json_report(&out);
        assert_open_connections_follow_the_ramp(&server, &r, &format!("{protocol:?}"));
        assert_eq!(number(&r, "/connections"), 8, "-c defaults to the largest stage");
        let ok = number(&r, "/requests/ok");
        // 8 connections × 2 s of open time in all, at most 50 requests a second each (× 4 streams).
        let most = 8 * 2 * 50 * if protocol.is_empty() { 1 } else { 4 };
        assert!(ok > most / 2 && ok <= most, "{protocol:?}: {ok} requests, at most {most}");
    }
    let server = TestServer::start(Behavior::ok(10));
    let text = run_volley(["--stages", "1s:2,500ms:0", "-c", "4", &server.url()]);
    assert_success(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Connections:  4\nStages:       connections 0→2 in 1s, 2→0 in 500ms\n"), "{text}");
}

#[test]
fn two_workers_ramp_their_own_connections_and_together_follow_the_whole_ramp() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10).delay(Duration::from_millis(20)));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let out = run_volley(["--workers", &list, "--stages", CONNECTION_RAMP, "-c", "8", "-t", "2", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    assert_open_connections_follow_the_ramp(&server, &r, "two workers");
    // Each worker's own seconds: its half of the ramp (connections 0, 2, 4, 6 and 1, 3, 5, 7).
    for w in r["workers"].as_array().expect("workers") {
        let targets: Vec<u64> = intervals(w).iter().map(|s| number(s, "/targetConnections")).collect();
        assert_eq!(targets, vec![4, 4, 0], "{w}");
    }
}

#[test]
fn a_timed_warm_up_is_counted_apart_and_the_two_add_up_to_what_the_server_saw() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let out = run_volley(["-z", "3s", "--warm-up", "1s", "-c", "4", "-t", "1", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    let (ok, aborted, errors) =
        (number(&r, "/requests/ok"), number(&r, "/requests/aborted"), number(&r, "/requests/errors"));
    let (warm_ok, warm_total) = (number(&r, "/warmUp/requests/ok"), number(&r, "/warmUp/requests/total"));
    assert_eq!((errors, warm_total - warm_ok), (0, 0), "{r}");
    assert!(warm_ok > 100 && ok > 2 * 100, "both parts did work: {warm_ok} and {ok}");
    let seen = server.requests();
    assert!(
        ok + warm_ok <= seen && seen <= ok + warm_ok + aborted,
        "server saw {seen}; measured {ok} + warm-up {warm_ok} (+ {aborted} aborted)"
    );
    assert_eq!(number(&r, "/warmUp/seconds"), 1);
    // The measurement is the two seconds after the warm-up: its numbers, its time, its rate.
    let duration = seconds(&r, "/durationSeconds");
    assert!((1.9..2.3).contains(&duration), "measured for {duration} s");
    let rps = seconds(&r, "/requestsPerSec");
    assert!((rps - ok as f64 / duration).abs() < 1.0, "{rps} requests/s for {ok} in {duration} s");
    assert_eq!(number(&r, "/latencySeconds/count"), ok);
    assert_eq!(number(&r, "/warmUp/latencySeconds/count"), warm_ok);
    // Connections opened before the start belong to the warm-up.
    assert_eq!(number(&r, "/warmUp/connectionsMade"), 4);
    let marks: Vec<bool> = intervals(&r).iter().map(|s| s["warmUp"].as_bool().expect("marked")).collect();
    assert_eq!(marks, vec![true, false, false]);
    let series_ok: u64 = intervals(&r).iter().skip(1).map(|s| number(s, "/ok")).sum();
    assert!(series_ok <= ok, "the measured seconds' {series_ok} are in the total {ok}");
    assert_eq!(number(&r, "/intervals/0/ok"), warm_ok);
    let text = run_volley(["-z", "2s", "--warm-up", "1s", "-c", "2", "-t", "1", &server.url()]);
    assert_success(&text);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Warm-up:      first 1 s: "), "{text}");
}

#[test]
fn with_n_the_warm_up_comes_first_and_n_counts_exactly_the_requests_after_it() {
    let _alone = crate::one_at_a_time();
    for rate in [None, Some("200")] {
        let server = TestServer::start(Behavior::ok(10));
        let mut args = vec!["-n", "300", "--warm-up", "1s", "-c", "4", "-t", "2", "-j"];
        if let Some(rate) = rate {
            args.extend(["--rate", rate]);
        }
        let url = server.url();
        args.push(&url);
        let out = run_volley(args);
        assert_success(&out);
        let r = json_report(&out);
        assert_eq!(number(&r, "/requests/total"), 300, "rate {rate:?}: {r}");
        assert_eq!(number(&r, "/requests/aborted"), 0);
        let warm = number(&r, "/warmUp/requests/total");
        assert!(warm > 50, "rate {rate:?}: the warm-up sent {warm}");
        assert_eq!(server.requests(), 300 + warm, "rate {rate:?}: the server saw the warm-up and exactly -n after it");
        if rate.is_some() {
            // 200 a second: about 1.5 s for 300 after the warm-up, 200 in it.
            assert!(warm.abs_diff(200) <= 5, "{warm} in a 1 s warm-up at 200/s");
            let duration = seconds(&r, "/durationSeconds");
            assert!((1.3..1.8).contains(&duration), "300 at 200/s measured over {duration} s");
        }
    }
}

#[test]
fn two_workers_switch_from_warm_up_together_and_their_counts_add_up_to_the_servers() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    // Up to 200/s in the first second (the warm-up: 100), up to 400/s in the next (300), down
    // to 0 in the last (200).
    let out = run_volley([
        "--workers",
        &list,
        "--rate",
        "0",
        "--stages",
        "1s:200,1s:400,1s:0",
        "--warm-up",
        "1s",
        "-c",
        "4",
        "-t",
        "1",
        "-j",
        &server.url(),
    ]);
    assert_success(&out);
    let r = json_report(&out);
    let (ok, aborted, warm_ok) =
        (number(&r, "/requests/ok"), number(&r, "/requests/aborted"), number(&r, "/warmUp/requests/ok"));
    let seen = server.requests();
    assert!(ok + warm_ok <= seen && seen <= ok + warm_ok + aborted, "server {seen}, {ok} + {warm_ok} (+ {aborted})");
    assert_eq!(seen, 600, "each worker's share of each stage adds up to the whole");
    assert!(warm_ok.abs_diff(100) <= 5, "{warm_ok} in the warm-up, the first second's 100");
    let series = intervals(&r);
    assert_eq!(series.len(), 3, "{r}");
    let marks: Vec<Option<bool>> = series.iter().map(|s| s["warmUp"].as_bool()).collect();
    assert_eq!(marks, vec![Some(true), Some(false), Some(false)]);
    let stages: Vec<u64> = series.iter().map(|s| number(s, "/stage")).collect();
    assert_eq!(stages, vec![1, 2, 3]);
    let requested: Vec<u64> = series.iter().map(|s| number(s, "/requestedRate")).collect();
    assert_eq!(requested, vec![100, 300, 200]);
    for s in &series[1..] {
        let (sent, asked) = (number(s, "/achievedRate"), number(s, "/requestedRate"));
        assert!(sent.abs_diff(asked) <= 10, "second {}: {sent} sent of {asked}", s["second"]);
    }
    // Each worker reports only its measured part, and they add up to the report's.
    let workers_ok: u64 = r["workers"].as_array().unwrap().iter().map(|w| number(w, "/requests/ok")).sum();
    assert_eq!(workers_ok, ok);
    // The rate asked for over the measured two seconds: 500 requests, 250 a second.
    assert_eq!(number(&r, "/schedule/requestedPerSec"), 250);
}

#[test]
fn malformed_stages_and_warm_ups_are_usage_errors_in_one_line() {
    let many = vec!["1s:1"; 101].join(",");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--rate", "10", "--stages", "30s"], "--stages: stage 1 '30s' is not DURATION:RATE"),
        (vec!["--rate", "10", "--stages", "x:1"], "invalid duration 'x'"),
        (vec!["--rate", "10", "--stages", "30s:-1"], "the rate is negative"),
        (vec!["--rate", "10", "--stages", ""], "--stages: the list is empty"),
        (vec!["--rate", "10", "--stages", "0s:100"], "duration must be more than zero"),
        (vec!["--rate", "10", "--stages", &many], "--stages: 101 stages is more than the 100 a run may have"),
        (vec!["--rate", "0", "--stages", "1s:0"], "every rate is 0"),
        (vec!["--stages", "1s:10,1s:20,1s:5", "-c", "15"], "stage 2 ramps to 20 connections, more than -c 15"),
        (vec!["--stages", "1s:0,2s:0"], "--stages: every connection count is 0"),
        (vec!["--stages", "1s:-3"], "the connection count is negative; give connections"),
        (vec!["--stages", "1s:2.5"], "'2.5' is not a whole number of connections"),
        (
            vec!["--stages", "1s:1000001"],
            "--stages: a stage of 1000001 connections is more than the 1000000 a run may have",
        ),
        (vec!["--stages", "1s:10", "-z", "5s"], "cannot be used with"),
        (vec!["--stages", "1s:4", "--warm-up", "1s"], "is not shorter than the run"),
        (vec!["--rate", "10", "--stages", "1s:10", "-z", "5s"], "cannot be used with"),
        (vec!["--rate", "10", "--stages", "1s:10", "-n", "5"], "cannot be used with"),
        (vec!["--rate", "0", "-z", "1s"], "--rate: '0' is zero"),
        (vec!["-z", "3s", "--warm-up", "-1s"], "--warm-up: '-1s' is negative"),
        (vec!["-z", "3s", "--warm-up", "0"], "--warm-up: '0' is zero"),
        (vec!["-z", "3s", "--warm-up", "1500ms"], "is not a whole number of seconds"),
        (vec!["-z", "2s", "--warm-up", "2s"], "is not shorter than the run"),
        (vec!["-z", "2s", "--warm-up", "5s"], "is not shorter than the run"),
        (vec!["--rate", "10", "--stages", "1s:10,1s:10", "--warm-up", "2s"], "is not shorter than the run"),
        (vec!["-n", "10", "-c", "20", "--warm-up", "1s"], "give -n of at least 20"),
    ];
    for (args, says) in cases {
        // Nothing listens there: a usage error comes before any connection.
        let mut all = args.clone();
        all.push("http://127.0.0.1:9/");
        let out = run_volley_timeout(all, Duration::from_secs(10));
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let line = one_error_line(&out);
        assert!(line.starts_with("volley: error: ") && line.contains(says), "{args:?}: {line}");
    }
}

#[test]
fn merging_saved_reports_merges_their_warm_ups_apart_from_their_measurements() {
    let _alone = crate::one_at_a_time();
    let server = TestServer::start(Behavior::ok(10));
    let dir = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    let mut paths = Vec::new();
    for name in ["a.json", "b.json"] {
        let out = run_volley(["-n", "200", "--warm-up", "1s", "-c", "2", "-t", "1", "-j", &server.url()]);
        assert_success(&out);
        let path = dir.path().join(name);
        std::fs::write(&path, &out.stdout).unwrap();
        reports.push(json_report(&out));
        paths.push(path);
    }
    let out = run_volley(["merge".as_ref(), "-j".as_ref(), paths[0].as_os_str(), paths[1].as_os_str()]);
    assert_success(&out);
    let merged = json_report(&out);
    let sum = |pointer: &str| reports.iter().map(|r| number(r, pointer)).sum::<u64>();
    assert_eq!(number(&merged, "/requests/ok"), 400, "{merged}");
    let warm_ok = sum("/warmUp/requests/ok");
    assert!(warm_ok > 0, "the warm-ups sent nothing: {reports:?}");
    for pointer in [
        "/warmUp/requests/ok",
        "/warmUp/requests/total",
        "/warmUp/statusCodes/200",
        "/warmUp/connectionsMade",
        "/warmUp/latencySeconds/count",
    ] {
        assert_eq!(number(&merged, pointer), sum(pointer), "{pointer}: {merged}");
    }
    assert_eq!(number(&merged, "/warmUp/seconds"), 1);
    // The merged histogram is the two added sample for sample: its extremes are theirs.
    let lowest = reports.iter().map(|r| seconds(r, "/warmUp/latencySeconds/min")).fold(f64::MAX, f64::min);
    let highest = reports.iter().map(|r| seconds(r, "/warmUp/latencySeconds/max")).fold(0.0, f64::max);
    assert_eq!(seconds(&merged, "/warmUp/latencySeconds/min"), lowest);
    assert_eq!(seconds(&merged, "/warmUp/latencySeconds/max"), highest);
    // The measurement's numbers are not the warm-up's.
    assert_eq!(number(&merged, "/latencySeconds/count"), 400);
}
