//! Feeders on the wire. A shard declares each feeder (columns, mode, and how many rows and bytes
//! of this worker's follow); the rows come after it as `FeederRows` commands of at most
//! [`CHUNK_BYTES`] each, so that no message holds a large feeder, the controller holds one
//! chunk per worker beyond its one copy, and the worker builds its one copy as they arrive.

use std::sync::Arc;

use volley_engine::{Feeder, FeederMode, MAX_COLUMNS, MAX_FEEDERS, MAX_TABLE_BYTES, Table};
use volley_proto::v1;

use super::WireError;

/// The cells one `FeederRows` carries, at most (a row larger than this goes alone).
pub const CHUNK_BYTES: usize = 256 << 10;

/// The most bytes of cells a worker takes for all of a shard's feeders together.
const MAX_SHARD_FEEDER_BYTES: u64 = 4 * MAX_TABLE_BYTES;

pub(super) fn feeder_to_proto(f: &Feeder) -> v1::Feeder {
    v1::Feeder {
        name: f.name.clone(),
        columns: f.columns.clone(),
        mode: match f.mode {
            FeederMode::Shard => 0,
            FeederMode::Cycle => 1,
            FeederMode::Random => 2,
        },
        rows: f.rows.len() as u64,
        bytes: f.table.bytes_of(f.rows.clone()) as u64,
    }
}

/// The rows of `feeders` (each its plan's rows), as the commands that carry them, in order.
pub fn feeder_rows(feeders: &[Feeder]) -> impl Iterator<Item = v1::FeederRows> + '_ {
    feeders.iter().enumerate().flat_map(|(i, f)| {
        let mut row = f.rows.start;
        std::iter::from_fn(move || {
            if row >= f.rows.end {
                return None;
            }
            let first = row;
            let mut bytes = 0;
            while row < f.rows.end && (row == first || bytes < CHUNK_BYTES) {
                bytes += f.table.bytes_of(row..row + 1);
                row += 1;
            }
            let (cells, lengths) = f.table.slice(first..row);
            Some(v1::FeederRows { feeder: i as u32, cells: cells.to_vec(), lengths: lengths.collect() })
        })
    })
}

/// A worker's feeders as their rows arrive.
pub struct Assembly {
    tables: Vec<Table>,
    /// Per feeder: the rows and bytes the shard said would come.
    want: Vec<(u64, u64)>,
}

impl Assembly {
    /// What `shard` says will come; sizes beyond what a worker takes are refused before any row.
    pub fn new(shard: &v1::Shard) -> Result<Assembly, WireError> {
        let invalid = |why: String| Err(WireError::Shard(why));
        if shard.feeders.len() > MAX_FEEDERS {
            return invalid(format!("{} feeders is more than the {MAX_FEEDERS} a run may have", shard.feeders.len()));
        }
        let total: u64 = shard.feeders.iter().map(|f| f.bytes).fold(0, u64::saturating_add);
        if total > MAX_SHARD_FEEDER_BYTES {
            return invalid(format!(
                "{total} bytes of feeder rows is more than a worker takes ({MAX_SHARD_FEEDER_BYTES})"
            ));
        }
        let mut tables = Vec::with_capacity(shard.feeders.len());
        for f in &shard.feeders {
            if f.columns.is_empty() || f.columns.len() > MAX_COLUMNS {
                return invalid(format!("feeder {}: {} columns", f.name, f.columns.len()));
            }
            if f.bytes > MAX_TABLE_BYTES || f.rows > u64::from(u32::MAX) {
                return invalid(format!(
                    "feeder {}: {} rows of {} bytes is more than a feeder may hold",
                    f.name, f.rows, f.bytes
                ));
            }
            // Room for all of it at once (bounded above), so that the table never grows by
            // doubling, which would hold two copies at its peak; pages the rows never fill are
            // never resident.
            let mut table = Table::new(f.columns.len());
            table.reserve(f.rows as usize, f.bytes as usize);
            tables.push(table);
        }
        Ok(Assembly { tables, want: shard.feeders.iter().map(|f| (f.rows, f.bytes)).collect() })
    }

    /// Whether every row said has come.
    pub fn is_complete(&self) -> bool {
        self.tables.iter().zip(&self.want).all(|(t, &(rows, _))| t.rows() as u64 == rows)
    }

    /// Takes rows, in order: a feeder's rows past what was said, or another's before its turn,
    /// are refused.
    pub fn add(&mut self, rows: v1::FeederRows) -> Result<(), WireError> {
        let i = rows.feeder as usize;
        let invalid = |why: &str| Err(WireError::Shard(format!("feeder rows: {why}")));
        let Some(&(want_rows, want_bytes)) = self.want.get(i) else {
            return invalid("for a feeder the shard does not have");
        };
        if self.tables[..i].iter().zip(&self.want).any(|(t, &(r, _))| t.rows() as u64 != r) {
            return invalid("out of order");
        }
        let table = &mut self.tables[i];
        table
            .extend(&rows.cells, &rows.lengths, want_bytes)
            .map_err(|e| WireError::Shard(format!("feeder rows: {e}")))?;
        if table.rows() as u64 > want_rows {
            return invalid("more rows than the shard said");
        }
        Ok(())
    }

    /// The feeders' tables, complete.
    pub fn finish(self) -> Vec<Table> {
        self.tables
    }
}

/// The shard's feeders over their `tables` (one per feeder, as [`Assembly`] built them).
pub(super) fn feeders_from_proto(shard: &v1::Shard, tables: Vec<Table>) -> Result<Vec<Feeder>, WireError> {
    if tables.len() != shard.feeders.len() {
        return Err(WireError::Shard(format!(
            "{} feeders declared, {} with their rows",
            shard.feeders.len(),
            tables.len()
        )));
    }
    shard
        .feeders
        .iter()
        .zip(tables)
        .map(|(f, table)| {
            let mode = match f.mode {
                0 => FeederMode::Shard,
                1 => FeederMode::Cycle,
                2 => FeederMode::Random,
                m => return Err(WireError::Shard(format!("feeder {}: mode {m} is not known to this worker", f.name))),
            };
            if table.rows() as u64 != f.rows {
                return Err(WireError::Shard(format!(
                    "feeder {}: {} of its {} rows came",
                    f.name,
                    table.rows(),
                    f.rows
                )));
            }
            Ok(Feeder::new(f.name.clone(), f.columns.clone(), mode, Arc::new(table)))
        })
        .collect()
}
