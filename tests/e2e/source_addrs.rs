//! End to end, source addresses: `--source-addr` and a workers file's `source-addr=` spread a
//! run's connections over several local addresses, so that one machine holds more connections
//! to one target address than its local port range allows; running out of ports is said in
//! numbers; and every bad list is one line and exit 2 before any load. The range is narrowed
//! in a network namespace of the test's own (the range is per namespace), where 127.0.0.0/8 on
//! loopback gives every source address a test needs. Every load is bounded by a request count.

use crate::support;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use support::h3_server::{H3Options, H3TestServer};
use support::{
    Behavior, Namespaces, Nginx, TestServer, WorkerProcess, assert_success, can_make_namespaces, controller_command,
    describe_output, free_port, in_netns, ip, json_report, number, one_error_line, run_within, set_local_port_range,
    volley_in,
};

/// How long any run of these tests may take before it counts as hung.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn run(cmd: Command) -> Output {
    run_within(cmd, RUN_TIMEOUT)
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|a| a.parse().unwrap()).collect()
}

/// Each address of `addrs` with `each` connections.
fn evenly(addrs: &[&str], each: u64) -> BTreeMap<IpAddr, u64> {
    ips(addrs).into_iter().map(|ip| (ip, each)).collect()
}

/// A fresh namespace, loopback up and its local port range `low..=high`; None (after saying
/// why) where this test cannot make one.
fn namespace_with_port_range(role: &str, low: u16, high: u16) -> Option<(Namespaces, String)> {
    if !can_make_namespaces() {
        eprintln!("SKIPPED: needs root and iproute2 (`ip`) to make a network namespace");
        return None;
    }
    let ns = format!("volley-{}-{role}", std::process::id());
    let mut namespaces = Namespaces::new();
    if let Err(e) = namespaces.add(&ns) {
        eprintln!("SKIPPED: cannot make network namespaces here ({e})");
        return None;
    }
    ip(&["-n", &ns, "link", "set", "lo", "up"]).expect("loopback up");
    set_local_port_range(&ns, low, high);
    Some((namespaces, ns))
}

#[test]
fn connections_beyond_the_local_port_range_fail_with_a_line_that_names_the_arithmetic_and_the_fix() {
    // 4 ports: 8 connections to one address and port find no port for half of them
    // (EADDRNOTAVAIL), as 30,000 would with the usual range.
    let Some((_namespaces, ns)) = namespace_with_port_range("ports", 40000, 40003) else { return };
    let target_addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    let target = in_netns(&ns, move || {
        volley_serve::Server::start(volley_serve::ServeConfig { addr: target_addr, ..Default::default() })
    })
    .expect("the target server starts in the namespace");
    let url = format!("http://{target_addr}/");
    let out = run(volley_in(&ns, &["-c", "8", "-t", "1", "-n", "400", "-j", &url]));
    let r = json_report(&out);
    assert!(number(&r, "/errors/connect") > 0, "{r}");
    assert_eq!(number(&r, "/requests/ok"), target.requests(), "{r}");
    let samples = r["errorSamples"].to_string();
    assert!(
        samples.contains(
            "no local port left (EADDRNOTAVAIL): 1 source address x 4 ports = 4 connections at most to one target \
             address and port, less TIME_WAIT; add --source-addr addresses, widen net.ipv4.ip_local_port_range, or \
             use more workers\""
        ),
        "{samples}"
    );
    // Two source addresses: the same words, in the run's own numbers.
    let out =
        run(volley_in(&ns, &["-c", "12", "-t", "1", "-n", "400", "--source-addr", "127.0.3.1,127.0.3.2", "-j", &url]));
    let samples = json_report(&out)["errorSamples"].to_string();
    assert!(samples.contains(": 2 source addresses x 4 ports = 8 connections at most to one target"), "{samples}");
}

