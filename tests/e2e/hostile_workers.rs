//! End to end: the real `volley` controller against workers that are broken or hostile, played
//! by a fake worker speaking the real gRPC protocol (tests/support/fake_worker.rs), sometimes
//! beside real `volley worker` processes. Nothing a worker says may crash the controller, hang
//! it, exhaust its memory, forge its report or drive the terminal it prints to.

use crate::support;

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::Value;
use support::fake_worker::{
    FakeWorker, Script, Step, encode, failed, finished, finished_with, hello, histogram_bomb, interval, opening, send,
    stats, volley_histogram,
};
use support::{
    BackgroundProcess, Behavior, TestServer, WorkerProcess, assert_success, controller_command, describe_output,
    json_report, run_with_peak_rss, run_within, send_signal, wait_until,
};
use volley_proto::v1;

/// How long any controller run of these tests may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(40);
/// Runs whose worker is fake load nothing; the URL only has to be valid.
const NOWHERE: &str = "http://127.0.0.1:9/";
/// What the histogram bombs declare: 256 MiB, which the controller once allocated for them.
const BOMB_BYTES: u32 = 256 << 20;
/// The controller's peak memory in these runs stays below this (it is about 20 MB).
const PEAK_LIMIT_KIB: u64 = 100 * 1024;

/// `volley ARGS` as a controller, with no token from the test's own environment.
fn controller(args: &[&str]) -> Command {
    controller_command(args)
}

fn run(cmd: Command) -> Output {
    run_within(cmd, RUN_TIMEOUT)
}

/// The one line a failed command prints on stderr, free of anything a terminal would act on;
/// panics unless there is exactly one.
fn one_clean_error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "panic:\n{}", describe_output(out));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr\n{}", describe_output(out));
    assert!(lines[0].starts_with("volley: error: "), "{}", describe_output(out));
    assert_no_terminal_controls(lines[0], "stderr");
    lines[0].to_string()
}

fn assert_no_terminal_controls(text: &str, what: &str) {
    if let Some(c) = text.chars().find(|c| c.is_control() && *c != '\n') {
        panic!("{what} holds the control character {c:?}:\n{}", text.escape_debug());
    }
}

fn failure(worker: &Value) -> &str {
    worker["failure"].as_str().unwrap_or_else(|| panic!("the worker has no failure: {worker}"))
}

/// Statistics of `ok` responses whose latencies are spread over the whole histogram, so that
/// decoding them touches every page of its counts, as a real worker's busy second does.
fn spread_stats(ok: u64) -> v1::Stats {
    let mut latency = volley_histogram();
    let values: Vec<u64> = volley_histogram().iter_all().map(|v| v.value_iterated_to()).collect();
    let step = values.len() / ok as usize;
    for v in values.iter().step_by(step).take(ok as usize) {
        latency.record(*v).expect("in range");
    }
    v1::Stats { latency: encode(&latency), ..stats(ok, 0) }
}

// ---------------------------------------------------------------------------------------------
// Histogram bombs
// ---------------------------------------------------------------------------------------------

#[test]
fn a_histogram_bomb_in_a_workers_report_is_refused_without_the_memory_it_declares() {
    for place in ["interval", "finished"] {
        let fake = FakeWorker::start(Script::run(move |shard| {
            let bomb = v1::Stats { latency: histogram_bomb(BOMB_BYTES), ..stats(1, 0) };
            let mut steps = opening(shard);
            steps.push(if place == "interval" { interval(1, bomb) } else { finished(shard, bomb, 1) });
            steps.push(Step::Hold);
            steps
        }));
        let cmd = controller(&["--workers", &fake.address(), "-n", "20", "-c", "1", NOWHERE]);
        let (out, peak_kib) = run_with_peak_rss(cmd, RUN_TIMEOUT);
        assert!(peak_kib < PEAK_LIMIT_KIB, "{place}: the controller's memory peaked at {} MB", peak_kib / 1024);
        assert_eq!(out.status.code(), Some(1), "{place}: {}", describe_output(&out));
        let line = one_clean_error_line(&out);
        assert!(line.contains(&fake.address()), "{place}: the worker is not named: {line}");
        assert!(line.contains(&format!("declares a payload of {BOMB_BYTES} bytes")), "{place}: {line}");
    }
}

