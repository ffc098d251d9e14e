//! Helpers shared by the engine's tests: scratch files, and values that name their key and
//! version in every 16 bytes, so a torn, stale or misplaced value cannot pass as a good one.

#![allow(dead_code, unused_imports)]

mod killed;
mod scratch;
pub use killed::Killed;
pub use scratch::scratch;

/// A value of `len` bytes naming `key` and `version` throughout.
pub fn value(key: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(16));
    v.extend_from_slice(&key.to_le_bytes());
    v.extend_from_slice(&version.to_le_bytes());
    // Doubled until long enough: a few copies, not one per 16 bytes (which, with the test
    // build's checks on every copy, was most of the time the object tests took).
    while v.len() < len {
        v.extend_from_within(..v.len().min(len - v.len()));
    }
    v.truncate(len);
    v
}

/// The version a value of `key` holds, after checking every byte of it (at least 16): its
/// first 16 bytes name the key, and every byte after them repeats the one 16 bytes before.
pub fn version_of(key: u64, bytes: &[u8]) -> u64 {
    assert!(bytes.len() >= 16, "key {key}: a value of {} bytes", bytes.len());
    let version = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert!(
        bytes[..8] == key.to_le_bytes() && bytes[16..] == bytes[..bytes.len() - 16],
        "key {key}: torn or foreign bytes"
    );
    version
}

/// Where byte `i` of the block in page `page` of shard `shard` lies in the tier file at
/// `path`, counting a block as its 32-byte header and then its value, wherever the tier's
/// layout puts them (a mapped tier's headers lie apart from its values), read off the file's
/// own superblock.
pub fn block_byte(path: &std::path::Path, shard: u32, page: u64, i: u64) -> u64 {
    use tiercache_engine::tier::block::HEADER_BYTES;
    let superblock = tiercache_engine::tier::superblock::read_superblock(path)
        .unwrap()
        .unwrap_or_else(|| panic!("{} has no superblock of this build", path.display()));
    let geometry = superblock.geometry;
    let header = HEADER_BYTES as u64;
    match geometry.kind {
        1 if i < header => geometry.header_at(shard, page) + i,
        1 => geometry.slot_at(shard, page) + i - header,
        2 => geometry.slot_at(shard, page) + i,
        kind => panic!("no block headers on a tier of kind {kind}"),
    }
}

/// Flips bit `bit` of byte `i` of a block (see [`block_byte`]) in the tier file at `path`.
pub fn flip_block_bit(path: &std::path::Path, shard: u32, page: u64, i: u64, bit: u32) {
    use std::os::unix::fs::FileExt;
    let at = block_byte(path, shard, page, i);
    let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    byte[0] ^= 1 << bit;
    file.write_all_at(&byte, at).unwrap();
}
