use super::*;

fn plan(stop: Stop) -> Plan {
    let request = RequestSpec::new(
        "POST",
        vec![("x-one".into(), "1".into()), ("Content-Type".into(), "text/plain".into())],
        b"body".to_vec(),
    );
    let mut plan = Plan::new(Target::parse("https://example.com:8443/a/b?c=d").expect("valid URL"), request, 12, stop);
    plan.protocol = Protocol::Http2 { streams: 7 };
    plan.threads = 3;
    plan.connect_timeout = Duration::from_secs(3);
    plan.request_timeout = Some(Duration::from_millis(2500));
    plan.keepalive = false;
    plan.tls = TlsOptions { insecure: true, extra_ca_pem: b"-----BEGIN CERTIFICATE-----".to_vec() };
    plan.max_hold = Duration::from_micros(70);
    plan.rate = Some(Rate { per_second: 1234, offset: Duration::from_micros(271) });
    plan.warm_up = Some(Duration::from_secs(2));
    plan.quic_congestion = QuicCongestion::Standard;
    // Stages make the run's length: a counted run has none (Plan::validate).
    if matches!(stop, Stop::Duration(_)) {
        plan.stage_phase = 0.375;
        plan.stages = vec![
            Stage { duration: Duration::from_millis(1500), target: 5000 },
            Stage { duration: Duration::from_secs(3), target: 0 },
        ];
    }
    plan
}

fn assert_same_plan(a: &Plan, b: &Plan) {
    assert_eq!(a.target, b.target);
    assert_eq!(a.request, b.request);
    assert_eq!(a.protocol, b.protocol);
    assert_eq!(a.connections, b.connections);
    assert_eq!(a.threads, b.threads);
    assert_eq!(a.stop, b.stop);
    assert_eq!(a.connect_timeout, b.connect_timeout);
    assert_eq!(a.rate, b.rate);
    assert_eq!(a.stages, b.stages);
    assert_eq!(a.stage_phase, b.stage_phase);
    assert_eq!(a.warm_up, b.warm_up);
    assert_eq!(a.max_hold, b.max_hold);
    assert_eq!(a.request_timeout, b.request_timeout);
    assert_eq!(a.keepalive, b.keepalive);
    assert_eq!(a.tls, b.tls);
    assert_eq!(a.connection_indices, b.connection_indices);
    assert_eq!(a.quic_congestion, b.quic_congestion);
}

#[test]
fn a_connection_ramp_survives_the_wire_with_the_whole_runs_counts_and_its_indices() {
    let mut whole = plan(Stop::Duration(Duration::from_secs(3)));
    whole.rate = None;
    // A rate's phase; a connection ramp has none.
    whole.stage_phase = 0.5;
    whole.stages = vec![
        Stage { duration: Duration::from_secs(1), target: 12 },
        Stage { duration: Duration::from_secs(2), target: 0 },
    ];
    for shard in whole.split(3) {
        let wire = shard_to_proto(&shard, Some(shard.threads as u32));
        assert!(wire.ramp_connections && wire.rate == 0);
        let back = shard_from_proto(&wire, 8).expect("valid");
        assert_same_plan(&back, &shard);
        assert!(back.ramps_connections() && back.stages == whole.stages);
    }
    // An open-model ramp from 0 is still a rate's, however alike its stages look.
    let mut open = whole.clone();
    open.rate = Some(Rate::per_second(0));
    assert!(!shard_to_proto(&open, None).ramp_connections);
    let good = shard_to_proto(&whole.split(3)[2], None);
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("with a rate", Box::new(|s| s.rate = 5)),
        ("never opens", Box::new(|s| s.stages.iter_mut().for_each(|st| st.target = 0))),
        ("never opens", Box::new(|s| s.stages.clear())),
        ("more than the 1000000", Box::new(|s| s.stages[0].target = 1_000_001)),
        ("indices", Box::new(|s| s.connection_step = 0)),
        ("indices", Box::new(|s| s.connection_first = 999_999)),
        ("indices", Box::new(|s| s.connection_step = u64::MAX)),
    ];
    for (why, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard, 4).expect_err(why).to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
}

#[test]
fn a_plan_survives_the_wire() {
    for stop in [Stop::Requests(1000), Stop::Duration(Duration::from_millis(10_500))] {
        let p = plan(stop);
        let shard = shard_to_proto(&p, Some(3));
        assert_same_plan(&shard_from_proto(&shard, 99).expect("valid shard"), &p);
    }
    let mut p = plan(Stop::Requests(5));
    p.request_timeout = None;
    p.keepalive = true;
    p.tls = TlsOptions::default();
    p.protocol = Protocol::Http1;
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p, Some(3)), 1).expect("valid shard"), &p);
    p.protocol = Protocol::Http3 { streams: 9 };
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p, Some(3)), 1).expect("valid shard"), &p);
    p.quic_congestion = QuicCongestion::Loopback;
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p, Some(3)), 1).expect("valid shard"), &p);
}

