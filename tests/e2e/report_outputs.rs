//! End to end: where the report goes. A report that cannot be written to stdout (`> run.json` on
//! a full disk) fails the command, as a failed `-o` file does, while a reader that goes away
//! (`| head -1`) stays quiet; and two outputs that name one file by different spellings are
//! refused before any load.

use crate::support;

use std::fs::File;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{Behavior, TestServer, describe_output, one_error_line, run_volley, volley_command};

/// Waits for `child` at most a minute, then kills it and fails the test.
fn wait_bounded(child: &mut Child, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} still running after a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut text = String::new();
    child.stderr.take().unwrap().read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_report_that_cannot_be_written_to_stdout_fails_the_run_with_one_line() {
    let server = TestServer::start(Behavior::ok(14));
    let url = server.url();
    for format in [&["-j"][..], &[][..]] {
        let mut cmd = volley_command(["-n", "20", "-c", "2"]);
        cmd.args(format).arg(&url);
        let full = File::options().write(true).open("/dev/full").unwrap();
        let mut child = cmd.stdin(Stdio::null()).stdout(full).stderr(Stdio::piped()).spawn().unwrap();
        let status = wait_bounded(&mut child, "volley > /dev/full");
        let stderr = stderr_of(&mut child);
        assert_eq!(status.code(), Some(1), "{format:?}: stderr: {stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{format:?}: {stderr}");
        assert!(
            lines[0].starts_with("volley: error: stdout: the report could not be written:"),
            "{format:?}: {stderr}"
        );
    }
    assert_eq!(server.requests(), 40, "each run ran its 20 requests before the report was lost");
}

#[test]
fn a_reader_that_goes_away_early_is_no_error() {
    let server = TestServer::start(Behavior::ok(14));
    let mut volley = volley_command(["-n", "20", "-c", "2", &server.url()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -1`: one line read, then the pipe closed.
    let head =
        Command::new("head").arg("-1").stdin(volley.stdout.take().unwrap()).stdout(Stdio::null()).status().unwrap();
    assert!(head.success());
    let status = wait_bounded(&mut volley, "volley | head -1");
    let stderr = stderr_of(&mut volley);
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn two_outputs_that_name_one_file_by_any_spelling_are_refused_before_any_load() {
    let server = TestServer::start(Behavior::ok(14));
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(at("exists.json"), "old").unwrap();
    std::os::unix::fs::symlink(at("exists.json"), at("link.json")).unwrap();
    let dotted = |name: &str| format!("{}/./{name}", dir.path().display());
    let cases: Vec<Vec<String>> = vec![
        vec!["-o".into(), format!("json:{}", at("t2")), "--hlog".into(), dotted("t2")],
        vec!["-o".into(), format!("csv:{}", at("t3")), "-o".into(), format!("md:{}", dotted("t3"))],
        vec!["-o".into(), format!("json:{}", at("exists.json")), "-o".into(), format!("html:{}", at("link.json"))],
        vec!["-o".into(), format!("csv:{}/sub/../t4", dir.path().display()), "-o".into(), format!("md:{}", at("t4"))],
    ];
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    for args in cases {
        let mut all = vec!["-n".to_string(), "10".into()];
        all.extend(args.iter().cloned());
        all.push(server.url());
        let out = run_volley(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe_output(&out));
        let line = one_error_line(&out);
        assert!(line.contains("this file is named by"), "{args:?}: {line}");
    }
    assert_eq!(server.requests(), 0, "no load before the check");
    assert_eq!(std::fs::read_to_string(at("exists.json")).unwrap(), "old", "no file was touched");
    assert!(!dir.path().join("t2").exists() && !dir.path().join("t3").exists());
}

#[test]
fn one_request_at_a_rate_reports_no_achieved_rate_of_thousands() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run_volley(["--rate", "1", "-n", "1", "-j", &server.url()]);
    let report = support::json_report(&out);
    assert_eq!(report["schedule"]["sent"], 1, "{report}");
    assert!(report["schedule"]["achievedPerSec"].is_null(), "{report}");
    let out = run_volley(["--rate", "1", "-n", "1", &server.url()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1/s requested (1 sent: too few to measure a rate by)"), "{text}");
    assert!(!text.contains("/s achieved"), "{text}");
}
