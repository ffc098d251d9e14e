//! Keys of any bytes over the block cache ([`KeyedCache`]): a path, a name, a file number and an
//! offset, anything a program keys its objects by. A key is hashed to the engine's 64-bit key,
//! and stored whole in front of its value; every read compares it, so two keys whose hashes
//! collide never see each other's value (a read that finds another key is a miss, counted).
//! The hash is CRC-64/NVME of the key's bytes, fixed across processes and builds, so objects
//! on a persistent tier are found again after a restart, with their keys.
//!
//! What is stored: the key's length (4 bytes, little-endian), the key, the value. So a key and
//! its value fit in the cache's largest value less 4 bytes (`CacheBuilder::max_value`; a larger
//! one is an error naming the room). Within a block an object takes the smallest size class
//! that holds it; beyond, it spans pages (`crate::shard` and its `spans`), one entry of the
//! policy sized as its pages, written with a header on each page, and kept by recovery only
//! whole.
//!
//! The cache under it must keep nothing dirty (no backing device stands behind these keys):
//! a write-back cache is refused. Its policies decide on the objects' hashes exactly as on
//! blocks' numbers, so the simulator replays a trace of the hashes as it does any trace.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};

mod typed;
pub use typed::{KeyBytes, TypedCache};

use tiercache_core::Key;

use crate::cache::Cache;
use crate::error::EngineError;

/// The bytes in front of a stored key: its length.
const HEADER: usize = 4;

/// The longest key, in bytes.
pub const MAX_KEY: usize = 1 << 16;

/// How a key's bytes become the engine's 64-bit key. Any function will do for correctness
/// (keys are compared on every read); a good one spreads keys over the shards, and a fixed one
/// finds a persistent tier's objects again after a restart.
pub trait KeyHash: Send + Sync {
    fn hash(&self, key: &[u8]) -> Key;
}

/// CRC-64/NVME of the key: fast, and the same in every process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Crc64;

impl KeyHash for Crc64 {
    fn hash(&self, key: &[u8]) -> Key {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, key)
    }
}

/// A cache of values under keys of any bytes (see the module's documentation).
pub struct KeyedCache<H: KeyHash = Crc64> {
    cache: Cache,
    hasher: H,
    /// Reads that found another key's object under the same hash.
    collisions: AtomicU64,
}

impl KeyedCache<Crc64> {
    /// Keys of any bytes over `cache`, hashed with [`Crc64`].
    pub fn new(cache: Cache) -> Result<KeyedCache<Crc64>, EngineError> {
        KeyedCache::with_hasher(cache, Crc64)
    }
}

impl<H: KeyHash> KeyedCache<H> {
    /// Keys of any bytes over `cache`, hashed by `hasher`. A cache that keeps written data
    /// dirty is refused: nothing stands behind these keys to write it back to.
    pub fn with_hasher(cache: Cache, hasher: H) -> Result<KeyedCache<H>, EngineError> {
        if cache.keeps_dirty() {
            return Err(EngineError::config(
                "mode",
                "keys of any bytes have no backing device to write dirty values back to: use a \
                 mode that keeps nothing dirty (write-through, the default)",
            ));
        }
        Ok(KeyedCache { cache, hasher, collisions: AtomicU64::new(0) })
    }

    /// The block cache underneath (its statistics, its tiers).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Reads that found another key's object under their key's hash, and missed.
    pub fn collisions(&self) -> u64 {
        self.collisions.load(Ordering::Relaxed)
    }

    /// The largest value a key of `key_len` bytes can have.
    pub fn max_value(&self, key_len: usize) -> usize {
        self.cache.max_value().saturating_sub(HEADER + key_len)
    }

