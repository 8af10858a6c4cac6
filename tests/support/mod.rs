//! Shared helpers for the end-to-end tests in `tests/*.rs` (use with `mod support;`).
//!
//! Everything here makes real servers on loopback and real processes, so a test checks the built
//! `volley` binary against somebody else's HTTP implementation and against what that server
//! itself counted:
//!
//! - [`TestServer`]: an in-test server on its own tokio runtime. [`TestServer::start`] is hyper
//!   (HTTP/1.1, and h2c by prior knowledge on the same port) with configurable [`Behavior`]:
//!   body size, chunked bodies, a delay, `Connection: close` every K responses, and a status or
//!   a delay for every K-th request it receives (a controlled error rate and latency tail).
//!   [`TestServer::start_tls`] is the same over TLS with a fresh test CA ([`TestCert`]).
//!   [`TestServer::start_raw`] speaks HTTP/1.1 by hand over TCP for what hyper will not do
//!   ([`RawMode`]: garbage, truncated bodies, huge headers, silence, 103 Early Hints).
//! - [`Nginx`]: a real nginx in a temp dir, counting requests through its access log.
//! - [`fake_worker`]: a fake `volley worker` speaking the real gRPC protocol, scripted per test,
//!   to play hostile and broken workers against the real controller.
//! - [`h2_servers`]: real lighttpd and h2o HTTP/2 servers in the same manner, and nginx started
//!   from the same [`h2_servers::H2Options`] (GOAWAY after N requests, CONTINUATION-sized headers).
//! - [`volley_bin`], [`run_volley`]: run the built binary with a timeout, so a hang fails the
//!   test instead of hanging CI.
//! - [`TestCert`]: a CA and a `localhost`/`127.0.0.1` certificate made with rcgen at test time,
//!   or a self-signed one made by the `openssl` command ([`TestCert::openssl_self_signed`]).
//! - [`json_report`], [`assert_valid_report`]: every JSON report a test reads is checked against
//!   the published schema/report.schema.json.
//! - [`send_request`], [`read_response`]: a tiny blocking HTTP/1.1 client to poke servers with.
//!
//! Each test binary uses only part of this module, hence the `allow(dead_code)`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;

pub mod fake_worker;
pub mod h2_servers;

// ---------------------------------------------------------------------------------------------
// The volley binary
// ---------------------------------------------------------------------------------------------

/// How long [`run_volley`] lets the binary run before killing it and failing the test.
pub const VOLLEY_TIMEOUT: Duration = Duration::from_secs(60);

/// Path of the `volley` binary cargo built for these tests.
pub fn volley_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_volley"))
}

/// A `Command` for the volley binary with `args`, for tests that need to set env or cwd before
/// passing it to [`run_with_timeout`].
pub fn volley_command<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(volley_bin());
    cmd.args(args);
    cmd
}

/// Runs `volley ARGS` to completion and returns its output; panics (with what it printed) if it
/// runs longer than [`VOLLEY_TIMEOUT`].
pub fn run_volley<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run_volley_timeout(args, VOLLEY_TIMEOUT)
}

/// [`run_volley`] with another timeout.
pub fn run_volley_timeout<I, S>(args: I, timeout: Duration) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let cmd = volley_command(args);
    let shown = format!("{cmd:?}");
    match run_with_timeout(cmd, timeout) {
        Ok(output) => output,
        Err(output) => panic!("{shown} still running after {timeout:?}; killed it.\n{}", describe_output(&output)),
    }
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) for at most `timeout`.
///
/// `Ok` with the output if it exited by itself; `Err` with what it printed so far if it had to be
/// killed. The child gets its own process group and the whole group is killed, so grandchildren
/// holding the output pipes cannot keep this waiting.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<Output, Output> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for child") {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            // SAFETY: kill(2) on the process group we created; no memory is involved.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            break child.wait().expect("waiting for killed child");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output =
        Output { status, stdout: stdout.join().expect("stdout reader"), stderr: stderr.join().expect("stderr reader") };
    if timed_out { Err(output) } else { Ok(output) }
}

/// [`run_with_timeout`] that also returns the peak resident memory of `cmd`'s process, in KiB
/// (its `ru_maxrss`, from wait4(2)); panics with what it printed if it runs over `timeout`.
pub fn run_with_peak_rss(mut cmd: Command, timeout: Duration) -> (Output, u64) {
    use std::os::unix::process::ExitStatusExt;
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + timeout;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: rusage is plain data, valid when zeroed.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4(2) on our own child, writing into these two locals.
        let reaped = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(reaped >= 0, "wait4: {}", io::Error::last_os_error());
        if reaped == pid {
            break (status, usage);
        }
        if Instant::now() >= deadline {
            // SAFETY: kill(2) on the process group we created.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let status = child.wait().expect("waiting for the killed child");
            let output = Output { status, stdout: stdout.join().unwrap(), stderr: stderr.join().unwrap() };
            panic!("{shown} still running after {timeout:?}; killed it.\n{}", describe_output(&output));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Reaped by wait4 above: `child` must not be waited for again (dropping it does not wait).
    drop(child);
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    };
    (output, usage.ru_maxrss as u64)
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = pipe.read_to_end(&mut out);
        out
    })
}

