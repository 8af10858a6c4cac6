use std::path::PathBuf;
use std::time::Duration;

use volley_engine::{
    CheckPattern, CheckRule, CheckText, ExtractSource, JsonValue, MAX_EXTRACTORS, MAX_KEPT_CHECKS, MAX_NAMES,
    MAX_REQUESTS, MAX_SCENARIOS, MAX_VARIABLES, OnFailure, Think,
};

use super::*;

/// A directory for one test's files.
struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Files {
        Files(tempfile::tempdir().expect("a temporary directory"))
    }

    /// Writes `name` (under the directory, its parents made) and gives its path.
    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("the file's directory");
        std::fs::write(&path, bytes).expect("a test file");
        path
    }

    /// The scenario file `name`, read as `--scenario` reads it with `url` on the command line;
    /// an error as printed, the directory left out of its file names.
    fn read(&self, name: &str, url: Option<&str>) -> Result<ScenarioFile, String> {
        let url = url.map(|u| Target::parse(u).expect("a URL"));
        let dir = format!("{}/", self.0.path().display());
        read(&self.0.path().join(name), url.as_ref(), volley_engine::DEFAULT_MAX_FEEDER_BYTES)
            .map_err(|e| e.to_string().replace(&dir, ""))
    }
}

/// `text` as the scenario file `s.toml`, read as [`Files::read`] does.
fn read_text(text: &str, url: Option<&str>) -> Result<ScenarioFile, String> {
    let files = Files::new();
    files.write("s.toml", text);
    files.read("s.toml", url)
}

/// Each request as (name, method, path and query).
fn summary(file: &ScenarioFile) -> Vec<(&str, &str, &str)> {
    file.requests.iter().map(|r| (r.name.as_str(), r.spec.method.as_str(), r.path_and_query.as_str())).collect()
}

/// Each scenario as (name, weight, steps).
fn scenarios(file: &ScenarioFile) -> Vec<(&str, u32, u32)> {
    file.scenarios.iter().map(|s| (s.name.as_str(), s.weight, s.steps)).collect()
}

fn headers(request: &NamedRequest) -> Vec<(&str, &str)> {
    request.spec.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect()
}

/// A file whose origin is `http://a:1`, with `scenarios` after it.
fn with_origin(scenarios: &str) -> String {
    format!("origin = \"http://a:1\"\n{scenarios}")
}

