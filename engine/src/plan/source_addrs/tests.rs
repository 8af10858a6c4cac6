use std::net::IpAddr;

use super::validate_source_addrs;
use crate::plan::{MAX_SOURCE_ADDRS, Setting};

fn addrs(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

fn refusal(list: &[IpAddr], target: Option<&str>) -> String {
    let target = target.map(|t| t.parse().unwrap());
    let e = validate_source_addrs(list, target).expect_err("refused");
    assert_eq!(e.setting, Setting::SourceAddrs);
    e.to_string()
}

#[test]
fn addresses_of_the_targets_family_are_taken_and_none_is_no_rule_at_all() {
    let target = Some("127.0.0.1".parse().unwrap());
    assert_eq!(validate_source_addrs(&addrs(&["127.0.1.1", "127.0.1.2"]), target), Ok(()));
    assert_eq!(validate_source_addrs(&addrs(&["::1", "fd00::2"]), Some("::1".parse().unwrap())), Ok(()));
    assert_eq!(validate_source_addrs(&[], target), Ok(()));
    // A target named by host name has its family judged once it is resolved.
    assert_eq!(validate_source_addrs(&addrs(&["::1"]), None), Ok(()));
}

#[test]
fn a_source_address_of_the_other_family_than_the_target_is_refused_naming_both() {
    let why = refusal(&addrs(&["::1"]), Some("127.0.0.1"));
    assert_eq!(
        why,
        "::1 is IPv6, but the target 127.0.0.1 is IPv4: a connection leaves from an address of its target's family"
    );
    assert!(refusal(&addrs(&["10.0.0.1"]), Some("::1")).contains("10.0.0.1 is IPv4, but the target ::1 is IPv6"));
}

#[test]
fn mixed_families_duplicates_and_addresses_no_socket_binds_to_are_refused() {
    assert!(refusal(&addrs(&["10.0.0.1", "::1"]), None).contains("10.0.0.1 and ::1 are of two families"));
    assert_eq!(refusal(&addrs(&["10.0.0.1", "10.0.0.2", "10.0.0.1"]), None), "10.0.0.1 is listed twice");
    for one in ["0.0.0.0", "::", "224.0.0.1", "ff02::1", "255.255.255.255"] {
        let why = refusal(&addrs(&[one]), None);
        assert_eq!(why, format!("{one} is not an address a connection can leave from"));
    }
}

#[test]
fn more_source_addresses_than_the_limit_are_refused_with_the_limit() {
    let many: Vec<IpAddr> =
        (0..=MAX_SOURCE_ADDRS as u32).map(|i| IpAddr::from((0x0a00_0000 + i).to_be_bytes())).collect();
    assert_eq!(validate_source_addrs(&many[..MAX_SOURCE_ADDRS], None), Ok(()));
    assert_eq!(refusal(&many, None), "1025 source addresses is more than the 1024 a run may have");
}
