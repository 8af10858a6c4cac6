//! A real nginx in a temp dir, counting requests through its access log.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::certs::TestCert;
use super::h2_servers;
use super::volley::{free_ports, in_ci};

/// What to start nginx with.
#[derive(Clone, Debug, Default)]
pub struct NginxOptions {
    /// Also listen for HTTPS (ALPN h2 and http/1.1) with a fresh [`TestCert`].
    pub tls: bool,
    /// Also listen for HTTP/2 over plain TCP with prior knowledge (h2c) on its own port.
    pub h2c: bool,
}

/// More of what to start nginx with ([`Nginx::start_tuned`]). Not in [`NginxOptions`], so that
/// code that builds that struct from its two fields alone keeps compiling.
#[derive(Clone, Debug, Default)]
pub struct NginxTuning {
    /// `keepalive_requests` (default 100000): an HTTP/1.1 connection gets `Connection: close` on
    /// its Nth response; an HTTP/2 connection gets GOAWAY (NO_ERROR, last-stream-id = the Nth
    /// request's stream) just before the Nth response, then is closed once that response is sent.
    /// Streams opened after the Nth get neither a response nor RST_STREAM.
    pub keepalive_requests: Option<u32>,
    /// Add headers to every response whose values total this many bytes
    /// ([`h2_servers::big_headers`]); above 16 KiB HTTP/2 sends them as HEADERS + CONTINUATION.
    pub big_header_bytes: Option<usize>,
    /// `worker_connections` (default 8192): the connections its one worker serves at once.
    pub worker_connections: Option<u32>,
}

/// A real nginx (Debian's `nginx` binary) serving `200 "hello, world!\n"` on every path, with
/// its config, pid file and logs in a temp dir. Counts requests through its access log (one
/// line per request: `METHOD STATUS PROTOCOL REQUEST_LENGTH BYTES_SENT`). Killed on drop.
pub struct Nginx {
    child: Child,
    dir: tempfile::TempDir,
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    h2c_addr: Option<SocketAddr>,
    cert: Option<TestCert>,
}

/// The body nginx answers with.
pub const NGINX_BODY: &str = "hello, world!\n";

impl Nginx {
    /// nginx on plain HTTP/1.1. `None` (after saying why on stderr) when nginx is not installed,
    /// so the test can return early; under CI a missing nginx panics instead.
    pub fn start() -> Option<Nginx> {
        Nginx::start_with(NginxOptions::default())
    }

    /// nginx with the extra listeners `options` asks for; `None` as for [`Nginx::start`].
    pub fn start_with(options: NginxOptions) -> Option<Nginx> {
        Nginx::start_tuned(options, NginxTuning::default())
    }

    /// [`Nginx::start_with`], tuned as `tuning` asks.
    pub fn start_tuned(options: NginxOptions, tuning: NginxTuning) -> Option<Nginx> {
        let cert = options.tls.then(TestCert::generate);
        Nginx::launch(options, tuning, cert)
    }

    /// nginx on plain HTTP/1.1 and on HTTPS (ALPN h2 and http/1.1) serving `cert`, for example
    /// one from [`TestCert::openssl_self_signed`]; `None` as for [`Nginx::start`].
    pub fn start_tls_with(cert: TestCert) -> Option<Nginx> {
        Nginx::launch(NginxOptions { tls: true, h2c: false }, NginxTuning::default(), Some(cert))
    }