    /// `key`'s value, if cached.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.get_with(key, <[u8]>::to_vec)
    }

    /// `key`'s value, if cached, handed to `read` where it lies: in place on a memory tier
    /// (its slots pinned until `read` returns), or as the one copy a file or flash tier's read
    /// makes. For a caller that decodes the value anyway, this spares [`get`](Self::get)'s copy.
    pub fn get_with<R>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let held = self.cache.get_ref(self.hasher.hash(key))?;
        self.value_of(key, &held).map(read)
    }

    /// As [`get_with`](Self::get_with) where the object lies on a memory tier
    /// ([`Cache::get_ref_in_memory`]), so that the read waits on no device; `None` otherwise,
    /// whether or not `key` is cached.
    pub fn get_in_memory_with<R>(&self, key: &[u8], read: impl FnOnce(&[u8]) -> R) -> Option<R> {
        let held = self.cache.get_ref_in_memory(self.hasher.hash(key))?;
        self.value_of(key, &held).map(read)
    }

    /// Whether `key` is cached (its own object, not another key's under its hash).
    pub fn contains(&self, key: &[u8]) -> bool {
        let hash = self.hasher.hash(key);
        self.cache.contains(hash) && self.get_with(key, |_| ()).is_some()
    }

    /// Caches `value` under `key` if the policy admits it (an object of another key under the
    /// same hash is replaced); whether the cache holds it now. An empty key, a key over
    /// [`MAX_KEY`], or a key and value larger than the cache's largest value, is an error
    /// naming the limit.
    pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<bool, EngineError> {
        let stored = self.encode(key, value)?;
        Ok(self.cache.put(self.hasher.hash(key), &stored)?.cached)
    }

    /// Drops `key`'s object if cached (another key's under the same hash is left alone).
    pub fn remove(&self, key: &[u8]) {
        if self.get_with(key, |_| ()).is_some() {
            self.cache.invalidate(self.hasher.hash(key));
        }
    }

    /// `key`'s value: cached, or loaded by `load` (and cached if the policy admits it), with
    /// concurrent misses of one key loading it once ([`Cache::fetch`]). A value too large to
    /// cache is returned to the thread that loaded it, and not cached; threads that waited for
    /// that load get [`EngineError::SharedLoad`] saying it did not fit.
    pub fn fetch(
        &self,
        key: &[u8],
        load: impl FnOnce() -> io::Result<Vec<u8>>,
    ) -> Result<Vec<u8>, EngineError> {
        self.check_key(key)?;
        let hash = self.hasher.hash(key);
        let mut load = Some(load);
        let mut too_large = None;
        let outcome = self.cache.fetch_object(hash, || {
            let value = (load.take().expect("one load"))()?;
            match self.encode(key, &value) {
                Ok(stored) => Ok(stored),
                Err(e) => {
                    // Handed back, not cached: to the cache the load failed.
                    let refused = io::Error::other(e.to_string());
                    too_large = Some(value);
                    Err(refused)
                }
            }
        });
        if let Some(value) = too_large {
            return Ok(value);
        }
        let (stored, _) = outcome?;
        if let Some(value) = self.value_of(key, &stored) {
            return Ok(value.to_vec());
        }
        // Another key's object under this hash (found, or loaded by a fetch of that key this
        // one waited for): a miss, loaded now and cached in its place.
        let Some(load) = load else {
            unreachable!("a load of this fetch's own ran, and stored this key")
        };
        let value = load().map_err(|source| EngineError::Io {
            path: "<fetch>".into(),
            action: "loading a missed key failed",
            source,
        })?;
        if let Ok(stored) = self.encode(key, &value) {
            self.cache.put(hash, &stored)?;
        }
        Ok(value)
    }

    /// `key` and `value` as stored: the key's length, the key, the value.
    fn encode(&self, key: &[u8], value: &[u8]) -> Result<Vec<u8>, EngineError> {
        self.check_key(key)?;
        let room = self.cache.max_value();
        if HEADER + key.len() + value.len() > room {
            return Err(EngineError::ObjectTooLarge {
                key: key.len(),
                value: value.len(),
                room: room - HEADER,
            });
        }
        let mut stored = Vec::with_capacity(HEADER + key.len() + value.len());
        stored.extend_from_slice(&(key.len() as u32).to_le_bytes());
        stored.extend_from_slice(key);
        stored.extend_from_slice(value);
        Ok(stored)
    }

    fn check_key(&self, key: &[u8]) -> Result<(), EngineError> {
        if key.is_empty() {
            return Err(EngineError::config("key", "an empty key: a key has at least one byte"));
        }
        if key.len() > MAX_KEY {
            let reason = format!("a key of {} bytes: a key has at most {MAX_KEY}", key.len());
            return Err(EngineError::config("key", reason));
        }
        Ok(())
    }

    /// The value in `stored` if it is `key`'s object; a collision (another key's) counted.
    fn value_of<'a>(&self, key: &[u8], stored: &'a [u8]) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(stored.get(..HEADER)?.try_into().ok()?) as usize;
        let found = stored.get(HEADER..HEADER + len)?;
        if found != key {
            self.collisions.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(&stored[HEADER + len..])
    }
}
