//! A fake `volley worker`: a small tonic server speaking the real worker protocol (volley.v1)
//! whose behaviour each test scripts. It plays the workers a real one never is — from another
//! protocol version, silent, lying about its counts, flooding intervals, sending histogram
//! bombs or terminal escapes — against the real `volley` controller (`--workers` its address).
//!
//! A [`Script`] says how it answers Hello and Clock and what a Run does: a list of [`Step`]s made
//! from the shard the controller sent (send an event, wait for Start or Stop, sleep, hold the
//! stream open). [`Seen`] records what the controller did, for the test to assert on.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, run_command::Command, run_event::Event, worker_server};

/// No step waits longer than this for the controller (Start, Stop, or hanging up after Hold),
/// so a fake never outlives a test that went wrong by more than this.
const STEP_LIMIT: Duration = Duration::from_secs(60);

/// What a Run does, made from the shard the controller sent.
pub type RunScript = Arc<dyn Fn(&v1::Shard) -> Vec<Step> + Send + Sync>;

/// How the fake answers each call.
#[derive(Clone)]
pub struct Script {
    pub hello: v1::HelloReply,
    /// Answer Clock probes with this machine's CLOCK_MONOTONIC (false: refuse them).
    pub clock: bool,
    /// None: refuse every Run as unimplemented.
    pub run: Option<RunScript>,
}

impl Script {
    /// A worker answering Hello and Clock as a real one of this protocol does, whose Run plays
    /// `steps(shard)`.
    pub fn run(steps: impl Fn(&v1::Shard) -> Vec<Step> + Send + Sync + 'static) -> Script {
        Script { hello: hello("fake"), clock: true, run: Some(Arc::new(steps)) }
    }
}

/// A Hello reply of this protocol version, named `name`.
pub fn hello(name: &str) -> v1::HelloReply {
    v1::HelloReply {
        protocol: PROTOCOL_VERSION,
        version: "0.0.0-fake".into(),
        name: name.into(),
        cores: 1,
        kernel: "6.12.0-fake".into(),
        protocols: vec!["http/1.1".into(), "h2".into(), "h3".into()],
        io_uring: Some(io_uring()),
        busy: false,
    }
}

fn io_uring() -> v1::IoUring {
    v1::IoUring { available: true, error: String::new(), tuned: true, batched_waits: true, engine: "io-uring".into() }
}

/// One step of a scripted Run.
pub enum Step {
    Send(Box<v1::RunEvent>),
    /// Started, stamped with this machine's clock when it is sent.
    Started,
    /// Wait for the controller's Start, then until the instant it names.
    AwaitStart,
    /// Wait for the controller's Stop.
    AwaitStop,
    Sleep(Duration),
    /// Keep the stream open, sending nothing, until the controller hangs up.
    Hold,
}

/// Accepted, Ready, then Started at the controller's start instant: what a real worker says
/// before its first interval.
pub fn opening(shard: &v1::Shard) -> Vec<Step> {
    vec![
        send(Event::Accepted(v1::Accepted { threads: 1, connections: shard.connections, io_uring: Some(io_uring()) })),
        send(Event::Ready(v1::Ready { connected: u64::from(shard.connections), failed: 0 })),
        Step::AwaitStart,
        Step::Started,
    ]
}

pub fn event(event: Event) -> v1::RunEvent {
    v1::RunEvent { event: Some(event) }
}

/// A step sending this event.
pub fn send(e: Event) -> Step {
    Step::Send(Box::new(event(e)))
}

pub fn interval(second: u32, delta: v1::Stats) -> Step {
    send(Event::Interval(v1::Interval { second, delta: Some(delta) }))
}

/// Finished after `seconds`, the shard's connections on one thread, not interrupted.
pub fn finished(shard: &v1::Shard, stats: v1::Stats, seconds: u64) -> Step {
    finished_with(shard, stats, seconds, Vec::new())
}

pub fn finished_with(shard: &v1::Shard, stats: v1::Stats, seconds: u64, samples: Vec<v1::ErrorSample>) -> Step {
    send(Event::Finished(v1::Finished {
        stats: Some(stats),
        duration_nanos: seconds * 1_000_000_000,
        threads: 1,
        connections: shard.connections,
        client_cpu_nanos: seconds * 100_000_000,
        interrupted: false,
        error_samples: samples,
        stream_limit: 0,
        warm_up: None,
        stopped_by: String::new(),
    }))
}

