//! Real HTTP/2 servers from Debian packages, in the manner of [`Nginx`]: each runs as a child
//! process in its own process group, with its config, logs and certificate in a temp dir, listens
//! on 127.0.0.1 ports picked when it starts, counts the requests it served through an access log
//! written as each request ends, and is stopped on drop. Each serves `200 "hello, world!\n"`
//! ([`NGINX_BODY`]) on every path.
//!
//! - [`Lighttpd`]: Debian's `lighttpd` (with `lighttpd-mod-openssl` for TLS).
//! - [`H2o`]: Debian's `h2o`.
//! - [`Nginx`] (in `mod.rs`), started from the same [`H2Options`] by [`Nginx::start_h2`].
//!
//! The three have HTTP/2 framing and HPACK of their own (lighttpd's is ls-hpack): none shares
//! HTTP/2 code with another, with volley, or with nghttp2, which curl, h2load, nghttpd and
//! Apache's mod_http2 are all built on. [`H2Server`] is what they have in common, so that a test
//! can run the same checks on each ([`start_each`]).
//!
//! What they do, as seen frame by frame on the wire (Debian 12's nginx 1.22.1, lighttpd 1.4.69,
//! h2o 2.2.5):
//!
//! | | nginx | lighttpd | h2o |
//! |---|---|---|---|
//! | h2c by prior knowledge | yes, on a port of its own | yes, on a port that also serves HTTP/1.1 | the same as lighttpd |
//! | h2 over TLS (ALPN) | yes | yes | yes |
//! | SETTINGS_MAX_CONCURRENT_STREAMS | 128 | 8 | 100 |
//! | other SETTINGS it sends | INITIAL_WINDOW_SIZE 65536, MAX_FRAME_SIZE 2^24-1 | INITIAL_WINDOW_SIZE 65536, MAX_HEADER_LIST_SIZE 65535, ENABLE_CONNECT_PROTOCOL 1, NO_RFC7540_PRIORITIES 1 | INITIAL_WINDOW_SIZE 2^24 |
//! | GOAWAY after N requests ([`H2Options::goaway_after`]) | yes (`keepalive_requests`) | no (its `server.max-keep-alive-requests` is for HTTP/1.1 only) | no (no such setting) |
//! | header block over 16 KiB ([`H2Options::big_header_bytes`]) | HEADERS of 16384 bytes, then CONTINUATION frames | the same | the same |
//!
//! nginx's GOAWAY after N requests: when the Nth request of a connection arrives nginx sends
//! GOAWAY (NO_ERROR, last-stream-id = that request's stream) before its response, finishes that
//! response, then closes the connection. Streams the client opened after it get no response and
//! no RST_STREAM: they die with the connection, and the client must send them again on a new one.
//! lighttpd, h2o (and Apache's mod_http2) send GOAWAY only on errors, idle timeouts or shutdown.
#![allow(dead_code)]

use std::fs::File;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{NGINX_BODY, Nginx, NginxOptions, NginxTuning, TestCert, free_ports, in_ci};

// ---------------------------------------------------------------------------------------------
// Options and what the servers have in common
// ---------------------------------------------------------------------------------------------

/// What to start an HTTP/2 server with. The default is h2c only.
#[derive(Clone, Debug)]
pub struct H2Options {
    /// Listen for HTTP/2 over plain TCP by prior knowledge (h2c, no Upgrade).
    pub h2c: bool,
    /// Listen for HTTPS, ALPN `h2` and `http/1.1`, with a fresh [`TestCert`].
    pub tls: bool,
    /// End each connection with GOAWAY after this many requests. Only nginx can ([`Nginx`]);
    /// the others panic when asked.
    pub goaway_after: Option<u32>,
    /// Add headers to every response whose values total this many bytes ([`big_headers`]), so
    /// that the response's header block is at least that big on the wire: above 16384 bytes (the
    /// default SETTINGS_MAX_FRAME_SIZE) it has to be sent as HEADERS plus CONTINUATION frames.
    pub big_header_bytes: Option<usize>,
}

impl Default for H2Options {
    fn default() -> H2Options {
        H2Options { h2c: true, tls: false, goaway_after: None, big_header_bytes: None }
    }
}

