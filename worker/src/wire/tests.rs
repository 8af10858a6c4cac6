use super::*;
use volley_engine::{MAX_RATE, MAX_STAGES, MAX_THREADS};

/// A mix of three requests under two names, each with its own method, path, headers and body.
fn mix(order: Order) -> Requests {
    let request = |name: &str, method: &str, path: &str, headers: Vec<(String, String)>, body: &[u8]| NamedRequest {
        name: name.into(),
        path_and_query: path.into(),
        spec: RequestSpec::new(method, headers, body.to_vec()),
        // A template's path, blanks in its slots and all, crosses the wire as written.
        templated: path.contains("{{"),
        checks: vec![],
        extract: vec![],
        think: None,
        cookies: false,
        follow_redirects: 0,
    };
    Requests::Mix(Mix {
        requests: vec![
            request("home", "GET", "/", vec![], b""),
            request(
                "search",
                "GET",
                "/search?q={{random_int 1 9}}&page=2",
                vec![("accept".into(), "text/html".into())],
                b"",
            ),
            NamedRequest {
                checks: vec![
                    Check {
                        name: "answered".into(),
                        rule: CheckRule::Status(vec![200..=299, 404..=404]),
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "fast".into(),
                        rule: CheckRule::LatencyBelow(Duration::from_micros(2500)),
                        on_failure: volley_engine::OnFailure::Abort,
                    },
                    Check {
                        name: "says ok".into(),
                        rule: CheckRule::BodyContains(b"ok".to_vec()),
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "a token".into(),
                        rule: CheckRule::BodyMatches(volley_engine::CheckPattern::new("t-[0-9]+").expect("pattern")),
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "small".into(),
                        rule: CheckRule::BodySize(1..=4096),
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "id 7".into(),
                        rule: CheckRule::Json {
                            pointer: "/data/0/id".into(),
                            equals: Some(volley_engine::JsonValue(serde_json::json!({"id": [7, "x", null]}))),
                        },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "has id".into(),
                        rule: CheckRule::Json { pointer: "/id".into(), equals: None },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "typed".into(),
                        rule: CheckRule::Header { name: "content-type".into(), test: CheckText::Exists },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "json".into(),
                        rule: CheckRule::Header {
                            name: "content-type".into(),
                            test: CheckText::Contains(b"json".to_vec()),
                        },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "exactly".into(),
                        rule: CheckRule::Header { name: "x-a".into(), test: CheckText::Equals(b"".to_vec()) },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                    Check {
                        name: "session".into(),
                        rule: CheckRule::Header {
                            name: "set-cookie".into(),
                            test: CheckText::Matches(volley_engine::CheckPattern::new("^sid=").expect("pattern")),
                        },
                        on_failure: volley_engine::OnFailure::Continue,
                    },
                ],
                ..request(
                    "home",
                    "POST",
                    "/login",
                    vec![("content-type".into(), "application/json".into())],
                    b"{\"a\":1}",
                )
            },
        ],
        order,
    })
}

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
    let rate = Rate { per_second: 1234, offset: Duration::from_micros(271) };
    // Stages make the run's length: a counted run has none (Plan::validate).
    plan.load = match stop {
        Stop::Duration(_) => Load::Open {
            rate,
            stages: vec![
                Stage { duration: Duration::from_millis(1500), target: 5000 },
                Stage { duration: Duration::from_secs(3), target: 0 },
            ],
            phase: 0.375,
            indices: ConnectionIndices { first: 2, step: 3 },
        },
        Stop::Requests(_) => Load::Open { rate, stages: Vec::new(), phase: 0.5, indices: ConnectionIndices::WHOLE },
    };
    plan.warm_up = Some(Duration::from_secs(2));
    plan.quic_congestion = QuicCongestion::Standard;
    plan.source_addrs = vec!["10.1.0.1".parse().unwrap(), "10.1.0.2".parse().unwrap()];
    plan
}

fn assert_same_plan(a: &Plan, b: &Plan) {
    assert_eq!(a.target, b.target);
    assert_eq!(a.requests, b.requests);
    assert_eq!(a.protocol, b.protocol);
    assert_eq!(a.connections, b.connections);
    assert_eq!(a.threads, b.threads);
    assert_eq!(a.stop, b.stop);
    assert_eq!(a.connect_timeout, b.connect_timeout);
    assert_eq!(a.load, b.load);
    assert_eq!(a.warm_up, b.warm_up);
    assert_eq!(a.max_hold, b.max_hold);
    assert_eq!(a.request_timeout, b.request_timeout);
    assert_eq!(a.keepalive, b.keepalive);
    assert_eq!(a.tls, b.tls);
    assert_eq!(a.quic_congestion, b.quic_congestion);
    assert_eq!(a.source_addrs, b.source_addrs);
}

/// The shard's closed load, to spoil in a test.
fn closed(shard: &mut v1::Shard) -> &mut v1::ClosedLoad {
    match &mut shard.load {
        Some(v1::shard::Load::Closed(closed)) => closed,
        other => panic!("a closed load: {other:?}"),
    }
}

/// The shard's open load, to spoil in a test.
fn open(shard: &mut v1::Shard) -> &mut v1::OpenLoad {
    match &mut shard.load {
        Some(v1::shard::Load::Open(open)) => open,
        other => panic!("an open load: {other:?}"),
    }
}