#[test]
fn scenarios_are_their_steps_in_order_with_weights_names_headers_and_bodies() {
    let files = Files::new();
    files.write("bodies/cart.json", r#"{"sku":7}"#);
    let text = r#"
origin = "http://127.0.0.1:8080"
[defaults]
headers = { accept = "application/json", "X-Run" = "1" }

[[scenario]]
name = "browse"
weight = 80
  [[scenario.step]]
  name = "home"
  path = "/?q=1"
  headers = { Accept = "text/html", cookie = ["a=1", "b=2"] }
  [[scenario.step]]
  path = "/items/7?full=1"

[[scenario]]
name = "buy"
  [[scenario.step]]
  method = "POST"
  path = "http://127.0.0.1:8080/cart"
  body_file = "bodies/cart.json"
  [[scenario.step]]
  name = "home"
  method = "PUT"
  path = "/checkout"
  body = 'paid'
"#;
    files.write("s.toml", text);
    let file = files.read("s.toml", None).unwrap();
    assert_eq!(file.origin.to_string(), "http://127.0.0.1:8080/");
    assert_eq!(scenarios(&file), [("browse", 80, 2), ("buy", 1, 2)], "a weight is 1 unless given");
    assert_eq!(
        summary(&file),
        [
            ("home", "GET", "/?q=1"),
            ("GET /items/7", "GET", "/items/7?full=1"),
            ("POST /cart", "POST", "/cart"),
            ("home", "PUT", "/checkout"),
        ],
        "steps may share a name; a name left out is METHOD PATH without the query, as a target's"
    );
    let [home, item, cart, checkout] = &file.requests[..] else { panic!("four steps") };
    assert_eq!(
        headers(home),
        [("Accept", "text/html"), ("cookie", "a=1"), ("cookie", "b=2"), ("X-Run", "1")],
        "the step's own first, in the order written; a default of a name it has (in any case) left out"
    );
    assert_eq!(headers(item), [("accept", "application/json"), ("X-Run", "1")]);
    assert_eq!(cart.spec.body, br#"{"sku":7}"#, "body_file is relative to the scenario file's directory");
    assert_eq!(checkout.spec.body, b"paid");
    assert!(home.spec.body.is_empty() && item.spec.body.is_empty());
}

#[test]
fn the_origin_is_the_files_or_the_command_lines_and_they_must_agree() {
    let steps = "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"/x\"\n";
    let from_url = read_text(steps, Some("http://a:81")).unwrap();
    assert_eq!(from_url.origin.to_string(), "http://a:81/");
    let from_file = read_text(&format!("origin = \"http://a:81\"\n{steps}"), None).unwrap();
    assert_eq!(from_file.origin.to_string(), "http://a:81/");
    let both = read_text(&format!("origin = \"http://A:81/\"\n{steps}"), Some("http://a:81")).unwrap();
    assert_eq!(both.origin.to_string(), "http://a:81/", "the same origin, however written");
    let cases = [
        (
            format!("origin = \"http://a:82\"\n{steps}"),
            Some("http://a:81"),
            "s.toml:1:10: http://a:82 is not the origin of the command line's URL (http://a:81); a run has one",
        ),
        (
            format!("origin = \"http://a:81/api\"\n{steps}"),
            None,
            "s.toml:1:10: the origin http://a:81/api has a path: give only scheme, host and port, the paths are the steps'",
        ),
        (format!("origin = \"a:81\"\n{steps}"), None, "s.toml:1:10: invalid URL 'a:81': no scheme (http:// or https://)"),
        (
            steps.to_string(),
            Some("http://a:81/api"),
            "--scenario: the URL http://a:81/api has a path; with a scenario file the URL gives only the origin (scheme, host, port), the paths are the file's",
        ),
        (
            steps.to_string(),
            None,
            "s.toml:4:8: /x is a path, and neither the file's origin nor a URL on the command line gives its origin",
        ),
        (
            with_origin("[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"http://b:1/x\"\n"),
            None,
            "s.toml:5:8: http://b:1 is not the file's origin (http://a:1); a run has one",
        ),
        (
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"http://a:1/\"\n[[scenario.step]]\npath = \"http://b:1/\"\n"
                .to_string(),
            None,
            "s.toml:6:8: http://b:1 is a second origin; a run has one (http://a:1)",
        ),
    ];
    for (text, url, says) in cases {
        assert_eq!(read_text(&text, url).map(|f| f.origin).unwrap_err(), says, "{text}");
    }
    // Without the file's origin or a URL, absolute URLs give it, as in a targets file.
    let absolute = "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"http://a:1/x?y\"\n";
    let file = read_text(absolute, None).unwrap();
    assert_eq!((file.origin.to_string(), summary(&file)), ("http://a:1/".into(), vec![("GET /x", "GET", "/x?y")]));
}

#[test]
fn what_is_wrong_is_pointed_at_by_line_and_column() {
    let step = "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"/\"\n";
    let cases = [
        // TOML itself: the toml crate's words, where its parser stopped.
        ("[[scenario]\nname = \"a\"\n".to_string(), "s.toml:1:12: unclosed array table, expected `]`"),
        ("origin = = 1\n".to_string(), "s.toml:1:10: extra `=`, expected nothing"),
        // Unknown keys, at the key, with the keys there are.
        (
            format!("{step}headerz = {{}}\n"),
            "s.toml:5:1: unknown field `headerz`, expected one of `name`, `method`, `path`, `headers`, `body`, `body_file`, `template`, `check`, `extract`, `think`, `cookies`, `redirects`, `max_redirects`",
        ),
        (
            "[[scenario]]\nname = \"a\"\nsteps = []\n".to_string(),
            "s.toml:3:1: unknown field `steps`, expected one of `name`, `weight`, `cookies`, `redirects`, `max_redirects`, `pacing`, `step`",
        ),
        (format!("[defaults]\nheader = {{}}\n{step}"), "s.toml:2:1: unknown field `header`, expected `headers`"),
        (
            format!("orign = \"http://a:1\"\n{step}"),
            "s.toml:1:1: unknown field `orign`, expected one of `origin`, `defaults`, `scenario`, `feeder`",
        ),
        // Missing keys, at their table's header.
        (
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nmethod = \"GET\"\n".into(),
            "s.toml:3:1: missing field `path`",
        ),
        ("[[scenario]]\nweight = 2\n[[scenario.step]]\npath = \"/\"\n".into(), "s.toml:1:1: missing field `name`"),
        // Weights: a whole number, at least 1.
        (
            format!("[[scenario]]\nname = \"a\"\nweight = 0\n{}", "[[scenario.step]]\npath = \"/\"\n"),
            "s.toml:3:10: invalid value: integer `0`, expected a weight: a whole number from 1 to 4294967295",
        ),
        (
            format!("[[scenario]]\nname = \"a\"\nweight = -2\n{}", "[[scenario.step]]\npath = \"/\"\n"),
            "s.toml:3:10: invalid value: integer `-2`, expected a weight: a whole number from 1 to 4294967295",
        ),
        (
            format!("[[scenario]]\nname = \"a\"\nweight = 1.5\n{}", "[[scenario.step]]\npath = \"/\"\n"),
            "s.toml:3:10: invalid type: floating point `1.5`, expected a weight: a whole number from 1 to 4294967295",
        ),
        (
            format!("[[scenario]]\nname = \"a\"\nweight = 4294967296\n{}", "[[scenario.step]]\npath = \"/\"\n"),
            "s.toml:3:10: invalid value: integer `4294967296`, expected a weight: a whole number from 1 to 4294967295",
        ),
        // Scenarios: distinct names, at least one step.
        (
            format!("{step}{step}"),
            "s.toml:6:8: a second scenario named 'a' (the first is on line 2): scenario names are distinct",
        ),
        (
            format!("[[scenario]]\nname = \"empty\"\n\n{step}"),
            "s.toml:2:8: the scenario 'empty' has no steps: give it at least one [[scenario.step]]",
        ),
        ("[[scenario]]\nname = \" \"\n[[scenario.step]]\npath = \"/\"\n".into(), "s.toml:2:8: the name is empty"),
        // Steps: a method, a path, headers, one body.
        (format!("{step}method = \"GE T\"\n"), "s.toml:5:10: ' ' cannot be in a method ('GE T')"),
        (format!("{step}method = \"\"\n"), "s.toml:5:10: expected 'METHOD URL', such as 'GET http://127.0.0.1:8080/'"),
        (
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"users/7\"\n".into(),
            "s.toml:4:8: 'users/7' is neither a path (starting with /) nor an absolute URL (http:// or https://)",
        ),
        (
            format!("{step}headers = {{ x = 1 }}\n"),
            "s.toml:5:17: invalid type: integer `1`, expected a header value: a string, or an array of strings",
        ),
        (
            format!("{step}headers = {{ x = [\"a\", 2] }}\n"),
            "s.toml:5:23: invalid type: integer `2`, expected a string",
        ),
        (format!("{step}headers = {{ \"a b\" = \"x\" }}\n"), "s.toml:5:13: 'a b' is not a header name"),
        (
            format!("{step}headers = {{ x = \"a\\r\\nb: c\" }}\n"),
            "s.toml:5:17: the value of x holds a line break or NUL, which a header value cannot",
        ),
        (
            format!("[defaults]\nheaders = {{ x = [\"ok\", \"a\\u0000\"] }}\n{step}"),
            "s.toml:2:24: the value of x holds a line break or NUL, which a header value cannot",
        ),
        (
            format!("{step}body = \"x\"\nbody_file = \"x.json\"\n"),
            "s.toml:6:13: body and body_file cannot both be given: one body a step",
        ),
        (
            format!("{step}body_file = \"x.json\"\n"),
            "s.toml:5:13: the body file x.json: No such file or directory (os error 2)",
        ),
        (format!("{step}name = \"a\\u001b[2Jb\"\n"), "s.toml:5:8: the name 'a\\u{1b}[2Jb' holds control characters"),
    ];
    for (text, says) in cases {
        // The command line's URL gives the origin, so that the positions are the text's own.
        assert_eq!(read_text(&text, Some("http://a:1")).map(|f| f.origin).unwrap_err(), says, "{text}");
    }
}

#[test]
fn a_file_that_cannot_be_read_is_too_large_is_not_utf8_or_has_no_scenario_is_named() {
    let files = Files::new();
    assert_eq!(
        files.read("missing.toml", None).map(|f| f.origin).unwrap_err(),
        "--scenario missing.toml: No such file or directory (os error 2)"
    );
    let no_scenario =
        "--scenario s.toml: the file has no scenario: give at least one [[scenario]] with a [[scenario.step]]";
    for text in ["", "# nothing\n", "origin = \"http://a:1\"\n[defaults]\n"] {
        assert_eq!(read_text(text, None).map(|f| f.origin).unwrap_err(), no_scenario, "{text:?}");
    }
    files.write("latin1.toml", b"[[scenario]]\nname = \"caf\xe9\"\n");
    assert_eq!(
        files.read("latin1.toml", None).map(|f| f.origin).unwrap_err(),
        "latin1.toml:2:12: the file is not UTF-8 text"
    );
    // Past the bound by one byte, sparse: nothing beyond the bound is read.
    let large = std::fs::File::create(files.0.path().join("large.toml")).expect("a file");
    large.set_len(MAX_FILE_BYTES + 1).expect("a sparse file");
    assert_eq!(
        files.read("large.toml", None).map(|f| f.origin).unwrap_err(),
        "--scenario large.toml: the file is larger than 256 MiB, the most a scenario file may be"
    );
}

#[test]
fn a_byte_order_mark_is_not_part_of_the_toml() {
    let file = read_text("\u{feff}[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"/\"\n", Some("http://a/"));
    assert_eq!(scenarios(&file.unwrap()), [("a", 1, 1)]);
}

#[test]
fn scenarios_steps_and_names_beyond_a_runs_limits_are_refused_at_the_first_too_many() {
    let step = "[[scenario.step]]\npath = \"/\"\n";
    // Each scenario takes 4 lines: the 1001st starts on line 4000 + 2 (after the origin).
    let many: String = (0..=MAX_SCENARIOS).map(|n| format!("[[scenario]]\nname = \"s{n}\"\n{step}")).collect();
    let e = read_text(&with_origin(&many), None).map(|f| f.origin).unwrap_err();
    assert_eq!(
        e,
        format!("s.toml:{}:1: more than the {MAX_SCENARIOS} scenarios a run may have", 4 * MAX_SCENARIOS + 2)
    );
    // Steps count over all scenarios: two halves and one more.
    let half = step.repeat(MAX_REQUESTS / 2);
    let text = with_origin(&format!("[[scenario]]\nname = \"a\"\n{half}[[scenario]]\nname = \"b\"\n{half}{step}"));
    let e = read_text(&text, None).map(|f| f.origin).unwrap_err();
    let line = 1 + 2 + 2 * MAX_REQUESTS + 2 + 1;
    assert_eq!(
        e,
        format!("s.toml:{line}:1: more than the {MAX_REQUESTS} steps a run may have, over all its scenarios")
    );
    // Names: the step whose name is the 1001st distinct one.
    let named: String = (0..=MAX_NAMES).map(|n| format!("{step}name = \"n{n}\"\n")).collect();
    let e =
        read_text(&with_origin(&format!("[[scenario]]\nname = \"a\"\n{named}")), None).map(|f| f.origin).unwrap_err();
    let line = 1 + 2 + 3 * MAX_NAMES + 1;
    assert_eq!(e, format!("s.toml:{line}:1: more than the {MAX_NAMES} names a run may have: steps may share a name"));
    // Shared names are one.
    let shared: String = (0..=MAX_NAMES).map(|_| format!("{step}name = \"n\"\n")).collect();
    let file = read_text(&with_origin(&format!("[[scenario]]\nname = \"a\"\n{shared}")), None).unwrap();
    assert_eq!(scenarios(&file), [("a", 1, MAX_NAMES as u32 + 1)]);
}

#[test]
fn bodies_beyond_a_runs_limit_are_refused_at_the_body_that_passes_it() {
    let files = Files::new();
    files.write("half.bin", vec![0u8; volley_engine::MAX_BODY_BYTES / 2 + 1]);
    let step = "[[scenario.step]]\nmethod = \"POST\"\npath = \"/\"\nbody_file = \"half.bin\"\n";
    files.write("s.toml", format!("[[scenario]]\nname = \"a\"\n{step}{step}"));
    let e = files.read("s.toml", Some("http://a/")).map(|f| f.origin).unwrap_err();
    assert_eq!(e, "s.toml:10:13: the bodies come to more than 64 MiB, the most a run's requests may carry");
}

#[test]
fn a_step_has_at_most_the_headers_a_target_may_have_the_defaults_counted() {
    let names = |range: std::ops::Range<usize>| range.map(|n| format!("h{n} = \"v\"")).collect::<Vec<_>>().join(", ");
    let text = format!(
        "[defaults]\nheaders = {{ {} }}\n[[scenario]]\nname = \"a\"\n[[scenario.step]]\npath = \"/\"\n[[scenario.step]]\npath = \"/\"\nheaders = {{ {} }}\n",
        names(0..60),
        names(60..101)
    );
    let e = read_text(&text, Some("http://a/")).map(|f| f.origin).unwrap_err();
    assert_eq!(e, "s.toml:9:11: more than 100 headers in one step, the defaults' counted");
}

#[test]
fn the_example_shop_is_a_mix_for_volley_serve() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scenarios/shop.toml");
    let url = Target::parse("http://127.0.0.1:8080").expect("a URL");
    let file =
        read(&example, Some(&url), volley_engine::DEFAULT_MAX_FEEDER_BYTES).expect("examples/scenarios/shop.toml");
    assert_eq!(file.origin.to_string(), "http://127.0.0.1:8080/", "volley serve's default address");
    let names: Vec<&str> = file.scenarios.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["browse", "search", "buy"]);
    let cart = file.requests.iter().find(|r| r.spec.method == "POST").expect("a POST");
    assert_eq!(cart.spec.body, std::fs::read(example.with_file_name("cart.json")).expect("cart.json"));
}

#[test]
fn a_steps_checks_are_read_with_their_rules_and_names_in_order() {
    let file = read_text(
        &with_origin(
            r#"
[[scenario]]
name = "s"
  [[scenario.step]]
  name = "login"
  path = "/login"
    [[scenario.step.check]]
    status = 200
    [[scenario.step.check]]
    name = "answered"
    status = ["2xx", "301-302", 404]
    [[scenario.step.check]]
    latency_below = "250ms"
    [[scenario.step.check]]
    body_contains = "token"
    [[scenario.step.check]]
    body_matches = 't-\d+'
    [[scenario.step.check]]
    body_size = "1-4096"
    [[scenario.step.check]]
    name = "one item"
    json = "data.items.0"
    equals = { id = 7, tags = ["a"], price = 1.5, new = true }
    [[scenario.step.check]]
    json = "/token"
    [[scenario.step.check]]
    header = "Content-Type"
    contains = "json"
    [[scenario.step.check]]
    header = "set-cookie"
    [[scenario.step.check]]
    header = "x-id"
    equals = "7"
    [[scenario.step.check]]
    header = "location"
    matches = '^/home$'
  [[scenario.step]]
  path = "/plain"
"#,
        ),
        None,
    )
    .expect("a good file");
    let checks: Vec<(&str, &CheckRule)> = file.requests[0].checks.iter().map(|c| (c.name.as_str(), &c.rule)).collect();
    assert_eq!(
        checks,
        [
            ("status is 200", &CheckRule::Status(vec![200..=200])),
            ("answered", &CheckRule::Status(vec![200..=299, 301..=302, 404..=404])),
            ("latency < 250ms", &CheckRule::LatencyBelow(std::time::Duration::from_millis(250))),
            (r#"body contains "token""#, &CheckRule::BodyContains(b"token".to_vec())),
            (r"body matches /t-\d+/", &CheckRule::BodyMatches(CheckPattern::new(r"t-\d+").expect("pattern"))),
            ("body size in 1-4096", &CheckRule::BodySize(1..=4096)),
            (
                "one item",
                &CheckRule::Json {
                    pointer: "/data/items/0".into(),
                    equals: Some(JsonValue(serde_json::json!({"id": 7, "tags": ["a"], "price": 1.5, "new": true}))),
                }
            ),
            ("json /token exists", &CheckRule::Json { pointer: "/token".into(), equals: None }),
            (
                r#"header content-type contains "json""#,
                &CheckRule::Header { name: "content-type".into(), test: CheckText::Contains(b"json".to_vec()) }
            ),
            ("header set-cookie exists", &CheckRule::Header { name: "set-cookie".into(), test: CheckText::Exists }),
            (
                r#"header x-id == "7""#,
                &CheckRule::Header { name: "x-id".into(), test: CheckText::Equals(b"7".to_vec()) }
            ),
            (
                "header location matches /^/home$/",
                &CheckRule::Header {
                    name: "location".into(),
                    test: CheckText::Matches(CheckPattern::new("^/home$").expect("pattern"))
                }
            ),
        ]
    );
    assert!(file.requests[1].checks.is_empty());
}

#[test]
fn users_keep_cookies_unless_their_scenario_or_a_step_says_otherwise_and_a_step_has_the_last_word() {
    let text = with_origin(
        "[[scenario]]\nname = \"on\"\n  [[scenario.step]]\n  path = \"/a\"\n  [[scenario.step]]\n  path = \"/b\"\n  \
         cookies = false\n\
         [[scenario]]\nname = \"off\"\ncookies = false\n  [[scenario.step]]\n  path = \"/c\"\n  \
         [[scenario.step]]\n  path = \"/d\"\n  cookies = true\n",
    );
    let file = read_text(&text, None).expect("a scenario file");
    let cookies: Vec<bool> = file.requests.iter().map(|r| r.cookies).collect();
    assert_eq!(cookies, [true, false, false, true]);
    let bad = with_origin("[[scenario]]\nname = \"s\"\ncookies = \"yes\"\n  [[scenario.step]]\n  path = \"/\"\n");
    let says = read_text(&bad, None).expect_err("not a boolean");
    assert!(says.starts_with("s.toml:") && says.contains("expected a boolean"), "{says}");
}

#[test]
fn redirects_are_answers_unless_a_scenario_or_step_says_follow_or_error_and_a_step_has_the_last_word() {
    let text = with_origin(
        "[[scenario]]\nname = \"plain\"\n  [[scenario.step]]\n  path = \"/a\"\n\
         [[scenario]]\nname = \"follows\"\nredirects = \"follow\"\nmax_redirects = 3\n  [[scenario.step]]\n  \
         path = \"/b\"\n  [[scenario.step]]\n  path = \"/c\"\n  max_redirects = 20\n  [[scenario.step]]\n  \
         path = \"/d\"\n  redirects = \"manual\"\n  [[scenario.step]]\n  path = \"/e\"\n  redirects = \"error\"\n",
    );
    let file = read_text(&text, None).expect("a scenario file");
    let follows: Vec<u8> = file.requests.iter().map(|r| r.follow_redirects).collect();
    assert_eq!(follows, [0, 3, 20, 0, 0]);
    assert_eq!(file.requests[0].follow_redirects, 0, "manual by default");
    let error = &file.requests[4].checks;
    assert_eq!(error.len(), 1);
    assert_eq!(error[0].name, "no redirect");
    assert_eq!(error[0].on_failure, OnFailure::Abort);
    assert!(error[0].rule.passes(200, Duration::ZERO) && error[0].rule.passes(404, Duration::ZERO));
    assert!(!error[0].rule.passes(302, Duration::ZERO) && !error[0].rule.passes(308, Duration::ZERO));
    assert!(file.requests[1].checks.is_empty(), "following adds no check");
    let refused = |scenario: &str| {
        read_text(&with_origin(&format!("[[scenario]]\nname = \"s\"\n{scenario}")), None).expect_err("refused")
    };
    let says = refused("redirects = \"follow\"\n  [[scenario.step]]\n  path = \"/\"\n  template = false\n");
    assert!(says.starts_with("s.toml:6:") && says.contains("needs the step to be a template"), "{says}");
    let says = refused("  [[scenario.step]]\n  path = \"/\"\n  redirects = \"follow\"\n  max_redirects = 300\n");
    assert!(says.starts_with("s.toml:7:") && says.contains("max_redirects = 300"), "{says}");
    let says = refused(
        "redirects = \"error\"\n  [[scenario.step]]\n  path = \"/\"\n    [[scenario.step.check]]\n    \
         name = \"no redirect\"\n    status = 200\n",
    );
    assert!(says.contains("a second check named 'no redirect'"), "{says}");
}

#[test]
fn a_steps_think_time_is_a_duration_or_one_distribution_and_anything_else_is_pointed_at() {
    let step = |think: &str| {
        read_text(
            &with_origin(&format!(
                "[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n  think = {think}\n"
            )),
            None,
        )
    };
    let ms = std::time::Duration::from_millis;
    let think = |text: &str| step(text).expect("a scenario").requests[0].think;
    assert_eq!(think("\"250ms\""), Some(Think::Fixed(ms(250))));
    assert_eq!(think("{ uniform = [\"1s\", \"3s\"] }"), Some(Think::Uniform(ms(1000), ms(3000))));
    assert_eq!(think("{ exponential = \"2s\" }"), Some(Think::Exponential(ms(2000))));
    let hint = r#"give a duration ("2s"), { uniform = ["1s", "3s"] } or { exponential = "2s" } (its mean)"#;
    for (think, says) in [
        ("3", "s.toml:6:11: think is an integer: "),
        ("\"soon\"", "s.toml:6:11: think 'soon': invalid duration 'soon' (use e.g. 10s, 1m30s, 500ms, 250us): "),
        ("{ uniform = [\"3s\", \"1s\"] }", "s.toml:6:11: think uniform runs from low to high: "),
        ("{ uniform = [\"3s\"] }", "s.toml:6:11: think uniform takes two durations: "),
        ("{ exponential = 2 }", "s.toml:6:11: think holds an integer, not a duration: "),
        ("{ normal = \"2s\" }", "s.toml:6:11: think is a table of one key, uniform or exponential: "),
    ] {
        assert_eq!(step(think).err(), Some(format!("{says}{hint}")), "{think}");
    }
}

#[test]
fn a_check_may_abort_its_iteration_and_by_default_does_not() {
    let file = read_text(
        &with_origin(
            "[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n    [[scenario.step.check]]\n    status = 200\n    on_failure = \"abort\"\n    [[scenario.step.check]]\n    body_size = 3\n    [[scenario.step.check]]\n    json = \"a\"\n    on_failure = \"continue\"\n",
        ),
        None,
    )
    .expect("a scenario");
    let on_failure: Vec<OnFailure> = file.requests[0].checks.iter().map(|c| c.on_failure).collect();
    assert_eq!(on_failure, [OnFailure::Abort, OnFailure::Continue, OnFailure::Continue]);
}

#[test]
fn a_bad_check_is_pointed_at_with_what_a_check_may_be() {
    let step = |check: &str| {
        with_origin(&format!(
            "[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n    [[scenario.step.check]]\n{check}\n"
        ))
    };
    for (check, says) in [
        (
            "    name = \"x\"",
            "s.toml:6:5: a check has one rule: give status, latency_below, body_contains, body_matches, body_size, json or header",
        ),
        (
            "    header = \"x\"\n    contains = \"a\"\n    matches = \"b\"",
            "s.toml:9:15: a header check tests its value one way: give one of equals, contains and matches",
        ),
        (
            "    status = 200\n    contains = \"a\"",
            "s.toml:8:16: contains goes with header, the field whose value it tests",
        ),
        ("    header = \"a b\"", "s.toml:7:14: header: 'a b' is not a field name"),
        ("    header = \"a\"\n    equals = 1", "s.toml:8:14: equals: a header's value is text: write it as a string"),
        ("    header = \"a\"\n    contains = \"\"", "s.toml:8:16: contains: give the text the value must hold"),
        ("    header = \"a\"\n    matches = \"(\"", "s.toml:8:15: matches: error: unclosed group"),
        (
            "    json = \"a\"\n    body_size = 3",
            "s.toml:8:17: a check has one rule, and this one gives both json and body_size: make them two checks",
        ),
        ("    body_contains = \"\"", "s.toml:7:21: body_contains: give the text the body must hold"),
        ("    body_matches = \"(\"", "s.toml:7:20: body_matches: error: unclosed group"),
        (
            "    body_size = \"9-1\"",
            "s.toml:7:17: body_size '9-1' is not a range of bytes, low to high: give a number of bytes (1024) or a range (\"1-4096\")",
        ),
        (
            "    body_size = -1",
            "s.toml:7:17: body_size -1 is not a number of bytes: give a number of bytes (1024) or a range (\"1-4096\")",
        ),
        ("    status = 200\n    equals = 3", "s.toml:8:14: equals goes with json or header, the value it compares"),
        (
            "    json = \"at\"\n    equals = 1979-05-27",
            "s.toml:8:14: equals: a date has no JSON form: write it as a string",
        ),
        (
            "    status = 200\n    latency_below = \"1s\"",
            "s.toml:8:21: a check has one rule, and this one gives both status and latency_below: make them two checks",
        ),
        (
            "    status = 99",
            "s.toml:7:14: status 99 is not a status code (100 to 999): give a code (200), a class (\"2xx\"), a range (\"200-299\"), or an array of them",
        ),
        (
            "    status = \"300-200\"",
            "s.toml:7:14: status '300-200' is not a code, a class or a range of codes: give a code (200), a class (\"2xx\"), a range (\"200-299\"), or an array of them",
        ),
        (
            "    status = []",
            "s.toml:7:14: status is an empty array: give a code (200), a class (\"2xx\"), a range (\"200-299\"), or an array of them",
        ),
        (
            "    status = true",
            "s.toml:7:14: status is a boolean: give a code (200), a class (\"2xx\"), a range (\"200-299\"), or an array of them",
        ),
        (
            "    latency_below = \"soon\"",
            "s.toml:7:21: latency_below: invalid duration 'soon' (use e.g. 10s, 1m30s, 500ms, 250us)",
        ),
        (
            "    status = 200\n    [[scenario.step.check]]\n    status = [200]",
            "s.toml:8:5: a second check named 'status is 200' on this step: a step's check names are distinct",
        ),
        (
            "    status = 200\n    colour = \"red\"",
            "s.toml:8:5: unknown field `colour`, expected one of `name`, `status`, `latency_below`, `body_contains`, `body_matches`, `body_size`, `json`, `header`, `equals`, `contains`, `matches`, `on_failure`",
        ),
        (
            "    status = 200\n    on_failure = \"stop\"",
            "s.toml:8:18: on_failure \"stop\": it is \"continue\" (the default) or \"abort\" (the iteration ends)",
        ),
    ] {
        assert_eq!(read_text(&step(check), None).err().as_deref(), Some(says), "{check}");
    }
}

#[test]
fn more_checks_on_fields_and_body_than_a_step_may_have_are_refused_at_the_first_too_many() {
    let checks: String =
        (0..=MAX_KEPT_CHECKS).map(|i| format!("    [[scenario.step.check]]\n    body_contains = \"{i}\"\n")).collect();
    let text = with_origin(&format!("[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n{checks}"));
    let err = read_text(&text, None).expect_err("too many");
    // The origin's line, four of the scenario and its step, then two lines a check: the 65th
    // check's table is on line 6 + 2 * 64.
    let line = 6 + 2 * MAX_KEPT_CHECKS;
    assert_eq!(
        err,
        format!("s.toml:{line}:5: more than the 64 checks on header fields and the body a step may have"),
        "{err}"
    );
}

/// Each extractor of `request` as (variable, source).
fn extractors(request: &NamedRequest) -> Vec<(&str, &ExtractSource)> {
    request.extract.iter().map(|e| (e.var.as_str(), &e.from)).collect()
}

#[test]
fn a_steps_extractors_are_read_in_order_and_later_steps_fill_their_variables() {
    let file = read_text(
        &with_origin(
            r#"
[[scenario]]
name = "s"
  [[scenario.step]]
  name = "login"
  path = "/login"
    [[scenario.step.extract]]
    var = "token"
    json = "data.token"
    [[scenario.step.extract]]
    var = "raw"
    json = "/data/a~1b"
    [[scenario.step.extract]]
    var = "request_id"
    header = "X-Request-Id"
    [[scenario.step.extract]]
    var = "id"
    regex = 'id=(\d+)'
    [[scenario.step.extract]]
    var = "whole"
    regex = 'id=\d+'
    [[scenario.step.extract]]
    var = "_all"
    regex = 'id=(\d+)'
    group = 0
    [[scenario.step.extract]]
    var = "session"
    cookie = "JSESSIONID"
  [[scenario.step]]
  path = "/users/{{id}}?t={{ token }}"
  headers = { authorization = "Bearer {{token}}", x-request-id = "{{request_id}}" }
  body = "{{session}} {{whole}} {{_all}} {{raw}}"
"#,
        ),
        None,
    )
    .expect("a good file");
    let pattern = |p: &str| CheckPattern::new(p).expect("pattern");
    assert_eq!(
        extractors(&file.requests[0]),
        [
            ("token", &ExtractSource::Json { pointer: "/data/token".into() }),
            ("raw", &ExtractSource::Json { pointer: "/data/a~1b".into() }),
            ("request_id", &ExtractSource::Header { name: "x-request-id".into() }),
            ("id", &ExtractSource::Regex { pattern: pattern(r"id=(\d+)"), group: 1 }),
            ("whole", &ExtractSource::Regex { pattern: pattern(r"id=\d+"), group: 0 }),
            ("_all", &ExtractSource::Regex { pattern: pattern(r"id=(\d+)"), group: 0 }),
            // A cookie's name keeps its case: cookies are told apart by it.
            ("session", &ExtractSource::Cookie { name: "JSESSIONID".into() }),
        ]
    );
    assert!(file.requests[1].extract.is_empty());
    assert_eq!(file.requests[1].path_and_query, "/users/{{id}}?t={{ token }}");
}

#[test]
fn a_bad_extractor_is_pointed_at_with_what_an_extractor_may_be() {
    let step = |extract: &str| {
        with_origin(&format!(
            "[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n    [[scenario.step.extract]]\n{extract}\n"
        ))
    };
    for (extract, says) in [
        ("    json = \"a\"", "s.toml:6:5: missing field `var`"),
        (
            "    var = \"a-b\"\n    json = \"a\"",
            "s.toml:7:11: var: 'a-b' cannot name a variable: a letter or `_`, then letters, digits and `_`, and not a built-in (vu, iteration, worker, thread, random_int, uuid, unix_ms)",
        ),
        (
            "    var = \"vu\"\n    json = \"a\"",
            "s.toml:7:11: var: 'vu' cannot name a variable: a letter or `_`, then letters, digits and `_`, and not a built-in (vu, iteration, worker, thread, random_int, uuid, unix_ms)",
        ),
        (
            "    var = \"t\"",
            "s.toml:6:5: an extractor takes its value from one place: give json, header, regex or cookie",
        ),
        (
            "    var = \"t\"\n    cookie = \"c\"\n    json = \"a\"",
            "s.toml:9:12: an extractor takes its value from one place, and this one gives both cookie and json: make them two extractors",
        ),
        (
            "    var = \"t\"\n    json = \"a\"\n    group = 1",
            "s.toml:9:13: group goes with regex, the pattern whose capture group it takes",
        ),
        (
            "    var = \"t\"\n    regex = 'id=(\\d+)'\n    group = 2",
            r"s.toml:9:13: group 2: the pattern /id=(\d+)/ has 1 capture group(s); 0 is the whole match",
        ),
        ("    var = \"t\"\n    regex = \"(\"", "s.toml:8:13: regex: error: unclosed group"),
        ("    var = \"t\"\n    header = \"a b\"", "s.toml:8:14: header: 'a b' is not a header name"),
        ("    var = \"t\"\n    cookie = \"a;b\"", "s.toml:8:14: cookie: 'a;b' is not a cookie name"),
        (
            "    var = \"t\"\n    group = -1\n    regex = \"a\"",
            "s.toml:8:13: invalid value: integer `-1`, expected u64",
        ),
        (
            "    var = \"t\"\n    json = \"a\"\n    from = \"body\"",
            "s.toml:9:5: unknown field `from`, expected one of `var`, `json`, `header`, `regex`, `group`, `cookie`",
        ),
    ] {
        assert_eq!(read_text(&step(extract), None).err().as_deref(), Some(says), "{extract}");
    }
}

#[test]
fn more_extractors_than_a_step_may_have_or_variables_than_a_run_may_have_are_refused_at_the_first_too_many() {
    let extract = |var: String| format!("    [[scenario.step.extract]]\n    var = \"{var}\"\n    json = \"a\"\n");
    let one_step: String = (0..=MAX_EXTRACTORS).map(|i| extract(format!("v{i}"))).collect();
    let text = with_origin(&format!("[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"/\"\n{one_step}"));
    // The origin's line, four of the scenario and its step, then three lines an extractor.
    let line = 6 + 3 * MAX_EXTRACTORS;
    assert_eq!(
        read_text(&text, None).err(),
        Some(format!("s.toml:{line}:5: more than the 16 extractors a step may have"))
    );

    // Each step sets v0 again, which counts once, then fifteen variables of its own.
    let steps: String = (0..5)
        .map(|step| {
            let own: String = (0..15).map(|i| extract(format!("v{}", 1 + step * 15 + i))).collect();
            format!("  [[scenario.step]]\n  path = \"/\"\n{}{own}", extract("v0".into()))
        })
        .collect();
    let text = with_origin(&format!("[[scenario]]\nname = \"s\"\n{steps}"));
    // After four steps 61 are set; the fifth step's fourth own variable, v64, is one too many:
    // its steps start on line 4, each 2 + 3 * 16 lines long, and its var is an extractor's
    // second line.
    assert_eq!(MAX_VARIABLES, 64);
    let line = 4 + 4 * (2 + 3 * 16) + 2 + 3 * 4 + 1;
    assert_eq!(
        read_text(&text, None).err(),
        Some(format!("s.toml:{line}:11: more than the 64 variables a run may have, over all its steps' extractors"))
    );
}

#[test]
fn a_variable_is_used_only_after_an_earlier_step_of_its_scenario_extracts_it() {
    let login = "  [[scenario.step]]\n  path = \"/login\"\n    [[scenario.step.extract]]\n    var = \"token\"\n    json = \"token\"\n";
    let before = "is used before a step extracts it: a variable is there for the steps after the one that extracts it, in the same scenario";
    let cases = [
        // In the step that extracts it: the value comes with its response.
        (
            "[[scenario]]\nname = \"a\"\n  [[scenario.step]]\n  path = \"/a?t={{token}}\"\n    [[scenario.step.extract]]\n    var = \"token\"\n    json = \"token\"\n".to_string(),
            format!("s.toml:5:16: `{{{{token}}}}` {before}"),
        ),
        // Before it.
        (
            format!("[[scenario]]\nname = \"a\"\n  [[scenario.step]]\n  path = \"/\"\n  headers = {{ auth = \"x {{{{ token }}}}\" }}\n{login}"),
            format!("s.toml:6:25: `{{{{token}}}}` {before}"),
        ),
        // In another scenario than the one that extracts it.
        (
            format!("[[scenario]]\nname = \"a\"\n{login}[[scenario]]\nname = \"b\"\n  [[scenario.step]]\n  path = \"/\"\n  body = \"{{{{token}}}}\"\n"),
            format!("s.toml:13:11: `{{{{token}}}}` {before}"),
        ),
        // In the defaults, which go into every first step.
        (
            format!("[defaults]\nheaders = {{ auth = \"{{{{token}}}}\" }}\n[[scenario]]\nname = \"a\"\n{login}"),
            format!("s.toml:3:21: `{{{{token}}}}` {before}"),
        ),
        // A name that is nothing at all is said to be so.
        (
            format!("[[scenario]]\nname = \"a\"\n{login}  [[scenario.step]]\n  path = \"/{{{{tokn}}}}\"\n"),
            "s.toml:10:12: `{{tokn}}` names nothing volley knows (it knows vu, iteration, worker, thread, random_int A B, uuid, unix_ms, a feeder's columns as FEEDER.COLUMN, and variables an extractor sets)".to_string(),
        ),
    ];
    for (text, says) in cases {
        assert_eq!(read_text(&with_origin(&text), None).err(), Some(says), "{text}");
    }

    // A body file is held to the same, pointed at with the byte in it.
    let files = Files::new();
    files.write("body.txt", "token={{token}}");
    files.write(
        "s.toml",
        with_origin(&format!(
            "[[scenario]]\nname = \"a\"\n  [[scenario.step]]\n  path = \"/\"\n  body_file = \"body.txt\"\n{login}"
        )),
    );
    let err = files.read("s.toml", None).expect_err("used before it is set");
    assert_eq!(
        err,
        format!(
            "s.toml:6:15: body.txt, byte 6: `{{{{token}}}}` {before} (to send the file as written, set template = false on the step)"
        )
    );

    // After it, in a step of the same scenario, it is a slot.
    let ok = with_origin(&format!(
        "[[scenario]]\nname = \"a\"\n{login}  [[scenario.step]]\n  path = \"/me?t={{{{token}}}}\"\n"
    ));
    assert_eq!(read_text(&ok, None).map(|f| f.requests.len()), Ok(2));
}
