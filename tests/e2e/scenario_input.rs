//! End to end: `--scenario FILE`. A file that cannot be used is refused before any load, with one
//! line on stderr that says where in the file and what, and exit status 2; a good one runs its
//! iterations, locally and across workers, each step counted as the server counted its route;
//! and the example files satisfy the published schema/scenario.schema.json.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use support::{
    Behavior, TestServer, VOLLEY_TIMEOUT, WorkerProcess, describe_output, number, one_error_line, run_within,
    volley_command,
};

/// `volley ARGS` run in `dir`, so that the file names it prints are the ones given.
fn volley_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = volley_command(args);
    cmd.current_dir(dir);
    run_within(cmd, VOLLEY_TIMEOUT)
}

/// Checks `out` is a usage error (exit 2) of one line, `volley: error: ` and `says`, with no
/// report.
fn assert_refused(out: &Output, says: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(out));
    assert_eq!(one_error_line(out), format!("volley: error: {says}"));
    assert!(out.stdout.is_empty(), "a report was printed\n{}", describe_output(out));
}

/// Two scenarios of two steps each, so that every iteration is two requests whichever is drawn.
fn two_scenarios(origin: &str) -> String {
    format!(
        r#"origin = "{origin}"
[defaults]
headers = {{ x-run = "e2e" }}

[[scenario]]
name = "browse"
weight = 3
  [[scenario.step]]
  name = "home"
  path = "/"
  [[scenario.step]]
  name = "item"
  path = "/items/7?full=1"

[[scenario]]
name = "buy"
  [[scenario.step]]
  name = "item"
  path = "/items/9"
  [[scenario.step]]
  name = "cart"
  method = "POST"
  path = "/cart"
  body_file = "cart.json"
"#
    )
}

#[test]
fn a_malformed_scenario_file_is_refused_at_its_line_and_column_before_any_load() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cart.json"), "{}").unwrap();
    let origin = server.url().trim_end_matches('/').to_string();
    let good = two_scenarios(&origin);
    for (text, says) in [
        // TOML syntax: where the parser stopped.
        (good.replacen("[[scenario]]", "[[scenario]", 1), "shop.toml:5:12: unclosed array table, expected `]`"),
        // An unknown key, at the key.
        (
            good.replacen("  path = \"/\"", "  path = \"/\"\n  header = {}", 1),
            "shop.toml:11:3: unknown field `header`, expected one of `name`, `method`, `path`, `headers`, `body`, `body_file`, `template`, `check`, `extract`, `think`, `cookies`, `redirects`, `max_redirects`",
        ),
        // A missing path, at its step's table.
        (good.replacen("  path = \"/\"\n", "", 1), "shop.toml:8:3: missing field `path`"),
        (
            good.replacen("weight = 3", "weight = 0", 1),
            "shop.toml:7:10: invalid value: integer `0`, expected a weight: a whole number from 1 to 4294967295",
        ),
        (
            good.replacen("name = \"buy\"", "name = \"browse\"", 1),
            "shop.toml:16:8: a second scenario named 'browse' (the first is on line 6): scenario names are distinct",
        ),
        (
            good.replacen("body_file = \"cart.json\"", "body_file = \"carts/1.json\"", 1),
            "shop.toml:24:15: the body file carts/1.json: No such file or directory (os error 2)",
        ),
        (
            good.replacen("path = \"/cart\"", "path = \"http://127.0.0.1:1/cart\"", 1),
            &format!("shop.toml:23:10: http://127.0.0.1:1 is not the file's origin ({origin}); a run has one"),
        ),
    ] {
        std::fs::write(dir.path().join("shop.toml"), &text).unwrap();
        let out = volley_in(dir.path(), &["--scenario", "shop.toml", "-n", "10"]);
        assert_refused(&out, says);
    }
    // The command line's URL and the file's origin differ.
    std::fs::write(dir.path().join("shop.toml"), &good).unwrap();
    let out = volley_in(dir.path(), &["--scenario", "shop.toml", "-n", "10", "http://127.0.0.1:1"]);
    assert_refused(
        &out,
        &format!(
            "shop.toml:1:10: {origin} is not the origin of the command line's URL (http://127.0.0.1:1); a run has one"
        ),
    );
    let out = volley_in(dir.path(), &["--scenario", "missing.toml", "-n", "10"]);
    assert_refused(&out, "--scenario missing.toml: No such file or directory (os error 2)");
    assert_eq!(server.connections(), 0, "a refused file still loaded the server");
}

