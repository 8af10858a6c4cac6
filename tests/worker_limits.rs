//! End to end: a real `volley worker` under the limits its host sets — too few tasks for the
//! engine threads a shard asks for — fails what it cannot do with its reason, leaks nothing, and
//! serves the next controller. The limits are set on the worker process only (prlimit), never on
//! the machine.

mod support;

use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::Duration;

use support::{
    Behavior, TestServer, WorkerProcess, assert_success, describe_output, free_port, json_report, run_with_timeout,
    volley_command, wait_until,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(40);

/// `volley ARGS` as a controller, run to its end.
fn controller(args: &[&str]) -> Output {
    let mut cmd = volley_command(args);
    cmd.env_remove("VOLLEY_TOKEN");
    let shown = format!("{cmd:?}");
    run_with_timeout(cmd, RUN_TIMEOUT)
        .unwrap_or_else(|out| panic!("{shown} still running after {RUN_TIMEOUT:?}\n{}", describe_output(&out)))
}

fn ok_requests(out: &Output) -> u64 {
    json_report(out)["requests"]["ok"].as_u64().expect("requests.ok in the report")
}

/// The threads of process `pid`.
fn tasks(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn has_prlimit() -> bool {
    Command::new("prlimit").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// `volley worker` on a free loopback port, run through `cmd` (which ends with the program
/// that runs it: prlimit, or the binary itself).
fn worker(mut cmd: Command) -> WorkerProcess {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    cmd.args(["worker", "--listen", &addr.to_string()]).env_remove("VOLLEY_TOKEN");
    WorkerProcess::spawn(cmd, addr, None).unwrap_or_else(|why| panic!("the worker did not start: {why}"))
}

#[test]
fn a_worker_that_cannot_start_every_engine_thread_fails_the_run_and_keeps_none_of_them() {
    // RLIMIT_NPROC binds no root process, so the worker runs as a user of its own; and only
    // that user may lower the limit of a running process without CAP_SYS_RESOURCE.
    if !is_root() || !has_prlimit() {
        eprintln!("skipped: needs root (to run the worker as a user whose task limit binds) and prlimit");
        return;
    }
    // No other process has this user, so the limit counts the worker's threads alone.
    let uid = 3_000_000 + std::process::id() % 100_000;
    let server = TestServer::start(Behavior::ok(14));
    let mut cmd = Command::new(support::volley_bin());
    cmd.uid(uid).gid(uid);
    let worker = worker(cmd);
    let pid = worker.pid();
    let idle = tasks(pid);
    // Room for the shard's own thread and three engine threads: the fourth of eight fails.
    let limit = idle + 1 + 3;
    let mut prlimit = Command::new("prlimit");
    prlimit.uid(uid).gid(uid);
    prlimit.args(["--pid", &pid.to_string(), &format!("--nproc={limit}:{limit}")]);
    let set = prlimit.output().expect("prlimit runs");
    assert_success(&set);

    let (address, url) = (worker.address(), server.url());
    let args = |threads| ["--workers", &address, "-t", threads, "-c", "8", "-n", "200", "-j", &url];
    let out = controller(&args("8"));
    assert_eq!(out.status.code(), Some(1), "{}", describe_output(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot start engine thread 4 of 8"), "{}", describe_output(&out));
    assert!(stderr.contains("ulimit -u"), "the fix is not named: {stderr}");
    assert!(
        wait_until(Duration::from_secs(3), || tasks(pid) == idle),
        "the worker kept {} threads of the failed run (idle it has {idle})\n{}",
        tasks(pid) - idle,
        worker.log()
    );
    assert_eq!(server.requests(), 0);

    // Nothing of the failed run holds the limit: a run that fits in it goes through.
    let out = controller(&args("3"));
    assert_success(&out);
    assert_eq!(ok_requests(&out), 200);
    assert_eq!(server.requests(), 200);
    assert!(wait_until(Duration::from_secs(3), || tasks(pid) == idle), "{} threads left", tasks(pid));
}