#[test]
fn a_histogram_bomb_in_a_saved_report_is_refused_by_merge_without_the_memory_it_declares() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run(controller(&["-n", "20", "-c", "1", "-j", &server.url()]));
    assert_success(&out);
    let mut report = json_report(&out);
    report["histograms"]["latency"] =
        base64::engine::general_purpose::STANDARD.encode(histogram_bomb(BOMB_BYTES)).into();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let path = path.display().to_string();

    let (out, peak_kib) = run_with_peak_rss(controller(&["merge", &path]), RUN_TIMEOUT);
    assert!(peak_kib < PEAK_LIMIT_KIB, "merge's memory peaked at {} MB", peak_kib / 1024);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_clean_error_line(&out);
    assert!(line.contains(&path) && line.contains("histograms.latency"), "{line}");
    assert!(line.contains(&format!("declares a payload of {BOMB_BYTES} bytes")), "{line}");
    assert!(out.stdout.is_empty(), "a report was printed anyway\n{}", describe_output(&out));
}

// ---------------------------------------------------------------------------------------------
// Workers that stop talking, or talk too much
// ---------------------------------------------------------------------------------------------

#[test]
fn a_worker_gone_silent_in_a_counted_run_is_failed_and_what_it_said_is_reported() {
    let fake = FakeWorker::start(Script::run(|shard| {
        let mut steps = opening(shard);
        steps.extend([interval(1, stats(7, 0)), Step::Hold]);
        steps
    }));
    let started = Instant::now();
    let out = run(controller(&["--workers", &fake.address(), "-n", "100", "-c", "1", "-j", NOWHERE]));
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(3), "{}", describe_output(&out));
    assert!(took < Duration::from_secs(12), "the silent worker was given up on only after {took:?}");
    let r = json_report(&out);
    let w = &r["workers"][0];
    assert!(failure(w).contains("sent nothing for 5s"), "{w}");
    assert_eq!(w["partial"], true, "{w}");
    assert_eq!(r["requests"]["ok"], 7, "what its interval said is counted: {r}");
    assert_eq!(r["totalsAreLowerBounds"], true, "{r}");
    let line = one_clean_error_line(&out);
    assert!(line.contains("incomplete run") && line.contains(&fake.address()), "{line}");
}

#[test]
fn one_ctrl_c_ends_a_run_whose_worker_ignores_the_stop_and_the_report_still_prints() {
    let fake = FakeWorker::start(Script::run(|shard| {
        let mut steps = opening(shard);
        steps.extend([interval(1, stats(5, 0)), Step::AwaitStop, Step::Hold]);
        steps
    }));
    let mut run =
        BackgroundProcess::spawn(controller(&["--workers", &fake.address(), "-n", "100", "-c", "1", "-j", NOWHERE]));
    // Accepted, Ready, Started and the interval are out.
    assert!(wait_until(Duration::from_secs(15), || fake.seen().events_sent() >= 4), "the run never started");
    std::thread::sleep(Duration::from_millis(200));
    run.signal(libc::SIGINT);
    let interrupted_at = Instant::now();
    let out = run.wait(Duration::from_secs(20));
    let took = interrupted_at.elapsed();
    assert_eq!(out.status.code(), Some(130), "{}", describe_output(&out));
    assert!(took < Duration::from_millis(4500), "one Ctrl-C took {took:?} to end the run");
    assert_eq!(fake.seen().stops(), 1, "the worker was not asked to stop");
    let r = json_report(&out);
    assert_eq!(r["interrupted"], true, "{r}");
    let w = &r["workers"][0];
    assert!(failure(w).contains("no result within 3s of the stop"), "{w}");
    assert_eq!(r["requests"]["ok"], 5, "{r}");
    assert_eq!(r["totalsAreLowerBounds"], true, "{r}");
}