#[test]
fn a_connection_ramp_survives_the_wire_with_the_whole_runs_counts_and_its_indices() {
    let mut whole = plan(Stop::Duration(Duration::from_secs(3)));
    let stages = vec![
        Stage { duration: Duration::from_secs(1), target: 12 },
        Stage { duration: Duration::from_secs(2), target: 0 },
    ];
    whole.load = Load::ramp(stages.clone());
    for shard in whole.split(3) {
        let mut wire = shard_to_proto(&shard);
        assert_eq!(closed(&mut wire).ramp.len(), 2);
        let back = shard_from_proto(&wire).expect("valid");
        assert_same_plan(&back, &shard);
        assert_eq!(back.load.stages(), stages);
    }
    // An open-model ramp from 0 is still a rate's, however alike its stages look.
    let mut from_zero = whole.clone();
    from_zero.load = Load::staged_rate(0, stages);
    assert!(matches!(shard_to_proto(&from_zero).load, Some(v1::shard::Load::Open(_))));
    let good = shard_to_proto(&whole.split(3)[2]);
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("no connection would be opened", Box::new(|s| closed(s).ramp.iter_mut().for_each(|st| st.target = 0))),
        ("more than the 1000000", Box::new(|s| closed(s).ramp[0].target = 1_000_001)),
        ("indices", Box::new(|s| closed(s).connection_step = 0)),
        ("indices", Box::new(|s| closed(s).connection_first = 999_999)),
        ("indices", Box::new(|s| closed(s).connection_step = u64::MAX)),
        ("no load", Box::new(|s| s.load = None)),
    ];
    for (why, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard).expect_err(why).to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
    // A closed load without stages keeps every connection open.
    let mut all_open = good.clone();
    closed(&mut all_open).ramp.clear();
    assert_eq!(shard_from_proto(&all_open).expect("valid").load.stages(), []);
}

#[test]
fn a_plan_survives_the_wire() {
    for stop in [Stop::Requests(1000), Stop::Duration(Duration::from_millis(10_500))] {
        let p = plan(stop);
        assert_same_plan(&shard_from_proto(&shard_to_proto(&p)).expect("valid shard"), &p);
    }
    let mut p = plan(Stop::Requests(5));
    p.request_timeout = None;
    p.keepalive = true;
    p.tls = TlsOptions::default();
    p.protocol = Protocol::Http1;
    p.load = Load::closed();
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p)).expect("valid shard"), &p);
    p.protocol = Protocol::Http3 { streams: 9 };
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p)).expect("valid shard"), &p);
    p.quic_congestion = QuicCongestion::Loopback;
    assert_same_plan(&shard_from_proto(&shard_to_proto(&p)).expect("valid shard"), &p);
}

#[test]
fn a_worker_runs_the_threads_it_is_given_and_refuses_more_than_the_plan_can_use() {
    let mut shard = shard_to_proto(&plan(Stop::Requests(100)));
    assert_eq!(shard_from_proto(&shard).expect("valid").threads, 3, "no thread count is decided again");
    open(&mut shard).rate = 2;
    let err = shard_from_proto(&shard).expect_err("3 threads for 2 a second").to_string();
    assert!(err.contains("3 threads for 2 requests per second"), "{err}");
    shard.threads = 2;
    assert_eq!(shard_from_proto(&shard).expect("valid").threads, 2);
    open(&mut shard).rate = MAX_RATE + 1;
    let err = shard_from_proto(&shard).expect_err("refused").to_string();
    assert!(err.contains(&MAX_RATE.to_string()), "{err}");
    open(&mut shard).rate = 0;
    assert!(shard_from_proto(&shard).expect_err("no rate").to_string().contains("at least 1 request"));
    let mut shard = shard_to_proto(&plan(Stop::Requests(100)));
    for (threads, why) in [(0, "at least 1"), (13, "13 threads for 12 connections")] {
        shard.threads = threads;
        let err = shard_from_proto(&shard).expect_err(why).to_string();
        assert!(err.contains(why), "{err}");
    }
}

#[test]
fn stages_from_zero_are_the_open_model_and_too_many_are_refused() {
    let mut shard = shard_to_proto(&plan(Stop::Duration(Duration::from_secs(5))));
    open(&mut shard).rate = 0;
    open(&mut shard).stages = vec![v1::Stage { duration_nanos: 1_000_000_000, target: 3 }];
    let p = shard_from_proto(&shard).expect("valid");
    assert!(matches!(p.load, Load::Open { rate: Rate { per_second: 0, .. }, .. }));
    open(&mut shard).stages = vec![v1::Stage { duration_nanos: 1_000_000_000, target: 0 }];
    assert!(shard_from_proto(&shard).expect_err("nothing to send").to_string().contains("every rate is 0"));
    open(&mut shard).stages = vec![v1::Stage { duration_nanos: 1, target: 1 }; MAX_STAGES + 1];
    assert!(shard_from_proto(&shard).expect_err("too many").to_string().contains("stages"));
}