impl H2Options {
    /// h2c only.
    pub fn h2c() -> H2Options {
        H2Options::default()
    }

    /// TLS only.
    pub fn tls() -> H2Options {
        H2Options { h2c: false, tls: true, ..H2Options::default() }
    }

    /// Both h2c and TLS, each on its own port.
    pub fn both() -> H2Options {
        H2Options { h2c: true, tls: true, ..H2Options::default() }
    }

    fn check(&self, server: &str, can_goaway_after: bool) {
        assert!(self.h2c || self.tls, "{server}: H2Options asks for no listener (neither h2c nor tls)");
        if let Some(n) = self.goaway_after {
            assert!(n > 0, "goaway_after must be at least 1");
            assert!(
                can_goaway_after,
                "{server} cannot send GOAWAY after {n} requests (it has no such setting for HTTP/2): use Nginx::start_h2"
            );
        }
    }
}

/// How long a value of one of [`big_headers`] is at most: short enough for nginx's 4096-byte
/// limit on one config token, and long enough that an entry for it (name + value + 32) does not
/// fit a default-size (4096-byte) HPACK dynamic table, so every response carries it in full
/// rather than as an index into that table.
pub const BIG_HEADER_CHUNK: usize = 4070;

/// The headers [`H2Options::big_header_bytes`] adds for `total`: `x-big-0`, `x-big-1`, ...,
/// each with a value of `X` repeated, at most [`BIG_HEADER_CHUNK`] bytes long, `total` bytes in
/// all. `X` is 8 bits long in HPACK's Huffman code, so Huffman coding cannot shrink the values.
pub fn big_headers(total: usize) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    let mut left = total;
    while left > 0 {
        let len = left.min(BIG_HEADER_CHUNK);
        headers.push((format!("x-big-{}", headers.len()), "X".repeat(len)));
        left -= len;
    }
    headers
}

/// What the HTTP/2 servers here have in common, so that a test can run the same checks on each.
pub trait H2Server {
    /// `nginx`, `lighttpd` or `h2o`, for messages.
    fn name(&self) -> &'static str;

    /// `http://127.0.0.1:PORT/` of the h2c listener; panics unless started with `h2c`.
    fn h2c_url(&self) -> String;

    /// `https://127.0.0.1:PORT/` of the TLS listener; panics unless started with `tls`.
    fn https_url(&self) -> String;

    /// The h2c listener (when started with `h2c`).
    fn h2c_addr(&self) -> Option<SocketAddr>;

    /// The TLS listener (when started with `tls`).
    fn tls_addr(&self) -> Option<SocketAddr>;

    /// The certificate of the TLS listener (when started with `tls`).
    fn cert(&self) -> Option<&TestCert>;

    /// The temp dir holding config and logs (for writing e.g. a `--cacert` file beside them).
    fn dir(&self) -> &Path;

    /// One line per request served so far: `METHOD STATUS PROTOCOL REQUEST_BYTES RESPONSE_BYTES`,
    /// PROTOCOL being `HTTP/2.0` (nginx, lighttpd) or `HTTP/2` (h2o) for HTTP/2. h2o logs no
    /// request size (`-`) and only the body's size.
    fn log_lines(&self) -> Vec<String>;

    /// The error log (for assertion messages).
    fn error_log(&self) -> String;

    /// Requests served so far. A request is logged when it ends, so right after a client got its
    /// response this can still be short: use [`H2Server::settled_requests`] at the end.
    fn requests(&self) -> u64 {
        self.log_lines().len() as u64
    }

    /// Requests logged once the count has stopped changing for 300 ms (at most 10 s of waiting).
    fn settled_requests(&self) -> u64 {
        settle(|| self.requests())
    }
}

/// Starts each server that can do what `options` asks (only nginx for `goaway_after`), leaving
/// out, with a note on stderr, those not installed (outside CI; under CI a missing one panics).
pub fn start_each(options: &H2Options) -> Vec<Box<dyn H2Server>> {
    let mut servers: Vec<Box<dyn H2Server>> = Vec::new();
    if let Some(nginx) = Nginx::start_h2(options.clone()) {
        servers.push(Box::new(nginx));
    }
    if options.goaway_after.is_none() {
        if let Some(lighttpd) = Lighttpd::start_with(options.clone()) {
            servers.push(Box::new(lighttpd));
        }
        if let Some(h2o) = H2o::start_with(options.clone()) {
            servers.push(Box::new(h2o));
        }
    }
    servers
}

