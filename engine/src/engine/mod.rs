//! Which I/O runs beneath the engine's loops: io_uring, the product's engine, or epoll where
//! io_uring is blocked (a container runtime's default seccomp profile, a sysctl). The sessions,
//! schedule and counting above are the same either way (`driver/ops.rs` is the seam).

use std::sync::Once;

pub(crate) mod kind;

pub use kind::{Engine, EngineChoice};

use crate::error::EngineError;
use crate::ring::{RingSupport, kernel_release, probe_io_uring};

/// What epoll costs against io_uring, as the fallback's line says it (bench/h1.sh, h2.sh, h3.sh).
pub const EPOLL_COST: &str =
    "more CPU per request than io_uring (in bench/: 1.0 to 1.3x on HTTP/1.1 and HTTP/3, about the same on HTTP/2)";

/// Decides the engine for `choice`: io_uring must work when asked for by name (else its
/// one-line reason); auto takes it when it works and otherwise falls back to epoll, saying why
/// and what it costs once per process on stderr (and in `RingSupport::fallback`).
pub fn choose_engine(choice: EngineChoice) -> Result<RingSupport, EngineError> {
    match choice {
        EngineChoice::IoUring => probe_io_uring(),
        EngineChoice::Epoll => Ok(RingSupport::epoll(None)),
        EngineChoice::Auto => match probe_io_uring() {
            Ok(ring) => Ok(ring),
            Err(EngineError::IoUringUnavailable(why)) => {
                static SAID: Once = Once::new();
                SAID.call_once(|| eprintln!("volley: {}", fallback_line(&why)));
                Ok(RingSupport::epoll(Some(why)))
            }
            Err(e) => Err(e),
        },
    }
}

/// The one line said when auto falls back to epoll.
pub fn fallback_line(why: &str) -> String {
    format!("running on epoll, not io_uring ({why}); epoll costs {EPOLL_COST}")
}

impl RingSupport {
    /// The epoll engine on this kernel; `fallback`: why io_uring was not used, when auto chose.
    pub fn epoll(fallback: Option<String>) -> Self {
        RingSupport { kernel: kernel_release(), tuned: false, min_wait: false, engine: Engine::Epoll, fallback }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_auto_is_the_default() {
        for name in EngineChoice::NAMES {
            assert_eq!(EngineChoice::parse(name).map(EngineChoice::name), Some(name));
        }
        assert_eq!(EngineChoice::default(), EngineChoice::Auto);
        assert_eq!(EngineChoice::parse("uring"), None);
        assert_eq!(Engine::parse("epoll"), Some(Engine::Epoll));
        assert_eq!(Engine::parse("auto"), None);
    }

    #[test]
    fn epoll_asked_for_is_epoll_with_no_fallback_and_the_fallback_line_is_one_line() {
        let ring = choose_engine(EngineChoice::Epoll).unwrap();
        assert_eq!((ring.engine, ring.fallback), (Engine::Epoll, None));
        let line = fallback_line("io_uring is blocked by a seccomp filter");
        assert!(!line.contains('\n') && line.contains("epoll") && line.contains("seccomp"), "{line}");
    }
}
