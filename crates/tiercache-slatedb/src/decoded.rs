//! SlateDB's metadata entries kept decoded, beside their bytes in the cache. Decoding an SST's
//! index verifies its flatbuffer whole (`SsTableIndexOwned::new`): a profile of YCSB C over
//! tiercache spent 55% of its CPU there, once for every read of every SST the read looked
//! at, where a cache of decoded entries (foyer's memory, say) decodes once. So the indexes,
//! filters and stats that reads ask for are kept decoded too, in a budget of their own
//! ([`Decoded::new`]'s bytes, counted by SlateDB's own measure of an entry), evicted by CLOCK:
//! a hit marks an entry, the hand passes over marked entries once, unmarking them, and
//! evicts the first it finds unmarked. The bytes in the cache stay the entry's durable copy;
//! this is only a view of them, so a key removed from the cache is removed here too.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use slatedb::db_cache::CachedEntry;

/// Decoded entries by their stored key, within a budget of bytes.
pub struct Decoded {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Vec<u8>, Kept>,
    /// The clock: keys in the order they came (a key may be here after it left `entries`).
    hand: VecDeque<Vec<u8>>,
    bytes: usize,
}

struct Kept {
    entry: CachedEntry,
    size: usize,
    marked: bool,
}

impl Decoded {
    /// Keeps up to `budget` bytes of decoded entries (0 keeps none).
    pub fn new(budget: usize) -> Decoded {
        Decoded { budget, inner: Mutex::new(Inner::default()) }
    }

    pub fn budget(&self) -> usize {
        self.budget
    }

    pub fn get(&self, key: &[u8]) -> Option<CachedEntry> {
        if self.budget == 0 {
            return None;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let kept = inner.entries.get_mut(key)?;
        kept.marked = true;
        Some(kept.entry.clone())
    }

    /// Keeps `entry` decoded under `key`, evicting others to make room; one larger than half
    /// the budget is not kept.
    pub fn keep(&self, key: &[u8], entry: &CachedEntry) {
        let size = entry.size().max(1);
        if size > self.budget / 2 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = inner.entries.remove(key) {
            inner.bytes -= old.size;
        }
        while inner.bytes + size > self.budget {
            let Some(candidate) = inner.hand.pop_front() else { break };
            match inner.entries.get_mut(&candidate) {
                Some(kept) if kept.marked => {
                    kept.marked = false;
                    inner.hand.push_back(candidate);
                }
                Some(_) => {
                    let gone = inner.entries.remove(&candidate).expect("looked up");
                    inner.bytes -= gone.size;
                }
                None => {}
            }
        }
        inner.bytes += size;
        inner.entries.insert(key.to_vec(), Kept { entry: entry.clone(), size, marked: false });
        inner.hand.push_back(key.to_vec());
        // Keys that left `entries` and came back leave stale places on the clock: bounded.
        if inner.hand.len() > 2 * inner.entries.len() + 64 {
            let Inner { entries, hand, .. } = &mut *inner;
            let mut seen = std::collections::HashSet::new();
            hand.retain(|k| entries.contains_key(k) && seen.insert(k.clone()));
        }
    }

    /// Puts `entry` in place of the one kept under `key`, if one is: whether one was. (SlateDB
    /// inserts a filter again once it has decoded what the cache gave back.)
    pub fn replace(&self, key: &[u8], entry: &CachedEntry) -> bool {
        if self.budget == 0 {
            return false;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Inner { entries, bytes, .. } = &mut *inner;
        let Some(kept) = entries.get_mut(key) else { return false };
        let size = entry.size().max(1);
        *bytes = *bytes - kept.size + size;
        kept.entry = entry.clone();
        kept.size = size;
        true
    }

    pub fn remove(&self, key: &[u8]) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(gone) = inner.entries.remove(key) {
            inner.bytes -= gone.size;
        }
    }

    /// Bytes of the entries kept now.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}
