//! Engine counters. Each shard keeps its own plain counters, bumped under its lock, so the hot
//! path writes no shared cache line; a snapshot sums the shards (JSON via serde, or Prometheus
//! text).

use serde::Serialize;
use tiercache_core::limits::TIERS_MAX;
use tiercache_core::RejectReason;

macro_rules! counters {
    ($($name:ident: $help:literal,)*) => {
        /// One shard's counters, those a hit bumps first (laid out in order, so they share a
        /// cache line with the shard's lock).
        #[derive(Clone, Default)]
        #[repr(C)]
        pub struct Stats {
            $(pub $name: u64,)*
            pub rejections: [u64; RejectReason::ALL.len()],
            /// Reads served from each tier below the first, where the policy found the block
            /// (index 0 unused: the first tier's are `hits` less these, so a hit there, the
            /// hot path, writes no counter beyond the first ones).
            pub lower_tier_hits: [u64; TIERS_MAX],
        }

        /// Counters at one moment.
        #[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
        pub struct StatsSnapshot {
            $(pub $name: u64,)*
            pub rejections: std::collections::BTreeMap<&'static str, u64>,
            /// Reads served from each tier, top down (as many as the cache has tiers).
            pub tier_hits: Vec<u64>,
        }

        impl Stats {
            /// Adds another shard's counters to these.
            pub fn merge(&mut self, other: &Stats) {
                $(self.$name += other.$name;)*
                for (mine, theirs) in self.rejections.iter_mut().zip(&other.rejections) {
                    *mine += theirs;
                }
                for (mine, theirs) in self.lower_tier_hits.iter_mut().zip(&other.lower_tier_hits) {
                    *mine += theirs;
                }
            }

            /// The counters of a cache of `tiers` tiers.
            pub fn snapshot(&self, tiers: usize) -> StatsSnapshot {
                StatsSnapshot {
                    $($name: self.$name,)*
                    rejections: RejectReason::ALL
                        .iter()
                        .map(|r| (r.as_str(), self.rejections[r.index()]))
                        .collect(),
                    tier_hits: (0..tiers.min(TIERS_MAX))
                        .map(|t| match t {
                            0 => self.hits - self.lower_tier_hits.iter().sum::<u64>(),
                            _ => self.lower_tier_hits[t],
                        })
                        .collect(),
                }
            }
        }

        impl StatsSnapshot {
            /// The counters in Prometheus' text exposition format.
            pub fn to_prometheus(&self) -> String {
                let mut text = String::new();
                $(
                    text += concat!("# HELP tiercache_", stringify!($name), " ", $help, "\n");
                    text += concat!("# TYPE tiercache_", stringify!($name), " counter\n");
                    text += &format!(concat!("tiercache_", stringify!($name), " {}\n"), self.$name);
                )*
                text += "# HELP tiercache_rejections Missed keys not admitted, by reason.\n";
                text += "# TYPE tiercache_rejections counter\n";
                for (reason, n) in &self.rejections {
                    text += &format!("tiercache_rejections{{reason=\"{reason}\"}} {n}\n");
                }
                text += "# HELP tiercache_tier_hits Reads served from each tier (0 the top).\n";
                text += "# TYPE tiercache_tier_hits counter\n";
                for (tier, n) in self.tier_hits.iter().enumerate() {
                    text += &format!("tiercache_tier_hits{{tier=\"{tier}\"}} {n}\n");
                }
                text
            }
        }
    };
}

