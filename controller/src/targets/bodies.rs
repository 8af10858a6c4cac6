//! Request bodies as a file gives them, inline or from body files relative to its directory,
//! counted toward a run's limit as they come: the plan's check would find too many too, but only
//! after every body was held.

use std::path::{Path, PathBuf};

use volley_engine::MAX_BODY_BYTES;

use super::error::{Problem, shown};
use super::read_at_most;

/// The bodies of one file's requests so far.
pub(crate) struct Bodies {
    /// Where relative body files are.
    dir: PathBuf,
    bytes: usize,
}

impl Bodies {
    pub(crate) fn new(dir: &Path) -> Bodies {
        Bodies { dir: dir.to_path_buf(), bytes: 0 }
    }

    /// The body file at `path`, read no further than the bodies' limit allows.
    pub(crate) fn read(&mut self, path: &str) -> Result<Vec<u8>, Problem> {
        let full = self.dir.join(path);
        let unreadable = |why| Problem::BodyFile { path: shown(&full.display().to_string()), why };
        let file = std::fs::File::open(&full).map_err(unreadable)?;
        let left = MAX_BODY_BYTES.saturating_sub(self.bytes) as u64;
        let bytes = read_at_most(file, left).map_err(unreadable)?.ok_or(Problem::BodiesTooLarge)?;
        self.count(bytes.len())?;
        Ok(bytes)
    }

    /// Counts a body given inline toward the bodies' limit.
    pub(crate) fn count(&mut self, len: usize) -> Result<(), Problem> {
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes > MAX_BODY_BYTES {
            return Err(Problem::BodiesTooLarge);
        }
        Ok(())
    }
}
