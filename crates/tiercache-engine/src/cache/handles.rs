//! Read handles ([`BlockRef`]): a key's value held for reading without a copy, in place on a
//! memory tier (its slot pinned until the handle drops) or as the one copy a file or flash
//! tier's read makes; and the form that answers only a key on a memory tier, for async callers.

use tiercache_core::{Key, Op};

use super::{BlockRef, CacheCore};
use crate::shard::{Held, Hold, Read};
use crate::tier::optimistic::Hit;

impl CacheCore {
    /// Looks `key` up (look-aside) and holds its value for reading without a copy: a block on
    /// DRAM or a mapped tier is read in place, its slot pinned (neither rewritten nor reused)
    /// until the handle drops; a block on a file or flash tier, or one whose shard has all its
    /// spare slots pinned, comes as a copy. A miss admits nothing.
    pub fn get_ref(&self, key: Key) -> Option<BlockRef<'_>> {
        self.get_ref_where(key, false)
    }

    /// As [`get_ref`](Self::get_ref) where `key` lies on a memory tier (DRAM or mapped), so
    /// that the read waits on no device; `None` otherwise, whether or not `key` is cached. An
    /// async caller reads such a key on its own thread and sends the rest to a thread that may
    /// block.
    pub fn get_ref_in_memory(&self, key: Key) -> Option<BlockRef<'_>> {
        self.get_ref_where(key, true)
    }

    /// [`get_ref`](Self::get_ref), or with `memory_only` its form that answers only a key on a
    /// memory tier (asked under the same lock that holds it).
    fn get_ref_where(&self, key: Key, memory_only: bool) -> Option<BlockRef<'_>> {
        if let Some(held) = self.get_ref_unlocked(key) {
            return Some(held);
        }
        let started = self.started();
        let req = self.request(key, Op::Lookup);
        let index = self.shard_of(key);
        let step = {
            let mut shard = self.lock(index);
            if memory_only && !shard.in_memory(key) {
                return None;
            }
            shard.hold(&req, started)
        };
        let held = match step {
            Hold::Held(held) => held,
            Hold::Miss => return None,
            Hold::Tier(read) => {
                // A copy, read as `get` reads a file or flash tier.
                let mut copy = vec![0; read.object_len().unwrap_or(self.block_size)];
                match self.read_tier(key, Read::Tier(read), &mut copy, started) {
                    Read::Done(Some(len)) => copy.truncate(len),
                    _ => return None,
                }
                Held::Copied(copy)
            }
        };
        Some(BlockRef { core: self, shard: index, held })
    }

    /// Holds a hit in the upper tier in place without the shard's lock, if the block can be
    /// held that way (see `SlotTable::hold`), the policy told as hits without the lock are;
    /// `None` sends the caller down the locked path.
    #[cfg(not(loom))]
    fn get_ref_unlocked(&self, key: Key) -> Option<BlockRef<'_>> {
        let unlocked = self.unlocked.as_ref()?;
        let started = self.started();
        let index = self.shard_of(key);
        let (slot, bytes, len, told) = match unlocked.tables[index].hold(key) {
            Ok(held) => held,
            Err(None) => return None,
            Err(Some(slot)) => {
                // A slot freed while this reader looked: its last pin gives it back.
                self.lock(index).give_back_zombie(0, slot);
                return None;
            }
        };
        self.record_unlocked(unlocked, index, key, len as u32 | Hit::HELD, told, started);
        let held = Held::Pinned { tier: 0, slot, bytes, len };
        Some(BlockRef { core: self, shard: index, held })
    }

    /// Lets go of a read handle's pin on `slot` of `tier` in shard `index`; a slot freed while
    /// held goes back to its free list, under the shard's lock.
    pub(super) fn unpin(&self, index: usize, tier: usize, slot: u32) {
        let pins = &self.pins[index * self.tiers + tier];
        if pins.unpin(slot) == crate::pins::Unpinned::Zombie {
            self.lock(index).give_back_zombie(tier, slot);
        }
    }
}