counters! {
    lookups: "Reads (get and read-through).",
    hits: "Reads served from the cache.",
    misses: "Reads not served from the cache.",
    bytes_read: "Value bytes copied out of the tier.",
    lower_hits: "Reads served from the lower tier.",
    offloaded: "Read hits the policy sent to the backing device (non-hierarchical caching); the caller loads them.",
    puts: "Writes.",
    inserts: "Blocks placed in the tier.",
    updates: "Blocks overwritten in place.",
    demotions: "Blocks moved from the upper tier to the lower.",
    bytes_demoted: "Value bytes moved from the upper tier to the lower.",
    promotions: "Blocks moved from the lower tier to the upper.",
    bytes_promoted: "Value bytes moved from the lower tier to the upper.",
    evictions: "Blocks dropped to make room.",
    invalidations: "Blocks dropped because their data went stale or was freed.",
    unlocked_hits: "Upper-tier hits copied without the shard's lock, the policy told afterwards in batches.",
    pinned_reads: "Read handles served in place, their slot pinned until the handle dropped.",
    untold_hits: "Read hits the hit rule did not tell the policy of (the key's first hit in the epoch was told); counted in hits too.",
    unlocked_reads: "File and flash tier reads done with the shard unlocked.",
    tier_reads: "Hits whose read from the tier was timed (only when a controller is fed measurements).",
    tier_read_ns: "Nanoseconds those timed tier reads took.",
    bytes_written: "Value bytes copied into the tier.",
    persistent_bytes_written: "Value bytes written to the mapped, file and flash tiers (writes, fills and demotions): the wear of a slow or flash medium.",
    writes_behind: "Blocks written to a file or flash tier by the write-behind threads, with the shard unlocked.",
    behind_requests: "Device writes the write-behind threads made: a run of blocks in adjacent slots goes in one.",
    staged_reads: "Reads served from a block's DRAM copy while its write-behind was in flight.",
    checksum_failures: "Blocks whose header or checksum did not verify; served as misses.",
    scrubbed: "Mapped blocks the scrubber checked (blocks already checked by a hit, read again in the background).",
    scrub_failures: "Mapped blocks the scrubber found corrupted; their next hit checks them and drops them.",
    scrub_passes: "Passes the scrubber completed over the mapped tier.",
    fill_misses: "Reads of a block still being filled by another reader; served as misses.",
    io_errors: "Tier reads that failed; served as misses.",
    space_evictions: "Blocks dropped to empty a page for another size class (the policy is told).",
    erase_errors: "Dropped blocks whose slot could not be marked free on a file tier: until the slot is reused, a recovery after a crash could bring the old block back.",
    recovered: "Blocks found on the persistent tiers when the cache opened, and kept (a warm restart).",
    recovery_damaged: "Slots found failing their checks when the cache opened (torn writes, flipped bits); dropped.",
    recovery_stale: "Older copies of a key found when the cache opened, behind a newer one; dropped.",
    recovery_declined: "Blocks found when the cache opened that the policy did not take back (no room, or a policy that does not restore); dropped.",
    write_backs: "Dirty blocks written back to the backing device (write-back and write-only modes).",
    bytes_written_back: "Value bytes written back to the backing device.",
    write_back_runs: "Runs of consecutive dirty blocks written back as one write (the drain, the cleaner, Hibachi's sequential flushing).",
    write_backs_overtaken: "Blocks the cleaner wrote back that were written again while its copy was on the way: the copy landed, the block stays dirty.",
    write_back_errors: "Write-backs and backing syncs that failed; the block stays dirty and is tried again before it is dropped.",
    backing_syncs: "Syncs of the backing device a shard made before freeing slots of blocks written back.",
    limbo_syncs: "Tier syncs forced because the only free slots were held for a sync (old copies of dirty blocks rewritten since the last one).",
    limbo_write_backs: "Dirty blocks in DRAM copied to the backing device by such a sync, because the slot it freed held their last durable copy (they stay dirty, and are written back in their turn).",
    checkpoints: "Background checkpoints made (`sync_interval`): syncs of every persistent tier, off the request path.",
    checkpoint_errors: "Background checkpoints that failed; the next one tries again, and an explicit sync reports the error.",
    erase_syncs: "Tier syncs forced before a block was dropped or overwritten in place, because an older copy of it was freed after the last sync and could come back in a crash.",
    dirty_lost: "Dirty blocks lost: unreadable (checksum, I/O) or not written back when dropped. Reads of such a key fail with a data-loss error until it is written again.",
    writes_dropped: "Writes acknowledged but not applied. Always 0: a write the policy declines is counted in rejections.",
}
