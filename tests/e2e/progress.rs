//! The live progress line: one merged line per second on a terminal's stderr, nothing on a pipe.

use crate::support;

use std::process::Command;
use std::time::Duration;

use support::{Behavior, TestServer, describe_output, run_volley, run_with_timeout, volley_bin};

#[test]
fn a_terminal_sees_one_progress_line_per_second() {
    let server = TestServer::start(Behavior::ok(64));
    // script(1) gives the command a pseudo-terminal, as a user's shell would.
    let command = format!("{} -z 2500ms -c 4 -t 1 {}", volley_bin().display(), server.url());
    let mut cmd = Command::new("script");
    cmd.args(["-qefc", &command, "/dev/null"]);
    let output = match run_with_timeout(cmd, Duration::from_secs(30)) {
        Ok(o) => o,
        Err(o) => panic!("script(1) did not finish: {}", describe_output(&o)),
    };
    assert!(output.status.success(), "{}", describe_output(&output));
    let text = String::from_utf8_lossy(&output.stdout);
    for second in ["[1s]", "[2s]"] {
        let line =
            text.split('\r').find(|l| l.contains(second)).unwrap_or_else(|| panic!("no {second} line in {text:?}"));
        assert!(line.contains("req/s") && line.contains("p99"), "{line:?}");
    }
    assert!(!text.contains("[3s]"), "a 2.5 s run has two whole seconds: {text:?}");
    // The line is wiped before the report, which follows in full.
    assert!(text.contains("\r\x1b[KURL:"), "{text:?}");
}

#[test]
fn a_pipe_gets_no_progress_line() {
    let server = TestServer::start(Behavior::ok(64));
    let output = run_volley(["-z", "1500ms", "-c", "4", "-t", "1", &server.url()]);
    assert!(output.status.success(), "{}", describe_output(&output));
    assert!(output.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("URL:"));
}
