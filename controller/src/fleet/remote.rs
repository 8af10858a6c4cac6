//! A remote worker over gRPC: Hello, clock probes, then one Run stream carrying the shard,
//! the start instant (in the worker's clock), heartbeats, and the worker's events back.

use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};
use volley_engine::{Feeder, ThreadLimit};
use volley_proto::v1::{self, worker_client::WorkerClient};
use volley_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use volley_worker::clock::now_nanos;
use volley_worker::shard::Event;
use volley_worker::wire;

use super::clock_sync::{self, Probe};
use super::link::{Command, Encoded, LinkEvent, WorkerInfo};

/// How many clock probes each worker gets; the one with the lowest round trip is used.
const PROBES: usize = 16;
/// A worker that hears nothing for 750 ms stops its load; this keeps it well fed.
const HEARTBEAT_EVERY: Duration = Duration::from_millis(200);
/// Results decoded and waiting for the run's thread at most: each is a worker's histograms
/// (about 0.4 MB), and a thousand arrive within a second of a run's end.
pub(crate) const RESULTS_IN_FLIGHT: usize = 32;
/// How long Hello and each probe may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach workers: the bearer token and the TLS settings, shared by all of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access {
    pub token: Option<String>,
    /// TLS to the workers: the CA that signed their certificates, PEM.
    pub ca_pem: Option<Vec<u8>>,
    /// A client certificate and key (PEM), for workers that ask for one.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// A remote worker's part: its shard, encoded once, and how its threads are decided once the
/// worker says how many cores it has (`threads`, from -t, else those cores, within `limit`).
pub(crate) struct Shard {
    pub shard: v1::Shard,
    pub threads: Option<usize>,
    pub limit: ThreadLimit,
    /// The shard's feeders (the worker's rows of each), sent after it in chunks.
    pub feeders: Vec<Feeder>,
}

/// The largest reply a worker may send: tonic's 4 MiB, which a run's counters and compressed
/// histograms fit in a few kilobytes of, and for a mix room for each name's. A Finished carries
/// the statistics twice (the measurement and the warm-up), each name with a latency and a
/// first-byte histogram; 1,000 names of 10,000 samples spread over a second came to 4.45 MB in
/// one copy, so 256 KiB a name leaves room for far wider distributions, and the bound stays
/// one the user chose by the size of the mix. A scenario's one histogram (its iterations'
/// durations) gets as much room.
fn reply_limit(bounds: wire::Bounds) -> usize {
    (4 << 20) + bounds.names.saturating_add(bounds.scenarios).saturating_mul(256 << 10)
}

/// Drives one worker until its run ends; whatever goes wrong arrives as a Failed event.
pub(crate) async fn drive(
    index: usize,
    address: String,
    access: Access,
    shard: Shard,
    events: Sender<(usize, LinkEvent)>,
    commands: UnboundedReceiver<Command>,
    results: Arc<Semaphore>,
) {
    if let Err(reason) = drive_run(index, &address, &access, shard, &events, commands, results).await {
        let _ = events.send((index, LinkEvent::Worker(Event::Failed(reason))));
    }
}

