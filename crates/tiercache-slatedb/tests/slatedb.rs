//! SlateDB over tiercache: a database on a local object store with its block cache on DRAM
//! over a flash tier, its values read back through the cache, warm after a reopen, and never
//! wrong over a corrupted or another database's tier file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use slatedb::db_cache::{CacheLookup, CachedEntry, CachedKey, DbCache};
use slatedb::object_store::local::LocalFileSystem;
use slatedb::object_store::ObjectStore;
use slatedb::{Db, Error};
use tiercache_engine::{CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_slatedb::decoded::Decoded;
use tiercache_slatedb::TiercacheDbCache;

const KEYS: u64 = 1500;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tiercache-slatedb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    dir
}

/// A value of its own length and bytes for each key, some of them several blocks long.
fn value(key: u64) -> Vec<u8> {
    let len = 10 + (key * 7919 % 6000) as usize;
    (0..len).map(|i| (key as usize * 31 + i) as u8).collect()
}

fn key(key: u64) -> Vec<u8> {
    format!("key{key:08}").into_bytes()
}

/// 256 KiB of DRAM over a 16 MiB flash tier in `dir`, recovered if the tier file is there.
fn cache(dir: &Path) -> tiercache_engine::Cache {
    CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(256 << 10)
        .lower_tier(TierKind::Flash { path: dir.join("cache.flash") }, 16 << 20, PolicyConfig::Lru)
        .shards(4)
        .max_value(4 << 20)
        .build()
        .expect("a valid cache")
}

fn store(dir: &Path) -> Arc<dyn ObjectStore> {
    Arc::new(LocalFileSystem::new_with_prefix(dir.join("objects")).unwrap())
}

async fn write_all(dir: &Path) {
    let db = Db::builder("db", store(dir)).with_db_cache_disabled().build().await.unwrap();
    for k in 0..KEYS {
        db.put(key(k), value(k)).await.unwrap();
    }
    db.flush().await.unwrap();
    db.close().await.unwrap();
}

