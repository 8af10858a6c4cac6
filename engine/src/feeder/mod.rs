//! Feeders: rows of test data whose columns fill template slots (`{{users.email}}`). The
//! controller reads the file (CSV or JSON lines) into a [`Table`] and ships each worker its
//! rows; the engine only picks rows. Each iteration that uses a feeder takes one row of it, by
//! the feeder's [`FeederMode`]: every step of that iteration sees the same row.

mod rows;
mod table;

use std::ops::Range;
use std::sync::Arc;

pub(crate) use rows::{Feeds, NO_ROW, RowPick};
pub use table::{MAX_TABLE_BYTES, Table, TableError};

/// The most feeders a run may have.
pub const MAX_FEEDERS: usize = 16;

/// The most columns a feeder may have.
pub const MAX_COLUMNS: usize = 256;

/// How many bytes of cells a run's feeders may hold together unless the command line allows
/// more (`--max-feeder-bytes`): each worker holds its rows in memory, once.
pub const DEFAULT_MAX_FEEDER_BYTES: u64 = 1 << 30;

/// Whether `name` may name a feeder or one of its columns: letters, digits, `_` and `-`, at
/// least one, so that a slot `{{FEEDER.COLUMN}}` names it unambiguously.
pub fn is_feeder_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// How iterations take rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeederMode {
    /// Every row at most once in the whole run: the rows are split exactly over workers and
    /// each worker's over its threads; a thread whose rows are used up starts no more
    /// iterations that need them (the report says the data ran out).
    Shard,
    /// Each virtual user (connection) walks the rows in turn, starting at its own index, and
    /// starts over at the end.
    Cycle,
    /// Each iteration draws a row at random, from a generator seeded by `--seed` (and the
    /// worker and thread): the same plan draws the same rows.
    Random,
}

impl FeederMode {
    pub const ALL: [FeederMode; 3] = [FeederMode::Shard, FeederMode::Cycle, FeederMode::Random];

    pub fn name(self) -> &'static str {
        match self {
            FeederMode::Shard => "shard",
            FeederMode::Cycle => "cycle",
            FeederMode::Random => "random",
        }
    }
}

/// A feeder: its name (what slots call it by), its columns, how rows are taken, and which rows
/// of its table are this plan's.
#[derive(Debug, Clone)]
pub struct Feeder {
    pub name: String,
    pub columns: Vec<String>,
    pub mode: FeederMode,
    pub table: Arc<Table>,
    /// This plan's rows of `table`: all of them, but in shard mode, where a split's part holds
    /// its share.
    pub rows: Range<usize>,
}

impl PartialEq for Feeder {
    fn eq(&self, other: &Feeder) -> bool {
        self.name == other.name
            && self.columns == other.columns
            && self.mode == other.mode
            && self.rows == other.rows
            && (Arc::ptr_eq(&self.table, &other.table) || self.table == other.table)
    }
}

impl Feeder {
    /// A feeder of all of `table`'s rows.
    pub fn new(name: String, columns: Vec<String>, mode: FeederMode, table: Arc<Table>) -> Feeder {
        let rows = 0..table.rows();
        Feeder { name, columns, mode, table, rows }
    }

    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

#[cfg(test)]
mod tests;