#[test]
fn three_times_the_port_range_from_one_machine_over_four_source_addresses_is_answered_exactly() {
    // 50 ports, 150 connections: one address finds ports for a third of them, four for all.
    let Some((_namespaces, ns)) = namespace_with_port_range("sources", 40000, 40049) else { return };
    let Some(nginx) = in_netns(&ns, Nginx::start) else { return };
    let url = nginx.url();
    let flags = ["-c", "150", "-t", "2", "-n", "3000", "-j"];

    // Without source addresses the range runs out, as the report says.
    let out = run(volley_in(&ns, &[&flags[..], &[&url]].concat()));
    let r = json_report(&out);
    assert!(number(&r, "/errors/connect") >= 100, "{r}");
    assert!(r["errorSamples"].to_string().contains("1 source address x 50 ports = 50 connections at most"), "{r}");
    let mut answered = nginx.settled_requests();
    assert_eq!(number(&r, "/requests/ok"), answered, "{r}");

    // A local run from a /30 of loopback: every connection up, every request answered.
    let out = run(volley_in(&ns, &[&flags[..], &["--source-addr", "127.0.1.0/30", &url]].concat()));
    answered = every_connection_served(&out, &nginx, answered);

    // One worker, its addresses from the workers file, the controller beside it.
    let listen = "127.0.0.1:7700";
    let _worker =
        WorkerProcess::spawn(volley_in(&ns, &["worker", "--listen", listen]), listen.parse().unwrap(), Some(&ns))
            .unwrap_or_else(|e| panic!("worker {listen}: {e}"));
    let dir = tempfile::tempdir().unwrap();
    let workers = dir.path().join("workers.txt");
    std::fs::write(
        &workers,
        format!("# one machine, four addresses\n{listen} source-addr=127.0.2.1,127.0.2.2,127.0.2.3,127.0.2.4\n"),
    )
    .unwrap();
    let at_file = format!("@{}", workers.display());
    let out = run(volley_in(&ns, &[&["--workers", &at_file][..], &flags[..], &[&url]].concat()));
    every_connection_served(&out, &nginx, answered);
}

#[test]
fn connections_leave_from_each_source_address_in_turn_over_tcp_and_quic() {
    let server = TestServer::start(Behavior::ok(14));
    let out = run(controller_command([
        "-c",
        "12",
        "-t",
        "2",
        "-n",
        "600",
        "--source-addr",
        "127.0.4.1,127.0.4.2",
        "--source-addr",
        "127.0.5.0/31",
        "-j",
        &server.url(),
    ]));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 600, "{r}");
    assert_eq!(server.requests(), 600);
    assert_eq!(server.connections_by_peer(), evenly(&["127.0.4.1", "127.0.4.2", "127.0.5.0", "127.0.5.1"], 3));

    let server = H3TestServer::start(H3Options::default());
    let dir = tempfile::tempdir().unwrap();
    let ca: PathBuf = server.cert().write_ca(dir.path());
    let ca = ca.to_str().unwrap();
    let out = run(controller_command([
        "--http3",
        "-p",
        "4",
        "-c",
        "4",
        "-t",
        "1",
        "-n",
        "400",
        "--source-addr",
        "127.0.6.1,127.0.6.2",
        "--cacert",
        ca,
        "-j",
        &server.url(),
    ]));
    let r = json_report(&out);
    assert_eq!(number(&r, "/requests/ok"), 400, "{r}");
    assert_eq!(server.requests(), 400);
    assert_eq!(server.connections_by_peer(), evenly(&["127.0.6.1", "127.0.6.2"], 2));
}

