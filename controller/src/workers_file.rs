//! `--workers @FILE`: a fleet's worker list read from a file, so fifty workers are not a
//! fifty-item flag. The file is either text, one HOST:PORT a line (`#` starts a comment, blank
//! lines are skipped), or JSON as Terraform prints it: `terraform output -json workers` (a list
//! of "HOST:PORT" strings) or `terraform output -json` (an object whose `workers` output holds
//! that list under `value`).
//!
//! A worker may have source addresses of its own (`--source-addr` for it alone, since each
//! machine has its own addresses): `HOST:PORT source-addr=LIST|CIDR` on a text line, or an
//! object `{"worker": "HOST:PORT", "source_addr": "LIST|CIDR"}` in the JSON list.
//!
//! `--workers dns:NAME:PORT`: every address NAME resolves to, each a worker on PORT, as a
//! Kubernetes headless Service names its pods (one A or AAAA record each). Resolved once, at
//! start, by the system's resolver; the workers found are named on stderr.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;

use serde_json::Value;

use crate::error::CliError;
use crate::source_addrs;

/// A worker, and the source addresses the workers file gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkerItem {
    /// HOST:PORT.
    pub address: String,
    /// None: the command line's `--source-addr`, if any.
    pub source_addrs: Option<Vec<IpAddr>>,
}

impl WorkerItem {
    fn at(address: &str) -> Self {
        WorkerItem { address: address.to_string(), source_addrs: None }
    }
}

/// `--workers` items with every `@FILE` replaced by the workers that file lists, and every
/// `dns:NAME:PORT` by the addresses NAME resolves to, in order.
pub(crate) fn expand(items: &[String]) -> Result<Vec<WorkerItem>, CliError> {
    let mut workers = Vec::new();
    for item in items {
        let item = item.trim();
        if let Some(path) = item.strip_prefix('@') {
            workers.extend(read(Path::new(path))?);
        } else if let Some(service) = item.strip_prefix("dns:") {
            let found = discover(service, |name, port| (name, port).to_socket_addrs().map(Iterator::collect))?;
            eprintln!("volley: --workers {item}: {} workers: {}", found.len(), found.join(", "));
            workers.extend(found.iter().map(|w| WorkerItem::at(w)));
        } else {
            workers.push(WorkerItem::at(item));
        }
    }
    Ok(workers)
}

/// `NAME:PORT`'s workers: every address `resolve` gives for NAME, once each, in address order,
/// with PORT.
fn discover(
    service: &str,
    resolve: impl FnOnce(&str, u16) -> std::io::Result<Vec<SocketAddr>>,
) -> Result<Vec<String>, CliError> {
    let bad = |why: String| CliError::Usage(format!("--workers dns:{service}: {why}"));
    let Some((name, port)) = service.rsplit_once(':').filter(|(name, _)| !name.is_empty()) else {
        return Err(bad("expected dns:NAME:PORT, such as dns:volley-worker:7700".into()));
    };
    let port: u16 = port.parse().map_err(|_| bad(format!("'{port}' is not a port number")))?;
    let mut addresses = resolve(name, port).map_err(|e| bad(format!("{name} does not resolve ({e})")))?;
    addresses.sort_unstable();
    addresses.dedup();
    if addresses.is_empty() {
        return Err(bad(format!("{name} resolves to no address")));
    }
    Ok(addresses.iter().map(SocketAddr::to_string).collect())
}

fn read(path: &Path) -> Result<Vec<WorkerItem>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--workers @{}: cannot read it: {e}", path.display())))?;
    parse(&text).map_err(|why| CliError::Usage(format!("--workers @{}: {why}", path.display())))
}

/// The workers a file's text lists, or why it lists none usable.
fn parse(text: &str) -> Result<Vec<WorkerItem>, String> {
    let workers = match text.trim_start().chars().next() {
        Some('[' | '{') => parse_json(text)?,
        _ => parse_lines(text)?,
    };
    if workers.is_empty() {
        return Err("lists no workers".into());
    }
    Ok(workers)
}

fn parse_lines(text: &str) -> Result<Vec<WorkerItem>, String> {
    let mut workers = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut words = line.split('#').next().unwrap_or_default().split_whitespace();
        let Some(entry) = words.next() else { continue };
        let at = |why: String| format!("line {}: {why}", number + 1);
        if !is_host_port(entry) {
            return Err(at(format!("'{entry}' is not HOST:PORT")));
        }
        let mut worker = WorkerItem::at(entry);
        for word in words {
            match word.split_once('=') {
                Some(("source-addr", list)) if worker.source_addrs.is_none() => {
                    worker.source_addrs = Some(source_addrs(list).map_err(at)?);
                }
                Some(("source-addr", _)) => return Err(at("source-addr is given twice".into())),
                _ => return Err(at(format!("'{word}' is not source-addr=LIST|CIDR"))),
            }
        }
        workers.push(worker);
    }
    Ok(workers)
}

