//! End to end: a `--targets` file that cannot be used is refused before any load, with one line
//! on stderr that says where in the file and what, and exit status 2. (A mix's run itself is
//! the engine's to test, once it sends one.)

use crate::support;

use std::path::Path;
use std::process::Output;

use support::{Behavior, TestServer, VOLLEY_TIMEOUT, describe_output, one_error_line, run_within, volley_command};

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

#[test]
fn a_malformed_targets_file_is_refused_at_its_line_and_column_before_any_load() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    std::fs::write(dir.path().join("api.http"), format!("GET {url}a\n\nGET {url}b\nAccept */*\n")).unwrap();
    let out = volley_in(dir.path(), &["--targets", "api.http", "-n", "10"]);
    assert_refused(&out, "api.http:4:1: expected a header 'Name: value', a body '@FILE' or a blank line");
    std::fs::write(
        dir.path().join("api.jsonl"),
        format!("{{\"method\":\"GET\",\"url\":\"{url}\"}}\n{{\"method\":\"GET\",\"url\"}}\n"),
    )
    .unwrap();
    let out = volley_in(dir.path(), &["--targets", "api.jsonl", "-n", "10"]);
    assert_refused(&out, "api.jsonl:2:22: expected `:`");
    assert_eq!(server.connections(), 0, "a refused file still loaded the server");
}

#[test]
fn a_missing_body_file_is_named() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    std::fs::write(dir.path().join("api.http"), format!("GET {url}\n\nPOST {url}users\n@bodies/user.json\n")).unwrap();
    let out = volley_in(dir.path(), &["--targets", "api.http", "-n", "10"]);
    assert_refused(&out, "api.http:4:1: the body file bodies/user.json: No such file or directory (os error 2)");
    assert_eq!(server.connections(), 0, "a refused file still loaded the server");
}

#[test]
fn a_second_origin_is_refused_naming_both() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    let origin = url.trim_end_matches('/');
    std::fs::write(dir.path().join("api.http"), format!("GET {url}\n\n# name: elsewhere\nGET http://127.0.0.1:1/\n"))
        .unwrap();
    let out = volley_in(dir.path(), &["--targets", "api.http", "-n", "10"]);
    assert_refused(&out, &format!("api.http:4:5: http://127.0.0.1:1 is a second origin; a run has one ({origin})"));
    // With the URL on the command line, the file's origin must be the URL's.
    let out = volley_in(dir.path(), &["--targets", "api.http", "-n", "10", "http://127.0.0.1:1"]);
    assert_refused(
        &out,
        &format!(
            "api.http:1:5: {origin} is not the origin of the command line's URL (http://127.0.0.1:1); a run has one"
        ),
    );
    assert_eq!(server.connections(), 0, "a refused file still loaded the server");
}

#[test]
fn a_method_or_a_body_beside_a_targets_file_is_a_usage_error() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.http"), format!("GET {}\n", server.url())).unwrap();
    for flags in [["-m", "POST"], ["-d", "x"], ["--data", "@body.json"]] {
        let out = volley_in(dir.path(), &[&["--targets", "api.http", "-n", "10"][..], &flags].concat());
        assert_eq!(out.status.code(), Some(2), "{flags:?}\n{}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.contains("'--targets <FILE>' cannot be used with"), "{flags:?}: {line}");
        assert!(out.stdout.is_empty(), "{flags:?}: a report was printed");
    }
    assert_eq!(server.connections(), 0, "a refused command line still loaded the server");
}
