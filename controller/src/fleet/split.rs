//! Splitting one plan into per-worker shards whose totals are exactly the plan's.

use volley_engine::{Plan, Stop};

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
    if let Some(rate) = plan.rate
        && rate.per_second < workers as u64
        && plan.stages.is_empty()
    {
        return Err(CliError::Usage(format!(
            "--rate ({}) must be at least the number of workers ({workers}): each sends whole requests per second",
            rate.per_second
        )));
    }
    // With stages, each worker gets its share of every stage; it needs one at the highest.
    if let Some(peak) = plan.peak_rate().filter(|_| !plan.stages.is_empty())
        && peak < workers as u64
    {
        return Err(CliError::Usage(format!(
            "--stages: the highest rate ({peak}) must be at least the number of workers ({workers}): each sends whole requests per second"
        )));
    }
    Ok(plan.split(workers))
}

#[cfg(test)]
mod tests {
    use volley_engine::{RequestSpec, Target};

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
        slow.rate = Some(volley_engine::Rate::per_second(1));
        assert!(
            split(&slow, 2).unwrap_err().to_string().contains("--rate (1) must be at least the number of workers (2)")
        );
    }

    #[test]
    fn every_worker_gets_a_share_of_what_was_asked() {
        let shards = split(&plan(5, Stop::Requests(7)), 2).unwrap();
        assert_eq!(shards.iter().map(|s| s.connections).collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!(shards.iter().map(|s| s.stop).collect::<Vec<_>>(), vec![Stop::Requests(4), Stop::Requests(3)]);
    }
}
