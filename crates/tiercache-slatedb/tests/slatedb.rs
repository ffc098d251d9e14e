//! SlateDB over tiercache: a database on a local object store with its block cache on DRAM
//! over a flash tier, its values read back through the cache, warm after a reopen, never
//! wrong over a corrupted or another database's tier file, nor after compaction deleted the
//! SSTs whose blocks it holds, nor after the process was killed mid-write.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use object_store::aws::AmazonS3Builder;
use slatedb::config::{
    CompactorOptions, FlushOptions, FlushType, GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions, Settings,
};
use slatedb::db_cache::{CacheLookup, CachedEntry, CachedKey, DbCache};
use slatedb::object_store::local::LocalFileSystem;
use slatedb::object_store::ObjectStore;
use slatedb::{Db, Error, WriteBatch};
use tiercache_engine::{CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_slatedb::decoded::Decoded;
use tiercache_slatedb::store::{CountingStore, Latency};
use tiercache_slatedb::TiercacheDbCache;

/// The README's lines for SlateDB (`examples/slatedb.rs`), run here so that CI runs them.
#[path = "../examples/slatedb.rs"]
mod example;

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

/// A pass over data the cache holds writes nothing into it: SlateDB decodes the filters the
/// cache hands back in their stored form (read from the tier, here after a reopen) and inserts
/// them again decoded, which the cache takes in place of what it keeps decoded, not as a new
/// entry to store (once written again after every read: a tenth of a workload's CPU, in
/// memcpy and the tier's writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_cached_data_write_nothing_into_the_cache() {
    let dir = scratch("no-rewrites");
    write_all(&dir).await;
    let cold = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_decoded(1 << 20));
    read_all(&dir, cold.clone()).await;
    cold.close().await.unwrap();
    drop(cold);
    let db_cache = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_decoded(1 << 20));
    read_all(&dir, db_cache.clone()).await;
    let before = db_cache.keyed().cache().stats();
    read_all(&dir, db_cache.clone()).await;
    let after = db_cache.keyed().cache().stats();
    assert!(after.hits > before.hits, "the pass read through the cache: {after:?}");
    assert_eq!(after.puts, before.puts, "the pass wrote into the cache");
    assert_eq!(after.bytes_written, before.bytes_written, "the pass wrote into the cache");
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

/// Keys of the tests that write many versions.
const VERSIONED_KEYS: u64 = 300;

/// Key `key`'s value as written in `round`: the round, then bytes of its own.
fn versioned(key: u64, round: u64) -> Vec<u8> {
    let mut value = format!("{round}:").into_bytes();
    value.extend((0..100 + key * 13 % 900).map(|i| (key * 7 + round + i) as u8));
    value
}

/// SlateDB settings that flush small memtables often, compact L0 SSTs as soon as four are
/// there, and delete what no manifest or checkpoint refers to at once.
fn compacting() -> Settings {
    let at_once = GarbageCollectorDirectoryOptions {
        interval: Some(Duration::from_millis(100)),
        min_age: Duration::ZERO,
        dry_run: false,
    };
    Settings {
        flush_interval: Some(Duration::from_millis(5)),
        l0_sst_size_bytes: 64 << 10,
        compactor_options: Some(CompactorOptions {
            poll_interval: Duration::from_millis(50),
            // How long a compaction's inputs outlive it, for reads begun before (15 minutes
            // by default).
            checkpoint_lifetime: Duration::from_millis(200),
            ..CompactorOptions::default()
        }),
        garbage_collector_options: Some(GarbageCollectorOptions {
            compacted_options: Some(at_once),
            ..GarbageCollectorOptions::default()
        }),
        ..Settings::default()
    }
}

/// The SST objects in the store now (compacted/ is flat: `<ulid>.sst`, L0s and sorted runs).
fn ssts(dir: &Path) -> Vec<PathBuf> {
    let compacted = dir.join("objects").join("db").join("compacted");
    std::fs::read_dir(compacted)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "sst"))
        .collect()
}