#[test]
fn a_worker_flooding_intervals_ahead_of_the_run_is_failed_and_memory_stays_small() {
    const FLOOD: u32 = 300;
    let server = TestServer::start(Behavior::ok(14));
    let real = WorkerProcess::start(&[]);
    let fake = FakeWorker::start(Script::run(|shard| {
        let mut steps = opening(shard);
        // Five minutes of seconds at once: each one buffered would hold 0.8 MB until the real
        // worker caught up.
        steps.extend((1..=FLOOD).map(|second| interval(second, spread_stats(200))));
        steps.push(Step::Hold);
        steps
    }));
    let list = format!("{},{}", real.address(), fake.address());
    let cmd = controller(&["--workers", &list, "-z", "3s", "-c", "2", "-j", &server.url()]);
    let (out, peak_kib) = run_with_peak_rss(cmd, RUN_TIMEOUT);
    assert_eq!(out.status.code(), Some(3), "{}", describe_output(&out));
    assert!(peak_kib < PEAK_LIMIT_KIB, "the controller's memory peaked at {} MB", peak_kib / 1024);
    let r = json_report(&out);
    let (live, flooder) = (&r["workers"][0], &r["workers"][1]);
    let why = failure(flooder);
    assert!(why.contains("reported second") && why.contains("into the run"), "{flooder}");
    assert!(flooder["requests"].is_null(), "a flooder's numbers were used: {flooder}");
    assert!(live["failure"].is_null(), "{live}");
    assert_eq!(r["requests"]["ok"], live["requests"]["ok"], "the report is the real worker's");
    let intervals = r["intervals"].as_array().expect("intervals");
    assert!(intervals.iter().all(|i| i["second"].as_u64() <= Some(3)), "{intervals:?}");
}

// ---------------------------------------------------------------------------------------------
// Workers that lie
// ---------------------------------------------------------------------------------------------

type Lie = fn(&v1::Shard) -> Vec<Step>;

/// `opening`, then `rest`.
fn after_opening(shard: &v1::Shard, rest: Vec<Step>) -> Vec<Step> {
    let mut steps = opening(shard);
    steps.extend(rest);
    steps
}

#[test]
fn a_worker_that_lies_about_its_counts_is_failed_and_left_out_of_the_totals() {
    let server = TestServer::start(Behavior::ok(14));
    let real = WorkerProcess::start(&[]);
    let lies: [(&str, Lie, &str); 3] = [
        (
            "ok = u64::MAX",
            |shard| {
                let lie = stats(0, 0);
                let counters = v1::Counters { ok: u64::MAX, ..lie.counters.clone().unwrap() };
                after_opening(shard, vec![finished(shard, v1::Stats { counters: Some(counters), ..lie }, 1)])
            },
            "18446744073709551615",
        ),
        (
            "25 requests of a shard of 20",
            |shard| after_opening(shard, vec![interval(1, stats(25, 0)), finished(shard, stats(25, 0), 1)]),
            "reported 25 requests done for a shard of 20",
        ),
        (
            "20 ok and 3 latency samples",
            |shard| {
                let mut latency = volley_histogram();
                latency.record_n(1_000_000, 3).unwrap();
                let lie = v1::Stats { latency: encode(&latency), ..stats(20, 0) };
                after_opening(shard, vec![finished(shard, lie, 1)])
            },
            "its latency histogram holds 3 samples but it counts 20 ok requests",
        ),
    ];
    for (what, lie, expected) in lies {
        let fake = FakeWorker::start(Script::run(lie));
        let list = format!("{},{}", real.address(), fake.address());
        let out = run(controller(&["--workers", &list, "-n", "40", "-c", "2", "-j", &server.url()]));
        assert_eq!(out.status.code(), Some(3), "{what}: {}", describe_output(&out));
        assert_eq!(
            fake.seen().shard().and_then(|s| s.stop),
            Some(v1::shard::Stop::Requests(20)),
            "{what}: the fake's shard"
        );
        let r = json_report(&out);
        let liar = &r["workers"][1];
        assert!(failure(liar).contains(expected), "{what}: {liar}");
        assert!(liar["requests"].is_null(), "{what}: the liar's numbers were used: {liar}");
        assert_eq!(r["requests"]["ok"], 20, "{what}: {r}");
        assert_eq!(r["requests"]["total"], 20, "{what}: {r}");
        let line = one_clean_error_line(&out);
        assert!(line.contains("incomplete run") && line.contains(&fake.address()), "{what}: {line}");
    }
}