#[test]
fn connections_and_threads_beyond_what_the_command_line_allows_are_refused_with_the_limit() {
    let mut good = shard_to_proto(&plan(Stop::Requests(100)));
    good.load = Some(v1::shard::Load::Closed(v1::ClosedLoad { connection_step: 1, ..Default::default() }));
    let mut most = good.clone();
    (most.connections, most.threads) = (1_000_000, 1024);
    assert_eq!(shard_from_proto(&most).expect("at the limits").threads, MAX_THREADS);
    for (connections, threads, named) in [(1_000_001, 1, "1000000"), (u32::MAX, 1, "1000000"), (2000, 1025, "1024")] {
        let mut shard = good.clone();
        (shard.connections, shard.threads) = (connections, threads);
        let err = shard_from_proto(&shard).expect_err("refused").to_string();
        assert!(err.contains(named) && err.contains("a run may have"), "{connections}/{threads}: {err}");
    }
}

#[test]
fn a_shard_the_engine_cannot_run_is_refused() {
    let good = shard_to_proto(&plan(Stop::Requests(100)));
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("protocol", Box::new(|s| s.protocol = 999)),
        ("url", Box::new(|s| s.url = "ftp://x/".into())),
        ("url", Box::new(|s| s.url = String::new())),
        ("connections", Box::new(|s| s.connections = 0)),
        ("neither", Box::new(|s| s.stop = None)),
        ("zero requests", Box::new(|s| s.stop = Some(v1::shard::Stop::Requests(0)))),
        ("zero duration", Box::new(|s| s.stop = Some(v1::shard::Stop::DurationNanos(0)))),
        ("connect timeout", Box::new(|s| s.connect_timeout_nanos = 0)),
        ("http version", Box::new(|s| s.http_version = 4)),
        ("streams", Box::new(|s| s.streams = 0)),
        ("streams", Box::new(|s| s.streams = 65_537)),
        ("method", Box::new(|s| s.method = "GET /x HTTP/1.1\r\n".into())),
        ("method", Box::new(|s| s.method = String::new())),
        ("header name", Box::new(|s| s.headers.push(v1::Header { name: "a b".into(), value: "v".into() }))),
        ("header value", Box::new(|s| s.headers.push(v1::Header { name: "a".into(), value: "v\r\nX: y".into() }))),
        ("quic congestion", Box::new(|s| s.quic_congestion = 2)),
        ("hold", Box::new(|s| s.max_hold_nanos = Some(100_000_001))),
    ];
    for (what, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        assert!(shard_from_proto(&shard).is_err(), "{what} should be refused");
    }
    // Source addresses: each parsed, counted before any is, and judged by `Plan::validate`.
    let cases: Vec<(&str, Spoil)> = vec![
        ("bad source address '10.1.0.300'", Box::new(|s| s.source_addrs.push("10.1.0.300".into()))),
        ("bad source address '10.1.0.0/30'", Box::new(|s| s.source_addrs.push("10.1.0.0/30".into()))),
        ("10.1.0.1 is listed twice", Box::new(|s| s.source_addrs.push("10.1.0.1".into()))),
        ("10.1.0.1 and ::1 are of two families", Box::new(|s| s.source_addrs.push("::1".into()))),
        ("0.0.0.0 is not an address", Box::new(|s| s.source_addrs = vec!["0.0.0.0".into()])),
        (
            "1025 source addresses is more than the 1024",
            Box::new(|s| s.source_addrs = (0..1025).map(|i| format!("10.2.{}.{}", i / 256, i % 256)).collect()),
        ),
    ];
    for (what, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard).expect_err(what).to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    // A timed shard's stages: their phase, and never beside a request count.
    let timed = shard_to_proto(&plan(Stop::Duration(Duration::from_secs(5))));
    let cases: Vec<(&str, Spoil)> = vec![
        ("phase", Box::new(|s| open(s).stage_phase = 0.0)),
        ("phase", Box::new(|s| open(s).stage_phase = f64::NAN)),
        ("stages with a request count", Box::new(|s| s.stop = Some(v1::shard::Stop::Requests(100)))),
    ];
    for (what, spoil) in cases {
        let mut shard = timed.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard).expect_err(what).to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    let mut old = good.clone();
    old.protocol = 8;
    let err = shard_from_proto(&old).expect_err("old protocol");
    let expected =
        format!("incompatible protocol: the peer speaks 8, this side speaks {}", volley_proto::PROTOCOL_VERSION);
    assert_eq!(err.to_string(), expected);
}

#[test]
fn a_mix_survives_the_wire_exactly_in_every_part_of_a_split() {
    let scenarios = vec![
        Scenario { name: "browse".into(), weight: 3, steps: 2, pacing: None },
        Scenario { name: "login".into(), weight: 1, steps: 1, pacing: None },
    ];
    for order in [
        Order::InTurn,
        Order::Random { seed: 0xfeed_beef_dead_0001 },
        Order::Scenarios { scenarios, seed: 0xfeed_beef_dead_0002 },
    ] {
        let mut whole = plan(Stop::Requests(1000));
        if order.scenarios().is_some() {
            // A count of iterations of several steps has no warm-up (yet).
            whole.warm_up = None;
        }
        whole.requests = mix(order.clone());
        let mut seeds = Vec::new();
        for part in whole.split(3) {
            let wire = shard_to_proto(&part);
            assert_eq!(wire.mix.len(), 3);
            assert!(wire.method.is_empty() && wire.headers.is_empty() && wire.body.is_empty());
            let scenarios = if order.scenarios().is_some() { 2 } else { 0 };
            assert_eq!(shard_bounds(&wire), Bounds { names: 2, scenarios });
            let back = shard_from_proto(&wire).expect("valid");
            assert_same_plan(&back, &part);
            assert_eq!(back.requests, part.requests);
            let (Some(back), Some(whole)) = (back.requests.mix(), whole.requests.mix()) else { panic!("a mix") };
            assert_eq!(back.requests, whole.requests, "every part has the whole mix");
            assert_eq!(back.order.scenarios(), whole.order.scenarios(), "every part has the whole scenarios");
            if let Some(seed) = back.order.seed() {
                seeds.push(seed);
            }
        }
        // A random order's (and scenarios') parts each draw their own sequence.
        seeds.dedup();
        assert_eq!(seeds.len(), if order == Order::InTurn { 0 } else { 3 }, "{seeds:?}");
    }
    // The one request has no mix, no order and no names.
    let one = shard_to_proto(&plan(Stop::Requests(1000)));
    assert!(one.mix.is_empty() && one.order.is_none());
    assert_eq!(shard_bounds(&one), Bounds::default());
}

