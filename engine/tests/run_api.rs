//! The engine's API as the controller and (later) the worker use it: a plan in, one snapshot
//! per second out, and totals that equal the sum of what was handed out plus the rest.

use std::time::Duration;

use volley_engine::{Plan, RequestSpec, RunControl, Stats, Stop, Target, TlsOptions, run};

fn plan(url: &str, stop: Stop) -> Plan {
    Plan {
        target: Target::parse(url).unwrap(),
        request: RequestSpec::new("GET", vec![], vec![]),
        connections: 4,
        threads: 2,
        stop,
        connect_timeout: Duration::from_secs(2),
        request_timeout: Some(Duration::from_secs(5)),
        keepalive: true,
        tls: TlsOptions::default(),
    }
}

fn built_in_server() -> volley_serve::Server {
    let config = volley_serve::ServeConfig { addr: "127.0.0.1:0".parse().unwrap(), ..Default::default() };
    volley_serve::Server::start(config).unwrap()
}

#[test]
fn snapshots_arrive_once_per_second_and_never_exceed_the_total() {
    let server = built_in_server();
    let mut snapshots = Vec::new();
    let result = run(&plan(&server.url(), Stop::Duration(Duration::from_millis(2500))), &RunControl::new(), &mut |s| {
        snapshots.push(s.clone())
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
