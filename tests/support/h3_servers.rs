//! Real HTTP/3 servers from Debian packages, in the manner of [`super::h2_servers`]: each runs
//! as a child process in its own process group, with its config, certificate ([`TestCert`]) and
//! logs in a temp dir, on a 127.0.0.1 port picked when it starts, and is stopped on drop. Each
//! counts what it served in its own words ([`H3Server::requests`]).
//!
//! - [`Caddy`]: Debian's `caddy`, whose QUIC and HTTP/3 are quic-go's; HTTP/3 is on by default
//!   for an HTTPS site. It answers `200 "hello, world!\n"` and writes an access log of JSON
//!   lines, one per request as it ends, with the request's protocol (`HTTP/3.0`).
//! - [`Gtlsserver`]: ngtcp2's example server (Debian's `ngtcp2-server`: ngtcp2, nghttp3 and
//!   GnuTLS), serving `index.html` (`hello, world!\n`) from a document root. It keeps no access
//!   log; unless `-q`, it prints its HTTP/3 events on stderr, and one
//!   `http: stream 0x… submit response headers` line per response it starts for a file, which
//!   is what it is counted by (`--no-quic-dump --no-http-dump` leave the payloads' hex dumps
//!   out; ngtcp2's own packet log stays, a few lines a packet). It can also lose datagrams on
//!   purpose (`-t`/`-r`, [`GtlsOptions::loss`]) and allow fewer streams (`--max-streams-bidi`).
//!
//! Neither shares code with quinn, with the h3 crate, or with volley.

use std::fs::File;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::h2_servers::{find_binary, settle, stop_group};
use super::{H3Client, NGINX_BODY, TestCert, free_port};

/// What the HTTP/3 servers here have in common, so that a test can run the same checks on each.
pub trait H3Server {
    /// `caddy` or `gtlsserver`, for messages.
    fn name(&self) -> &'static str;

    /// The running process, its address, certificate and temp dir.
    fn process(&self) -> &H3Process;

    /// `https://127.0.0.1:PORT/`.
    fn url(&self) -> String {
        format!("https://{}/", self.process().addr)
    }

    /// The UDP address it listens on.
    fn addr(&self) -> SocketAddr {
        self.process().addr
    }

    /// The test CA that signed its certificate.
    fn cert(&self) -> &TestCert {
        &self.process().cert
    }

    /// The temp dir holding config and logs (for writing e.g. a `--cacert` file beside them).
    fn dir(&self) -> &Path {
        self.process().dir.path()
    }

    /// Requests it answered so far, by its own account.
    fn requests(&self) -> u64;

    /// What it printed (for assertion messages), its end only.
    fn output(&self) -> String;

    /// Requests once the count has stopped changing for 300 ms (at most 10 s of waiting).
    fn settled_requests(&self) -> u64 {
        settle(|| self.requests())
    }
}

/// A server process with its dir, address and certificate.
pub struct H3Process {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    cert: TestCert,
}

impl H3Process {
    /// Writes `cert.pem` and `key.pem` into a fresh temp dir, then picks a free port and starts
    /// what `configure` makes of it, until a quinn + h3 client completes a handshake there
    /// (which makes no request). Retries with another port when the server exits on one taken
    /// in the meantime. `Err` with its output if it exited or did not answer within 10 s.
    fn start(name: &str, configure: impl Fn(&Path, SocketAddr) -> Command) -> Result<H3Process, String> {
        H3Process::start_with_cert(name, TestCert::generate(), configure)
    }

