//! Splitting one plan into per-worker shards whose totals are exactly the plan's, and making
//! each worker's part ready to go: a remote worker's shard encoded once, as the wire carries it.

use volley_engine::{Load, MAX_THREADS, Plan, Stop, ThreadLimit};
use volley_proto::{MAX_MESSAGE_BYTES, v1};
use volley_worker::wire;

use super::Place;
use crate::error::CliError;

/// One shard per worker, by the engine's own split (`Plan::split`, which also spreads a shard
/// over its threads); here only what a split over workers must refuse: a worker with no
/// connection, no request, or no request per second.
pub(crate) fn split(plan: &Plan, workers: usize) -> Result<Vec<Plan>, CliError> {
    let conns = plan.connections as u64;
    if conns < workers as u64 {
        return Err(CliError::Usage(format!(
            "-c/--connections ({conns}) must be at least the number of workers ({workers})"
        )));
    }
    if let Stop::Requests(n) = plan.stop
        && n < workers as u64
    {
        return Err(CliError::Usage(format!("-n/--requests ({n}) must be at least the number of workers ({workers})")));
    }
    if let Load::Open { rate, stages, .. } = &plan.load
        && rate.per_second < workers as u64
        && stages.is_empty()
    {
        return Err(CliError::Usage(format!(
            "--rate ({}) must be at least the number of workers ({workers}): each sends whole requests per second",
            rate.per_second
        )));
    }
    // With stages, each worker gets its share of every stage; it needs one at the highest.
    if let Some(peak) = plan.peak_rate().filter(|_| !plan.load.stages().is_empty())
        && peak < workers as u64
    {
        return Err(CliError::Usage(format!(
            "--stages: the highest rate ({peak}) must be at least the number of workers ({workers}): each sends whole requests per second"
        )));
    }
    Ok(plan.split(workers))
}

/// One worker's part of a run, ready to go.
pub(crate) struct Part {
    pub plan: Plan,
    pub to: Destination,
}

/// Where a part runs, and what it takes to send it there.
pub(crate) enum Destination {
    /// The in-process worker, which runs the plan as it is.
    Local,
    /// A `volley worker` at `address`, sent `shard`: the plan as the wire carries it, encoded
    /// once. Its threads are decided once the worker says how many cores it has, unless the
    /// run names them (`-t`): `limit.threads_for(threads or cores)`.
    Remote { address: String, shard: Box<v1::Shard>, threads: Option<usize>, limit: ThreadLimit },
}

// The largest request body `-d` takes is the engine's, locally and on workers alike; the shard
// message that carries it to a worker must leave 16 MiB for the headers, the URL and `--cacert`.
const _: () = assert!(volley_engine::MAX_BODY_BYTES + (16 << 20) <= MAX_MESSAGE_BYTES);

/// `shards[i]` for `places[i]`. Each remote worker takes its shard in one message of at most
/// `MAX_MESSAGE_BYTES`: a larger one is refused here, before connecting, rather than by the
/// worker after all of it was sent.
pub(crate) fn parts(shards: Vec<Plan>, places: Vec<Place>, threads: Option<usize>) -> Result<Vec<Part>, CliError> {
    shards
        .into_iter()
        .zip(places)
        .map(|(mut plan, place)| {
            let to = match place {
                Place::Local => Destination::Local,
                Place::Remote { address, source_addrs } => {
                    if let Some(source_addrs) = source_addrs {
                        plan.source_addrs = source_addrs;
                        plan.validate().map_err(|e| {
                            CliError::Usage(format!("--workers: {address}'s source-addr: {e}"))
                        })?;
                    }
                    let mut shard = wire::shard_to_proto(&plan);
                    // Measured at the widest thread count the worker may be given.
                    shard.threads = MAX_THREADS as u32;
                    let size = prost::Message::encoded_len(&shard);
                    if size > MAX_MESSAGE_BYTES {
                        return Err(CliError::Usage(format!(
                            "the request is too large for workers: its body, headers and --cacert come to {size} bytes, over the {} MiB a worker takes",
                            MAX_MESSAGE_BYTES >> 20
                        )));
                    }
                    Destination::Remote { address, shard: Box::new(shard), threads, limit: plan.thread_limit() }
                }
            };
            Ok(Part { plan, to })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use volley_engine::{Mix, NamedRequest, Order, RequestSpec, Requests, Target};

    use super::*;

    fn plan(connections: usize, stop: Stop) -> Plan {
        let target = Target::parse("http://127.0.0.1:1/").unwrap();
        let mut plan = Plan::new(target, RequestSpec::new("GET", vec![], vec![]), connections, stop);
        plan.threads = 4;
        plan
    }

    #[test]
    fn fewer_connections_or_requests_than_workers_is_refused() {
        assert!(split(&plan(1, Stop::Requests(10)), 2).is_err());
        assert!(split(&plan(4, Stop::Requests(1)), 2).is_err());
        let mut slow = plan(4, Stop::Requests(10));
        slow.load = Load::rate(1);
        assert!(
            split(&slow, 2).unwrap_err().to_string().contains("--rate (1) must be at least the number of workers (2)")
        );
    }

    #[test]
    fn every_worker_gets_a_share_of_what_was_asked_and_the_whole_mix() {
        let mut whole = plan(5, Stop::Requests(7));
        let request = |name: &str, path: &str| NamedRequest {
            name: name.into(),
            path_and_query: path.into(),
            spec: RequestSpec::new("GET", vec![], vec![]),
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        };
        // A share of the requests, but every worker sends every kind: its names are the run's.
        whole.requests = Requests::Mix(Mix {
            requests: vec![request("a", "/a"), request("b", "/b"), request("a", "/c")],
            order: Order::Random { seed: 7 },
        });
        let shards = split(&whole, 2).unwrap();
        assert_eq!(shards.iter().map(|s| s.connections).collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!(shards.iter().map(|s| s.stop).collect::<Vec<_>>(), vec![Stop::Requests(4), Stop::Requests(3)]);
        let requests = |r: &Requests| r.mix().map(|m| m.requests.clone());
        assert!(shards.iter().all(|s| requests(&s.requests) == requests(&whole.requests)));
        // Each worker draws its own random sequence.
        let seeds: Vec<Order> = shards.iter().filter_map(|s| s.requests.mix().map(|m| m.order.clone())).collect();
        assert_eq!(seeds.len(), 2);
        assert_ne!(seeds[0], seeds[1]);
    }
}
