//! A bit per slot: the flags a tier keeps for every slot when a byte each would cost too much
//! (whether a flash slot may be read, whether its record changed, whether a block is dirty).

pub struct SlotBits {
    words: Vec<u64>,
}

impl SlotBits {
    /// `slots` bits, all clear.
    pub fn new(slots: usize) -> SlotBits {
        SlotBits { words: vec![0; slots.div_ceil(64)] }
    }

    #[inline]
    pub fn get(&self, slot: u32) -> bool {
        self.words[slot as usize / 64] & (1 << (slot % 64)) != 0
    }

    #[inline]
    pub fn set(&mut self, slot: u32, on: bool) {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        match on {
            true => self.words[word] |= bit,
            false => self.words[word] &= !bit,
        }
    }

    /// The slots whose bit is set, in order.
    pub fn ones(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().filter(|(_, w)| **w != 0).flat_map(|(i, &w)| {
            (0..64).filter(move |b| w & (1 << b) != 0).map(move |b| (i * 64 + b) as u32)
        })
    }

    pub fn clear(&mut self) {
        self.words.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_set_clear_and_list_in_order() {
        let mut bits = SlotBits::new(200);
        for slot in [0, 63, 64, 130, 199] {
            bits.set(slot, true);
        }
        bits.set(64, false);
        assert!(bits.get(63) && !bits.get(64) && bits.get(199));
        assert_eq!(bits.ones().collect::<Vec<_>>(), [0, 63, 130, 199]);
        bits.clear();
        assert_eq!(bits.ones().count(), 0);
    }
}
