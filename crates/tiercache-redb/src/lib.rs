//! redb over tiercache: redb's [`StorageBackend`] over a [`CachedFile`], so a redb database
//! file sits behind the hybrid cache. redb's own page cache plays WiredTiger's DRAM cache of
//! Writes Hurt's Figure 3, and tiercache is the slow-memory cache below it.
//!
//! ```no_run
//! use tiercache_engine::{CacheBuilder, CachedFile};
//! use tiercache_policy::PolicyConfig;
//!
//! let cache = CacheBuilder::new(PolicyConfig::Lru).capacity_bytes(64 << 20).build()?;
//! let file = CachedFile::open("db.redb".as_ref(), cache)?;
//! let db = tiercache_redb::create(file)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! redb's `sync_data` is the cache's [`CachedFile::sync`]: in write-back, every acknowledged
//! write is durable in the persistent tier or the backing file when it returns.

use std::io;
use std::sync::Arc;

use redb::StorageBackend;
use tiercache_engine::device::Device;
use tiercache_engine::{CachedFile, EngineError};

pub mod ycsb;

/// The redb this crate is built with, for callers that name its types.
pub use redb;

/// A [`CachedFile`] as redb's storage.
pub struct CachedBackend {
    file: Arc<CachedFile>,
}

impl CachedBackend {
    /// The file, or a file shared with its other users (for its cache's counters while redb
    /// holds it).
    pub fn new(file: impl Into<Arc<CachedFile>>) -> CachedBackend {
        CachedBackend { file: file.into() }
    }

    /// The cached file, for its cache's counters.
    pub fn file(&self) -> &CachedFile {
        &self.file
    }
}

impl std::fmt::Debug for CachedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedBackend").field("mode", &self.file.mode()).finish()
    }
}

/// An engine error as the I/O error redb expects, its kind kept where it had one.
fn io_error(error: EngineError) -> io::Error {
    match error {
        EngineError::Io { source, path, action } => {
            io::Error::new(source.kind(), format!("{}: {action}: {source}", path.display()))
        }
        other => io::Error::other(other),
    }
}

impl StorageBackend for CachedBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len().map_err(io_error)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let mut done = 0;
        while done < out.len() {
            match self.file.read_at(offset + done as u64, &mut out[done..]).map_err(io_error)? {
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("{} bytes wanted at offset {offset}, the file ends", out.len()),
                    ))
                }
                n => done += n,
            }
        }
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.file.set_len(len).map_err(io_error)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.file.sync().map_err(io_error)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut done = 0;
        while done < data.len() {
            done += self.file.write_at(offset + done as u64, &data[done..]).map_err(io_error)?;
        }
        Ok(())
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.flush_backing().map_err(io_error)
    }
}

/// Opens the redb database in `file`, creating it if the file is empty.
pub fn create(file: CachedFile) -> Result<redb::Database, redb::DatabaseError> {
    redb::Database::builder().create_with_backend(CachedBackend::new(file))
}

/// A device with no cache in front, as redb's storage: the baseline of a database without
/// tiercache on the same (possibly emulated) device.
pub struct DeviceBackend {
    device: Arc<dyn Device>,
}

impl DeviceBackend {
    pub fn new(device: Arc<dyn Device>) -> DeviceBackend {
        DeviceBackend { device }
    }
}

impl std::fmt::Debug for DeviceBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBackend").field("path", &self.device.path()).finish()
    }
}

impl StorageBackend for DeviceBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.device.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        tiercache_engine::device::read_exact_at(&*self.device, out, offset)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        self.device.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.device.sync()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        self.device.write_at(data, offset)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.device.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{ReadableDatabase, TableDefinition};
    use tiercache_engine::{CacheBuilder, TierKind};
    use tiercache_policy::cas::{CacheMode, CasConfig, SeqCutoffPolicy};
    use tiercache_policy::PolicyConfig;

    const TABLE: TableDefinition<u64, &[u8]> = TableDefinition::new("records");

    fn value(key: u64) -> Vec<u8> {
        (0..100 + key % 300).map(|i| (key.wrapping_mul(31) ^ i) as u8).collect()
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tiercache-redb-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    /// The database file, created empty the first time.
    fn backing(path: &std::path::Path) -> &std::path::Path {
        std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        path
    }

    fn write_and_read_back(file: CachedFile, reopen: impl Fn() -> CachedFile) {
        let db = create(file).unwrap();
        for batch in 0..10u64 {
            let txn = db.begin_write().unwrap();
            {
                let mut table = txn.open_table(TABLE).unwrap();
                for key in batch * 1000..(batch + 1) * 1000 {
                    table.insert(key, value(key).as_slice()).unwrap();
                }
            }
            txn.commit().unwrap();
        }
        let check = |db: &redb::Database| {
            let txn = db.begin_read().unwrap();
            let table = txn.open_table(TABLE).unwrap();
            for key in 0..10_000u64 {
                assert_eq!(table.get(key).unwrap().unwrap().value(), value(key).as_slice());
            }
        };
        check(&db);
        drop(db);
        // Reopened over a new cache: everything committed is in the file.
        check(&create(reopen()).unwrap());
    }

    #[test]
    fn a_database_through_a_dram_cache_keeps_every_commit() {
        let path = scratch("wt.redb");
        let open = || {
            let cache =
                CacheBuilder::new(PolicyConfig::Lru).capacity_bytes(1 << 20).build().unwrap();
            CachedFile::open(backing(&path), cache).unwrap()
        };
        let file = open();
        write_and_read_back(file, open);
    }

    #[test]
    fn a_database_in_write_back_over_a_mapped_tier_keeps_every_commit() {
        let path = scratch("wb.redb");
        let tier = scratch("wb.tier");
        let open = || {
            let cache = CacheBuilder::new(PolicyConfig::Lru)
                .tier(TierKind::Mapped { path: tier.clone() })
                .capacity_bytes(2 << 20)
                .mode(CasConfig {
                    seq_cutoff: SeqCutoffPolicy::Never,
                    ..CasConfig::new(CacheMode::WriteBack)
                })
                .build()
                .unwrap();
            CachedFile::open(backing(&path), cache).unwrap()
        };
        let file = open();
        write_and_read_back(file, open);
    }
}
