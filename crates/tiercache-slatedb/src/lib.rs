//! SlateDB's cache on tiercache: [`TiercacheDbCache`] implements SlateDB's `DbCache`, so an LSM
//! over object storage keeps its data, index, filter and stats blocks in DRAM, a mapped slow
//! memory and flash, under tiercache's policies, as Kassa et al. keep RocksDB's block cache on
//! DRAM and SCM (Kassa et al., "Improving Performance of Flash Based Key-Value Stores
//! Using Storage Class Memory as a Volatile Memory Extension", USENIX ATC '21).
//!
//! SlateDB names an entry by its cache scope, its SST's id and the block's number, and hands
//! over decoded blocks; both are serde types, stored here in their bincode form (as foyer's
//! disk cache stores them): the key is the scope's bytes ([`TiercacheDbCache::with_scope`])
//! and the encoded key, the value the encoded entry. Blocks of any size are one object of the
//! cache each, a large index spanning pages of its tier (`CacheBuilder::max_value`).
//!
//! - Misses of one key at once load it once: the `fetch_*` methods run the engine's single
//!   flight (`KeyedCache::fetch`) on a blocking thread, the first caller's loader reading the
//!   object store and the others waiting for its entry. A fetch reports a miss when its own
//!   loader ran, a hit otherwise, as SlateDB asks.
//! - No read blocks the runtime on a device: an entry on a memory tier is decoded where it
//!   lies, on the caller's thread; a read of a file or flash tier runs on tokio's blocking
//!   threads, so as many are in flight as readers wait for them. (Read on the runtime's own
//!   workers, two on a 2-core machine, at most two flash reads were ever in flight: YCSB C,
//!   served wholly from the cache, ran at 0.6 of foyer's rate with a core idle.)
//! - Every read compares the whole stored key, so two keys under one hash never see each
//!   other's entry; an entry that no longer decodes (written by another SlateDB version, say)
//!   is dropped and missed, and counted ([`TiercacheDbCache::undecodable`]).
//! - Indexes, filters and stats are also kept decoded, in a budget of their own
//!   ([`TiercacheDbCache::with_decoded`], `decoded`): decoding an index verifies its whole
//!   flatbuffer, which otherwise every read of every SST would pay again.
//! - `flush_to_disk` and `close` move what DRAM holds down into the persistent tier below it
//!   and make that tier durable (`Cache::move_down_and_sync`), as foyer's hybrid cache flushes
//!   its memory to disk: a cache reopened over the same tier files starts warm.
//! - SST ids never repeat within a database, so a block cached under one is never stale. WAL
//!   SSTs are numbered from 1 in every database: two databases sharing tier files must have
//!   scopes of their own, or keys of one would find entries of the other. A scope is the
//!   database's path, say.

pub use slatedb;

pub mod decoded;
#[cfg(feature = "foyer")]
pub mod foyer;
pub mod store;
pub mod ycsb;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use slatedb::db_cache::{CacheFetch, CacheLoader, CachedEntry, CachedKey, DbCache};
use slatedb::Error;
use tiercache_engine::{Cache, EngineError, KeyedCache};

use crate::decoded::Decoded;

/// SlateDB's `DbCache` on a tiercache [`Cache`] (see the crate's documentation).
pub struct TiercacheDbCache {
    keyed: Arc<KeyedCache>,
    /// Bytes in front of every key: whose entries these are.
    scope: Vec<u8>,
    /// Entries found that did not decode, dropped.
    undecodable: AtomicU64,
    /// Metadata entries kept decoded.
    decoded: Decoded,
}

impl TiercacheDbCache {
    /// SlateDB's cache on `cache`, in the empty scope. The cache must keep nothing dirty
    /// (write-through, the default); its tiers are whatever it was built with.
    pub fn new(cache: Cache) -> Result<TiercacheDbCache, EngineError> {
        Ok(TiercacheDbCache::over(Arc::new(KeyedCache::new(cache)?)))
    }

    /// SlateDB's cache over keys of any bytes that other users may share.
    pub fn over(keyed: Arc<KeyedCache>) -> TiercacheDbCache {
        TiercacheDbCache {
            keyed,
            scope: Vec::new(),
            undecodable: AtomicU64::new(0),
            decoded: Decoded::new(0),
        }
    }