    fn launch(options: NginxOptions, tuning: NginxTuning, cert: Option<TestCert>) -> Option<Nginx> {
        let Some(binary) = find_nginx() else {
            assert!(!in_ci(), "nginx is not installed, and CI must run the nginx tests (.ci/run installs it)");
            eprintln!("SKIPPED: nginx is not installed (apt-get install nginx); skipping this test");
            return None;
        };
        let dir = tempfile::Builder::new().prefix("volley-nginx-").tempdir().unwrap();
        if let Some(cert) = &cert {
            cert.write_cert_and_key(dir.path());
        }
        // The port is free when picked but could be taken before nginx binds it: retry then.
        let mut last_error = String::new();
        for _ in 0..5 {
            let [plain, tls, h2c] = free_ports();
            let addr = SocketAddr::from(([127, 0, 0, 1], plain));
            let tls_addr = options.tls.then(|| SocketAddr::from(([127, 0, 0, 1], tls)));
            let h2c_addr = options.h2c.then(|| SocketAddr::from(([127, 0, 0, 1], h2c)));
            let config = nginx_config(dir.path(), addr, tls_addr, h2c_addr, &tuning);
            std::fs::write(dir.path().join("nginx.conf"), config).unwrap();
            let _ = std::fs::remove_file(dir.path().join("error.log"));
            let mut child = Command::new(&binary)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .arg("-e")
                .arg(dir.path().join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
            let ports: Vec<SocketAddr> = [Some(addr), tls_addr, h2c_addr].into_iter().flatten().collect();
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    let mut stderr = String::new();
                    if let Some(mut pipe) = child.stderr.take() {
                        let _ = pipe.read_to_string(&mut stderr);
                    }
                    let log = std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default();
                    last_error = format!("nginx exited with {status}\n{stderr}\n{log}");
                    break;
                }
                if ports.iter().all(|a| TcpStream::connect(a).is_ok()) {
                    // Its stderr is no longer read: nginx logs to error.log from here on.
                    drop(child.stderr.take());
                    return Some(Nginx { child, dir, addr, tls_addr, h2c_addr, cert });
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("nginx did not start listening within 10 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if !last_error.contains("in use") {
                break;
            }
        }
        panic!("nginx failed to start: {last_error}");
    }

    /// Plain HTTP/1.1 listener.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// HTTPS listener (when started with `tls`).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// `https://127.0.0.1:PORT/`; panics unless started with `tls`.
    pub fn https_url(&self) -> String {
        format!("https://{}/", self.tls_addr.expect("nginx started without tls"))
    }

    /// h2c (prior knowledge) listener (when started with `h2c`).
    pub fn h2c_addr(&self) -> Option<SocketAddr> {
        self.h2c_addr
    }

    /// The certificate of the HTTPS listener.
    pub fn cert(&self) -> Option<&TestCert> {
        self.cert.as_ref()
    }

    /// The temp dir holding config and logs (for writing e.g. a `--cacert` file beside them).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Access-log lines written so far (nginx writes a line after each request completes).
    pub fn log_lines(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("access.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Requests logged so far. nginx logs a request after answering it, so right after a client
    /// got its response this can still be short: use [`Nginx::settled_requests`] at the end.
    pub fn requests(&self) -> u64 {
        let log = std::fs::read(self.dir.path().join("access.log")).unwrap_or_default();
        log.iter().filter(|&&b| b == b'\n').count() as u64
    }

    /// Requests logged once the count has stopped changing for 300 ms (at most 10 s of waiting).
    pub fn settled_requests(&self) -> u64 {
        h2_servers::settle(|| self.requests())
    }

    /// The error log (for assertion messages).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM lets the master stop its workers; SIGKILL on the master would orphan them
        // with the ports still bound.
        // SAFETY: kill(2) on our own child; no memory is involved.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_nginx() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/usr/local/nginx/sbin".into()])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
}

fn nginx_config(
    dir: &Path,
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    h2c_addr: Option<SocketAddr>,
    tuning: &NginxTuning,
) -> String {
    let d = dir.display();
    let keepalive_requests = tuning.keepalive_requests.unwrap_or(100_000);
    let worker_connections = tuning.worker_connections.unwrap_or(8192);
    // One `add_header` per header: nginx takes at most 4096 bytes in one config token.
    let big_headers: String = h2_servers::big_headers(tuning.big_header_bytes.unwrap_or(0))
        .iter()
        .map(|(name, value)| format!("            add_header {name} \"{value}\" always;\n"))
        .collect();
    // Run as root, nginx would start its workers as `nobody`, who cannot enter our 0700 temp
    // dir (request bodies spill there); keep them as root instead.
    let running_as_root = std::fs::metadata(dir).map(|m| m.uid() == 0).unwrap_or(false);
    let user = if running_as_root { "user root root;" } else { "" };
    let mut listens = format!("        listen {addr};\n");
    if let Some(tls) = tls_addr {
        // `listen ... http2` works on every nginx (deprecated for `http2 on;` from 1.25.1).
        listens.push_str(&format!(
            "        listen {tls} ssl http2;\n        ssl_certificate {d}/cert.pem;\n        ssl_certificate_key {d}/key.pem;\n"
        ));
    }
    if let Some(h2c) = h2c_addr {
        listens.push_str(&format!("        listen {h2c} http2;\n"));
    }
    format!(
        r#"# Generated by tests/support for one test.
daemon off;
master_process on;
worker_processes 1;
{user}
pid {d}/nginx.pid;
error_log {d}/error.log warn;
worker_rlimit_nofile 16384;
events {{
    worker_connections {worker_connections};
}}
http {{
    log_format volley '$request_method $status $server_protocol $request_length $bytes_sent';
    access_log {d}/access.log volley;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests {keepalive_requests};
    keepalive_timeout 75s;
    default_type text/plain;
    server {{
{listens}        server_name localhost;
        location / {{
{big_headers}            return 200 "hello, world!\n";
        }}
    }}
}}
"#
    )
}
