use std::time::Duration;

use crate::plan::{
    Load, MAX_BODY_BYTES, MAX_NAMES, Mix, NamedRequest, Order, Plan, RequestSpec, Requests, Stage, Stop,
};
use crate::target::Target;

fn plan(stop: Stop) -> Plan {
    let target = Target::parse("http://127.0.0.1:8080/").unwrap();
    Plan::new(target, RequestSpec::new("GET", Vec::new(), Vec::new()), 4, stop)
}

fn stages() -> Vec<Stage> {
    vec![Stage { duration: Duration::from_secs(2), target: 4 }, Stage { duration: Duration::from_secs(1), target: 0 }]
}

#[test]
fn a_plain_plan_is_valid() {
    assert_eq!(plan(Stop::Requests(100)).validate(), Ok(()));
    assert_eq!(plan(Stop::Duration(Duration::from_secs(3))).validate(), Ok(()));
}

#[test]
fn stages_beside_a_request_count_are_refused_since_the_run_would_never_end() {
    for load in [Load::ramp(stages()), Load::staged_rate(10, stages())] {
        let mut p = plan(Stop::Requests(5));
        p.load = load.clone();
        let why = p.validate().unwrap_err().to_string();
        assert!(why.contains("stages with a request count"), "{why}");
        // The same stages with the run's length are a run.
        p.stop = Stop::Duration(Duration::from_secs(3));
        assert_eq!(p.validate(), Ok(()), "{load:?}");
    }
}

#[test]
fn a_body_past_the_limit_is_refused_with_the_limit_in_the_message() {
    let mut p = plan(Stop::Requests(1));
    p.requests = Requests::One(RequestSpec::new("POST", vec![], vec![b'x'; MAX_BODY_BYTES]));
    assert_eq!(p.validate(), Ok(()));
    p.requests = Requests::One(RequestSpec::new("POST", vec![], vec![b'x'; MAX_BODY_BYTES + 1]));
    let why = p.validate().unwrap_err().to_string();
    assert!(why.contains(&MAX_BODY_BYTES.to_string()) && why.contains("64 MiB"), "{why}");
}

#[test]
fn limits_are_named_in_their_messages() {
    let mut p = plan(Stop::Requests(1));
    p.connections = crate::plan::MAX_CONNECTIONS + 1;
    assert!(p.validate().unwrap_err().to_string().contains(&crate::plan::MAX_CONNECTIONS.to_string()));
    let mut p = plan(Stop::Requests(1));
    p.threads = crate::plan::MAX_THREADS + 1;
    assert!(p.validate().unwrap_err().to_string().contains(&crate::plan::MAX_THREADS.to_string()));
    let mut p = plan(Stop::Requests(1));
    p.connect_timeout = Duration::ZERO;
    assert!(p.validate().is_err());
}

fn mix(names: impl Iterator<Item = String>, body: usize) -> Requests {
    let requests = names
        .map(|name| NamedRequest {
            path_and_query: format!("/{name}"),
            name,
            spec: RequestSpec::new("POST", vec![], vec![b'x'; body]),
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        })
        .collect();
    Requests::Mix(Mix { requests, order: Order::InTurn })
}

#[test]
fn a_mix_past_the_names_limit_or_with_bodies_past_the_body_limit_is_refused() {
    let mut p = plan(Stop::Requests(1));
    p.requests = mix((0..MAX_NAMES).map(|i| i.to_string()), 0);
    assert_eq!(p.validate(), Ok(()));
    p.requests = mix((0..=MAX_NAMES).map(|i| i.to_string()), 0);
    let why = p.validate().unwrap_err().to_string();
    assert!(why.contains("1001 names") && why.contains("1000"), "{why}");
    // Many requests may share a name.
    p.requests = mix((0..=MAX_NAMES).map(|i| (i % 3).to_string()), 0);
    assert_eq!(p.validate(), Ok(()));
    // Two bodies, each within the limit, together past it.
    p.requests = mix(["a".to_string(), "b".to_string()].into_iter(), MAX_BODY_BYTES / 2 + 1);
    let why = p.validate().unwrap_err().to_string();
    assert!(why.contains("bodies of") && why.contains("64 MiB"), "{why}");
    p.requests = Requests::Mix(Mix { requests: vec![], order: Order::InTurn });
    assert!(p.validate().unwrap_err().to_string().contains("at least one request"));
}

