//! Serving a decided read: a hit copied out now (memory tiers, staged and filling blocks, an
//! object's pages where they cannot be pinned) or handed back as a read to run with the shard
//! unlocked (file and flash tiers); counted and timed, a miss going on to its load.

use std::time::Instant;

use tiercache_core::{Key, Op, TierId};

use super::{Read, Shard, TierRead};
use crate::latency::Operation;
use crate::tier::block::{BlockFault, ReadFault};
use crate::tier::region::PinnedRead;
use crate::tier::Place;

impl Shard {
    /// Serves a decided read of `key` (`op`) and counts it: memory tiers copy into `buf` now;
    /// file and flash tiers pin the slot and hand back the read to run with the shard unlocked.
    pub(super) fn serve(
        &mut self,
        key: Key,
        op: Op,
        buf: &mut [u8],
        load: Option<u64>,
        started: Option<Instant>,
    ) -> Read {
        self.stats.lookups += 1;
        if self.decision.from_backing {
            // A clean hit the policy sends to the capacity device (NHC's load_admit): the
            // caller loads it, and nothing is filled since nothing was admitted.
            self.stats.offloaded += 1;
            return self.missed(key, op, load, started);
        }
        let timed = self.time_tier_reads.then(Instant::now);
        // Where the policy found the block, taken now: a read that unlocks the shard finds
        // another request's decision when it relocks.
        let hit = self.decision.hit;
        let served = match hit {
            None => None,
            Some(_) => match self.serve_hit(key, buf) {
                Served::Now(served) => served,
                Served::Later(read, place) => {
                    return Read::Tier(TierRead { read, place, hit, timed, op });
                }
            },
        };
        self.end_read(key, (op, hit), served, (timed, load), started)
    }

    /// The end of a decided read, with what it `served`: counted, timed from `timed`, and what
    /// is left to do (see [`Read`]; `load` is the slot reserved for a read-through's miss).
    pub(super) fn end_read(
        &mut self,
        key: Key,
        (op, hit): (Op, Option<TierId>),
        served: Option<usize>,
        (timed, load): (Option<Instant>, Option<u64>),
        started: Option<Instant>,
    ) -> Read {
        if let (Some(timed), Some(_)) = (timed, served) {
            self.stats.tier_reads += 1;
            self.stats.tier_read_ns += timed.elapsed().as_nanos() as u64;
        }
        self.count_read(served.and(hit));
        match served {
            Some(len) => {
                self.record(Operation::Read, started);
                Read::Done(Some(len))
            }
            None => self.missed(key, op, load, started),
        }
    }

    /// A read that served nothing: a lookup's miss is done (and timed); a read-through goes
    /// on to load the value (`load`: the slot reserved for it), unless its dirty data was
    /// lost (a dirty block that just failed its checks: the backing device's copy is older).
    pub(super) fn missed(
        &mut self,
        key: Key,
        op: Op,
        load: Option<u64>,
        started: Option<Instant>,
    ) -> Read {
        match op {
            Op::Read if self.is_lost(key) => Read::Lost,
            Op::Read => Read::Load(load),
            _ => {
                self.record(Operation::Read, started);
                Read::Done(None)
            }
        }
    }

    /// Serves a hit: memory tiers copy into `buf` now; file and flash tiers pin the slot and
    /// hand back a read to run with the shard unlocked (past the room to pin, or for a block
    /// staged or filling, served now under the lock).
    pub(super) fn serve_hit(&mut self, key: Key, buf: &mut [u8]) -> Served {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        let tier = place.tier as usize;
        // Keep one slack slot for an overwrite's copy; past that, read under the lock.
        let io = self.tiers[tier].region.is_io() && self.tiers[tier].can_pin(place.slot);
        let unlocked = !place.filling && !place.staged && self.tiers[tier].region.is_io();
        if self.spans_pages(key) && unlocked {
            let slots = self.span_slots(key, place.slot);
            if let Some(read) = self.tiers[tier].begin_read_pages(&slots, key) {
                self.stats.unlocked_reads += 1;
                return Served::Later(read, place);
            }
        }
        if place.filling || place.staged || !io || self.spans_pages(key) {
            return Served::Now(self.copy_out(key, buf));
        }
        match self.tiers[tier].begin_read(place.slot, key) {
            Some(read) => {
                self.stats.unlocked_reads += 1;
                Served::Later(read, place)
            }
            None => {
                self.count_fault(&ReadFault::Corrupt(BlockFault::Key));
                self.drop_key(key);
                Served::Now(None)
            }
        }
    }

    /// Copies a resident key's value out under the lock; a bad block is dropped and reported
    /// as a miss.
    pub(super) fn copy_out(&mut self, key: Key, buf: &mut [u8]) -> Option<usize> {
        let place = self.place(key).expect("the policy reported a hit with no slot");
        if place.filling {
            self.stats.fill_misses += 1;
            return None;
        }
        if place.staged {
            let staged = self.staging.get(key).expect("a staged block");
            let len = crate::tier::block::copy_value(staged.value(), buf);
            if len > buf.len() {
                // An object spanning pages, longer than the caller's buffer: whole in the spill.
                if self.spill.len() < len {
                    self.spill.resize(len, 0);
                }
                self.spill[..len].copy_from_slice(staged.value());
                self.spilled = len;
            }
            self.stats.bytes_read += len as u64;
            self.stats.staged_reads += 1;
            return Some(len);
        }
        let read = match self.spans_pages(key) {
            true => self.copy_span(key, place, buf),
            false => self.tiers[place.tier as usize].region.read(place.slot, key, buf),
        };
        match read {
            Ok(len) => {
                self.stats.bytes_read += len as u64;
                // A key whose set was full when it was written may find room now.
                self.tiers[place.tier as usize].region.republish(place.slot, key, len);
                Some(len)
            }
            Err(fault) => {
                self.count_fault(&fault);
                self.drop_key(key);
                None
            }
        }
    }

    /// Counts a decided read: a hit served from the tier the policy found the block in (even
    /// if the same decision moved it), or a miss (`None`).
    pub(super) fn count_read(&mut self, served_from: Option<TierId>) {
        match served_from {
            Some(tier) => {
                self.stats.hits += 1;
                if tier.0 > 0 {
                    self.stats.lower_hits += 1;
                    self.stats.lower_tier_hits[tier.index()] += 1;
                }
            }
            None => self.stats.misses += 1,
        }
    }

    /// Records an operation that started at `started`, now that it ends.
    #[inline]
    pub(super) fn record(&mut self, op: Operation, started: Option<Instant>) {
        if let (Some(histograms), Some(started)) = (&mut self.latency, started) {
            histograms[op as usize].saturating_record(started.elapsed().as_nanos() as u64);
        }
    }

    pub(super) fn count_fault(&mut self, fault: &ReadFault) {
        match fault {
            ReadFault::Corrupt(_) => self.stats.checksum_failures += 1,
            ReadFault::Io(_) => self.stats.io_errors += 1,
        }
    }
}

/// How a hit is served.
pub(super) enum Served {
    /// Done under the lock (memory tiers, staged and filling blocks), or nothing to serve.
    Now(Option<usize>),
    /// A read of a file or flash tier, to run with the shard unlocked.
    Later(PinnedRead, Place),
}
