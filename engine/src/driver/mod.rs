//! The per-thread I/O loop: the only code that touches sockets. `uring` is the ring plumbing,
//! `lifecycle` the run's course (gate, ticks, end), `conn` a transport with its session, and
//! `event_loop` the loop that ties them together.

mod arrival;
mod buf_ring;
mod conn;
mod epoll;
mod event_loop;
mod lifecycle;
mod ops;
mod recvmsg;
mod socket;
mod source;
mod udp;
mod uring;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use rustls::pki_types::ServerName;

use crate::engine::kind::Engine;
use crate::gate::StartGate;
use crate::session::SessionConfig;
use crate::stats::{ErrorKind, Stats};

/// One request's checks: how each is judged, with the check's index among its name's.
pub(crate) type RequestChecks = Box<[CheckJudge]>;

/// One check of a request, as the loop judges it.
#[derive(Debug)]
pub(crate) struct CheckJudge {
    pub judge: Judge,
    /// Its index among its name's checks (`Mix::check_names`).
    pub index: u16,
    /// A failure ends the iteration (`on_failure = "abort"`).
    pub abort: bool,
}

/// How the loop judges a check when the response is counted.
#[derive(Debug)]
pub(crate) enum Judge {
    /// On the response's status and latency, here.
    Now(crate::plan::Rule),
    /// On its body, by the session: the verdict is bit `j` of the `Event::Judged` before it.
    Kept(u8),
}

/// What every thread of a run shares, read-only.
pub(crate) struct Shared {
    pub addr: SocketAddr,
    /// `addr` as connect(2) takes it; every connect points here.
    pub sockaddr: (libc::sockaddr_storage, libc::socklen_t),
    /// The run's requests as HTTP/1.1 encodes them, once per run: connections send them from
    /// here.
    pub requests: Vec<Vec<u8>>,
    /// A mix: the name of each request (an index into `Mix::names`), whose statistics it is
    /// counted in besides the run's. None: the one request, counted in the run's alone.
    pub names: Option<Box<[u16]>>,
    /// A mix with checks: per request, each check's rule and its index among its name's checks.
    /// None when no request has a check.
    pub checks: Option<Box<[RequestChecks]>>,
    /// Per request: it is a HEAD.
    pub heads: Box<[bool]>,
    /// Per request: it is a step of a flow (see `Mix::flow_steps`); empty without flows.
    pub flows: Box<[bool]>,
    /// Per request: the pause its user takes after its answer; empty without think times.
    pub thinks: Box<[Option<crate::plan::Think>]>,
    /// Per request: how many extractors it has (the values its `Event::Judged` must bring);
    /// empty without extractors.
    pub extracts: Box<[u8]>,
    /// Per request: the URL its user's cookies are matched against; None when no jar is on.
    pub cookies: Option<crate::session::CookieUrls>,
    /// What redirects are followed by; None when no step follows them. The requests after a
    /// mix's own are the hops of those that do (`plan::Hops`).
    pub redirects: Option<crate::plan::Redirects>,
    /// The requests are the steps of these scenarios, taken as iterations.
    pub scenarios: Option<Box<[crate::plan::Scenario]>>,
    /// Per request: its scenario and whether an iteration ends with it; empty without
    /// scenarios.
    pub steps: Box<[crate::plan::StepOf]>,
    /// Per request: the feeders its templates use (bit i: feeder i).
    pub feeder_uses: Box<[u32]>,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub connect_timeout: Duration,
    /// With false, nothing is opened before the start: every request gets its own connection.
    pub keepalive: bool,
    /// How long the loop may hold completions to collect a larger batch.
    pub max_hold: Duration,
    /// How every connection's session starts.
    pub session: SessionConfig,
    /// UDP: the size of each provided receive buffer; GRO only when it holds a whole batch.
    pub udp_buffer: usize,
    /// The local addresses connections leave from (none: the kernel's choice).
    pub sources: SourceAddrs,
    /// The I/O beneath every thread's loop.
    pub engine: Engine,
}

/// One thread's share of the plan.
pub(crate) struct ThreadPlan {
    pub index: usize,
    pub connections: usize,
    /// Requests this thread may start; None runs until the deadline or the stop flag.
    pub budget: Option<u64>,
    /// How long the load runs once started; None for a request budget.
    pub duration: Option<Duration>,
    /// This thread's share of the load: its part of the rate, or its connections under the
    /// ramp.
    pub load: crate::plan::Load,
    /// The worker's index in the fleet (0 on one machine): `{{worker}}`.
    pub worker: u64,
    /// The first this many ticks are the warm-up; a budget begins after them.
    pub warm_up_ticks: u32,
    /// A mix taken at random: this thread's seed (None: in turn).
    pub seed: Option<u64>,
    /// The run's feeders, with this thread's share of a shard feeder's rows.
    pub feeders: Vec<crate::feeder::Feeder>,
    pub gate: Arc<StartGate>,
    pub stop_flag: Arc<AtomicBool>,
    pub tx: Sender<ThreadMsg>,
}

pub(crate) enum ThreadMsg {
    /// Every connection was tried once: `connected` are up, `failed` could not be set up.
    Ready { thread: usize, connected: u64, failed: u64 },
    /// The thread sent its first requests.
    Started { thread: usize, at: Instant },
    /// The delta of one whole second since the start (tick 1 covers 0 s to 1 s).
    Interval { thread: usize, tick: u32, delta: Stats },
    /// The thread is done: everything since its last interval.
    Done(ThreadDone),
}

/// A thread's last message.
pub(crate) struct ThreadDone {
    pub thread: usize,
    pub rest: Stats,
    pub error_samples: Vec<(ErrorKind, String)>,
    pub ended: Instant,
    pub cpu: Duration,
    /// The lowest limit on requests in flight per connection a server set below what was asked
    /// (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS).
    pub stream_limit: Option<u32>,
    /// What ended the thread's load when it was an error rather than the plan.
    pub failure: Option<String>,
}

pub(crate) use socket::encode_sockaddr;
pub use source::check_source_addrs;
pub(crate) use source::{SourceAddrs, check_sources_against};
pub(crate) use udp::{GRO_BUF_SIZE, MIN_BUF_SIZE};

pub(crate) fn run_thread(shared: Arc<Shared>, plan: ThreadPlan) -> io::Result<()> {
    // The default 50 µs of timer slack would add a tenth to every hold (`--max-hold`) and to
    // the waits for deadlines: 1 µs keeps them to what was asked. Failing, it only costs that.
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
    let stop_flag = plan.stop_flag.clone();
    let (buffers, buf_size) = event_loop::receive_buffers(&shared, plan.connections);
    let slots = plan.connections.max(1);
    let outcome = match shared.engine {
        Engine::IoUring => ops::RingIo::ring(plan.connections).and_then(|mut ring| {
            let io = ops::RingIo::new(&mut ring, slots as u32, shared.connect_timeout, buffers, buf_size)?;
            event_loop::Loop::new(io, shared, plan)?.run()
        }),
        Engine::Epoll => epoll::Epoll::new(slots, shared.connect_timeout, buffers, buf_size)
            .and_then(|io| event_loop::Loop::new(io, shared, plan)?.run()),
    };
    if outcome.is_err() {
        // One thread failing fails the run: the others need not go on to the deadline. (A loop
        // that fails says so itself before it closes; this is for a thread that failed to set up.)
        stop_flag.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    outcome
}

/// CPU time (user + system) the calling thread has used.
pub(crate) fn thread_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