pub fn failed(reason: &str) -> Step {
    send(Event::Failed(v1::Failed { reason: reason.into() }))
}

/// Statistics as a real worker would send them: `ok` responses with status 200 and one 1 ms
/// latency sample each, `resets` reset errors, no connections made.
pub fn stats(ok: u64, resets: u64) -> v1::Stats {
    let mut latency = volley_histogram();
    latency.record_n(1_000_000, ok).expect("1 ms is in range");
    v1::Stats {
        counters: Some(v1::Counters {
            ok,
            errors_reset: resets,
            status: if ok > 0 { [(200, ok)].into() } else { Default::default() },
            ..Default::default()
        }),
        latency: encode(&latency),
        connect: encode(&volley_histogram()),
        first_byte: encode(&volley_histogram()),
        hold: encode(&volley_histogram()),
        // The closed model's: a real worker sends none.
        service: Vec::new(),
        lateness: Vec::new(),
        names: Vec::new(),
        scenarios: Vec::new(),
    }
}

/// An empty histogram of volley's bounds (1 ns to 1 h, 3 digits).
pub fn volley_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds")
}

/// HdrHistogram V2 + DEFLATE, as workers send histograms.
pub fn encode(h: &Histogram<u64>) -> Vec<u8> {
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut out).expect("serializing into a Vec");
    out
}

/// A V2 + DEFLATE histogram of volley's bounds that declares a payload of `declared` bytes
/// and carries none: about 60 bytes that once made the controller allocate all of it.
pub fn histogram_bomb(declared: u32) -> Vec<u8> {
    let mut header = Vec::with_capacity(40);
    header.extend_from_slice(&0x1c84_9313u32.to_be_bytes()); // V2 cookie
    header.extend_from_slice(&declared.to_be_bytes());
    header.extend_from_slice(&0u32.to_be_bytes()); // normalizing index offset
    header.extend_from_slice(&3u32.to_be_bytes()); // significant digits
    header.extend_from_slice(&1u64.to_be_bytes()); // lowest
    header.extend_from_slice(&3_600_000_000_000u64.to_be_bytes()); // highest
    header.extend_from_slice(&1f64.to_be_bytes()); // integer to double ratio
    let zlib = zlib_stored(&header);
    let mut out = 0x1c84_9314u32.to_be_bytes().to_vec(); // V2 + DEFLATE cookie
    out.extend_from_slice(&(zlib.len() as u32).to_be_bytes());
    out.extend_from_slice(&zlib);
    out
}