/// Exit status, stdout and stderr as text, for assertion messages.
pub fn describe_output(output: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Panics with the full output unless the process exited with status 0.
pub fn assert_success(output: &Output) {
    assert!(output.status.success(), "command failed\n{}", describe_output(output));
}

/// Parses stdout as one JSON document (the `-j` report) and checks it against the published
/// schema; panics with the output if it is not a valid report.
pub fn json_report(output: &Output) -> serde_json::Value {
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e})\n{}", describe_output(output)));
    assert_valid_report(&report);
    report
}

/// Panics, listing every violation, unless `report` satisfies schema/report.schema.json.
pub fn assert_valid_report(report: &serde_json::Value) {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let schema = SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/report.schema.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let schema = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    });
    let errors: Vec<String> = schema.iter_errors(report).map(|e| format!("  {} at {}", e, e.instance_path())).collect();
    assert!(
        errors.is_empty(),
        "the report does not match schema/report.schema.json:\n{}\n{report:#}",
        errors.join("\n")
    );
}

/// A TCP port on 127.0.0.1 that was free a moment ago (for processes that must be told a port).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// True when running under CI (`CI` set to anything but empty, `0` or `false`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

// ---------------------------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------------------------

/// A fresh test CA and a server certificate it signed, valid for `localhost`, `127.0.0.1` and
/// `::1`. Give volley `--cacert` the CA ([`TestCert::write_ca`]); serve `cert_pem` + `key_pem`.
#[derive(Clone, Debug)]
pub struct TestCert {
    /// The CA certificate (what a client trusts).
    pub ca_pem: String,
    /// The server certificate (leaf only).
    pub cert_pem: String,
    /// The server certificate's private key (PKCS#8).
    pub key_pem: String,
}

impl TestCert {
    pub fn generate() -> TestCert {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name.push(DnType::CommonName, "volley test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();

        let key = KeyPair::generate().unwrap();
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "localhost");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &*ca).unwrap();
        TestCert { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    /// A self-signed certificate made the way most people make one, by the `openssl` command:
    /// `openssl req -x509 -newkey rsa:2048 -subj /CN=localhost -addext subjectAltName=SAN`,
    /// which marks it CA:TRUE. It is its own CA: `ca_pem` and `cert_pem` are the same.
    /// `None` (after saying why on stderr) when openssl is not installed; under CI that panics.
    pub fn openssl_self_signed(subject_alt_name: &str) -> Option<TestCert> {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=localhost"])
            .arg("-addext")
            .arg(format!("subjectAltName={subject_alt_name}"))
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdin(Stdio::null())
            .output();
        match made {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                assert!(!in_ci(), "openssl is not installed, and CI must run the openssl certificate tests");
                eprintln!("SKIPPED: openssl is not installed (apt-get install openssl); skipping this test");
                return None;
            }
            Err(e) => panic!("cannot run openssl: {e}"),
            Ok(out) => assert!(out.status.success(), "openssl req failed: {}", String::from_utf8_lossy(&out.stderr)),
        }
        let cert_pem = std::fs::read_to_string(cert).unwrap();
        let key_pem = std::fs::read_to_string(key).unwrap();
        Some(TestCert { ca_pem: cert_pem.clone(), cert_pem, key_pem })
    }

    /// Writes the CA to `dir/ca.pem` (for `--cacert`) and returns its path.
    pub fn write_ca(&self, dir: &Path) -> PathBuf {
        let path = dir.join("ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    /// Writes `dir/cert.pem` and `dir/key.pem` and returns their paths.
    pub fn write_cert_and_key(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }

    /// The certificate and key in the form `volley_serve::ServeConfig::tls` takes.
    pub fn serve_tls(&self) -> volley_serve::TlsPem {
        volley_serve::TlsPem {
            cert_chain_pem: self.cert_pem.clone().into_bytes(),
            key_pem: self.key_pem.clone().into_bytes(),
        }
    }

    /// A rustls server config serving this certificate, ALPN `h2` then `http/1.1`.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let certs = CertificateDer::pem_slice_iter(self.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// A rustls client config that trusts only this CA and offers `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A blocking TLS connection to `addr` that verifies the server as `server_name`.
    pub fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
        alpn: &[&[u8]],
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        let name = ServerName::try_from(server_name.to_string()).unwrap();
        let conn = rustls::ClientConnection::new(self.client_config(alpn), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut stream = rustls::StreamOwned::new(conn, tcp);
        // Finish the handshake now so callers can read the negotiated ALPN straight away.
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock).unwrap();
        }
        stream
    }
}

