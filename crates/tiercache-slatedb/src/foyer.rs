//! SlateDB's own hybrid cache, foyer's memory and disk (`FoyerHybridCache`), built on the
//! budgets tiercache's cache gets, for side-by-side runs (the `foyer` feature).

use std::path::Path;
use std::sync::Arc;

use foyer::{
    BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCacheBuilder, PsyncIoEngineConfig,
};
use slatedb::db_cache::foyer_hybrid::FoyerHybridCache;
use slatedb::db_cache::CachedEntry;

/// foyer's hybrid cache: `memory` bytes over a disk cache of `disk` bytes in `dir`, read and
/// written with direct I/O, as SlateDB's documentation builds it; its blocks (foyer's unit of
/// disk space) a sixteenth of the disk, between 64 KiB and foyer's default 16 MiB.
pub async fn hybrid(
    memory: usize,
    dir: &Path,
    disk: usize,
) -> Result<Arc<FoyerHybridCache>, String> {
    let block = (disk / 16).clamp(64 << 10, 16 << 20);
    let device = FsDeviceBuilder::new(dir)
        .with_capacity(disk)
        .with_direct(true)
        .build()
        .map_err(|e| format!("foyer's disk cache in {}: {e}", dir.display()))?;
    let cache = HybridCacheBuilder::new()
        .with_name("slatedb")
        .memory(memory)
        .with_weighter(|_, v: &CachedEntry| v.size())
        .storage()
        .with_io_engine_config(PsyncIoEngineConfig::new())
        .with_engine_config(BlockEngineConfig::new(device).with_block_size(block))
        .build()
        .await
        .map_err(|e| format!("foyer's hybrid cache: {e}"))?;
    Ok(Arc::new(FoyerHybridCache::new_with_cache(cache)))
}
