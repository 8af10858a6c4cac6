//! Turns command-line arguments into an engine plan, rejecting bad input with one clear line.

use std::io::Read;
use std::time::Duration;

use volley_engine::{
    EngineError, Load, MAX_BODY_BYTES, Mix, Order, Plan, Protocol, QuicCongestion, RequestSpec, Requests, Setting,
    Stage, Stop, Target, TlsOptions,
};

use crate::cli::{LoadArgs, QuicCongestionArg, TargetsFormatArg, TargetsOrderArg, WorkerArgs};
use crate::error::CliError;
use crate::fleet::{Access, Place};
use crate::workers_file::WorkerItem;
use crate::{scenario, source_addrs, targets};

pub(crate) fn build_plan(args: &LoadArgs) -> Result<Plan, CliError> {
    let protocol = match (args.http2, args.http3, args.parallel) {
        (true, true, _) => return Err(CliError::Usage("--http2 and --http3 cannot be used together".into())),
        (false, false, None) => Protocol::Http1,
        (false, false, Some(_)) => return Err(CliError::Usage("-p/--parallel needs --http2 or --http3".into())),
        _ if args.disable_keepalive => {
            return Err(CliError::Usage(
                "--disable-keepalive is for HTTP/1.1: HTTP/2 and HTTP/3 connections carry many requests".into(),
            ));
        }
        (true, false, p) => Protocol::Http2 { streams: parse_streams(p.unwrap_or(1))? },
        (false, true, p) => Protocol::Http3 { streams: parse_streams(p.unwrap_or(1))? },
    };
    let url = args.url.as_deref().map(Target::parse).transpose()?;
    // A file's requests, and the order they are taken in; clap keeps the two files apart.
    let mut feeders = Vec::new();
    let (target, mix) = match (&args.targets, &args.scenario) {
        (Some(path), _) => {
            let file = targets::read(path, targets_format(args.targets_format), url.as_ref())?;
            let order = match args.targets_order {
                TargetsOrderArg::InTurn => Order::InTurn,
                TargetsOrderArg::Random => Order::Random { seed: args.seed },
            };
            (file.origin, Some(Mix { requests: file.requests, order }))
        }
        (None, Some(path)) => {
            let file = scenario::read(path, url.as_ref(), args.max_feeder_bytes)?;
            let order = Order::Scenarios { scenarios: file.scenarios, seed: args.seed };
            feeders = file.feeders;
            (file.origin, Some(Mix { requests: file.requests, order }))
        }
        (None, None) => (url.ok_or_else(|| CliError::Usage("a target URL is required".into()))?, None),
    };
    if matches!(protocol, Protocol::Http3 { .. }) && !target.is_tls() {
        return Err(CliError::Usage(
            "--http3 needs an https:// URL: HTTP/3 runs over QUIC, which is always TLS".into(),
        ));
    }
    let quic_congestion = match (args.quic_congestion, protocol) {
        (None, _) => QuicCongestion::Loopback,
        (Some(_), Protocol::Http1 | Protocol::Http2 { .. }) => {
            return Err(CliError::Usage(
                "--quic-congestion is for HTTP/3: give --http3, or leave it out (TCP has the kernel's congestion control)"
                    .into(),
            ));
        }
        (Some(QuicCongestionArg::Loopback), Protocol::Http3 { .. }) => QuicCongestion::Loopback,
        (Some(QuicCongestionArg::Standard), Protocol::Http3 { .. }) => QuicCongestion::Standard,
    };
    let load = parse_load(args)?;
    let connections = connection_count(args.connections, &load)?;
    let stop = match (&args.duration, load.stages()) {
        // The run is the stages: -z and -n are refused beside them (clap), and -n's default goes.
        (_, stages) if !stages.is_empty() => Stop::Duration(
            stages.iter().try_fold(Duration::ZERO, |sum, s| sum.checked_add(s.duration)).unwrap_or(Duration::MAX),
        ),
        (Some(d), _) => Stop::Duration(parse_duration(d, "-z/--duration")?),
        (None, _) => Stop::Requests(args.requests),
    };
    let body = match &args.data {
        Some(d) => read_data(d)?,
        None => Vec::new(),
    };
    let method = match &args.method {
        Some(m) if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_!#$%&'*+.^`|~".contains(&b)) => {
            return Err(CliError::Usage(format!("invalid method '{m}'")));
        }
        Some(m) => m.clone(),
        None if args.data.is_some() => "POST".into(),
        None => "GET".into(),
    };
    let headers = args.headers.iter().map(|h| parse_header(h)).collect::<Result<Vec<_>, _>>()?;
    let mut tls = TlsOptions { insecure: args.insecure, extra_ca_pem: Vec::new() };
    if let Some(path) = &args.cacert {
        tls.extra_ca_pem = std::fs::read(path)
            .map_err(|e| CliError::File { path: format!("--cacert {}", path.display()), why: e.to_string() })?;
    }
    let requests = match mix {
        None => Requests::One(RequestSpec::new(&method, headers, body)),
        Some(mut mix) => {
            targets::add_headers(&mut mix.requests, &headers);
            Requests::Mix(mix)
        }
    };
    // Plan::new takes one request: a mix then takes its place.
    let mut plan = Plan::new(target, RequestSpec::new("GET", Vec::new(), Vec::new()), connections, stop);
    plan.requests = requests;
    plan.feeders = feeders;
    plan.protocol = protocol;
    plan.load = load;
    // Decided here for a local run; a distributed run's controller decides each worker's from
    // -t or the cores that worker reports.
    plan.threads = plan.threads_for(local_threads(args.threads));
    plan.connect_timeout = parse_duration(&args.connect_timeout, "--connect-timeout")?;
    plan.request_timeout = Some(parse_duration(&args.timeout, "--timeout")?);
    plan.keepalive = !args.disable_keepalive;
    plan.tls = tls;
    plan.quic_congestion = quic_congestion;
    plan.engine = engine(args.engine)?;
    plan.max_hold = parse_hold(&args.max_hold)?;
    // Bounded by clap to MAX_KEPT_BODY_BYTES, well within usize.
    plan.kept_body_bytes = args.keep_body as usize;
    if let Some(text) = &args.warm_up {
        plan.warm_up = Some(parse_warm_up(text, &plan)?);
    }
    plan.source_addrs =
        source_addrs::parse(&args.source_addr).map_err(|why| CliError::Usage(format!("--source-addr: {why}")))?;
    check(&plan)?;
    if args.workers.is_empty() {
        check_local_source_addrs(&plan)?;
    }
    Ok(plan)
}