#[test]
fn a_shards_rate_caps_its_threads_and_a_rate_beyond_the_engines_is_refused() {
    let mut shard = shard_to_proto(&plan(Stop::Requests(100)), Some(3));
    shard.stages.clear();
    shard.rate = 2;
    let p = shard_from_proto(&shard, 8).expect("valid");
    assert_eq!((p.threads, p.rate.map(|r| r.per_second)), (2, Some(2)), "a thread keeps one request per second");
    shard.rate = MAX_RATE + 1;
    let err = shard_from_proto(&shard, 8).expect_err("refused").to_string();
    assert!(err.contains("a worker takes"), "{err}");
    shard.rate = 0;
    shard.stages.clear();
    assert_eq!(shard_from_proto(&shard, 8).expect("closed model").rate, None);
}

#[test]
fn stages_from_zero_are_the_open_model_and_too_many_are_refused() {
    let mut shard = shard_to_proto(&plan(Stop::Duration(Duration::from_secs(5))), Some(8));
    shard.rate = 0;
    shard.stages = vec![v1::Stage { duration_nanos: 1_000_000_000, target: 3 }];
    let p = shard_from_proto(&shard, 8).expect("valid");
    assert_eq!(p.rate.map(|r| r.per_second), Some(0));
    assert_eq!(p.threads, 3, "threads capped at the peak rate");
    shard.stages = vec![v1::Stage { duration_nanos: 1_000_000_000, target: 0 }];
    assert!(shard_from_proto(&shard, 8).expect_err("nothing to send").to_string().contains("never"));
    shard.stages = vec![v1::Stage { duration_nanos: 1, target: 1 }; MAX_STAGES + 1];
    assert!(shard_from_proto(&shard, 8).expect_err("too many").to_string().contains("stages"));
}

#[test]
fn threads_default_to_the_workers_cores_capped_at_the_connections() {
    let p = plan(Stop::Requests(100));
    let shard = shard_to_proto(&p, None);
    assert_eq!(shard.threads, 0);
    assert_eq!(shard_from_proto(&shard, 8).expect("valid").threads, 8);
    assert_eq!(shard_from_proto(&shard, 64).expect("valid").threads, 12);
    assert_eq!(shard_from_proto(&shard, 0).expect("valid").threads, 1);
    let shard = shard_to_proto(&p, Some(40));
    assert_eq!(shard_from_proto(&shard, 8).expect("valid").threads, 12);
    let mut wide = shard_to_proto(&p, None);
    wide.connections = 5000;
    assert_eq!(shard_from_proto(&wide, 100_000).expect("valid").threads, MAX_THREADS);
}

#[test]
fn connections_and_threads_beyond_what_the_command_line_allows_are_refused_with_the_limit() {
    let good = shard_to_proto(&plan(Stop::Requests(100)), None);
    let mut most = good.clone();
    (most.connections, most.threads) = (1_000_000, 1024);
    assert_eq!(shard_from_proto(&most, 4).expect("at the limits").threads, 1024);
    for (connections, threads, named) in [(1_000_001, 0, "1000000"), (u32::MAX, 0, "1000000"), (10, 1025, "1024")] {
        let mut shard = good.clone();
        (shard.connections, shard.threads) = (connections, threads);
        let err = shard_from_proto(&shard, 4).expect_err("refused").to_string();
        assert!(err.contains(named) && err.contains("a worker takes"), "{connections}/{threads}: {err}");
    }
}

