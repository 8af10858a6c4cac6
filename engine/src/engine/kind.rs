//! The engines by name: the one asked for (`--engine`) and the one a run runs on. A leaf, so
//! that the plan and the ring's probe can name them without the choosing that needs both.

/// The engine asked for (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// io_uring when it can be set up here, else epoll (said once on stderr).
    #[default]
    Auto,
    IoUring,
    Epoll,
}

impl EngineChoice {
    /// As the command line and the wire spell them.
    pub const NAMES: [&'static str; 3] = ["auto", "io-uring", "epoll"];

    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::IoUring => "io-uring",
            EngineChoice::Epoll => "epoll",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(EngineChoice::Auto),
            "io-uring" | "io_uring" => Some(EngineChoice::IoUring),
            "epoll" => Some(EngineChoice::Epoll),
            _ => None,
        }
    }
}

/// The engine a run runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    #[default]
    IoUring,
    Epoll,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::IoUring => "io-uring",
            Engine::Epoll => "epoll",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match EngineChoice::parse(name)? {
            EngineChoice::IoUring => Some(Engine::IoUring),
            EngineChoice::Epoll => Some(Engine::Epoll),
            EngineChoice::Auto => None,
        }
    }
}