/// A local run's source addresses are this machine's, and of the family the target resolves
/// to: a usage error before any load, rather than every connection failing alike. (A worker
/// checks its own as its shard arrives.)
fn check_local_source_addrs(plan: &Plan) -> Result<(), CliError> {
    volley_engine::check_source_addrs(plan).map_err(|e| match e {
        EngineError::Target(e) => CliError::Target(e),
        EngineError::Invalid(e) => CliError::Usage(format!("--source-addr: {e}")),
        e => CliError::Usage(format!("--source-addr: {e}")),
    })
}

/// The engine's check of a plan, the one place its limits live, its complaint named by the
/// flag it concerns.
pub(crate) fn check(plan: &Plan) -> Result<(), CliError> {
    plan.validate().map_err(|e| {
        let flag = match e.setting {
            Setting::Connections => "-c/--connections",
            Setting::Threads => "-t/--threads",
            Setting::Requests => "-n/--requests",
            Setting::Duration => "-z/--duration",
            Setting::ConnectTimeout => "--connect-timeout",
            Setting::RequestTimeout => "--timeout",
            Setting::Body => "-d",
            Setting::Streams => "-p/--parallel",
            Setting::Rate => "--rate",
            Setting::Stages => "--stages",
            Setting::WarmUp => "--warm-up",
            Setting::Hold => "--max-hold",
            Setting::KeptBody => "--keep-body",
            Setting::Targets => "--targets",
            Setting::Scenario | Setting::Feeders => "--scenario",
            Setting::SourceAddrs => "--source-addr",
        };
        CliError::Usage(format!("{flag}: {e}"))
    })
}

/// `--targets-format`: a format, or None to tell by the file's first line.
fn targets_format(asked: TargetsFormatArg) -> Option<targets::Format> {
    match asked {
        TargetsFormatArg::Auto => None,
        TargetsFormatArg::Http => Some(targets::Format::Http),
        TargetsFormatArg::Json => Some(targets::Format::Json),
    }
}

/// `-t`, or this machine's physical cores: the threads a local run asks for.
pub(crate) fn local_threads(asked: Option<u64>) -> usize {
    asked.map_or_else(volley_worker::physical_cores, |t| usize::try_from(t).unwrap_or(usize::MAX))
}

/// `--rate` and `--stages` as the load they describe: with a rate, stages ramp it (from
/// --rate, which may then be 0); without one, they ramp the number of open connections.
fn parse_load(args: &LoadArgs) -> Result<Load, CliError> {
    Ok(match (args.rate.as_deref(), args.stages.as_deref()) {
        (None, None) => Load::closed(),
        (None, Some(stages)) => Load::ramp(parse_stages(stages, StageUnit::Connections)?),
        (Some(rate), None) => Load::rate(parse_whole_rate(rate, "--rate")?),
        (Some(rate), Some(stages)) => {
            let from = if rate.trim() == "0" { 0 } else { parse_whole_rate(rate, "--rate")? };
            Load::staged_rate(from, parse_stages(stages, StageUnit::Rate)?)
        }
    })
}

/// `--warm-up D`: whole seconds (each second of the series is then wholly warm-up or wholly
/// measured), shorter than the run, and for `-n` at least as many requests as can be in flight
/// when it ends, since those count toward `-n`.
fn parse_warm_up(text: &str, plan: &Plan) -> Result<Duration, CliError> {
    let bad = |why: String| CliError::Usage(format!("--warm-up: '{text}' {why}"));
    let t = text.trim();
    if t.starts_with('-') {
        return Err(bad("is negative: give a whole number of seconds, at least 1s".into()));
    }
    if t.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Err(bad("is zero: leave --warm-up out for none".into()));
    }
    let warm_up = parse_duration(text, "--warm-up")?;
    if warm_up.subsec_nanos() != 0 {
        return Err(bad("is not a whole number of seconds: the per-second series marks whole seconds".into()));
    }
    match plan.stop {
        Stop::Duration(d) if warm_up >= d => {
            Err(bad(format!("is not shorter than the run ({}s): nothing would be measured", d.as_secs_f64())))
        }
        Stop::Requests(n) => {
            let streams = match plan.protocol {
                Protocol::Http1 => 1,
                Protocol::Http2 { streams } | Protocol::Http3 { streams } => u64::from(streams),
            };
            let slots = (plan.connections as u64).saturating_mul(streams);
            if n < slots {
                return Err(CliError::Usage(format!(
                    "--warm-up with -n {n}: -n counts the requests after the warm-up, among them the up to {slots} in flight when it ends (-c × -p): give -n of at least {slots}"
                )));
            }
            Ok(warm_up)
        }
        Stop::Duration(_) => Ok(warm_up),
    }
}

