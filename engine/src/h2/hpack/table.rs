//! The two HPACK tables (RFC 7541 §2.3): the fixed static table of Appendix A and the
//! decoder's dynamic table, with the §4.1 size accounting (name + value + 32 per entry) and
//! oldest-first eviction (§4.3, §4.4).
//!
//! Indices are the unified address space of §2.3.3: 1..=61 are static, 62.. are dynamic,
//! newest first.

use std::collections::VecDeque;

/// RFC 7541 Appendix A, in index order (index = position + 1).
pub(crate) const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead of §4.1: an estimate of the peer's bookkeeping, counted so both ends
/// agree on when entries are evicted.
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// One dynamic entry: name and value stored back to back in one buffer, so an insertion costs
/// at most one allocation, and none once evicted buffers are being recycled.
#[derive(Debug)]
struct Entry {
    bytes: Vec<u8>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// Buffers kept for reuse after eviction; more than this and a burst of tiny entries would
/// pin memory for nothing.
const MAX_SPARE: usize = 64;

/// The decoder's dynamic table.
#[derive(Debug)]
pub(crate) struct DynamicTable {
    /// Newest at the front, so dynamic index 62 is `entries[0]`.
    entries: VecDeque<Entry>,
    /// Sum of the entries' §4.1 sizes.
    size: usize,
    /// The current maximum size, as last set by a dynamic table size update (§6.3).
    capacity: usize,
    spare: Vec<Vec<u8>>,
}

impl DynamicTable {
    pub(crate) fn new(capacity: usize) -> Self {
        DynamicTable { entries: VecDeque::new(), size: 0, capacity, spare: Vec::new() }
    }

    /// Applies a new maximum size, evicting until the table fits (§4.3).
    pub(crate) fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.evict_to(capacity);
    }

    /// Whether any entry could enter: every entry takes at least 32 bytes (§4.1), so below
    /// that an insertion only empties the table (§4.4), which is then already empty. Clients
    /// advertise 0, and servers such as nginx say so with a size update and go on sending
    /// literals with incremental indexing.
    pub(crate) fn holds_nothing(&self) -> bool {
        self.capacity < ENTRY_OVERHEAD
    }

    /// An empty buffer to build the next entry in (recycled when possible).
    pub(crate) fn take_buf(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Inserts `bytes` (name then value, the name `name_len` long) as the newest entry,
    /// evicting the oldest first. An entry larger than the whole table empties it and is not
    /// inserted (§4.4), which is not an error.
    pub(crate) fn insert(&mut self, bytes: Vec<u8>, name_len: usize) {
        let entry = Entry { bytes, name_len };
        let size = entry.size();
        if size > self.capacity {
            self.evict_to(0);
            self.recycle(entry.bytes);
            return;
        }
        self.evict_to(self.capacity - size);
        self.size += size;
        self.entries.push_front(entry);
    }

    /// The dynamic entry at 0-based position `i` (0 = newest) as (name, value).
    pub(crate) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|e| (e.name(), e.value()))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(entry) = self.entries.pop_back() else { break };
            self.size -= entry.size();
            self.recycle(entry.bytes);
        }
    }

    fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < MAX_SPARE {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Entries newest first, for tests that check the table against RFC 7541 Appendix C.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(String, String)> {
        self.entries
            .iter()
            .map(|e| (String::from_utf8_lossy(e.name()).into_owned(), String::from_utf8_lossy(e.value()).into_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_table_ends() {
        assert_eq!(STATIC_TABLE[0], (":authority", ""));
        assert_eq!(STATIC_TABLE[7], (":status", "200"));
        assert_eq!(STATIC_TABLE[60], ("www-authenticate", ""));
    }

    fn entry(t: &mut DynamicTable, name: &str, value: &str) {
        let mut buf = t.take_buf();
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(value.as_bytes());
        t.insert(buf, name.len());
    }

    #[test]
    fn evicts_oldest_and_accounts_size() {
        let mut t = DynamicTable::new(100);
        entry(&mut t, "a", "1"); // 34
        entry(&mut t, "b", "2"); // 68
        assert_eq!(t.size(), 68);
        entry(&mut t, "c", "3"); // needs 102: "a" goes
        assert_eq!(t.entries(), vec![("c".into(), "3".into()), ("b".into(), "2".into())]);
        assert_eq!(t.size(), 68);
        t.set_capacity(40);
        assert_eq!(t.entries(), vec![("c".into(), "3".into())]);
        // Larger than the table: empties it, not inserted.
        entry(&mut t, "long-name", "long-value");
        assert_eq!(t.len(), 0);
        assert_eq!(t.size(), 0);
    }
}
