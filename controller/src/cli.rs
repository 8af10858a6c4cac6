//! The command line: `volley [OPTIONS] URL`, `volley worker`, `volley merge`, `volley report`,
//! `volley serve`, `volley demo`, `volley find-max`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "volley",
    version,
    about = "A fast io_uring HTTP load generator",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub load: LoadArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the built-in target server (HTTP/1.1 and h2c on one port) until Ctrl-C.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Serve HTTPS (HTTP/1.1 and HTTP/2) on TCP and HTTP/3 on UDP at the same port, with a
        /// self-signed certificate made at start (clients need -k).
        #[arg(long)]
        http3: bool,
    },
    /// Start the built-in server and two workers on loopback ports and run a short distributed
    /// load test against it.
    Demo,
    /// K simulated workers in one process, for measuring a controller (bench/fleet-scale.sh).
    #[command(hide = true)]
    SimFleet(crate::sim_fleet::SimFleetArgs),
    /// Run the worker daemon: a controller (`volley --workers`) sends it its share of the load.
    Worker(WorkerArgs),
    /// Compare saved JSON reports: OLD against NEW, each one report or several separated by
    /// commas (compared by their medians).
    Compare {
        /// The baseline: a.json, or a1.json,a2.json,a3.json.
        #[arg(value_delimiter = ',', num_args = 1)]
        old: Vec<PathBuf>,
        /// The run to judge, likewise.
        #[arg(value_delimiter = ',', num_args = 1)]
        new: Vec<PathBuf>,
        /// Exit 4 when a metric regressed by more than this percent.
        #[arg(long, value_name = "PERCENT")]
        max_regression: Option<String>,
        /// Print the comparison as JSON.
        #[arg(short = 'j', long)]
        json: bool,
    },
    /// Merge saved JSON reports (-j) into one report, using their histograms.
    Merge {
        /// JSON reports written by `volley -j`.
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// Print the merged report as JSON.
        #[arg(short = 'j', long)]
        json: bool,
    },
    /// Find the highest rate a target holds: open-model steps at a rate, doubling from --start
    /// while every --slo and the cadence hold, then bisecting; prints the table of steps.
    FindMax(Box<FindMaxArgs>),
    /// Write a saved JSON report (-j, -o json:FILE) as one self-contained HTML page with charts.
    Report {
        /// A JSON report written by `volley -j` or `-o json:FILE`.
        report: PathBuf,
        /// The HTML file to write (html:FILE works too) [default: stdout].
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct WorkerArgs {
    /// Address to listen on for controllers. Anything but loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,
    /// File holding the bearer token controllers must present (or set VOLLEY_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve gRPC over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require controllers to present a client certificate signed by this CA (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
    /// Only load these targets: CIDRs, addresses or host names; repeatable or comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub allow_target: Vec<String>,
    /// The name this worker reports [default: the host name].
    #[arg(long)]
    pub name: Option<String>,
    /// Serve this worker's runs as OpenMetrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<SocketAddr>,
}

/// `--quic-congestion`'s choices, as the engine's `QuicCongestion`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum QuicCongestionArg {
    Loopback,
    Standard,
}

/// `--engine`'s choices, as the engine's `EngineChoice`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum EngineArg {
    /// io_uring where it can be set up, else epoll (said on stderr).
    Auto,
    IoUring,
    Epoll,
}

impl From<EngineArg> for volley_engine::EngineChoice {
    fn from(arg: EngineArg) -> Self {
        match arg {
            EngineArg::Auto => volley_engine::EngineChoice::Auto,
            EngineArg::IoUring => volley_engine::EngineChoice::IoUring,
            EngineArg::Epoll => volley_engine::EngineChoice::Epoll,
        }
    }
}

/// `--targets-format`'s choices.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum TargetsFormatArg {
    /// JSON lines if the first line that is neither blank nor a comment starts with `{`.
    Auto,
    /// vegeta's http format: METHOD URL, header lines, @BODYFILE, a blank line.
    Http,
    /// One JSON object a line.
    Json,
}

/// `--targets-order`'s choices, as the engine's `Order`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum TargetsOrderArg {
    /// Each connection walks the list in turn, starting at its own place in it.
    InTurn,
    /// Each request drawn at random, from a generator seeded by --seed.
    Random,
}