/// What a stage's target counts: requests per second (with --rate) or open connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StageUnit {
    Rate,
    Connections,
}

impl StageUnit {
    /// How a stage is written, and what its target is called and counted in.
    fn form(self) -> &'static str {
        match self {
            StageUnit::Rate => "DURATION:RATE",
            StageUnit::Connections => "DURATION:CONNECTIONS",
        }
    }

    fn what(self) -> &'static str {
        match self {
            StageUnit::Rate => "rate",
            StageUnit::Connections => "connection count",
        }
    }

    fn counted_in(self) -> &'static str {
        match self {
            StageUnit::Rate => "requests per second",
            StageUnit::Connections => "connections",
        }
    }
}

/// `-c`, by default 50. With a ramp of the connection count, the most it may open: by default
/// its largest stage; a stage above an explicit -c is refused.
fn connection_count(asked: Option<u64>, load: &Load) -> Result<usize, CliError> {
    let peak = match load {
        Load::Closed { ramp, .. } if !ramp.is_empty() => ramp.iter().map(|s| s.target).max(),
        _ => None,
    };
    let connections = match (asked, peak) {
        (Some(c), Some(peak)) if peak > c && c > 0 => {
            // The first stage above it is named.
            let (n, target) =
                load.stages().iter().zip(1..).find(|(s, _)| s.target > c).map_or((1, peak), |(s, n)| (n, s.target));
            return Err(CliError::Usage(format!(
                "--stages: stage {n} ramps to {target} connections, more than -c {c}: raise -c or leave it out (it then defaults to the largest stage)"
            )));
        }
        (Some(c), _) => c,
        // A ramp that never opens one is the stages' error, not the connections'.
        (None, Some(peak)) => peak.max(1),
        (None, None) => 50,
    };
    Ok(usize::try_from(connections).unwrap_or(usize::MAX))
}

/// `--stages 30s:1000,60s:5000,30s:0`: each stage a duration and the target it ramps to, a rate
/// or a connection count.
fn parse_stages(text: &str, unit: StageUnit) -> Result<Vec<Stage>, CliError> {
    let bad = |why: String| CliError::Usage(format!("--stages: {why}"));
    let form = unit.form();
    if text.trim().is_empty() {
        return Err(bad(format!("the list is empty: give {form},... such as 30s:1000,60s:5000")));
    }
    let items: Vec<&str> = text.split(',').map(str::trim).collect();
    let mut stages = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let n = i + 1;
        let Some((duration, target)) = item.split_once(':') else {
            return Err(bad(format!("stage {n} '{item}' is not {form} (such as 30s:1000)")));
        };
        let (duration, target) = (duration.trim(), target.trim());
        // A stage of no time is refused here too ("duration must be more than zero").
        let duration = parse_duration(duration, &format!("--stages: stage {n} '{item}'"))?;
        let (what, counted_in) = (unit.what(), unit.counted_in());
        let target = match target.parse::<u64>() {
            Ok(r) => r,
            Err(_) if target.starts_with('-') => {
                return Err(bad(format!("stage {n} '{item}': the {what} is negative; give {counted_in}, 0 or more")));
            }
            Err(_) => {
                return Err(bad(format!("stage {n} '{item}': '{target}' is not a whole number of {counted_in}")));
            }
        };
        stages.push(Stage { duration, target });
    }
    Ok(stages)
}

/// `--rate R` (and find-max's rates): whole requests per second, so that every worker's and
/// thread's share is whole and the shares add up to exactly R.
pub(crate) fn parse_whole_rate(text: &str, flag: &str) -> Result<u64, CliError> {
    let t = text.trim();
    let bad = |why: &str| CliError::Usage(format!("{flag}: '{text}' {why}"));
    if t.starts_with('-') && t[1..].trim().parse::<f64>().is_ok() {
        return Err(bad("is negative: give requests per second, at least 1"));
    }
    match t.parse::<u64>() {
        Ok(0) => Err(bad("is zero: give requests per second, at least 1")),
        Ok(r) => Ok(r),
        Err(_) if t.parse::<f64>().is_ok_and(f64::is_finite) => {
            Err(bad("is not a whole number: give whole requests per second"))
        }
        Err(_) => Err(bad("is not a number of requests per second")),
    }
}

/// What one connection (or HTTP/2 stream) is assumed to carry at most, to call a rate far
/// beyond `-c`: a request every 100 µs, quicker than a round trip through a real server on
/// loopback (volley's own 73,000 req/s over 50 connections against nginx is 1,500 a second
/// each).
const MOST_PER_SLOT: u64 = 10_000;