/// Every key reads `round`'s version, or nothing where `deleted` says so.
async fn check_round(db: &Db, round: u64, deleted: impl Fn(u64) -> bool) {
    for k in 0..VERSIONED_KEYS {
        let found = db.get(key(k)).await.unwrap();
        let expected = (!deleted(k)).then(|| versioned(k, round));
        assert_eq!(found.as_deref(), expected.as_deref(), "key {k} after round {round}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_and_deleted_ssts_never_serve_a_stale_block() {
    const ROUNDS: u64 = 6;
    let dir = scratch("compaction");
    let cache = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap());
    let db = Db::builder("db", store(&dir))
        .with_settings(compacting())
        .with_db_cache(cache.clone(), 0)
        .build()
        .await
        .unwrap();
    // Each round writes every key's next version (the last deletes every seventh key) into
    // SSTs of their own, and reads every key through the cache, which then holds blocks of
    // every round's SSTs under their ids.
    let last = ROUNDS - 1;
    let gone = |k: u64| k.is_multiple_of(7);
    let mut written = Vec::new();
    for round in 0..ROUNDS {
        for k in 0..VERSIONED_KEYS {
            if round == last && gone(k) {
                db.delete(key(k)).await.unwrap();
            } else {
                db.put(key(k), versioned(k, round)).await.unwrap();
            }
        }
        db.flush_with_options(FlushOptions { flush_type: FlushType::MemTable }).await.unwrap();
        written.extend(ssts(&dir));
        check_round(&db, round, |k| round == last && gone(k)).await;
    }
    written.sort();
    written.dedup();
    // Compaction merges the rounds' SSTs into new ones and the collector deletes the old.
    let waited = std::time::Instant::now();
    let deadline = waited + Duration::from_secs(60);
    let deleted = loop {
        let now = ssts(&dir);
        let deleted = written.iter().filter(|p| !now.contains(p)).count();
        if deleted * 2 >= written.len() || std::time::Instant::now() > deadline {
            break deleted;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "{deleted} of {} SSTs compacted away and deleted (waited {:?})",
        written.len(),
        waited.elapsed()
    );
    assert!(deleted * 2 >= written.len(), "{deleted} of {} SSTs deleted in 60 s", written.len());
    // The cache still holds blocks of the deleted SSTs; reads see only the new ones'.
    let before = cache.keyed().cache().stats().hits;
    check_round(&db, last, gone).await;
    check_round(&db, last, gone).await;
    assert!(cache.keyed().cache().stats().hits > before, "reads after compaction hit the cache");
    assert_eq!(cache.undecodable(), 0);
    db.close().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Set in the child process of the kill test: the folder it writes in.
const KILL_CHILD: &str = "TIERCACHE_SLATEDB_KILL_CHILD";
/// Keys a batch of the kill test's child writes, and the batches acknowledged before the kill.
const KILL_BATCH: u64 = 50;
const KILL_AFTER: u64 = 60;

/// The kill test's child: writes every key's next version in batches, forever, printing each
/// batch once SlateDB acknowledged it durable, and reading keys back through the cache as it
/// goes (a wrong value ends the child, which the parent sees). After each round it makes the
/// cache durable (`flush_to_disk`, as a program checkpoints its cache), so the kill finds
/// entries on flash from the last round and writes of the next under way.
async fn write_until_killed(dir: &Path) {
    let cache = Arc::new(TiercacheDbCache::new(cache(dir)).unwrap());
    let db = Db::builder("db", store(dir))
        .with_settings(compacting())
        .with_db_cache(cache.clone(), 0)
        .build()
        .await
        .unwrap();
    for round in 0.. {
        for first in (0..VERSIONED_KEYS).step_by(KILL_BATCH as usize) {
            let mut batch = WriteBatch::new();
            for k in first..first + KILL_BATCH {
                batch.put(key(k), versioned(k, round));
            }
            // Acknowledged once durable in the object store (SlateDB's `write` returns once
            // the batch is in its memory).
            db.write(batch).await.unwrap().await_durable().await.unwrap();
            println!("acked {round} {first}");
            for k in (0..VERSIONED_KEYS).step_by(7) {
                let expected = if k < first + KILL_BATCH { round } else { round.wrapping_sub(1) };
                let found = db.get(key(k)).await.unwrap();
                if round > 0 || k < first + KILL_BATCH {
                    assert_eq!(found, Some(versioned(k, expected).into()), "key {k}");
                }
            }
        }
        cache.flush_to_disk().await.unwrap();
    }
}

/// A process killed (SIGKILL) while SlateDB writes and its cache moves blocks to flash: the
/// database reopens with every acknowledged write, and the cache over the files the kill left
/// either recovers what checks out or drops it; no read returns a wrong value.
#[test]
fn a_killed_process_leaves_the_database_whole_and_its_cache_consistent() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if let Some(dir) = std::env::var_os(KILL_CHILD) {
        runtime.block_on(write_until_killed(Path::new(&dir)));
        return;
    }
    let dir = scratch("kill");
    let name = "a_killed_process_leaves_the_database_whole_and_its_cache_consistent";
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(KILL_CHILD, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // The round of each key's last acknowledged write.
    let mut acked: Vec<Option<u64>> = vec![None; VERSIONED_KEYS as usize];
    let mut batches = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Some(batch) = line.strip_prefix("acked ") else { continue };
        let (round, first) = batch.split_once(' ').unwrap();
        let (round, first): (u64, u64) = (round.parse().unwrap(), first.parse().unwrap());
        for k in first..first + KILL_BATCH {
            acked[k as usize] = Some(round);
        }
        batches += 1;
        if batches == KILL_AFTER {
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(batches, KILL_AFTER, "the child ended before the kill: {status}");

    // Each key reads its last acknowledged version or the one in flight at the kill: from
    // SlateDB alone (its own guarantee), then through the cache over the files the kill left.
    runtime.block_on(async {
        let db = Db::builder("db", store(&dir)).with_db_cache_disabled().build().await.unwrap();
        check_acknowledged(&db, &acked, "without a cache").await;
        db.close().await.unwrap();
        let cache = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap());
        let db = Db::builder("db", store(&dir)).with_db_cache(cache.clone(), 0).build().await;
        let db = db.unwrap();
        for pass in ["through the cache", "through the cache again"] {
            check_acknowledged(&db, &acked, pass).await;
        }
        let stats = cache.keyed().cache().stats();
        eprintln!(
            "after the kill: {} entries recovered, {} dropped as damaged; {} hits of {} lookups",
            stats.recovered, stats.recovery_damaged, stats.hits, stats.lookups
        );
        assert!(stats.recovered > 0, "the cache reopened warm: {stats:?}");
        assert!(stats.hits > 0, "{stats:?}");
        assert_eq!(cache.undecodable(), 0);
        db.close().await.unwrap();
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every key reads its last acknowledged version, the one in flight at the kill, or (never
/// acknowledged) nothing.
async fn check_acknowledged(db: &Db, acked: &[Option<u64>], pass: &str) {
    for k in 0..VERSIONED_KEYS {
        let acked = acked[k as usize];
        let found = db.get(key(k)).await.unwrap().map(|v| v.to_vec());
        let next = acked.map_or(0, |round| round + 1);
        let allowed = [acked.map(|r| versioned(k, r)), Some(versioned(k, next))];
        assert!(
            allowed.contains(&found) || (found.is_none() && acked.is_none()),
            "key {k}, {pass}: acknowledged in round {acked:?}, read {:?}",
            found.map(|v| String::from_utf8_lossy(&v[..8]).into_owned()),
        );
    }
}

/// moto's S3 server (a Python package; `scripts/test` installs `moto[server]`) on a free
/// loopback port, stopped when dropped.
struct S3Server {
    child: Child,
    port: u16,
}

impl S3Server {
    fn start() -> S3Server {
        // reqwest, object_store's HTTP client, takes rustls's process-wide crypto provider.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3, to run moto's S3 server");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut said = String::new();
                let _ = child.stderr.take().unwrap().read_to_string(&mut said);
                panic!(
                    "moto's S3 server ended ({status}); scripts/test installs moto[server]: {said}"
                );
            }
            assert!(std::time::Instant::now() < deadline, "moto's S3 server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        S3Server { child, port }
    }

    /// Creates `bucket` (S3's CreateBucket: a PUT of the bucket's path).
    fn create_bucket(&self, bucket: &str) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let request = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "CreateBucket: {response}");
    }

    /// object_store's S3 client for `bucket` on this server, every request counted.
    fn store(&self, bucket: &str) -> Arc<CountingStore> {
        let s3 = AmazonS3Builder::new()
            .with_endpoint(format!("http://127.0.0.1:{}", self.port))
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id("tiercache")
            .with_secret_access_key("tiercache")
            .build()
            .expect("an S3 client");
        let none = Latency { first_byte: Duration::ZERO, bytes_per_second: 0 };
        Arc::new(CountingStore::new(Arc::new(s3), none))
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// SlateDB over a real S3-compatible server, reached through object_store's S3 client, its
/// blocks cached in tiercache: values check out cold, from the cache, and after the cache
/// reopened warm, which then saves most of the GETs a cold read made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slatedb_on_an_s3_server_reads_through_the_cache_and_reopens_warm() {
    const S3_KEYS: u64 = 150;
    let server = S3Server::start();
    server.create_bucket("tiercache");
    let s3 = server.store("tiercache");
    let dir = scratch("s3");
    let db = Db::builder("db", s3.clone()).with_db_cache_disabled().build().await.unwrap();
    for k in 0..S3_KEYS {
        db.put(key(k), value(k)).await.unwrap();
    }
    db.flush_with_options(FlushOptions { flush_type: FlushType::MemTable }).await.unwrap();
    db.close().await.unwrap();
    assert!(s3.requests().puts > 0, "SlateDB wrote to the S3 server: {}", s3);

    // Reads every key through `cache`: the GETs they made.
    let read = |cache: Arc<TiercacheDbCache>| {
        let s3 = s3.clone();
        async move {
            let before = s3.requests();
            let db = Db::builder("db", s3.clone()).with_db_cache(cache, 0).build().await.unwrap();
            for k in 0..S3_KEYS {
                let found = db.get(key(k)).await.unwrap();
                assert_eq!(found.as_deref(), Some(&value(k)[..]), "key {k}");
            }
            db.close().await.unwrap();
            (s3.requests() - before).gets
        }
    };
    let cold = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_scope("s3/db"));
    let cold_gets = read(cold.clone()).await;
    read(cold.clone()).await;
    assert!(cold.keyed().cache().stats().hits > 0);
    cold.close().await.unwrap();
    drop(cold);
    let warm = Arc::new(TiercacheDbCache::new(cache(&dir)).unwrap().with_scope("s3/db"));
    let warm_gets = read(warm.clone()).await;
    eprintln!("GETs of the S3 server reading every key: {cold_gets} cold, {warm_gets} warm");
    assert!(warm_gets * 2 < cold_gets, "warm {warm_gets} GETs, cold {cold_gets}");
    assert_eq!(warm.undecodable(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The README's example of SlateDB on tiercache runs as written (`readme.rs` checks that its
/// lines are the README's).
#[test]
fn the_readmes_example_runs() {
    example::main().unwrap();
}