/// Polls `count` until it has not changed for 300 ms (at most 10 s) and returns it.
pub(crate) fn settle(count: impl Fn() -> u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = count();
    let mut stable_since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(25));
        let now = count();
        if now != last {
            last = now;
            stable_since = Instant::now();
        } else if stable_since.elapsed() >= Duration::from_millis(300) {
            break;
        }
    }
    last
}

// ---------------------------------------------------------------------------------------------
// nginx through H2Options
// ---------------------------------------------------------------------------------------------

impl Nginx {
    /// nginx from [`H2Options`]: its HTTP/1.1 listener, plus h2c and TLS listeners as asked,
    /// `goaway_after` as `keepalive_requests`, `big_header_bytes` as added headers. `None` as for
    /// [`Nginx::start`].
    pub fn start_h2(options: H2Options) -> Option<Nginx> {
        options.check("nginx", true);
        Nginx::start_tuned(
            NginxOptions { tls: options.tls, h2c: options.h2c },
            NginxTuning {
                keepalive_requests: options.goaway_after,
                big_header_bytes: options.big_header_bytes,
                ..Default::default()
            },
        )
    }
}

impl H2Server for Nginx {
    fn name(&self) -> &'static str {
        "nginx"
    }

    fn h2c_url(&self) -> String {
        format!("http://{}/", Nginx::h2c_addr(self).expect("nginx started without h2c"))
    }

    fn https_url(&self) -> String {
        Nginx::https_url(self)
    }

    fn h2c_addr(&self) -> Option<SocketAddr> {
        Nginx::h2c_addr(self)
    }

    fn tls_addr(&self) -> Option<SocketAddr> {
        Nginx::tls_addr(self)
    }

    fn cert(&self) -> Option<&TestCert> {
        Nginx::cert(self)
    }

    fn dir(&self) -> &Path {
        Nginx::dir(self)
    }

    fn log_lines(&self) -> Vec<String> {
        Nginx::log_lines(self)
    }

    fn error_log(&self) -> String {
        Nginx::error_log(self)
    }
}

// ---------------------------------------------------------------------------------------------
// lighttpd
// ---------------------------------------------------------------------------------------------

/// A real lighttpd (Debian's `lighttpd`; TLS needs `lighttpd-mod-openssl` too) serving
/// [`NGINX_BODY`] on every path as a static file, in the foreground (`-D`), as the user running
/// the test. Its cleartext port serves both HTTP/1.1 and h2c.
///
/// lighttpd buffers its access log and writes it out every 4 seconds, so its log goes through a
/// pipe to `cat` instead, which lighttpd writes to at the end of each request. It also logs each
/// HTTP/2 connection, when it closes, as a request `PRI 100`: [`H2Server::log_lines`] leaves
/// those out.
pub struct Lighttpd {
    server: ServerProcess,
}

impl Lighttpd {
    /// lighttpd on h2c. `None` (after saying why on stderr) when it is not installed, so the test
    /// can return early; under CI a missing lighttpd panics instead.
    pub fn start() -> Option<Lighttpd> {
        Lighttpd::start_with(H2Options::default())
    }

