//! End to end, distributed: real `volley worker` processes on loopback (and, as root, in network
//! namespaces joined by veth pairs and a bridge), driven by the real `volley --workers`
//! controller against an in-test server, checked against the JSON report and against what the
//! server itself counted. Every load is bounded by a request count or a short duration.

use crate::support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use base64::Engine;
use hdrhistogram::Histogram;
use serde_json::Value;
use support::fake_worker::{self, FakeWorker, Script};
use support::{
    BackgroundProcess, Behavior, Namespaces, TestCert, TestServer, WorkerProcess, assert_success, controller_command,
    describe_output, free_port, in_netns, ip, json_report, number, one_error_line, run_with_timeout, run_within,
    send_signal, volley_command, volley_in, wait_until,
};
use tonic::Code;
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, run_command::Command as RunCmd, worker_client::WorkerClient};

/// How long any controller run of these tests may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `volley ARGS` as a controller, with no token from the test's own environment.
fn controller(args: &[&str]) -> Command {
    controller_command(args)
}

/// Runs `cmd` to completion within [`RUN_TIMEOUT`].
fn run(cmd: Command) -> Output {
    run_within(cmd, RUN_TIMEOUT)
}

fn run_controller(args: &[&str]) -> Output {
    run(controller(args))
}

fn exit_code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// The one error line a failed command prints; panics unless there is exactly one.
fn volley_error_line(out: &Output) -> String {
    let line = one_error_line(out);
    assert!(line.starts_with("volley: error: "), "{}", describe_output(out));
    line
}

fn worker_list(workers: &[&WorkerProcess]) -> String {
    workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",")
}

/// A base64 HdrHistogram (V2+DEFLATE) from a report, decoded with the hdrhistogram crate. It
/// comes at the bounds it had grown to, so it grows further when others are added to it.
fn histogram(b64: &Value) -> Histogram<u64> {
    let text = b64.as_str().unwrap_or_else(|| panic!("not a base64 histogram: {b64}"));
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).expect("base64");
    let mut h: Histogram<u64> =
        hdrhistogram::serialization::Deserializer::new().deserialize(&mut &bytes[..]).expect("an HdrHistogram");
    h.auto(true);
    h
}

const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// Asserts two histograms hold the same samples as far as a report can tell.
fn assert_same_histogram(a: &Histogram<u64>, b: &Histogram<u64>, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: count");
    for q in QUANTILES {
        assert_eq!(a.value_at_quantile(q), b.value_at_quantile(q), "{what}: quantile {q}");
    }
    assert_eq!(a.max(), b.max(), "{what}: max");
    assert_eq!(a.min(), b.min(), "{what}: min");
}

/// The server's request count once it has not changed for 300 ms (at most 5 s of waiting):
/// requests a stopped run had in flight may still be arriving.
fn settled_requests(server: &TestServer) -> u64 {
    let mut count = server.requests();
    let mut stable_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && stable_since.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(20));
        let now = server.requests();
        if now != count {
            count = now;
            stable_since = Instant::now();
        }
    }
    count
}

/// Waits (at most 15 s) until the server has seen load, i.e. the distributed run has started.
fn wait_for_load(server: &TestServer, run: &mut BackgroundProcess) {
    let started = wait_until(Duration::from_secs(15), || server.requests() > 0 || !run.is_running());
    assert!(started && server.requests() > 0, "the run never reached the server\n{}", {
        let out = run.wait(Duration::from_secs(5));
        describe_output(&out)
    });
}

/// ok ≤ what the server saw ≤ ok + aborted: every request is accounted for, and nothing but
/// this run loaded the server.
fn assert_server_count_within(report: &Value, server_saw: u64) {
    let ok = number(report, "/requests/ok");
    let aborted = number(report, "/requests/aborted");
    assert!(ok > 0, "no request succeeded: {report}");
    assert!(
        ok <= server_saw && server_saw <= ok + aborted,
        "the server saw {server_saw} requests, the report says ok {ok} + aborted {aborted}"
    );
}

/// Asserts the server's count does not grow over `window`.
fn assert_no_more_load(server: &TestServer, window: Duration, what: &str) -> u64 {
    let before = server.requests();
    std::thread::sleep(window);
    let after = server.requests();
    assert_eq!(before, after, "{what}: the server still received {} requests", after - before);
    after
}

// ---------------------------------------------------------------------------------------------
// Splitting and merging
// ---------------------------------------------------------------------------------------------