/// A warning, before the run, when `--rate` asks more of each connection (or stream) than one
/// can carry: its requests would mostly wait for a free one. The run still goes ahead, and its
/// report says how many waited.
pub(crate) fn rate_warning(plan: &Plan) -> Option<String> {
    let rate = plan.peak_rate()?;
    let streams = match plan.protocol {
        Protocol::Http1 => 1,
        Protocol::Http2 { streams } | Protocol::Http3 { streams } => u64::from(streams),
    };
    let slots = (plan.connections as u64).saturating_mul(streams);
    if rate <= slots.saturating_mul(MOST_PER_SLOT) {
        return None;
    }
    let what = if streams > 1 { "connections × streams" } else { "connections" };
    Some(format!(
        "--rate {rate} asks each of the {slots} {what} for over {MOST_PER_SLOT} requests a second (one every 100 µs, quicker than a round trip to a real server): most requests will wait for a free connection; raise -c"
    ))
}

/// `--max-hold`: 0, or a duration up to the engine's limit.
fn parse_hold(text: &str) -> Result<Duration, CliError> {
    if text.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text, "--max-hold")
}

/// `-p`: a count of streams per connection (the engine's check bounds it).
fn parse_streams(p: u64) -> Result<u32, CliError> {
    u32::try_from(p).map_err(|_| CliError::Usage(format!("-p/--parallel: {p} is not a count of streams")))
}

/// The worker daemon's settings; the token comes from --token-file or VOLLEY_TOKEN.
pub(crate) fn worker_config(args: &WorkerArgs) -> Result<volley_worker::WorkerConfig, CliError> {
    let mut config = volley_worker::WorkerConfig::new(args.listen);
    config.token = token(args.token_file.as_deref())?;
    config.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(volley_worker::TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    config.client_ca = args.client_ca.clone();
    config.allow_targets = args.allow_target.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
    config.name = args.name.clone();
    if let Some(addr) = args.prometheus {
        let exporter = volley_worker::metrics::Exporter::start(addr).map_err(|e| CliError::Usage(e.to_string()))?;
        config.metrics = Some(std::sync::Arc::new(exporter));
    }
    Ok(config)
}

/// `--workers a:7700,b:7700`: each a distinct HOST:PORT, with the source addresses a workers
/// file gives it.
pub(crate) fn worker_places(workers: &[WorkerItem]) -> Result<Vec<Place>, CliError> {
    let mut seen: Vec<(&WorkerItem, Vec<std::net::SocketAddr>)> = Vec::new();
    for worker in workers {
        let w = worker.address.trim();
        let port_ok = w.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(CliError::Usage(format!("--workers: '{w}' is not HOST:PORT")));
        }
        // One worker by two spellings (127.0.0.1:7700 and localhost:7700) would be asked for
        // two shards and refuse the second as busy: compare where the names lead. A name that
        // does not resolve is left to fail as a worker that cannot be reached.
        let addresses: Vec<std::net::SocketAddr> =
            std::net::ToSocketAddrs::to_socket_addrs(w).map(Iterator::collect).unwrap_or_default();
        let twice = seen
            .iter()
            .find(|(other, theirs)| other.address.trim() == w || theirs.iter().any(|a| addresses.contains(a)));
        if let Some((other, _)) = twice {
            let other = other.address.trim();
            let why =
                if other == w { format!("{w} is listed twice") } else { format!("{other} and {w} are one worker") };
            return Err(CliError::Usage(format!("--workers: {why} (a worker runs one shard at a time)")));
        }
        seen.push((worker, addresses));
    }
    Ok(seen
        .into_iter()
        .map(|(w, _)| Place::Remote { address: w.address.trim().to_string(), source_addrs: w.source_addrs.clone() })
        .collect())
}

/// How the controller reaches its workers: the token and the TLS files.
pub(crate) fn worker_access(args: &LoadArgs) -> Result<Access, CliError> {
    let read = |flag: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| CliError::File { path: format!("{flag} {}", path.display()), why: e.to_string() })
    };
    let mut access = Access { token: token(args.token_file.as_deref())?, ..Default::default() };
    if let Some(ca) = &args.worker_ca {
        access.ca_pem = Some(read("--worker-ca", ca)?);
    }
    if let (Some(cert), Some(key)) = (&args.worker_cert, &args.worker_key) {
        access.identity = Some((read("--worker-cert", cert)?, read("--worker-key", key)?));
    }
    Ok(access)
}

/// The engine: `--engine`, else VOLLEY_ENGINE (for a container's environment), else auto.
fn engine(flag: Option<crate::cli::EngineArg>) -> Result<volley_engine::EngineChoice, CliError> {
    if let Some(flag) = flag {
        return Ok(flag.into());
    }
    match std::env::var("VOLLEY_ENGINE") {
        Ok(name) if !name.is_empty() => volley_engine::EngineChoice::parse(&name).ok_or_else(|| {
            CliError::Usage(format!(
                "VOLLEY_ENGINE='{name}': give one of {}, or leave it unset",
                volley_engine::EngineChoice::NAMES.join(", ")
            ))
        }),
        _ => Ok(volley_engine::EngineChoice::Auto),
    }
}

