//! The rules a plan's source addresses keep (`Plan::source_addrs`): few enough, each one
//! address a socket can be bound to, none twice, and all of the target's family, since an IPv4
//! socket cannot leave from an IPv6 address nor the other way round.

use std::collections::HashSet;
use std::net::IpAddr;

use super::{MAX_SOURCE_ADDRS, PlanError, Setting};

/// Checks `addrs` on their own, and against `target` when the target's address is known (an
/// address in the URL, or the one the run resolved).
pub(crate) fn validate_source_addrs(addrs: &[IpAddr], target: Option<IpAddr>) -> Result<(), PlanError> {
    let bad = |why: String| Err(PlanError::new(Setting::SourceAddrs, why));
    if addrs.len() > MAX_SOURCE_ADDRS {
        return bad(format!("{} source addresses is more than the {MAX_SOURCE_ADDRS} a run may have", addrs.len()));
    }
    let mut seen = HashSet::with_capacity(addrs.len());
    for &addr in addrs {
        if addr.is_unspecified() || addr.is_multicast() || matches!(addr, IpAddr::V4(v4) if v4.is_broadcast()) {
            return bad(format!("{addr} is not an address a connection can leave from"));
        }
        if !seen.insert(addr) {
            return bad(format!("{addr} is listed twice"));
        }
    }
    if let Some(first) = addrs.first()
        && let Some(other) = addrs.iter().find(|a| a.is_ipv4() != first.is_ipv4())
    {
        return bad(format!("{first} and {other} are of two families: give all IPv4 or all IPv6 addresses"));
    }
    if let (Some(first), Some(target)) = (addrs.first(), target)
        && first.is_ipv4() != target.is_ipv4()
    {
        return bad(format!(
            "{first} is {}, but the target {target} is {}: a connection leaves from an address of its target's family",
            family(*first),
            family(target)
        ));
    }
    Ok(())
}

fn family(addr: IpAddr) -> &'static str {
    if addr.is_ipv4() { "IPv4" } else { "IPv6" }
}

#[cfg(test)]
mod tests;
