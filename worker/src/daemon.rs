//! Starting and stopping the daemon: the listener, TLS, the token check around the service,
//! and the signals that end `volley worker`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tracing::{info, warn};
use volley_proto::MAX_MESSAGE_BYTES;
use volley_proto::v1::worker_server::WorkerServer;

use crate::allow::AllowList;
use crate::auth::Auth;
use crate::config::{WorkerConfig, WorkerError, error_chain};
use crate::host;
use crate::incoming::Incoming;
use crate::service::WorkerService;
use crate::state::State;

/// On shutdown, how long a run in progress gets to stop and report before connections close.
const RUN_STOP_WAIT: Duration = Duration::from_secs(2);

/// On shutdown, how long open connections get to finish before they are cut.
const DRAIN_WAIT: Duration = Duration::from_secs(3);

/// A worker serving in the background on the current tokio runtime. Dropping it asks the
/// server to stop (without waiting); [`RunningWorker::shutdown`] waits for it.
pub struct RunningWorker {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), tonic::transport::Error>>,
}

impl RunningWorker {
    /// The address the worker listens on (with the port picked when 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops a run in progress, lets it report, and stops serving.
    pub async fn shutdown(self) -> Result<(), WorkerError> {
        self.shutdown_because("the worker was shut down").await
    }

    /// [`RunningWorker::shutdown`], telling the controller of a run in progress `why` it ended.
    async fn shutdown_because(mut self, why: &str) -> Result<(), WorkerError> {
        self.state.stop_current(why);
        let since = Instant::now();
        while self.state.is_busy() && since.elapsed() < RUN_STOP_WAIT {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if let Some(stop) = self.stop.take() {
            // The server may have ended on its own already; then there is nobody to tell.
            let _ = stop.send(());
        }
        match tokio::time::timeout(DRAIN_WAIT, &mut self.task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(WorkerError::Serve(error_chain(&e))),
            Ok(Err(e)) => Err(WorkerError::Serve(e.to_string())),
            Err(_) => {
                warn!("connections still open after {DRAIN_WAIT:?}; closing them");
                self.task.abort();
                Ok(())
            }
        }
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            self.state.stop_current("the worker was shut down");
            let _ = stop.send(());
        }
    }
}

/// Binds `config.listen` and serves in the background on the current tokio runtime. Returns
/// once the socket listens, so a client may connect at once.
pub async fn spawn(config: WorkerConfig) -> Result<RunningWorker, WorkerError> {
    let token = check_token(&config)?;
    // Said once, at start-up, where the operator looks (journal, pod log), instead of only in
    // the Hello reply to every controller that comes by: epoll in place of a blocked io_uring.
    volley_engine::choose_engine(volley_engine::EngineChoice::Auto).map_err(|e| WorkerError::IoUring(e.to_string()))?;
    let allow = AllowList::parse(&config.allow_targets).map_err(|e| WorkerError::AllowList(e.to_string()))?;
    let server = tls_server(&config)?;
    let name = config.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(host::hostname);
    let mut state = State::new(name, host::physical_cores(), volley_engine::kernel_release(), allow);
    state.metrics = config.metrics.clone();
    state.runner = config.runner.clone();
    let state = Arc::new(state);

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| WorkerError::Bind { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(|source| WorkerError::Bind { addr: config.listen, source })?;
    let incoming = Incoming::new(listener, config.idle_timeout);

    let service = InterceptedService::new(
        WorkerServer::new(WorkerService::new(state.clone())).max_decoding_message_size(MAX_MESSAGE_BYTES),
        Auth::new(token.as_deref()),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve_with_incoming_shutdown(service, incoming, async {
        // A dropped sender ends the server just like a sent signal.
        let _ = stopped.await;
    }));
    info!(
        %addr,
        name = %state.name,
        cores = state.cores,
        tls = config.tls.is_some(),
        client_certificates = config.client_ca.is_some(),
        token = token.is_some(),
        idle_timeout = ?config.idle_timeout,
        metrics = %config.metrics.as_ref().map_or("off".to_string(), |m| format!("http://{}/metrics", m.addr())),
        allowed_targets = %if state.allow.allows_everything() { "any".to_string() } else { state.allow.to_string() },
        "volley worker listening"
    );
    Ok(RunningWorker { addr, state, stop: Some(stop), task })
}

/// Runs a worker until SIGINT or SIGTERM: `volley worker`. Builds its own runtime and logs to
/// stderr (RUST_LOG, default "info").
pub fn serve(config: WorkerConfig) -> Result<(), WorkerError> {
    install_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("volley-worker")
        .enable_all()
        .build()
        .map_err(WorkerError::Runtime)?;
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate()).map_err(WorkerError::Signal)?;
        let mut interrupt = signal(SignalKind::interrupt()).map_err(WorkerError::Signal)?;
        let mut worker = spawn(config).await?;
        let caught = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
            ended = &mut worker.task => {
                worker.stop = None;
                return match ended {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(WorkerError::Serve(error_chain(&e))),
                    Err(e) => Err(WorkerError::Serve(e.to_string())),
                };
            }
        };
        info!("{caught}: shutting down");
        // A run in progress ends early; its controller is told why, not left to guess.
        worker.shutdown_because(&format!("the worker got {caught} and shut down")).await
    })
}