#[test]
fn intervals_out_of_order_or_ahead_of_the_clock_fail_their_worker() {
    let server = TestServer::start(Behavior::ok(14));
    let real = WorkerProcess::start(&[]);
    let lies: [(&str, Lie, &str); 2] = [
        (
            "a second four billion seconds in",
            |shard| after_opening(shard, vec![interval(4_000_000_000, stats(1, 0)), finished(shard, stats(1, 0), 1)]),
            "reported second 4000000000 only",
        ),
        (
            "second 1 after second 2",
            |shard| {
                after_opening(
                    shard,
                    vec![
                        Step::Sleep(Duration::from_millis(2100)),
                        interval(2, stats(1, 0)),
                        interval(1, stats(1, 0)),
                        finished(shard, stats(2, 0), 3),
                    ],
                )
            },
            "reported second 1 after second 2",
        ),
    ];
    for (what, lie, expected) in lies {
        let fake = FakeWorker::start(Script::run(lie));
        let list = format!("{},{}", real.address(), fake.address());
        let out = run(controller(&["--workers", &list, "-z", "3s", "-c", "2", "-j", &server.url()]));
        assert_eq!(out.status.code(), Some(3), "{what}: {}", describe_output(&out));
        let r = json_report(&out);
        assert!(failure(&r["workers"][1]).contains(expected), "{what}: {}", r["workers"][1]);
        let seconds: Vec<u64> =
            r["intervals"].as_array().unwrap().iter().map(|i| i["second"].as_u64().unwrap()).collect();
        assert!(seconds.windows(2).all(|w| w[0] < w[1]), "{what}: seconds out of order: {seconds:?}");
        assert!(seconds.iter().all(|s| *s <= 4), "{what}: seconds beyond the run: {seconds:?}");
    }
}

#[test]
fn a_worker_that_cannot_run_http3_is_refused_by_name_before_any_load() {
    let without_h3 = FakeWorker::start(Script {
        hello: v1::HelloReply { protocols: vec!["http/1.1".into(), "h2".into()], ..hello("old") },
        ..Script::run(|shard| after_opening(shard, vec![finished(shard, stats(1, 0), 1)]))
    });
    let out =
        run(controller(&["--workers", &without_h3.address(), "--http3", "-k", "-n", "10", "https://127.0.0.1:9/"]));
    assert_ne!(out.status.code(), Some(0), "{}", describe_output(&out));
    let line = one_clean_error_line(&out);
    assert!(line.contains(&without_h3.address()), "{line}");
    assert!(line.contains("cannot run h3"), "{line}");
    assert_eq!(without_h3.seen().runs(), 0, "a run reached the worker");
}

// ---------------------------------------------------------------------------------------------
// Text from workers
// ---------------------------------------------------------------------------------------------

#[test]
fn text_from_workers_reaches_the_terminal_escaped_and_bounded() {
    // A window title, a screen wipe, a forged line, then 100 KB.
    const HOSTILE: &str = "\x1b]0;owned\x07\x1b[2J\r\nForged: line\n";
    let flood = format!("{HOSTILE}{}", "A".repeat(100_000));
    let sample = flood.clone();
    let named = FakeWorker::start(Script {
        hello: hello(&format!("evil{flood}")),
        ..Script::run(move |shard| {
            let samples = vec![v1::ErrorSample { kind: "reset".into(), message: sample.clone() }];
            after_opening(shard, vec![finished_with(shard, stats(19, 1), 1, samples)])
        })
    });
    let reason = flood.clone();
    let failing = FakeWorker::start(Script::run(move |_| vec![failed(&reason)]));
    let list = format!("{},{}", named.address(), failing.address());
    let out = run(controller(&["--workers", &list, "-n", "40", "-c", "2", NOWHERE]));
    assert_eq!(out.status.code(), Some(3), "{}", describe_output(&out));
    let line = one_clean_error_line(&out);
    assert!(line.contains(&failing.address()), "{line}");
    assert!(line.len() < 1000, "a {}-byte error line", line.len());
    let report = String::from_utf8_lossy(&out.stdout);
    assert_no_terminal_controls(&report, "the report");
    assert!(report.lines().all(|l| l.len() < 1000), "a line over 1000 bytes in the report:\n{report}");
    assert!(!report.lines().any(|l| l.starts_with("Forged")), "a forged line in the report:\n{report}");
    assert!(report.contains("evil\\u{1b}]0;owned"), "the name is shown, escaped:\n{report}");
    assert!(report.contains("[reset] 1"), "{report}");
}