#[test]
fn an_n_run_across_three_workers_sends_exactly_n_requests() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, b, c) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let list = worker_list(&[&a, &b, &c]);
    let out = run_controller(&["--workers", &list, "-c", "9", "-n", "3001", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/total"), 3001, "{r}");
    assert_eq!(number(&r, "/requests/ok"), 3001);
    assert_eq!(number(&r, "/requests/errors"), 0);
    assert_eq!(number(&r, "/statusCodes/200"), 3001);
    assert_eq!(server.requests(), 3001, "the server's own count");
    assert_eq!(server.connections(), 9, "keep-alive: one server connection per client connection");

    let workers = r["workers"].as_array().expect("a workers array");
    assert_eq!(workers.len(), 3, "{r}");
    let addresses: Vec<&str> = workers.iter().map(|w| w["address"].as_str().unwrap()).collect();
    assert_eq!(addresses.join(","), list);
    let total: u64 = workers.iter().map(|w| number(w, "/requests/total")).sum();
    let ok: u64 = workers.iter().map(|w| number(w, "/requests/ok")).sum();
    let connections: u64 = workers.iter().map(|w| number(w, "/connections")).sum();
    assert_eq!((total, ok, connections), (3001, 3001, 9), "{workers:?}");
    let mut sum: Option<Histogram<u64>> = None;
    for w in workers {
        assert!(w["failure"].is_null(), "{w}");
        assert!(number(w, "/requests/ok") >= 1000, "an uneven split: {w}");
        for field in ["latency", "connect", "firstByte"] {
            assert!(w["histograms"][field].is_string(), "worker without a {field} histogram: {w}");
        }
        let latency = histogram(&w["histograms"]["latency"]);
        assert_eq!(latency.len(), number(w, "/requests/ok"), "one latency sample per ok request");
        assert_eq!(histogram(&w["histograms"]["connect"]).len(), 3, "3 connections each");
        match &mut sum {
            None => sum = Some(latency),
            Some(s) => s.add(&latency).expect("histograms of the same range"),
        }
    }
    let merged = histogram(&r["histograms"]["latency"]);
    assert_same_histogram(&merged, &sum.unwrap(), "merged latency vs the workers' added up");
    assert_eq!(number(&r, "/latencySeconds/count"), 3001);
}

#[test]
fn a_timed_run_across_two_workers_reports_what_the_server_saw() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let started = Instant::now();
    let out = run_controller(&["--workers", &worker_list(&[&a, &b]), "-z", "2s", "-c", "8", "-j", &server.url()]);
    let took = started.elapsed();
    assert_success(&out);
    let r = json_report(&out);
    assert_server_count_within(&r, settled_requests(&server));
    assert!(took < Duration::from_secs(6), "a 2 s run took {took:?}");
    let secs = r["durationSeconds"].as_f64().unwrap();
    assert!((1.9..3.0).contains(&secs), "durationSeconds {secs}");
    let skew = r["startSkewSeconds"].as_f64().unwrap_or_else(|| panic!("no startSkewSeconds: {r}"));
    assert!((0.0..0.05).contains(&skew), "start skew {skew} s");
    let intervals = r["intervals"].as_array().expect("an intervals array");
    assert!((1..=2).contains(&intervals.len()), "{} intervals: {intervals:?}", intervals.len());
    let per_second: u64 = intervals.iter().map(|i| number(i, "/ok")).sum();
    assert!(per_second <= number(&r, "/requests/ok"), "intervals count more than the run: {intervals:?}");
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert!(number(w, "/requests/ok") > 0, "{w}");
        assert_eq!(number(w, "/connections"), 4, "{w}");
        let offset = w["startOffsetSeconds"].as_f64().unwrap_or_else(|| panic!("no startOffsetSeconds: {w}"));
        assert!(offset.abs() <= skew, "a worker's offset beyond the reported skew: {w}");
    }
    assert_eq!(server.connections(), 8);
}

#[test]
fn a_request_body_over_4_mib_reaches_the_server_through_workers() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    // Above tonic's default 4 MiB message limit, which the shard carrying it once ran into.
    let body: Vec<u8> = (0..(5 << 20) + 12_345).map(|i| b'a' + (i % 26) as u8).collect();
    let path = dir.path().join("body.bin");
    std::fs::write(&path, &body).unwrap();
    let data = format!("@{}", path.display());
    let out =
        run_controller(&["--workers", &worker_list(&[&a, &b]), "-n", "4", "-c", "2", "-d", &data, "-j", &server.url()]);
    assert_success(&out);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 4);
    assert_eq!(server.requests(), 4);
    assert_eq!(server.request_body_bytes(), 4 * body.len() as u64);
    assert!(server.last_request().is_some_and(|r| r.body == body), "the server got other bytes than the file's");
}

#[test]
fn a_body_or_shard_larger_than_a_worker_takes_is_refused_before_connecting_with_the_limit_named() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, len: usize| {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![b'x'; len]).unwrap();
        path.display().to_string()
    };
    let too_big = format!("@{}", file("too-big.bin", (64 << 20) + 1));
    let big = format!("@{}", file("big.bin", 60 << 20));
    let huge_ca = file("ca.pem", 21 << 20);
    // Nothing listens here: a controller that tried to reach it would fail with exit 1.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let url = server.url();
    let cases: [(&[&str], &str); 3] = [
        // The same limit for a local run, so that a run that works here works on workers too.
        (&["-d", &too_big, &url], "larger than 64 MiB"),
        (&["--workers", &nowhere, "-d", &too_big, &url], "larger than 64 MiB"),
        (&["--workers", &nowhere, "-d", &big, "--cacert", &huge_ca, &url], "over the 80 MiB a worker takes"),
    ];
    for (args, expect) in cases {
        // One small request, so that a controller that did not refuse costs little.
        let out = run_controller(&[&["-n", "1", "-c", "1"], args].concat());
        let line = volley_error_line(&out);
        assert_eq!(exit_code(&out), Some(2), "{line}");
        assert!(line.contains(expect), "expected '{expect}': {line}");
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn merge_of_saved_reports_equals_the_run_they_came_from() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let mut histograms = Vec::new();
    let mut paths = Vec::new();
    for (name, requests, connections) in [("a.json", "300", "3"), ("b.json", "500", "5")] {
        let out = run_controller(&["-n", requests, "-c", connections, "-j", &server.url()]);
        assert_success(&out);
        histograms.push(histogram(&json_report(&out)["histograms"]["latency"]));
        let path = dir.path().join(name);
        std::fs::write(&path, &out.stdout).unwrap();
        paths.push(path.display().to_string());
    }
    assert_eq!(server.requests(), 800);

    let out = run_controller(&["merge", &paths[0], &paths[1], "-j"]);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 800, "{r}");
    assert_eq!(number(&r, "/requests/total"), 800);
    assert_eq!(number(&r, "/latencySeconds/count"), 800);
    assert_eq!(number(&r, "/connections"), 8);
    let mut sum = histograms[0].clone();
    sum.add(&histograms[1]).unwrap();
    let merged = histogram(&r["histograms"]["latency"]);
    assert_same_histogram(&merged, &sum, "merged report vs the saved histograms added up");
    let p99 = r["latencySeconds"]["percentiles"]["p99"].as_f64().unwrap_or_else(|| panic!("no p99: {r}"));
    assert_eq!(p99, sum.value_at_quantile(0.99) as f64 / 1e9, "the merged p99 is that of all samples");

    // A file that is not a report: one line naming it, exit 2 (bad input, as a usage error).
    for (name, content) in [("bad.json", "{ this is not json"), ("empty.json", "{}")] {
        let bad = dir.path().join(name);
        std::fs::write(&bad, content).unwrap();
        let bad = bad.display().to_string();
        let out = run_controller(&["merge", &paths[0], &bad, "-j"]);
        assert_eq!(exit_code(&out), Some(2), "{}", describe_output(&out));
        let line = volley_error_line(&out);
        assert!(line.contains(&bad), "the error does not name {bad}: {line}");
        assert!(out.stdout.is_empty(), "a report was printed anyway\n{}", describe_output(&out));
    }
}

