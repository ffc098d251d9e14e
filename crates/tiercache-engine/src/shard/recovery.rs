//! Recovery: reading a shard's tiers as a cache opening over them does ([`Shard::scan`]),
//! and taking back what was found ([`Shard::restore`]): the newest whole copy of each key,
//! told to the policy.

use tiercache_core::{Key, KeyMap, Op, Request, TierId};
use tiercache_policy::Policy;

use super::places::sets_mut;
use super::Shard;
use crate::error::EngineError;
use crate::tier::Place;

/// A whole block found by a recovery scan.
struct Copy {
    seq: u64,
    key: Key,
    tier: usize,
    slot: u32,
    len: u32,
    dirty: bool,
}

/// What a recovery scan found on a shard's tiers ([`Shard::scan`]).
#[derive(Default)]
pub struct Scanned {
    copies: Vec<Copy>,
    /// Tier, slot and what is wrong.
    damaged: Vec<(usize, u32, String)>,
}

impl Scanned {
    /// Whether the scan found no whole block.
    pub fn is_empty(&self) -> bool {
        self.copies.is_empty()
    }

    /// Counts the copies on `tiers` clean: their cache stopped after writing every dirty block
    /// back, so the dirty flags their headers still carry are history.
    pub fn written_back(&mut self, tiers: &[usize]) {
        for copy in self.copies.iter_mut().filter(|c| tiers.contains(&c.tier)) {
            copy.dirty = false;
        }
    }
}

impl Shard {
    /// Reads the tiers `tiers` (mapped and file tiers of this geometry) as a cache opening
    /// over them does, changing nothing: every whole block, and every slot that fails its
    /// checks. `belongs` says whether a key is this shard's: a block of another shard's key
    /// was misdirected, and counts as damage.
    pub fn scan(
        &mut self,
        tiers: &[(usize, bool)],
        belongs: impl Fn(Key) -> bool,
    ) -> Result<Scanned, EngineError> {
        use crate::block::Found;
        let mut scanned = Scanned::default();
        for &(t, headers_only) in tiers {
            self.tiers[t].region.scan(headers_only, |slot, found| match found {
                Found::Empty => {}
                Found::Block { key, len, stamp } if belongs(key) => scanned.copies.push(Copy {
                    seq: stamp.seq,
                    key,
                    tier: t,
                    slot,
                    len,
                    dirty: stamp.dirty,
                }),
                Found::Block { key, .. } => scanned.damaged.push((
                    t,
                    slot,
                    format!("a block of key {key}, not this shard's"),
                )),
                Found::Damaged(fault) => {
                    scanned.damaged.push((t, slot, format!("{fault:?}").to_lowercase()))
                }
            })?;
        }
        Ok(scanned)
    }

    /// The first damaged slot `scanned` found, if any: its tier, byte offset and what is wrong.
    pub fn first_damage(&self, scanned: &Scanned) -> Option<(usize, u64, String)> {
        let (t, slot, what) = scanned.damaged.first()?;
        Some((*t, self.tiers[*t].region.offset_of(*slot), what.clone()))
    }

