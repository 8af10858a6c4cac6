use std::net::IpAddr;

use super::parse;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

#[test]
fn addresses_and_blocks_are_every_address_they_name_in_order() {
    assert_eq!(parse(&["127.0.1.1,127.0.1.2"]).unwrap(), ips(&["127.0.1.1", "127.0.1.2"]));
    assert_eq!(
        parse(&["127.0.1.0/30", "10.0.0.9"]).unwrap(),
        ips(&["127.0.1.0", "127.0.1.1", "127.0.1.2", "127.0.1.3", "10.0.0.9"])
    );
    assert_eq!(parse(&["fd00::/127, ::1"]).unwrap(), ips(&["fd00::", "fd00::1", "::1"]));
    assert_eq!(parse(&["10.0.0.7/32"]).unwrap(), ips(&["10.0.0.7"]));
    assert_eq!(parse(&["10.0.0.0/22"]).unwrap().len(), 1024);
    assert_eq!(parse(&["fd00::/118"]).unwrap().len(), 1024);
    assert_eq!(parse::<&str>(&[]).unwrap(), Vec::<IpAddr>::new());
}

#[test]
fn a_block_too_large_is_refused_before_it_is_expanded_with_the_largest_allowed() {
    for (item, bits) in [("10.0.0.0/8", 24), ("0.0.0.0/0", 32), ("::/0", 128), ("fd00::/64", 64)] {
        let why = parse(&[item]).expect_err(item);
        assert_eq!(
            why,
            format!(
                "'{item}' is 2^{bits} addresses, more than the 1024 source addresses a run may have \
                 (a /22 at most for IPv4, a /118 for IPv6)"
            )
        );
    }
    let why = parse(&["10.0.0.0/22,10.1.0.0/31"]).expect_err("1026 in all");
    assert_eq!(why, "1026 addresses in all, more than the 1024 source addresses a run may have");
}

#[test]
fn malformed_items_and_blocks_with_host_bits_are_refused_naming_them() {
    for (item, expect) in [
        ("10.0.0.300", "'10.0.0.300' is not an IP address or CIDR block"),
        ("host.example", "'host.example' is not an IP address or CIDR block"),
        ("10.0.0.0/33", "'10.0.0.0/33' is not an IP address or CIDR block"),
        ("10.0.0.0/", "'10.0.0.0/' is not an IP address or CIDR block"),
        ("10.0.0.0/x", "'10.0.0.0/x' is not an IP address or CIDR block"),
        ("::/129", "'::/129' is not an IP address or CIDR block"),
        ("10.0.0.5/30", "'10.0.0.5/30' has host bits set: the block is 10.0.0.4/30"),
        ("10.0.0.1,,10.0.0.2", "an empty item"),
    ] {
        let why = parse(&[item]).expect_err(item);
        assert!(why.starts_with(expect), "{item}: {why}");
    }
}
