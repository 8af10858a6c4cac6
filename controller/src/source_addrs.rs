//! `--source-addr LIST|CIDR` (and a workers file's `source-addr=`): the local addresses a
//! run's connections leave from, as addresses and CIDR blocks separated by commas. A block is
//! every address in it, its first and last included (each must be an address of the machine
//! that runs the load, as a block routed to loopback is whole); how many there may be in all is
//! the engine's `MAX_SOURCE_ADDRS`, checked before a block is expanded.

use std::net::IpAddr;

use volley_engine::MAX_SOURCE_ADDRS;

/// The addresses `items` name, in order; why not, in words to put after the flag's name.
pub(crate) fn parse<S: AsRef<str>>(items: &[S]) -> Result<Vec<IpAddr>, String> {
    let mut addrs = Vec::new();
    for item in items.iter().flat_map(|i| i.as_ref().split(',')).map(str::trim) {
        if item.is_empty() {
            return Err("an empty item: give addresses or CIDR blocks separated by commas".into());
        }
        let (first, host_bits) = match item.split_once('/') {
            Some((base, prefix)) => block(item, base, prefix)?,
            None => (item.parse::<IpAddr>().map_err(|_| format!("'{item}' is not an IP address or CIDR block"))?, 0),
        };
        // Judged before the block is expanded: a /8 is 16 million addresses.
        if host_bits > MAX_SOURCE_ADDRS.ilog2() {
            return Err(format!(
                "'{item}' is 2^{host_bits} addresses, more than the {MAX_SOURCE_ADDRS} source addresses a run may have \
                 (a /{} at most for IPv4, a /{} for IPv6)",
                32 - MAX_SOURCE_ADDRS.ilog2(),
                128 - MAX_SOURCE_ADDRS.ilog2(),
            ));
        }
        let count = 1u128 << host_bits;
        if addrs.len() as u128 + count > MAX_SOURCE_ADDRS as u128 {
            return Err(format!(
                "{} addresses in all, more than the {MAX_SOURCE_ADDRS} source addresses a run may have",
                addrs.len() as u128 + count
            ));
        }
        addrs.extend((0..count).map(|k| nth(first, k)));
    }
    Ok(addrs)
}

/// A CIDR block's first address and how many host bits it has; its host bits must be zero.
fn block(item: &str, base: &str, prefix: &str) -> Result<(IpAddr, u32), String> {
    let bad = || format!("'{item}' is not an IP address or CIDR block");
    let base: IpAddr = base.parse().map_err(|_| bad())?;
    let bits = if base.is_ipv4() { 32 } else { 128 };
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= bits).ok_or_else(bad)?;
    let host_bits = bits - prefix;
    let value = as_u128(base);
    let mask = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
    if value & mask != 0 {
        return Err(format!("'{item}' has host bits set: the block is {}/{prefix}", from_u128(base, value & !mask)));
    }
    Ok((base, host_bits))
}

fn as_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// The address of `ip`'s family with value `value` (which fits it).
fn from_u128(ip: IpAddr, value: u128) -> IpAddr {
    match ip {
        IpAddr::V4(_) => IpAddr::V4((value as u32).into()),
        IpAddr::V6(_) => IpAddr::V6(value.into()),
    }
}

/// The `k`-th address from `first` within its block.
fn nth(first: IpAddr, k: u128) -> IpAddr {
    from_u128(first, as_u128(first) + k)
}

#[cfg(test)]
mod tests;
