//! The command line: `volley [OPTIONS] URL`, `volley serve`, `volley demo`.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand};

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
    },
    /// Start the built-in server on a loopback port and run a short load test against it.
    Demo,
}

#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// Target URL, e.g. http://127.0.0.1:8080/
    #[arg(required = true)]
    pub url: Option<String>,
    /// Concurrent connections.
    #[arg(short = 'c', long, default_value_t = 50)]
    pub connections: u64,
    /// Total requests to send (exactly this many are attempted).
    #[arg(short = 'n', long, default_value_t = 200, conflicts_with = "duration")]
    pub requests: u64,
    /// Run for this long instead of a request count (10s, 1m30s, 500ms).
    #[arg(short = 'z', long)]
    pub duration: Option<String>,
    /// Engine threads [default: physical cores, capped at --connections].
    #[arg(short = 't', long)]
    pub threads: Option<u64>,
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
    /// Concurrent streams per connection (HTTP/2 and HTTP/3).
    #[arg(short = 'p', long)]
    pub parallel: Option<u64>,
    /// Use HTTP/2.
    #[arg(long)]
    pub http2: bool,
    /// Use HTTP/3.
    #[arg(long)]
    pub http3: bool,
}
