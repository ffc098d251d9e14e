//! Helpers shared by the engine's tests: scratch files, and values that name their key and
//! version in every 16 bytes, so a torn, stale or misplaced value cannot pass as a good one.

#![allow(dead_code)]

mod scratch;
pub use scratch::scratch;

/// A value of `len` bytes naming `key` and `version` throughout.
pub fn value(key: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 16);
    while v.len() < len {
        v.extend_from_slice(&key.to_le_bytes());
        v.extend_from_slice(&version.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The version a value of `key` holds, after checking every byte of it (at least 16).
pub fn version_of(key: u64, bytes: &[u8]) -> u64 {
    assert!(bytes.len() >= 16, "key {key}: a value of {} bytes", bytes.len());
    let version = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    assert!(bytes == &value(key, version, bytes.len())[..], "key {key}: torn or foreign bytes");
    version
}
