//! `CachedFile`: a backing file read and written through the cache in fixed-size blocks, in
//! the cache's Open CAS mode (`CacheBuilder::mode`; write-through without one). The mode is
//! the policy's own (`tiercache_policy::cas`, the same code the simulator runs): a write goes
//! to the cache as a write request, and the policy decides whether its block is placed,
//! updated, dropped or left alone; reads are decided the same way. In the modes that keep
//! nothing dirty every write goes to the backing file first; in write-back and write-only the
//! cache takes it first, and the backing file gets it only when it is written back.
//! Open CAS is the Intel-led block cache the Writes Hurt paper compares NVCache with (section
//! 4); its modes, as the engine runs them:
//!
//! | mode | write to a cached block | write to an uncached block | reads |
//! |---|---|---|---|
//! | write-through (default) | backing, then cache updated | backing, then cached if admitted | through the cache |
//! | write-around | backing, then cache updated | backing only | through the cache |
//! | write-invalidate | backing, then block dropped | backing only | through the cache |
//! | pass-through | backing, then block dropped | backing only | backing only |
//! | write-back | cache, dirty | cache, dirty, if admitted (else backing) | through the cache |
//! | write-only | cache, dirty | cache, dirty, if admitted (else backing) | cache hits; misses not cached |
//!
//! Dirty blocks are written back before they are dropped, by the ALRU cleaner, at
//! [`flush_backing`](CachedFile::flush_backing) and at a clean stop; [`sync`](CachedFile::sync)
//! makes every acknowledged write durable on a persistent tier or the backing file
//! (`docs/DURABILITY.md`). In write-back the backing file's length grows only as blocks are
//! written back.
//!
//! A write that covers part of a block reads the rest of the block first. Writers of one block
//! take turns (striped locks); a read that misses waits for a writer of its block before
//! loading it, so blocks are never read torn; hits never wait.

use std::fs::OpenOptions;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use tiercache_policy::cas::CacheMode;

use crate::cache::Cache;
use crate::device::{Device, Emulated, FileDevice};
use crate::error::EngineError;
use crate::tier::superblock::Backing;

const WRITER_STRIPES: usize = 256;
/// Blocks [`CachedFile::discard`] discards at a time, with their writer turns held.
const DISCARD_CHUNK: u64 = 1024;

/// Blocks [`CachedFile::allocation`] looks up in the cache in one call (dirty ones inside the
/// backing file's holes): a question about a huge hole is answered a part at a time.
const ALLOCATION_LOOKUPS: u64 = 1 << 16;

/// A run of bytes as [`CachedFile::allocation`] finds them: data, or a hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub len: u64,
    /// Stored bytes; false for a hole, which reads as zeros and stores nothing.
    pub data: bool,
}

/// A backing file behind a cache.
pub struct CachedFile {
    cache: Cache,
    /// The backing file, or any device standing for it (emulated, faulty, a crash image).
    backing: Arc<dyn Device>,
    /// Per stripe of blocks: loads of a block share it, a write of one has it alone.
    writers: Vec<RwLock<()>>,
    /// The backing file's length as this file last saw or made it, so a write that keeps its
    /// data dirty knows without a `stat` whether it must extend the file first.
    known_len: AtomicU64,
    /// Held while a write extends the file, so two extending writes never cut each other.
    extending: Mutex<()>,
}

