//! Background checkpoints: the cache makes its persistent tiers durable on its own every
//! `sync_interval` ([`CacheBuilder::sync_interval`]), so that a crash of the machine loses at
//! most that interval of what the cache did, without anyone calling `sync`. A checkpoint is
//! [`CacheCore::sync`] run by a thread of its own: the request path never waits on it beyond
//! one shard's lock at a time, and one that an explicit sync made unnecessary (a sync ended
//! within the interval) is skipped. Syncs take turns, so a checkpoint and an explicit sync
//! never interleave.
//!
//! A process that is killed loses less: a flash tier's slot records reach its file as they
//! change (`crate::tier::flash`), and mapped and file tiers keep their headers beside their
//! blocks, so a cache reopened after a kill finds every block its persistent tiers held,
//! checkpoint or not.
//!
//! [`CacheBuilder::sync_interval`]: crate::CacheBuilder::sync_interval

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::CacheCore;
use crate::error::EngineError;
use crate::stats::Stats;

/// The default interval between background checkpoints.
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// What the cache knows of its syncs: whose turn it is, when the last completed one started,
/// and how the checkpoints went.
pub(crate) struct Syncs {
    /// Held by the sync under way.
    turn: Mutex<()>,
    /// When the cache started, and microseconds from then to the start of the last sync that
    /// completed (0: none yet).
    epoch: Instant,
    last_us: AtomicU64,
    checkpoints: AtomicU64,
    failed: AtomicU64,
}

impl Default for Syncs {
    fn default() -> Syncs {
        Syncs {
            turn: Mutex::new(()),
            epoch: Instant::now(),
            last_us: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }
}

impl Syncs {
    /// Runs `sync` in its turn, recording when a successful one started.
    pub fn run(&self, sync: impl FnOnce() -> Result<(), EngineError>) -> Result<(), EngineError> {
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        let started = (self.epoch.elapsed().as_micros() as u64).max(1);
        sync()?;
        self.last_us.store(started, Ordering::Relaxed);
        Ok(())
    }

    /// Whether a sync started within `interval` of now and completed.
    fn recent(&self, interval: Duration) -> bool {
        let last = self.last_us.load(Ordering::Relaxed);
        let now = self.epoch.elapsed().as_micros() as u64;
        last > 0 && now.saturating_sub(last) < interval.as_micros() as u64
    }

    /// Adds the checkpoints' counts to a snapshot's.
    pub fn add_to(&self, stats: &mut Stats) {
        stats.checkpoints += self.checkpoints.load(Ordering::Relaxed);
        stats.checkpoint_errors += self.failed.load(Ordering::Relaxed);
    }
}

impl CacheCore {
    /// A background checkpoint (see the module's documentation): a sync, unless one completed
    /// within `interval`. A failure is counted and reported once; the next checkpoint, and
    /// the next explicit sync, try again.
    pub(crate) fn checkpoint(&self, interval: Duration) {
        if self.syncs.recent(interval) {
            return;
        }
        match self.sync() {
            Ok(()) => {
                self.syncs.checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if self.syncs.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                    eprintln!(
                        "tiercache: a background checkpoint failed (retried each interval): {e}"
                    );
                }
            }
        }
    }
}