/// A worker's own `source-addr`: at least one address.
fn source_addrs(list: &str) -> Result<Vec<IpAddr>, String> {
    let addrs = source_addrs::parse(&[list]).map_err(|why| format!("source-addr: {why}"))?;
    if addrs.is_empty() {
        return Err("source-addr: no address".into());
    }
    Ok(addrs)
}

fn parse_json(text: &str) -> Result<Vec<WorkerItem>, String> {
    const SHAPE: &str = "expected a JSON list of \"HOST:PORT\" strings (terraform output -json workers) \
                         or an object with workers.value holding one (terraform output -json)";
    const ITEM: &str =
        "is not a \"HOST:PORT\" string or a {\"worker\": \"HOST:PORT\", \"source_addr\": \"LIST|CIDR\"} object";
    let json: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let list = match &json {
        Value::Array(list) => list,
        Value::Object(outputs) => match outputs.get("workers").and_then(|w| w.get("value")) {
            Some(Value::Array(list)) => list,
            _ => return Err(SHAPE.into()),
        },
        _ => return Err(SHAPE.into()),
    };
    list.iter()
        .enumerate()
        .map(|(i, item)| {
            let at = |why: String| format!("item {}: {why}", i + 1);
            let (worker, source) = match item {
                Value::String(w) => (w.as_str(), None),
                Value::Object(o) if o.keys().all(|k| k == "worker" || k == "source_addr") => {
                    match (o.get("worker").and_then(Value::as_str), o.get("source_addr")) {
                        (Some(w), None) => (w, None),
                        (Some(w), Some(Value::String(list))) => (w, Some(list.as_str())),
                        _ => return Err(at(format!("{item} {ITEM}"))),
                    }
                }
                _ => return Err(at(format!("{item} {ITEM}"))),
            };
            let worker = worker.trim();
            if !is_host_port(worker) {
                return Err(at(format!("{item} {ITEM}")));
            }
            let source_addrs = source.map(source_addrs).transpose().map_err(at)?;
            Ok(WorkerItem { address: worker.to_string(), source_addrs })
        })
        .collect()
}

