//! The gRPC service: Hello, Clock, and Run's admission checks before a run is handed to
//! `session`. Every refusal is a gRPC status with a message that says why, and comes before any
//! load is sent.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::{Request, Response, Status, Streaming};
use tracing::{info, warn};
use volley_engine::{EngineChoice, Plan, RunControl, TargetError, choose_engine};
use volley_proto::PROTOCOL_VERSION;
use volley_proto::v1::{self, run_command::Command, worker_server::Worker};

use crate::allow::AllowList;
use crate::state::{State, StopCause};
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

    /// The plan to run: refused if its target is outside the allowed list; when the name alone
    /// does not decide, resolved here and pinned to the addresses checked, so that the engine
    /// connects to exactly those and never asks the resolver again (a name that answers with an
    /// allowed address now and a forbidden one a moment later gets no load through).
    async fn admit_target(&self, plan: Plan) -> Result<Plan, Status> {
        if self.state.allow.allows_name(&plan.target.host) {
            return Ok(plan);
        }
        let target = plan.target.clone();
        // Name resolution blocks; it must not hold up a runtime thread.
        let resolved = tokio::task::spawn_blocking(move || target.resolve())
            .await
            .map_err(|e| Status::internal(format!("volley worker: resolving the target failed: {e}")))?;
        pin_if_allowed(&self.state.allow, &self.state.name, plan, resolved)
    }
}

/// `plan`, if its source addresses are of its target's family and each an address of this
/// machine: a list meant for another machine is refused before any load, rather than failing
/// every connection.
async fn admit_source_addrs(plan: Plan) -> Result<Plan, Status> {
    if plan.source_addrs.is_empty() {
        return Ok(plan);
    }
    // It may resolve the target, which blocks.
    tokio::task::spawn_blocking(move || volley_engine::check_source_addrs(&plan).map(|()| plan))
        .await
        .map_err(|e| Status::internal(format!("volley worker: checking the source addresses failed: {e}")))?
        .map_err(|e| Status::invalid_argument(format!("volley worker: {e}")))
}

