//! Running the built `volley` binary with a timeout, and reading what it printed.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long [`run_volley`] lets the binary run before killing it and failing the test.
pub const VOLLEY_TIMEOUT: Duration = Duration::from_secs(60);

/// Path of the `volley` binary cargo built for these tests.
pub fn volley_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_volley"))
}

/// A `Command` for the volley binary with `args`, for tests that need to set env or cwd before
/// passing it to [`run_with_timeout`].
pub fn volley_command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(volley_bin());
    cmd.args(args);
    cmd
}

/// Runs `volley ARGS` to completion and returns its output; panics (with what it printed) if it
/// runs longer than [`VOLLEY_TIMEOUT`].
pub fn run_volley<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_volley_timeout(args, VOLLEY_TIMEOUT)
}

/// [`run_volley`] with another timeout.
pub fn run_volley_timeout<I, S>(args: I, timeout: Duration) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_within(volley_command(args), timeout)
}

/// `volley ARGS` as a controller, without the test's own VOLLEY_TOKEN (if it has one), as a user
/// without a token runs it.
pub fn controller_command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = volley_command(args);
    cmd.env_remove("VOLLEY_TOKEN");
    cmd
}

/// Runs `cmd` to completion and returns its output; panics (with what it printed) if it runs
/// longer than `timeout`.
pub fn run_within(cmd: Command, timeout: Duration) -> Output {
    let shown = format!("{cmd:?}");
    match run_with_timeout(cmd, timeout) {
        Ok(output) => output,
        Err(output) => panic!("{shown} still running after {timeout:?}; killed it.\n{}", describe_output(&output)),
    }
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) for at most `timeout`.
///
/// `Ok` with the output if it exited by itself; `Err` with what it printed so far if it had to be
/// killed. The child gets its own process group and the whole group is killed, so grandchildren
/// holding the output pipes cannot keep this waiting.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<Output, Output> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for child") {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: kill(2) on the process group we created; no memory is involved.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            break child.wait().expect("waiting for killed child");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output =
        Output { status, stdout: stdout.join().expect("stdout reader"), stderr: stderr.join().expect("stderr reader") };
    if timed_out { Err(output) } else { Ok(output) }
}

/// [`run_with_timeout`] that also returns the peak resident memory of `cmd`'s process, in KiB;
/// panics with what it printed if it runs over `timeout`.
///
/// GNU time forks `cmd` and reads its `ru_maxrss`. wait4(2) here would not do: a child forked
/// from this test process starts with this process's resident memory, and Linux keeps that
/// peak across exec, so it would report the test binary's size (hundreds of MB, with the other
/// tests running) rather than volley's. GNU time's own process is small when it forks.
pub fn run_with_peak_rss(cmd: Command, timeout: Duration) -> (Output, u64) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let peak_file = dir.path().join("peak-rss");
    let mut timed = Command::new("/usr/bin/time");
    timed.arg("--format=%M").arg("--output").arg(&peak_file).arg(cmd.get_program()).args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        timed.current_dir(dir);
    }
    let output = run_with_timeout(timed, timeout).unwrap_or_else(|output| {
        panic!("{cmd:?} still running after {timeout:?}; killed it.\n{}", describe_output(&output))
    });
    // The last line is %M; a line before it says so when the command failed or was killed.
    let written = std::fs::read_to_string(&peak_file)
        .unwrap_or_else(|e| panic!("GNU time (Debian's `time`) wrote no {}: {e}", peak_file.display()));
    let peak_kib = written
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("GNU time wrote {written:?}, not a peak RSS"));
    (output, peak_kib)
}

pub(super) fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = pipe.read_to_end(&mut out);
        out
    })
}

/// Exit status, stdout and stderr as text, for assertion messages.
pub fn describe_output(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Panics with the full output unless the process exited with status 0.
pub fn assert_success(output: &Output) {
    assert!(output.status.success(), "command failed\n{}", describe_output(output));
}

/// Parses stdout as one JSON document (the `-j` report) and checks it against the published
/// schema; panics with the output if it is not a valid report.
pub fn json_report(output: &Output) -> serde_json::Value {
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e})\n{}", describe_output(output)));
    assert_valid_report(&report);
    report
}

/// Panics, listing every violation, unless `report` satisfies schema/report.schema.json.
pub fn assert_valid_report(report: &serde_json::Value) {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    assert_valid(&SCHEMA, "report.schema.json", report);
}

/// Panics, listing every violation, unless `doc` satisfies schema/compare.schema.json.
pub fn assert_valid_comparison(doc: &serde_json::Value) {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    assert_valid(&SCHEMA, "compare.schema.json", doc);
}

/// Panics, listing every violation, unless `doc` satisfies schema/find-max.schema.json.
pub fn assert_valid_find_max(doc: &serde_json::Value) {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    assert_valid(&SCHEMA, "find-max.schema.json", doc);
}

fn assert_valid(cache: &std::sync::OnceLock<jsonschema::Validator>, name: &str, report: &serde_json::Value) {
    let schema = cache.get_or_init(|| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema").join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let schema = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    });
    let errors: Vec<String> = schema.iter_errors(report).map(|e| format!("  {} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "the document does not match schema/{name}:\n{}\n{report:#}", errors.join("\n"));
}

/// The number at JSON pointer `pointer` (`"/requests/ok"`) of a `-j` report; panics naming the
/// pointer and the report when it is missing or not a number.
pub fn number(report: &serde_json::Value, pointer: &str) -> u64 {
    report.pointer(pointer).and_then(|v| v.as_u64()).unwrap_or_else(|| panic!("{pointer} is not a number in {report}"))
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for processes that must be told a port).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// A scenario `frame` of one step, GET /frame, each of whose users starts an iteration every
/// `pacing` (its text in the file: `"50ms"`). Its `pacing` is on the file's line 5, column 10.
pub fn paced_scenario(pacing: &str) -> String {
    format!("\n[[scenario]]\nname = \"frame\"\npacing = \"{pacing}\"\n  [[scenario.step]]\n  path = \"/frame\"\n")
}

/// A scenario file `name` in a fresh directory (which lives as long as the handle): `origin`
/// and then `scenario`'s text. Its path comes as text, as the command line takes it.
pub fn scenario_file(name: &str, origin: &str, scenario: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join(name);
    std::fs::write(&file, format!("origin = \"{origin}\"\n{scenario}")).expect("the scenario file");
    let file = file.to_str().expect("a UTF-8 path").to_string();
    (dir, file)
}

/// `N` ports free when picked and different from each other: all held at once while picked, so
/// the kernel cannot hand out one twice (one server's two listeners on one port fail to start).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: [std::net::TcpListener; N] =
        std::array::from_fn(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"));
    listeners.map(|l| l.local_addr().expect("local_addr").port())
}

/// True when running under CI (`CI` set to anything but empty, `0` or `false`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// The one line a failed command printed on stderr, checked to be one line and no panic.
pub fn one_error_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "panic:\n{}", describe_output(out));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stderr\n{}", describe_output(out));
    lines[0].to_string()
}