// ---------------------------------------------------------------------------------------------
// Failures: a worker lost, the controller lost, Ctrl-C
// ---------------------------------------------------------------------------------------------

/// A controller running `-z 4s -c CONNECTIONS -j` on `workers` against `server`, once the load
/// has begun.
fn four_seconds_on(server: &TestServer, workers: &[&WorkerProcess], connections: u32) -> BackgroundProcess {
    let connections = connections.to_string();
    let list = worker_list(workers);
    let mut run = BackgroundProcess::spawn(controller(&[
        "--workers",
        &list,
        "-z",
        "4s",
        "-c",
        &connections,
        "-j",
        &server.url(),
    ]));
    wait_for_load(server, &mut run);
    run
}

#[test]
fn a_worker_killed_mid_run_is_named_and_the_rest_reported() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, mut b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let mut run = four_seconds_on(&server, &[&a, &b], 4);
    std::thread::sleep(Duration::from_millis(1200));
    b.kill();
    let killed_at = Instant::now();
    let out = run.wait(Duration::from_secs(20));
    assert_eq!(exit_code(&out), Some(3), "{}", describe_output(&out));
    assert!(killed_at.elapsed() < Duration::from_secs(8), "the controller lingered after the run");
    let r = json_report(&out);
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let (alive, dead) = (&workers[0], &workers[1]);
    assert_eq!(alive["address"], a.address().as_str());
    assert_eq!(dead["address"], b.address().as_str());
    let failure = dead["failure"].as_str().unwrap_or_else(|| panic!("the killed worker has no failure: {dead}"));
    assert!(failure.contains("lost the worker"), "the failure does not say the worker was lost: {failure}");
    assert!(alive["failure"].is_null(), "{alive}");
    let alive_ok = number(alive, "/requests/ok");
    assert!(alive_ok > 0, "{alive}");
    // The dead one counts with what its intervals said before it was killed (a second or so).
    assert_eq!(dead["partial"], true, "{dead}");
    assert_eq!(r["totalsAreLowerBounds"], true, "{r}");
    let dead_ok = number(dead, "/requests/ok");
    assert!(dead_ok > 0, "the killed worker's intervals are missing: {dead}");
    assert_eq!(number(&r, "/requests/ok"), alive_ok + dead_ok, "the survivor's and what the dead one reported");
    let err = stderr(&out);
    assert!(err.contains("incomplete run") && err.contains(&b.address()), "{}", describe_output(&out));
    assert!(!err.contains("panicked"), "{err}");
    assert!(settled_requests(&server) >= alive_ok + dead_ok);
    assert_no_more_load(&server, Duration::from_millis(500), "after the run");
}