/// The bearer token: the file's contents (trimmed), else VOLLEY_TOKEN, else none.
fn token(file: Option<&std::path::Path>) -> Result<Option<String>, CliError> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|e| CliError::File { path: format!("--token-file {}", path.display()), why: e.to_string() })?,
        None => match std::env::var("VOLLEY_TOKEN") {
            Ok(t) => t,
            Err(_) => return Ok(None),
        },
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(CliError::Usage("the token is empty (--token-file or VOLLEY_TOKEN)".into()));
    }
    Ok(Some(token.to_string()))
}

/// A duration flag's value (`crate::duration`), an error naming the flag.
pub(crate) fn parse_duration(text: &str, flag: &str) -> Result<Duration, CliError> {
    crate::duration::parse(text).map_err(|e| CliError::Usage(format!("{flag}: {e}")))
}

fn parse_header(h: &str) -> Result<(String, String), CliError> {
    let bad = |why: &str| CliError::Usage(format!("-H '{h}': {why}"));
    let (name, value) = h.split_once(':').ok_or_else(|| bad("expected 'Name: Value'"))?;
    let name = name.trim();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(bad("invalid header name"));
    }
    let value = value.trim();
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(bad("header values cannot contain CR, LF or NUL"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// curl's -d: literal text, `@file`, or `@-` for stdin; CR and LF are stripped from files. At
/// most [`MAX_BODY_BYTES`] (counted as sent, after stripping), read no further than that.
fn read_data(d: &str) -> Result<Vec<u8>, CliError> {
    let Some(path) = d.strip_prefix('@') else {
        // Its size is judged with the plan's other limits (`check`).
        return Ok(d.as_bytes().to_vec());
    };
    let (what, read) = if path == "-" {
        ("-d @- (stdin)".to_string(), read_stripped(std::io::stdin().lock()))
    } else {
        let what = format!("-d @{path}");
        match std::fs::File::open(path) {
            Ok(file) => (what, read_stripped(file)),
            Err(e) => return Err(CliError::File { path: what, why: e.to_string() }),
        }
    };
    match read {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => Err(body_too_large(&what)),
        Err(e) => Err(CliError::File { path: what, why: e.to_string() }),
    }
}

/// Everything `from` gives without CR and LF; None once that exceeds [`MAX_BODY_BYTES`].
fn read_stripped(mut from: impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) => return Ok(Some(bytes)),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        bytes.extend(chunk[..n].iter().filter(|&&b| b != b'\r' && b != b'\n'));
        if bytes.len() > MAX_BODY_BYTES {
            return Ok(None);
        }
    }
}

