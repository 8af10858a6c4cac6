//! Background processes: worker daemons and controllers that must be signalled mid-run.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::volley::{describe_output, drain, free_port, volley_command};

/// How long [`WorkerProcess`] waits for a worker (or any daemon) to accept connections.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `signal` to process `pid` (one of ours), ignoring a process that is already gone.
pub fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child this test started; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Polls `condition` every 10 ms for at most `timeout`; true as soon as it holds.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` on a thread of its own that has first joined the network namespace `netns` (made
/// with `ip netns add`), so that sockets `f` makes live there. Only the helper thread moves;
/// the test's other threads stay where they are. Needs root.
pub fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = PathBuf::from("/run/netns").join(netns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on an open namespace file; it affects only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns({}): {}", path.display(), io::Error::last_os_error());
        f()
    })
    .join()
    .expect("the thread in the network namespace panicked")
}

/// True once `addr` accepts a TCP connection (from network namespace `netns` when given).
fn accepts(addr: SocketAddr, netns: Option<&str>) -> bool {
    let connect = move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
    match netns {
        Some(ns) => in_netns(ns, connect),
        None => connect(),
    }
}

/// A daemon running as a child process — typically `volley worker` — killed (SIGKILL) on drop.
/// Its stderr goes to a temp file ([`WorkerProcess::log`]) so that a chatty daemon can never
/// block on a full pipe.
pub struct WorkerProcess {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
    exited: Option<std::process::ExitStatus>,
}

impl WorkerProcess {
    /// `volley worker --listen 127.0.0.1:PORT EXTRA...` on a free port, once it accepts
    /// connections. `VOLLEY_TOKEN` is removed from its environment; pass `--token-file` for a
    /// token. Retries on another port if the one picked was taken in the meantime.
    pub fn start(extra: &[&str]) -> WorkerProcess {
        let mut last = String::new();
        for _ in 0..5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let mut cmd = volley_command(["worker", "--listen", &addr.to_string()]);
            cmd.args(extra).env_remove("VOLLEY_TOKEN");
            match WorkerProcess::spawn(cmd, addr, None) {
                Ok(worker) => return worker,
                Err(why) if why.contains("in use") => last = why,
                Err(why) => panic!("volley worker did not start: {why}"),
            }
        }
        panic!("volley worker did not start: {last}");
    }

    /// Spawns `cmd` (its own process group, stdin and stdout closed, stderr to a temp file) and
    /// waits until `addr` accepts connections, seen from network namespace `netns` when given,
    /// for at most [`DAEMON_START_TIMEOUT`]. `Err` with its stderr if it exited first or never
    /// listened (the process is killed then).
    pub fn spawn(mut cmd: Command, addr: SocketAddr, netns: Option<&str>) -> Result<WorkerProcess, String> {
        let log = tempfile::NamedTempFile::new().expect("a temp file for the daemon's stderr");
        let stderr = log.reopen().expect("reopening the temp file");
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        let mut daemon = WorkerProcess { child, addr, log, exited: None };
        let deadline = Instant::now() + DAEMON_START_TIMEOUT;
        loop {
            if let Some(status) = daemon.child.try_wait().expect("waiting for the daemon") {
                daemon.exited = Some(status);
                return Err(format!("{cmd:?} exited with {status}: {}", daemon.log()));
            }
            if accepts(addr, netns) {
                return Ok(daemon);
            }
            if Instant::now() >= deadline {
                daemon.kill();
                return Err(format!("{cmd:?} did not accept connections on {addr} within 10 s: {}", daemon.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `HOST:PORT`, as `--workers` takes it.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("waiting for the daemon");
        }
        self.exited.is_none()
    }

    /// SIGKILL, and reap it. Does nothing to a process that has already exited.
    pub fn kill(&mut self) {
        if self.is_running() {
            send_signal(self.child.id(), libc::SIGKILL);
            self.exited = Some(self.child.wait().expect("waiting for the killed daemon"));
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A command running in the background with its stdout and stderr captured, for tests that
/// signal it mid-run; killed (its whole process group) if still running when dropped.
pub struct BackgroundProcess {
    child: Child,
    shown: String,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    started: Instant,
}

impl BackgroundProcess {
    /// Spawns `cmd` in its own process group, stdin closed, stdout and stderr captured.
    pub fn spawn(mut cmd: Command) -> BackgroundProcess {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let shown = format!("{cmd:?}");
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
        let stdout = Some(drain(child.stdout.take().expect("piped stdout")));
        let stderr = Some(drain(child.stderr.take().expect("piped stderr")));
        BackgroundProcess { child, shown, stdout, stderr, started: Instant::now() }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Time since it was spawned.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Sends `signal` (SIGINT, SIGKILL, ...) to the process itself.
    pub fn signal(&self, signal: libc::c_int) {
        send_signal(self.child.id(), signal);
    }

    /// True while the process has not exited (it is not reaped here: see [`Self::wait`]).
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waiting for the child").is_none()
    }

    /// Waits for it to exit by itself for at most `timeout` and returns its output; panics
    /// (after killing it) with what it printed if it runs longer.
    pub fn wait(&mut self, timeout: Duration) -> Output {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the child") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let timed_out = status.is_none();
        let status = status.unwrap_or_else(|| {
            send_signal_group(self.child.id(), libc::SIGKILL);
            self.child.wait().expect("waiting for the killed child")
        });
        let stdout = self.stdout.take().map(|h| h.join().expect("stdout reader")).unwrap_or_default();
        let stderr = self.stderr.take().map(|h| h.join().expect("stderr reader")).unwrap_or_default();
        let output = Output { status, stdout, stderr };
        if timed_out {
            panic!("{} still running after {timeout:?}; killed it.\n{}", self.shown, describe_output(&output));
        }
        output
    }
}

impl Drop for BackgroundProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            send_signal_group(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Sends `signal` to the process group led by `pid` (a child spawned with `process_group(0)`).
fn send_signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on the process group of a child this test started.
    unsafe { libc::kill(-(pid as libc::pid_t), signal) };
}