#[test]
fn a_mixs_requests_are_checked_like_the_one_request_and_counted_before_they_are_copied() {
    let mut p = plan(Stop::Requests(100));
    p.requests = mix(Order::InTurn);
    let good = shard_to_proto(&p);
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("bad method", Box::new(|s| s.mix[1].method = "GET / HTTP/1.1\r\n".into())),
        ("bad method", Box::new(|s| s.mix[1].method = String::new())),
        ("bad header", Box::new(|s| s.mix[2].headers.push(v1::Header { name: "a".into(), value: "v\r\nX: y".into() }))),
        ("bad header", Box::new(|s| s.mix[0].headers.push(v1::Header { name: "a b".into(), value: "v".into() }))),
        ("bad path", Box::new(|s| s.mix[1].path_and_query = "/x HTTP/1.1\r\nX: y".into())),
        ("bad path", Box::new(|s| s.mix[1].path_and_query = "/a b".into())),
        ("bad path", Box::new(|s| s.mix[1].path_and_query = "x".into())),
        ("bad path", Box::new(|s| s.mix[1].path_and_query = String::new())),
        ("without an order", Box::new(|s| s.order = None)),
        ("beside the one request", Box::new(|s| s.method = "GET".into())),
        ("beside the one request", Box::new(|s| s.body = b"x".to_vec())),
        ("beside the one request", Box::new(|s| s.headers.push(v1::Header { name: "a".into(), value: "b".into() }))),
        ("more than the 100000", Box::new(|s| s.mix = vec![s.mix[0].clone(); MAX_REQUESTS + 1])),
        ("an order for a mix without requests", Box::new(|s| s.mix.clear())),
        ("a check without a rule", Box::new(|s| s.mix[2].checks[0].rule = None)),
        (
            "a status check without a status",
            Box::new(|s| s.mix[2].checks[0].rule = Some(v1::check::Rule::Status(v1::StatusRule { ranges: vec![] }))),
        ),
        (
            "not one of status codes, low to high",
            Box::new(|s| {
                let ranges = vec![v1::StatusRange { from: 300, to: 200 }];
                s.mix[2].checks[0].rule = Some(v1::check::Rule::Status(v1::StatusRule { ranges }));
            }),
        ),
        (
            "not one of status codes, low to high",
            Box::new(|s| {
                let ranges = vec![v1::StatusRange { from: 200, to: 70_000 }];
                s.mix[2].checks[0].rule = Some(v1::check::Rule::Status(v1::StatusRule { ranges }));
            }),
        ),
        (
            "not one of status codes, low to high",
            Box::new(|s| {
                let ranges = vec![v1::StatusRange { from: 0, to: 99 }];
                s.mix[2].checks[0].rule = Some(v1::check::Rule::Status(v1::StatusRule { ranges }));
            }),
        ),
        ("a latency bound of 0", Box::new(|s| s.mix[2].checks[1].rule = Some(v1::check::Rule::LatencyBelowNanos(0)))),
        ("a check's name is not empty", Box::new(|s| s.mix[2].checks[0].name = String::new())),
        ("a check's name is not empty", Box::new(|s| s.mix[2].checks[0].name = "a\nb".into())),
        (
            "a body check for nothing",
            Box::new(|s| s.mix[2].checks[2].rule = Some(v1::check::Rule::BodyContains(vec![]))),
        ),
        ("a bad pattern", Box::new(|s| s.mix[2].checks[3].rule = Some(v1::check::Rule::BodyMatches("(".into())))),
        (
            "a body size range from high to low",
            Box::new(|s| s.mix[2].checks[4].rule = Some(v1::check::Rule::BodySize(v1::SizeRange { from: 9, to: 8 }))),
        ),
        (
            "neither empty nor starts with /",
            Box::new(|s| {
                s.mix[2].checks[5].rule =
                    Some(v1::check::Rule::Json(v1::JsonRule { pointer: "id".into(), equals: None }))
            }),
        ),
        (
            "a JSON value that is not JSON",
            Box::new(|s| {
                let json = v1::JsonRule { pointer: "/id".into(), equals: Some("{".into()) };
                s.mix[2].checks[5].rule = Some(v1::check::Rule::Json(json));
            }),
        ),
        (
            "not a lowercase field name",
            Box::new(|s| {
                s.mix[2].checks[7].rule =
                    Some(v1::check::Rule::Header(v1::HeaderRule { name: "Content-Type".into(), test: None }))
            }),
        ),
        (
            "not a lowercase field name",
            Box::new(|s| {
                s.mix[2].checks[7].rule =
                    Some(v1::check::Rule::Header(v1::HeaderRule { name: "a b".into(), test: None }))
            }),
        ),
        (
            "a header check for nothing",
            Box::new(|s| {
                let test = Some(v1::header_rule::Test::Contains(vec![]));
                s.mix[2].checks[7].rule = Some(v1::check::Rule::Header(v1::HeaderRule { name: "a".into(), test }))
            }),
        ),
        (
            "a bad pattern",
            Box::new(|s| {
                let test = Some(v1::header_rule::Test::Matches("[".into()));
                s.mix[2].checks[7].rule = Some(v1::check::Rule::Header(v1::HeaderRule { name: "a".into(), test }))
            }),
        ),
        ("two checks of one name", Box::new(|s| s.mix[2].checks[1].name = s.mix[2].checks[0].name.clone())),
        (
            "more checks than a run may have",
            Box::new(|s| {
                let one = s.mix[2].checks[0].clone();
                s.mix[2].checks = (0..=MAX_CHECKS).map(|i| v1::Check { name: i.to_string(), ..one.clone() }).collect();
            }),
        ),
    ];
    for (why, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard).expect_err(why).to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
    // Names past the limit: Plan::validate's call, which the worker makes on every shard.
    let mut many = good.clone();
    many.mix = (0..=MAX_NAMES)
        .map(|i| v1::MixRequest {
            name: i.to_string(),
            method: "GET".into(),
            path_and_query: "/".into(),
            ..Default::default()
        })
        .collect();
    let err = shard_from_proto(&many).expect_err("too many names").to_string();
    assert!(err.contains("1001 names"), "{err}");
    many.mix.pop();
    assert!(shard_from_proto(&many).is_ok(), "as many names as a run may have");
}

