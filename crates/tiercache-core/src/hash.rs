//! Hashing for keys. Policies index millions of keys per second, so the map hasher is a single
//! folded 128-bit multiply instead of SipHash. It mixes all bits into both halves of the result,
//! which matters because block-trace keys are often byte offsets whose low bits are all zero.
//! Not DoS-resistant: keys come from traces and the application, not from an adversary.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

const MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;
const SEED: u64 = 0x243F_6A88_85A3_08D3;

#[inline]
fn fold_multiply(a: u64, b: u64) -> u64 {
    let full = (a as u128).wrapping_mul(b as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Hasher for `u64` keys (and, slower, for anything else).
#[derive(Clone, Copy, Default)]
pub struct KeyHasher {
    state: u64,
}

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }

    #[inline]
    fn write_u64(&mut self, value: u64) {
        self.state = fold_multiply(value ^ self.state ^ SEED, MULTIPLIER);
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
}

/// Builds [`KeyHasher`]s; the `S` of every key map in tiercache.
#[derive(Clone, Copy, Default)]
pub struct KeyBuildHasher;

impl BuildHasher for KeyBuildHasher {
    type Hasher = KeyHasher;

    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher::default()
    }
}

pub type KeyMap<V> = HashMap<u64, V, KeyBuildHasher>;
pub type KeySet = HashSet<u64, KeyBuildHasher>;

/// 64-bit FNV-1a over bytes (Fowler, Noll, Vo). Turns string keys into numeric ones and is the
/// hash YCSB uses to scatter its key numbers.
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01B3;
    bytes.iter().fold(OFFSET_BASIS, |hash, byte| (hash ^ *byte as u64).wrapping_mul(PRIME))
}

/// The shard of `key` among `2^bits` shards: the engine's choice, which the simulator's
/// sharded model (`StackConfig::shards`) makes too, so both split a stream alike. The high bits
/// of a multiplied mix, so keys whose low bits are all zero (byte offsets) still spread.
#[inline]
pub fn shard_index(key: u64, bits: u32) -> usize {
    let mixed = (key ^ (key >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    if bits == 0 {
        0
    } else {
        (mixed >> (64 - bits)) as usize
    }
}

/// The seed of shard `index`'s policies, from the cache's `seed` (engine and simulator alike).
#[inline]
pub fn shard_seed(seed: u64, index: u64) -> u64 {
    seed ^ index.wrapping_mul(MULTIPLIER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_known_vectors() {
        // Published FNV-1a 64-bit test vectors (Noll's reference list).
        assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn aligned_offsets_spread_over_low_bits() {
        let mut buckets = [0u32; 64];
        for i in 0..64_000u64 {
            let mut h = KeyHasher::default();
            h.write_u64(i * 4096);
            buckets[(h.finish() & 63) as usize] += 1;
        }
        let (min, max) = (buckets.iter().min().unwrap(), buckets.iter().max().unwrap());
        assert!(*min > 800 && *max < 1200, "buckets {min}..{max}");
    }
}
