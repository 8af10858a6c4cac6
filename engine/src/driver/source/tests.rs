use std::net::IpAddr;

use super::{SourceAddrs, check_source_addrs, is_local, ports_used_up_text};
use crate::error::EngineError;
use crate::plan::{Plan, RequestSpec, Stop};
use crate::target::Target;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

/// How many of `connections`, split over `threads` as a run splits them (evenly, the
/// remainder to the first), leave from each of four addresses.
fn shares(connections: usize, threads: usize) -> [usize; 4] {
    let sources = SourceAddrs::new(&ips(&["127.0.1.0", "127.0.1.1", "127.0.1.2", "127.0.1.3"]), threads);
    let mut counts = [0usize; 4];
    for thread in 0..threads {
        let slots = connections / threads + usize::from(thread < connections % threads);
        for slot in 0..slots {
            let addr = sources.for_slot(thread, slot).expect("an address");
            assert_eq!(addr.port(), 0, "the port is the connect's to choose");
            let IpAddr::V4(v4) = addr.ip() else { panic!("{addr}") };
            counts[usize::from(v4.octets()[3])] += 1;
        }
    }
    counts
}

#[test]
fn connections_take_the_addresses_in_turn_and_every_address_carries_an_even_share() {
    assert_eq!(shares(600, 2), [150; 4]);
    assert_eq!(shares(12, 2), [3; 4]);
    assert_eq!(shares(10, 3), [3, 3, 2, 2], "the remainder to the first, as the run's connections");
    assert_eq!(shares(7, 1), [2, 2, 2, 1]);
    assert_eq!(SourceAddrs::new(&[], 2).for_slot(1, 7), None, "none given: the kernel picks");
}

#[test]
fn running_out_of_ports_says_the_arithmetic_and_what_fixes_it_within_an_error_sample() {
    assert_eq!(
        ports_used_up_text(4, Some(4)),
        "no local port left (EADDRNOTAVAIL): 4 source addresses x 4 ports = 16 connections at most to one target \
         address and port, less TIME_WAIT; add --source-addr addresses, widen net.ipv4.ip_local_port_range, or use \
         more workers"
    );
    assert!(ports_used_up_text(1, Some(28_232)).contains(": 1 source address x 28232 ports = 28232 connections at"));
    assert!(ports_used_up_text(1, None).contains(": 1 source address x the local port range at most"));
    // The longest it gets stays within the 240 characters a report keeps of a sample.
    let longest = ports_used_up_text(1024, Some(65_536));
    assert!(longest.len() <= 240, "{} characters: {longest}", longest.len());
}

#[test]
fn an_address_of_this_machine_binds_and_one_elsewhere_does_not() {
    assert!(is_local("127.0.0.1".parse().unwrap()).is_ok());
    // 127.0.0.0/8 is routed to loopback whole: any of it is local.
    assert!(is_local("127.3.2.1".parse().unwrap()).is_ok());
    // TEST-NET-1 (RFC 5737) is nobody's.
    let e = is_local("192.0.2.1".parse().unwrap()).expect_err("not local");
    assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{e}");
}

fn plan(url: &str, sources: &[&str]) -> Plan {
    let mut plan =
        Plan::new(Target::parse(url).unwrap(), RequestSpec::new("GET", Vec::new(), Vec::new()), 1, Stop::Requests(1));
    plan.source_addrs = ips(sources);
    plan
}

#[test]
fn a_run_checks_its_source_addresses_against_the_resolved_target_and_this_machine() {
    assert!(check_source_addrs(&plan("http://127.0.0.1:9/", &[])).is_ok());
    assert!(check_source_addrs(&plan("http://127.0.0.1:9/", &["127.0.0.2", "127.0.0.3"])).is_ok());
    // The family of a target named by host name is known once resolved (here, pinned).
    let mut named = plan("http://volley.invalid:9/", &["::1"]);
    named.target = named.target.pinned_to(vec!["127.0.0.1:9".parse().unwrap()]);
    assert_eq!(named.validate(), Ok(()), "a name's family is not known before it resolves");
    let e = check_source_addrs(&named).expect_err("the other family");
    assert!(matches!(e, EngineError::Invalid(_)), "{e:?}");
    assert!(e.to_string().contains("::1 is IPv6, but the target 127.0.0.1 is IPv4"), "{e}");
    let e = check_source_addrs(&plan("http://127.0.0.1:9/", &["127.0.0.2", "192.0.2.1"])).expect_err("not local");
    assert_eq!(
        e.to_string(),
        "source address 192.0.2.1 is not an address of this machine (Cannot assign requested address (os error 99)): \
         add it to an interface, or leave it out"
    );
}