/// A scenario of two steps: a login whose response gives a variable of every kind of source,
/// then a step whose path, header and body use them.
fn extracting_plan() -> Plan {
    let extract = |var: &str, from: ExtractSource| Extractor { var: var.into(), from };
    let login = NamedRequest {
        name: "login".into(),
        path_and_query: "/login".into(),
        spec: RequestSpec::new("POST", vec![], b"{}".to_vec()),
        templated: true,
        checks: vec![],
        extract: vec![
            extract("token", ExtractSource::Json { pointer: "/data/token".into() }),
            extract("rid", ExtractSource::Header { name: "x-request-id".into() }),
            extract("id", ExtractSource::Regex { pattern: CheckPattern::new(r"id=(\d+)").expect("pattern"), group: 1 }),
            extract("session", ExtractSource::Cookie { name: "session".into() }),
        ],
        think: Some(volley_engine::Think::Uniform(Duration::from_millis(5), Duration::from_millis(9))),
        cookies: true,
        follow_redirects: 3,
    };
    let me = NamedRequest {
        name: "me".into(),
        path_and_query: "/users/{{id}}".into(),
        spec: RequestSpec::new(
            "GET",
            vec![("authorization".into(), "Bearer {{token}}".into())],
            b"{{session}}".to_vec(),
        ),
        templated: true,
        checks: vec![],
        extract: vec![],
        think: None,
        cookies: false,
        follow_redirects: 0,
    };
    let mut p = plan(Stop::Requests(100));
    p.warm_up = None;
    let scenarios = vec![Scenario { name: "flow".into(), weight: 1, steps: 2, pacing: None }];
    p.requests = Requests::Mix(Mix { requests: vec![login, me], order: Order::Scenarios { scenarios, seed: 5 } });
    p
}

#[test]
fn a_scenarios_pacing_survives_the_wire_in_the_closed_model() {
    let mut p = extracting_plan();
    p.load = Load::Closed { ramp: Vec::new(), indices: ConnectionIndices::WHOLE };
    let Requests::Mix(mix) = &mut p.requests else { panic!("a mix") };
    let Order::Scenarios { scenarios, .. } = &mut mix.order else { panic!("scenarios") };
    scenarios[0].pacing = Some(Duration::from_millis(20));
    let wire = shard_to_proto(&p);
    let back = shard_from_proto(&wire).expect("valid");
    assert_eq!(back.requests.scenarios().expect("scenarios")[0].pacing, Some(Duration::from_millis(20)));
    assert_same_plan(&back, &p);
}

#[test]
fn a_scenarios_extractors_survive_the_wire_with_the_steps_that_use_their_variables() {
    let p = extracting_plan();
    let wire = shard_to_proto(&p);
    assert_eq!(wire.mix[0].extract.len(), 4);
    let back = shard_from_proto(&wire).expect("valid");
    assert_same_plan(&back, &p);
    assert_eq!(back.requests.variables(), ["token", "rid", "id", "session"]);
}