/// Opens the database over `cache`, reads every key and checks its value.
async fn read_all(dir: &Path, cache: Arc<dyn DbCache>) {
    let db = Db::builder("db", store(dir)).with_db_cache(cache, 0).build().await.unwrap();
    for k in 0..KEYS {
        let found = db.get(key(k)).await.unwrap();
        assert_eq!(found.as_deref(), Some(&value(k)[..]), "key {k}");
    }
    db.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slatedb_reads_its_values_through_the_cache_and_reopens_warm() {
    let dir = scratch("warm");
    write_all(&dir).await;
    let cold = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap());
    read_all(&dir, cold.clone()).await;
    read_all(&dir, cold.clone()).await;
    let stats = cold.keyed().cache().stats();
    assert!(stats.hits > 0 && stats.lookups > stats.hits, "{stats:?}");
    assert!(stats.tier_hits[1] > 0, "the flash tier served hits: {stats:?}");
    cold.close().await.unwrap();
    drop(cold);

    // Reopened over the same tier file: the first pass already hits.
    let warm = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap());
    assert!(warm.keyed().cache().stats().recovered > 0);
    read_all(&dir, warm.clone()).await;
    let stats = warm.keyed().cache().stats();
    eprintln!(
        "warm: {} hits of {} lookups, {} recovered",
        stats.hits, stats.lookups, stats.recovered
    );
    assert!(stats.hits * 2 > stats.lookups, "warm: {stats:?}");
    assert_eq!(warm.undecodable(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_or_foreign_tier_file_never_serves_a_wrong_value() {
    let dir = scratch("foreign");
    write_all(&dir).await;
    let first = recording(TiercacheDbCache::new(cache(&dir)).unwrap().with_scope("db"));
    read_all(&dir, first.clone()).await;
    first.inner.close().await.unwrap();
    let keys: Vec<CachedKey> =
        first.inserted.lock().unwrap().iter().map(|(k, _)| k.clone()).collect();
    drop(first);

    // Every 64 KiB of the tier file, a byte flipped: recovery drops what no longer checks out.
    let path = dir.join("cache.flash");
    let mut bytes = std::fs::read(&path).unwrap();
    for at in (4096..bytes.len()).step_by(64 << 10) {
        bytes[at + 100] ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let damaged = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_scope("db"));
    let stats = damaged.keyed().cache().stats();
    eprintln!("damaged: {} of {} recovered", stats.recovery_damaged, stats.recovered);
    assert!(stats.recovery_damaged > 0, "{stats:?}");
    let mut found = 0;
    for key in &keys {
        found += damaged.get_block(key).await.unwrap().is_some() as usize;
    }
    assert!(found > 0, "the entries that checked out are found: 0 of {}", keys.len());
    read_all(&dir, damaged.clone()).await;
    damaged.close().await.unwrap();
    drop(damaged);

    // Another database's cache (another scope) over the same file finds none of them.
    let other = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_scope("another db"));
    assert!(other.keyed().cache().stats().recovered > 0);
    for key in &keys {
        assert!(other.get_block(key).await.unwrap().is_none(), "another scope's entry");
    }
    read_all(&dir, other).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

fn recording(inner: TiercacheDbCache) -> Arc<Recording> {
    Arc::new(Recording { inner: Arc::new(inner), inserted: Mutex::new(Vec::new()) })
}

/// Records the entries SlateDB inserts, passing everything on.
struct Recording {
    inner: Arc<TiercacheDbCache>,
    inserted: Mutex<Vec<(CachedKey, CachedEntry)>>,
}

#[async_trait]
impl DbCache for Recording {
    async fn get_block(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        self.inner.get_block(key).await
    }
    async fn get_index(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        self.inner.get_index(key).await
    }
    async fn get_filter(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        self.inner.get_filter(key).await
    }
    async fn get_stats(&self, key: &CachedKey) -> Result<Option<CachedEntry>, Error> {
        self.inner.get_stats(key).await
    }
    async fn insert(&self, key: CachedKey, value: CachedEntry) {
        self.inserted.lock().unwrap().push((key.clone(), value.clone()));
        self.inner.insert(key, value).await
    }
    async fn remove(&self, key: &CachedKey) {
        self.inner.remove(key).await
    }
    fn entry_count(&self) -> u64 {
        self.inner.entry_count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_fetches_of_a_missing_entry_load_it_once() {
    let dir = scratch("fetch");
    write_all(&dir).await;
    let recording = recording(TiercacheDbCache::new(cache(&dir)).unwrap());
    let db = Db::builder("db", store(&dir)).with_db_cache(recording.clone(), 0).build().await;
    let db = db.unwrap();
    assert!(db.get(key(1)).await.unwrap().is_some());
    db.close().await.unwrap();
    let (key, entry) = recording.inserted.lock().unwrap()[0].clone();
    let cache = recording.inner.clone();
    cache.remove(&key).await;

    let loads = Arc::new(AtomicUsize::new(0));
    let fetches: Vec<_> = (0..8)
        .map(|_| {
            let (cache, key, entry, loads) =
                (cache.clone(), key.clone(), entry.clone(), loads.clone());
            tokio::spawn(async move {
                let loader: slatedb::db_cache::CacheLoader = Box::new(move || {
                    Box::pin(async move {
                        loads.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        Ok(entry)
                    })
                });
                cache.fetch_block(key, loader).await.unwrap().lookup
            })
        })
        .collect();
    let mut misses = 0;
    for fetch in fetches {
        if fetch.await.unwrap() == CacheLookup::Miss {
            misses += 1;
        }
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1, "one load for eight fetches");
    assert_eq!(misses, 1, "the fetch whose loader ran reports the miss, the others hits");
    assert!(cache.get_block(&key).await.unwrap().is_some(), "and the entry is cached");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoded_entries_stay_within_their_budget_and_the_marked_outlive_the_rest() {
    let dir = scratch("decoded");
    write_all(&dir).await;
    let recording = recording(TiercacheDbCache::new(cache(&dir)).unwrap());
    read_all(&dir, recording.clone()).await;
    let entries = recording.inserted.lock().unwrap().clone();
    let sizes: Vec<usize> = entries.iter().map(|(_, e)| e.size()).collect();
    let largest = *sizes.iter().max().unwrap();
    // Room for about eight of the largest.
    let decoded = Decoded::new(8 * largest + 4 * largest);
    let key = |i: usize| format!("entry {i}").into_bytes();
    decoded.keep(&key(0), &entries[0].1);
    for (i, (_, entry)) in entries.iter().enumerate().skip(1) {
        assert!(decoded.get(&key(0)).is_some(), "entry 0, read before each keep, stays");
        decoded.keep(&key(i), entry);
        assert!(decoded.bytes() <= decoded.budget(), "{} of {}", decoded.bytes(), decoded.budget());
    }
    assert!(entries.len() > 20 && decoded.get(&key(1)).is_none(), "the unread went first");
    decoded.remove(&key(0));
    assert!(decoded.get(&key(0)).is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}
