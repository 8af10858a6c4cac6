//! The worker daemon end to end: a real worker (`spawn` on loopback), a real HTTP server
//! (volley-serve), and the generated gRPC client playing the controller.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use volley_engine::{Plan, RequestSpec, Stop, Target};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, run_command::Command, run_event::Event, worker_client::WorkerClient};
use volley_serve::{ServeConfig, Server};
use volley_worker::{RunningWorker, WorkerConfig, clock, wire};

type Client = WorkerClient<InterceptedService<Channel, Token>>;

/// Adds `authorization: Bearer <token>` to every call, like the controller does.
#[derive(Clone)]
struct Token(Option<String>);

impl Interceptor for Token {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(t) = &self.0 {
            let value = format!("Bearer {t}").parse().map_err(|_| Status::internal("bad token"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

fn target_server() -> Server {
    Server::start(ServeConfig { addr: "127.0.0.1:0".parse().expect("valid address"), ..Default::default() })
        .expect("the target server starts")
}

async fn worker(configure: impl FnOnce(&mut WorkerConfig)) -> RunningWorker {
    let mut config = WorkerConfig::new("127.0.0.1:0".parse().expect("valid address"));
    configure(&mut config);
    volley_worker::spawn(config).await.expect("the worker starts")
}

async fn client(worker: &RunningWorker, token: Option<&str>) -> Client {
    let channel = Channel::from_shared(format!("http://{}", worker.addr()))
        .expect("valid URI")
        .connect()
        .await
        .expect("the worker answers");
    WorkerClient::with_interceptor(channel, Token(token.map(str::to_string)))
}

fn shard(url: &str, connections: usize, stop: Stop) -> v1::Shard {
    let request = RequestSpec::new("GET", Vec::new(), Vec::new());
    let mut plan = Plan::new(Target::parse(url).expect("valid URL"), request, connections, stop);
    plan.connect_timeout = Duration::from_secs(2);
    plan.request_timeout = Some(Duration::from_secs(5));
    plan.threads = plan.threads_for(2);
    wire::shard_to_proto(&plan)
}

fn command(c: Command) -> v1::RunCommand {
    v1::RunCommand { command: Some(c) }
}

/// One Run stream from the controller's side.
struct Run {
    commands: mpsc::Sender<v1::RunCommand>,
    events: Streaming<v1::RunEvent>,
    heartbeat: Option<tokio::task::JoinHandle<()>>,
}

impl Run {
    async fn open(client: &mut Client, shard: v1::Shard) -> Result<Run, Status> {
        let (commands, rx) = mpsc::channel(16);
        commands.send(command(Command::Shard(shard))).await.expect("stream open");
        let events = client.run(ReceiverStream::new(rx)).await?.into_inner();
        Ok(Run { commands, events, heartbeat: None })
    }

    /// Sends a heartbeat every 200 ms, as a live controller does.
    fn beat(&mut self) {
        let commands = self.commands.clone();
        self.heartbeat = Some(tokio::spawn(async move {
            loop {
                if commands.send(command(Command::Heartbeat(v1::Heartbeat {}))).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }));
    }

    async fn send(&self, c: Command) {
        self.commands.send(command(c)).await.expect("stream open");
    }

    async fn next(&mut self) -> Event {
        let message = tokio::time::timeout(Duration::from_secs(20), self.events.message())
            .await
            .expect("an event within 20 s")
            .expect("the stream carries on")
            .expect("the stream is not over");
        message.event.expect("an event with content")
    }

    async fn next_but_intervals(&mut self) -> Event {
        loop {
            match self.next().await {
                Event::Interval(_) => continue,
                event => return event,
            }
        }
    }

    /// Reads Accepted and Ready, then starts the load `delay` from now in the worker's clock.
    async fn start(&mut self, delay: Duration) -> u64 {
        let accepted = self.next().await;
        assert!(matches!(accepted, Event::Accepted(_)), "{accepted:?}");
        let ready = self.next().await;
        assert!(matches!(ready, Event::Ready(_)), "{ready:?}");
        let at = clock::now_nanos() + delay.as_nanos() as u64;
        self.send(Command::Start(v1::Start { at_worker_nanos: at })).await;
        at
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(h) = self.heartbeat.take() {
            h.abort();
        }
    }
}

/// Waits until the server's count has held still for `quiet`, at most `limit`; returns it.
async fn settled_count(server: &Server, quiet: Duration, limit: Duration) -> u64 {
    let since = std::time::Instant::now();
    let mut last = server.requests();
    let mut still = std::time::Instant::now();
    while since.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = server.requests();
        if now != last {
            (last, still) = (now, std::time::Instant::now());
        } else if still.elapsed() >= quiet {
            break;
        }
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_clock_and_a_run_of_500_requests() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;

    let hello = client
        .hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() })
        .await
        .expect("hello")
        .into_inner();
    assert_eq!(hello.protocol, PROTOCOL_VERSION);
    assert_eq!(hello.version, env!("CARGO_PKG_VERSION"));
    assert!(hello.cores >= 1);
    assert!(!hello.kernel.is_empty());
    assert_eq!(hello.protocols, ["http/1.1", "h2", "h3"]);
    assert!(hello.io_uring.expect("io_uring reported").available);
    assert!(!hello.busy);

    let before = clock::now_nanos();
    let worker_nanos = client.clock(v1::ClockRequest {}).await.expect("clock").into_inner().worker_nanos;
    let after = clock::now_nanos();
    assert!(before <= worker_nanos && worker_nanos <= after, "{before} <= {worker_nanos} <= {after}");

    let mut run = Run::open(&mut client, shard(&server.url(), 4, Stop::Requests(500))).await.expect("accepted");
    run.beat();
    let Event::Accepted(accepted) = run.next().await else { panic!("no Accepted first") };
    assert_eq!((accepted.threads, accepted.connections), (2, 4));
    let Event::Ready(ready) = run.next().await else { panic!("no Ready second") };
    assert_eq!((ready.connected, ready.failed), (4, 0));

    // While this run waits for its start, the worker is busy.
    let second = Run::open(&mut client, shard(&server.url(), 1, Stop::Requests(10))).await;
    assert_eq!(second.err().expect("refused").code(), Code::ResourceExhausted);
    let busy = client.hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() }).await;
    assert!(busy.expect("hello").into_inner().busy);
    assert_eq!(server.requests(), 0, "nothing before the start");