fn body_too_large(what: &str) -> CliError {
    CliError::Usage(format!("{what}: the body is larger than {} MiB, the most volley sends", MAX_BODY_BYTES >> 20))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_in_every_form_the_help_shows() {
        assert_eq!(parse_duration("10s", "x").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1m30s", "x").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms", "x").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2", "x").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1h", "x").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "10x", "-1s", "0s", "1.2.3s", "ms", "inf"] {
            assert!(parse_duration(bad, "x").is_err(), "{bad}");
        }
        assert_eq!(parse_duration("8760h", "x").unwrap(), volley_engine::MAX_DURATION);
        for too_long in
            ["1e30", "1e19", "8760h1s", "31536001", "99999999999999999999h", "9000000000000000000s9000000000000000000s"]
        {
            let e = parse_duration(too_long, "--timeout").unwrap_err().to_string();
            assert!(e.contains("--timeout") && e.contains("365 days"), "{too_long}: {e}");
        }
    }

    #[test]
    fn the_body_limit_counts_bytes_as_sent_after_cr_and_lf_are_stripped() {
        let mut at_limit = vec![b'x'; MAX_BODY_BYTES];
        at_limit.extend(b"\r\n".repeat(1000));
        let read = read_stripped(std::io::Cursor::new(at_limit)).unwrap();
        assert_eq!(read.map(|b| b.len()), Some(MAX_BODY_BYTES));
        assert!(read_stripped(std::io::Cursor::new(vec![b'x'; MAX_BODY_BYTES + 1])).unwrap().is_none());
    }

    #[test]
    fn limits_are_the_engines_named_by_the_flag_they_concern() {
        use clap::Parser;
        use volley_engine::{MAX_CONNECTIONS, MAX_THREADS};
        let plan = |flags: &[&str]| {
            let args = [&["volley"], flags, &["http://127.0.0.1:1/"]].concat();
            build_plan(&crate::cli::Cli::try_parse_from(args).expect("parses").load)
        };
        let most = plan(&["-c", "1000000", "-t", "1024"]).expect("at the limits");
        assert_eq!((most.connections, most.threads), (MAX_CONNECTIONS, MAX_THREADS));
        assert_eq!(plan(&["-c", "10", "-t", "64"]).expect("-t above -c").threads, 10, "a thread needs a connection");
        for (flags, named) in [
            (&["-c", "1000001"][..], "-c/--connections: 1000001 connections is more than the 1000000 a run may have"),
            (&["-c", "0"][..], "-c/--connections: connections must be at least 1"),
            (&["-c", "2000", "-t", "1025"][..], "-t/--threads: 1025 threads is more than the 1024 a run may have"),
            (&["-t", "0"][..], "-t/--threads: threads must be at least 1"),
            (&["-n", "0"][..], "-n/--requests: requests must be at least 1"),
            (&["--http2", "-p", "65537"][..], "-p/--parallel: 65537 streams per connection is more than the 65536"),
            (&["--max-hold", "101ms"][..], "--max-hold: a hold of 101ms is more than the 100ms a run may ask"),
            (&["--rate", "1000000001"][..], "--rate: a rate of 1000000001 requests per second is more than the"),
            (&["-z", "10s", "--warm-up", "3000h"][..], "--warm-up:"),
        ] {
            let err = plan(flags).expect_err("refused").to_string();
            assert!(err.starts_with(named), "{flags:?}: {err}");
        }
    }

    #[test]
    fn a_rate_is_whole_requests_per_second_and_more_than_zero() {
        assert_eq!(parse_whole_rate("1000", "--rate").unwrap(), 1000);
        assert_eq!(parse_whole_rate(" 7 ", "--rate").unwrap(), 7);
        for (bad, why) in [
            ("0", "is zero"),
            ("-5", "is negative"),
            ("-0.5", "is negative"),
            ("1.5", "not a whole number"),
            ("abc", "not a number"),
            ("", "not a number"),
            ("1e400", "not a number"),
        ] {
            let err = parse_whole_rate(bad, "--rate").expect_err(bad).to_string();
            assert!(err.starts_with("--rate:") && err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn a_rate_far_beyond_what_the_connections_carry_is_warned_about() {
        let mut plan = Plan::new(
            Target::parse("http://127.0.0.1:1/").unwrap(),
            RequestSpec::new("GET", vec![], vec![]),
            10,
            Stop::Requests(10),
        );
        plan.load = Load::rate(100_000);
        assert_eq!(rate_warning(&plan), None, "10,000 a second per connection is within reach");
        plan.load = Load::rate(100_001);
        assert!(rate_warning(&plan).is_some_and(|w| w.contains("raise -c")));
        plan.protocol = Protocol::Http2 { streams: 2 };
        assert_eq!(rate_warning(&plan), None, "streams carry requests too");
    }

    #[test]
    fn stages_are_durations_and_the_rates_they_ramp_to() {
        let stages = parse_stages("30s:1000, 1m:5000,500ms:0", StageUnit::Rate).unwrap();
        let want = [(30_000, 1000), (60_000, 5000), (500, 0)]
            .map(|(ms, target)| Stage { duration: Duration::from_millis(ms), target });
        assert_eq!(stages, want);
        for (bad, why) in [
            ("", "the list is empty"),
            ("30s", "is not DURATION:RATE"),
            ("x:1", "invalid duration"),
            ("30s:-1", "negative"),
            ("30s:1.5", "not a whole number"),
            ("0s:100", "more than zero"),
            ("10s:100,,", "is not DURATION:RATE"),
            ("9000h:1", "365 days"),
        ] {
            let err = parse_stages(bad, StageUnit::Rate).expect_err(bad).to_string();
            assert!(err.starts_with("--stages") && err.contains(why), "{bad}: {err}");
        }
        // The limits of a plan's stages are the engine's, named by the flag.
        use clap::Parser;
        let plan = |flags: &[&str]| {
            let args = [&["volley"], flags, &["http://127.0.0.1:1/"]].concat();
            build_plan(&crate::cli::Cli::try_parse_from(args).expect("parses").load)
        };
        let many = vec!["1s:1"; volley_engine::MAX_STAGES + 1].join(",");
        for (flags, why) in [
            (vec!["--rate", "1", "--stages", &many], "101 stages is more than the 100 a run may have"),
            (vec!["--rate", "1", "--stages", "5000h:1,5000h:1"], "365 days in all"),
            (vec!["--rate", "1", "--stages", "1s:1000000001"], "more than the 1000000000 a run may ask"),
            (vec!["--rate", "0", "--stages", "1s:0"], "every rate is 0"),
        ] {
            let err = plan(&flags).expect_err(why).to_string();
            assert!(err.starts_with("--stages: ") && err.contains(why), "{flags:?}: {err}");
        }
    }

    #[test]
    fn without_a_rate_stages_are_connection_counts_and_c_is_their_most() {
        use clap::Parser;
        let plan = |flags: &[&str]| {
            let args = [&["volley"], flags, &["http://127.0.0.1:1/"]].concat();
            build_plan(&crate::cli::Cli::try_parse_from(args).expect("parses").load)
        };
        let ramp = plan(&["--stages", "1s:8,2s:30,1s:0", "-t", "64"]).expect("a ramp");
        assert!(matches!(ramp.load, Load::Closed { .. }) && !ramp.load.stages().is_empty());
        assert_eq!(ramp.connections, 30, "-c defaults to the largest stage");
        assert_eq!(ramp.threads, 30, "threads capped at the connections");
        assert_eq!(ramp.stop, Stop::Duration(Duration::from_secs(4)));
        assert_eq!(plan(&["--stages", "1s:8", "-c", "20"]).expect("within -c").connections, 20);
        assert_eq!(plan(&["--stages", "1s:20", "-c", "20"]).expect("at -c").connections, 20);
        assert_eq!(plan(&[]).expect("no stages").connections, 50, "the default -c is unchanged");
        let with_rate = plan(&["--rate", "0", "--stages", "1s:800"]).expect("a rate's ramp");
        assert_eq!((with_rate.connections, with_rate.load.is_open()), (50, true), "800 is a rate here");
        for (flags, says) in [
            (&["--stages", "1s:8,1s:21", "-c", "20"][..], "--stages: stage 2 ramps to 21 connections, more than -c 20"),
            (&["--stages", "1s:0"][..], "every connection count is 0"),
            (&["--stages", "1s:x"][..], "'x' is not a whole number of connections"),
            (&["--stages", "1s:1000001"][..], "1000001 connections is more than the 1000000"),
            (&["--stages", "1s:5", "-c", "0"][..], "-c/--connections: connections must be at least 1"),
        ] {
            let err = plan(flags).expect_err("refused").to_string();
            assert!(err.contains(says), "{flags:?}: {err}");
        }
    }

    /// `volley FLAGS` as the command line would run it (no URL added).
    fn plan_of(flags: &[&str]) -> Result<Plan, String> {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([&["volley"], flags].concat()).map_err(|e| e.to_string())?;
        build_plan(&cli.load).map_err(|e| e.to_string())
    }

    /// A targets file of `text` in a directory of its own, and the file's path.
    fn targets_file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("targets.http");
        std::fs::write(&path, text).expect("a targets file");
        (dir, path.display().to_string())
    }

    #[test]
    fn a_targets_file_is_a_mix_to_its_origin_with_the_command_lines_headers_and_order() {
        let (_dir, file) =
            targets_file("GET http://127.0.0.1:8080/a?x=1\nAccept: text/plain\n\nPOST http://127.0.0.1:8080/b\n");
        let plan =
            plan_of(&["--targets", &file, "-H", "accept: */*", "-H", "X-Run: 1", "-c", "4", "-t", "2", "--http2"])
                .expect("a plan");
        assert_eq!(plan.target.to_string(), "http://127.0.0.1:8080/", "the origin, at /");
        assert_eq!((plan.connections, plan.threads, plan.protocol), (4, 2, Protocol::Http2 { streams: 1 }));
        let mix = plan.requests.mix().expect("a mix");
        assert_eq!(mix.order, Order::InTurn);
        let request = |name: &str, method: &str, path: &str, headers: &[(&str, &str)]| volley_engine::NamedRequest {
            name: name.into(),
            path_and_query: path.into(),
            spec: RequestSpec::new(
                method,
                headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
                vec![],
            ),
            templated: false,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: false,
            follow_redirects: 0,
        };
        assert_eq!(
            mix.requests,
            [
                request("GET /a", "GET", "/a?x=1", &[("Accept", "text/plain"), ("X-Run", "1")]),
                request("POST /b", "POST", "/b", &[("accept", "*/*"), ("X-Run", "1")]),
            ]
        );
        let random = plan_of(&["--targets", &file, "--targets-order", "random", "--seed", "7"]).expect("a plan");
        assert_eq!(random.requests.mix().map(|m| m.order.clone()), Some(Order::Random { seed: 7 }));
        let unseeded = plan_of(&["--targets", &file, "--targets-order", "random"]).expect("a plan");
        assert_eq!(unseeded.requests.mix().map(|m| m.order.clone()), Some(Order::Random { seed: 0 }));
        let given = plan_of(&["--targets", &file, "http://127.0.0.1:8080"]).expect("the URL as the origin");
        assert_eq!(given.target.to_string(), "http://127.0.0.1:8080/");
    }

    #[test]
    fn with_a_targets_file_the_method_and_body_are_the_files_and_its_flags_need_one() {
        let (_dir, file) = targets_file("GET http://127.0.0.1:8080/\n");
        for (flags, says) in [
            (vec!["--targets", &file, "-m", "POST"], "cannot be used with"),
            (vec!["--targets", &file, "-d", "x"], "cannot be used with"),
            (vec!["--targets", &file, "--data", "@body"], "cannot be used with"),
            (vec!["--targets-order", "random", "http://a/"], "--targets"),
            (vec!["--targets-format", "json", "http://a/"], "--targets"),
            (vec![], "required"),
            (vec!["--targets", &file, "--http3"], "--http3 needs an https:// URL"),
        ] {
            let e = plan_of(&flags).expect_err("refused");
            assert!(e.contains(says), "{flags:?}: {e}");
        }
        assert!(plan_of(&["--seed", "3", "http://a/"]).is_ok(), "a seed is the run's, with or without a mix");
    }

    #[test]
    fn a_mix_beyond_the_engines_limits_is_refused_naming_targets() {
        let text: String = (0..=volley_engine::MAX_NAMES).map(|n| format!("GET http://a/{n}\n\n")).collect();
        let (_dir, file) = targets_file(&text);
        let e = plan_of(&["--targets", &file]).expect_err("too many names");
        assert_eq!(e, "--targets: 1001 names is more than the 1000 a run may have");
    }

    /// A scenario file of `text` in a directory of its own, and the file's path.
    fn scenario_file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("shop.toml");
        std::fs::write(&path, text).expect("a scenario file");
        (dir, path.display().to_string())
    }

    const SHOP: &str = r#"origin = "http://127.0.0.1:8080"
[[scenario]]
name = "browse"
weight = 3
[[scenario.step]]
path = "/a?x=1"
headers = { Accept = "text/plain" }
[[scenario.step]]
path = "/b"
[[scenario]]
name = "buy"
[[scenario.step]]
method = "POST"
path = "/cart"
"#;

    #[test]
    fn a_scenario_file_is_a_mix_of_scenarios_seeded_with_the_command_lines_headers() {
        let (_dir, file) = scenario_file(SHOP);
        let plan = plan_of(&["--scenario", &file, "-H", "accept: */*", "-H", "X-Run: 1", "-n", "30", "--seed", "9"])
            .expect("a plan");
        assert_eq!(plan.target.to_string(), "http://127.0.0.1:8080/", "the origin, at /");
        assert_eq!(plan.stop, Stop::Requests(30), "-n counts iterations; the engine knows it from the order");
        let mix = plan.requests.mix().expect("a mix");
        let scenarios = vec![
            volley_engine::Scenario { name: "browse".into(), weight: 3, steps: 2, pacing: None },
            volley_engine::Scenario { name: "buy".into(), weight: 1, steps: 1, pacing: None },
        ];
        assert_eq!(mix.order, Order::Scenarios { scenarios: scenarios.clone(), seed: 9 });
        let request = |name: &str, method: &str, path: &str, headers: &[(&str, &str)]| volley_engine::NamedRequest {
            name: name.into(),
            path_and_query: path.into(),
            spec: RequestSpec::new(
                method,
                headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
                vec![],
            ),
            checks: vec![],
            extract: vec![],
            think: None,
            // A scenario's users keep cookies unless the file says otherwise.
            cookies: true,
            follow_redirects: 0,
            templated: true,
        };
        assert_eq!(
            mix.requests,
            [
                request("GET /a", "GET", "/a?x=1", &[("Accept", "text/plain"), ("X-Run", "1")]),
                request("GET /b", "GET", "/b", &[("accept", "*/*"), ("X-Run", "1")]),
                request("POST /cart", "POST", "/cart", &[("accept", "*/*"), ("X-Run", "1")]),
            ]
        );
        let unseeded = plan_of(&["--scenario", &file]).expect("a plan");
        assert_eq!(unseeded.requests.mix().map(|m| m.order.clone()), Some(Order::Scenarios { scenarios, seed: 0 }));
        let given = plan_of(&["--scenario", &file, "http://127.0.0.1:8080"]).expect("the URL as the origin");
        assert_eq!(given.target.to_string(), "http://127.0.0.1:8080/");
    }

    #[test]
    fn with_a_scenario_file_the_requests_are_the_files_and_the_other_ways_to_give_them_are_refused() {
        let (_dir, file) = scenario_file(SHOP);
        let (_targets_dir, targets) = targets_file("GET http://127.0.0.1:8080/\n");
        for (flags, says) in [
            (vec!["--scenario", &file, "-m", "POST"], "cannot be used with"),
            (vec!["--scenario", &file, "-d", "x"], "cannot be used with"),
            (vec!["--scenario", &file, "--data", "@body"], "cannot be used with"),
            (vec!["--scenario", &file, "--targets", &targets], "cannot be used with"),
            (vec!["--scenario", &file, "--targets-order", "random"], "cannot be used with"),
            (vec!["--scenario", &file, "--targets-format", "json"], "cannot be used with"),
            (vec!["--scenario", &file, "--http3"], "--http3 needs an https:// URL"),
            (
                vec!["--scenario", &file, "http://127.0.0.1:9"],
                "is not the origin of the command line's URL (http://127.0.0.1:9)",
            ),
        ] {
            let e = plan_of(&flags).expect_err("refused");
            assert!(e.contains(says), "{flags:?}: {e}");
        }
    }

    #[test]
    fn a_warm_up_with_a_count_of_iterations_of_several_steps_is_refused_for_now() {
        let (_dir, file) = scenario_file(SHOP);
        let e = plan_of(&["--scenario", &file, "--warm-up", "1s", "-n", "1000", "-c", "2"]).expect_err("refused");
        assert!(e.starts_with("--warm-up: a warm-up with a count of iterations of several steps"), "{e}");
        assert!(plan_of(&["--scenario", &file, "--warm-up", "1s", "-z", "3s"]).is_ok(), "with a duration it runs");
    }

    #[test]
    fn a_scenario_files_extractors_make_a_plan_the_engine_takes_with_their_variables() {
        let (_dir, file) = scenario_file(
            r#"origin = "http://127.0.0.1:8080"
[[scenario]]
name = "login"
[[scenario.step]]
path = "/login"
[[scenario.step.extract]]
var = "token"
json = "data.token"
[[scenario.step.extract]]
var = "id"
regex = 'id=(\d+)'
[[scenario.step.extract]]
var = "rid"
header = "X-Request-Id"
[[scenario.step.extract]]
var = "session"
cookie = "session"
[[scenario.step]]
path = "/users/{{id}}"
headers = { authorization = "Bearer {{token}}", cookie = "session={{session}}", x-request-id = "{{rid}}" }
"#,
        );
        let plan = plan_of(&["--scenario", &file]).expect("a plan");
        assert_eq!(plan.requests.variables(), ["token", "id", "rid", "session"]);
    }

    #[test]
    fn headers_need_a_name_and_a_colon() {
        assert_eq!(parse_header("X-A:  b c ").unwrap(), ("X-A".into(), "b c".into()));
        assert!(parse_header("nocolon").is_err());
        assert!(parse_header(": v").is_err());
        assert!(parse_header("a b: v").is_err());
    }
}