async fn drive_run(
    index: usize,
    address: &str,
    access: &Access,
    part: Shard,
    events: &Sender<(usize, LinkEvent)>,
    mut commands: UnboundedReceiver<Command>,
    results: Arc<Semaphore>,
) -> Result<(), String> {
    let channel = connect(address, access).await?;
    // Statistics for names or scenarios the shard does not have are refused as they are
    // decoded, and the replies are bounded by how many it has.
    let bounds = wire::shard_bounds(&part.shard);
    let reply_limit = reply_limit(bounds);
    let token = access.token.clone();
    let mut client = WorkerClient::with_interceptor(channel, move |mut request: tonic::Request<()>| {
        if let Some(token) = &token {
            let value: MetadataValue<_> = format!("Bearer {token}")
                .parse()
                .map_err(|_| Status::invalid_argument("the token is not a valid header value"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    })
    // What the worker takes, no more (tonic would send any size; the shard's size was checked
    // before connecting). Replies are counters and compressed histograms (`reply_limit`).
    .max_encoding_message_size(MAX_MESSAGE_BYTES)
    .max_decoding_message_size(reply_limit);

    let hello = v1::HelloRequest { protocol: PROTOCOL_VERSION, version: env!("CARGO_PKG_VERSION").into() };
    let hello = timed(client.hello(hello)).await?.into_inner();
    if hello.protocol != PROTOCOL_VERSION {
        return Err(format!(
            "incompatible worker: it speaks protocol {} (volley {}), this controller speaks {PROTOCOL_VERSION} (volley {})",
            hello.protocol,
            hello.version,
            env!("CARGO_PKG_VERSION")
        ));
    }
    // Workers say what their engine runs (Protocol::NAMES); one that cannot run this shard's
    // protocol is refused before any load, by name.
    let Shard { mut shard, threads, limit, feeders } = part;
    let cores = usize::try_from(hello.cores).unwrap_or(usize::MAX);
    shard.threads = u32::try_from(limit.threads_for(threads.unwrap_or(cores))).unwrap_or(u32::MAX);
    let asked = match shard.http_version {
        2 => "h2",
        3 => "h3",
        _ => "http/1.1",
    };
    if !hello.protocols.iter().any(|p| p == asked) {
        return Err(format!("the worker cannot run {asked}: it runs {}", hello.protocols.join(", ")));
    }
    let kernel = hello.kernel.clone();
    let info = WorkerInfo { name: hello.name, version: hello.version, cores: hello.cores, kernel: hello.kernel };
    let _ = events.send((index, LinkEvent::Hello(info)));

    let mut probes = Vec::with_capacity(PROBES);
    for _ in 0..PROBES {
        let sent = now_nanos();
        let reply = timed(client.clock(v1::ClockRequest {})).await?.into_inner();
        probes.push(Probe { sent, worker: reply.worker_nanos, received: now_nanos() });
    }
    let offset = clock_sync::estimate(&probes).ok_or("no clock probe answered")?;
    let _ = events.send((index, LinkEvent::Synced(offset)));

    let (out, out_rx) = tokio::sync::mpsc::channel::<v1::RunCommand>(16);
    let send = |command| v1::RunCommand { command: Some(command) };
    out.send(send(v1::run_command::Command::Shard(shard))).await.map_err(|_| "the run stream closed")?;
    // The feeders' rows follow the shard, a chunk at a time as the stream takes them: the
    // worker reads them all before it answers the run, so they go from a task of their own.
    let _feeding = Task(tokio::spawn({
        let out = out.clone();
        async move {
            for rows in wire::feeder_rows(&feeders) {
                if out.send(send(v1::run_command::Command::FeederRows(rows))).await.is_err() {
                    return;
                }
            }
        }
    }));
    let mut stream = client.run(ReceiverStream::new(out_rx)).await.map_err(|s| refusal(&s))?.into_inner();
    // The heartbeat has a task of its own, so that it never waits behind this loop's work on
    // the worker's events; it ends with the run (`_beats` aborts it when dropped).
    let _beats = Task(tokio::spawn({
        let out = out.clone();
        async move {
            let mut heartbeat = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                heartbeat.tick().await;
                if out.send(send(v1::run_command::Command::Heartbeat(v1::Heartbeat {}))).await.is_err() {
                    return;
                }
            }
        }
    }));
    let mut commands_open = true;
    loop {
        tokio::select! {
            message = stream.message() => match message {
                Ok(Some(message)) if Encoded::is_interval(&message) => {
                    let _ = events.send((index, LinkEvent::Encoded(Box::new(Encoded { message, bounds }))));
                }
                Ok(Some(message)) if Encoded::is_result(&message) => {
                    let held = results.acquire_owned().await.map_err(|_| "the run ended")?;
                    let event = Encoded { message, bounds }.decode()?;
                    let _ = events.send((index, LinkEvent::Held(event, held)));
                    return Ok(());
                }
                Ok(Some(message)) => {
                    let mut event = wire::event_from_proto(message, bounds).map_err(|e| format!("unreadable event: {e}"))?;
                    if let Event::Accepted { ring, .. } = &mut event {
                        // The kernel came with Hello, not with every event.
                        ring.kernel.clone_from(&kernel);
                    }
                    let last = matches!(event, Event::Finished(_) | Event::Failed(_));
                    let _ = events.send((index, LinkEvent::Worker(event)));
                    if last {
                        return Ok(());
                    }
                }
                Ok(None) => return Err("the worker ended the run without a result".into()),
                Err(status) => {
                    return Err(format!("lost the worker mid-run: its connection broke ({})", status.message()));
                }
            },
            command = commands.recv(), if commands_open => {
                let message = match command {
                    Some(Command::Start { at }) => v1::run_command::Command::Start(v1::Start { at_worker_nanos: offset.to_worker(at) }),
                    Some(Command::Stop) => v1::run_command::Command::Stop(v1::Stop {}),
                    None => {
                        commands_open = false;
                        continue;
                    }
                };
                let _ = out.send(send(message)).await;
            }
        }
    }
}

/// A task of the run's (its heartbeat, the feeder rows), aborted when the run's driver is done
/// with it.
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn connect(address: &str, access: &Access) -> Result<Channel, String> {
    let scheme = if access.ca_pem.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
        .map_err(|e| format!("not a worker address: {e}"))?
        .connect_timeout(CALL_TIMEOUT)
        .tcp_nodelay(true)
        // A worker machine that vanishes without a FIN is noticed within a few seconds.
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(3))
        .keep_alive_while_idle(true);
    if let Some(ca) = &access.ca_pem {
        let host = address.rsplit_once(':').map_or(address, |(h, _)| h).trim_matches(['[', ']']);
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca)).domain_name(host);
        if let Some((cert, key)) = &access.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(tls).map_err(|e| format!("TLS settings: {e}"))?;
    }
    endpoint.connect().await.map_err(|e| format!("cannot reach the worker: {}", volley_worker::error_chain(&e)))
}

async fn timed<T>(call: impl Future<Output = Result<T, Status>>) -> Result<T, String> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(result) => result.map_err(|s| refusal(&s)),
        Err(_) => Err(format!("no answer within {CALL_TIMEOUT:?}")),
    }
}

/// A worker's gRPC status as one line a user can act on.
fn refusal(status: &Status) -> String {
    let message = status.message();
    match status.code() {
        Code::Unauthenticated => format!("refused: {message} (set the token with --token-file or VOLLEY_TOKEN)"),
        Code::PermissionDenied | Code::ResourceExhausted | Code::FailedPrecondition | Code::InvalidArgument => {
            format!("refused: {message}")
        }
        Code::Unavailable => format!("cannot reach the worker: {message}"),
        code => format!("{code:?}: {message}"),
    }
}