    let at = clock::now_nanos() + 50_000_000;
    run.send(Command::Start(v1::Start { at_worker_nanos: at })).await;
    let Event::Started(started) = run.next_but_intervals().await else { panic!("no Started") };
    assert!(started.at_worker_nanos + 2_000_000 >= at, "started {} before {at}", started.at_worker_nanos);
    let Event::Finished(finished) = run.next_but_intervals().await else { panic!("no Finished") };
    let stats = wire::stats_from_proto(&finished.stats.expect("stats"), wire::Bounds::default()).expect("stats decode");
    assert_eq!(stats.counters.ok, 500);
    assert_eq!(server.requests(), 500);
    assert_eq!(stats.histograms.latency.len(), 500);
    assert!(!finished.interrupted);
    drop(run);

    // The worker is free again for the next run.
    let mut again = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(20))).await.expect("accepted");
    again.beat();
    again.start(Duration::ZERO).await;
    let Event::Started(_) = again.next_but_intervals().await else { panic!("no Started") };
    let Event::Finished(finished) = again.next_but_intervals().await else { panic!("no Finished") };
    assert_eq!(finished.stats.and_then(|s| s.counters).expect("counters").ok, 20);
    drop(again);

    worker.shutdown().await.expect("clean shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_or_missing_token_is_refused_before_anything_runs() {
    let server = target_server();
    let worker = worker(|c| c.token = Some("s3cret".into())).await;
    for token in [None, Some("wrong")] {
        let mut client = client(&worker, token).await;
        let hello = client.hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() }).await;
        let status = hello.expect_err("refused");
        assert_eq!(status.code(), Code::Unauthenticated);
        assert_eq!(status.message(), "volley worker: wrong or missing token");
        assert_eq!(client.clock(v1::ClockRequest {}).await.expect_err("refused").code(), Code::Unauthenticated);
        let run = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(50))).await;
        assert_eq!(run.err().expect("refused").code(), Code::Unauthenticated);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.requests(), 0);
    assert_eq!(server.connections(), 0);

    let mut client = client(&worker, Some("s3cret")).await;
    client.hello(v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() }).await.expect("let in");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_outside_the_allowed_list_is_refused() {
    let server = target_server();
    let worker = worker(|c| c.allow_targets = vec!["10.0.0.0/8".into(), "target.example".into()]).await;
    let mut client = client(&worker, None).await;
    let status = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(50))).await.err().expect("refused");
    assert_eq!(status.code(), Code::PermissionDenied);
    assert!(status.message().contains(&server.url()), "{}", status.message());
    assert!(status.message().contains("10.0.0.0/8, target.example"), "{}", status.message());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.requests(), 0);
    assert_eq!(server.connections(), 0);

    // Loopback allowed: the same shard runs.
    let worker = self::worker(|c| c.allow_targets = vec!["127.0.0.0/8".into(), "::1".into()]).await;
    let mut client = self::client(&worker, None).await;
    let mut run = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(50))).await.expect("allowed");
    run.beat();
    run.start(Duration::ZERO).await;
    let Event::Started(_) = run.next_but_intervals().await else { panic!("no Started") };
    let Event::Finished(_) = run.next_but_intervals().await else { panic!("no Finished") };
    assert_eq!(server.requests(), 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_protocol_version_is_refused() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    // A newer controller, and an older one: the one before mixes went on the wire, which would
    // send the one request where a mix was asked for.
    for theirs in [999, volley_proto::PROTOCOL_VERSION - 1] {
        let status =
            client.hello(v1::HelloRequest { protocol: theirs, version: "9.9.9".into() }).await.expect_err("refused");
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert_eq!(
            status.message(),
            format!(
                "incompatible protocol: controller speaks {theirs}, this worker speaks {} (volley {})",
                volley_proto::PROTOCOL_VERSION,
                env!("CARGO_PKG_VERSION")
            )
        );
    }
    let mut old = shard(&server.url(), 1, Stop::Requests(5));
    old.protocol = 999;
    let status = Run::open(&mut client, old).await.err().expect("refused");
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert_eq!(server.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_must_begin_with_a_shard_the_engine_can_run() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;

    let (commands, rx) = mpsc::channel(4);
    commands.send(command(Command::Heartbeat(v1::Heartbeat {}))).await.expect("open");
    let status = client.run(ReceiverStream::new(rx)).await.expect_err("refused");
    assert_eq!(status.code(), Code::InvalidArgument);

    let mut bad = shard(&server.url(), 1, Stop::Requests(5));
    bad.connections = 0;
    let status = Run::open(&mut client, bad).await.err().expect("refused");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("connections"), "{}", status.message());
    assert_eq!(server.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_with_more_connections_or_threads_than_the_command_line_allows_is_refused() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    for (connections, threads, limit) in [(1_000_001, 1, "1000000"), (u32::MAX, 0, "1000000"), (8, u32::MAX, "1024")] {
        let mut greedy = shard(&server.url(), 1, Stop::Requests(5));
        (greedy.connections, greedy.threads) = (connections, threads);
        let status = Run::open(&mut client, greedy).await.err().expect("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{connections}/{threads}");
        assert!(status.message().contains(limit), "{connections}/{threads}: {}", status.message());
    }
    assert_eq!(server.requests(), 0);
    // Refusing took nothing: a shard within the limits runs.
    let mut run = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(20))).await.expect("accepted");
    run.beat();
    run.start(Duration::from_millis(10)).await;
    let finished = run.next_but_intervals().await;
    assert!(matches!(&finished, Event::Started(_)), "{finished:?}");
    let finished = run.next_but_intervals().await;
    assert!(
        matches!(&finished, Event::Finished(f) if f.stats.as_ref().and_then(|s| s.counters.as_ref()).is_some_and(|c| c.ok == 20)),
        "{finished:?}"
    );
}