    /// Keys prefixed by `scope`: entries cached under another scope (another database's, in
    /// tier files two databases share) are never found.
    pub fn with_scope(mut self, scope: impl AsRef<[u8]>) -> TiercacheDbCache {
        self.scope = scope.as_ref().to_vec();
        self
    }

    /// Keeps up to `bytes` of indexes, filters and stats decoded (by SlateDB's measure of an
    /// entry), beside their bytes in the cache: memory beyond the cache's tiers, which a budget
    /// shared with them should take from the DRAM tier. 0, the default, keeps none.
    pub fn with_decoded(mut self, bytes: usize) -> TiercacheDbCache {
        self.decoded = Decoded::new(bytes);
        self
    }

    /// The keyed cache underneath (its statistics, its tiers).
    pub fn keyed(&self) -> &KeyedCache {
        &self.keyed
    }

    /// Entries found that no longer decoded, dropped and missed.
    pub fn undecodable(&self) -> u64 {
        self.undecodable.load(Ordering::Relaxed)
    }

    fn key(&self, key: &CachedKey) -> Vec<u8> {
        let mut bytes = self.scope.clone();
        bincode::serialize_into(&mut bytes, key).expect("a cache key encodes");
        bytes
    }

    /// The entry stored under `key`, if it decodes; one that does not is dropped.
    fn decode(&self, key: &[u8], stored: &[u8]) -> Option<CachedEntry> {
        self.decoded_or_dropped(key, bincode::deserialize(stored))
    }

    fn decoded_or_dropped(
        &self,
        key: &[u8],
        decoded: bincode::Result<CachedEntry>,
    ) -> Option<CachedEntry> {
        match decoded {
            Ok(entry) => Some(entry),
            Err(_) => {
                self.undecodable.fetch_add(1, Ordering::Relaxed);
                self.keyed.remove(key);
                None
            }
        }
    }

    /// The entry under the stored key `key`: a hit held in a memory tier is decoded at once,
    /// on the caller's thread; anything else (a read of a file or flash tier, a wait for a
    /// shard's lock) runs on tokio's blocking threads, so that no worker of the runtime waits
    /// on a device and as many reads are in flight as readers wait for them.
    async fn get_without_blocking(&self, key: Vec<u8>) -> Option<CachedEntry> {
        let decode = |stored: &[u8]| bincode::deserialize(stored);
        if let Some(decoded) = self.keyed.get_in_memory_with(&key, decode) {
            return self.decoded_or_dropped(&key, decoded);
        }
        let keyed = self.keyed.clone();
        let read = tokio::task::spawn_blocking(move || {
            let decoded = keyed.get_with(&key, decode);
            (key, decoded)
        })
        .await;
        match read {
            Ok((key, Some(decoded))) => self.decoded_or_dropped(&key, decoded),
            Ok((_, None)) | Err(_) => None,
        }
    }

    /// A metadata entry: decoded already, or from the cache and kept decoded.
    async fn get_meta(&self, key: &CachedKey) -> Option<CachedEntry> {
        let stored_key = self.key(key);
        if let Some(entry) = self.decoded.get(&stored_key) {
            return Some(entry);
        }
        let entry = self.get_without_blocking(stored_key.clone()).await?;
        self.decoded.keep(&stored_key, &entry);
        Some(entry)
    }

    /// `fetch` of a metadata entry, kept decoded.
    async fn fetch_meta(&self, key: CachedKey, loader: CacheLoader) -> Result<CacheFetch, Error> {
        let stored_key = self.key(&key);
        if let Some(entry) = self.decoded.get(&stored_key) {
            return Ok(CacheFetch::hit(entry));
        }
        let fetched = self.fetch(stored_key.clone(), loader).await?;
        self.decoded.keep(&stored_key, &fetched.entry);
        Ok(fetched)
    }

