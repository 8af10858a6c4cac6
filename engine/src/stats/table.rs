//! A table of statistics by index (a mix's names, a run's scenarios): an entry appears with
//! its first count, so a part that counted few of them (a thread's second, a worker's interval)
//! carries only those, and tables merge entry by entry.

/// What a table's entries are merged with: every count of `other` added to `self`.
pub trait Merge {
    fn merge(&mut self, other: &Self);
}

/// Statistics by index; an index with nothing counted yet has none.
#[derive(Debug, Clone)]
pub struct Table<T>(Vec<Option<Box<T>>>);

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table(Vec::new())
    }
}

impl<T: Default + Merge> Table<T> {
    /// The statistics of `index`, made empty when it has none yet.
    pub fn entry(&mut self, index: usize) -> &mut T {
        if self.0.len() <= index {
            self.0.resize_with(index + 1, || None);
        }
        self.0[index].get_or_insert_with(Box::default)
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        self.0.get(index).and_then(|s| s.as_deref())
    }

    /// The entries with statistics, by index, in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.0.iter().enumerate().filter_map(|(i, s)| s.as_deref().map(|s| (i, s)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }

    /// One past the highest index with statistics.
    pub fn len(&self) -> usize {
        self.0.iter().rposition(Option::is_some).map_or(0, |i| i + 1)
    }

    pub fn merge(&mut self, other: &Table<T>) {
        for (index, stats) in other.iter() {
            self.entry(index).merge(stats);
        }
    }
}