    /// [`H3Process::start`] with a certificate of the test's choosing.
    fn start_with_cert(
        name: &str,
        cert: TestCert,
        configure: impl Fn(&Path, SocketAddr) -> Command,
    ) -> Result<H3Process, String> {
        let dir = tempfile::Builder::new().prefix(&format!("volley-{name}-")).tempdir().unwrap();
        cert.write_cert_and_key(dir.path());
        let mut last_error = String::new();
        for _ in 0..5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let mut cmd = configure(dir.path(), addr);
            let output = File::create(dir.path().join("output.log")).unwrap();
            cmd.stdin(Stdio::null())
                .stdout(output.try_clone().unwrap())
                .stderr(output)
                .current_dir(dir.path())
                .process_group(0);
            let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
            let deadline = Instant::now() + Duration::from_secs(10);
            let error = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    stop_group(&mut child);
                    break format!("{name} exited with {status}\n{}", tail(&dir.path().join("output.log")));
                }
                if udp_port_bound(addr) && H3Client::connect(addr, Some(&cert.ca_pem)).is_ok() {
                    return Ok(H3Process { child, dir, addr, cert });
                }
                if Instant::now() >= deadline {
                    stop_group(&mut child);
                    return Err(format!(
                        "{name} did not answer HTTP/3 on {addr} within 10 s\n{}",
                        tail(&dir.path().join("output.log"))
                    ));
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            if !error.contains("in use") {
                return Err(error);
            }
            last_error = error;
        }
        Err(last_error)
    }

    fn output(&self) -> String {
        tail(&self.dir.path().join("output.log"))
    }
}

impl Drop for H3Process {
    fn drop(&mut self) {
        stop_group(&mut self.child);
    }
}

