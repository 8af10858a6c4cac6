//! Splitting one plan into per-worker shards whose totals are exactly the plan's.

use volley_engine::{Plan, Stop, share};

use crate::error::CliError;

/// One shard per worker: connections spread evenly, a request budget in proportion to each
/// shard's connections (largest remainders first), durations unchanged.
pub(crate) fn split(plan: &Plan, workers: usize) -> Result<Vec<Plan>, CliError> {
    let conns = plan.connections as u64;
    if conns < workers as u64 {
        return Err(CliError::Usage(format!(
            "-c/--connections ({conns}) must be at least the number of workers ({workers})"
        )));
    }
    let connections: Vec<u64> = (0..workers).map(|i| share(conns, workers, i)).collect();
    let budgets = match plan.stop {
        Stop::Requests(n) if n < workers as u64 => {
            return Err(CliError::Usage(format!(
                "-n/--requests ({n}) must be at least the number of workers ({workers})"
            )));
        }
        Stop::Requests(n) => Some(proportional(n, &connections)),
        Stop::Duration(_) => None,
    };
    Ok((0..workers)
        .map(|i| {
            let mut shard = plan.clone();
            shard.connections = connections[i] as usize;
            shard.threads = plan.threads.min(shard.connections);
            if let Some(b) = &budgets {
                shard.stop = Stop::Requests(b[i]);
            }
            shard
        })
        .collect())
}

/// `total` in proportion to `weights`, every part at least one, adding up to exactly `total`.
fn proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u64 = weights.iter().sum();
    let exact: Vec<u128> = weights.iter().map(|w| u128::from(total) * u128::from(*w)).collect();
    let mut parts: Vec<u64> = exact.iter().map(|e| (e / u128::from(sum)) as u64).collect();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    // Largest remainder first; ties to the earlier part.
    order.sort_by_key(|&i| std::cmp::Reverse(exact[i] % u128::from(sum)));
    let mut left = total - parts.iter().sum::<u64>();
    for &i in order.iter().cycle() {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    // A part with nothing would be an empty shard; take one from the largest.
    for i in 0..parts.len() {
        if parts[i] == 0 {
            let max = (0..parts.len()).max_by_key(|&j| parts[j]).unwrap_or(0);
            parts[max] -= 1;
            parts[i] += 1;
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use volley_engine::{Protocol, RequestSpec, Target, TlsOptions};

    use super::*;

    fn plan(connections: usize, stop: Stop) -> Plan {
        Plan {
            target: Target::parse("http://127.0.0.1:1/").unwrap(),
            request: RequestSpec::new("GET", vec![], vec![]),
            protocol: Protocol::Http1,
            connections,
            threads: 4,
            stop,
            connect_timeout: Duration::from_secs(1),
            request_timeout: None,
            keepalive: true,
            tls: TlsOptions::default(),
        }
    }

    fn budgets(shards: &[Plan]) -> Vec<u64> {
        shards
            .iter()
            .map(|s| match s.stop {
                Stop::Requests(n) => n,
                Stop::Duration(_) => 0,
            })
            .collect()
    }

    #[test]
    fn connections_and_requests_add_up_to_what_was_asked() {
        for (c, n, k) in [(50, 200, 2), (5, 7, 2), (7, 1000, 3), (3, 3, 3), (100, 101, 7), (10, 1_000_003, 4)] {
            let shards = split(&plan(c, Stop::Requests(n)), k).unwrap();
            assert_eq!(shards.len(), k);
            assert_eq!(shards.iter().map(|s| s.connections).sum::<usize>(), c);
            assert_eq!(budgets(&shards).iter().sum::<u64>(), n, "c={c} n={n} k={k}");
            assert!(budgets(&shards).iter().all(|b| *b >= 1));
            assert!(shards.iter().all(|s| s.threads <= s.connections));
        }
    }

    #[test]
    fn budgets_follow_the_connections() {
        let shards = split(&plan(3, Stop::Requests(300)), 2).unwrap();
        assert_eq!(shards.iter().map(|s| s.connections).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(budgets(&shards), vec![200, 100]);
    }

    #[test]
    fn timed_runs_keep_their_duration() {
        let shards = split(&plan(4, Stop::Duration(Duration::from_secs(3))), 2).unwrap();
        assert!(shards.iter().all(|s| s.stop == Stop::Duration(Duration::from_secs(3))));
    }

    #[test]
    fn fewer_connections_or_requests_than_workers_is_refused() {
        assert!(split(&plan(1, Stop::Requests(10)), 2).is_err());
        assert!(split(&plan(4, Stop::Requests(1)), 2).is_err());
    }
}