#[test]
fn an_extractor_without_a_source_with_a_bad_pattern_or_one_too_many_is_refused() {
    let good = shard_to_proto(&extracting_plan());
    type Spoil = Box<dyn Fn(&mut v1::Shard)>;
    let regex =
        |pattern: &str, group| Some(v1::extractor::Source::Regex(v1::RegexSource { pattern: pattern.into(), group }));
    let cases: Vec<(&str, Spoil)> = vec![
        ("extractor of 'token': an extractor without a source", Box::new(|s| s.mix[0].extract[0].source = None)),
        ("extractor of 'id': a bad pattern", Box::new(move |s| s.mix[0].extract[2].source = regex("(", 0))),
        (
            "login: more than the 16 extractors a step may have",
            // Counted before any is compiled: not one of these patterns would compile.
            Box::new(move |s| {
                let bad = v1::Extractor { var: "x".into(), source: regex("(", 0) };
                s.mix[0].extract = vec![bad; MAX_EXTRACTORS + 1];
            }),
        ),
        (
            "more variables than a run may have",
            // Five steps of sixteen variables each, refused at the 65th.
            Box::new(|s| {
                let (login, one) = (s.mix[0].clone(), s.mix[0].extract[0].clone());
                let each = |i: usize| v1::Extractor { var: format!("v{i}"), ..one.clone() };
                s.mix = (0..5)
                    .map(|k| v1::MixRequest {
                        extract: (0..MAX_EXTRACTORS).map(|i| each(k * MAX_EXTRACTORS + i)).collect(),
                        ..login.clone()
                    })
                    .collect();
            }),
        ),
        // The rest is Plan::validate's, which the worker makes on every shard.
        ("has no group 2", Box::new(move |s| s.mix[0].extract[2].source = regex(r"id=(\d+)", 2))),
        (
            "is not a lowercase header field name",
            Box::new(|s| s.mix[0].extract[1].source = Some(v1::extractor::Source::Header("X-Id".into()))),
        ),
        ("variable `a-b`", Box::new(|s| s.mix[0].extract[0].var = "a-b".into())),
        ("`{{id}}` is used before", Box::new(|s| s.mix.swap(0, 1))),
    ];
    for (why, spoil) in cases {
        let mut shard = good.clone();
        spoil(&mut shard);
        let err = shard_from_proto(&shard).expect_err(why).to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
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
    c.iterations = 16;
    c.extract_failed = 17;
    c.abandoned = 18;
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

/// `sample_stats` with statistics for names 0 and 2 of a mix: one with errors and status
/// codes beside its latencies, one with an error only (no latency at all); name 1 has none.
fn sample_stats_with_names() -> Stats {
    let mut s = sample_stats();
    let home = s.names.entry(0);
    home.counters.ok = 900;
    home.counters.add_status(200, 890);
    home.counters.add_status(404, 10);
    home.counters.add_errors(ErrorKind::Timeout, 3);
    home.counters.extract_failed = 5;
    home.counters.abandoned = 8;
    for v in 0..900u64 {
        home.latency.record(v * v * 51 + 2_000).expect("in range");
        home.ttfb.record(v * 977 + 1_500).expect("in range");
    }
    *home.check(0) = CheckCounts { passed: 880, failed: 20 };
    *home.check(1) = CheckCounts { passed: 0, failed: 7 };
    s.names.entry(2).counters.add_errors(ErrorKind::Reset, 1);
    s
}

fn assert_same_histogram(x: &hdrhistogram::Histogram<u64>, y: &hdrhistogram::Histogram<u64>) {
    assert_eq!(x.len(), y.len());
    assert_eq!(x.min(), y.min());
    assert_eq!(x.max(), y.max());
    for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        assert_eq!(x.value_at_quantile(q), y.value_at_quantile(q), "quantile {q}");
    }
    assert_eq!(x, y);
}

fn assert_same_stats(a: &Stats, b: &Stats) {
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.names.iter().map(|(i, _)| i).collect::<Vec<_>>(), b.names.iter().map(|(i, _)| i).collect::<Vec<_>>());
    for ((_, x), (_, y)) in a.names.iter().zip(b.names.iter()) {
        assert_eq!(x.counters, y.counters);
        assert_eq!(x.checks, y.checks);
        assert_same_histogram(&x.latency, &y.latency);
        assert_same_histogram(&x.ttfb, &y.ttfb);
    }
    assert_eq!(a.scenarios.len(), b.scenarios.len());
    for ((i, x), (j, y)) in a.scenarios.iter().zip(b.scenarios.iter()) {
        let (xs, ys) = (
            (x.started, x.completed, x.abandoned, x.late, x.missed),
            (y.started, y.completed, y.abandoned, y.late, y.missed),
        );
        assert_eq!((i, xs), (j, ys));
        assert_same_histogram(&x.duration, &y.duration);
    }
    for (x, y) in [
        (&a.histograms.latency, &b.histograms.latency),
        (&a.histograms.connect, &b.histograms.connect),
        (&a.histograms.ttfb, &b.histograms.ttfb),
        (&a.histograms.hold, &b.histograms.hold),
        (&a.histograms.service, &b.histograms.service),
        (&a.histograms.lateness, &b.histograms.lateness),
    ] {
        assert_same_histogram(x, y);
    }
}

#[test]
fn stats_survive_the_wire_exactly() {
    let s = sample_stats();
    let back = stats_from_proto(&stats_to_proto(&s), Bounds::names(0)).expect("decodes");
    assert_same_stats(&s, &back);
    assert_eq!(back.counters.statuses().collect::<Vec<_>>(), vec![(200, 1200), (404, 30), (503, 4)]);
    assert_eq!(back.counters.errors_of(ErrorKind::Tls), 41);
    assert_eq!(back.counters.retry_after.statuses().collect::<Vec<_>>(), vec![(429, 1), (503, 3)]);
    assert_eq!((back.counters.retry_after.largest_seconds, back.counters.retry_after.dates), (Some(30), 1));
}

