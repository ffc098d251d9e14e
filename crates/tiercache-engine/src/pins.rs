//! Pins on a tier's slots: a read running on a slot with the shard unlocked, a write behind,
//! or a read handle holding a block in place keeps the slot's bytes from being rewritten and
//! the slot from being reused. The shard changes them under its lock; read handles on the
//! published upper tier (the slot tables of `tier::optimistic`) pin and unpin without it. So
//! every count is an atomic.
//!
//! - **A slot's word** counts its pins, and has the zombie bit: freed while pinned, the slot
//!   goes back to the free list when its last pin goes. Whoever drops that pin gives it back,
//!   under the shard's lock ([`Unpinned::Zombie`]). A zombie takes no new pin.
//! - **Room.** Every pinned slot may become a zombie, which the free lists then lack, so the
//!   slots pinned at once are bounded: before a slot's first pin, at most its tier's slack less
//!   two are (room for a promotion's swap and an overwrite's copy). The pin that takes a slot
//!   from no pins to one reserves room first; the one that takes it back to none releases it.
//!   A pin on a slot that has pins already joins them, reserving nothing, so a hot block held
//!   by many readers costs one slot of room. Reservations never fall below the slots pinned.
//! - **Without the lock** a reader pins a slot, then checks that the way that led it there
//!   still names its key in the same state (`SlotTable::hold`). The shard unpublishes a slot
//!   (`vacate`) before it looks at its pins to free it ([`Pins::free`]), with a sequentially
//!   consistent fence between on both sides: either the reader sees the slot unpublished and
//!   lets go, or the shard sees the pin and makes the slot a zombie (Dekker's pattern). A
//!   reader that lets go may briefly hold a pin on a slot already freed, or reused: it never
//!   reads it, and its pin counts like any other until it goes. A published block is rewritten in
//!   place only the same way: unpublished first, its pins read after the fence, and found
//!   unpinned (`Shard::held_for_overwrite`).

use crate::sync::{fence, AtomicU32, AtomicU64, Ordering};

/// A slot's word: freed while pinned.
const ZOMBIE: u32 = 1 << 31;
/// Pins one slot may have at once.
const MAX_PINS: u32 = ZOMBIE - 1;

/// The pins on one shard's slots of one tier, on cache lines of their own: no two shards'
/// pins share a line.
#[repr(align(128))]
pub struct Pins {
    words: Box<[AtomicU32]>,
    /// The tier's slots beyond what its policy fills.
    slack: u64,
    /// Room reserved for pinned slots (see the module's documentation). A line of its own:
    /// every first pin and last unpin of a slot writes it, while every pin reads `words`,
    /// which would otherwise miss the cache on each other core's write (read handles at 2
    /// threads lost 18% so).
    reserved: Room,
}

/// A pins' room word, alone on its cache line.
#[repr(align(128))]
struct Room(AtomicU64);

impl std::ops::Deref for Room {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// What dropping a pin left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unpinned {
    /// The slot is still pinned, or was its block's and is free of pins now.
    Done,
    /// The slot was freed while pinned and this was its last pin: the caller gives it back,
    /// under the shard's lock ([`Pins::revive`], then the slot to the free list).
    Zombie,
}

impl Pins {
    /// Pins for `slots` slots of a tier with `slack` slots beyond its policy's.
    pub fn new(slots: usize, slack: u64) -> Pins {
        Pins {
            words: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            slack,
            reserved: Room(AtomicU64::new(0)),
        }
    }

    /// The pins on `slot` now (0 if none; a zombie's count without its bit).
    pub fn count(&self, slot: u32) -> u32 {
        self.words[slot as usize].load(Ordering::SeqCst) & MAX_PINS
    }

    /// Whether `slot` is pinned, or freed and still pinned (a zombie, not yet given back).
    pub fn held(&self, slot: u32) -> bool {
        self.words[slot as usize].load(Ordering::SeqCst) != 0
    }

    /// Whether `slot` is [`held`](Self::held), looked at by the shard once it has unpublished
    /// the slot (`vacate`), after the same fence as [`free`](Self::free): a reader that pins
    /// later sees the slot unpublished and lets go unread.
    pub fn held_once_unpublished(&self, slot: u32) -> bool {
        fence(Ordering::SeqCst);
        self.held(slot)
    }

    /// Whether `slot` may be pinned once more (under the shard's lock, for pins the lock
    /// holder takes: on a tier nobody pins without the lock, [`pin`](Self::pin) then succeeds).
    pub fn has_room(&self, slot: u32) -> bool {
        match self.words[slot as usize].load(Ordering::SeqCst) {
            word if word & ZOMBIE != 0 => false,
            0 => self.reserved.load(Ordering::SeqCst) + 2 <= self.slack,
            word => word < MAX_PINS,
        }
    }

