//! YCSB over SlateDB on a counted local object store: every workload's reads check out, with
//! tiercache's cache and without one, and the cache saves object-store GETs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slatedb::db_cache::DbCache;
use slatedb::object_store::path::Path;
use slatedb::object_store::ObjectStoreExt;
use slatedb::Db;
use tiercache_engine::{CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_slatedb::store::{self, Latency, Requests};
use tiercache_slatedb::ycsb::{self, RunOptions, YcsbWorkload};
use tiercache_slatedb::TiercacheDbCache;
use tiercache_workload::gen::ycsb::records::Records;

const RECORDS: u64 = 3000;
const RECORD_BYTES: usize = 400;

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tiercache-slatedb-ycsb-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options(workload: YcsbWorkload) -> RunOptions {
    RunOptions {
        workload,
        operations: 1500,
        clients: 4,
        record_bytes: RECORD_BYTES,
        seed: 7,
        durable: false,
        progress: Arc::new(|_| {}),
    }
}

/// Loads the records with no cache, then runs every workload over `cache`; the GETs the runs
/// made.
async fn every_workload(name: &str, cache: Option<Arc<dyn DbCache>>) -> Requests {
    let dir = scratch(name);
    let objects = store::local(&dir.join("objects"), Latency::NONE).unwrap();
    let db = Db::builder("db", objects.clone()).with_db_cache_disabled().build().await.unwrap();
    ycsb::load(&db, RECORDS, RECORD_BYTES, &|_| {}).await.unwrap();
    db.close().await.unwrap();

    let builder = Db::builder("db", objects.clone());
    let db = match cache {
        Some(cache) => builder.with_db_cache(cache, 0),
        None => builder.with_db_cache_disabled(),
    };
    let db = Arc::new(db.build().await.unwrap());
    let records = Arc::new(Records::new(RECORDS));
    let before = objects.requests();
    for workload in [
        YcsbWorkload::C,
        YcsbWorkload::B,
        YcsbWorkload::A,
        YcsbWorkload::F,
        YcsbWorkload::D,
        YcsbWorkload::E,
    ] {
        let report = ycsb::run(db.clone(), records.clone(), options(workload)).await.unwrap();
        assert!(report.verified, "{name} {workload:?}: {:?}", report.first_failure);
        assert_eq!(report.operations, 1500);
        assert!(report.records_read > 0);
    }
    let made = objects.requests() - before;
    db.close().await.unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    made
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_reads_back_what_it_wrote_and_the_cache_saves_gets() {
    let dir = scratch("cache");
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(512 << 10)
        .lower_tier(TierKind::Flash { path: dir.join("cache.flash") }, 8 << 20, PolicyConfig::Lru)
        .shards(4)
        .max_value(1 << 20)
        .build()
        .unwrap();
    let cached = Arc::new(TiercacheDbCache::new(cache).unwrap());
    let with = every_workload("with", Some(cached.clone())).await;
    let without = every_workload("without", None).await;
    eprintln!("GETs with tiercache {with:?}, without a cache {without:?}");
    assert!(with.gets * 2 < without.gets, "with {with:?}, without {without:?}");
    assert!(cached.keyed().cache().stats().tier_hits[1] > 0, "the flash tier served hits");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn the_store_answers_after_its_latency_and_counts_each_get() {
    let dir = scratch("latency");
    let latency = Latency { first_byte: Duration::from_millis(30), bytes_per_second: 0 };
    let objects = store::local(&dir, latency).unwrap();
    let path = Path::from("object");
    objects.put(&path, vec![7u8; 1000].into()).await.unwrap();
    let started = Instant::now();
    let bytes = objects.get(&path).await.unwrap().bytes().await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert_eq!(bytes.len(), 1000);
    objects.get_range(&path, 10..20).await.unwrap();
    assert_eq!(objects.requests(), Requests { gets: 2, get_bytes: 1010, puts: 1 });
    std::fs::remove_dir_all(&dir).unwrap();
}
