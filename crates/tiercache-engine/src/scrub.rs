//! The scrubber of a mapped upper tier.
//!
//! A hit served without the lock from a mapped tier checks the block's header and CRC32C the
//! first time, and marks its way; later hits skip the check while the way is unchanged (any
//! write, move or eviction clears the mark). Checking 4 KiB on every hit cost about a fifth of
//! the hit's time on this project's machine (see `docs/history/RESULTS-2026-11.md`, "The hit
//! path made sound"), and a block cannot change under an unchanged way except by something
//! outside the engine: a media error, or another writer of the file. That is what the scrubber
//! looks for.
//! It reads every marked block in the background, as a reader without the lock does, at a set
//! rate, and takes the mark off a block that no longer checks out: its next hit checks it,
//! fails, and takes the locked path, which counts it (`checksum_failures`) and drops it.
//!
//! So a bit that flips in a mapped block after its first hit can be served until the scrubber
//! reaches the block: at most one pass, the tier's size over the rate (64 MiB at the default
//! 256 MiB/s: a quarter of a second; 64 GiB: four and a half minutes). A caller that wants
//! every hit checked sets the rate to 0 (`CacheBuilder::scrub_rate`), and the mark is not
//! used. Patrol scrubbing of DRAM by its controller and ZFS's `zpool scrub` work the same way:
//! what is never read is still checked, within a bounded time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::stats::Stats;
use crate::tier::optimistic::SlotTable;

/// The scrubber's rate unless set: 256 MiB/s, about 2% of a core on this project's machine.
pub const DEFAULT_RATE: u64 = 256 << 20;

/// How often the scrubber wakes, and reads its rate's worth of this long.
pub const STEP: Duration = Duration::from_millis(10);

/// Sets read between checks of the step's budget.
const CHUNK: usize = 64;

/// What the scrubber found, shared with the cache's counters.
#[derive(Default)]
pub struct ScrubCounts {
    checked: AtomicU64,
    failed: AtomicU64,
    passes: AtomicU64,
}

impl ScrubCounts {
    /// Adds these counts to a snapshot's.
    pub fn add_to(&self, stats: &mut Stats) {
        stats.scrubbed += self.checked.load(Ordering::Relaxed);
        stats.scrub_failures += self.failed.load(Ordering::Relaxed);
        stats.scrub_passes += self.passes.load(Ordering::Relaxed);
    }
}

/// Where the scrubber is in its pass over every shard's table.
pub struct Scrub {
    tables: Vec<SlotTable>,
    /// Bytes to read per step.
    budget: u64,
    table: usize,
    set: usize,
    buf: Vec<u8>,
    counts: Arc<ScrubCounts>,
}

impl Scrub {
    pub fn new(tables: Vec<SlotTable>, rate: u64, counts: Arc<ScrubCounts>) -> Scrub {
        let budget = (rate as f64 * STEP.as_secs_f64()).max(1.0) as u64;
        Scrub { tables, budget, table: 0, set: 0, buf: Vec::new(), counts }
    }

    /// Reads one step's budget of sets and blocks, going on where the last step stopped, and
    /// at most to the end of a pass: a tier that takes less than a step to check (small, or
    /// mostly unmarked) is checked once a step, not over and over.
    pub fn step(&mut self) {
        let mut spent = 0;
        while spent < self.budget {
            let table = &self.tables[self.table];
            let scrubbed = table.scrub(self.set, CHUNK, &mut self.buf);
            spent += scrubbed.bytes.max(1);
            self.counts.checked.fetch_add(scrubbed.checked, Ordering::Relaxed);
            self.counts.failed.fetch_add(scrubbed.failed, Ordering::Relaxed);
            self.set += CHUNK;
            if self.set >= table.sets() {
                self.set = 0;
                self.table += 1;
                if self.table == self.tables.len() {
                    self.table = 0;
                    self.counts.passes.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}
