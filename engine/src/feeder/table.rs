//! A feeder's rows in one allocation: every cell's bytes end to end, and where each ends.
//! A million rows of a few columns cost their bytes and four more per cell, one copy a worker
//! (its threads share it), however many connections read it.

use std::ops::Range;

/// The most bytes a table may hold: cell ends are 32-bit.
pub const MAX_TABLE_BYTES: u64 = u32::MAX as u64;

/// Rows of `width` cells each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    width: usize,
    /// Every cell's bytes, row after row.
    data: Vec<u8>,
    /// Per cell, row after row: where its bytes end in `data`.
    ends: Vec<u32>,
}

/// Why a row cannot be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("a row of {got} values where the table has {want} columns")]
    Width { want: usize, got: usize },
    #[error("more than {limit} bytes of data")]
    TooLarge { limit: u64 },
    #[error("cell lengths that add up to {lengths} bytes for {data} bytes of data")]
    Lengths { lengths: u64, data: u64 },
}

impl Table {
    /// An empty table of `width` columns.
    pub fn new(width: usize) -> Table {
        Table { width, data: Vec::new(), ends: Vec::new() }
    }

    pub fn width(&self) -> usize {
        self.width
    }

    pub fn rows(&self) -> usize {
        self.ends.len().checked_div(self.width).unwrap_or(0)
    }

    /// The bytes of all cells.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Room for `rows` more rows of `bytes` more bytes, ahead of adding them, as far as the
    /// allocator grants it (the sizes may be a peer's word): rows added beyond it still fit, the
    /// table growing as a `Vec` does.
    pub fn reserve(&mut self, rows: usize, bytes: usize) {
        let _ = self.data.try_reserve_exact(bytes);
        let _ = self.ends.try_reserve_exact(rows.saturating_mul(self.width).min(1 << 26));
    }

    /// Adds a row of exactly `width` cells, as long as the table stays within `limit` bytes.
    pub fn push<C: AsRef<[u8]>>(&mut self, cells: &[C], limit: u64) -> Result<(), TableError> {
        if cells.len() != self.width {
            return Err(TableError::Width { want: self.width, got: cells.len() });
        }
        let limit = limit.min(MAX_TABLE_BYTES);
        let size: u64 = cells.iter().map(|c| c.as_ref().len() as u64).sum();
        if self.data.len() as u64 + size > limit {
            return Err(TableError::TooLarge { limit });
        }
        for cell in cells {
            self.data.extend_from_slice(cell.as_ref());
            // Within MAX_TABLE_BYTES, checked above.
            self.ends.push(self.data.len() as u32);
        }
        Ok(())
    }

    /// Cell `column` of row `row` (empty out of range).
    #[inline]
    pub fn cell(&self, row: usize, column: usize) -> &[u8] {
        let at = row * self.width + column;
        let Some(&end) = self.ends.get(at) else { return &[] };
        let start = at.checked_sub(1).and_then(|i| self.ends.get(i)).map_or(0, |&s| s as usize);
        self.data.get(start..end as usize).unwrap_or(&[])
    }

    /// Rows `rows`' cells, end to end, with each cell's length: what one chunk on the wire
    /// carries.
    pub fn slice(&self, rows: Range<usize>) -> (&[u8], impl Iterator<Item = u32> + '_) {
        let (cells, bytes) = self.span(rows);
        let mut last = bytes.start as u32;
        let lengths = self.ends[cells].iter().map(move |&e| {
            let length = e - last;
            last = e;
            length
        });
        (&self.data[bytes], lengths)
    }

    /// How many bytes rows `rows`' cells hold.
    pub fn bytes_of(&self, rows: Range<usize>) -> usize {
        self.span(rows).1.len()
    }

    /// Rows `rows` as the range of their cells and the range of those cells' bytes (rows past
    /// the end are none).
    fn span(&self, rows: Range<usize>) -> (Range<usize>, Range<usize>) {
        let cells = (rows.start * self.width).min(self.ends.len())..(rows.end * self.width).min(self.ends.len());
        let start = cells.start.checked_sub(1).and_then(|i| self.ends.get(i)).map_or(0, |&s| s as usize);
        let end = cells.end.checked_sub(1).and_then(|i| self.ends.get(i)).map_or(start, |&e| e as usize);
        (cells, start..end.max(start))
    }

    /// Appends rows given as their cells end to end (`data`) with each cell's length, as
    /// [`Table::slice`] gives them; within `limit` bytes.
    pub fn extend(&mut self, data: &[u8], lengths: &[u32], limit: u64) -> Result<(), TableError> {
        if !lengths.len().is_multiple_of(self.width.max(1)) {
            return Err(TableError::Width { want: self.width, got: lengths.len() % self.width.max(1) });
        }
        let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
        let limit = limit.min(MAX_TABLE_BYTES);
        if total != data.len() as u64 {
            return Err(TableError::Lengths { lengths: total, data: data.len() as u64 });
        }
        if self.data.len() as u64 + total > limit {
            return Err(TableError::TooLarge { limit });
        }
        let mut end = self.data.len() as u32;
        self.data.extend_from_slice(data);
        for &length in lengths {
            end += length;
            self.ends.push(end);
        }
        Ok(())
    }
}