#[test]
fn a_shard_the_engine_cannot_run_is_refused() {
    let good = shard_to_proto(&plan(Stop::Requests(100)), None);
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("protocol", Box::new(|s| s.protocol = 999)),
        ("url", Box::new(|s| s.url = "ftp://x/".into())),
        ("url", Box::new(|s| s.url = String::new())),
        ("connections", Box::new(|s| s.connections = 0)),
        ("neither", Box::new(|s| s.requests = 0)),
        ("both", Box::new(|s| s.duration_nanos = 1)),
        ("connect timeout", Box::new(|s| s.connect_timeout_nanos = 0)),
        ("http version", Box::new(|s| s.http_version = 4)),
        ("streams", Box::new(|s| s.streams = 0)),
        ("method", Box::new(|s| s.method = "GET /x HTTP/1.1\r\n".into())),
        ("method", Box::new(|s| s.method = String::new())),
        ("header name", Box::new(|s| s.headers.push(v1::Header { name: "a b".into(), value: "v".into() }))),
        ("header value", Box::new(|s| s.headers.push(v1::Header { name: "a".into(), value: "v\r\nX: y".into() }))),
        ("quic congestion", Box::new(|s| s.quic_congestion = 2)),
    ];
    for (what, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        assert!(shard_from_proto(&shard, 4).is_err(), "{what} should be refused");
    }
    // A timed shard's stages: their phase, and never beside a request count.
    let timed = shard_to_proto(&plan(Stop::Duration(Duration::from_secs(5))), None);
    let cases: Vec<(&str, Spoil)> = vec![
        ("phase", Box::new(|s| s.stage_phase = 0.0)),
        ("phase", Box::new(|s| s.stage_phase = f64::NAN)),
        ("stages with a request count", Box::new(|s| (s.requests, s.duration_nanos) = (100, 0))),
    ];
    for (what, spoil) in cases {
        let mut shard = timed.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard, 4).expect_err(what).to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    let mut old = good.clone();
    old.protocol = 0;
    let err = shard_from_proto(&old, 4).expect_err("old protocol");
    assert_eq!(err.to_string(), "incompatible protocol: the peer speaks 0, this side speaks 5");
}

fn sample_stats() -> Stats {
    let mut s = Stats::new();
    let c = &mut s.counters;
    c.ok = 1234;
    c.bytes_sent = 99_000;
    c.bytes_received = 1_234_567;
    c.connects = 17;
    c.aborted = 3;
    c.clamped = 1;
    c.refused = 9;
    c.late = 11;
    c.blocked = 12;
    c.unsent = 13;
    c.truncated = 14;
    c.dropped_packets = 15;
    for (i, kind) in ErrorKind::ALL.into_iter().enumerate() {
        c.add_errors(kind, i as u64 * 10 + 1);
    }
    c.add_status(200, 1200);
    c.add_status(404, 30);
    c.add_status(503, 4);
    c.retry_after.add_status(503, 3);
    c.retry_after.add_status(429, 1);
    c.retry_after.largest_seconds = Some(30);
    c.retry_after.dates = 1;
    let h = &mut s.histograms;
    for v in 1..2000u64 {
        h.latency.record(v * v * 37 + 1_000).expect("in range");
        h.ttfb.record(v * 1_111).expect("in range");
    }
    h.connect.record_n(150_000, 17).expect("in range");
    h.hold.record_n(0, 1000).expect("in range");
    h.hold.record_n(180_000, 234).expect("in range");
    h.service.record_n(70_000, 1234).expect("in range");
    h.lateness.record_n(3_000, 1200).expect("in range");
    h.lateness.record_n(2_000_000, 11).expect("in range");
    s
}

fn assert_same_stats(a: &Stats, b: &Stats) {
    assert_eq!(a.counters, b.counters);
    for (x, y) in [
        (&a.histograms.latency, &b.histograms.latency),
        (&a.histograms.connect, &b.histograms.connect),
        (&a.histograms.ttfb, &b.histograms.ttfb),
        (&a.histograms.hold, &b.histograms.hold),
        (&a.histograms.service, &b.histograms.service),
        (&a.histograms.lateness, &b.histograms.lateness),
    ] {
        assert_eq!(x.len(), y.len());
        assert_eq!(x.min(), y.min());
        assert_eq!(x.max(), y.max());
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(x.value_at_quantile(q), y.value_at_quantile(q), "quantile {q}");
        }
        assert_eq!(x, y);
    }
}

#[test]
fn stats_survive_the_wire_exactly() {
    let s = sample_stats();
    let back = stats_from_proto(&stats_to_proto(&s)).expect("decodes");
    assert_same_stats(&s, &back);
    assert_eq!(back.counters.statuses().collect::<Vec<_>>(), vec![(200, 1200), (404, 30), (503, 4)]);
    assert_eq!(back.counters.errors_of(ErrorKind::Tls), 41);
    assert_eq!(back.counters.retry_after.statuses().collect::<Vec<_>>(), vec![(429, 1), (503, 3)]);
    assert_eq!((back.counters.retry_after.largest_seconds, back.counters.retry_after.dates), (Some(30), 1));
}

