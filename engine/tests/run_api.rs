//! The engine's API as the controller and (later) the worker use it: a plan in, one snapshot
//! per second out, and totals that equal the sum of what was handed out plus the rest; a gated
//! run opens its connections first and sends nothing until its start instant.

use std::time::Duration;

use std::sync::mpsc;
use std::time::Instant;

use volley_engine::{EngineError, MAX_DURATION, Plan, Progress, RequestSpec, RunControl, Stats, Stop, Target, run};

fn plan(url: &str, stop: Stop) -> Plan {
    let mut plan = Plan::new(Target::parse(url).unwrap(), RequestSpec::new("GET", vec![], vec![]), 4, stop);
    plan.threads = 2;
    plan.connect_timeout = Duration::from_secs(2);
    plan.request_timeout = Some(Duration::from_secs(5));
    plan
}

fn built_in_server() -> volley_serve::Server {
    let config = volley_serve::ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
    volley_serve::Server::start(config).unwrap()
}

#[test]
fn snapshots_arrive_once_per_second_and_never_exceed_the_total() {
    let server = built_in_server();
    let mut snapshots = Vec::new();
    let result = run(&plan(&server.url(), Stop::Duration(Duration::from_millis(2500))), &RunControl::new(), &mut |p| {
        if let Progress::Interval(s) = p {
            snapshots.push(s)
        }
    })
    .unwrap();
    let elapsed: Vec<u64> = snapshots.iter().map(|s| s.elapsed.as_secs()).collect();
    assert_eq!(elapsed, vec![1, 2]);
    let mut seen = Stats::new();
    for s in &snapshots {
        assert!(s.delta.counters.ok > 0, "an idle second: {:?}", s.delta.counters);
        seen.merge(&s.delta);
    }
    let total = &result.stats;
    assert!(seen.counters.ok < total.counters.ok, "the last half second is in the total only");
    assert_eq!(total.histograms.latency.len(), total.counters.ok);
    assert!(server.requests() >= total.counters.ok);
}

#[test]
fn a_stop_from_outside_ends_the_run_within_a_fraction_of_a_second() {
    let server = built_in_server();
    let control = RunControl::new();
    let stopper = control.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stopper.stop();
    });
    let started = std::time::Instant::now();
    let result = run(&plan(&server.url(), Stop::Duration(Duration::from_secs(30))), &control, &mut |_| {}).unwrap();
    t.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert!(result.interrupted);
    assert!(result.stats.counters.ok > 0);
}

#[test]
fn a_gated_run_connects_first_and_sends_nothing_before_its_start_instant() {
    let server = built_in_server();
    let control = RunControl::gated();
    let (ready_tx, ready_rx) = mpsc::channel();
    let runner = {
        let control = control.clone();
        let plan = plan(&server.url(), Stop::Requests(100));
        std::thread::spawn(move || {
            let mut started = None;
            let result = run(&plan, &control, &mut |p| match p {
                Progress::Ready { connected, failed } => ready_tx.send((connected, failed)).unwrap(),
                Progress::Started { at } => started = Some(at),
                Progress::Interval(_) => {}
            })
            .unwrap();
            (result, started)
        })
    };
    let ready = ready_rx.recv_timeout(Duration::from_secs(5)).expect("Ready within 5 s");
    assert_eq!(ready, (4, 0));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(server.connections(), 4, "the connections are open");
    assert_eq!(server.requests(), 0, "nothing is sent before the start");
    let start = Instant::now() + Duration::from_millis(100);
    control.start_at(start);
    let (result, started) = runner.join().unwrap();
    let started = started.expect("a Started event");
    assert!(started >= start, "started {:?} before the gate", start - started);
    assert!(started - start < Duration::from_millis(20), "started {:?} late", started - start);
    assert_eq!(result.stats.counters.ok, 100);
    assert_eq!(server.requests(), 100);
    assert_eq!(result.stats.histograms.connect.len(), 4, "pre-opened connections are still measured");
}

#[test]
fn a_gated_run_that_is_stopped_before_its_start_sends_nothing() {
    let server = built_in_server();
    let control = RunControl::gated();
    let stopper = control.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        stopper.stop();
    });
    let result = run(&plan(&server.url(), Stop::Duration(Duration::from_secs(30))), &control, &mut |_| {}).unwrap();
    t.join().unwrap();
    assert!(result.interrupted);
    assert_eq!(result.stats.counters.total(), 0);
    assert_eq!(result.stats.counters.aborted, 0);
    assert_eq!(result.duration, Duration::ZERO);
    assert_eq!(server.requests(), 0);
}

#[test]
fn a_pinned_target_is_loaded_at_its_pins_and_its_name_is_never_resolved() {
    let server = built_in_server();
    let port = server.local_addr().port();
    // `.invalid` cannot resolve (RFC 6761): the run reaches the server only through the pin.
    let url = format!("http://rebind.invalid:{port}/");
    let unpinned = run(&plan(&url, Stop::Requests(10)), &RunControl::new(), &mut |_| {});
    assert!(unpinned.is_err(), "a name that cannot resolve was loaded");
    let mut pinned = plan(&url, Stop::Requests(40));
    pinned.target = pinned.target.pinned_to(vec![server.local_addr()]);
    let result = run(&pinned, &RunControl::new(), &mut |_| {}).unwrap();
    assert_eq!(result.stats.counters.ok, 40);
    assert_eq!(server.requests(), 40);
}

#[test]
fn a_plan_with_a_duration_beyond_a_year_is_refused_before_any_connection_instead_of_panicking_a_thread() {
    let server = built_in_server();
    let too_long = MAX_DURATION + Duration::from_secs(1);
    let whole = plan(&server.url(), Stop::Requests(10));
    // Each as a plan from the wire could carry it: the run's length and both timeouts.
    let with = |change: &dyn Fn(&mut Plan)| {
        let mut p = whole.clone();
        change(&mut p);
        p
    };
    let plans = [
        with(&|p| p.stop = Stop::Duration(Duration::MAX)),
        with(&|p| p.stop = Stop::Duration(too_long)),
        with(&|p| p.connect_timeout = Duration::MAX),
        with(&|p| p.request_timeout = Some(Duration::MAX)),
    ];
    for p in plans {
        match run(&p, &RunControl::new(), &mut |_| {}) {
            Err(EngineError::Invalid(why)) => assert!(why.to_string().contains("365 days"), "{why}"),
            other => panic!(
                "{:?} / {:?} / {:?}: {:?}",
                p.stop,
                p.connect_timeout,
                p.request_timeout,
                other.map(|r| r.stats.counters)
            ),
        }
    }
    assert_eq!(server.requests(), 0);
    // A year exactly is allowed.
    let ok = with(&|p| {
        p.connect_timeout = MAX_DURATION;
        p.request_timeout = Some(MAX_DURATION);
    });
    assert_eq!(run(&ok, &RunControl::new(), &mut |_| {}).unwrap().stats.counters.ok, 10);
}