#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// Target URL, e.g. http://127.0.0.1:8080/; with --targets or --scenario, the origin of the
    /// file's requests (then it may be left out if the file gives one).
    #[arg(required_unless_present_any = ["targets", "scenario"])]
    pub url: Option<String>,
    /// Send the requests a targets file lists, each with statistics under its name, instead
    /// of one request to URL: vegeta's http format (METHOD URL, headers, @BODYFILE; `# name:
    /// NAME` above names one) or JSON lines ({"method","url","header","body","name"}). One
    /// origin a run; -H adds headers to every target.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["method", "data"])]
    pub targets: Option<PathBuf>,
    /// The targets file's format.
    #[arg(long, value_name = "FORMAT", default_value = "auto", requires = "targets")]
    pub targets_format: TargetsFormatArg,
    /// Which target each request is: in-turn or random.
    #[arg(long, value_name = "ORDER", default_value = "in-turn", requires = "targets")]
    pub targets_order: TargetsOrderArg,
    /// Run the weighted scenarios of a TOML file instead of one request to URL: each connection
    /// draws a scenario by weight (seeded by --seed) and sends its steps in order, then draws
    /// again. Each step has statistics under its name. -n and --rate count iterations (one pass
    /// of a scenario's steps), not requests. One origin a run; -H adds headers to every step.
    // The targets file's flags named too: clap excuses their `requires = "targets"` once
    // --targets is ruled out by a conflict, and would let them pass unused.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["targets", "targets_format", "targets_order", "method", "data"])]
    pub scenario: Option<PathBuf>,
    /// The seed of every random choice of the run (--targets-order random's, --scenario's draw
    /// of scenarios): the same seed makes the same choices.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    /// The most bytes of data a scenario file's feeders may hold together (each worker holds
    /// its rows in memory, once) [default: 1 GiB].
    #[arg(long, value_name = "BYTES", default_value_t = volley_engine::DEFAULT_MAX_FEEDER_BYTES, requires = "scenario", value_parser = clap::value_parser!(u64).range(1..=volley_engine::MAX_TABLE_BYTES))]
    pub max_feeder_bytes: u64,
    /// How much of a response's body a scenario's checks and extractors see (what is beyond is
    /// counted, not kept); each response of such a step may hold this much while it is in
    /// flight [default: 65536, 64 KiB; at most 16 MiB].
    #[arg(long, value_name = "BYTES", default_value_t = volley_engine::KEPT_BODY_BYTES as u64, requires = "scenario", value_parser = clap::value_parser!(u64).range(1..=volley_engine::MAX_KEPT_BODY_BYTES as u64))]
    pub keep_body: u64,
    /// Concurrent connections [default: 50; with --stages and no --rate, the largest stage].
    #[arg(short = 'c', long)]
    pub connections: Option<u64>,
    /// Total requests to send (exactly this many are attempted); with --scenario, iterations:
    /// passes of a scenario, each its steps' requests.
    #[arg(short = 'n', long, default_value_t = 200, conflicts_with = "duration")]
    pub requests: u64,
    /// Run for this long instead of a request count (10s, 1m30s, 500ms).
    #[arg(short = 'z', long)]
    pub duration: Option<String>,
    /// Open model: send R requests per second in total (over all workers, threads and
    /// connections), evenly spaced whatever the server does; each goes out on the next
    /// connection free, and latency counts from when it was due. With -n or -z. With
    /// --scenario, R iterations (passes of a scenario) start per second.
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// Ramp through stages, DURATION:TARGET,... (30s:1000,60s:5000,30s:0), each linearly from
    /// the previous target; the run lasts their sum. With --rate the targets are rates (the
    /// first stage from --rate, which may be 0); without, connection counts (from 0, up to -c).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true, conflicts_with_all = ["duration", "requests"])]
    pub stages: Option<String>,
    /// Count the first D (whole seconds) of the load apart: not in the report's numbers and
    /// thresholds, but in a warm-up section and the series. Part of -z; -n counts after it.
    #[arg(long = "warm-up", value_name = "D", allow_hyphen_values = true)]
    pub warm_up: Option<String>,
    /// Engine threads [default: physical cores, capped at --connections].
    #[arg(short = 't', long)]
    pub threads: Option<u64>,
    /// Spread the connections over these local addresses, each connection from one in turn:
    /// addresses and CIDR blocks (each address of a block), comma-separated, of the target's
    /// family and of the machine that runs the load, at most 1024. Each adds the local port
    /// range's worth of connections to one target address (net.ipv4.ip_local_port_range).
    /// With --workers, every worker's, unless the workers file gives one its own.
    #[arg(long = "source-addr", value_name = "LIST|CIDR", value_delimiter = ',')]
    pub source_addr: Vec<String>,
    /// HTTP method [default: GET, or POST when -d is given].
    #[arg(short = 'm', long)]
    pub method: Option<String>,
    /// Extra header, repeatable: -H 'Name: Value'.
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body; @file reads a file, @- reads stdin (CR and LF stripped, like curl).
    #[arg(short = 'd', long)]
    pub data: Option<String>,
    /// Connection set-up timeout (TCP connect plus TLS handshake).
    #[arg(long, default_value = "5s")]
    pub connect_timeout: String,
    /// Per-request timeout: a request without its full response by then is an error.
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// How long a thread may hold completions to handle them in larger batches (less CPU per
    /// request); each response's hold is part of its latency and is reported. 0 handles every
    /// completion at once. Loads under 8 requests in flight are never held. With --rate, a
    /// due request may also wait up to a fifth of this (100us by default) to leave with the
    /// next: fewer wake-ups, each request up to that much late; and while a connection is free,
    /// responses wait for that wake-up, their latency taken from when they arrived.
    #[arg(long, value_name = "DURATION", default_value = "500us")]
    pub max_hold: String,
    /// A fresh connection for every request.
    #[arg(long)]
    pub disable_keepalive: bool,
    /// Skip TLS certificate verification (curl -k).
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(short = 'j', long)]
    pub json: bool,
    /// A performance gate, repeatable: p99<5ms, mean<2ms, connect_p99<10ms, rps>1000,
    /// error_rate<0.1%, status_5xx<1%, status_200>100; of one name of a --targets mix:
    /// login:p99<200ms, '"GET /users":errors<1'. Judged on all workers' merged data;
    /// a threshold that fails makes the exit status 4.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Also write the report to FILE, repeatable: json, jsonl (appends one line per run), csv
    /// (the per-second series), junit (one testcase per threshold), md (a Markdown summary),
    /// html (a self-contained page with charts).
    #[arg(short = 'o', long = "output", value_name = "FORMAT:FILE")]
    pub outputs: Vec<String>,
    /// Write an HdrHistogram interval log to FILE: one line a second per latency kind (tags
    /// latency, service, lateness, connect, ttfb, hold), merged over all workers, as HdrHistogram reads it.
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,
    /// Requests in flight per connection (HTTP/2 and HTTP/3 streams; default 1). A server's lower
    /// limit (SETTINGS_MAX_CONCURRENT_STREAMS, QUIC's MAX_STREAMS) wins, and the report says so.
    #[arg(short = 'p', long)]
    pub parallel: Option<u64>,
    /// Use HTTP/2: prior knowledge (h2c) on http://, ALPN h2 on https://.
    #[arg(long)]
    pub http2: bool,
    /// Use HTTP/3 (QUIC over UDP, ALPN h3): https:// only.
    #[arg(long)]
    pub http3: bool,
    /// With --http3, QUIC's congestion control [default: loopback]: loopback (no pacing, a
    /// fixed window that loss does not shrink, a fixed MTU: for loopback and LANs, where the
    /// path is not what congests) or standard (CUBIC with pacing, RFC 9002's initial RTT and
    /// QUIC's minimum MTU: for a real WAN).
    #[arg(long, value_name = "KIND")]
    pub quic_congestion: Option<QuicCongestionArg>,
    /// The I/O beneath the load [default: auto]: io-uring (the fastest; blocked by container
    /// runtimes' default seccomp profiles), epoll (runs anywhere, at more CPU per request), or
    /// auto (io_uring where it can be set up, else epoll, said in one line on stderr); without
    /// the flag, VOLLEY_ENGINE if set. With --workers, every worker runs this engine.
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<EngineArg>,
    /// Run the load on these worker daemons (HOST:PORT,...) instead of this machine; @FILE reads
    /// them from a file: one HOST:PORT a line (# comments), or `terraform output -json workers`;
    /// dns:NAME:PORT is every address NAME resolves to (a Kubernetes headless Service).
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...|@FILE|dns:NAME:PORT")]
    pub workers: Vec<String>,
    /// File holding the workers' bearer token (or set VOLLEY_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Reach the workers over TLS, trusting this CA (PEM).
    #[arg(long, value_name = "FILE")]
    pub worker_ca: Option<PathBuf>,
    /// Client certificate (PEM) for workers that require one; needs --worker-key.
    #[arg(long, value_name = "FILE", requires = "worker_key", requires = "worker_ca")]
    pub worker_cert: Option<PathBuf>,
    /// The private key of --worker-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "worker_cert")]
    pub worker_key: Option<PathBuf>,
    /// Serve the run's live numbers, merged over all workers, as OpenMetrics at
    /// http://ADDR/metrics until the report is printed.
    #[arg(long, value_name = "ADDR")]
    pub prometheus: Option<SocketAddr>,
    /// Keep serving --prometheus this long after the report, for a last scrape of the totals.
    #[arg(long, value_name = "DURATION", requires = "prometheus")]
    pub prometheus_linger: Option<String>,
    #[command(flatten)]
    pub gates: GateArgs,
}