/// The same test `--workers` applies to each of its items: a host, a colon, a port number.
fn is_host_port(w: &str) -> bool {
    w.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses(workers: Vec<WorkerItem>) -> Vec<String> {
        workers.into_iter().map(|w| w.address).collect()
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_text_file_lists_one_worker_a_line_with_comments_and_blank_lines_skipped() {
        let text = "# the fleet\n198.18.0.10:7700\n\n  198.18.0.11:7700  # rack 2\n[::1]:7700\n";
        assert_eq!(addresses(parse(text).unwrap()), ["198.18.0.10:7700", "198.18.0.11:7700", "[::1]:7700"]);
    }

    #[test]
    fn a_worker_may_have_source_addresses_of_its_own_in_either_format() {
        let text = "w1:7700 source-addr=10.0.0.0/31  # two\nw2:7700\nw3:7700 source-addr=fd00::1,fd00::2\n";
        let json = r#"[{"worker": "w1:7700", "source_addr": "10.0.0.0/31"}, "w2:7700",
            {"worker": "w3:7700", "source_addr": "fd00::1,fd00::2"}]"#;
        for workers in [parse(text).unwrap(), parse(json).unwrap()] {
            assert_eq!(
                workers,
                [
                    WorkerItem { address: "w1:7700".into(), source_addrs: Some(ips(&["10.0.0.0", "10.0.0.1"])) },
                    WorkerItem::at("w2:7700"),
                    WorkerItem { address: "w3:7700".into(), source_addrs: Some(ips(&["fd00::1", "fd00::2"])) },
                ]
            );
        }
    }

    #[test]
    fn a_workers_bad_source_addresses_are_refused_naming_the_line_or_item() {
        for (text, expect) in [
            ("w1:7700 source-addr=10.0.0.0/8", "line 1: source-addr: '10.0.0.0/8' is 2^24 addresses"),
            ("w1:7700\nw2:7700 source-addr=", "line 2: source-addr: an empty item"),
            ("w1:7700 source-addr=10.0.0.1 source-addr=10.0.0.2", "line 1: source-addr is given twice"),
            ("w1:7700 source=10.0.0.1", "line 1: 'source=10.0.0.1' is not source-addr=LIST|CIDR"),
            ("w1:7700 10.0.0.1", "line 1: '10.0.0.1' is not source-addr=LIST|CIDR"),
            (r#"[{"worker": "w1:7700", "source_addr": "x"}]"#, "item 1: source-addr: 'x' is not an IP address"),
            (r#"[{"worker": "w1:7700", "source_addr": 7}]"#, "item 1: {"),
            (r#"[{"worker": "w1:7700", "source": "10.0.0.1"}]"#, "item 1: {"),
            (r#"[{"source_addr": "10.0.0.1"}]"#, "item 1: {"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.starts_with(expect), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{text:?}: {err}");
        }
    }

    #[test]
    fn terraforms_json_outputs_are_read_whole_or_as_the_workers_output() {
        let one_output = "[\n  \"198.18.0.10:7700\",\n  \"198.18.0.11:7700\"\n]\n";
        assert_eq!(addresses(parse(one_output).unwrap()), ["198.18.0.10:7700", "198.18.0.11:7700"]);
        let all_outputs = r#"{"token":{"sensitive":true,"type":"string","value":"x"},
            "workers":{"sensitive":false,"type":["list","string"],"value":["w1:7700","w2:7700"]}}"#;
        assert_eq!(addresses(parse(all_outputs).unwrap()), ["w1:7700", "w2:7700"]);
    }

    #[test]
    fn an_empty_or_malformed_file_says_what_is_wrong_and_where() {
        for (text, expect) in [
            ("", "lists no workers"),
            ("# nothing here\n\n", "lists no workers"),
            ("[]", "lists no workers"),
            ("w1:7700\nw2\n", "line 2: 'w2' is not HOST:PORT"),
            ("w1:99999", "line 1"),
            ("[\"w1:7700\", 7]", "item 2: 7 is not a"),
            ("[\"w1:7700\"", "not valid JSON"),
            ("{\"nodes\": []}", "terraform output -json"),
            ("{\"workers\": {\"value\": \"w1:7700\"}}", "terraform output -json"),
        ] {
            let err = parse(text).expect_err(text);
            assert!(err.contains(expect), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_dns_item_is_every_address_its_name_resolves_to_once_each_in_order() {
        let addresses = |list: &[&str]| list.iter().map(|a| a.parse().unwrap()).collect::<Vec<SocketAddr>>();
        let found = discover("volley-worker:7700", |name, port| {
            assert_eq!((name, port), ("volley-worker", 7700));
            Ok(addresses(&["10.0.0.3:7700", "10.0.0.1:7700", "[fd00::2]:7700", "10.0.0.3:7700"]))
        });
        assert_eq!(found.unwrap(), ["10.0.0.1:7700", "10.0.0.3:7700", "[fd00::2]:7700"]);
        for (service, expect) in [
            ("volley-worker", "expected dns:NAME:PORT"),
            (":7700", "expected dns:NAME:PORT"),
            ("volley-worker:x", "'x' is not a port number"),
            ("volley-worker:70000", "'70000' is not a port number"),
        ] {
            let err = discover(service, |_, _| Ok(addresses(&["10.0.0.1:1"]))).expect_err(service).to_string();
            assert!(err.starts_with(&format!("--workers dns:{service}: ")) && err.contains(expect), "{err}");
        }
        let none = discover("gone:7700", |_, _| Ok(Vec::new())).expect_err("no address").to_string();
        assert_eq!(none, "--workers dns:gone:7700: gone resolves to no address");
        let failed = discover("gone:7700", |_, _| Err(std::io::Error::other("no such host"))).expect_err("no name");
        assert_eq!(failed.to_string(), "--workers dns:gone:7700: gone does not resolve (no such host)");
    }

    #[test]
    fn file_items_expand_in_place_among_plain_ones() {
        let dir = std::env::temp_dir().join(format!("volley-workers-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("fleet.txt");
        std::fs::write(&file, "b:1\nc:2\n").unwrap();
        let items = ["a:0".to_string(), format!("@{}", file.display()), "d:3".to_string()];
        let expanded = expand(&items);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(addresses(expanded.unwrap()), ["a:0", "b:1", "c:2", "d:3"]);
        let missing = expand(&["@/nonexistent/fleet.txt".to_string()]).expect_err("a missing file");
        assert!(matches!(missing, CliError::Usage(_)));
        assert!(missing.to_string().starts_with("--workers @/nonexistent/fleet.txt: cannot read it"), "{missing}");
    }
}