impl CachedFile {
    /// Opens an existing backing file (read and write) behind `cache`. The tier files record
    /// which file their blocks are copies of: a cache that recovered blocks of another file is
    /// refused (an error naming both), since it would serve that file's data as this one's.
    pub fn open(path: &Path, cache: Cache) -> Result<CachedFile, EngineError> {
        let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
        let backing = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io("cannot open the backing file", e))?;
        let identity = Backing::of(&backing).map_err(|e| io("cannot stat the backing file", e))?;
        cache.attach_backing(identity, path)?;
        Ok(CachedFile::over(Arc::new(FileDevice::new(backing, path)), cache))
    }

    /// Opens an existing backing file read-only behind `cache`, as [`open`](Self::open) does
    /// otherwise: for a read-only export, whose writes are refused before they reach the
    /// cache. A cache that may hold dirty blocks (a write-back mode, or dirty blocks
    /// recovered) is refused: they could never be written back.
    pub fn open_read_only(path: &Path, cache: Cache) -> Result<CachedFile, EngineError> {
        if cache.keeps_dirty() {
            let dirty = cache.dirty_blocks();
            return Err(EngineError::config(
                "read_only",
                format!(
                    "the cache keeps dirty blocks ({dirty} now), which a read-only backing \
                     file could never take: use a mode that writes through, and open it \
                     read-write once to write back any dirty blocks first"
                ),
            ));
        }
        let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
        let backing =
            std::fs::File::open(path).map_err(|e| io("cannot open the backing file", e))?;
        let identity = Backing::of(&backing).map_err(|e| io("cannot stat the backing file", e))?;
        cache.attach_backing(identity, path)?;
        Ok(CachedFile::over(Arc::new(FileDevice::new(backing, path)), cache))
    }

    /// Opens an existing backing file or block device as [`open`](Self::open) does, read and
    /// written with direct I/O ([`DirectFile`](crate::device::DirectFile)), so that the page
    /// cache holds none of it: the cache's tiers are the only cache. Needs a file system
    /// that takes `O_DIRECT`, a length of whole 4 KiB pages, and a block size of whole 4 KiB
    /// pages (two writes into one page never run at once); each is an error naming it.
    pub fn open_direct(path: &Path, cache: Cache) -> Result<CachedFile, EngineError> {
        let bs = cache.block_size();
        if !bs.is_multiple_of(crate::aligned::DIRECT_ALIGN) {
            let reason = format!(
                "{bs} bytes: a backing file read with direct I/O needs blocks of whole 4 KiB pages"
            );
            return Err(EngineError::config("block_size", reason));
        }
        let device = crate::device::DirectFile::open(path)?;
        let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
        let file = std::fs::File::open(path).map_err(|e| io("cannot open the backing file", e))?;
        let identity = Backing::of(&file).map_err(|e| io("cannot stat the backing file", e))?;
        cache.attach_backing(identity, path)?;
        Ok(CachedFile::over(Arc::new(device), cache))
    }

    /// Puts `backing`, any device, behind `cache`. Nothing checks that blocks the cache
    /// recovered are `backing`'s: the caller vouches for it (`open` checks a file's identity).
    pub fn over(backing: Arc<dyn Device>, cache: Cache) -> CachedFile {
        let writers = (0..WRITER_STRIPES).map(|_| RwLock::new(())).collect();
        cache.attach_device(backing.clone());
        let known_len = AtomicU64::new(backing.len().unwrap_or(0));
        CachedFile { cache, backing, writers, known_len, extending: Mutex::new(()) }
    }

    /// Makes the backing file behave like `profile` (latency, bandwidth, parallelism), as tiers
    /// do with [`CacheBuilder::emulate`](crate::CacheBuilder::emulate); write-backs see it too.
    pub fn emulate_backing(mut self, profile: tiercache_core::DeviceProfile) -> CachedFile {
        self.backing = Arc::new(Emulated::new(self.backing, profile));
        self.cache.attach_device(self.backing.clone());
        self
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The cache's Open CAS mode: write-through if it runs in none.
    pub fn mode(&self) -> CacheMode {
        self.cache.mode().unwrap_or(CacheMode::WriteThrough)
    }

    fn io_error(&self, action: &'static str, source: io::Error) -> EngineError {
        EngineError::Io { path: self.backing.path().to_path_buf(), action, source }
    }

    /// Current length of the backing file.
    pub fn len(&self) -> Result<u64, EngineError> {
        self.backing.len().map_err(|e| self.io_error("cannot stat the backing file", e))
    }

    pub fn is_empty(&self) -> Result<bool, EngineError> {
        Ok(self.len()? == 0)
    }

    /// Makes the backing file `len` bytes long, cut or grown with zeros, as `ftruncate`, so
    /// that no read returns bytes of the old length. Growing writes zeros from the old end to
    /// the end of its block through the cache (the cached copy of that block is short), as any
    /// write; no block past the old end is cached, since writes past the end extend the file
    /// first. Cutting writes the dirty blocks back first and drops the cached copies of the
    /// blocks from the new end on. Not concurrent with I/O to the blocks it changes.
    pub fn set_len(&self, len: u64) -> Result<(), EngineError> {
        let old = self.len()?;
        if old == len {
            return Ok(());
        }
        let bs = self.cache.block_size() as u64;
        if len > old {
            let tail = old.next_multiple_of(bs).min(len);
            if tail > old {
                self.write_at(old, &vec![0; (tail - old) as usize])?;
            }
        } else {
            self.cache.flush_backing()?;
            for block in len / bs..old.div_ceil(bs) {
                self.cache.invalidate(block);
            }
        }
        self.backing
            .set_len(len)
            .map_err(|e| self.io_error("cannot set the backing file's length", e))?;
        self.known_len.store(len, Ordering::Release);
        Ok(())
    }

    /// Makes the backing file at least `end` bytes long before a write that keeps its data
    /// dirty lands past its end, so the file's length is the data's at once, as a write to the
    /// file would make it (and a crash leaves the file that long, the data in the tier).
    fn extend_to(&self, end: u64) -> Result<(), EngineError> {
        if end <= self.known_len.load(Ordering::Acquire) {
            return Ok(());
        }
        let _alone = self.extending.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.len()?;
        if end > now {
            self.backing
                .set_len(end)
                .map_err(|e| self.io_error("cannot extend the backing file", e))?;
        }
        self.known_len.fetch_max(end.max(now), Ordering::AcqRel);
        Ok(())
    }

    /// Makes acknowledged writes durable: the cache's tiers first (dirty blocks, and free
    /// marks, so no block the cache dropped comes back after a crash, stale; dirty blocks of
    /// DRAM tiers are written back), then the backing file.
    pub fn sync(&self) -> Result<(), EngineError> {
        self.cache.sync()?;
        self.backing.sync().map_err(|e| self.io_error("cannot sync the backing file", e))
    }

    /// Writes `data` at `offset` and makes it durable before returning (a write with FUA, in
    /// block-device terms). It syncs as [`sync`](Self::sync) does, so every write acknowledged
    /// before it is durable too.
    pub fn write_at_durable(&self, offset: u64, data: &[u8]) -> Result<usize, EngineError> {
        let written = self.write_at(offset, data)?;
        self.sync()?;
        Ok(written)
    }

    /// Writes every dirty block back and syncs the backing file: afterwards the backing file
    /// alone has every acknowledged write. A clean stop (dropping the cache) does the same.
    pub fn flush_backing(&self) -> Result<(), EngineError> {
        self.cache.flush_backing()?;
        self.backing.sync().map_err(|e| self.io_error("cannot sync the backing file", e))
    }

    /// Reads one block (short at the end of the file) into `buf`, through the cache (which in
    /// pass-through never hits and admits nothing).
    fn read_block(&self, block: u64, buf: &mut [u8]) -> Result<usize, EngineError> {
        let at = block * self.cache.block_size() as u64;
        // Loading waits for a writer of the same block, so a block is read whole: before or
        // after a write, never half of each. Hits never wait.
        let load = |b: &mut [u8]| {
            let _turn = self.loader(block);
            self.backing.read_at(b, at)
        };
        match self.cache.read_through(block, buf, load) {
            Ok(outcome) => Ok(outcome.len),
            Err(EngineError::Io { source, .. }) => {
                Err(self.io_error("cannot read the backing file", source))
            }
            Err(e) => Err(e),
        }
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer at the end of the file. Whole aligned
    /// blocks are read straight into `buf`; partial ones go through a block buffer.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, EngineError> {
        let bs = self.cache.block_size();
        if buf.len() == bs {
            // One whole block, the common case: without the general loop's divisions.
            if let Some(block) = whole_block(offset, bs) {
                return self.read_block(block, buf);
            }
        }
        let mut partial: Vec<u8> = Vec::new();
        let mut done = 0;
        while done < buf.len() {
            let position = offset + done as u64;
            let (block, within) = (position / bs as u64, (position % bs as u64) as usize);
            if within == 0 && buf.len() - done >= bs {
                let valid = self.read_block(block, &mut buf[done..done + bs])?;
                done += valid;
                if valid < bs {
                    break;
                }
                continue;
            }
            partial.resize(bs, 0);
            let valid = self.read_block(block, &mut partial)?;
            if valid <= within {
                break;
            }
            let n = (valid - within).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&partial[within..within + n]);
            done += n;
            if valid < bs {
                break;
            }
        }
        Ok(done)
    }

    fn writer(&self, block: u64) -> RwLockWriteGuard<'_, ()> {
        let stripe = (block as usize) % WRITER_STRIPES;
        self.writers[stripe].write().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads of the same stripe run together (a hot block read from the backing file by many
    /// threads at once); they wait only for a writer.
    fn loader(&self, block: u64) -> RwLockReadGuard<'_, ()> {
        let stripe = (block as usize) % WRITER_STRIPES;
        self.writers[stripe].read().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes `len` bytes from `offset` read as zeros, and drops their blocks from the cache,
    /// dirty ones without writing them back: a TRIM, or a WRITE_ZEROES that may punch holes.
    /// The whole blocks are discarded on the backing file (a hole punched where the file
    /// system can, [`Device::discard`]), synced before any cached copy is dropped, so that a
    /// crash never brings back the backing file's older bytes in place of a dropped dirty
    /// block; the partial blocks at either end are written with zeros as any write is. Not
    /// durable until the next [`sync`](Self::sync).
    pub fn discard(&self, offset: u64, len: u64) -> Result<(), EngineError> {
        let bs = self.cache.block_size() as u64;
        let end = offset + len;
        let (first, last) = (offset.div_ceil(bs), end / bs);
        if first >= last {
            return self.write_zeros(offset, len);
        }
        if offset < first * bs {
            self.write_zeros(offset, first * bs - offset)?;
        }
        if last * bs < end {
            self.write_zeros(last * bs, end - last * bs)?;
        }
        let mut start = first;
        while start < last {
            let stop = (start + DISCARD_CHUNK).min(last);
            // Every writer turn of the chunk's blocks, in stripe order (no other path holds
            // two): no load of a block can put its old bytes back meanwhile.
            let mut stripes: Vec<usize> =
                (start..stop).map(|b| (b as usize) % WRITER_STRIPES).collect();
            stripes.sort_unstable();
            stripes.dedup();
            let _turns: Vec<_> = stripes
                .iter()
                .map(|&s| self.writers[s].write().unwrap_or_else(|p| p.into_inner()))
                .collect();
            let (at, bytes) = (start * bs, (stop - start) * bs);
            self.backing
                .discard(at, bytes)
                .map_err(|e| self.io_error("cannot discard a range of the backing file", e))?;
            if (start..stop).any(|b| self.cache.contains(b)) {
                self.backing
                    .sync()
                    .map_err(|e| self.io_error("cannot sync the backing file", e))?;
                (start..stop).for_each(|b| self.cache.discard(b));
            }
            // A dirty block of the range may have been written back since it was discarded (an
            // eviction by another request of its shard, or the cleaner): discarded again, now
            // that no copy is left to write back, so no read finds its old bytes.
            self.backing
                .discard(at, bytes)
                .map_err(|e| self.io_error("cannot discard a range of the backing file", e))?;
            start = stop;
        }
        Ok(())
    }

    /// How the bytes from `offset` up to `len` of them are stored, as consecutive extents from
    /// `offset`: data, or holes that read as zeros and store nothing (what a sparse backing
    /// file has never been written, or had discarded). A block the cache holds dirty is data
    /// wherever the backing file has a hole (its bytes are not there yet); blocks cached clean
    /// are as the backing file has them. At most `max` extents, and a bounded number of blocks
    /// looked up in the cache, so the extents may cover less than `len` (the caller asks
    /// again from where they end), but never nothing while `len` is above 0.
    pub fn allocation(
        &self,
        offset: u64,
        len: u64,
        max: usize,
    ) -> Result<Vec<Extent>, EngineError> {
        let end = offset.saturating_add(len);
        let mut extents = Vec::new();
        let mut lookups = ALLOCATION_LOOKUPS;
        let mut at = offset;
        while at < end && extents.len() < max.max(1) {
            let data = self
                .backing
                .next_data(at)
                .map_err(|e| self.io_error("cannot find the backing file's holes", e))?;
            let (hole_end, data_end) = match data {
                Some(range) if range.start < end => (range.start.max(at), range.end.min(end)),
                _ => (end, end),
            };
            if hole_end > at {
                at = self.holes(at..hole_end, &mut lookups, &mut extents);
                if at < hole_end {
                    break; // Out of lookups.
                }
            }
            if data_end > at {
                push_extent(&mut extents, data_end - at, true);
                at = data_end;
            }
        }
        extents.truncate(max.max(1));
        Ok(extents)
    }

    /// Adds the backing file's hole `range` to `extents`, each block of it the cache holds
    /// dirty as data, while `lookups` last; returns where it stopped.
    fn holes(
        &self,
        range: std::ops::Range<u64>,
        lookups: &mut u64,
        extents: &mut Vec<Extent>,
    ) -> u64 {
        if !self.cache.keeps_dirty() {
            push_extent(extents, range.end - range.start, false);
            return range.end;
        }
        let bs = self.cache.block_size() as u64;
        let mut at = range.start;
        while at < range.end && *lookups > 0 {
            *lookups -= 1;
            let block = at / bs;
            let next = ((block + 1) * bs).min(range.end);
            push_extent(extents, next - at, self.cache.is_dirty(block));
            at = next;
        }
        at
    }

    /// Writes `len` zeros from `offset` through the cache, as any write.
    pub fn write_zeros(&self, offset: u64, len: u64) -> Result<(), EngineError> {
        crate::device::in_zero_chunks(offset, len, |zeros, at| self.write_at(at, zeros).map(drop))
    }

    /// Writes `data` at `offset`, extending the file if needed; returns `data.len()`.
    pub fn write_at(&self, offset: u64, data: &[u8]) -> Result<usize, EngineError> {
        let bs = self.cache.block_size();
        if self.cache.keeps_dirty() {
            self.extend_to(offset + data.len() as u64)?;
        }
        let mut block_buf: Vec<u8> = Vec::new();
        let mut done = 0;
        while done < data.len() {
            let position = offset + done as u64;
            let (block, within) = (position / bs as u64, (position % bs as u64) as usize);
            let n = (bs - within).min(data.len() - done);
            let _turn = self.writer(block);
            if self.cache.keeps_dirty() {
                self.write_dirty(block, within, &data[done..done + n], &mut block_buf)?;
                done += n;
                continue;
            }
            if n == bs {
                let whole = &data[done..done + bs];
                self.backing
                    .write_at(whole, position)
                    .map_err(|e| self.io_error("cannot write the backing file", e))?;
                self.after_backing_write(block, whole)?;
                done += n;
                continue;
            }
            // A partial block: the rest of it comes from what is stored now.
            block_buf.resize(bs, 0);
            let valid = self
                .backing
                .read_at(&mut block_buf, block * bs as u64)
                .map_err(|e| self.io_error("cannot read the backing file", e))?;
            // Past the end of the file is a hole, and holes read as zeros.
            block_buf[valid.min(within)..within].fill(0);
            block_buf[within..within + n].copy_from_slice(&data[done..done + n]);
            let valid = valid.max(within + n);
            self.backing
                .write_at(&data[done..done + n], position)
                .map_err(|e| self.io_error("cannot write the backing file", e))?;
            self.after_backing_write(block, &block_buf[..valid])?;
            done += n;
        }
        Ok(done)
    }

    /// Writes `data` into `block` from byte `within`, in a mode that keeps written data dirty:
    /// the cache takes the block first, and the backing file gets it only if the cache did not
    /// absorb it. A partial block's rest is read through the cache, which may hold it dirty.
    /// The caller holds the block's writer turn.
    fn write_dirty(
        &self,
        block: u64,
        within: usize,
        data: &[u8],
        block_buf: &mut Vec<u8>,
    ) -> Result<(), EngineError> {
        let bs = self.cache.block_size();
        let at = block * bs as u64;
        let contents: &[u8] = if data.len() == bs {
            data
        } else {
            block_buf.resize(bs, 0);
            // Loaded without the loader's turn: this writer holds the stripe.
            let load = |b: &mut [u8]| self.backing.read_at(b, at);
            let valid = match self.cache.read_through(block, block_buf, load) {
                Ok(outcome) => outcome.len,
                Err(EngineError::Io { source, .. }) => {
                    return Err(self.io_error("cannot read the backing file", source))
                }
                Err(e) => return Err(e),
            };
            // Past the end of the file is a hole, and holes read as zeros.
            block_buf[valid.min(within)..within].fill(0);
            block_buf[within..within + data.len()].copy_from_slice(data);
            &block_buf[..valid.max(within + data.len())]
        };
        if !self.cache.put(block, contents)?.absorbed {
            self.backing
                .write_at(contents, at)
                .map_err(|e| self.io_error("cannot write the backing file", e))?;
        }
        Ok(())
    }

    /// Tells the cache of a block the backing file now has: the policy's mode decides what
    /// the write places, updates or drops.
    fn after_backing_write(&self, block: u64, contents: &[u8]) -> Result<(), EngineError> {
        self.cache.put(block, contents).map(|_| ())
    }
}

/// The block `offset` starts, if it starts one (block sizes that are powers of two take a
/// shift and a mask rather than a division).
#[inline]
fn whole_block(offset: u64, block_size: usize) -> Option<u64> {
    let bs = block_size as u64;
    if bs.is_power_of_two() {
        (offset & (bs - 1) == 0).then_some(offset >> bs.trailing_zeros())
    } else {
        offset.is_multiple_of(bs).then_some(offset / bs)
    }
}

/// Appends `len` bytes of data (or hole) to `extents`, one extent with the last if it is alike.
fn push_extent(extents: &mut Vec<Extent>, len: u64, data: bool) {
    match extents.last_mut() {
        Some(last) if last.data == data => last.len += len,
        _ => extents.push(Extent { len, data }),
    }
}