    /// lighttpd with the listeners and behaviour `options` asks for (not `goaway_after`, which
    /// it cannot do); `None` as for [`Lighttpd::start`].
    pub fn start_with(options: H2Options) -> Option<Lighttpd> {
        options.check("lighttpd", false);
        let binary = find_binary("lighttpd", "lighttpd")?;
        let started = ServerProcess::start("lighttpd", &options, |dir, h2c, tls| {
            std::fs::create_dir_all(dir.join("htdocs")).unwrap();
            std::fs::write(dir.join("htdocs/index.html"), NGINX_BODY).unwrap();
            std::fs::write(dir.join("lighttpd.conf"), lighttpd_config(dir, h2c, tls, &options)).unwrap();
            let mut cmd = Command::new(&binary);
            cmd.arg("-D").arg("-f").arg(dir.join("lighttpd.conf"));
            cmd
        });
        match started {
            Ok(server) => Some(Lighttpd { server }),
            // Debian ships lighttpd's TLS in a package of its own.
            Err(why) if why.contains("mod_openssl") => {
                assert!(!in_ci(), "lighttpd cannot load mod_openssl, and CI must run the lighttpd tests: {why}");
                eprintln!(
                    "SKIPPED: lighttpd has no TLS module (apt-get install lighttpd-mod-openssl); skipping this test"
                );
                None
            }
            Err(why) => panic!("lighttpd failed to start: {why}"),
        }
    }
}

impl Packaged for Lighttpd {
    const NAME: &'static str = "lighttpd";

    fn process(&self) -> &ServerProcess {
        &self.server
    }

    /// lighttpd also logs each HTTP/2 connection, as it closes, as a `PRI * HTTP/2.0` line.
    fn is_request(line: &str) -> bool {
        !line.starts_with("PRI ")
    }
}

fn lighttpd_config(dir: &Path, h2c: Option<SocketAddr>, tls: Option<SocketAddr>, options: &H2Options) -> String {
    let d = dir.display();
    let mut modules = vec!["mod_rewrite", "mod_setenv", "mod_accesslog"];
    if tls.is_some() {
        modules.push("mod_openssl");
    }
    let modules = modules.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ");
    // The main socket is the h2c one when there is one; otherwise it is the TLS one.
    let main = h2c.or(tls).expect("a listener");
    let ssl = format!("ssl.engine = \"enable\"\nssl.pemfile = \"{d}/cert.pem\"\nssl.privkey = \"{d}/key.pem\"\n");
    let tls_section = match (h2c, tls) {
        (Some(_), Some(tls)) => format!("$SERVER[\"socket\"] == \"{tls}\" {{\n{ssl}}}\n"),
        (None, Some(_)) => ssl,
        _ => String::new(),
    };
    let big = match options.big_header_bytes {
        Some(total) => {
            let headers = big_headers(total)
                .iter()
                .map(|(name, value)| format!("    \"{name}\" => \"{value}\""))
                .collect::<Vec<_>>()
                .join(",\n");
            format!("setenv.add-response-header = (\n{headers}\n)\n")
        }
        None => String::new(),
    };
    // Run as root it could hold more descriptors than the default 1024 (as a user the hard
    // limit may be lower, which lighttpd would refuse).
    let fds = if running_as_root() { "server.max-fds = 16384\nserver.max-connections = 8192\n" } else { "" };
    format!(
        r#"# Generated by tests/support/h2_servers.rs for one test.
server.modules = ({modules})
server.document-root = "{d}/htdocs"
server.bind = "{ip}"
server.port = {port}
server.errorlog = "{d}/error.log"
server.feature-flags = ("server.h2proto" => "enable", "server.h2c" => "enable")
server.max-keep-alive-requests = 100000
{fds}index-file.names = ("index.html")
mimetype.assign = ("" => "text/plain")
url.rewrite-once = ("^" => "/index.html")
# Written at the end of each request: a log file would be flushed only every 4 s.
accesslog.filename = "|exec /bin/cat >> '{d}/access.log'"
accesslog.format = "%m %>s %H %I %O"
{big}{tls_section}"#,
        ip = main.ip(),
        port = main.port(),
    )
}

// ---------------------------------------------------------------------------------------------
// h2o
// ---------------------------------------------------------------------------------------------

/// A real h2o (Debian's `h2o`) serving [`NGINX_BODY`] on every path from a tiny mruby handler,
/// with one worker thread (like [`Nginx`]'s one worker process), in the foreground, as the user
/// running the test. Its cleartext port serves both HTTP/1.1 and h2c. It writes its access log
/// at the end of each request. It also starts a crash handler (`perl`), stopped with it.
pub struct H2o {
    server: ServerProcess,
}

impl H2o {
    /// h2o on h2c. `None` (after saying why on stderr) when it is not installed, so the test can
    /// return early; under CI a missing h2o panics instead.
    pub fn start() -> Option<H2o> {
        H2o::start_with(H2Options::default())
    }