/// The crypto provider the workspace uses everywhere (ring).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

// ---------------------------------------------------------------------------------------------
// A tiny blocking HTTP/1.1 client
// ---------------------------------------------------------------------------------------------

/// A response as read by [`read_response`]. Header names are lowercased.
#[derive(Clone, Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Interim (1xx) responses seen before the final one, by status.
    pub interim: Vec<u16>,
}

impl RawResponse {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_lookup(&self.headers, name)
    }
}

fn header_lookup<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Writes one HTTP/1.1 request (`Host: test`, plus `Content-Length` when `body` is not empty).
pub fn send_request(
    stream: &mut impl Write,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> io::Result<()> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    stream.write_all(&bytes)?;
    stream.flush()
}

/// Reads one response (skipping 1xx) from `reader`; handles Content-Length, chunked and
/// read-to-close bodies. Reuse the same `BufReader` for the next response on the connection.
/// `head_request`: the request was HEAD, so no body follows.
pub fn read_response(reader: &mut impl BufRead, head_request: bool) -> io::Result<RawResponse> {
    let mut interim = Vec::new();
    loop {
        let status_line = read_line(reader)?;
        let status: u16 = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid(format!("bad status line {status_line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let line = read_line(reader)?;
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').ok_or_else(|| invalid(format!("bad header line {line:?}")))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        if (100..200).contains(&status) {
            interim.push(status);
            continue;
        }
        let mut body = Vec::new();
        if head_request || status == 204 || status == 304 {
        } else if header_lookup(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                let size_line = read_line(reader)?;
                let size_hex = size_line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_hex, 16)
                    .map_err(|_| invalid(format!("bad chunk size {size_line:?}")))?;
                if size == 0 {
                    while !read_line(reader)?.is_empty() {}
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                reader.read_exact(&mut body[start..])?;
                if !read_line(reader)?.is_empty() {
                    return Err(invalid("chunk not followed by CRLF".into()));
                }
            }
        } else if let Some(len) = header_lookup(&headers, "content-length") {
            let len: usize = len.parse().map_err(|_| invalid(format!("bad content-length {len:?}")))?;
            body.resize(len, 0);
            reader.read_exact(&mut body)?;
        } else {
            reader.read_to_end(&mut body)?;
        }
        return Ok(RawResponse { status, headers, body, interim });
    }
}

fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed inside a line"));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| invalid("non-UTF-8 line".into()))
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// One GET on a new plain connection: `GET path` to `addr`, then the response.
pub fn http_get(addr: SocketAddr, path: &str) -> io::Result<RawResponse> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    send_request(&mut stream, "GET", path, &[], b"")?;
    read_response(&mut BufReader::new(stream), false)
}

// ---------------------------------------------------------------------------------------------
// TestServer
// ---------------------------------------------------------------------------------------------

/// What a hyper [`TestServer`] answers to every request.
#[derive(Clone, Debug)]
pub struct Behavior {
    /// Status of every response. Default 200.
    pub status: u16,
    /// Body length; the bytes are [`body_bytes`]`(body_len)`. Default 14.
    pub body_len: usize,
    /// `Some(n)`: send the body with `Transfer-Encoding: chunked` in chunks of `n` bytes (HTTP/1.1)
    /// rather than with `Content-Length`. Default `None`.
    pub chunk_size: Option<usize>,
    /// Wait this long after reading the request before answering. Default zero.
    pub delay: Duration,
    /// `Some(k)`: the k-th, 2k-th, ... response on each connection carries `Connection: close`
    /// and the server then closes that connection (HTTP/1.1 only). Default `None`.
    pub close_every: Option<u64>,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// `Some((k, status))`: the k-th, 2k-th, ... request the server receives (counted over all
    /// connections, in arrival order) is answered with `status`. Default `None`.
    pub status_every: Option<(u64, u16)>,
    /// `Some((k, delay))`: the k-th, 2k-th, ... request the server receives waits `delay` instead
    /// of [`delay`](Self::delay). Default `None`.
    pub slow_every: Option<(u64, Duration)>,
}

impl Default for Behavior {
    fn default() -> Self {
        Behavior::ok(14)
    }
}

impl Behavior {
    /// 200 with a `body_len`-byte body and Content-Length.
    pub fn ok(body_len: usize) -> Behavior {
        Behavior {
            status: 200,
            body_len,
            chunk_size: None,
            delay: Duration::ZERO,
            close_every: None,
            headers: Vec::new(),
            status_every: None,
            slow_every: None,
        }
    }
    pub fn status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }
    pub fn chunked(mut self, chunk_size: usize) -> Self {
        self.chunk_size = Some(chunk_size.max(1));
        self
    }
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
    pub fn close_every(mut self, k: u64) -> Self {
        self.close_every = Some(k.max(1));
        self
    }
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
    pub fn status_every(mut self, k: u64, status: u16) -> Self {
        self.status_every = Some((k.max(1), status));
        self
    }
    pub fn slow_every(mut self, k: u64, delay: Duration) -> Self {
        self.slow_every = Some((k.max(1), delay));
        self
    }
}