/// Whether something is bound to UDP `addr`: a datagram too short for QUIC, which a server
/// drops, draws ICMP port unreachable (ECONNREFUSED on a connected socket) when nothing is.
/// Checked before a QUIC handshake is tried, which would wait its whole timeout there.
fn udp_port_bound(addr: SocketAddr) -> bool {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port on loopback");
    socket.connect(addr).expect("connect a UDP socket");
    socket.set_read_timeout(Some(Duration::from_millis(50))).expect("a read timeout");
    if socket.send(b"?").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    !matches!(socket.recv(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// The last 8 KiB of a log file (ngtcp2's is long).
fn tail(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    let from = bytes.len().saturating_sub(8192);
    String::from_utf8_lossy(&bytes[from..]).into_owned()
}

// ---------------------------------------------------------------------------------------------
// caddy
// ---------------------------------------------------------------------------------------------

/// Debian's caddy (quic-go) serving HTTPS and HTTP/3 on one port number (TCP and UDP).
pub struct Caddy {
    process: H3Process,
}

impl Caddy {
    /// `None` (after saying why on stderr) when caddy is not installed; under CI that panics.
    pub fn start() -> Option<Caddy> {
        Caddy::start_site(None)
    }

    /// Caddy with its site bound to `host` only: it answers a handshake that names no host
    /// (an IP address, no SNI) with a TLS alert.
    pub fn start_for_host(host: &str) -> Option<Caddy> {
        Caddy::start_site(Some(host))
    }

    fn start_site(host: Option<&str>) -> Option<Caddy> {
        let binary = find_binary("caddy", "caddy")?;
        // A site bound to a host has a certificate for that name only: caddy picks a certificate
        // by the connection's address when a client sends no name, and must find none.
        let cert = match host {
            Some(host) => TestCert::generate_for(&[host]),
            None => TestCert::generate(),
        };
        let process = H3Process::start_with_cert("caddy", cert, |dir, addr| {
            std::fs::write(dir.join("Caddyfile"), caddyfile(dir, addr, host)).unwrap();
            let mut cmd = Command::new(&binary);
            cmd.args(["run", "--adapter", "caddyfile", "--config"]).arg(dir.join("Caddyfile"));
            // Its storage and autosaved config go into the temp dir, not the user's home.
            cmd.env("HOME", dir).env("XDG_DATA_HOME", dir.join("data")).env("XDG_CONFIG_HOME", dir.join("config"));
            cmd
        })
        .unwrap_or_else(|e| panic!("caddy failed to start: {e}"));
        Some(Caddy { process })
    }

    /// The access log's lines so far: one JSON object per request.
    pub fn log_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.process.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

/// A site on `addr` only (TCP for HTTPS, UDP for HTTP/3), with the test certificate, no admin
/// endpoint and no HTTP-to-HTTPS redirect listener (which would want port 80).
fn caddyfile(dir: &Path, addr: SocketAddr, host: Option<&str>) -> String {
    let d = dir.display();
    let host = host.unwrap_or_default();
    let (ip, port) = (addr.ip(), addr.port());
    format!(
        r#"# Generated by tests/support for one test.
{{
    admin off
    auto_https disable_redirects
    storage file_system {d}/data
    servers {{
        protocols h1 h2 h3
    }}
}}
{host}:{port} {{
    bind {ip}
    tls {d}/cert.pem {d}/key.pem
    log {{
        output file {d}/access.log
        format json
    }}
    respond "{body}" 200
}}
"#,
        body = NGINX_BODY.replace('\n', "\\n"),
    )
}

impl H3Server for Caddy {
    fn name(&self) -> &'static str {
        "caddy"
    }

    fn process(&self) -> &H3Process {
        &self.process
    }

    /// Access-log entries of HTTP/3 requests.
    fn requests(&self) -> u64 {
        self.log_lines().iter().filter(|line| line["request"]["proto"] == "HTTP/3.0").count() as u64
    }

    fn output(&self) -> String {
        self.process.output()
    }
}

// ---------------------------------------------------------------------------------------------
// gtlsserver
// ---------------------------------------------------------------------------------------------

/// What to start gtlsserver with.
#[derive(Clone, Copy, Debug, Default)]
pub struct GtlsOptions {
    /// `-t P -r P`: lose this share of the datagrams it sends and of those it receives.
    pub loss: Option<f64>,
    /// `--max-streams-bidi`: requests a client may have open at once (its default is 100).
    pub max_streams: Option<u32>,
}

/// ngtcp2's example server with GnuTLS (Debian's `ngtcp2-server`).
pub struct Gtlsserver {
    process: H3Process,
}

/// How a line it prints once per response it starts for a file ends (its own error pages are
/// not printed so).
const GTLS_RESPONSE_LINE: &[u8] = b" submit response headers";

impl Gtlsserver {
    /// `None` (after saying why on stderr) when gtlsserver is not installed; under CI that panics.
    pub fn start(options: GtlsOptions) -> Option<Gtlsserver> {
        let binary = find_binary("gtlsserver", "ngtcp2-server")?;
        let process = H3Process::start("gtlsserver", |dir, addr| {
            let htdocs = dir.join("htdocs");
            std::fs::create_dir_all(&htdocs).unwrap();
            std::fs::write(htdocs.join("index.html"), NGINX_BODY).unwrap();
            let mut cmd = Command::new(&binary);
            cmd.args(["--no-quic-dump", "--no-http-dump"]).arg(format!("--htdocs={}", htdocs.display()));
            if let Some(p) = options.loss {
                cmd.arg(format!("--tx-loss={p}")).arg(format!("--rx-loss={p}"));
            }
            if let Some(n) = options.max_streams {
                cmd.arg(format!("--max-streams-bidi={n}"));
            }
            cmd.arg(addr.ip().to_string())
                .arg(addr.port().to_string())
                .arg(dir.join("key.pem"))
                .arg(dir.join("cert.pem"));
            cmd
        })
        .unwrap_or_else(|e| panic!("gtlsserver failed to start: {e}"));
        Some(Gtlsserver { process })
    }

    fn output_path(&self) -> PathBuf {
        self.process.dir.path().join("output.log")
    }
}

impl H3Server for Gtlsserver {
    fn name(&self) -> &'static str {
        "gtlsserver"
    }

    fn process(&self) -> &H3Process {
        &self.process
    }

    /// Responses it started, counted in its debug output.
    fn requests(&self) -> u64 {
        let output = std::fs::read(self.output_path()).unwrap_or_default();
        output.split(|&b| b == b'\n').filter(|line| line.ends_with(GTLS_RESPONSE_LINE)).count() as u64
    }

    fn output(&self) -> String {
        self.process.output()
    }
}
