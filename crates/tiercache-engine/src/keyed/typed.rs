//! Keys of a Rust type over [`KeyedCache`]: [`TypedCache<K>`] takes any key whose bytes
//! [`KeyBytes`] says, the same in every process and build (so a persistent tier's objects are
//! found again after a restart, under the same keys). Strings, byte strings, integers, and a
//! pair of integers (an LSM's file number and block offset) have their bytes here; a type of
//! the program's own says its bytes by implementing the trait.

use std::borrow::Cow;
use std::io;
use std::marker::PhantomData;

use super::{Crc64, KeyHash, KeyedCache};
use crate::cache::Cache;
use crate::error::EngineError;

/// A key's bytes, stable across processes and builds: two keys are the same key exactly when
/// their bytes are equal.
pub trait KeyBytes {
    fn key_bytes(&self) -> Cow<'_, [u8]>;
}

impl KeyBytes for [u8] {
    fn key_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}

impl KeyBytes for Vec<u8> {
    fn key_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self)
    }
}

impl KeyBytes for str {
    fn key_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }
}

impl KeyBytes for String {
    fn key_bytes(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.as_bytes())
    }
}

/// Integers as their little-endian bytes.
macro_rules! integer_keys {
    ($($t:ty),*) => {$(
        impl KeyBytes for $t {
            fn key_bytes(&self) -> Cow<'_, [u8]> {
                Cow::Owned(self.to_le_bytes().to_vec())
            }
        }
    )*};
}
integer_keys!(u32, u64, u128, i64);

/// A pair of integers (a file number and an offset, as RocksDB's block cache keys blocks): the
/// first's bytes, then the second's.
impl KeyBytes for (u64, u64) {
    fn key_bytes(&self) -> Cow<'_, [u8]> {
        let mut bytes = self.0.to_le_bytes().to_vec();
        bytes.extend_from_slice(&self.1.to_le_bytes());
        Cow::Owned(bytes)
    }
}

/// A cache of values (bytes of any size up to the cache's largest) under keys of type `K`: a
/// [`KeyedCache`] whose calls take a `&K`.
pub struct TypedCache<K: KeyBytes + ?Sized, H: KeyHash = Crc64> {
    keyed: KeyedCache<H>,
    keys: PhantomData<fn(&K)>,
}

impl<K: KeyBytes + ?Sized> TypedCache<K, Crc64> {
    /// Keys of type `K` over `cache` (refused as [`KeyedCache::new`] refuses it).
    pub fn new(cache: Cache) -> Result<TypedCache<K, Crc64>, EngineError> {
        Ok(TypedCache { keyed: KeyedCache::new(cache)?, keys: PhantomData })
    }
}

impl<K: KeyBytes + ?Sized, H: KeyHash> TypedCache<K, H> {
    /// Keys of type `K` over a cache of keys of any bytes.
    pub fn over(keyed: KeyedCache<H>) -> TypedCache<K, H> {
        TypedCache { keyed, keys: PhantomData }
    }

    /// The cache of byte keys underneath.
    pub fn keyed(&self) -> &KeyedCache<H> {
        &self.keyed
    }

    /// `key`'s value, if cached.
    pub fn get(&self, key: &K) -> Option<Vec<u8>> {
        self.keyed.get(&key.key_bytes())
    }

    /// Whether `key` is cached.
    pub fn contains(&self, key: &K) -> bool {
        self.keyed.contains(&key.key_bytes())
    }

    /// Caches `value` under `key` if the policy admits it (see [`KeyedCache::insert`]).
    pub fn insert(&self, key: &K, value: &[u8]) -> Result<bool, EngineError> {
        self.keyed.insert(&key.key_bytes(), value)
    }

    /// Drops `key`'s object if cached.
    pub fn remove(&self, key: &K) {
        self.keyed.remove(&key.key_bytes())
    }

    /// `key`'s value: cached, or loaded by `load` once however many threads miss it at once
    /// (see [`KeyedCache::fetch`]).
    pub fn fetch(
        &self,
        key: &K,
        load: impl FnOnce() -> io::Result<Vec<u8>>,
    ) -> Result<Vec<u8>, EngineError> {
        self.keyed.fetch(&key.key_bytes(), load)
    }
}