/// The body content a [`Behavior`] with `body_len` sends: `abc...z` repeated.
pub fn body_bytes(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Misbehaviours that need a hand-written HTTP/1.1 server ([`TestServer::start_raw`]).
///
/// The raw server reads each request head (and a Content-Length or chunked body) itself, so the
/// counters and [`TestServer::last_request`] work as for the hyper server.
#[derive(Clone, Debug)]
pub enum RawMode {
    /// Answers with bytes that are not HTTP, then closes. Not counted as a response.
    Garbage,
    /// Sends a head declaring `Content-Length: content_length`, then only `sent` body bytes, then
    /// closes the connection (FIN). Not counted as a response.
    Truncated { content_length: usize, sent: usize },
    /// A 200 whose header section is at least `size` bytes (many `x-padding-N` headers) and a
    /// 2-byte body `ok`; keeps the connection open. Counted as a response.
    HugeHeaders { size: usize },
    /// Reads requests and never answers; keeps the connection open until the client closes it.
    Silent,
    /// `103 Early Hints` (with a Link header), then a 200 with a `body_len`-byte body
    /// ([`body_bytes`]); keep-alive. Only the 200 is counted.
    EarlyHints { body_len: usize },
    /// Answers every request with these exact bytes; closes after each if `close`. Counted.
    Verbatim { response: Vec<u8>, close: bool },
    /// Answers `200 ok` (keep-alive) as soon as a request head is in, *before* reading its
    /// body, then reads and discards the body. Request lines that do not look like one (bytes
    /// of one request inside another's body) are counted by [`TestServer::bad_heads`].
    AnswerBeforeBody,
}

/// What the server saw of a request. Header names as received (hyper lowercases them).
#[derive(Clone, Debug, Default)]
pub struct SeenRequest {
    pub method: String,
    /// Path and query, e.g. `/a?b=c`.
    pub path: String,
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub version: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl SeenRequest {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_lookup(&self.headers, name)
    }
}

#[derive(Default)]
struct Stats {
    requests: AtomicU64,
    responses: AtomicU64,
    connections: AtomicU64,
    bad_heads: AtomicU64,
    request_body_bytes: AtomicU64,
    methods: Mutex<BTreeMap<String, u64>>,
    last: Mutex<Option<SeenRequest>>,
}

impl Stats {
    /// A request head arrived; its place among all the server received, from 1.
    fn head(&self, method: &str) -> u64 {
        let nth = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        *self.methods.lock().unwrap().entry(method.to_string()).or_default() += 1;
        nth
    }

    /// The request body was read too.
    fn complete(&self, seen: SeenRequest) {
        self.request_body_bytes.fetch_add(seen.body.len() as u64, Ordering::SeqCst);
        *self.last.lock().unwrap() = Some(seen);
    }

    fn responded(&self) {
        self.responses.fetch_add(1, Ordering::SeqCst);
    }
}

/// A server on 127.0.0.1 (random port) running on its own 2-thread tokio runtime; stopped on
/// drop. Counters:
/// - [`requests`](Self::requests): request heads received;
/// - [`responses`](Self::responses): complete final responses, counted when the last body byte
///   is handed to the connection (so a client that read a response finds it counted);
/// - [`connections`](Self::connections): TCP connections accepted.
pub struct TestServer {
    addr: SocketAddr,
    scheme: &'static str,
    cert: Option<TestCert>,
    stats: Arc<Stats>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Clone)]
enum Kind {
    Hyper { behavior: Arc<Behavior>, body: Bytes, tls: Option<tokio_rustls::TlsAcceptor> },
    Raw(Arc<RawMode>),
}

impl TestServer {
    /// A hyper server (HTTP/1.1 and h2c) answering as `behavior` says.
    pub fn start(behavior: Behavior) -> TestServer {
        let body = Bytes::from(body_bytes(behavior.body_len));
        TestServer::launch(Kind::Hyper { behavior: Arc::new(behavior), body, tls: None }, None)
    }

    /// The same over TLS (ALPN h2, http/1.1) with a fresh [`TestCert`]; see [`TestServer::cert`].
    pub fn start_tls(behavior: Behavior) -> TestServer {
        let cert = TestCert::generate();
        let tls = Some(tokio_rustls::TlsAcceptor::from(cert.server_config()));
        let body = Bytes::from(body_bytes(behavior.body_len));
        TestServer::launch(Kind::Hyper { behavior: Arc::new(behavior), body, tls }, Some(cert))
    }

    /// A hand-written HTTP/1.1 server misbehaving as `mode` says.
    pub fn start_raw(mode: RawMode) -> TestServer {
        TestServer::launch(Kind::Raw(Arc::new(mode)), None)
    }