#[test]
fn absent_stats_are_empty() {
    let empty = stats_from_proto(&v1::Stats::default()).expect("empty is fine");
    assert_same_stats(&empty, &Stats::new());
}

#[test]
fn broken_stats_are_refused() {
    let mut p = stats_to_proto(&sample_stats());
    p.latency = b"garbage".to_vec();
    assert!(matches!(stats_from_proto(&p), Err(WireError::Histogram(_))));
    let mut p = stats_to_proto(&sample_stats());
    p.counters.as_mut().expect("counters").status.insert(70_000, 1);
    assert!(matches!(stats_from_proto(&p), Err(WireError::Stats(_))));
    let mut p = stats_to_proto(&sample_stats());
    p.counters.as_mut().expect("counters").retry_after.insert(1_000, 1);
    assert!(matches!(stats_from_proto(&p), Err(WireError::Stats(_))));
}

#[test]
fn error_samples_survive_the_wire() {
    let samples: Vec<_> = ErrorKind::ALL.into_iter().map(|k| (k, format!("{} went wrong", k.name()))).collect();
    assert_eq!(error_samples_from_proto(&error_samples_to_proto(&samples)).expect("known kinds"), samples);
    let unknown = [v1::ErrorSample { kind: "gremlins".into(), message: String::new() }];
    assert!(matches!(error_samples_from_proto(&unknown), Err(WireError::ErrorKind(k)) if k == "gremlins"));
}

#[test]
fn io_uring_support_survives_the_wire() {
    let ring = RingSupport { kernel: "6.12.1".into(), tuned: true, min_wait: false };
    assert_eq!(ring_from_proto(&ring_to_proto(&ring), "6.12.1").expect("available"), ring);
    let err = ring_from_proto(&ring_unavailable_to_proto("io_uring is disabled"), "6.1").expect_err("unusable");
    assert!(err.to_string().contains("io_uring is disabled"));
}

#[test]
fn events_survive_the_wire() {
    let ring = RingSupport { kernel: String::new(), tuned: true, min_wait: true };
    let outcome = Outcome {
        stats: sample_stats(),
        duration: Duration::from_millis(10_003),
        threads: 4,
        connections: 64,
        client_cpu: Duration::from_millis(7_500),
        interrupted: true,
        error_samples: vec![(ErrorKind::Reset, "connection reset by peer".into())],
        stream_limit: Some(16),
        warm_up: Some(sample_stats()),
        stopped_by: Some("the worker got SIGTERM and shut down".into()),
    };
    let events = vec![
        Event::Accepted { threads: 4, connections: 64, ring: ring.clone() },
        Event::Ready { connected: 63, failed: 1 },
        Event::Started { at_nanos: 123_456_789_012 },
        Event::Interval { second: 3, delta: sample_stats() },
        Event::Finished(Box::new(outcome)),
        Event::Failed("the target went away".into()),
    ];
    for event in events {
        let back = event_from_proto(event_to_proto(event.clone())).expect("decodes");
        match (&event, &back) {
            (
                Event::Accepted { threads: a, connections: b, ring: r },
                Event::Accepted { threads, connections, ring: r2 },
            ) => {
                assert_eq!((a, b, r), (threads, connections, r2));
            }
            (Event::Ready { connected: a, failed: b }, Event::Ready { connected, failed }) => {
                assert_eq!((a, b), (connected, failed));
            }
            (Event::Started { at_nanos: a }, Event::Started { at_nanos }) => assert_eq!(a, at_nanos),
            (Event::Interval { second: a, delta: d }, Event::Interval { second, delta }) => {
                assert_eq!(a, second);
                assert_same_stats(d, delta);
            }
            (Event::Finished(a), Event::Finished(b)) => {
                assert_same_stats(&a.stats, &b.stats);
                assert_same_stats(a.warm_up.as_ref().expect("sent"), b.warm_up.as_ref().expect("received"));
                assert_eq!(a.stopped_by, b.stopped_by);
                assert_eq!(
                    (
                        a.duration,
                        a.threads,
                        a.connections,
                        a.client_cpu,
                        a.interrupted,
                        &a.error_samples,
                        a.stream_limit
                    ),
                    (
                        b.duration,
                        b.threads,
                        b.connections,
                        b.client_cpu,
                        b.interrupted,
                        &b.error_samples,
                        b.stream_limit
                    )
                );
            }
            (Event::Failed(a), Event::Failed(b)) => assert_eq!(a, b),
            _ => panic!("{event:?} came back as {back:?}"),
        }
    }
    assert!(matches!(event_from_proto(v1::RunEvent { event: None }), Err(WireError::EmptyEvent)));
}