/// Drives a 10 s shard for a while, then `lose` takes the controller away; the load must stop
/// within a second and the worker must be free again.
async fn load_stops_when_the_controller_goes(lose: impl FnOnce(Run) -> Option<Run>) {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    let mut run = Run::open(&mut client, shard(&server.url(), 4, Stop::Duration(Duration::from_secs(10))))
        .await
        .expect("accepted");
    run.beat();
    run.start(Duration::ZERO).await;
    let Event::Started(_) = run.next_but_intervals().await else { panic!("no Started") };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(server.requests() > 0, "load is flowing");

    let kept = lose(run);
    // A broken stream stops the load at once; silence after the watchdog and its second look
    // (1 s): well within 1.5 s either way.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let settled = server.requests();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(server.requests(), settled, "load still flowing 1.5 s after the controller went");
    drop(kept);

    let hello = v1::HelloRequest { protocol: PROTOCOL_VERSION, version: "test".into() };
    assert!(!client.hello(hello).await.expect("hello").into_inner().busy, "the worker is free again");
    assert!(settled_count(&server, Duration::from_millis(300), Duration::from_secs(2)).await < 10_000_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_stream_mid_run_stops_the_load() {
    load_stops_when_the_controller_goes(|run| {
        drop(run);
        None
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_heartbeats_stop_the_load() {
    load_stops_when_the_controller_goes(|mut run| {
        // The stream stays open, but nothing comes any more: a controller that hangs.
        if let Some(h) = run.heartbeat.take() {
            h.abort();
        }
        Some(run)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_the_run_with_what_was_done() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    let mut run = Run::open(&mut client, shard(&server.url(), 2, Stop::Duration(Duration::from_secs(10))))
        .await
        .expect("accepted");
    run.beat();
    run.start(Duration::ZERO).await;
    let Event::Started(_) = run.next_but_intervals().await else { panic!("no Started") };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = std::time::Instant::now();
    run.send(Command::Stop(v1::Stop {})).await;
    let Event::Finished(finished) = run.next_but_intervals().await else { panic!("no Finished") };
    assert!(asked.elapsed() < Duration::from_secs(1), "took {:?}", asked.elapsed());
    assert!(finished.interrupted);
    assert_eq!(finished.stopped_by, "", "the controller's own Stop needs no reason");
    let ok = finished.stats.and_then(|s| s.counters).expect("counters").ok;
    assert!(ok > 0);
    let served = settled_count(&server, Duration::from_millis(200), Duration::from_secs(2)).await;
    assert!(served >= ok, "server saw {served}, worker counted {ok} ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gate_that_never_opens_is_closed_by_the_watchdog() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    let mut run = Run::open(&mut client, shard(&server.url(), 2, Stop::Requests(100))).await.expect("accepted");
    // No heartbeats and no Start: the controller went away before starting the run.
    let Event::Accepted(_) = run.next().await else { panic!("no Accepted") };
    let Event::Ready(_) = run.next().await else { panic!("no Ready") };
    let Event::Finished(finished) = run.next_but_intervals().await else { panic!("no Finished") };
    assert!(finished.interrupted);
    assert!(finished.stopped_by.contains("no heartbeat"), "the watchdog is not named: {:?}", finished.stopped_by);
    assert_eq!(server.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_after_the_idle_timeout_and_a_live_run_is_not() {
    use tokio::io::AsyncReadExt;
    let server = target_server();
    let idle = Duration::from_millis(400);
    let worker = worker(|c| c.idle_timeout = idle).await;
    let opened = tokio::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(worker.addr()).await.expect("connects");
    // A controller that keeps talking (pings and heartbeats) runs for longer than that.
    let mut client = client(&worker, None).await;
    let mut run = Run::open(&mut client, shard(&server.url(), 2, Stop::Duration(Duration::from_millis(1500))))
        .await
        .expect("accepted");
    run.beat();
    run.start(Duration::from_millis(10)).await;
    // The silent one is closed (the server's SETTINGS may come first).
    let mut buf = [0; 1024];
    let closed = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match silent.read(&mut buf).await {
                Ok(0) | Err(_) => return opened.elapsed(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the silent connection is closed within 3 s");
    assert!(closed >= idle, "closed after {closed:?}, before the idle timeout");
    loop {
        match run.next_but_intervals().await {
            Event::Started(_) => {}
            Event::Finished(f) => {
                let ok = f.stats.and_then(|s| s.counters).map_or(0, |c| c.ok);
                assert!(ok > 0 && !f.interrupted, "the run was cut short: {ok} ok");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_breaking_a_rule_of_the_command_line_is_refused_before_it_runs() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    // Stages beside a request count: the command line refuses it, since the run would never end.
    let mut endless = shard(&server.url(), 2, Stop::Requests(5));
    endless.load = Some(v1::shard::Load::Open(v1::OpenLoad {
        rate: 10,
        stages: vec![v1::Stage { duration_nanos: 1_000_000_000, target: 10 }],
        stage_phase: 0.5,
        ..Default::default()
    }));
    // A body past the 64 MiB the README promises, within the 80 MiB a message may carry.
    let mut heavy = shard(&server.url(), 1, Stop::Requests(1));
    heavy.body = vec![b'x'; (64 << 20) + 1];
    for (bad, expect) in [(endless, "stages with a request count"), (heavy, "67108864 bytes (64 MiB)")] {
        let status = Run::open(&mut client, bad).await.err().expect("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{}", status.message());
        assert!(status.message().contains(expect), "{}", status.message());
    }
    assert_eq!(server.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_is_refused_as_busy_before_its_shard_is_read() {
    let server = target_server();
    let worker = worker(|_| {}).await;
    let mut client = client(&worker, None).await;
    let mut first = Run::open(&mut client, shard(&server.url(), 1, Stop::Requests(5))).await.expect("accepted");
    first.beat();
    let accepted = first.next().await;
    assert!(matches!(accepted, Event::Accepted(_)), "{accepted:?}");
    // A second run whose shard never comes: refused at once, not after waiting for the shard
    // (which a worker would then have to read and decode, up to 80 MiB per run asked).
    let (_hold, rx) = mpsc::channel::<v1::RunCommand>(1);
    let asked = std::time::Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(5), client.run(ReceiverStream::new(rx)))
        .await
        .expect("an answer within 5 s")
        .expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{}", status.message());
    assert!(status.message().contains("busy"), "{}", status.message());
    assert!(asked.elapsed() < Duration::from_secs(2), "refused after {:?}", asked.elapsed());
}
