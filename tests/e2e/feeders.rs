//! End to end: feeders in a scenario file. A shard feeder's rows reach the server exactly once
//! each across workers and threads, and the report says the data ran out; a cycle feeder gives
//! each connection its rows in turn over HTTP/1.1, HTTP/2 and HTTP/3; a random one draws the
//! same rows for the same seed; and every bad feeder is one line and exit 2 before any load.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use support::h3_server::{H3Options, H3TestServer};
use support::{Behavior, SeenRequest, TestServer, WorkerProcess, describe_output, number, one_error_line};

/// A CSV of `rows` users: `id` is `u<i>`, `email` `user<i>@example.com`.
fn users_csv(dir: &Path, rows: usize) -> String {
    let mut text = String::from("id,email\n");
    for i in 0..rows {
        text.push_str(&format!("u{i},user{i}@example.com\n"));
    }
    let path = dir.join("users.csv");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A scenario of one step whose path carries the feeder's columns (and the connection and
/// iteration), with `mode`.
fn feeder_file(dir: &Path, origin: &str, feeder: &str, mode: &str) -> String {
    let text = format!(
        r#"origin = "{origin}"

[[feeder]]
name = "users"
file = "{feeder}"
mode = "{mode}"

[[scenario]]
name = "visit"
  [[scenario.step]]
  name = "user"
  path = "/u/{{{{users.id}}}}/{{{{vu}}}}/{{{{iteration}}}}"
  headers = {{ x-email = "{{{{users.email}}}}" }}
"#
    );
    let file = dir.join("feeders.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// Each request's (row, vu, iteration), its header checked against its row.
fn rows_seen(seen: &[SeenRequest]) -> Vec<(u64, u64, u64)> {
    seen.iter()
        .map(|r| {
            let parts: Vec<&str> = r.path.trim_start_matches("/u/").split('/').collect();
            let row: u64 = parts[0].trim_start_matches('u').parse().unwrap_or_else(|_| panic!("{}", r.path));
            let expected = format!("user{row}@example.com");
            assert_eq!(r.header("x-email"), Some(expected.as_str()), "{}", r.path);
            (row, parts[1].parse().unwrap(), parts[2].parse().unwrap())
        })
        .collect()
}

#[test]
fn a_shard_feeders_rows_reach_the_server_exactly_once_across_three_workers_of_two_threads() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Behavior::ok(5));
    let csv = users_csv(dir.path(), 3001);
    let file = feeder_file(dir.path(), server.url().trim_end_matches('/'), &csv, "shard");
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    // More iterations than rows: each thread's share runs out first.
    let out = support::run_volley(["-c", "6", "-t", "2", "-n", "4000", "-j", "--workers", &list, "--scenario", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let r = support::json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 3001, "{r}");
    assert_eq!(number(&r, "/feeders/rowsTaken"), 3001);
    assert_eq!(number(&r, "/feeders/threadsRanOut"), 6, "every thread of every worker ran out");
    assert_eq!(r["feeders"]["feeders"][0], serde_json::json!({ "name": "users", "mode": "shard", "rows": 3001 }));
    assert!(r["warnings"].to_string().contains("the data ran out"), "{}", r["warnings"]);
    let mut count: BTreeMap<u64, u32> = BTreeMap::new();
    for (row, _, _) in rows_seen(&server.seen_requests()) {
        *count.entry(row).or_default() += 1;
    }
    assert_eq!(count.len(), 3001, "every row reached the server");
    assert!(count.iter().all(|(&row, &n)| row < 3001 && n == 1), "a row twice: {count:?}");
    assert_eq!(server.requests(), 3001);
}

#[test]
fn a_shard_feeder_with_a_row_for_every_iteration_does_not_run_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Behavior::ok(5));
    let csv = users_csv(dir.path(), 100);
    let file = feeder_file(dir.path(), server.url().trim_end_matches('/'), &csv, "shard");
    let out = support::run_volley(["-c", "4", "-t", "2", "-n", "100", "-j", "--scenario", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let r = support::json_report(&out);
    assert_eq!((number(&r, "/requests/ok"), number(&r, "/feeders/rowsTaken")), (100, 100), "{r}");
    assert_eq!(r["feeders"]["dataRanOut"], false, "every iteration had its row: {r}");
    let rows: std::collections::BTreeSet<u64> = rows_seen(&server.seen_requests()).iter().map(|s| s.0).collect();
    assert_eq!(rows, (0..100).collect(), "each row once");
}

#[test]
fn a_cycle_feeder_gives_each_connection_the_rows_in_turn_over_http1_http2_and_http3() {
    let dir = tempfile::tempdir().unwrap();
    let csv = users_csv(dir.path(), 7);
    let check = |seen: &[SeenRequest], what: &str| {
        let seen = rows_seen(seen);
        assert_eq!(seen.len(), 90, "{what}");
        for (row, vu, iteration) in seen {
            assert_eq!(row, (vu + iteration) % 7, "{what}: connection {vu}'s iteration {iteration}");
        }
    };
    for flags in [&[][..], &["--http2", "-p", "2"][..]] {
        let server = TestServer::start(Behavior::ok(5));
        let file = feeder_file(dir.path(), server.url().trim_end_matches('/'), &csv, "cycle");
        let out =
            support::run_volley([&["-c", "3", "-t", "2", "-n", "90", "-j", "--scenario", &file][..], flags].concat());
        assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
        assert_eq!(number(&support::json_report(&out), "/feeders/rowsTaken"), 90);
        check(&server.seen_requests(), if flags.is_empty() { "h1" } else { "h2" });
    }
    let quic = H3TestServer::start(H3Options::default());
    let file = feeder_file(dir.path(), quic.url().trim_end_matches('/'), &csv, "cycle");
    let ca = quic.cert().write_ca(dir.path());
    let ca = ca.to_str().expect("a UTF-8 path");
    let out =
        support::run_volley(["--http3", "-c", "3", "-t", "2", "-n", "90", "--cacert", ca, "-j", "--scenario", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    check(&quic.seen_requests(), "h3");
}

#[test]
fn a_random_feeder_draws_the_same_rows_for_the_same_seed_from_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = String::new();
    for i in 0..50 {
        lines.push_str(&format!("{{\"id\": \"u{i}\", \"email\": \"user{i}@example.com\"}}\n"));
    }
    std::fs::write(dir.path().join("users.jsonl"), lines).unwrap();
    let drawn = |seed: &str| {
        let server = TestServer::start(Behavior::ok(5));
        let file = feeder_file(dir.path(), server.url().trim_end_matches('/'), "users.jsonl", "random");
        let out = support::run_volley(["-c", "1", "-n", "200", "--seed", seed, "-j", "--scenario", &file]);
        assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
        let mut seen = rows_seen(&server.seen_requests());
        seen.sort_by_key(|&(_, _, iteration)| iteration);
        seen.into_iter().map(|(row, _, _)| row).collect::<Vec<u64>>()
    };
    let a = drawn("5");
    assert_eq!(a.len(), 200);
    assert_eq!(a, drawn("5"), "the same seed draws the same rows");
    assert_ne!(a, drawn("6"));
    let distinct: std::collections::BTreeSet<u64> = a.iter().copied().collect();
    assert!(distinct.len() > 40, "200 draws of 50 rows cover most of them: {}", distinct.len());
}

#[test]
fn a_bad_feeder_is_one_line_and_exit_2_before_any_load() {
    let server = TestServer::start(Behavior::ok(5));
    let dir = tempfile::tempdir().unwrap();
    let origin = server.url();
    let origin = origin.trim_end_matches('/');
    users_csv(dir.path(), 3);
    std::fs::write(dir.path().join("short.csv"), "id,email\nu0,a@x\nu1\n").unwrap();
    let with = |feeder: &str, mode: &str, path: &str| {
        let text = format!(
            "origin = \"{origin}\"\n[[feeder]]\nname = \"users\"\nfile = \"{feeder}\"\nmode = \"{mode}\"\n[[scenario]]\nname = \"s\"\n  [[scenario.step]]\n  path = \"{path}\"\n"
        );
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, text).unwrap();
        file.display().to_string()
    };
    // (feeder file, mode, step path), extra flags, what the error says.
    type Case<'a> = ((&'a str, &'a str, &'a str), &'a [&'a str], &'a str);
    let cases: [Case; 7] = [
        (
            ("users.csv", "shard", "/u/{{users.nope}}"),
            &[],
            "bad.toml:9:14: `{{users.nope}}`: feeder `users` has no column `nope` (its columns: id, email)",
        ),
        (
            ("users.csv", "shard", "/u/{{items.id}}"),
            &[],
            "bad.toml:9:14: `{{items.id}}` names feeder `items`, which is not declared (feeders: users)",
        ),
        (("missing.csv", "shard", "/u/{{users.id}}"), &[], "bad.toml:4:8: missing.csv: No such file"),
        (
            ("short.csv", "shard", "/u/{{users.id}}"),
            &[],
            "bad.toml:4:8: short.csv:3: a row of 1 fields where the header has 2",
        ),
        (
            ("users.csv", "sharded", "/u/{{users.id}}"),
            &[],
            "bad.toml:5:8: mode 'sharded': a feeder's mode is shard, cycle or random",
        ),
        (
            ("users.csv", "cycle", "/u/{{users.id}}"),
            &["--max-feeder-bytes", "10"],
            "bad.toml:4:8: users.csv:2: the run's feeders hold more than 10 bytes of data, the most --max-feeder-bytes allows",
        ),
        (("users.txt", "cycle", "/u/{{users.id}}"), &[], "bad.toml:4:8: users.txt: give format = \"csv\" or \"jsonl\""),
    ];
    for ((feeder, mode, path), extra, says) in cases {
        let file = with(feeder, mode, path);
        let out = support::run_volley([&["-n", "10", "--scenario", file.as_str()][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{says}: {}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.contains(says), "{says}:\n{line}");
    }
    assert_eq!(server.requests(), 0, "no load for a bad feeder");
}

#[test]
fn a_feeder_value_that_would_break_its_request_line_is_refused_with_its_row() {
    let server = TestServer::start(Behavior::ok(5));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), "id,email\nu0,a@x\n\"u 1\",b@x\n").unwrap();
    let file = feeder_file(dir.path(), server.url().trim_end_matches('/'), "users.csv", "cycle");
    let out = support::run_volley(["-n", "10", "--scenario", &file]);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(
        line.contains("feeder users, row 2: column `id` goes into a path, and its value holds byte 0x20"),
        "{line}"
    );
    assert_eq!(server.requests(), 0);
}