#[test]
fn a_mix_path_that_does_not_start_with_a_slash_or_holds_a_blank_or_a_line_break_is_refused() {
    for path in ["users", "/a b", "/a\r\nX: y", "/a\u{7f}"] {
        let mut p = plan(Stop::Requests(1));
        p.requests = Requests::Mix(Mix {
            requests: vec![NamedRequest {
                name: "n".into(),
                path_and_query: path.into(),
                spec: RequestSpec::new("GET", vec![], vec![]),
                checks: vec![],
                extract: vec![],
                think: None,
                cookies: false,
                follow_redirects: 0,
                templated: false,
            }],
            order: Order::InTurn,
        });
        let why = p.validate().expect_err(path).to_string();
        assert!(why.contains("a path must start with /"), "{path:?}: {why}");
    }
}

#[test]
fn a_cookie_jar_outside_a_scenario_is_refused() {
    let mut p = plan(Stop::Requests(1));
    let mut requests = mix(["a".to_string()].into_iter(), 0);
    if let Requests::Mix(m) = &mut requests {
        m.requests[0].cookies = true;
    }
    p.requests = requests;
    let why = p.validate().expect_err("a jar in a targets file").to_string();
    assert!(why.contains("a: a cookie jar belongs to a scenario's virtual users"), "{why}");
}

/// One scenario of two steps: a login extracting `from` into `token`, then a step whose path
/// is `path` (a template).
fn flow(from: crate::plan::Source, path: &str) -> Requests {
    let step = |name: &str, path: &str, extract| NamedRequest {
        name: name.into(),
        path_and_query: path.into(),
        spec: RequestSpec::new("GET", vec![], vec![]),
        templated: true,
        checks: vec![],
        extract,
        think: None,
        cookies: false,
        follow_redirects: 0,
    };
    let login = step("login", "/login", vec![crate::plan::Extractor { var: "token".into(), from }]);
    let scenario = crate::plan::Scenario { name: "s".into(), weight: 1, steps: 2, pacing: None };
    Requests::Mix(Mix {
        requests: vec![login, step("next", path, vec![])],
        order: Order::Scenarios { scenarios: vec![scenario], seed: 1 },
    })
}

#[test]
fn extractors_are_held_to_names_sources_and_to_variables_set_before_they_are_used() {
    use crate::plan::{Pattern, Source};
    let why = |requests: Requests| {
        let mut p = plan(Stop::Requests(1));
        p.requests = requests;
        p.validate().err().map(|e| e.to_string())
    };
    let json = || Source::Json { pointer: "/token".into() };
    assert_eq!(why(flow(json(), "/next/{{token}}")), None);
    // Cookie names keep their case; header names are lowercase in a plan.
    assert_eq!(why(flow(Source::Cookie { name: "JSESSIONID".into() }, "/next")), None);
    let bad = why(flow(Source::Cookie { name: "a;b".into() }, "/next")).expect("a bad cookie name");
    assert!(bad.contains("not a cookie name"), "{bad}");
    let bad = why(flow(Source::Header { name: "X-Id".into() }, "/next")).expect("an uppercase header");
    assert!(bad.contains("lowercase header"), "{bad}");
    let pattern = Pattern::new("id=(\\d+)").expect("pattern");
    let bad = why(flow(Source::Regex { pattern, group: 2 }, "/next")).expect("no group 2");
    assert!(bad.contains("has no group 2"), "{bad}");
    // Used by the step that extracts it: too early.
    let Requests::Mix(mut mix) = flow(json(), "/next") else { unreachable!() };
    mix.requests[0].path_and_query = "/login/{{token}}".into();
    let bad = why(Requests::Mix(mix)).expect("used too early");
    assert!(bad.contains("used before an earlier step"), "{bad}");
    // Extractors without scenarios.
    let Requests::Mix(mut mix) = flow(json(), "/next") else { unreachable!() };
    mix.order = Order::InTurn;
    let bad = why(Requests::Mix(mix)).expect("no scenarios");
    assert!(bad.contains("no scenarios"), "{bad}");
}
