//! End to end: templates in a scenario file. Every request the server saw carries the values of
//! its own connection and iteration (in its path, a header and its body, with the body's length
//! right), over HTTP/1.1, HTTP/2 and HTTP/3, locally and across workers; random values stay in their
//! bounds and UUIDs never repeat; a template that names nothing is refused before any load, at
//! its line and column; and a step may send `{{` as written.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use support::h3_server::{H3Options, H3TestServer};
use support::{Behavior, SeenRequest, TestServer, WorkerProcess, describe_output, number, one_error_line};

/// One scenario of two steps: a POST whose path, headers and body are templated, then a GET of
/// the same connection and iteration.
fn templated_file(dir: &Path, origin: &str) -> String {
    let text = format!(
        r#"origin = "{origin}"

[[scenario]]
name = "order"
  [[scenario.step]]
  name = "put"
  method = "POST"
  path = "/u/{{{{vu}}}}/{{{{ iteration }}}}?r={{{{random_int 1 6}}}}"
  headers = {{ x-id = "{{{{uuid}}}}", x-where = "w{{{{worker}}}}t{{{{thread}}}}", x-at = "{{{{unix_ms}}}}" }}
  body = '{{"vu":{{{{vu}}}},"it":{{{{iteration}}}},"pad":"{{{{random_int 1000 99999}}}}"}}'
  [[scenario.step]]
  name = "get"
  path = "/u/{{{{vu}}}}/{{{{iteration}}}}/done"
"#
    );
    let file = dir.join("order.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

/// A POST's path as (vu, iteration, r).
fn put_path(path: &str) -> (u64, u64, u64) {
    let (path, query) = path.split_once("?r=").unwrap_or_else(|| panic!("no r in {path}"));
    let parts: Vec<&str> = path.trim_start_matches("/u/").split('/').collect();
    let number = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("'{s}' in {path}"));
    (number(parts[0]), number(parts[1]), number(query))
}

/// Checks what the server saw of `iterations` iterations over `connections` connections from
/// `workers` workers: returns the threads named.
fn check_seen(seen: &[SeenRequest], iterations: u64, connections: u64, workers: u64, h1: bool) -> BTreeSet<String> {
    let (puts, gets): (Vec<&SeenRequest>, Vec<&SeenRequest>) = seen.iter().partition(|r| r.method == "POST");
    assert_eq!((puts.len() as u64, gets.len() as u64), (iterations, iterations));
    let mut by_vu: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let (mut uuids, mut threads) = (BTreeSet::new(), BTreeSet::new());
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for put in &puts {
        let (vu, it, r) = put_path(&put.path);
        assert!(vu < connections && (1..=6).contains(&r), "{}", put.path);
        assert!(by_vu.entry(vu).or_default().insert(it), "vu {vu} iteration {it} twice");
        let body: serde_json::Value = serde_json::from_slice(&put.body).expect("a JSON body");
        assert_eq!((body["vu"].as_u64(), body["it"].as_u64()), (Some(vu), Some(it)), "{body}");
        let pad: u64 = body["pad"].as_str().unwrap().parse().unwrap();
        assert!((1000..=99999).contains(&pad), "{body}");
        if h1 {
            assert_eq!(put.header("content-length"), Some(put.body.len().to_string().as_str()));
        }
        let id = put.header("x-id").expect("x-id");
        assert!(id.len() == 36 && uuids.insert(id.to_string()), "{id} repeated or malformed");
        let place = put.header("x-where").expect("x-where");
        let (worker, _) = place.trim_start_matches('w').split_once('t').expect("w…t…");
        // Worker i of W holds the run's connections i, i + W, …
        assert_eq!(worker.parse::<u64>().unwrap(), vu % workers, "{place} for vu {vu}");
        threads.insert(place.to_string());
        let at: u64 = put.header("x-at").unwrap().parse().unwrap();
        assert!(at <= now_ms && at + 60_000 > now_ms, "{at}");
    }
    // Each connection numbers its iterations from 0, with none missing.
    for (vu, its) in &by_vu {
        assert_eq!(its.iter().copied().collect::<Vec<_>>(), (0..its.len() as u64).collect::<Vec<_>>(), "vu {vu}");
    }
    let done: BTreeSet<String> = gets.iter().map(|g| g.path.clone()).collect();
    for put in &puts {
        let (vu, it, _) = put_path(&put.path);
        assert!(done.contains(&format!("/u/{vu}/{it}/done")), "no GET for vu {vu} iteration {it}");
    }
    threads
}

#[test]
fn every_request_carries_its_own_connection_and_iteration_over_http1_http2_and_http3() {
    let dir = tempfile::tempdir().unwrap();
    for flags in [&[][..], &["--http2", "-p", "3"][..]] {
        let server = TestServer::start(Behavior::ok(5));
        let file = templated_file(dir.path(), server.url().trim_end_matches('/'));
        let args = [&["-c", "4", "-t", "2", "-n", "150", "-j", "--scenario", &file][..], flags].concat();
        let out = support::run_volley(&args);
        assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
        let r = support::json_report(&out);
        assert_eq!(number(&r, "/requests/ok"), 300, "{flags:?}: {r}");
        let threads = check_seen(&server.seen_requests(), 150, 4, 1, flags.is_empty());
        assert_eq!(threads, BTreeSet::from(["w0t0".to_string(), "w0t1".to_string()]), "{flags:?}");
    }
    let quic = H3TestServer::start(H3Options::default());
    let file = templated_file(dir.path(), quic.url().trim_end_matches('/'));
    let ca = quic.cert().write_ca(dir.path());
    let ca = ca.to_str().expect("a UTF-8 path");
    let args = ["--http3", "-p", "3", "-c", "4", "-t", "2", "-n", "150", "--cacert", ca, "-j", "--scenario", &file];
    let out = support::run_volley(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let threads = check_seen(&quic.seen_requests(), 150, 4, 1, false);
    assert_eq!(threads, BTreeSet::from(["w0t0".to_string(), "w0t1".to_string()]), "h3");
}

#[test]
fn across_workers_connections_are_numbered_in_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(Behavior::ok(5));
    let file = templated_file(dir.path(), server.url().trim_end_matches('/'));
    let workers = [WorkerProcess::start(&[]), WorkerProcess::start(&[])];
    let list = workers.iter().map(|w| w.address()).collect::<Vec<_>>().join(",");
    let out = support::run_volley(["-c", "6", "-t", "1", "-n", "120", "-j", "--workers", &list, "--scenario", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let threads = check_seen(&server.seen_requests(), 120, 6, 2, true);
    assert_eq!(threads, BTreeSet::from(["w0t0".to_string(), "w1t0".to_string()]));
}

#[test]
fn a_template_that_names_nothing_is_refused_at_its_place_before_any_load() {
    let server = TestServer::start(Behavior::ok(5));
    let dir = tempfile::tempdir().unwrap();
    let origin = server.url();
    let cases = [
        (r#"path = "/a/{{user}}""#, "5:12: `{{user}}` names nothing volley knows (it knows vu, iteration"),
        (
            r#"path = "/a"
headers = { x-n = "{{random_int 9 1}}" }"#,
            "6:20: `{{random_int 9 1}}`: random_int takes two whole numbers",
        ),
        (
            r#"path = "/a"
body = "{{vu""#,
            "6:9: `{{` without a closing `}}`",
        ),
    ];
    for (step, says) in cases {
        let file = dir.path().join("bad.toml");
        std::fs::write(
            &file,
            format!("origin = \"{origin}\"\n[[scenario]]\nname = \"s\"\n[[scenario.step]]\n{step}\n"),
        )
        .unwrap();
        let out = support::run_volley(["-n", "5", "--scenario", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.contains(says), "{line}\nwanted: {says}");
    }
    std::fs::write(dir.path().join("blob.bin"), b"\x00\x01{{\xff").unwrap();
    let file = dir.path().join("blob.toml");
    let step = "[[scenario.step]]\nmethod = \"PUT\"\npath = \"/blob/{{vu}}\"\nbody_file = \"blob.bin\"\n";
    std::fs::write(&file, format!("origin = \"{origin}\"\n[[scenario]]\nname = \"s\"\n{step}")).unwrap();
    let out = support::run_volley(["-n", "5", "--scenario", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
    let line = one_error_line(&out);
    assert!(
        line.contains(
            "blob.bin, byte 2: `{{` without a closing `}}` (to send the file as written, set template = false"
        ),
        "{line}"
    );
    assert_eq!(server.connections(), 0, "no load before the file is good");

    // As written, the step sends its `{{` unfilled.
    std::fs::write(&file, format!("origin = \"{origin}\"\n[[scenario]]\nname = \"s\"\n{step}template = false\n"))
        .unwrap();
    let out = support::run_volley(["-n", "5", "-c", "1", "--scenario", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
    let seen = server.seen_requests();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|r| r.path == "/blob/{{vu}}" && r.body == b"\x00\x01{{\xff"), "{:?}", seen[0]);
}

#[test]
fn the_same_seed_draws_the_same_numbers_but_never_the_same_uuids() {
    let dir = tempfile::tempdir().unwrap();
    let run = |seed: &str| {
        let server = TestServer::start(Behavior::ok(5));
        let file = templated_file(dir.path(), server.url().trim_end_matches('/'));
        let out = support::run_volley(["-c", "1", "-t", "1", "-n", "20", "--seed", seed, "--scenario", &file]);
        assert_eq!(out.status.code(), Some(0), "{}", describe_output(&out));
        let puts: Vec<SeenRequest> = server.seen_requests().into_iter().filter(|r| r.method == "POST").collect();
        let numbers: Vec<u64> = puts.iter().map(|p| put_path(&p.path).2).collect();
        let ids: BTreeSet<String> = puts.iter().map(|p| p.header("x-id").unwrap().to_string()).collect();
        assert_eq!((numbers.len(), ids.len()), (20, 20));
        (numbers, ids)
    };
    let (first, first_ids) = run("7");
    let (again, again_ids) = run("7");
    assert_eq!(first, again, "--seed 7 twice drew different numbers");
    assert!(first_ids.is_disjoint(&again_ids), "a UUID came back in a second run");
    let (other, _) = run("8");
    assert_ne!(first, other, "--seed 7 and 8 drew the same 20 numbers from 1..=6");
}