    /// The entry under the stored key `key`, from the cache or loaded once for every fetch of
    /// it at the time.
    async fn fetch(&self, key: Vec<u8>, loader: CacheLoader) -> Result<CacheFetch, Error> {
        if let Some(entry) = self.get_without_blocking(key.clone()).await {
            return Ok(CacheFetch::hit(entry));
        }
        let keyed = self.keyed.clone();
        let runtime = tokio::runtime::Handle::current();
        let fetched = tokio::task::spawn_blocking(move || {
            // The loader's own outcome, when it is this fetch's loader that ran.
            let loaded: Mutex<Option<Result<CachedEntry, Error>>> = Mutex::new(None);
            let shared = keyed.fetch(&key, || {
                let outcome = runtime.block_on(loader());
                let stored = match &outcome {
                    Ok(entry) => Ok(bincode::serialize(entry).expect("a cache entry encodes")),
                    Err(e) => Err(io::Error::other(e.to_string())),
                };
                *loaded.lock().expect("one loader") = Some(outcome);
                stored
            });
            (key, loaded.into_inner().expect("one loader"), shared)
        })
        .await
        .map_err(|e| Error::internal(format!("tiercache: a cache fetch's thread failed: {e}")))?;
        match fetched {
            // Loaded here: a miss, whether or not the cache kept it.
            (_, Some(outcome), _) => outcome.map(CacheFetch::miss),
            (key, None, Ok(stored)) => match self.decode(&key, &stored) {
                Some(entry) => Ok(CacheFetch::hit(entry)),
                None => Err(Error::data(
                    "tiercache: an entry another fetch loaded did not decode".into(),
                )),
            },
            (_, None, Err(e)) => Err(Error::unavailable(format!(
                "tiercache: the load this fetch waited for failed: {e}"
            ))),
        }
    }
}

#[async_trait]
impl DbCache for TiercacheDbCache {
    async fn get_block(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        Ok(self.get_without_blocking(self.key(key)).await)
    }

    async fn get_index(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        Ok(self.get_meta(key).await)
    }

    async fn get_filter(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        Ok(self.get_meta(key).await)
    }

    async fn get_stats(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        Ok(self.get_meta(key).await)
    }

    async fn insert(&self, key: CachedKey, value: CachedEntry) {
        let key = self.key(&key);
        // An entry kept decoded is this SST's same entry (SST ids never repeat), given back in
        // another form: SlateDB decodes the filters a cache returns in their stored form and
        // inserts them again, decoded, after every such read. Kept so, it is not read back in
        // the stored form again, and its bytes, cached already, are not written again.
        if self.decoded.replace(&key, &value) {
            return;
        }
        let stored = bincode::serialize(&value).expect("a cache entry encodes");
        // An entry too large for the cache is not cached, as one the policy declines: the
        // trait has no error to report.
        let _ = self.keyed.insert(&key, &stored);
    }

    async fn remove(&self, key: &CachedKey) {
        let key = self.key(key);
        self.decoded.remove(&key);
        self.keyed.remove(&key);
    }

    fn entry_count(&self) -> u64 {
        self.keyed.cache().occupancy().0
    }

    async fn close(&self) -> Result<(), Error> {
        self.flush_to_disk().await
    }

    async fn flush_to_disk(&self) -> Result<(), Error> {
        let keyed = self.keyed.clone();
        tokio::task::spawn_blocking(move || keyed.cache().move_down_and_sync())
            .await
            .map_err(|e| Error::internal(format!("tiercache: the sync's thread failed: {e}")))?
            .map_err(|e| Error::unavailable(format!("tiercache: syncing the cache failed: {e}")))
    }

    async fn fetch_block(&self, key: CachedKey, loader: CacheLoader) -> Result<CacheFetch, Error> {
        self.fetch(self.key(&key), loader).await
    }

    async fn fetch_index(&self, key: CachedKey, loader: CacheLoader) -> Result<CacheFetch, Error> {
        self.fetch_meta(key, loader).await
    }

    async fn fetch_filter(&self, key: CachedKey, loader: CacheLoader) -> Result<CacheFetch, Error> {
        self.fetch_meta(key, loader).await
    }

    async fn fetch_stats(&self, key: CachedKey, loader: CacheLoader) -> Result<CacheFetch, Error> {
        self.fetch_meta(key, loader).await
    }
}
