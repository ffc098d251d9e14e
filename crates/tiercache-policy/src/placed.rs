//! What the engine asks of a policy that places each block in a slot of its own choosing (a
//! set-associative tier): the engine stores the block in that slot, keeps no map of its own
//! for it, and finds it again through these questions. Kept apart from the policy that
//! implements it (`setassoc`) and from the frame that hands it out, so neither names the
//! other.

use tiercache_core::Key;

/// A tier's slots as its policy places keys in them. Slot `s` is way `s % stride()` of set
/// `s / stride()`.
pub trait PlacedSlots {
    /// Slots in all.
    fn slots(&self) -> u32;
    /// Slots per set (the policy's ways and the spare ones).
    fn stride(&self) -> u32;
    /// Slots per set the policy never fills: room for a block's new copy while the old one
    /// is still needed.
    fn spare(&self) -> u32;
    /// The set `key` belongs to.
    fn set_of(&self, key: Key) -> u32;
    /// The key whose block lies in `slot`, if one does.
    fn key_at(&self, slot: u32) -> Option<Key>;
    /// The slot where `key` lies, if resident.
    fn slot_of(&self, key: Key) -> Option<u32>;
    /// Starts (or stops) logging the slots keys leave (see `take_vacated`).
    fn track_vacated(&mut self, on: bool);
    /// The slots keys left since the last call, in order, as (key, slot): by the time a
    /// decision is applied a dropped key is no longer resident, and its way may hold another.
    fn take_vacated(&mut self) -> Vec<(Key, u32)>;
    /// The free slots of `key`'s set, in the order inserts take them.
    fn free_slots(&self, key: Key) -> Vec<u32>;
    /// The first free slot of `key`'s set, in that order, for which `usable` holds.
    fn first_free(&self, key: Key, usable: &mut dyn FnMut(u32) -> bool) -> Option<u32>;
    /// Moves resident `key` to `to`, a free slot of its set, and returns the slot it left.
    /// Changes no decision, only which way holds the key; `None`, changing nothing, if `key`
    /// is not resident or `to` is not a free slot of its set.
    fn relocate(&mut self, key: Key, to: u32) -> Option<u32>;
}