#[test]
fn a_worker_stopped_by_a_signal_mid_run_is_named_and_not_taken_for_ctrl_c() {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let server = TestServer::start(Behavior::ok(14));
        let (a, mut b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
        let mut run = four_seconds_on(&server, &[&a, &b], 8);
        std::thread::sleep(Duration::from_secs(2));
        send_signal(b.pid(), signal);
        let out = run.wait(Duration::from_secs(20));
        assert_eq!(exit_code(&out), Some(3), "{name}: {}", describe_output(&out));
        let r = json_report(&out);
        assert_eq!(r["interrupted"], false, "{name}: nobody pressed Ctrl-C: {r}");
        assert_eq!(r["totalsAreLowerBounds"], true, "{name}: {r}");
        let workers = r["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2);
        let (alive, stopped) = (&workers[0], &workers[1]);
        assert_eq!(stopped["address"], b.address().as_str());
        assert!(alive["failure"].is_null(), "{name}: {alive}");
        assert_eq!(alive["interrupted"], false, "{name}: {alive}");
        let failure = stopped["failure"].as_str().unwrap_or_else(|| panic!("{name}: no failure: {stopped}"));
        assert!(
            failure.contains("ended early") && failure.contains(name),
            "{name}: the signal is not named: {failure}"
        );
        assert_eq!(stopped["partial"], true, "{name}: {stopped}");
        assert_eq!(stopped["interrupted"], false, "{name}: {stopped}");
        // What its intervals said until the signal (about two seconds) counts.
        let (alive_ok, stopped_ok) = (number(alive, "/requests/ok"), number(stopped, "/requests/ok"));
        assert!(alive_ok > 0 && stopped_ok > 0, "{name}: {r}");
        assert_eq!(number(&r, "/requests/ok"), alive_ok + stopped_ok, "{name}");
        let err = stderr(&out);
        assert!(err.contains("incomplete run") && err.contains(&b.address()) && err.contains(name), "{err}");
        assert!(!err.contains("Ctrl-C"), "{name}: {err}");
        // The worker reported before it went, and then it went.
        assert!(wait_until(Duration::from_secs(8), || !b.is_running()), "{name}: still running: {}", b.log());
        assert!(settled_requests(&server) >= alive_ok + stopped_ok, "{name}");
    }
}

#[test]
fn a_controller_killed_with_sigkill_leaves_no_load_behind() {
    let server = TestServer::start(Behavior::ok(14));
    let (mut a, mut b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let list = worker_list(&[&a, &b]);
    let mut run = BackgroundProcess::spawn(controller(&["--workers", &list, "-z", "30s", "-c", "4", &server.url()]));
    wait_for_load(&server, &mut run);
    std::thread::sleep(Duration::from_secs(1));
    run.signal(libc::SIGKILL);
    let out = run.wait(Duration::from_secs(5));
    assert_eq!(out.status.code(), None, "SIGKILL should have ended it: {}", describe_output(&out));
    std::thread::sleep(Duration::from_secs(1));
    let left = assert_no_more_load(&server, Duration::from_secs(1), "1 s after the controller was killed");
    assert!(left > 0);
    assert!(a.is_running(), "worker a died with its controller: {}", a.log());
    assert!(b.is_running(), "worker b died with its controller: {}", b.log());

    // Both are free for the next run.
    let out = run_controller(&["--workers", &list, "-n", "100", "-c", "2", "-j", &server.url()]);
    assert_success(&out);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 100);
    assert_eq!(server.requests(), left + 100);
}

#[test]
fn a_worker_the_kernel_did_not_run_for_a_second_and_a_half_keeps_its_run() {
    // A machine with more busy threads than cores can leave a worker unscheduled for a while:
    // it wakes with its watchdog's timer due and the controller's heartbeats unread in its
    // socket. It must read them, not stop its load for a controller that never went away.
    let server = TestServer::start(Behavior::ok(14));
    let worker = WorkerProcess::start(&[]);
    let mut run = BackgroundProcess::spawn(controller(&[
        "--workers",
        &worker.address(),
        "-z",
        "5s",
        "-c",
        "2",
        "--rate",
        "200",
        "-j",
        &server.url(),
    ]));
    wait_for_load(&server, &mut run);
    std::thread::sleep(Duration::from_millis(1000));
    send_signal(worker.pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1500));
    send_signal(worker.pid(), libc::SIGCONT);
    let out = run.wait(Duration::from_secs(30));
    assert_success(&out);
    assert!(!worker.log().contains("controller gone"), "the worker gave up on its controller:\n{}", worker.log());
    let r = json_report(&out);
    assert!(r["workers"][0]["failure"].is_null(), "{r}");
    assert_server_count_within(&r, server.requests());
}

#[test]
fn runs_that_end_normally_leave_no_word_of_a_lost_controller_in_the_workers_logs() {
    // Once a worker's result is out, its controller closes the run's streams; a worker that read
    // that close before noticing its own run had ended logged "controller closed the run stream;
    // stopping the run" after a run that was over (about one run in ten on 8 workers).
    let server = TestServer::start(Behavior::ok(14));
    let workers: Vec<WorkerProcess> = (0..4).map(|_| WorkerProcess::start(&[])).collect();
    let list = worker_list(&workers.iter().collect::<Vec<_>>());
    for round in 0..4 {
        let out = run_controller(&["--workers", &list, "-c", "8", "-n", "4000", "-j", &server.url()]);
        assert_success(&out);
        assert_eq!(number(&json_report(&out), "/requests/ok"), 4000, "round {round}");
        let out = run_controller(&["--workers", &list, "-c", "8", "-z", "1s", "-j", &server.url()]);
        assert_success(&out);
    }
    for w in &workers {
        let log = w.log();
        assert_eq!(log.matches("run finished").count(), 8, "{log}");
        for lost in ["controller gone", "controller closed the run stream", "stopping the run"] {
            assert!(!log.contains(lost), "a worker said {lost:?} after runs that ended normally:\n{log}");
        }
    }
}

#[test]
fn ctrl_c_on_the_controller_stops_every_worker_and_prints_the_report() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, b) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let mut run = BackgroundProcess::spawn(controller(&[
        "--workers",
        &worker_list(&[&a, &b]),
        "-z",
        "30s",
        "-c",
        "4",
        "-j",
        &server.url(),
    ]));
    wait_for_load(&server, &mut run);
    std::thread::sleep(Duration::from_secs(1));
    run.signal(libc::SIGINT);
    let interrupted_at = Instant::now();
    let out = run.wait(Duration::from_secs(10));
    assert_eq!(exit_code(&out), Some(130), "{}", describe_output(&out));
    assert!(interrupted_at.elapsed() < Duration::from_secs(3), "Ctrl-C took {:?}", interrupted_at.elapsed());
    let r = json_report(&out);
    assert_eq!(r["interrupted"], true, "{r}");
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert!(w["failure"].is_null(), "{w}");
        assert_eq!(w["interrupted"], true, "{w}");
        assert!(number(w, "/requests/ok") > 0, "{w}");
    }
    if let Some(wait) = Duration::from_secs(1).checked_sub(interrupted_at.elapsed()) {
        std::thread::sleep(wait);
    }
    let saw = assert_no_more_load(&server, Duration::from_millis(500), "1 s after Ctrl-C");
    assert_server_count_within(&r, saw);
    assert!(stderr(&out).contains("interrupted"), "{}", describe_output(&out));
}