#[test]
fn stats_per_name_survive_the_wire_exactly_and_names_without_any_stay_absent() {
    let s = sample_stats_with_names();
    let wire = stats_to_proto(&s);
    assert_eq!(wire.names.iter().map(|n| n.index).collect::<Vec<_>>(), [0, 2], "only names with counts are sent");
    assert!(wire.names[1].latency.is_empty() && wire.names[1].first_byte.is_empty(), "no latency, no bytes");
    let back = stats_from_proto(&wire, Bounds::names(3)).expect("decodes");
    assert_same_stats(&s, &back);
    assert!(back.names.get(1).is_none());
    let home = back.names.get(0).expect("sent");
    assert_eq!(home.counters.statuses().collect::<Vec<_>>(), [(200, 890), (404, 10)]);
    assert_eq!((home.counters.ok, home.counters.errors_of(ErrorKind::Timeout), home.latency.len()), (900, 3, 900));
    let reset = back.names.get(2).expect("sent");
    assert_eq!((reset.counters.errors(), reset.latency.len(), reset.ttfb.len()), (1, 0, 0));
}

#[test]
fn stats_for_a_name_the_mix_does_not_have_or_for_one_twice_are_refused() {
    let wire = stats_to_proto(&sample_stats_with_names());
    let err = stats_from_proto(&wire, Bounds::names(2)).expect_err("past the mix").to_string();
    assert!(err.contains("name 2, past the 2 names of its mix"), "{err}");
    let err = stats_from_proto(&wire, Bounds::names(0)).expect_err("no mix").to_string();
    assert!(err.contains("name 0 in a run without a mix"), "{err}");
    // However many names the caller says, no index reaches MAX_NAMES.
    let mut far = wire.clone();
    far.names[1].index = MAX_NAMES as u32;
    let err = stats_from_proto(&far, Bounds::names(usize::MAX)).expect_err("past every mix").to_string();
    assert!(err.contains(&format!("name {MAX_NAMES}, past the {MAX_NAMES} names")), "{err}");
    far.names[1].index = u32::MAX;
    assert!(matches!(stats_from_proto(&far, Bounds::names(usize::MAX)), Err(WireError::Stats(_))));
    let mut twice = wire.clone();
    twice.names[1].index = 0;
    let err = stats_from_proto(&twice, Bounds::names(3)).expect_err("twice").to_string();
    assert!(err.contains("name 0 twice"), "{err}");
    let mut broken = wire.clone();
    broken.names[0].first_byte = b"garbage".to_vec();
    assert!(matches!(stats_from_proto(&broken, Bounds::names(3)), Err(WireError::Histogram(_))));
    let mut broken = wire.clone();
    broken.names[0].counters.as_mut().expect("counters").status.insert(1_000, 1);
    assert!(matches!(stats_from_proto(&broken, Bounds::names(3)), Err(WireError::Stats(_))));
    // Counts of more checks than a run may have are refused before they are kept.
    let mut many = wire;
    many.names[0].checks = vec![v1::CheckCounts { passed: 1, failed: 0 }; MAX_CHECKS + 1];
    let err = stats_from_proto(&many, Bounds::names(3)).expect_err("too many checks").to_string();
    assert!(err.contains(&format!("counts of {} checks for name 0", MAX_CHECKS + 1)), "{err}");
}

#[test]
fn stats_per_scenario_survive_the_wire_exactly_and_past_the_run_s_scenarios_are_refused() {
    let mut s = Stats::new();
    let flow = s.scenarios.entry(1);
    (flow.started, flow.completed, flow.abandoned, flow.late, flow.missed) = (40, 31, 7, 2, 5);
    for ms in [3, 9, 27] {
        flow.duration.record(ms * 1_000_000).expect("in range");
    }
    let wire = stats_to_proto(&s);
    assert_eq!(wire.scenarios.iter().map(|x| x.index).collect::<Vec<_>>(), [1], "only scenarios with counts");
    let back = stats_from_proto(&wire, Bounds { names: 0, scenarios: 2 }).expect("decodes");
    assert!(back.scenarios.get(0).is_none());
    let flow = back.scenarios.get(1).expect("sent");
    assert_eq!((flow.started, flow.completed, flow.abandoned, flow.late, flow.missed), (40, 31, 7, 2, 5));
    assert_same_histogram(&flow.duration, &s.scenarios.get(1).expect("kept").duration);
    let err = stats_from_proto(&wire, Bounds { names: 0, scenarios: 1 }).expect_err("past").to_string();
    assert!(err.contains("scenario 1, past the 1 scenarios of its run"), "{err}");
    let err = stats_from_proto(&wire, Bounds::names(3)).expect_err("none").to_string();
    assert!(err.contains("scenario 1 in a run without scenarios"), "{err}");
    let mut twice = wire.clone();
    twice.scenarios.push(twice.scenarios[0].clone());
    let err = stats_from_proto(&twice, Bounds { names: 0, scenarios: 2 }).expect_err("twice").to_string();
    assert!(err.contains("scenario 1 twice"), "{err}");
    let mut broken = wire;
    broken.scenarios[0].duration = b"garbage".to_vec();
    assert!(matches!(stats_from_proto(&broken, Bounds { names: 0, scenarios: 2 }), Err(WireError::Histogram(_))));
}