    /// h2o with the listeners and behaviour `options` asks for (not `goaway_after`, which it
    /// cannot do); `None` as for [`H2o::start`].
    pub fn start_with(options: H2Options) -> Option<H2o> {
        options.check("h2o", false);
        let binary = find_binary("h2o", "h2o")?;
        let started = ServerProcess::start("h2o", &options, |dir, h2c, tls| {
            std::fs::write(dir.join("h2o.conf"), h2o_config(dir, h2c, tls, &options)).unwrap();
            let mut cmd = Command::new(&binary);
            cmd.arg("-c").arg(dir.join("h2o.conf"));
            cmd
        });
        match started {
            Ok(server) => Some(H2o { server }),
            Err(why) => panic!("h2o failed to start: {why}"),
        }
    }
}

impl Packaged for H2o {
    const NAME: &'static str = "h2o";

    fn process(&self) -> &ServerProcess {
        &self.server
    }
}

fn h2o_config(dir: &Path, h2c: Option<SocketAddr>, tls: Option<SocketAddr>, options: &H2Options) -> String {
    let d = dir.display();
    let mut listens = String::new();
    if let Some(addr) = h2c {
        listens.push_str(&format!("listen:\n  host: {}\n  port: {}\n", addr.ip(), addr.port()));
    }
    if let Some(addr) = tls {
        // No OCSP stapling: it would try to fetch a response for the test certificate.
        listens.push_str(&format!(
            "listen:\n  host: {}\n  port: {}\n  ssl:\n    certificate-file: \"{d}/cert.pem\"\n    key-file: \"{d}/key.pem\"\n    ocsp-update-interval: 0\n",
            addr.ip(),
            addr.port()
        ));
    }
    // The mruby handler sets the big headers itself: h2o 2.2's `header.add` takes one header.
    let big: String = big_headers(options.big_header_bytes.unwrap_or(0))
        .iter()
        .map(|(name, value)| format!(", \"{name}\" => \"X\" * {}", value.len()))
        .collect();
    let body = NGINX_BODY.escape_default();
    format!(
        r#"# Generated by tests/support/h2_servers.rs for one test.
error-log: "{d}/error.log"
num-threads: 1
max-connections: 8192
{listens}hosts:
  default:
    access-log:
      path: "{d}/access.log"
      format: "%m %>s %H - %b"
    paths:
      /:
        mruby.handler: |
          Proc.new do |env|
            [200, {{"content-type" => "text/plain"{big}}}, ["{body}"]]
          end
"#
    )
}

// ---------------------------------------------------------------------------------------------
// Running a server process
// ---------------------------------------------------------------------------------------------

/// A server running as a child process in its own process group, with its temp dir. On drop it
/// gets SIGTERM, then SIGKILL after 5 s, and so does whatever else is left in its group
/// (lighttpd's log pipe, h2o's crash handler).
/// A server run as a [`ServerProcess`]: everything of [`H2Server`] but its name comes from there.
trait Packaged {
    const NAME: &'static str;

    fn process(&self) -> &ServerProcess;

    /// Whether an access log line stands for a request.
    fn is_request(_line: &str) -> bool {
        true
    }
}

impl<T: Packaged> H2Server for T {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn h2c_url(&self) -> String {
        self.process().h2c_url()
    }

    fn https_url(&self) -> String {
        self.process().https_url()
    }

    fn h2c_addr(&self) -> Option<SocketAddr> {
        self.process().h2c_addr
    }

    fn tls_addr(&self) -> Option<SocketAddr> {
        self.process().tls_addr
    }

    fn cert(&self) -> Option<&TestCert> {
        self.process().cert.as_ref()
    }

    fn dir(&self) -> &Path {
        self.process().dir.path()
    }

    fn log_lines(&self) -> Vec<String> {
        self.process().access_log().into_iter().filter(|line| T::is_request(line)).collect()
    }

    fn error_log(&self) -> String {
        self.process().logs()
    }
}