#[test]
fn an_unreachable_worker_is_named() {
    let server = TestServer::start(Behavior::ok(14));
    let real = WorkerProcess::start(&[]);
    let nobody = format!("127.0.0.1:{}", free_port());
    let list = format!("{nobody},{}", real.address());
    let out = run_controller(&["--workers", &list, "-n", "200", "-c", "4", "-j", &server.url()]);
    assert_eq!(exit_code(&out), Some(3), "{}", describe_output(&out));
    let r = json_report(&out);
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    assert_eq!(workers[0]["address"], nobody.as_str());
    assert!(workers[0]["failure"].is_string(), "{}", workers[0]);
    assert!(workers[0]["requests"].is_null(), "{}", workers[0]);
    assert_eq!(workers[1]["address"], real.address().as_str());
    assert_eq!(number(&workers[1], "/requests/ok"), 100, "the real worker's share");
    assert_eq!(number(&r, "/requests/ok"), 100);
    assert_eq!(server.requests(), 100);
    let line = volley_error_line(&out);
    assert!(line.contains("incomplete run") && line.contains(&nobody), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------

#[test]
fn a_wrong_token_is_refused_and_sends_no_load() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "s3cret\n").unwrap();
    let worker = WorkerProcess::start(&["--token-file", token_file.to_str().unwrap()]);
    let args = ["--workers", &worker.address(), "-n", "100", "-c", "2", "-j", &server.url()];

    for token in [Some("wrong"), Some("s3cret2"), None] {
        let mut cmd = controller(&args);
        if let Some(t) = token {
            cmd.env("VOLLEY_TOKEN", t);
        }
        let out = run(cmd);
        assert_eq!(exit_code(&out), Some(1), "token {token:?}\n{}", describe_output(&out));
        let line = volley_error_line(&out);
        assert!(line.contains("token") && line.contains(&worker.address()), "token {token:?}: {line}");
        assert!(!line.contains("s3cret"), "the refusal leaks the token: {line}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.requests(), 0);
    assert_eq!(server.connections(), 0);

    let mut cmd = controller(&args);
    cmd.env("VOLLEY_TOKEN", "s3cret");
    let out = run(cmd);
    assert_success(&out);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 100);
    assert_eq!(server.requests(), 100);
    // The same through --token-file.
    let out = run_controller(&[&args[..], &["--token-file", token_file.to_str().unwrap()]].concat());
    assert_success(&out);
    assert_eq!(server.requests(), 200);
}

#[test]
fn a_target_outside_the_allow_list_is_refused_and_sends_no_load() {
    let server = TestServer::start(Behavior::ok(14));
    let elsewhere = WorkerProcess::start(&["--allow-target", "10.0.0.0/8"]);
    let out = run_controller(&["--workers", &elsewhere.address(), "-n", "100", "-c", "2", "-j", &server.url()]);
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    let line = volley_error_line(&out);
    assert!(line.contains("refused") && line.contains("not allowed"), "{line}");
    assert!(line.contains(&elsewhere.address()), "{line}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.requests(), 0);
    assert_eq!(server.connections(), 0);

    let here = WorkerProcess::start(&["--allow-target", "192.0.2.0/24", "--allow-target", "127.0.0.0/8"]);
    let out = run_controller(&["--workers", &here.address(), "-n", "100", "-c", "2", "-j", &server.url()]);
    assert_success(&out);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 100);
    assert_eq!(server.requests(), 100);
}

#[test]
fn a_worker_that_is_busy_refuses_a_second_run() {
    let server = TestServer::start(Behavior::ok(14));
    let worker = WorkerProcess::start(&[]);
    let mut first = BackgroundProcess::spawn(controller(&[
        "--workers",
        &worker.address(),
        "-z",
        "5s",
        "-c",
        "2",
        "-j",
        &server.url(),
    ]));
    wait_for_load(&server, &mut first);

    let out = run_controller(&["--workers", &worker.address(), "-n", "10", "-c", "1", "-j", &server.url()]);
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    let line = volley_error_line(&out);
    assert!(line.contains("busy") && line.contains(&worker.address()), "{line}");
    assert!(first.is_running(), "the first run ended early");

    first.signal(libc::SIGINT);
    let out = first.wait(Duration::from_secs(10));
    assert_eq!(exit_code(&out), Some(130), "{}", describe_output(&out));
    let r = json_report(&out);
    assert_eq!(r["interrupted"], true);
    // Everything the server saw came from the first run: the second sent nothing.
    assert_server_count_within(&r, settled_requests(&server));
    assert_eq!(server.connections(), 2, "the refused run opened connections");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

#[test]
fn an_incompatible_protocol_version_is_refused_both_ways() {
    let server = TestServer::start(Behavior::ok(14));
    let rt = runtime();

    // (a) A controller meets a worker of another protocol: a worker from the future.
    let future = FakeWorker::start(Script {
        hello: v1::HelloReply { protocol: 999, version: "99.0.0".into(), ..fake_worker::hello("future") },
        clock: false,
        run: None,
    });
    let fake_addr = future.address();
    let out = run_controller(&["--workers", &fake_addr, "-n", "10", "-c", "1", &server.url()]);
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    let line = volley_error_line(&out);
    assert!(line.contains("incompatible") && line.contains(&fake_addr), "{line}");
    assert!(line.contains("999"), "the refusal does not say which protocol the worker speaks: {line}");
    assert_eq!(future.seen().runs(), 0, "the controller tried a run after an incompatible Hello");
    drop(future);

    // (b) A worker meets a controller of another protocol, in Hello and in a Run's shard.
    let worker = WorkerProcess::start(&[]);
    rt.block_on(async {
        let mut client =
            WorkerClient::connect(format!("http://{}", worker.address())).await.expect("the worker answers");
        let status = client
            .hello(v1::HelloRequest { protocol: 999, version: "99.0.0".into() })
            .await
            .expect_err("Hello from protocol 999 refused");
        assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
        assert!(status.message().contains("incompatible"), "{status:?}");

        let shard = v1::Shard {
            protocol: 999,
            url: server.url(),
            method: "GET".into(),
            connections: 2,
            threads: 1,
            stop: Some(v1::shard::Stop::Requests(10)),
            connect_timeout_nanos: 2_000_000_000,
            request_timeout_nanos: 5_000_000_000,
            keepalive: true,
            ..Default::default()
        };
        let (commands, rx) = tokio::sync::mpsc::channel(4);
        commands.send(v1::RunCommand { command: Some(RunCmd::Shard(shard)) }).await.unwrap();
        let status = client
            .run(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect_err("a shard of protocol 999 refused");
        assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
        assert!(status.message().contains("incompatible"), "{status:?}");
        // A Start now reaches nobody.
        let _ = commands.send(v1::RunCommand { command: Some(RunCmd::Start(v1::Start { at_worker_nanos: 0 })) }).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(commands);

        // The refusals left the worker as it was: free, and speaking its own protocol.
        let hello = client
            .hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() })
            .await
            .expect("Hello of the worker's own protocol")
            .into_inner();
        assert_eq!(hello.protocol, PROTOCOL_VERSION);
        assert!(!hello.busy, "a refused run left the worker busy");
    });
    assert_eq!(server.requests(), 0);
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_worker_refuses_to_listen_beyond_loopback_without_a_token() {
    let mut cmd = volley_command(["worker", "--listen", &format!("0.0.0.0:{}", free_port())]);
    cmd.env_remove("VOLLEY_TOKEN");
    let started = Instant::now();
    let out = run_with_timeout(cmd, Duration::from_secs(10))
        .unwrap_or_else(|out| panic!("the worker started listening on 0.0.0.0\n{}", describe_output(&out)));
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    let line = volley_error_line(&out);
    assert!(line.contains("token"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// Across network namespaces
// ---------------------------------------------------------------------------------------------

#[test]
fn a_run_across_network_namespaces_crosses_a_real_network_boundary() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED: needs root and iproute2 (`ip`) to make network namespaces");
        return;
    }
    let pid = std::process::id();
    let ns = |role: &str| format!("volley-{pid}-{role}");
    let mut namespaces = Namespaces::new();
    if let Err(e) = namespaces.add(&ns("sw")) {
        eprintln!("SKIPPED: cannot make network namespaces here ({e})");
        return;
    }
    // A bridge in its own namespace; each host a namespace with eth0, the other end of its veth
    // pair on the bridge. Nothing is added to the test's own namespace.
    let hosts = [("tgt", "198.18.0.1"), ("w1", "198.18.0.2"), ("w2", "198.18.0.3"), ("ctl", "198.18.0.4")];
    let step = |args: &[&str]| ip(args).unwrap_or_else(|e| panic!("setting up the namespaces: {e}"));
    let sw = ns("sw");
    step(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
    step(&["-n", &sw, "link", "set", "br0", "up"]);
    for (role, addr) in hosts {
        let host = ns(role);
        namespaces.add(&host).unwrap_or_else(|e| panic!("setting up the namespaces: {e}"));
        step(&["-n", &sw, "link", "add", role, "type", "veth", "peer", "name", "eth0", "netns", &host]);
        step(&["-n", &sw, "link", "set", role, "master", "br0"]);
        step(&["-n", &sw, "link", "set", role, "up"]);
        step(&["-n", &host, "addr", "add", &format!("{addr}/24"), "dev", "eth0"]);
        step(&["-n", &host, "link", "set", "eth0", "up"]);
        step(&["-n", &host, "link", "set", "lo", "up"]);
    }

    // The target: volley-serve in this process, its listening socket made in the target's
    // namespace, so its own counters tell what reached it.
    let target_addr: SocketAddr = "198.18.0.1:8080".parse().unwrap();
    let target = in_netns(&ns("tgt"), move || {
        volley_serve::Server::start(volley_serve::ServeConfig { addr: target_addr, ..Default::default() })
    })
    .expect("the target server starts in its namespace");

    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "namespace-token\n").unwrap();
    let token = token_file.to_str().unwrap();
    // Readiness is checked from the controller's namespace: across the bridge.
    let workers: Vec<WorkerProcess> = [("w1", "198.18.0.2:7700"), ("w2", "198.18.0.3:7700")]
        .into_iter()
        .map(|(role, listen)| {
            let cmd = volley_in(&ns(role), &["worker", "--listen", listen, "--token-file", token, "--name", role]);
            WorkerProcess::spawn(cmd, listen.parse().unwrap(), Some(&ns("ctl")))
                .unwrap_or_else(|e| panic!("worker {role}: {e}"))
        })
        .collect();

    let out = run(volley_in(
        &ns("ctl"),
        &[
            "--workers",
            "198.18.0.2:7700,198.18.0.3:7700",
            "--token-file",
            token,
            "-n",
            "2000",
            "-c",
            "8",
            "-j",
            "http://198.18.0.1:8080/",
        ],
    ));
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 2000, "{r}");
    assert_eq!(number(&r, "/requests/total"), 2000);
    assert_eq!(target.requests(), 2000, "what the target in its namespace answered");
    assert_eq!(target.connections(), 8);
    let reported = r["workers"].as_array().unwrap();
    assert_eq!(reported.len(), 2);
    for (w, name) in reported.iter().zip(["w1", "w2"]) {
        assert_eq!(w["name"], name, "{w}");
        assert_eq!(number(w, "/requests/ok"), 1000, "{w}");
    }
    // Without the token the same workers refuse, even from their own network.
    let out =
        run(volley_in(&ns("ctl"), &["--workers", "198.18.0.2:7700", "-n", "10", "-c", "1", "http://198.18.0.1:8080/"]));
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    assert!(volley_error_line(&out).contains("token"));
    assert_eq!(target.requests(), 2000);
    drop(workers);
    drop(target);
}

#[test]
fn bad_worker_flags_are_usage_errors_with_one_line() {
    let server = TestServer::start(Behavior::ok(16));
    let url = server.url();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--workers", "nocolon", &url], "HOST:PORT"),
        (vec!["--workers", "127.0.0.1:1,127.0.0.1:1", &url], "listed twice"),
        (
            vec!["--workers", "127.0.0.1:17701,localhost:17701", &url],
            "127.0.0.1:17701 and localhost:17701 are one worker",
        ),
        (vec!["--workers", "127.0.0.1:1,127.0.0.1:2", "-c", "1", &url], "at least the number of workers"),
        (vec!["--workers", "127.0.0.1:1,127.0.0.1:2", "-n", "1", &url], "at least the number of workers"),
    ];
    for (args, expect) in cases {
        let out = run_controller(&args);
        let line = volley_error_line(&out);
        assert!(line.contains(expect), "{args:?}: {line}");
        assert_eq!(exit_code(&out), Some(2), "{args:?}: {line}");
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
    }
    assert_eq!(server.connections(), 0);
}

/// A client CA and a client certificate it signed, PEM: (ca, cert, key).
fn client_identity() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.distinguished_name.push(DnType::CommonName, "volley test controllers");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "controller");
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params.signed_by(&key, &*ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn a_worker_over_tls_takes_only_controllers_with_a_client_certificate() {
    let server = TestServer::start(Behavior::ok(16));
    let dir = tempfile::tempdir().unwrap();
    let worker_cert = TestCert::generate();
    let ca = worker_cert.write_ca(dir.path());
    let (cert, key) = worker_cert.write_cert_and_key(dir.path());
    let (client_ca_pem, client_cert_pem, client_key_pem) = client_identity();
    let (client_ca, client_cert, client_key) =
        (dir.path().join("client-ca.pem"), dir.path().join("client.pem"), dir.path().join("client-key.pem"));
    std::fs::write(&client_ca, client_ca_pem).unwrap();
    std::fs::write(&client_cert, client_cert_pem).unwrap();
    std::fs::write(&client_key, client_key_pem).unwrap();
    let path = |p: &std::path::Path| p.to_str().unwrap().to_string();
    let (ca, cert, key) = (path(&ca), path(&cert), path(&key));
    let (client_ca, client_cert, client_key) = (path(&client_ca), path(&client_cert), path(&client_key));
    let worker = WorkerProcess::start(&["--tls-cert", &cert, "--tls-key", &key, "--client-ca", &client_ca]);
    let url = server.url();
    let address = worker.address();

    let out = run_controller(&[
        "--workers",
        &address,
        "--worker-ca",
        &ca,
        "--worker-cert",
        &client_cert,
        "--worker-key",
        &client_key,
        "-n",
        "100",
        "-c",
        "2",
        "-j",
        &url,
    ]);
    assert_success(&out);
    assert_eq!(number(&json_report(&out), "/requests/ok"), 100);
    assert_eq!(server.requests(), 100);

    // Without a client certificate, or without TLS at all: refused, no load.
    for args in [vec!["--worker-ca", &ca], vec![]] {
        let mut all = vec!["--workers", &address, "-n", "100", "-c", "2"];
        all.extend(args.iter().copied());
        all.push(&url);
        let out = run_controller(&all);
        let line = volley_error_line(&out);
        assert_eq!(exit_code(&out), Some(1), "{line}");
        assert!(line.contains(&address), "the worker is not named: {line}");
    }
    assert_eq!(server.requests(), 100);
}

// ---------------------------------------------------------------------------------------------
// Fleets: worker lists from files, a worker whose io_uring is blocked
// ---------------------------------------------------------------------------------------------

#[test]
fn a_fleet_listed_in_a_file_runs_as_if_listed_on_the_command_line() {
    let server = TestServer::start(Behavior::ok(14));
    let (a, b, c) = (WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    // Text, with a comment and a blank line; and `terraform output -json workers`'s shape.
    let text = dir.path().join("workers.txt");
    std::fs::write(&text, format!("# load machines\n{}\n\n{}  # rack 2\n", a.address(), b.address())).unwrap();
    let json = dir.path().join("workers.json");
    std::fs::write(&json, serde_json::to_string_pretty(&[c.address()]).unwrap()).unwrap();
    let list = format!("@{},@{}", text.display(), json.display());
    let out = run_controller(&["--workers", &list, "-c", "6", "-n", "1500", "-j", &server.url()]);
    assert_success(&out);
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 1500, "{r}");
    assert_eq!(server.requests(), 1500, "the server's own count");
    let addresses: Vec<&str> =
        r["workers"].as_array().unwrap().iter().map(|w| w["address"].as_str().unwrap()).collect();
    assert_eq!(addresses.join(","), worker_list(&[&a, &b, &c]), "every listed worker, in the file's order");
}

#[test]
fn a_missing_empty_or_malformed_workers_file_is_a_usage_error_with_one_line() {
    let server = TestServer::start(Behavior::ok(16));
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("@{}", path.display())
    };
    let missing = format!("@{}", dir.path().join("absent.txt").display());
    let cases = [
        (missing.clone(), format!("--workers {missing}: cannot read it")),
        (write("empty.txt", "# nobody yet\n\n"), "lists no workers".to_string()),
        (write("bad.txt", "127.0.0.1:7700\nworker-2\n"), "line 2: 'worker-2' is not HOST:PORT".to_string()),
        (write("bad.json", "{\"nodes\": []}"), "terraform output -json".to_string()),
        (write("cut.json", "[\"127.0.0.1:7700\""), "not valid JSON".to_string()),
    ];
    for (list, expect) in cases {
        let out = run_controller(&["--workers", &list, "-n", "10", &server.url()]);
        let line = volley_error_line(&out);
        assert!(line.contains(&expect), "{list}: {line}");
        assert_eq!(exit_code(&out), Some(2), "{list}: {line}");
        assert!(out.stdout.is_empty(), "{list} printed a report");
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_fleet_of_unreachable_workers_is_summed_up_in_one_short_line() {
    let server = TestServer::start(Behavior::ok(16));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dead.txt");
    // Ports nobody listens on: every worker is refused at once.
    let dead: Vec<String> = (0..300).map(|i| format!("127.0.0.1:{}", 1 + i)).collect();
    std::fs::write(&path, dead.join("\n")).unwrap();
    let list = format!("@{}", path.display());
    let out = run_controller(&["--workers", &list, "-c", "300", "-n", "300", &server.url()]);
    assert_eq!(exit_code(&out), Some(1), "{}", describe_output(&out));
    let line = volley_error_line(&out);
    assert!(line.len() < 2_000, "{} bytes: {line}", line.len());
    assert!(line.contains("127.0.0.1:1") && line.contains("and 297 more workers"), "{line}");
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_worker_whose_io_uring_a_seccomp_filter_blocks_starts_on_epoll_and_says_why_and_how_to_fix_it() {
    let port = free_port();
    let mut cmd = volley_command(["worker", "--listen", &format!("127.0.0.1:{port}")]);
    cmd.env_remove("VOLLEY_TOKEN");
    // ENOSYS, as podman's and containerd's default profiles answer it.
    support::without_io_uring_answering(&mut cmd, libc::ENOSYS);
    // Still serving after 3 s: it did not refuse to start (the timeout kills it).
    let out = match run_with_timeout(cmd, Duration::from_secs(3)) {
        Ok(out) => panic!("the worker exited without io_uring\n{}", describe_output(&out)),
        Err(out) => out,
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("running on epoll, not io_uring"), "{err}");
    assert!(err.contains("io_uring is blocked by a seccomp filter"), "{err}");
    assert!(err.contains("deploy/seccomp/volley-worker.json"), "no fix named: {err}");
}

#[test]
fn workers_found_through_dns_are_every_address_the_name_resolves_to() {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED: needs root and iproute2 (`ip`) to make a network namespace");
        return;
    }
    // One namespace whose resolver asks a DNS server of the test's, on its loopback: `ip netns
    // exec` puts /etc/netns/NAME/resolv.conf in place of /etc/resolv.conf for what it runs.
    let ns = format!("volley-{}-dns", std::process::id());
    let mut namespaces = Namespaces::new();
    if let Err(e) = namespaces.add(&ns) {
        eprintln!("SKIPPED: cannot make network namespaces here ({e})");
        return;
    }
    ip(&["-n", &ns, "link", "set", "lo", "up"]).expect("loopback up");
    let etc = EtcNetns(PathBuf::from("/etc/netns").join(&ns));
    std::fs::create_dir_all(&etc.0).expect("/etc/netns/NAME");
    std::fs::write(etc.0.join("resolv.conf"), "nameserver 127.0.0.1\noptions timeout:1 attempts:2\n").unwrap();
    let workers: Vec<std::net::Ipv4Addr> = ["127.0.0.3", "127.0.0.1", "127.0.0.2"].map(|a| a.parse().unwrap()).into();
    let socket = in_netns(&ns, || std::net::UdpSocket::bind("127.0.0.1:53")).expect("the DNS port in the namespace");
    let dns = support::dns::DnsServer::serve(socket, "volley-worker.test", workers.clone());

    let target_addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let target = in_netns(&ns, move || {
        volley_serve::Server::start(volley_serve::ServeConfig { addr: target_addr, ..Default::default() })
    })
    .expect("the target server starts in the namespace");
    let _running: Vec<WorkerProcess> = workers
        .iter()
        .map(|ip| {
            let listen = format!("{ip}:7700");
            WorkerProcess::spawn(volley_in(&ns, &["worker", "--listen", &listen]), listen.parse().unwrap(), Some(&ns))
                .unwrap_or_else(|e| panic!("worker {listen}: {e}"))
        })
        .collect();

    let url = format!("http://{target_addr}/");
    let out = run(volley_in(&ns, &["--workers", "dns:volley-worker.test:7700", "-n", "300", "-c", "3", "-j", &url]));
    assert_success(&out);
    let found =
        "volley: --workers dns:volley-worker.test:7700: 3 workers: 127.0.0.1:7700, 127.0.0.2:7700, 127.0.0.3:7700";
    assert!(stderr(&out).contains(found), "the workers found are not named: {}", describe_output(&out));
    let r = json_report(&out);
    let addresses: Vec<&str> =
        r["workers"].as_array().unwrap().iter().map(|w| w["address"].as_str().unwrap()).collect();
    assert_eq!(addresses, ["127.0.0.1:7700", "127.0.0.2:7700", "127.0.0.3:7700"], "{r}");
    assert_eq!(number(&r, "/requests/ok"), 300, "{r}");
    assert_eq!(target.requests(), 300, "the target's own count");
    assert!(dns.questions() > 0, "the resolver never asked the test's DNS server");

    // A name that does not resolve is a usage error naming it, before any load.
    let out = run(volley_in(&ns, &["--workers", "dns:nobody.test:7700", "-n", "10", &url]));
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(line.starts_with("volley: error: --workers dns:nobody.test:7700: nobody.test does not resolve"), "{line}");
    assert_eq!(target.requests(), 300);
}

/// /etc/netns/NAME, removed with the test's namespace.
struct EtcNetns(PathBuf);

impl Drop for EtcNetns {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
