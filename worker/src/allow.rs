//! Which targets a worker may send load to (`--allow-target`).
//!
//! A worker is a machine that fires requests wherever it is told; on a shared network the
//! operator limits it to the systems under test. Each entry is a network (CIDR, v4 or v6), a
//! bare address, or a host name. A target passes if its host name is one of the allowed names,
//! or if every address it resolves to lies in an allowed network — every one, because the
//! engine may connect to any of them.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// One IP network: an address and how many leading bits of it count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_match(u128::from(u32::from(net)) << 96, u128::from(u32::from(ip)) << 96, self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_match(u128::from(net), u128::from(ip), self.prefix),
            _ => false,
        }
    }
}

fn prefix_match(a: u128, b: u128, prefix: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
    a & mask == b & mask
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Net(Net),
    /// Lower case, without a trailing dot.
    Host(String),
}

/// The allowed targets; empty allows everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowList {
    entries: Vec<Entry>,
    /// The entries as the operator wrote them, for messages.
    written: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("bad allowed target '{entry}': {why} (use a CIDR like 10.0.0.0/8, an address, or a host name)")]
pub(crate) struct AllowError {
    entry: String,
    why: &'static str,
}

impl AllowList {
    pub(crate) fn parse(entries: &[String]) -> Result<AllowList, AllowError> {
        let mut list = AllowList::default();
        for written in entries {
            let entry = written.trim();
            let bad = |why| AllowError { entry: entry.to_string(), why };
            let parsed = if let Some((addr, prefix)) = entry.split_once('/') {
                let addr: IpAddr = addr.parse().map_err(|_| bad("not an IP address before the '/'"))?;
                let addr = addr.to_canonical();
                let max = if addr.is_ipv4() { 32 } else { 128 };
                let prefix: u8 = prefix.parse().ok().filter(|&p| p <= max).ok_or(bad("bad prefix length"))?;
                Entry::Net(Net { addr, prefix })
            } else if let Ok(addr) = entry.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
                let addr = addr.to_canonical();
                Entry::Net(Net { addr, prefix: if addr.is_ipv4() { 32 } else { 128 } })
            } else {
                let host = normalize_host(entry);
                if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') {
                    return Err(bad("neither a network nor a host name"));
                }
                Entry::Host(host)
            };
            list.entries.push(parsed);
            list.written.push(entry.to_string());
        }
        Ok(list)
    }

    pub(crate) fn allows_everything(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether load may go to `host`, which resolved to `addrs`.
    pub(crate) fn allows(&self, host: &str, addrs: &[SocketAddr]) -> bool {
        if self.allows_everything() {
            return true;
        }
        let host = normalize_host(host);
        if self.entries.iter().any(|e| matches!(e, Entry::Host(h) if *h == host)) {
            return true;
        }
        !addrs.is_empty()
            && addrs.iter().all(|a| self.entries.iter().any(|e| matches!(e, Entry::Net(n) if n.contains(a.ip()))))
    }

    /// Whether `host` is allowed by name alone, so that it need not be resolved.
    pub(crate) fn allows_name(&self, host: &str) -> bool {
        let host = normalize_host(host);
        self.allows_everything() || self.entries.iter().any(|e| matches!(e, Entry::Host(h) if *h == host))
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written.join(", "))
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowList {
        AllowList::parse(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("valid list")
    }

    fn at(ips: &[&str]) -> Vec<SocketAddr> {
        ips.iter().map(|ip| SocketAddr::new(ip.parse().expect("valid IP"), 80)).collect()
    }

    #[test]
    fn an_empty_list_allows_everything() {
        let l = list(&[]);
        assert!(l.allows("anything.example", &at(&["8.8.8.8"])));
        assert!(l.allows("x", &[]));
    }

    #[test]
    fn ipv4_networks_and_addresses() {
        let l = list(&["10.0.0.0/8", "192.168.1.7", "172.16.0.0/12"]);
        assert!(l.allows("10.1.2.3", &at(&["10.1.2.3"])));
        assert!(l.allows("192.168.1.7", &at(&["192.168.1.7"])));
        assert!(l.allows("172.31.255.255", &at(&["172.31.255.255"])));
        assert!(!l.allows("172.32.0.1", &at(&["172.32.0.1"])));
        assert!(!l.allows("192.168.1.8", &at(&["192.168.1.8"])));
        assert!(!l.allows("11.0.0.1", &at(&["11.0.0.1"])));
        // An IPv4-mapped IPv6 address is the IPv4 address it maps.
        assert!(l.allows("::ffff:10.9.9.9", &at(&["::ffff:10.9.9.9"])));
    }

    #[test]
    fn ipv6_networks_and_addresses() {
        let l = list(&["fd00::/8", "2001:db8::1", "[::1]"]);
        assert!(l.allows("fd12:3456::1", &at(&["fd12:3456::1"])));
        assert!(l.allows("2001:db8::1", &at(&["2001:db8::1"])));
        assert!(l.allows("::1", &at(&["::1"])));
        assert!(!l.allows("2001:db8::2", &at(&["2001:db8::2"])));
        assert!(!l.allows("fe80::1", &at(&["fe80::1"])));
        assert!(!l.allows("10.0.0.1", &at(&["10.0.0.1"])));
    }

    #[test]
    fn prefix_zero_and_full_prefixes() {
        assert!(list(&["0.0.0.0/0"]).allows("h", &at(&["203.0.113.9"])));
        assert!(!list(&["0.0.0.0/0"]).allows("h", &at(&["2001:db8::9"])));
        assert!(list(&["::/0"]).allows("h", &at(&["2001:db8::9"])));
        assert!(list(&["203.0.113.9/32"]).allows("h", &at(&["203.0.113.9"])));
        assert!(!list(&["203.0.113.9/32"]).allows("h", &at(&["203.0.113.8"])));
    }

    #[test]
    fn every_resolved_address_must_be_allowed() {
        let l = list(&["10.0.0.0/8"]);
        assert!(l.allows("svc.internal", &at(&["10.0.0.1", "10.0.0.2"])));
        assert!(!l.allows("svc.internal", &at(&["10.0.0.1", "8.8.8.8"])));
        assert!(!l.allows("svc.internal", &[]));
    }

    #[test]
    fn host_names_match_without_regard_to_case() {
        let l = list(&["Target.Example.COM", "other.test."]);
        assert!(l.allows("target.example.com", &at(&["8.8.8.8"])));
        assert!(l.allows("TARGET.example.com.", &[]));
        assert!(l.allows("other.test", &[]));
        assert!(l.allows_name("other.TEST"));
        assert!(!l.allows("evil.example.com", &at(&["8.8.8.8"])));
        assert!(!l.allows("example.com", &at(&["8.8.8.8"])));
        assert!(!l.allows_name("example.com"));
    }

    #[test]
    fn bad_entries_are_refused() {
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "x/8", "a b", "", "10.0.0.0/-1", "under_score"] {
            assert!(AllowList::parse(&[bad.to_string()]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_list_shows_as_written() {
        assert_eq!(list(&["10.0.0.0/8", "Target.Example"]).to_string(), "10.0.0.0/8, Target.Example");
    }
}