#[test]
fn absent_stats_are_empty() {
    let empty = stats_from_proto(&v1::Stats::default(), Bounds::names(0)).expect("empty is fine");
    assert_same_stats(&empty, &Stats::new());
}

#[test]
fn broken_stats_are_refused() {
    let mut p = stats_to_proto(&sample_stats());
    p.latency = b"garbage".to_vec();
    assert!(matches!(stats_from_proto(&p, Bounds::names(0)), Err(WireError::Histogram(_))));
    let mut p = stats_to_proto(&sample_stats());
    p.counters.as_mut().expect("counters").status.insert(70_000, 1);
    assert!(matches!(stats_from_proto(&p, Bounds::names(0)), Err(WireError::Stats(_))));
    let mut p = stats_to_proto(&sample_stats());
    p.counters.as_mut().expect("counters").retry_after.insert(1_000, 1);
    assert!(matches!(stats_from_proto(&p, Bounds::names(0)), Err(WireError::Stats(_))));
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
    let ring =
        RingSupport { kernel: "6.12.1".into(), tuned: true, min_wait: false, engine: Engine::IoUring, fallback: None };
    assert_eq!(ring_from_proto(&ring_to_proto(&ring), "6.12.1").expect("available"), ring);
    let err = ring_from_proto(&ring_unavailable_to_proto("io_uring is disabled"), "6.1").expect_err("unusable");
    assert!(err.to_string().contains("io_uring is disabled"));
}

#[test]
fn an_epoll_worker_and_why_it_fell_back_survive_the_wire_and_an_older_workers_ring_is_io_uring() {
    let why = "io_uring is blocked by a seccomp filter".to_string();
    let epoll = RingSupport {
        kernel: "6.1".into(),
        tuned: false,
        min_wait: false,
        engine: Engine::Epoll,
        fallback: Some(why.clone()),
    };
    let wire = ring_to_proto(&epoll);
    assert_eq!((wire.available, wire.error.as_str(), wire.engine.as_str()), (false, why.as_str(), "epoll"));
    assert_eq!(ring_from_proto(&wire, "6.1").expect("epoll runs"), epoll);
    // A worker of protocol 9 said no engine: available io_uring is io_uring.
    let older =
        v1::IoUring { available: true, error: String::new(), tuned: true, batched_waits: true, engine: String::new() };
    assert_eq!(ring_from_proto(&older, "6.12").expect("available").engine, Engine::IoUring);
    let unknown = v1::IoUring { engine: "kqueue".into(), ..older };
    assert!(ring_from_proto(&unknown, "6.12").is_err());
}

#[test]
fn the_engine_asked_for_survives_the_wire_and_an_unknown_one_is_refused() {
    for choice in [EngineChoice::Auto, EngineChoice::IoUring, EngineChoice::Epoll] {
        let mut plan = plan(Stop::Requests(100));
        plan.engine = choice;
        let shard = shard_to_proto(&plan);
        assert_eq!(shard_from_proto(&shard).expect("decodes").engine, choice);
    }
    let mut shard = shard_to_proto(&plan(Stop::Requests(100)));
    shard.engine = String::new();
    assert_eq!(shard_from_proto(&shard).expect("older controllers mean auto").engine, EngineChoice::Auto);
    shard.engine = "kqueue".into();
    let err = shard_from_proto(&shard).expect_err("unknown engine");
    assert!(err.to_string().contains("engine 'kqueue'"), "{err}");
}

#[test]
fn events_survive_the_wire() {
    let ring =
        RingSupport { kernel: String::new(), tuned: true, min_wait: true, engine: Engine::Epoll, fallback: None };
    let outcome = Outcome {
        stats: sample_stats(),
        duration: Duration::from_millis(10_003),
        threads: 4,
        connections: 64,
        client_cpu: Duration::from_millis(7_500),
        interrupted: true,
        error_samples: vec![(ErrorKind::Reset, "connection reset by peer".into())],
        stream_limit: Some(16),
        warm_up: Some(sample_stats_with_names()),
        stopped_by: Some("the worker got SIGTERM and shut down".into()),
    };
    let events = vec![
        Event::Accepted { threads: 4, connections: 64, ring: ring.clone() },
        Event::Ready { connected: 63, failed: 1 },
        Event::Started { at_nanos: 123_456_789_012 },
        Event::Interval { second: 3, delta: sample_stats_with_names() },
        Event::Finished(Box::new(outcome)),
        Event::Failed("the target went away".into()),
    ];
    for event in events {
        let back = event_from_proto(event_to_proto(event.clone()), Bounds::names(3)).expect("decodes");
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
    assert!(matches!(event_from_proto(v1::RunEvent { event: None }, Bounds::names(0)), Err(WireError::EmptyEvent)));
    // A worker's names are held to its shard's mix in every event that carries statistics.
    let interval = Event::Interval { second: 1, delta: sample_stats_with_names() };
    assert!(matches!(event_from_proto(event_to_proto(interval), Bounds::names(2)), Err(WireError::Stats(_))));
}
