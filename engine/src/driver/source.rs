//! Source addresses: which local address a connection leaves from, the bind that says so, and
//! what running out of local ports means in numbers.
//!
//! The kernel gives a connection to one target address and port a local port from
//! net.ipv4.ip_local_port_range (28,232 by default) for each source address, so beyond that many
//! connections a connect fails with EADDRNOTAVAIL. Binding connections to several local
//! addresses (`Plan::source_addrs`) multiplies the room. The bind asks for the address alone
//! (IP_BIND_ADDRESS_NO_PORT): the port is then chosen at connect, per target, as without a
//! bind; a bind that picked a port itself would make it unique per address, for every target
//! at once.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

use super::socket::encode_sockaddr;
use crate::error::EngineError;
use crate::plan::{Plan, validate_source_addrs};

/// A run's source addresses, shared by its threads, and the words for running out of ports on
/// them (worked out at the first EADDRNOTAVAIL of the run, then reused).
pub(crate) struct SourceAddrs {
    addrs: Box<[SocketAddr]>,
    /// The run's threads, which take its connections in turn.
    threads: usize,
    ports_used_up: OnceLock<String>,
}

impl SourceAddrs {
    pub(crate) fn new(addrs: &[IpAddr], threads: usize) -> Self {
        SourceAddrs {
            addrs: addrs.iter().map(|ip| SocketAddr::new(*ip, 0)).collect(),
            threads: threads.max(1),
            ports_used_up: OnceLock::new(),
        }
    }

    /// The address connection `slot` of thread `thread` leaves from: the list in turn over the
    /// run's connections. Thread t of T holds the run's connections t, t + T, t + 2T... (the
    /// split interleaves them), so slot s is the run's connection s × T + t, and every address
    /// carries an even share, whatever the threads. None: the kernel picks.
    pub(crate) fn for_slot(&self, thread: usize, slot: usize) -> Option<&SocketAddr> {
        if self.addrs.is_empty() {
            return None;
        }
        self.addrs.get(slot.wrapping_mul(self.threads).wrapping_add(thread) % self.addrs.len())
    }

    /// Why a connect found no local port (EADDRNOTAVAIL), and what to do, in numbers.
    pub(crate) fn ports_used_up(&self) -> &str {
        self.ports_used_up.get_or_init(|| ports_used_up_text(self.addrs.len().max(1), local_port_range()))
    }
}

/// Binds TCP socket `fd` to `source`, its port left to the connect (IP_BIND_ADDRESS_NO_PORT).
pub(super) fn bind_tcp(fd: i32, source: &SocketAddr) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads one int from a live local. Failing (a kernel before 4.2), the
    // bind below picks a port itself, which still works, with less room per address.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&raw const one).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    bind(fd, source)
}

/// Binds socket `fd` to `source`.
pub(super) fn bind(fd: i32, source: &SocketAddr) -> io::Result<()> {
    let (sockaddr, len) = encode_sockaddr(source);
    // SAFETY: the address lives on the stack for the call.
    if unsafe { libc::bind(fd, (&raw const sockaddr).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Checks, before any load, that `plan`'s source addresses are of the family of the address it
/// connects to and are addresses of this machine: otherwise every connection would fail alike.
/// The target is resolved for it (a pinned one is not): see [`check_sources_against`].
pub fn check_source_addrs(plan: &Plan) -> Result<(), EngineError> {
    if plan.source_addrs.is_empty() {
        return Ok(());
    }
    check_sources_against(&plan.source_addrs, plan.target.resolve()?[0].ip())
}

/// `sources` are of the family of `target`, the address the run connects to, and each is an
/// address of this machine.
pub(crate) fn check_sources_against(sources: &[IpAddr], target: IpAddr) -> Result<(), EngineError> {
    validate_source_addrs(sources, Some(target))?;
    for &ip in sources {
        is_local(ip).map_err(|e| EngineError::SourceAddr { addr: ip, why: e.to_string() })?;
    }
    Ok(())
}

/// Whether a socket can be bound to `ip` here: it is one of this machine's addresses (or in a
/// block routed to it as local). Binds no port.
fn is_local(ip: IpAddr) -> io::Result<()> {
    let domain = if ip.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: a plain syscall; the descriptor is closed below.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let bound = bind_tcp(fd, &SocketAddr::new(ip, 0));
    // SAFETY: fd came from socket() above and is not used again.
    unsafe { libc::close(fd) };
    bound
}

/// The local port range's size here (this network namespace's), if it can be read.
fn local_port_range() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut ends = text.split_whitespace().map(|n| n.parse::<u32>().ok());
    match (ends.next().flatten(), ends.next().flatten()) {
        (Some(low), Some(high)) if high >= low => Some(high - low + 1),
        _ => None,
    }
}

/// One source address reaches one target address and port from at most the local port range,
/// less ports in TIME_WAIT (connections closed a moment ago hold theirs for a while); within
/// the 240 characters a report keeps of an error sample.
fn ports_used_up_text(sources: usize, range: Option<u32>) -> String {
    let addresses = if sources == 1 { "1 source address" } else { &format!("{sources} source addresses") };
    let arithmetic = match range {
        Some(ports) => format!("{addresses} x {ports} ports = {} connections", sources as u64 * u64::from(ports)),
        None => format!("{addresses} x the local port range"),
    };
    format!(
        "no local port left (EADDRNOTAVAIL): {arithmetic} at most to one target address and port, \
         less TIME_WAIT; add --source-addr addresses, widen net.ipv4.ip_local_port_range, or use more workers"
    )
}

#[cfg(test)]
mod tests;