/// What judges a run beyond `--threshold`: stopping early, and the comparison with a baseline.
#[derive(Debug, Args)]
pub(crate) struct GateArgs {
    /// Stop every worker as soon as a --threshold can no longer pass (exit 4).
    #[arg(long, requires = "thresholds")]
    pub abort_on_fail: bool,
    /// With --abort-on-fail, judge nothing during the first D of the load (e.g. 5s).
    #[arg(long, value_name = "D", requires = "abort_on_fail")]
    pub abort_grace: Option<String>,
    /// A saved JSON report (-j or -o json) to compare this run with, repeatable: several are
    /// compared by their medians. Requests/s, p50, p99 and the --threshold latencies.
    #[arg(long = "baseline", value_name = "FILE")]
    pub baselines: Vec<PathBuf>,
    /// The regression allowed against --baseline, as a percent (default 5%).
    #[arg(long, value_name = "PERCENT", requires = "baselines")]
    pub max_regression: Option<String>,
}

/// `volley find-max`'s own flags, beside the load flags it shares with `volley URL`.
#[derive(Debug, Args)]
pub(crate) struct FindMaxArgs {
    /// A service level objective every step must hold, repeatable, in --threshold's language:
    /// p99<20ms, error_rate<0.1% (or errors<0.1%), status_5xx<1%. At least one.
    #[arg(long = "slo", value_name = "EXPR")]
    pub slos: Vec<String>,
    /// The first step's rate, in requests per second (with a paced scenario, its users); each
    /// step that holds doubles it.
    #[arg(long, value_name = "R", default_value = "100", allow_hyphen_values = true)]
    pub start: String,
    /// The highest rate tried: a target that holds it is reported as holding at least that
    /// [default: 1000000].
    #[arg(long, value_name = "R", allow_hyphen_values = true)]
    pub max_rate: Option<String>,
    /// With a paced scenario, which makes the search count users: the most users tried
    /// [default: 10000].
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub max_users: Option<String>,
    /// The most steps run, whatever the search still wants: the capacity is then the highest
    /// rate that held so far.
    #[arg(long, value_name = "N", default_value = "30", allow_hyphen_values = true)]
    pub max_steps: String,
    /// How long each step holds its rate (at least 1s).
    #[arg(long, value_name = "D", default_value = "10s")]
    pub step_duration: String,
    /// A pause between steps, so that what one step left behind (a queue, a backlog) is gone
    /// before the next is measured; 0 for none.
    #[arg(long, value_name = "D", default_value = "1s")]
    pub step_pause: String,
    /// Bisect until the rate that failed is within this percent above the rate that held.
    #[arg(long, value_name = "PERCENT", default_value = "5%")]
    pub precision: String,
    #[command(flatten)]
    pub load: LoadArgs,
}