    /// Pins `slot`; false if there is no room, or the slot is a zombie or at its most pins.
    pub fn pin(&self, slot: u32) -> bool {
        let word = &self.words[slot as usize];
        let mut now = word.load(Ordering::SeqCst);
        loop {
            if now & ZOMBIE != 0 || now == MAX_PINS {
                return false;
            }
            if now != 0 {
                // Joins the pins there, under their reservation.
                match word.compare_exchange_weak(now, now + 1, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => return true,
                    Err(seen) => now = seen,
                }
                continue;
            }
            // The slot's first pin: room first.
            if self.reserved.fetch_add(1, Ordering::SeqCst) + 2 > self.slack {
                self.reserved.fetch_sub(1, Ordering::SeqCst);
                return false;
            }
            match word.compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(seen) => {
                    self.reserved.fetch_sub(1, Ordering::SeqCst);
                    now = seen;
                }
            }
        }
    }

    /// Drops a pin on `slot`.
    pub fn unpin(&self, slot: u32) -> Unpinned {
        match self.words[slot as usize].fetch_sub(1, Ordering::SeqCst) {
            0 => panic!("slot {slot} unpinned more than pinned"),
            1 => {
                self.reserved.fetch_sub(1, Ordering::SeqCst);
                Unpinned::Done
            }
            // The room stays reserved until the slot is back on the free list (`revive`).
            word if word == ZOMBIE | 1 => Unpinned::Zombie,
            _ => Unpinned::Done,
        }
    }

    /// The shard frees `slot`, already unpublished (`vacate`): true if nothing pins it, and
    /// the caller gives it back now; otherwise it is a zombie, given back by its last pin.
    pub fn free(&self, slot: u32) -> bool {
        // Between the unpublishing before and the pins read next (see the module's
        // documentation): a reader that pinned after this sees the slot unpublished.
        fence(Ordering::SeqCst);
        let word = &self.words[slot as usize];
        let mut now = word.load(Ordering::SeqCst);
        loop {
            debug_assert_eq!(now & ZOMBIE, 0, "slot {slot} freed twice");
            if now == 0 {
                return true;
            }
            match word.compare_exchange(now, now | ZOMBIE, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return false,
                Err(seen) => now = seen,
            }
        }
    }

    /// A zombie's last pin went ([`Unpinned::Zombie`]): the slot takes pins again once the
    /// caller, holding the shard's lock, has given it back, and its room is released.
    pub fn revive(&self, slot: u32) {
        let word = &self.words[slot as usize];
        debug_assert_eq!(word.load(Ordering::SeqCst), ZOMBIE, "slot {slot} revived while pinned");
        word.store(0, Ordering::SeqCst);
        self.reserved.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether any slot is pinned or a zombie (for checks that nothing is held).
    pub fn any(&self) -> bool {
        self.reserved.load(Ordering::SeqCst) > 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn room_bounds_the_slots_pinned_not_the_pins() {
        let pins = Pins::new(16, 5); // Room for 3 pinned slots (slack less two, plus one).
        assert!(pins.pin(0) && pins.pin(1) && pins.pin(2) && pins.pin(3));
        assert!(!pins.pin(4), "a fifth slot: no room");
        assert!((0..100).all(|_| pins.pin(0)), "more pins on a pinned slot take no room");
        assert_eq!(pins.count(0), 101);
        assert_eq!(pins.unpin(3), Unpinned::Done);
        assert!(pins.pin(4), "room again");
    }

    #[test]
    fn a_slot_freed_while_pinned_is_given_back_by_its_last_pin() {
        let pins = Pins::new(4, 8);
        assert!(pins.pin(1) && pins.pin(1));
        assert!(!pins.free(1), "pinned: a zombie");
        assert!(!pins.pin(1), "a zombie takes no pin");
        assert_eq!(pins.unpin(1), Unpinned::Done);
        assert_eq!(pins.unpin(1), Unpinned::Zombie);
        assert!(pins.any(), "its room stays reserved until it is back");
        pins.revive(1);
        assert!(!pins.any());
        assert!(pins.free(2), "never pinned: free at once");
        assert!(pins.pin(1));
    }
}

#[cfg(all(test, loom))]
mod model {
    use super::*;
    use loom::sync::Arc;

    /// A reader pins a slot and checks it is still published while the shard unpublishes and
    /// frees it: either the reader keeps its pin and the slot is a zombie until it lets go, or
    /// the reader lets go; the slot goes back exactly once, and never while a kept pin holds it.
    #[test]
    fn model_a_freed_slot_is_never_given_back_under_a_kept_pin() {
        loom::model(|| {
            let pins = Arc::new(Pins::new(1, 8));
            let published = Arc::new(AtomicU32::new(1));
            let holding = Arc::new(AtomicU32::new(0));
            let given_back = Arc::new(AtomicU32::new(0));
            let reader = {
                let (pins, published, holding, given_back) =
                    (pins.clone(), published.clone(), holding.clone(), given_back.clone());
                loom::thread::spawn(move || {
                    if !pins.pin(0) {
                        return;
                    }
                    fence(Ordering::SeqCst);
                    if published.load(Ordering::SeqCst) == 1 {
                        // Kept: the slot is this reader's to read until it unpins.
                        holding.store(1, Ordering::SeqCst);
                        assert_eq!(given_back.load(Ordering::SeqCst), 0, "reused under a pin");
                        holding.store(0, Ordering::SeqCst);
                    }
                    if pins.unpin(0) == Unpinned::Zombie {
                        given_back.fetch_add(1, Ordering::SeqCst);
                        pins.revive(0);
                    }
                })
            };
            published.store(0, Ordering::SeqCst); // The shard vacates the slot, then frees it.
            if pins.free(0) {
                assert_eq!(holding.load(Ordering::SeqCst), 0, "freed under a kept pin");
                given_back.fetch_add(1, Ordering::SeqCst);
            }
            reader.join().unwrap();
            assert_eq!(given_back.load(Ordering::SeqCst), 1, "given back once");
            assert!(!pins.any(), "no room left reserved");
        });
    }
}
