//! YCSB's records as tiercache's YCSB runs store them, whatever the database: each record's
//! bytes carry their own proof ([`fill_record`]): the record's number, a version, filler drawn
//! from both, and a CRC32C of all that, so a read that returns another record, a torn one or
//! stale bytes is caught ([`check_record`]). And the acknowledged insert counter ([`Records`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::ycsb_hash;

/// The smallest record: its number, its version and the checksum.
pub const MIN_RECORD_BYTES: usize = 20;

/// Fills `out` (at least [`MIN_RECORD_BYTES`]) with version `version` of record `keynum`:
/// the number and the version (little-endian), filler drawn from both, then the CRC32C
/// (Castagnoli) of everything before it.
pub fn fill_record(keynum: u64, version: u64, out: &mut [u8]) {
    assert!(out.len() >= MIN_RECORD_BYTES, "a record has at least {MIN_RECORD_BYTES} bytes");
    let body = out.len() - 4;
    out[..8].copy_from_slice(&keynum.to_le_bytes());
    out[8..16].copy_from_slice(&version.to_le_bytes());
    // xorshift64* (Vigna), never seeded with zero.
    let mut x = (keynum.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version.rotate_left(32)) | 1;
    for chunk in out[16..body].chunks_mut(8) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let word = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &out[..body]) as u32;
    out[body..].copy_from_slice(&crc.to_le_bytes());
}

/// Checks the bytes stored under `key`: a whole record whose number hashes to `key`. Returns
/// the record's number and version, or what is wrong.
pub fn check_record(key: u64, bytes: &[u8]) -> Result<(u64, u64), String> {
    if bytes.len() < MIN_RECORD_BYTES {
        return Err(format!("key {key}: {} bytes, shorter than any record", bytes.len()));
    }
    let body = bytes.len() - 4;
    let stored = u32::from_le_bytes(bytes[body..].try_into().expect("4 bytes"));
    let crc = crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, &bytes[..body]) as u32;
    if crc != stored {
        return Err(format!("key {key}: checksum {crc:08x}, the record says {stored:08x}"));
    }
    let keynum = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let version = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if ycsb_hash(keynum) != key {
        return Err(format!("key {key} holds record {keynum}, whose key is {}", ycsb_hash(keynum)));
    }
    Ok((keynum, version))
}

/// Records that exist, as YCSB's acknowledged insert counter: an inserting client takes the
/// next number, and the record counts as existing (readers may choose it) once it and every
/// record numbered below it committed.
pub struct Records {
    next: AtomicU64,
    existing: AtomicU64,
    acknowledged: Mutex<BTreeSet<u64>>,
}

impl Records {
    /// `count` records, numbered from 0, exist.
    pub fn new(count: u64) -> Records {
        Records {
            next: AtomicU64::new(count),
            existing: AtomicU64::new(count),
            acknowledged: Mutex::new(BTreeSet::new()),
        }
    }

    /// Records `0..existing()` exist.
    pub fn existing(&self) -> u64 {
        self.existing.load(Ordering::Acquire)
    }

    /// The next record's number, for an insert.
    pub fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// `keynum`'s insert committed: it exists once every record below it does.
    pub fn acknowledge(&self, keynum: u64) {
        let mut done = self.acknowledged.lock().unwrap_or_else(|p| p.into_inner());
        done.insert(keynum);
        let mut existing = self.existing.load(Ordering::Relaxed);
        while done.remove(&existing) {
            existing += 1;
        }
        self.existing.store(existing, Ordering::Release);
    }
}