struct ServerProcess {
    child: Child,
    dir: tempfile::TempDir,
    h2c_addr: Option<SocketAddr>,
    tls_addr: Option<SocketAddr>,
    cert: Option<TestCert>,
}

impl ServerProcess {
    /// Makes a temp dir (with `cert.pem` and `key.pem` when `options.tls`), then picks free ports
    /// and starts the command `configure` returns after writing its config for them, until every
    /// port accepts connections. Retries with other ports when one was taken in the meantime.
    /// `Err` with its output and error log if it exited or did not listen within 10 s.
    fn start(
        name: &str,
        options: &H2Options,
        configure: impl Fn(&Path, Option<SocketAddr>, Option<SocketAddr>) -> Command,
    ) -> Result<ServerProcess, String> {
        let dir = tempfile::Builder::new().prefix(&format!("volley-{name}-")).tempdir().unwrap();
        let cert = options.tls.then(TestCert::generate);
        if let Some(cert) = &cert {
            cert.write_cert_and_key(dir.path());
        }
        let mut last_error = String::new();
        for _ in 0..5 {
            let [h2c, tls] = free_ports();
            let h2c_addr = options.h2c.then(|| SocketAddr::from(([127, 0, 0, 1], h2c)));
            let tls_addr = options.tls.then(|| SocketAddr::from(([127, 0, 0, 1], tls)));
            if h2c_addr.is_some() && h2c_addr == tls_addr {
                continue;
            }
            let mut cmd = configure(dir.path(), h2c_addr, tls_addr);
            let _ = std::fs::remove_file(dir.path().join("error.log"));
            let output = File::create(dir.path().join("output.log")).unwrap();
            cmd.stdin(Stdio::null())
                .stdout(output.try_clone().unwrap())
                .stderr(output)
                .current_dir(dir.path())
                .process_group(0);
            let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
            let ports: Vec<SocketAddr> = [h2c_addr, tls_addr].into_iter().flatten().collect();
            let deadline = Instant::now() + Duration::from_secs(10);
            let error = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    stop_group(&mut child);
                    break format!("{name} exited with {status}\n{}", read_logs(dir.path()));
                }
                if ports.iter().all(|addr| TcpStream::connect(addr).is_ok()) {
                    return Ok(ServerProcess { child, dir, h2c_addr, tls_addr, cert });
                }
                if Instant::now() >= deadline {
                    stop_group(&mut child);
                    return Err(format!("{name} did not listen on {ports:?} within 10 s\n{}", read_logs(dir.path())));
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            if !error.contains("in use") {
                return Err(error);
            }
            last_error = error;
        }
        Err(last_error)
    }

    fn h2c_url(&self) -> String {
        format!("http://{}/", self.h2c_addr.expect("started without h2c"))
    }

    fn https_url(&self) -> String {
        format!("https://{}/", self.tls_addr.expect("started without tls"))
    }

    /// Lines of `access.log` so far.
    fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// What it printed and its error log.
    fn logs(&self) -> String {
        read_logs(self.dir.path())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        stop_group(&mut self.child);
    }
}

fn read_logs(dir: &Path) -> String {
    let output = std::fs::read_to_string(dir.join("output.log")).unwrap_or_default();
    let error_log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
    format!("--- output ---\n{output}--- error.log ---\n{error_log}")
}

/// SIGTERM to the process group `child` leads, up to 5 s for `child` to exit, then SIGKILL to
/// what is left of the group; reaps `child`.
pub(crate) fn stop_group(child: &mut Child) {
    let group = -(child.id() as libc::pid_t);
    // SAFETY: kill(2) on the process group of a child this module started; no memory involved.
    unsafe { libc::kill(group, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(group, libc::SIGKILL) };
    let _ = child.wait();
}

/// The server's binary on PATH or in the usual sbin dirs; `None` after saying so on stderr when
/// there is none (a panic under CI, which must run these tests).
pub(crate) fn find_binary(name: &str, package: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/usr/bin".into(), "/usr/local/bin".into()])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        assert!(!in_ci(), "{name} is not installed, and CI must run the {name} tests (.ci/run installs {package})");
        eprintln!("SKIPPED: {name} is not installed (apt-get install {package}); skipping this test");
    }
    found
}

fn running_as_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
