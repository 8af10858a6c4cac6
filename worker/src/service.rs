//! The gRPC service: Hello, Clock, and Run's admission checks before a run is handed to
//! `session`. Every refusal is a gRPC status with a message that says why, and comes before any
//! load is sent.

use std::sync::Arc;
use std::time::Duration;

use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::{info, warn};
use volley_engine::{Plan, RunControl, probe_io_uring};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, run_command::Command, worker_server::Worker};

use crate::state::State;
use crate::{clock, session, wire};

/// What a controller that opened a Run stream but sent nothing gets to wait.
const FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);

const VERSION: &str = env!("CARGO_PKG_VERSION");

pub(crate) struct WorkerService {
    state: Arc<State>,
}

impl WorkerService {
    pub(crate) fn new(state: Arc<State>) -> WorkerService {
        WorkerService { state }
    }

    /// Refuses a target outside the allowed list, resolving it only when its name alone does
    /// not decide.
    async fn check_target(&self, plan: &Plan) -> Result<(), Status> {
        let allow = &self.state.allow;
        if allow.allows_name(&plan.target.host) {
            return Ok(());
        }
        let target = plan.target.clone();
        // Name resolution blocks; it must not hold up a runtime thread.
        let resolved = tokio::task::spawn_blocking(move || target.resolve())
            .await
            .map_err(|e| Status::internal(format!("volley worker: resolving the target failed: {e}")))?;
        let refuse = |why: String| {
            Err(Status::permission_denied(format!(
                "target {} is not allowed on worker {}{why} (allowed: {allow})",
                plan.target, self.state.name
            )))
        };
        match resolved {
            Ok(addrs) if allow.allows(&plan.target.host, &addrs) => Ok(()),
            Ok(addrs) => {
                let ips: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
                refuse(format!(": it resolves to {}", ips.join(", ")))
            }
            Err(e) => refuse(format!(": {e}")),
        }
    }
}

/// The refusal for a peer that speaks another protocol version.
fn incompatible(theirs: u32) -> Status {
    Status::failed_precondition(format!(
        "incompatible protocol: controller speaks {theirs}, this worker speaks {PROTOCOL_VERSION} (volley {VERSION})"
    ))
}

#[tonic::async_trait]
impl Worker for WorkerService {
    async fn hello(&self, request: Request<v1::HelloRequest>) -> Result<Response<v1::HelloReply>, Status> {
        let hello = request.into_inner();
        if hello.protocol != PROTOCOL_VERSION {
            warn!(controller = %hello.version, protocol = hello.protocol, "refused a controller of another protocol");
            return Err(incompatible(hello.protocol));
        }
        let io_uring = match probe_io_uring() {
            Ok(ring) => wire::ring_to_proto(&ring),
            Err(e) => wire::ring_unavailable_to_proto(&e.to_string()),
        };
        Ok(Response::new(v1::HelloReply {
            protocol: PROTOCOL_VERSION,
            version: VERSION.to_string(),
            name: self.state.name.clone(),
            cores: u32::try_from(self.state.cores).unwrap_or(u32::MAX),
            kernel: self.state.kernel.clone(),
            protocols: vec!["http/1.1".to_string()],
            io_uring: Some(io_uring),
            busy: self.state.is_busy(),
        }))
    }

    async fn clock(&self, _request: Request<v1::ClockRequest>) -> Result<Response<v1::ClockReply>, Status> {
        Ok(Response::new(v1::ClockReply { worker_nanos: clock::now_nanos() }))
    }

    type RunStream = UnboundedReceiverStream<Result<v1::RunEvent, Status>>;

    async fn run(&self, request: Request<Streaming<v1::RunCommand>>) -> Result<Response<Self::RunStream>, Status> {
        let peer = request.remote_addr().map_or_else(|| "unknown".to_string(), |a| a.to_string());
        let refused = |status: Status| {
            warn!(%peer, reason = status.message(), "run refused");
            status
        };
        let mut commands = request.into_inner();
        let first = match tokio::time::timeout(FIRST_MESSAGE_TIMEOUT, commands.message()).await {
            Ok(Ok(Some(first))) => first,
            Ok(Ok(None)) => {
                return Err(refused(Status::invalid_argument("volley worker: the run stream had no shard")));
            }
            Ok(Err(status)) => return Err(refused(status)),
            Err(_) => return Err(refused(Status::deadline_exceeded("volley worker: no shard within 10 s"))),
        };
        let Some(Command::Shard(shard)) = first.command else {
            return Err(refused(Status::invalid_argument("volley worker: a run must begin with its shard")));
        };
        if shard.protocol != PROTOCOL_VERSION {
            return Err(refused(incompatible(shard.protocol)));
        }
        let plan = wire::shard_from_proto(&shard, self.state.cores)
            .map_err(|e| refused(Status::invalid_argument(format!("volley worker: {e}"))))?;
        self.check_target(&plan).await.map_err(refused)?;
        let control = RunControl::gated();
        let Some(busy) = self.state.try_begin(&control) else {
            return Err(refused(Status::resource_exhausted(format!(
                "volley worker {} is busy with another run",
                self.state.name
            ))));
        };
        info!(
            %peer,
            target = %plan.target,
            connections = plan.connections,
            threads = plan.threads,
            stop = ?plan.stop,
            "run accepted"
        );
        let events = session::start(plan, control, commands, busy)?;
        Ok(Response::new(events))
    }
}
