//! `--workers @FILE`: a fleet's worker list read from a file, so fifty workers are not a
//! fifty-item flag. The file is either text, one HOST:PORT a line (`#` starts a comment, blank
//! lines are skipped), or JSON as Terraform prints it: `terraform output -json workers` (a list
//! of "HOST:PORT" strings) or `terraform output -json` (an object whose `workers` output holds
//! that list under `value`).
//!
//! `--workers dns:NAME:PORT`: every address NAME resolves to, each a worker on PORT, as a
//! Kubernetes headless Service names its pods (one A or AAAA record each). Resolved once, at
//! start, by the system's resolver; the workers found are named on stderr.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

use serde_json::Value;

use crate::error::CliError;

/// `--workers` items with every `@FILE` replaced by the workers that file lists, and every
/// `dns:NAME:PORT` by the addresses NAME resolves to, in order.
pub(crate) fn expand(items: &[String]) -> Result<Vec<String>, CliError> {
    let mut workers = Vec::new();
    for item in items {
        let item = item.trim();
        if let Some(path) = item.strip_prefix('@') {
            workers.extend(read(Path::new(path))?);
        } else if let Some(service) = item.strip_prefix("dns:") {
            let found = discover(service, |name, port| (name, port).to_socket_addrs().map(Iterator::collect))?;
            eprintln!("volley: --workers {item}: {} workers: {}", found.len(), found.join(", "));
            workers.extend(found);
        } else {
            workers.push(item.to_string());
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

fn read(path: &Path) -> Result<Vec<String>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("--workers @{}: cannot read it: {e}", path.display())))?;
    parse(&text).map_err(|why| CliError::Usage(format!("--workers @{}: {why}", path.display())))
}

/// The workers a file's text lists, or why it lists none usable.
fn parse(text: &str) -> Result<Vec<String>, String> {
    let workers = match text.trim_start().chars().next() {
        Some('[' | '{') => parse_json(text)?,
        _ => parse_lines(text)?,
    };
    if workers.is_empty() {
        return Err("lists no workers".into());
    }
    Ok(workers)
}

fn parse_lines(text: &str) -> Result<Vec<String>, String> {
    let mut workers = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let entry = line.split('#').next().unwrap_or_default().trim();
        if entry.is_empty() {
            continue;
        }
        if !is_host_port(entry) {
            return Err(format!("line {}: '{entry}' is not HOST:PORT", number + 1));
        }
        workers.push(entry.to_string());
    }
    Ok(workers)
}

fn parse_json(text: &str) -> Result<Vec<String>, String> {
    const SHAPE: &str = "expected a JSON list of \"HOST:PORT\" strings (terraform output -json workers) \
                         or an object with workers.value holding one (terraform output -json)";
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
        .map(|(i, item)| match item.as_str().map(str::trim) {
            Some(w) if is_host_port(w) => Ok(w.to_string()),
            _ => Err(format!("item {}: {item} is not a \"HOST:PORT\" string", i + 1)),
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

    #[test]
    fn a_text_file_lists_one_worker_a_line_with_comments_and_blank_lines_skipped() {
        let text = "# the fleet\n198.18.0.10:7700\n\n  198.18.0.11:7700  # rack 2\n[::1]:7700\n";
        assert_eq!(parse(text).unwrap(), ["198.18.0.10:7700", "198.18.0.11:7700", "[::1]:7700"]);
    }

    #[test]
    fn terraforms_json_outputs_are_read_whole_or_as_the_workers_output() {
        let one_output = "[\n  \"198.18.0.10:7700\",\n  \"198.18.0.11:7700\"\n]\n";
        assert_eq!(parse(one_output).unwrap(), ["198.18.0.10:7700", "198.18.0.11:7700"]);
        let all_outputs = r#"{"token":{"sensitive":true,"type":"string","value":"x"},
            "workers":{"sensitive":false,"type":["list","string"],"value":["w1:7700","w2:7700"]}}"#;
        assert_eq!(parse(all_outputs).unwrap(), ["w1:7700", "w2:7700"]);
    }

    #[test]
    fn an_empty_or_malformed_file_says_what_is_wrong_and_where() {
        for (text, expect) in [
            ("", "lists no workers"),
            ("# nothing here\n\n", "lists no workers"),
            ("[]", "lists no workers"),
            ("w1:7700\nw2\n", "line 2: 'w2' is not HOST:PORT"),
            ("w1:99999", "line 1"),
            ("[\"w1:7700\", 7]", "item 2: 7 is not"),
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
        assert_eq!(expanded.unwrap(), ["a:0", "b:1", "c:2", "d:3"]);
        let missing = expand(&["@/nonexistent/fleet.txt".to_string()]).expect_err("a missing file");
        assert!(matches!(missing, CliError::Usage(_)));
        assert!(missing.to_string().starts_with("--workers @/nonexistent/fleet.txt: cannot read it"), "{missing}");
    }
}