/// `data` as a zlib stream of one stored (uncompressed) DEFLATE block, RFC 1950/1951.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let len = u16::try_from(data.len()).expect("one stored block holds 64 KiB");
    let mut out = vec![0x78, 0x01, 0x01]; // zlib header; final block, stored
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    let (mut a, mut b) = (1u32, 0u32);
    for byte in data {
        a = (a + u32::from(*byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
    out
}

/// What the fake saw of the controller.
#[derive(Default)]
pub struct Seen {
    runs: AtomicU64,
    stops: AtomicU64,
    events_sent: AtomicU64,
    shard: Mutex<Option<v1::Shard>>,
}

impl Seen {
    /// Run calls received.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::SeqCst)
    }

    /// Stop commands received.
    pub fn stops(&self) -> u64 {
        self.stops.load(Ordering::SeqCst)
    }

    /// Events sent on Run streams.
    pub fn events_sent(&self) -> u64 {
        self.events_sent.load(Ordering::SeqCst)
    }

    /// The last shard a controller sent.
    pub fn shard(&self) -> Option<v1::Shard> {
        self.shard.lock().expect("not poisoned").clone()
    }
}

/// A fake worker on 127.0.0.1 (random port) on a runtime of its own; stopped on drop.
pub struct FakeWorker {
    addr: SocketAddr,
    seen: Arc<Seen>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeWorker {
    pub fn start(script: Script) -> FakeWorker {
        let seen = Arc::new(Seen::default());
        let service = Fake { script, seen: seen.clone() };
        let (stop, stopped) = oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("fake-worker".into())
            .spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                    addr_tx.send(listener.local_addr().unwrap()).unwrap();
                    // Stopped by the select below, not by a graceful shutdown: a held Run
                    // stream must not keep the test waiting.
                    let serving = tonic::transport::Server::builder().serve_with_incoming_shutdown(
                        worker_server::WorkerServer::new(service),
                        TcpListenerStream::new(listener),
                        std::future::pending::<()>(),
                    );
                    tokio::select! {
                        _ = serving => {}
                        _ = stopped => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .unwrap();
        let addr = addr_rx.recv().expect("the fake worker failed to start");
        FakeWorker { addr, seen, stop: Some(stop), thread: Some(thread) }
    }

    /// `127.0.0.1:PORT`, as `--workers` takes it.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    pub fn seen(&self) -> &Seen {
        &self.seen
    }
}

impl Drop for FakeWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Fake {
    script: Script,
    seen: Arc<Seen>,
}

#[tonic::async_trait]
impl worker_server::Worker for Fake {
    async fn hello(&self, _: Request<v1::HelloRequest>) -> Result<Response<v1::HelloReply>, Status> {
        Ok(Response::new(self.script.hello.clone()))
    }

    async fn clock(&self, _: Request<v1::ClockRequest>) -> Result<Response<v1::ClockReply>, Status> {
        if !self.script.clock {
            return Err(Status::unimplemented("this fake answers no clock probes"));
        }
        Ok(Response::new(v1::ClockReply { worker_nanos: monotonic_nanos() }))
    }

    type RunStream = ReceiverStream<Result<v1::RunEvent, Status>>;

    async fn run(&self, request: Request<Streaming<v1::RunCommand>>) -> Result<Response<Self::RunStream>, Status> {
        self.seen.runs.fetch_add(1, Ordering::SeqCst);
        let Some(script) = self.script.run.clone() else {
            return Err(Status::unimplemented("this fake runs nothing"));
        };
        let mut commands = request.into_inner();
        let shard = match commands.message().await {
            Ok(Some(v1::RunCommand { command: Some(Command::Shard(shard)) })) => shard,
            _ => return Err(Status::invalid_argument("the first message must be the shard")),
        };
        *self.seen.shard.lock().expect("not poisoned") = Some(shard.clone());
        let steps = script(&shard);
        let (start_tx, start_rx) = watch::channel(None::<u64>);
        let (stop_tx, stop_rx) = watch::channel(false);
        let seen = self.seen.clone();
        tokio::spawn(async move {
            while let Ok(Some(message)) = commands.message().await {
                match message.command {
                    Some(Command::Start(start)) => {
                        let _ = start_tx.send(Some(start.at_worker_nanos));
                    }
                    Some(Command::Stop(_)) => {
                        seen.stops.fetch_add(1, Ordering::SeqCst);
                        let _ = stop_tx.send(true);
                    }
                    _ => {}
                }
            }
        });
        let (events, events_rx) = mpsc::channel(16);
        tokio::spawn(play(steps, events, start_rx, stop_rx, self.seen.clone()));
        Ok(Response::new(ReceiverStream::new(events_rx)))
    }
}

async fn play(
    steps: Vec<Step>,
    events: mpsc::Sender<Result<v1::RunEvent, Status>>,
    mut start: watch::Receiver<Option<u64>>,
    mut stop: watch::Receiver<bool>,
    seen: Arc<Seen>,
) {
    for step in steps {
        let event = match step {
            Step::Send(message) => *message,
            Step::Started => event(Event::Started(v1::Started { at_worker_nanos: monotonic_nanos() })),
            Step::AwaitStart => {
                let started = tokio::time::timeout(STEP_LIMIT, start.wait_for(Option::is_some)).await;
                let Ok(Ok(at)) = started.map(|waited| waited.map(|at| at.unwrap_or_default())) else {
                    return;
                };
                let wait = at.saturating_sub(monotonic_nanos());
                tokio::time::sleep(Duration::from_nanos(wait)).await;
                continue;
            }
            Step::AwaitStop => {
                if !matches!(tokio::time::timeout(STEP_LIMIT, stop.wait_for(|s| *s)).await, Ok(Ok(_))) {
                    return;
                }
                continue;
            }
            Step::Sleep(d) => {
                tokio::time::sleep(d).await;
                continue;
            }
            Step::Hold => {
                let _ = tokio::time::timeout(STEP_LIMIT, events.closed()).await;
                return;
            }
        };
        if events.send(Ok(event)).await.is_err() {
            return;
        }
        seen.events_sent.fetch_add(1, Ordering::SeqCst);
    }
}

fn monotonic_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
