//! End to end: pacing. A paced scenario's users each start an iteration on a fixed cadence, so
//! a run's iterations are its users over the pacing per second, whatever the server's speed;
//! an iteration that starts after its slot (its user still busy with the one before) is counted
//! late, and its latency counts from its slot.

use crate::support;

use support::{Behavior, TestServer, WorkerProcess, describe_output, number, scenario_file};

/// Every 50 ms.
fn paced() -> String {
    support::paced_scenario("50ms")
}

/// The scenario's iterations, as (started, completed, late).
fn iterations(r: &serde_json::Value) -> (u64, u64, u64) {
    let s = &r["scenarios"][0];
    (number(s, "/iterations/started"), number(s, "/iterations/completed"), number(s, "/iterations/late"))
}

#[test]
fn paced_users_start_one_iteration_per_period_each_locally_and_across_workers() {
    let server = TestServer::start(Behavior::ok(10));
    let (_dir, file) = scenario_file("paced.toml", server.url().trim_end_matches('/'), &paced());
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--http2", "-p", "2"][..], &["--workers", &list][..]] {
        let before = server.requests();
        let args = [&["-c", "4", "-z", "1s", "-j", "--scenario", &file][..], extra].concat();
        let out = support::run_volley(&args);
        assert!(out.status.success(), "{extra:?}: {}", describe_output(&out));
        let r = support::json_report(&out);
        let (started, completed, late) = iterations(&r);
        // 4 users, one iteration each per 50 ms for a second, each from its own phase: 19 to
        // 21 apiece, where an unpaced run against this server would make thousands.
        assert!((72..=88).contains(&started), "{extra:?}: {started} iterations: {r}");
        assert!(started - completed <= 4, "{extra:?}: at most one a user under way at the end: {r}");
        // The server answered every request counted ok, and may have answered one a user had
        // in flight at the end, which the report counts aborted.
        let (served, ok) = (server.requests() - before, number(&r, "/requests/ok"));
        assert!((ok..=ok + 4).contains(&served), "{extra:?}: served {served}, ok {ok}");
        // Late by more than 1 ms: on a machine the rest of the suite keeps busy, a thread
        // wakes that late now and then; the timing tests, alone on the machine, hold a paced
        // search's steps to 1%.
        assert!(late * 4 <= started, "{extra:?}: {late} of {started} late against a server this fast: {r}");
        let missed = number(&r["scenarios"][0], "/iterations/missed");
        assert!(missed <= 4, "{extra:?}: at most the slot a user was waking for at the end: {r}");
        assert_eq!(r["scenarios"][0]["pacingSeconds"].as_f64(), Some(0.05), "{extra:?}");
    }
}

#[test]
fn an_iteration_that_starts_after_its_slot_is_late_and_its_latency_counts_from_the_slot() {
    // Each answer takes 30 ms, each user's slots come every 20 ms: from its second on, every
    // iteration starts late, later each time (10 ms more per iteration).
    let server = TestServer::start(Behavior::ok(10).delay(std::time::Duration::from_millis(30)));
    let (_dir, file) = scenario_file("late.toml", server.url().trim_end_matches('/'), &support::paced_scenario("20ms"));
    let out = support::run_volley(["-c", "2", "-t", "1", "-n", "20", "-j", "--scenario", &file]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = support::json_report(&out);
    let (started, completed, late) = iterations(&r);
    assert_eq!((started, completed), (20, 20), "{r}");
    assert!((18..=20).contains(&late), "all but each user's first: {late}: {r}");
    let slowest = r["latencySeconds"]["max"].as_f64().expect("a max");
    assert!(slowest >= 0.09, "a last iteration 60 ms or more behind its slot waited that long too: {slowest} s");
    // For a second: each user's 50 slots came due, it started one every 30 ms and missed the
    // rest, still behind at the end.
    let out = support::run_volley(["-c", "2", "-t", "1", "-z", "1s", "-j", "--scenario", &file]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = support::json_report(&out);
    let (started, missed) =
        (number(&r["scenarios"][0], "/iterations/started"), number(&r["scenarios"][0], "/iterations/missed"));
    assert!((96..=102).contains(&(started + missed)), "2 users × 50 slots: {started} + {missed}: {r}");
    assert!((25..=40).contains(&missed), "a third of them missed: {missed}: {r}");
    let text =
        String::from_utf8_lossy(&support::run_volley(["-c", "2", "-t", "1", "-n", "4", "--scenario", &file]).stdout)
            .into_owned();
    assert!(text.contains("Scenarios (iteration duration and pacing in ms"), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("frame") && l.contains("20.000")), "{text}");
}

#[test]
fn pacing_out_of_range_on_some_scenarios_only_or_with_a_rate_is_refused_in_one_line() {
    let two = format!("{}\n[[scenario]]\nname = \"other\"\n  [[scenario.step]]\n  path = \"/other\"\n", paced());
    for (scenario, extra, wanted) in [
        (support::paced_scenario("2h"), &[][..], "paced.toml:5:10: pacing '2h' is not between 1 ns and 3600 s"),
        (support::paced_scenario("0ms"), &[][..], "pacing '0ms' is not a duration: duration must be more than zero"),
        (support::paced_scenario("often"), &[][..], "pacing 'often' is not a duration"),
        (two, &[][..], "pacing is every scenario's or none's"),
        (paced(), &["--rate", "10"][..], "pacing gives each user its own cadence: it cannot go with --rate"),
    ] {
        let (_dir, path) = scenario_file("paced.toml", "http://127.0.0.1:9", &scenario);
        let out = support::run_volley([&["-n", "1", "--scenario", &path][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{wanted}: {}", describe_output(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(wanted), "{wanted}: {stderr}");
    }
}

#[test]
fn the_frames_example_keeps_its_cadence_against_volley_serve() {
    let server = volley_serve::Server::start(volley_serve::ServeConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        ..volley_serve::ServeConfig::default()
    })
    .unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenarios/frames.toml");
    let out = support::run_volley(["-c", "4", "-z", "1s", "-j", "--scenario", example, &server.url()]);
    assert!(out.status.success(), "{}", describe_output(&out));
    let r = support::json_report(&out);
    let (started, completed, late) = iterations(&r);
    // 4 users, a frame each per 20 ms for a second: 49 to 51 apiece.
    assert!((190..=210).contains(&started), "{started} frames: {r}");
    assert!(started - completed <= 4 && late * 4 <= started, "{r}");
}
