//! End to end, the tests whose verdict is a measured time: a schedule's cadence and lateness
//! (`--rate`, `--stages`), the hold the client adds to latency, and `find-max`'s capacities to
//! 10%. They run one at a time (see [`one_at_a_time`]) in a binary of their own, so that no
//! other test's load shares the machine with them.

#[path = "../support/mod.rs"]
mod support;

mod client_hold;
mod find_max;
mod rate;
mod stages;

use std::sync::{Mutex, MutexGuard};

/// Held by every test here that runs load: on a 2-core machine, two runs at once (each with its
/// server) stall each other's client and server for tens of milliseconds, which a rate held to
/// 1% or a capacity measured to 5% notices.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
