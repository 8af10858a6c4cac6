//! End to end: a real `volley worker` under the limits its host sets — too few tasks for the
//! engine threads a shard asks for, too few file descriptors for the connections peers open —
//! fails what it cannot do with its reason, leaks nothing, never spins, and serves the next
//! controller. The limits are set on the worker process only (prlimit), never on the machine.

use crate::support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use support::{
    Behavior, TestServer, WorkerProcess, assert_success, describe_output, free_port, json_report, run_with_timeout,
    volley_command, wait_until,
};

const RUN_TIMEOUT: Duration = Duration::from_secs(40);

/// How long a worker keeps a connection whose peer sends nothing (documented in docs/distributed.md).
const IDLE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// CPU time (user + system) process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the worker's /proc/PID/stat");
    // The fields after the command name, which is in parentheses and may hold spaces: state is
    // the first of them, utime and stime (fields 14 and 15 of proc(5)) the 12th and 13th.
    let after_name = &stat[stat.rfind(')').expect("a command name") + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf(3) has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis(ticks * 1000 / per_second)
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

/// Whether the peer has closed `socket`: everything it sent is read, then end of file or an
/// error; false while it is open and quiet.
fn closed_by_peer(mut socket: &TcpStream) -> bool {
    socket.set_nonblocking(true).expect("non-blocking");
    let mut buf = [0; 4096];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
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

#[test]
fn idle_connections_neither_spin_a_worker_out_of_descriptors_nor_lock_a_controller_out() {
    if !has_prlimit() {
        eprintln!("skipped: needs prlimit");
        return;
    }
    const FILES: usize = 64;
    let server = TestServer::start(Behavior::ok(14));
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nofile={FILES}:{FILES}")).arg(support::volley_bin());
    let worker = worker(cmd);
    let pid = worker.pid();
    // More silent connections than the worker has descriptors: the last ones wait to be
    // accepted, so every accept fails with EMFILE while the listener stays readable.
    let opened = Instant::now();
    let silent: Vec<TcpStream> =
        (0..FILES + 16).map(|_| TcpStream::connect(worker.addr()).expect("the kernel takes the connection")).collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_time(pid);
    std::thread::sleep(Duration::from_secs(2));
    let spent = cpu_time(pid) - before;
    assert!(spent < Duration::from_millis(250), "the worker used {spent:?} of CPU in 2 s out of descriptors");
    assert!(worker.log().contains("cannot accept connections"), "{}", worker.log());

    // The silent ones are closed after the idle timeout, and a controller gets in.
    std::thread::sleep((opened + IDLE_TIMEOUT + Duration::from_millis(500)).saturating_duration_since(Instant::now()));
    let out = controller(&["--workers", &worker.address(), "-c", "2", "-n", "100", "-j", &server.url()]);
    assert_success(&out);
    assert_eq!(ok_requests(&out), 100);
    let closed = silent.iter().filter(|s| closed_by_peer(s)).count();
    assert!(closed >= FILES / 2, "the worker closed only {closed} of {} silent connections", FILES + 16);
}