// ---------------------------------------------------------------------------------------------
// Lost workers
// ---------------------------------------------------------------------------------------------

#[test]
fn a_worker_that_ends_early_on_its_own_is_named_and_never_taken_for_ctrl_c() {
    // What a worker says when its daemon was signalled; nothing, as a worker that predates
    // `stopped_by` does: the controller knows it sent no Stop either way.
    for (said, named) in [("the worker got SIGTERM and shut down", "SIGTERM"), ("", "did not say why")] {
        let fake = FakeWorker::start(Script::run(move |shard| {
            let mut steps = opening(shard);
            steps.extend([
                interval(1, stats(7, 0)),
                send(v1::run_event::Event::Finished(v1::Finished {
                    stats: Some(stats(9, 0)),
                    duration_nanos: 1_500_000_000,
                    threads: 1,
                    connections: shard.connections,
                    interrupted: true,
                    stopped_by: said.into(),
                    ..Default::default()
                })),
            ]);
            steps
        }));
        let out = run(controller(&["--workers", &fake.address(), "-n", "100", "-c", "1", "-j", NOWHERE]));
        assert_eq!(out.status.code(), Some(3), "{named}: {}", describe_output(&out));
        assert_eq!(fake.seen().stops(), 0, "{named}: the controller asked for the stop");
        let r = json_report(&out);
        assert_eq!(r["interrupted"], false, "{named}: {r}");
        let w = &r["workers"][0];
        assert!(failure(w).contains("ended early") && failure(w).contains(named), "{named}: {w}");
        assert_eq!(w["partial"], true, "{named}: {w}");
        assert_eq!(r["totalsAreLowerBounds"], true, "{named}: {r}");
        assert_eq!(r["requests"]["ok"], 7, "{named}: its intervals are what counts: {r}");
        let line = one_clean_error_line(&out);
        assert!(line.contains("incomplete run") && line.contains(named) && !line.contains("Ctrl-C"), "{line}");
    }
}

#[test]
fn a_stopped_workers_requests_are_reported_and_the_totals_called_lower_bounds() {
    let server = TestServer::start(Behavior::ok(14));
    // Alone, then beside a worker that keeps going.
    for beside_a_live_one in [false, true] {
        let stopped = WorkerProcess::start(&[]);
        let live = beside_a_live_one.then(|| WorkerProcess::start(&[]));
        let list = match &live {
            Some(live) => format!("{},{}", live.address(), stopped.address()),
            None => stopped.address(),
        };
        let before = server.requests();
        let mut run =
            BackgroundProcess::spawn(controller(&["--workers", &list, "-z", "4s", "-c", "2", "-j", &server.url()]));
        assert!(wait_until(Duration::from_secs(15), || server.requests() > before), "the run never reached the server");
        std::thread::sleep(Duration::from_millis(1500));
        send_signal(stopped.pid(), libc::SIGSTOP);
        let out = run.wait(Duration::from_secs(30));
        send_signal(stopped.pid(), libc::SIGCONT);
        let what = if beside_a_live_one { "beside a live worker" } else { "alone" };
        assert_eq!(out.status.code(), Some(3), "{what}: {}", describe_output(&out));
        let r = json_report(&out);
        assert_eq!(r["totalsAreLowerBounds"], true, "{what}: {r}");
        let workers = r["workers"].as_array().unwrap();
        let lost = workers.last().unwrap();
        assert!(!failure(lost).is_empty(), "{what}: {lost}");
        assert_eq!(lost["partial"], true, "{what}: {lost}");
        let lost_ok = lost["requests"]["ok"].as_u64().unwrap_or_else(|| panic!("{what}: nothing reported: {lost}"));
        assert!(lost_ok > 0, "{what}: {lost}");
        let sum: u64 = workers.iter().map(|w| w["requests"]["ok"].as_u64().unwrap()).sum();
        assert_eq!(r["requests"]["ok"].as_u64(), Some(sum), "{what}: the totals include the lost worker's");
        assert!(server.requests() - before >= sum, "{what}: the report counts more than the server saw");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("lower bound"), "{what}: the warnings do not say so: {text}");
    }
}
