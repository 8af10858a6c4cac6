//! A thread's feeders at run time: which row each iteration takes.

use std::ops::Range;
use std::sync::Arc;

use super::{Feeder, FeederMode, Table};
use crate::random::{generator_state, next_random};

/// A thread's view of the run's feeders.
#[derive(Debug, Clone, Default)]
pub(crate) struct Feeds {
    feeds: Box<[Feed]>,
}

#[derive(Debug, Clone)]
struct Feed {
    table: Arc<Table>,
    rows: Range<usize>,
    mode: FeederMode,
    /// Shard: the next unused row.
    next: usize,
    /// Random: xorshift64* state, never 0.
    rng: u64,
}

/// What taking rows for an iteration came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowPick {
    /// Rows taken (this many, one per feeder the iteration uses).
    Taken(u64),
    /// A shard feeder the iteration needs has no row left.
    RanOut,
}

/// No row: what a row index is before an iteration took one.
pub(crate) const NO_ROW: u32 = u32::MAX;

impl Feeds {
    /// A thread's feeders: `feeders` with the thread's share of their rows (`Feeder::part`);
    /// random draws seeded by `seed` and `stream` (worker and thread apart).
    pub(crate) fn new(feeders: &[Feeder], seed: u64, stream: u64) -> Feeds {
        let feeds = feeders
            .iter()
            .enumerate()
            .map(|(i, f)| Feed {
                table: f.table.clone(),
                rows: f.rows.clone(),
                mode: f.mode,
                next: f.rows.start,
                rng: generator_state(seed ^ stream.rotate_left(17) ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            })
            .collect();
        Feeds { feeds }
    }

    pub(crate) fn len(&self) -> usize {
        self.feeds.len()
    }

    /// Whether the feeders of `mask` (bit i: feeder i) can each give one more row.
    #[inline]
    pub(crate) fn has_rows(&self, mask: u32) -> bool {
        self.used(mask).all(|(_, f)| !f.rows.is_empty() && (f.mode != FeederMode::Shard || f.next < f.rows.end))
    }

    /// Takes one row of each feeder of `mask` for iteration `iteration` of virtual user `vu`,
    /// into `rows` (one entry per feeder).
    #[inline]
    pub(crate) fn take(&mut self, mask: u32, vu: u64, iteration: u64, rows: &mut [u32]) -> RowPick {
        if !self.has_rows(mask) {
            return RowPick::RanOut;
        }
        let mut taken = 0;
        for (i, feed) in self.feeds.iter_mut().enumerate().filter(|(i, _)| mask & (1 << i) != 0) {
            let len = feed.rows.len() as u64;
            let row = match feed.mode {
                FeederMode::Shard => {
                    feed.next += 1;
                    feed.next - 1
                }
                FeederMode::Cycle => feed.rows.start + (vu.wrapping_add(iteration) % len) as usize,
                FeederMode::Random => feed.rows.start + (next_random(&mut feed.rng) % len) as usize,
            };
            if let Some(slot) = rows.get_mut(i) {
                *slot = row as u32;
            }
            taken += 1;
        }
        RowPick::Taken(taken)
    }

    /// Cell `column` of row `row` of feeder `feeder` (empty for [`NO_ROW`]).
    #[inline]
    pub(crate) fn cell(&self, feeder: usize, row: u32, column: usize) -> &[u8] {
        match self.feeds.get(feeder) {
            Some(feed) if row != NO_ROW => feed.table.cell(row as usize, column),
            _ => &[],
        }
    }

    fn used(&self, mask: u32) -> impl Iterator<Item = (usize, &Feed)> {
        self.feeds.iter().enumerate().filter(move |(i, _)| mask & (1 << i) != 0)
    }
}