    fn launch(kind: Kind, cert: Option<TestCert>) -> TestServer {
        let stats = Arc::new(Stats::default());
        let (stop, mut stopped) = oneshot::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let thread_stats = stats.clone();
        let thread = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
                runtime.block_on(async move {
                    let socket = TcpSocket::new_v4().unwrap();
                    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
                    // A big backlog: tests open many connections at once.
                    let listener: TcpListener = socket.listen(1024).unwrap();
                    addr_tx.send(listener.local_addr().unwrap()).unwrap();
                    loop {
                        let (stream, _) = tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => match accepted {
                                Ok(accepted) => accepted,
                                Err(_) => continue,
                            },
                        };
                        thread_stats.connections.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.set_nodelay(true);
                        let stats = thread_stats.clone();
                        match kind.clone() {
                            Kind::Hyper { behavior, body, tls } => {
                                tokio::spawn(hyper_connection(stream, tls, behavior, body, stats));
                            }
                            Kind::Raw(mode) => {
                                tokio::spawn(raw_connection(stream, mode, stats));
                            }
                        }
                    }
                });
                // Dropping the runtime cancels every connection task and closes their sockets.
                runtime.shutdown_timeout(Duration::from_millis(100));
            })
            .unwrap();
        let addr = addr_rx.recv().expect("test server failed to start");
        let scheme = if cert.is_some() { "https" } else { "http" };
        TestServer { addr, scheme, cert, stats, stop: Some(stop), thread: Some(thread) }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/` (`https://` for [`TestServer::start_tls`]).
    pub fn url(&self) -> String {
        format!("{}://{}/", self.scheme, self.addr)
    }

    /// The certificate of a TLS server ([`TestCert::write_ca`] gives the file for `--cacert`).
    pub fn cert(&self) -> Option<&TestCert> {
        self.cert.as_ref()
    }

    /// Request heads received.
    pub fn requests(&self) -> u64 {
        self.stats.requests.load(Ordering::SeqCst)
    }

    /// Complete final responses sent.
    pub fn responses(&self) -> u64 {
        self.stats.responses.load(Ordering::SeqCst)
    }

    /// Request lines that were not `METHOD /path HTTP/1.x` (a raw server's count).
    pub fn bad_heads(&self) -> u64 {
        self.stats.bad_heads.load(Ordering::SeqCst)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(Ordering::SeqCst)
    }

    /// Request body bytes received, over all requests.
    pub fn request_body_bytes(&self) -> u64 {
        self.stats.request_body_bytes.load(Ordering::SeqCst)
    }

    /// Requests received per method.
    pub fn methods(&self) -> BTreeMap<String, u64> {
        self.stats.methods.lock().unwrap().clone()
    }

    /// The most recent request whose body was read completely.
    pub fn last_request(&self) -> Option<SeenRequest> {
        self.stats.last.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn hyper_connection(
    stream: tokio::net::TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    behavior: Arc<Behavior>,
    body: Bytes,
    stats: Arc<Stats>,
) {
    // Responses on this connection so far, for close_every.
    let served = Arc::new(AtomicU64::new(0));
    let service = service_fn(move |req| handle(req, behavior.clone(), body.clone(), stats.clone(), served.clone()));
    let builder = auto::Builder::new(TokioExecutor::new());
    match tls {
        None => {
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        }
        Some(acceptor) => {
            if let Ok(stream) = acceptor.accept(stream).await {
                let _ = builder.serve_connection(TokioIo::new(stream), service).await;
            }
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    behavior: Arc<Behavior>,
    body: Bytes,
    stats: Arc<Stats>,
    served: Arc<AtomicU64>,
) -> Result<Response<TestBody>, hyper::Error> {
    let arrived = stats.head(req.method().as_str());
    // hyper never polls the body of an answer to HEAD, so such an answer is counted up front.
    let head = req.method() == hyper::Method::HEAD;
    let (parts, incoming) = req.into_parts();
    let request_body = incoming.collect().await?.to_bytes();
    stats.complete(SeenRequest {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or("/".to_string(), |p| p.to_string()),
        version: format!("{:?}", parts.version),
        headers: parts
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body: request_body.to_vec(),
    });
    let delay = match behavior.slow_every {
        Some((k, slow)) if arrived.is_multiple_of(k) => slow,
        _ => behavior.delay,
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let nth = served.fetch_add(1, Ordering::SeqCst) + 1;
    let chunks = match behavior.chunk_size {
        Some(size) => (0..body.len()).step_by(size).map(|at| body.slice(at..(at + size).min(body.len()))).collect(),
        None if body.is_empty() => Vec::new(),
        None => vec![body],
    };
    let mut response = Response::new(TestBody::new(chunks, behavior.chunk_size.is_none(), head, stats));
    let status = match behavior.status_every {
        Some((k, status)) if arrived.is_multiple_of(k) => status,
        _ => behavior.status,
    };
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    for (name, value) in &behavior.headers {
        headers.append(HeaderName::try_from(name.as_str()).unwrap(), HeaderValue::try_from(value.as_str()).unwrap());
    }
    if behavior.close_every.is_some_and(|k| nth.is_multiple_of(k)) {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    Ok(response)
}

/// A response body of ready chunks that counts the response when its last chunk is handed over.
struct TestBody {
    chunks: std::collections::VecDeque<Bytes>,
    /// Known length (Content-Length) rather than chunked.
    exact: bool,
    /// Already counted (answers to HEAD, empty bodies): hyper may never poll those.
    counted: bool,
    stats: Arc<Stats>,
}

impl TestBody {
    fn new(chunks: Vec<Bytes>, exact: bool, count_now: bool, stats: Arc<Stats>) -> TestBody {
        let counted = count_now || chunks.is_empty();
        if counted {
            stats.responded();
        }
        TestBody { chunks: chunks.into(), exact, counted, stats }
    }
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(chunk) = self.chunks.pop_front() else { return Poll::Ready(None) };
        if self.chunks.is_empty() && !self.counted {
            self.counted = true;
            self.stats.responded();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        if self.exact {
            SizeHint::with_exact(self.chunks.iter().map(|c| c.len() as u64).sum())
        } else {
            SizeHint::default()
        }
    }
}

/// Largest request head the raw server accepts before giving up on the connection.
const RAW_MAX_HEAD: usize = 1 << 20;

async fn raw_connection(mut stream: tokio::net::TcpStream, mode: Arc<RawMode>, stats: Arc<Stats>) {
    let mut buf = Vec::with_capacity(4096);
    if let RawMode::AnswerBeforeBody = &*mode {
        answer_before_body(&mut stream, &mut buf, &stats).await;
        return;
    }
    loop {
        if read_raw_request(&mut stream, &mut buf, &stats).await.is_err() {
            return;
        }
        match &*mode {
            RawMode::Garbage => {
                let _ = stream.write_all(b"this is not HTTP\r\n\x00\x01\x02\xfe\xff\r\n\r\n").await;
                close_gracefully(stream).await;
                return;
            }
            RawMode::Truncated { content_length, sent } => {
                let mut out =
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {content_length}\r\n\r\n")
                        .into_bytes();
                out.extend_from_slice(&body_bytes(*sent.min(content_length)));
                let _ = stream.write_all(&out).await;
                close_gracefully(stream).await;
                return;
            }
            RawMode::HugeHeaders { size } => {
                let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n".to_vec();
                let padding = "p".repeat(1000);
                let mut n = 0;
                while out.len() < *size {
                    out.extend_from_slice(format!("x-padding-{n}: {padding}\r\n").as_bytes());
                    n += 1;
                }
                out.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
                stats.responded();
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
            RawMode::Silent => {
                // Hold the connection until the client gives up; what it sends is ignored.
                let mut sink = [0u8; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            RawMode::EarlyHints { body_len } => {
                let hints = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n";
                if stream.write_all(hints).await.is_err() || stream.flush().await.is_err() {
                    return;
                }
                let mut out =
                    format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n\r\n")
                        .into_bytes();
                out.extend_from_slice(&body_bytes(*body_len));
                stats.responded();
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
            RawMode::Verbatim { response, close } => {
                stats.responded();
                if stream.write_all(response).await.is_err() {
                    return;
                }
                if *close {
                    close_gracefully(stream).await;
                    return;
                }
            }
            RawMode::AnswerBeforeBody => unreachable!("handled above"),
        }
    }
}

async fn answer_before_body(stream: &mut tokio::net::TcpStream, buf: &mut Vec<u8>, stats: &Stats) {
    loop {
        let Ok(head) = read_raw_head(stream, buf, stats).await else { return };
        stats.responded();
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await.is_err() {
            return;
        }
        if read_raw_body(stream, buf, head, stats).await.is_err() {
            return;
        }
    }
}

/// Sends FIN and waits (briefly) for the client to close, so the client sees an orderly close
/// after our last byte rather than a reset caused by unread data.
async fn close_gracefully(mut stream: tokio::net::TcpStream) {
    let _ = stream.shutdown().await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// Reads one request (head, then a Content-Length or chunked body) and records it.
async fn read_raw_request<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>, stats: &Stats) -> io::Result<()> {
    let head = read_raw_head(stream, buf, stats).await?;
    read_raw_body(stream, buf, head, stats).await
}

/// Reads and counts one request head.
async fn read_raw_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    stats: &Stats,
) -> io::Result<SeenRequest> {
    let head_end = loop {
        if let Some(at) = find(buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > RAW_MAX_HEAD {
            return Err(invalid("request head too large".into()));
        }
        fill(stream, buf).await?;
    };
    let head: Vec<u8> = buf.drain(..head_end).collect();
    let head = String::from_utf8_lossy(&head[..head.len() - 4]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let version = parts.next().unwrap_or("").to_string();
    stats.head(&method);
    let well_formed = !method.is_empty()
        && method.bytes().all(|b| b.is_ascii_uppercase())
        && path.starts_with('/')
        && version.starts_with("HTTP/1.")
        && parts.next().is_none();
    if !well_formed {
        stats.bad_heads.fetch_add(1, Ordering::SeqCst);
    }
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(SeenRequest { method, path, version, headers, body: Vec::new() })
}

/// Reads the body `head` announces (Content-Length or chunked) and records the request.
async fn read_raw_body<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
    head: SeenRequest,
    stats: &Stats,
) -> io::Result<()> {
    let SeenRequest { method, path, version, headers, .. } = head;
    let mut body = Vec::new();
    if header_lookup(&headers, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let line = take_line(stream, buf).await?;
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| invalid("bad chunk size".into()))?;
            if size == 0 {
                while !take_line(stream, buf).await?.is_empty() {}
                break;
            }
            while buf.len() < size + 2 {
                fill(stream, buf).await?;
            }
            body.extend(buf.drain(..size));
            buf.drain(..2);
        }
    } else if let Some(len) = header_lookup(&headers, "content-length") {
        let len: usize = len.parse().map_err(|_| invalid("bad content-length".into()))?;
        while buf.len() < len {
            fill(stream, buf).await?;
        }
        body.extend(buf.drain(..len));
    }
    stats.complete(SeenRequest { method, path, version, headers, body });
    Ok(())
}

async fn take_line<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> io::Result<String> {
    loop {
        if let Some(at) = find(buf, b"\r\n") {
            let line: Vec<u8> = buf.drain(..at + 2).collect();
            return Ok(String::from_utf8_lossy(&line[..at]).into_owned());
        }
        fill(stream, buf).await?;
    }
}

/// Appends what the socket has to `buf`; EOF is an error (the client went away mid-request).
async fn fill<S: AsyncRead + Unpin>(stream: &mut S, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------------------------
// nginx
// ---------------------------------------------------------------------------------------------

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
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let tls_addr = options.tls.then(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
            let h2c_addr = options.h2c.then(|| SocketAddr::from(([127, 0, 0, 1], free_port())));
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
    worker_connections 8192;
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

// ---------------------------------------------------------------------------------------------
// A listener that never accepts
// ---------------------------------------------------------------------------------------------

/// A TCP listener on 127.0.0.1 with a backlog of 0 that never accepts: once its tiny queue is
/// full, the kernel drops further SYNs, so connects hang until the client gives up. Closed on
/// drop.
pub struct UnacceptingListener {
    fd: i32,
    addr: SocketAddr,
}

pub fn unaccepting_listener() -> UnacceptingListener {
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(libc::bind(fd, (&raw const sin).cast(), len), 0, "bind: {}", io::Error::last_os_error());
        assert_eq!(libc::listen(fd, 0), 0, "listen: {}", io::Error::last_os_error());
        let mut len = len;
        assert_eq!(libc::getsockname(fd, (&raw mut sin).cast(), &mut len), 0);
        let addr = SocketAddr::from(([127, 0, 0, 1], u16::from_be(sin.sin_port)));
        UnacceptingListener { fd, addr }
    }
}

impl UnacceptingListener {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for UnacceptingListener {
    fn drop(&mut self) {
        // SAFETY: closing the descriptor this struct owns.
        unsafe { libc::close(self.fd) };
    }
}

// ---------------------------------------------------------------------------------------------
// Background processes: worker daemons and controllers that must be signalled mid-run
// ---------------------------------------------------------------------------------------------

/// How long [`WorkerProcess`] waits for a worker (or any daemon) to accept connections.
pub const DAEMON_START_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `signal` to process `pid` (one of ours), ignoring a process that is already gone.
pub fn send_signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on a child this test started; no memory is involved.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// Polls `condition` every 10 ms for at most `timeout`; true as soon as it holds.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `f` on a thread of its own that has first joined the network namespace `netns` (made
/// with `ip netns add`), so that sockets `f` makes live there. Only the helper thread moves;
/// the test's other threads stay where they are. Needs root.
pub fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = PathBuf::from("/run/netns").join(netns);
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
        use std::os::fd::AsRawFd;
        // SAFETY: setns(2) on an open namespace file; it affects only this thread.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns({}): {}", path.display(), io::Error::last_os_error());
        f()
    })
    .join()
    .expect("the thread in the network namespace panicked")
}

/// True once `addr` accepts a TCP connection (from network namespace `netns` when given).
fn accepts(addr: SocketAddr, netns: Option<&str>) -> bool {
    let connect = move || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
    match netns {
        Some(ns) => in_netns(ns, connect),
        None => connect(),
    }
}

/// A daemon running as a child process — typically `volley worker` — killed (SIGKILL) on drop.
/// Its stderr goes to a temp file ([`WorkerProcess::log`]) so that a chatty daemon can never
/// block on a full pipe.
pub struct WorkerProcess {
    child: Child,
    addr: SocketAddr,
    log: tempfile::NamedTempFile,
    exited: Option<std::process::ExitStatus>,
}

impl WorkerProcess {
    /// `volley worker --listen 127.0.0.1:PORT EXTRA...` on a free port, once it accepts
    /// connections. `VOLLEY_TOKEN` is removed from its environment; pass `--token-file` for a
    /// token. Retries on another port if the one picked was taken in the meantime.
    pub fn start(extra: &[&str]) -> WorkerProcess {
        let mut last = String::new();
        for _ in 0..5 {
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let mut cmd = volley_command(["worker", "--listen", &addr.to_string()]);
            cmd.args(extra).env_remove("VOLLEY_TOKEN");
            match WorkerProcess::spawn(cmd, addr, None) {
                Ok(worker) => return worker,
                Err(why) if why.contains("in use") => last = why,
                Err(why) => panic!("volley worker did not start: {why}"),
            }
        }
        panic!("volley worker did not start: {last}");
    }

    /// Spawns `cmd` (its own process group, stdin and stdout closed, stderr to a temp file) and
    /// waits until `addr` accepts connections, seen from network namespace `netns` when given,
    /// for at most [`DAEMON_START_TIMEOUT`]. `Err` with its stderr if it exited first or never
    /// listened (the process is killed then).
    pub fn spawn(mut cmd: Command, addr: SocketAddr, netns: Option<&str>) -> Result<WorkerProcess, String> {
        let log = tempfile::NamedTempFile::new().expect("a temp file for the daemon's stderr");
        let stderr = log.reopen().expect("reopening the temp file");
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        let mut daemon = WorkerProcess { child, addr, log, exited: None };
        let deadline = Instant::now() + DAEMON_START_TIMEOUT;
        loop {
            if let Some(status) = daemon.child.try_wait().expect("waiting for the daemon") {
                daemon.exited = Some(status);
                return Err(format!("{cmd:?} exited with {status}: {}", daemon.log()));
            }
            if accepts(addr, netns) {
                return Ok(daemon);
            }
            if Instant::now() >= deadline {
                daemon.kill();
                return Err(format!("{cmd:?} did not accept connections on {addr} within 10 s: {}", daemon.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `HOST:PORT`, as `--workers` takes it.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote on stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().expect("waiting for the daemon");
        }
        self.exited.is_none()
    }

    /// SIGKILL, and reap it. Does nothing to a process that has already exited.
    pub fn kill(&mut self) {
        if self.is_running() {
            send_signal(self.child.id(), libc::SIGKILL);
            self.exited = Some(self.child.wait().expect("waiting for the killed daemon"));
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A command running in the background with its stdout and stderr captured, for tests that
/// signal it mid-run; killed (its whole process group) if still running when dropped.
pub struct BackgroundProcess {
    child: Child,
    shown: String,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
    started: Instant,
}

impl BackgroundProcess {
    /// Spawns `cmd` in its own process group, stdin closed, stdout and stderr captured.
    pub fn spawn(mut cmd: Command) -> BackgroundProcess {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
        let shown = format!("{cmd:?}");
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {shown}: {e}"));
        let stdout = Some(drain(child.stdout.take().expect("piped stdout")));
        let stderr = Some(drain(child.stderr.take().expect("piped stderr")));
        BackgroundProcess { child, shown, stdout, stderr, started: Instant::now() }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Time since it was spawned.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Sends `signal` (SIGINT, SIGKILL, ...) to the process itself.
    pub fn signal(&self, signal: libc::c_int) {
        send_signal(self.child.id(), signal);
    }

    /// True while the process has not exited (it is not reaped here: see [`Self::wait`]).
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("waiting for the child").is_none()
    }

    /// Waits for it to exit by itself for at most `timeout` and returns its output; panics
    /// (after killing it) with what it printed if it runs longer.
    pub fn wait(&mut self, timeout: Duration) -> Output {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the child") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let timed_out = status.is_none();
        let status = status.unwrap_or_else(|| {
            send_signal_group(self.child.id(), libc::SIGKILL);
            self.child.wait().expect("waiting for the killed child")
        });
        let stdout = self.stdout.take().map(|h| h.join().expect("stdout reader")).unwrap_or_default();
        let stderr = self.stderr.take().map(|h| h.join().expect("stderr reader")).unwrap_or_default();
        let output = Output { status, stdout, stderr };
        if timed_out {
            panic!("{} still running after {timeout:?}; killed it.\n{}", self.shown, describe_output(&output));
        }
        output
    }
}

impl Drop for BackgroundProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            send_signal_group(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// Sends `signal` to the process group led by `pid` (a child spawned with `process_group(0)`).
fn send_signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) on the process group of a child this test started.
    unsafe { libc::kill(-(pid as libc::pid_t), signal) };
}
