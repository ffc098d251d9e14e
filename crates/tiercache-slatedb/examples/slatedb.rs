//! SlateDB with its block cache on tiercache, DRAM over a flash tier: the README's lines (run:
//! `cargo run --release -p tiercache-slatedb --example slatedb`).

use std::sync::Arc;

use slatedb::db_cache::DbCache;
use slatedb::object_store::local::LocalFileSystem;
use slatedb::object_store::ObjectStore;
use slatedb::Db;
use tiercache_engine::{CacheBuilder, TierKind};
use tiercache_policy::PolicyConfig;
use tiercache_slatedb::TiercacheDbCache;

#[tokio::main]
pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("tiercache-slatedb-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("objects"))?;
    let object_store: Arc<dyn ObjectStore> =
        Arc::new(LocalFileSystem::new_with_prefix(dir.join("objects"))?);
    // The README's lines, from here.
    let cache = CacheBuilder::new(PolicyConfig::Lru)
        .capacity_bytes(64 << 20)
        .lower_tier(TierKind::Flash { path: dir.join("cache.flash") }, 1 << 30, PolicyConfig::Lru)
        .max_value(16 << 20)
        .build()?;
    let cache = Arc::new(TiercacheDbCache::new(cache)?.with_scope("my-db"));
    let db = Db::builder("my-db", object_store).with_db_cache(cache.clone(), 0).build().await?;
    // To here.
    db.put(b"key", b"value").await?;
    db.flush().await?;
    assert_eq!(db.get(b"key").await?.as_deref(), Some(&b"value"[..]));
    db.close().await?;
    cache.close().await?;
    println!("SlateDB read its value back through tiercache");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