/// Logs to stderr; a subscriber the embedding program installed already stays.
fn install_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only for a person watching; a log file or journald gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).try_init();
}

/// The token to require, after checking that one is there when the listener is exposed.
fn check_token(config: &WorkerConfig) -> Result<Option<String>, WorkerError> {
    match &config.token {
        Some(t) if t.is_empty() => Err(WorkerError::EmptyToken),
        Some(t) => Ok(Some(t.clone())),
        None if config.listen.ip().to_canonical().is_loopback() => Ok(None),
        None => Err(WorkerError::NoToken(config.listen)),
    }
}

/// The server builder, with TLS (and client certificates) when configured.
fn tls_server(config: &WorkerConfig) -> Result<Server, WorkerError> {
    let server = Server::builder();
    let Some(files) = &config.tls else {
        return match config.client_ca {
            Some(_) => Err(WorkerError::ClientCaWithoutTls),
            None => Ok(server),
        };
    };
    let cert = read(&files.cert, "TLS certificate")?;
    let key = read(&files.key, "TLS key")?;
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
    if let Some(ca) = &config.client_ca {
        tls = tls.client_ca_root(Certificate::from_pem(read(ca, "client CA")?));
    }
    server.tls_config(tls).map_err(|e| WorkerError::Tls(error_chain(&e)))
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, WorkerError> {
    std::fs::read(path).map_err(|source| WorkerError::ReadFile { what, path: path.to_path_buf(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TlsFiles;

    fn config(listen: &str) -> WorkerConfig {
        WorkerConfig::new(listen.parse().expect("valid address"))
    }

    #[test]
    fn a_loopback_worker_needs_no_token() {
        assert_eq!(check_token(&config("127.0.0.1:0")).expect("fine"), None);
        assert_eq!(check_token(&config("[::1]:0")).expect("fine"), None);
        assert_eq!(check_token(&config("[::ffff:127.0.0.1]:0")).expect("fine"), None);
    }

    #[test]
    fn an_exposed_worker_without_a_token_is_refused() {
        for listen in ["0.0.0.0:0", "[::]:7000", "192.168.1.2:7000"] {
            let err = check_token(&config(listen)).expect_err(listen);
            assert!(matches!(err, WorkerError::NoToken(_)), "{listen}: {err}");
            assert!(err.to_string().contains("without a token"));
        }
        let mut c = config("0.0.0.0:0");
        c.token = Some("s3cret".into());
        assert_eq!(check_token(&c).expect("fine").as_deref(), Some("s3cret"));
    }

    #[test]
    fn an_empty_token_is_refused() {
        let mut c = config("127.0.0.1:0");
        c.token = Some(String::new());
        assert!(matches!(check_token(&c), Err(WorkerError::EmptyToken)));
    }

    #[tokio::test]
    async fn spawn_refuses_an_exposed_listener_without_a_token() {
        let err = spawn(config("0.0.0.0:0")).await.err().expect("refused");
        assert!(matches!(err, WorkerError::NoToken(_)), "{err}");
    }

    #[tokio::test]
    async fn spawn_refuses_a_bad_allow_list() {
        let mut c = config("127.0.0.1:0");
        c.allow_targets = vec!["10.0.0.0/40".into()];
        let err = spawn(c).await.err().expect("refused");
        assert!(err.to_string().contains("10.0.0.0/40"), "{err}");
    }

    #[test]
    fn unreadable_tls_files_are_named() {
        let mut c = config("127.0.0.1:0");
        c.tls = Some(TlsFiles { cert: "/nonexistent/cert.pem".into(), key: "/nonexistent/key.pem".into() });
        let Err(err) = tls_server(&c) else { panic!("unreadable files accepted") };
        assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
        let mut c = config("127.0.0.1:0");
        c.client_ca = Some("/nonexistent/ca.pem".into());
        assert!(matches!(tls_server(&c), Err(WorkerError::ClientCaWithoutTls)));
    }

    #[test]
    fn a_certificate_that_is_not_one_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, "not a certificate").expect("write");
        std::fs::write(&key, "not a key").expect("write");
        let mut c = config("127.0.0.1:0");
        c.tls = Some(TlsFiles { cert, key });
        assert!(matches!(tls_server(&c), Err(WorkerError::Tls(_))));
    }
}