#[test]
fn a_bad_source_address_list_is_one_line_and_exit_2_before_any_load() {
    let server = TestServer::start(Behavior::ok(14));
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        format!("@{}", path.display())
    };
    // Nothing listens here: a controller that tried to reach it would fail with exit 1.
    let nowhere = format!("127.0.0.1:{}", free_port());
    let too_large = file("too-large.txt", &format!("{nowhere} source-addr=10.0.0.0/8\n"));
    let unknown_key = file("unknown-key.txt", &format!("{nowhere} source=127.0.0.2\n"));
    let other_family = file("other-family.txt", &format!("{nowhere} source-addr=::1\n"));
    let json = file("workers.json", &format!(r#"[{{"worker": "{nowhere}", "source_addr": "127.0.0.300"}}]"#));
    let cases: [(&[&str], &str); 11] = [
        (&["--source-addr", "10.0.0.0/8"], "--source-addr: '10.0.0.0/8' is 2^24 addresses, more than the 1024"),
        (&["--source-addr", "10.0.0.0/22,10.0.4.0/31"], "--source-addr: 1026 addresses in all, more than the 1024"),
        (&["--source-addr", "127.0.0.300"], "--source-addr: '127.0.0.300' is not an IP address or CIDR block"),
        (
            &["--source-addr", "127.0.0.5/30"],
            "--source-addr: '127.0.0.5/30' has host bits set: the block is 127.0.0.4/30",
        ),
        (&["--source-addr", "127.0.0.2,127.0.0.2"], "--source-addr: 127.0.0.2 is listed twice"),
        (&["--source-addr", "0.0.0.0"], "--source-addr: 0.0.0.0 is not an address a connection can leave from"),
        (&["--source-addr", "::1"], "--source-addr: ::1 is IPv6, but the target 127.0.0.1 is IPv4"),
        // TEST-NET-1 (RFC 5737) is nobody's address, and so not this machine's.
        (
            &["--source-addr", "127.0.0.2,192.0.2.1"],
            "--source-addr: source address 192.0.2.1 is not an address of this machine",
        ),
        (&["--workers", &too_large], ": line 1: source-addr: '10.0.0.0/8' is 2^24 addresses"),
        (&["--workers", &unknown_key], ": line 1: 'source=127.0.0.2' is not source-addr=LIST|CIDR"),
        (&["--workers", &json], ": item 1: source-addr: '127.0.0.300' is not an IP address"),
    ];
    for (args, expect) in cases.into_iter().chain([(
        &["--workers", other_family.as_str()][..],
        "--workers: {nowhere}'s source-addr: ::1 is IPv6, but the target 127.0.0.1 is IPv4",
    )]) {
        let expect = expect.replace("{nowhere}", &nowhere);
        let out = run(controller_command([&["-n", "10", "-c", "2"], args, &[&url]].concat()));
        let line = one_error_line(&out);
        assert_eq!(out.status.code(), Some(2), "{}", describe_output(&out));
        assert!(line.starts_with("volley: error: ") && line.contains(&expect), "expected '{expect}': {line}");
    }
    assert_eq!(server.connections(), 0, "no load before the refusal");

    // A worker checks its own addresses as its shard arrives, and refuses before any load.
    let worker = WorkerProcess::start(&[]);
    let out = run(controller_command(["--workers", &worker.address(), "--source-addr", "192.0.2.1", "-n", "10", &url]));
    let line = one_error_line(&out);
    assert_ne!(out.status.code(), Some(0), "{}", describe_output(&out));
    assert!(line.contains("source address 192.0.2.1 is not an address of this machine"), "{line}");
    assert_eq!(server.connections(), 0, "no load before the refusal");
}

/// Checks a run of 150 connections and 3,000 requests connected every one and got every answer,
/// as nginx counted them beyond the `answered` before it; returns nginx's count now.
fn every_connection_served(out: &Output, nginx: &Nginx, answered: u64) -> u64 {
    assert_success(out);
    let r = json_report(out);
    assert_eq!(number(&r, "/errors/connect"), 0, "{r}");
    assert_eq!(number(&r, "/requests/ok"), 3000, "{r}");
    assert_eq!(number(&r, "/connections"), 150, "{r}");
    assert_eq!(nginx.settled_requests(), answered + 3000, "nginx's own count");
    answered + 3000
}