/// `plan` pinned to `resolved` if every one of those addresses is allowed; the refusal names
/// them otherwise.
fn pin_if_allowed(
    allow: &AllowList,
    worker: &str,
    mut plan: Plan,
    resolved: Result<Vec<SocketAddr>, TargetError>,
) -> Result<Plan, Status> {
    let refuse = |why: String| {
        Err(Status::permission_denied(format!(
            "target {} is not allowed on worker {worker}{why} (allowed: {allow})",
            plan.target
        )))
    };
    match resolved {
        Ok(addrs) if allow.allows(&plan.target.host, &addrs) => {
            plan.target = plan.target.pinned_to(addrs);
            Ok(plan)
        }
        Ok(addrs) => {
            let ips: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
            refuse(format!(": it resolves to {}", ips.join(", ")))
        }
        Err(e) => refuse(format!(": {e}")),
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
        // The engine a shard of `--engine auto` (the default) runs on here.
        let io_uring = match choose_engine(EngineChoice::Auto) {
            Ok(ring) => wire::ring_to_proto(&ring),
            Err(e) => wire::ring_unavailable_to_proto(&e.to_string()),
        };
        Ok(Response::new(v1::HelloReply {
            protocol: PROTOCOL_VERSION,
            version: VERSION.to_string(),
            name: self.state.name.clone(),
            cores: u32::try_from(self.state.cores).unwrap_or(u32::MAX),
            kernel: self.state.kernel.clone(),
            protocols: volley_engine::Protocol::NAMES.iter().map(|p| p.to_string()).collect(),
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
        // Busy first: a second run is refused before its shard (up to 80 MiB) is read and
        // decoded, so a worker holds one shard in memory however many runs are asked of it.
        let control = RunControl::gated();
        let cause = StopCause::default();
        let Some(busy) = self.state.try_begin(&control, &cause) else {
            return Err(refused(Status::resource_exhausted(format!(
                "volley worker {} is busy with another run",
                self.state.name
            ))));
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
        let tables = receive_feeder_rows(&shard, &mut commands).await.map_err(refused)?;
        let plan = wire::shard_with_feeders(&shard, tables)
            .map_err(|e| refused(Status::invalid_argument(format!("volley worker: {e}"))))?;
        let plan = self.admit_target(plan).await.map_err(refused)?;
        let plan = admit_source_addrs(plan).await.map_err(refused)?;
        info!(
            %peer,
            target = %plan.target,
            connections = plan.connections,
            threads = plan.threads,
            stop = ?plan.stop,
            "run accepted"
        );
        let events = session::start(plan, control, cause, commands, busy, &self.state)?;
        Ok(Response::new(events))
    }
}

/// The rows of the shard's feeders, which follow it on the run stream: each command within
/// the first message's time of the one before, each checked against what the shard said.
async fn receive_feeder_rows(
    shard: &v1::Shard,
    commands: &mut Streaming<v1::RunCommand>,
) -> Result<Vec<volley_engine::Table>, Status> {
    let invalid = |e: wire::WireError| Status::invalid_argument(format!("volley worker: {e}"));
    let mut assembly = wire::Assembly::new(shard).map_err(invalid)?;
    while !assembly.is_complete() {
        match tokio::time::timeout(FIRST_MESSAGE_TIMEOUT, commands.message()).await {
            Ok(Ok(Some(v1::RunCommand { command: Some(Command::FeederRows(rows)) }))) => {
                assembly.add(rows).map_err(invalid)?;
            }
            Ok(Ok(Some(_))) => {
                return Err(Status::invalid_argument("volley worker: the shard's feeder rows were cut short"));
            }
            Ok(Ok(None)) => {
                return Err(Status::invalid_argument("volley worker: the run stream ended within the feeder rows"));
            }
            Ok(Err(status)) => return Err(status),
            Err(_) => return Err(Status::deadline_exceeded("volley worker: no feeder rows within 10 s")),
        }
    }
    Ok(assembly.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{Event, run_shard};
    use volley_engine::{RequestSpec, Stop, Target};

    fn plan(url: &str) -> Plan {
        let target = Target::parse(url).expect("valid URL");
        let mut plan = Plan::new(target, RequestSpec::new("GET", Vec::new(), Vec::new()), 2, Stop::Requests(20));
        plan.threads = 1;
        plan.connect_timeout = Duration::from_secs(2);
        plan.request_timeout = Some(Duration::from_secs(5));
        plan
    }

    fn loopback_only() -> AllowList {
        AllowList::parse(&["127.0.0.0/8".to_string()]).expect("valid list")
    }

    #[test]
    fn an_admitted_plan_connects_to_exactly_the_addresses_that_were_checked() {
        let server = volley_serve::Server::start(volley_serve::ServeConfig {
            addr: "127.0.0.1:0".parse().expect("valid address"),
            ..Default::default()
        })
        .expect("server starts");
        let checked = vec![server.local_addr()];
        // A name no resolver answers (RFC 6761): load can reach the server only through the
        // addresses the admission checked.
        let url = format!("http://rebind.invalid:{}/", server.local_addr().port());
        let admitted = pin_if_allowed(&loopback_only(), "w", plan(&url), Ok(checked.clone())).expect("allowed");
        assert_eq!(admitted.target.resolve().expect("pinned"), checked);
        assert_eq!(admitted.target.host, "rebind.invalid", "the Host header and SNI keep the name");
        let control = RunControl::new();
        let mut last = None;
        run_shard(&admitted, &control, &mut |event| last = Some(event));
        match last {
            Some(Event::Finished(outcome)) => assert_eq!(outcome.stats.counters.ok, 20),
            other => panic!("the admitted plan did not run: {other:?}"),
        }
        assert_eq!(server.requests(), 20);
    }

    #[test]
    fn a_name_with_any_forbidden_address_is_refused_and_the_refusal_names_it() {
        let addrs: Vec<SocketAddr> =
            vec!["127.0.0.1:80".parse().expect("valid"), "10.1.2.3:80".parse().expect("valid")];
        let refusal = pin_if_allowed(&loopback_only(), "w", plan("http://svc.test/"), Ok(addrs)).expect_err("refused");
        assert_eq!(refusal.code(), tonic::Code::PermissionDenied);
        assert!(refusal.message().contains("10.1.2.3"), "{}", refusal.message());
        let unresolvable = Err(TargetError::Resolve { host: "svc.test".into(), why: "no such host".into() });
        let refusal =
            pin_if_allowed(&loopback_only(), "w", plan("http://svc.test/"), unresolvable).expect_err("refused");
        assert_eq!(refusal.code(), tonic::Code::PermissionDenied);
    }
}