#[test]
fn a_method_a_body_or_a_targets_file_beside_a_scenario_file_is_a_usage_error() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cart.json"), "{}").unwrap();
    std::fs::write(dir.path().join("shop.toml"), two_scenarios(server.url().trim_end_matches('/'))).unwrap();
    std::fs::write(dir.path().join("api.http"), format!("GET {}\n", server.url())).unwrap();
    for flags in [["-m", "POST"], ["-d", "x"], ["--targets", "api.http"], ["--targets-order", "random"]] {
        let out = volley_in(dir.path(), &[&["--scenario", "shop.toml", "-n", "10"][..], &flags].concat());
        assert_eq!(out.status.code(), Some(2), "{flags:?}\n{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.contains("cannot be used with") && line.contains("--scenario"), "{flags:?}: {line}");
        assert!(out.stdout.is_empty(), "{flags:?}: a report was printed");
    }
    assert_eq!(server.connections(), 0, "a refused command line still loaded the server");
}

/// Each route the server counted, under the step name that goes to it.
fn by_step(routes: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for (route, n) in routes {
        let name = match route.as_str() {
            "GET /" => "home",
            "GET /items/7" | "GET /items/9" => "item",
            "POST /cart" => "cart",
            other => panic!("a route the scenarios do not have: {other}"),
        };
        *counts.entry(name.to_string()).or_default() += n;
    }
    counts
}

/// The report's names with their ok counts.
fn report_names(r: &serde_json::Value) -> BTreeMap<String, u64> {
    let names = r["names"].as_array().unwrap_or_else(|| panic!("no names in {r}"));
    names.iter().map(|n| (n["name"].as_str().expect("a name").to_string(), number(n, "/requests/ok"))).collect()
}

#[test]
fn n_iterations_of_two_step_scenarios_are_twice_n_requests_locally_and_across_workers() {
    let server = TestServer::start(Behavior::ok(10));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cart.json"), "{}").unwrap();
    let file = dir.path().join("shop.toml");
    std::fs::write(&file, two_scenarios(server.url().trim_end_matches('/'))).unwrap();
    let file = file.to_str().expect("a UTF-8 path");
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    for extra in [&[][..], &["--workers", &list][..]] {
        let before = server.routes();
        let args = [&["-c", "4", "-t", "2", "-n", "300", "--seed", "5", "-j", "--scenario", file][..], extra].concat();
        let out = support::run_volley(&args);
        let r = support::json_report(&out);
        let mut served = server.routes();
        for (route, n) in before {
            *served.get_mut(&route).expect("a route seen before") -= n;
        }
        assert_eq!(number(&r, "/requests/ok"), 600, "{extra:?}: 300 iterations of 2 steps\n{r}");
        assert_eq!(report_names(&r), by_step(&served), "{extra:?}: {r}");
        // Weights 3 and 1: "home" is browse's alone, "cart" buy's; far from a 3:1 split only by a
        // broken draw (the bound is wide: 300 draws).
        let names = report_names(&r);
        let (home, cart) = (names["home"], names["cart"]);
        assert_eq!(home + cart, 300, "{extra:?}: one of them a draw");
        assert!((180..=270).contains(&home), "{extra:?}: {home} of 300 for weight 3 of 4");
    }
}

#[test]
fn every_example_scenario_file_satisfies_the_published_schema() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("schema/scenario.schema.json")).expect("the schema");
    let schema = serde_json::from_str(&text).expect("the schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let mut examples = 0;
    for entry in std::fs::read_dir(root.join("examples/scenarios")).expect("examples/scenarios") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("an example");
        let doc: serde_json::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let errors: Vec<String> =
            validator.iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{}:\n{}", path.display(), errors.join("\n"));
        examples += 1;
    }
    assert!(examples >= 1, "no examples found");
    // And the schema refuses what volley refuses for its shape.
    let step = r#"{"path": "/"}"#;
    for bad in [
        format!(r#"{{"scenario": [{{"name": "a", "step": [{step}], "weight": 0}}]}}"#),
        format!(r#"{{"scenario": [{{"name": "a", "step": [{step}], "steps": []}}]}}"#),
        r#"{"scenario": [{"name": "a", "step": []}]}"#.to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "users"}]}]}"#.to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "body": "x", "body_file": "y"}]}]}"#.to_string(),
        r#"{"scenario": [{"step": [{"path": "/"}]}]}"#.to_string(),
        r#"{"scenario": []}"#.to_string(),
        // Extractors: a variable, one source, a group only with a pattern.
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "extract": [{"json": "a"}]}]}]}"#.to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "extract": [{"var": "t"}]}]}]}"#.to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "extract": [{"var": "t", "json": "a", "cookie": "c"}]}]}]}"#
            .to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "extract": [{"var": "t", "json": "a", "group": 1}]}]}]}"#
            .to_string(),
        r#"{"scenario": [{"name": "a", "step": [{"path": "/", "extract": [{"var": "vu", "json": "a"}]}]}]}"#.to_string(),
    ] {
        let doc: serde_json::Value = serde_json::from_str(&bad).expect("JSON");
        assert!(!validator.is_valid(&doc), "the schema accepts {bad}");
    }
}