    /// Takes back what [`scan`](Self::scan) found: the newest whole copy of each key is told to
    /// the policy, oldest first, and kept where it lies if the policy takes it; older copies,
    /// blocks the policy declines and damaged slots are marked free. The shard's sequence
    /// restarts above every number found.
    pub fn restore(&mut self, scanned: Scanned) -> Result<(), EngineError> {
        let Scanned { mut copies, damaged } = scanned;
        for (t, slot, _) in damaged {
            self.stats.recovery_damaged += 1;
            self.tiers[t].mark_free(slot, &mut self.stats);
        }
        self.seq = copies.iter().map(|c| c.seq).max().unwrap_or(0);
        // The newest copy of each key wins; older ones are freed.
        copies.sort_unstable_by_key(|c| std::cmp::Reverse(c.seq));
        let mut newest = KeyMap::default();
        copies.retain(|c| {
            let first = newest.insert(c.key, ()).is_none();
            if !first {
                self.stats.recovery_stale += 1;
                self.tiers[c.tier].mark_free(c.slot, &mut self.stats);
            }
            first
        });
        copies.reverse();
        for t in 0..self.tiers.len() {
            if self.tiers[t].placed.is_some() {
                continue;
            }
            let held: Vec<u32> = copies.iter().filter(|c| c.tier == t).map(|c| c.slot).collect();
            self.tiers[t].space.claim(&held);
        }
        let size = self.block_size;
        for copy in copies {
            self.decision.clear();
            let tier = TierId(copy.tier as u8);
            if !self.policy.restore(copy.key, size, tier, copy.dirty, &mut self.decision) {
                // Dirty data is never dropped: the builder checked the policy keeps it.
                if copy.dirty {
                    return Err(EngineError::config(
                        "mode",
                        format!(
                            "a tier holds dirty block {} (written by a write-back cache and \
                             not yet written back), and this policy keeps nothing dirty: open \
                             the cache in an Open CAS mode (mode = wb) to write it back",
                            copy.key
                        ),
                    ));
                }
                self.stats.recovery_declined += 1;
                self.tiers[copy.tier].give_back(copy.slot, &mut self.stats);
                continue;
            }
            if self.tiers[copy.tier].placed.is_some() {
                // Kept in the slot it lies in, which the policy is told (no decision changes);
                // a slot outside the key's set (a tier laid out for other ways) is dropped.
                let sets = sets_mut(&mut self.policy, tier.index());
                if sets.slot_of(copy.key) != Some(copy.slot)
                    && sets.relocate(copy.key, copy.slot).is_none()
                {
                    // What the policy evicted to make room goes; then the key is forgotten
                    // without touching the slot the policy had chosen for it, which may hold
                    // a block still to be restored.
                    self.apply(copy.key, None)?;
                    self.decide_sized(&Request::new(self.now_us, copy.key, 0, Op::Delete));
                    self.decision.clear();
                    self.collect_vacated();
                    let placed = self.tiers[copy.tier].placed_mut();
                    placed.pending.retain(|(k, _)| *k != copy.key);
                    self.stats.recovery_declined += 1;
                    if copy.dirty {
                        self.write_back_found(&copy);
                    }
                    self.tiers[copy.tier].give_back(copy.slot, &mut self.stats);
                    continue;
                }
            }
            let place = Place { dirty: copy.dirty, ..Place::new(copy.tier as u8, copy.slot) };
            self.set_place(copy.key, place);
            self.tiers[copy.tier].region.republish(copy.slot, copy.key, copy.len as usize);
            // Room the policy made (a policy whose capacity is less than its tier's slots):
            // earlier blocks go.
            self.apply(copy.key, None)?;
        }
        // Nothing else has run on the shard: what it holds was recovered, and what the policy
        // evicted to make room was not kept.
        self.stats.recovered = self.resident_count();
        self.stats.recovery_declined += std::mem::take(&mut self.stats.evictions);
        Ok(())
    }

    /// Writes back a dirty block recovery found and does not keep (its set has no room for
    /// it), from the slot it lies in, before that slot is freed: to the backing device
    /// attached before recovery (`CacheBuilder::backing_file`), synced. Without one, or if the
    /// block does not read back or the write fails, its key is recorded lost (reads fail until
    /// it is written again) rather than served from the backing device's older data.
    fn write_back_found(&mut self, copy: &Copy) {
        let region = &mut self.tiers[copy.tier].region;
        let mut value = vec![0u8; region.value_bytes()];
        let read = region.read(copy.slot, copy.key, &mut value);
        let at = copy.key * self.block_size as u64;
        let written = match (&self.backing, read) {
            (Some(backing), Ok(len)) => backing.write_at(&value[..len], at).is_ok().then_some(len),
            _ => None,
        };
        match written {
            Some(len) => {
                self.wrote_back(copy.key, len);
                self.sync_backing();
            }
            None => {
                self.stats.dirty_lost += 1;
                self.lost.insert(copy.key);
            }
        }
    }
}
