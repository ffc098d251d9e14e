//! The media under the cache behind one trait: a tier's memory or file, and the backing file
//! of a [`CachedFile`](crate::CachedFile), are each a [`Device`] read and written at byte
//! offsets and synced. What a test or a study changes about a medium is a wrapper around the
//! device, never an option of the production code:
//!
//! - [`Emulated`] makes it take a device profile's time ([`crate::emulate`]);
//! - [`Faulty`] makes its reads or writes fail, and failing writes tear;
//! - [`CrashImage`] keeps what was written since the last sync apart, so that a crash can be
//!   staged: [`CrashImage::crash`] drops every write no completed sync covers, optionally
//!   keeping a torn prefix of the last one, and the device refuses all I/O from then on.
//!
//! A backing file may be read and written with direct I/O ([`DirectFile`]).
//!
//! A memory device (DRAM, a mapped file) also lends out its bytes ([`Device::memory`]), which
//! the tiers read and write in place, without the lock on hits. A wrapper lends nothing: what
//! it changes must see every access, so a wrapped memory tier is read and written through the
//! trait, under its shard's lock, like a file.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::MmapRaw;
use tiercache_core::{DeviceProfile, Direction};

use crate::emulate::Emulator;

mod direct;
mod fs;

pub use direct::DirectFile;
pub use fs::{allocate, next_data, punch_hole};

/// A medium read and written at byte offsets. Reads and writes of disjoint ranges may run
/// from several threads at once; a range is written by one thread at a time (the cache's
/// shards and block locks see to it).
pub trait Device: Send + Sync {
    /// The file or device, for errors and warnings (`<DRAM tier>` for process memory).
    fn path(&self) -> &Path;

    /// Reads into `buf` from `at` until it is full or the device ends; returns the bytes read.
    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize>;

    /// Writes all of `data` at `at`.
    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()>;

    /// Writes `parts` end to end from `at`, as one request where the device can gather them
    /// (a file: `pwritev`); elsewhere copied into `scratch` (which holds them all) and written
    /// with [`write_at`](Self::write_at).
    fn write_parts_at(&self, parts: &[&[u8]], at: u64, scratch: &mut [u8]) -> io::Result<()> {
        let mut len = 0;
        for part in parts {
            scratch[len..len + part.len()].copy_from_slice(part);
            len += part.len();
        }
        self.write_at(&scratch[..len], at)
    }

    /// Writes all of `data` at `at` through the page cache where `write_at` goes around it
    /// (a file opened with `O_DIRECT`): small writes no alignment fits, such as a flash tier's
    /// slot records, which a killed process then leaves on the file at once, and the machine
    /// keeps from the next [`sync`](Self::sync) on, as any write. Elsewhere, a write.
    fn write_buffered_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.write_at(data, at)
    }

    /// Returns once every write completed before the call is durable: on the medium for a
    /// file (`fdatasync`) or a mapped file (`msync`); process memory has nothing to sync.
    fn sync(&self) -> io::Result<()>;

    /// The device's length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Makes `len` bytes from `at` read as zeros, the device's length unchanged: a hole
    /// punched where the medium frees space (a file), zeros written elsewhere. Durable at the
    /// next [`sync`](Self::sync), as a write is.
    fn discard(&self, at: u64, len: u64) -> io::Result<()> {
        write_zeros(self, at, len)
    }

    /// The first range at or after `at` that holds data, the bytes before it and after it
    /// (up to the next such range) a hole: never written, or discarded, and read as zeros
    /// without being stored (a sparse file's). `None` when only holes follow `at`. A device
    /// that cannot tell holds data everywhere.
    fn next_data(&self, at: u64) -> io::Result<Option<Range<u64>>> {
        let len = self.len()?;
        Ok((at < len).then_some(at..len))
    }

    /// Whether the device holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Makes the device `len` bytes long: cut, or grown with zeros. Files can; memory and
    /// devices of a fixed size cannot, and say so.
    fn set_len(&self, len: u64) -> io::Result<()> {
        let _ = len;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{}: this device cannot change its length", self.path().display()),
        ))
    }

    /// The device's bytes in place, for a memory device whose reads and writes nothing wraps;
    /// `None` where every access must go through this trait.
    fn memory(&self) -> Option<&Arc<MmapRaw>> {
        None
    }
}

/// Writes `len` zero bytes from `at` to `device`, a megabyte at a time.
pub fn write_zeros<D: Device + ?Sized>(device: &D, at: u64, len: u64) -> io::Result<()> {
    in_zero_chunks(at, len, |zeros, at| device.write_at(zeros, at))
}

/// Calls `write` with zeros and where they go, a megabyte at a time, to cover `len` bytes
/// from `at`.
pub fn in_zero_chunks<E>(
    at: u64,
    len: u64,
    mut write: impl FnMut(&[u8], u64) -> Result<(), E>,
) -> Result<(), E> {
    let zeros = vec![0u8; len.min(1 << 20) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(zeros.len() as u64);
        write(&zeros[..n as usize], at + done)?;
        done += n;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `at`; a device that ends first is an `UnexpectedEof`.
pub fn read_exact_at(device: &dyn Device, buf: &mut [u8], at: u64) -> io::Result<()> {
    match device.read_at(buf, at)? {
        n if n == buf.len() => Ok(()),
        n => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{} bytes wanted at offset {at}, the device ends after {n}", buf.len()),
        )),
    }
}

/// A file or block device read and written with positioned I/O (buffered, or direct if it was
/// opened with `O_DIRECT`: then offsets, lengths and buffers must be aligned by the caller).
pub struct FileDevice {
    file: File,
    path: PathBuf,
    /// For a file opened with `O_DIRECT`, the file mapped (shared), which
    /// [`Device::write_buffered_at`] writes into.
    mapped: Option<MmapRaw>,
}

impl FileDevice {
    pub fn new(file: File, path: &Path) -> FileDevice {
        FileDevice { file, path: path.to_path_buf(), mapped: None }
    }

    /// `direct`, a file of `len` bytes opened with `O_DIRECT`, also mapped: aligned requests
    /// go straight to the device, `write_buffered_at` into the page cache through the mapping,
    /// a copy with no system call (a 32-byte `pwrite` per flash record cost a third of a
    /// write-heavy flash tier's throughput on ext4, which dirties the inode each time). The
    /// kernel writes such pages back before a direct read of them, and a sync covers them.
    pub fn direct(direct: File, len: u64, path: &Path) -> io::Result<FileDevice> {
        let mapped = memmap2::MmapOptions::new().len(len as usize).map_raw(&direct)?;
        Ok(FileDevice { file: direct, path: path.to_path_buf(), mapped: Some(mapped) })
    }

    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

impl Device for FileDevice {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], at + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.file.write_all_at(data, at)
    }

    fn write_parts_at(&self, parts: &[&[u8]], at: u64, _: &mut [u8]) -> io::Result<()> {
        fs::write_parts_at(&self.file, parts, at)
    }

    fn write_buffered_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        let Some(mapped) = &self.mapped else { return self.file.write_all_at(data, at) };
        match (at as usize).checked_add(data.len()) {
            Some(end) if end <= mapped.len() => {
                // SAFETY: the range lies in the mapping, which lives as long as `self`; only
                // this call writes the file's bytes through it, and its callers never write
                // one range from two threads at once (a shard's records are its own).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        mapped.as_mut_ptr().add(at as usize),
                        data.len(),
                    )
                };
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} bytes at offset {at} pass the end of the file", data.len()),
            )),
        }
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn next_data(&self, at: u64) -> io::Result<Option<Range<u64>>> {
        next_data(&self.file, at)
    }

    /// Punches a hole (`fallocate`), which frees the file system's blocks, or a block
    /// device's where it can discard; a medium that cannot gets zeros written.
    fn discard(&self, at: u64, len: u64) -> io::Result<()> {
        punch_hole(&self.file, at, len).or_else(|e| match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::ENODEV) => write_zeros(self, at, len),
            _ => Err(e),
        })
    }
}

/// Memory: anonymous (the DRAM tier) or a mapped file (persistent memory, CXL memory, tmpfs).
/// Its bytes may be copied by readers without a lock at any time (the hit path of
/// `tier::optimistic`), so they are read and written as byte-wise atomics
/// ([`crate::atomic_bytes`]).
///
/// Crate-private: a write must not land on bytes a read handle holds as a slice, which the
/// tiers guarantee (a pinned slot is never written) and nothing else could.
pub(crate) struct MemoryDevice {
    mapping: Arc<MmapRaw>,
    path: PathBuf,
    /// A mapped file, whose writes `sync` makes durable.
    file_backed: bool,
}

impl MemoryDevice {
    pub(crate) fn anonymous(mapping: MmapRaw) -> MemoryDevice {
        MemoryDevice { mapping: Arc::new(mapping), path: "<DRAM tier>".into(), file_backed: false }
    }

    pub(crate) fn mapped(mapping: MmapRaw, path: &Path) -> MemoryDevice {
        MemoryDevice { mapping: Arc::new(mapping), path: path.to_path_buf(), file_backed: true }
    }

    /// The part of `len` bytes at `at` inside the mapping, or an error past its end.
    fn inside(&self, at: u64, len: usize) -> io::Result<usize> {
        match (at as usize).checked_add(len) {
            Some(end) if end <= self.mapping.len() => Ok(at as usize),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{len} bytes at offset {at} pass the end of the tier's memory"),
            )),
        }
    }
}

impl Device for MemoryDevice {
    fn path(&self) -> &Path {
        &self.path
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        let len = buf.len().min(self.mapping.len().saturating_sub(at as usize));
        let start = self.inside(at, len)?;
        // SAFETY: `start..start + len` lies in the mapping (checked), which lives as long as
        // `self`; `buf` is ours alone. Writers may store to these bytes meanwhile: the loads
        // are atomic.
        unsafe {
            crate::atomic_bytes::load(self.mapping.as_ptr().add(start), buf.as_mut_ptr(), len)
        };
        Ok(len)
    }

    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        let start = self.inside(at, data.len())?;
        // SAFETY: inside the mapping (checked). The tiers write only slots no read handle
        // holds, one writer per slot (the shard's lock); readers without the lock load
        // atomically.
        unsafe {
            crate::atomic_bytes::store(
                data.as_ptr(),
                self.mapping.as_mut_ptr().add(start),
                data.len(),
            )
        };
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        match self.file_backed {
            true => self.mapping.flush(),
            false => Ok(()),
        }
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.mapping.len() as u64)
    }

    fn memory(&self) -> Option<&Arc<MmapRaw>> {
        Some(&self.mapping)
    }
}

/// A device that takes a profile's time: every read and write runs, then waits out the
/// profile's service time (see [`Emulator`]).
pub struct Emulated {
    inner: Arc<dyn Device>,
    emulator: Emulator,
}

impl Emulated {
    pub fn new(inner: Arc<dyn Device>, profile: DeviceProfile) -> Emulated {
        Emulated { inner, emulator: Emulator::new(profile) }
    }
}

impl Device for Emulated {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        self.emulator.serve(Direction::Read, (at, buf.len() as u64), || self.inner.read_at(buf, at))
    }

    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.emulator
            .serve(Direction::Write, (at, data.len() as u64), || self.inner.write_at(data, at))
    }

    /// The inner device's, uncharged: a write into the page cache, not to the device.
    fn write_buffered_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.inner.write_buffered_at(data, at)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn next_data(&self, at: u64) -> io::Result<Option<Range<u64>>> {
        self.inner.next_data(at)
    }

    /// The inner device's discard, charged as one request of no bytes.
    fn discard(&self, at: u64, len: u64) -> io::Result<()> {
        self.emulator.serve(Direction::Write, (at, 0), || self.inner.discard(at, len))
    }
}

/// Which operations of a [`Faulty`] device fail.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Every `n`-th write fails.
    pub write_every: Option<u64>,
    /// Every `n`-th read fails.
    pub read_every: Option<u64>,
    /// A failing write tears: it writes a prefix of its data, a whole number of sectors of
    /// this many bytes (at least one, fewer than all), before failing. Without it a failing
    /// write writes nothing.
    pub tear_sector: Option<usize>,
}

/// A device whose reads and writes fail as [`Faults`] says, as a failing device's would.
pub struct Faulty {
    inner: Arc<dyn Device>,
    faults: Faults,
    reads: AtomicU64,
    writes: AtomicU64,
}

impl Faulty {
    pub fn new(inner: Arc<dyn Device>, faults: Faults) -> Faulty {
        Faulty { inner, faults, reads: AtomicU64::new(0), writes: AtomicU64::new(0) }
    }

    /// Counts an operation; whether it is one to fail.
    fn strikes(count: &AtomicU64, every: Option<u64>) -> bool {
        let n = count.fetch_add(1, Ordering::Relaxed) + 1;
        every.is_some_and(|every| n.is_multiple_of(every.max(1)))
    }
}

/// The error an injected fault fails with.
fn injected(what: &str) -> io::Error {
    io::Error::other(format!("injected {what} fault"))
}

impl Device for Faulty {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        if Faulty::strikes(&self.reads, self.faults.read_every) {
            return Err(injected("read"));
        }
        self.inner.read_at(buf, at)
    }

    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        if !Faulty::strikes(&self.writes, self.faults.write_every) {
            return self.inner.write_at(data, at);
        }
        if let Some(sector) = self.faults.tear_sector {
            let sectors = data.len() / sector.max(1);
            if sectors > 1 {
                self.inner.write_at(&data[..sectors / 2 * sector], at)?;
            }
        }
        Err(injected("write"))
    }

    /// The inner device's, never failed: a write into the page cache, which the faults here
    /// (a device's) do not reach.
    fn write_buffered_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.inner.write_buffered_at(data, at)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    /// The inner device's discard, counted as a write that may fail (never torn).
    fn discard(&self, at: u64, len: u64) -> io::Result<()> {
        if Faulty::strikes(&self.writes, self.faults.write_every) {
            return Err(injected("discard"));
        }
        self.inner.discard(at, len)
    }
}

/// Bytes read back from a device: in a buffer aligned for direct I/O when the range allows
/// (a device opened with `O_DIRECT` takes nothing else), else in a plain one.
enum Saved {
    Plain(Vec<u8>),
    Aligned(crate::aligned::AlignedBuf, usize),
}

impl Saved {
    /// Up to `len` bytes at `at` (fewer where the device ends).
    fn read(device: &dyn Device, at: u64, len: usize) -> io::Result<Saved> {
        if len > 0 && at.is_multiple_of(512) && len.is_multiple_of(512) {
            let align = crate::aligned::DIRECT_ALIGN;
            let mut buf = crate::aligned::AlignedBuf::new(len.next_multiple_of(align));
            let n = device.read_at(&mut buf.as_mut_slice()[..len], at)?;
            return Ok(Saved::Aligned(buf, n));
        }
        let mut old = vec![0; len];
        let n = device.read_at(&mut old, at)?;
        old.truncate(n);
        Ok(Saved::Plain(old))
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Saved::Plain(bytes) => bytes,
            Saved::Aligned(buf, n) => &buf.as_slice()[..*n],
        }
    }
}

/// A write no sync has covered yet: where it went and what it overwrote.
struct Unsynced {
    at: u64,
    /// The bytes it overwrote (fewer than it wrote where it extended the device).
    old: Saved,
    written: usize,
    /// The device's length before it.
    len_before: u64,
}

#[derive(Default)]
struct CrashState {
    unsynced: Vec<Unsynced>,
    crashed: bool,
    syncs: u64,
}

/// A device whose durable image can be taken at any moment, as a power cut would leave it:
/// the writes since the last completed sync are kept apart (the bytes each overwrote are
/// saved), and [`crash`](Self::crash) puts those bytes back, newest first. Modeled on redb's
/// crash-testing backend, which likewise drops what no sync made durable.
pub struct CrashImage {
    inner: Arc<dyn Device>,
    state: Mutex<CrashState>,
}

/// How a staged crash treats the last write before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tear {
    /// Every unsynced write is lost whole.
    None,
    /// The last unsynced write keeps its first `sectors` sectors of `sector` bytes (clamped to
    /// fewer than it wrote); the others are lost whole.
    Keep { sector: usize, sectors: usize },
}

impl CrashImage {
    pub fn new(inner: Arc<dyn Device>) -> CrashImage {
        CrashImage { inner, state: Mutex::new(CrashState::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CrashState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes `data` at `at` with `write`, keeping what it overwrites to undo at a crash.
    fn write_undoably(
        &self,
        data: &[u8],
        at: u64,
        write: impl FnOnce(&dyn Device) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut state = self.state();
        if state.crashed {
            return Err(crashed());
        }
        let len_before = self.inner.len()?;
        let old = Saved::read(&*self.inner, at, data.len())?;
        write(&*self.inner)?;
        state.unsynced.push(Unsynced { at, old, written: data.len(), len_before });
        Ok(())
    }

    /// Syncs completed so far.
    pub fn syncs(&self) -> u64 {
        self.state().syncs
    }

    /// Writes not covered by a completed sync.
    pub fn unsynced_writes(&self) -> usize {
        self.state().unsynced.len()
    }

    /// Stages a crash: the device's bytes become its durable image (with the last write torn
    /// as `tear` says), and every operation fails from now on, as the process that used it
    /// would be gone. Returns how many writes were lost.
    pub fn crash(&self, tear: Tear) -> io::Result<usize> {
        let mut state = self.state();
        state.crashed = true;
        let lost = std::mem::take(&mut state.unsynced);
        // The torn prefix of the last write: its bytes are on the device now (it is the
        // newest), read before the older writes under it are undone, put back after.
        let torn = match (tear, lost.last()) {
            (Tear::Keep { sector, sectors }, Some(last)) => {
                let whole = last.written / sector.max(1);
                let keep = sectors.min(whole.saturating_sub(1)) * sector;
                Some((last.at, Saved::read(&*self.inner, last.at, keep)?))
            }
            _ => None,
        };
        let mut length = lost.first().map(|w| w.len_before);
        for write in lost.iter().rev() {
            self.inner.write_at(write.old.bytes(), write.at)?;
        }
        if let Some((at, prefix)) = torn.filter(|(_, prefix)| !prefix.bytes().is_empty()) {
            self.inner.write_at(prefix.bytes(), at)?;
            length = length.map(|l| l.max(at + prefix.bytes().len() as u64));
        }
        if let Some(length) = length {
            if self.inner.len()? > length {
                truncate(&*self.inner, length)?;
            }
        }
        self.inner.sync()?;
        Ok(lost.len())
    }
}

/// Cuts a device back to `length` bytes: only files can be (a crash image over memory never
/// grows it, writes past the end failing).
fn truncate(device: &dyn Device, length: u64) -> io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(device.path())?;
    file.set_len(length)
}

fn crashed() -> io::Error {
    io::Error::other("the device crashed (a staged crash)")
}

impl Device for CrashImage {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> io::Result<usize> {
        if self.state().crashed {
            return Err(crashed());
        }
        self.inner.read_at(buf, at)
    }

    fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.write_undoably(data, at, |inner| inner.write_at(data, at))
    }

    /// Undone by a crash as any write since the last sync is.
    fn write_buffered_at(&self, data: &[u8], at: u64) -> io::Result<()> {
        self.write_undoably(data, at, |inner| inner.write_buffered_at(data, at))
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.state();
        if state.crashed {
            return Err(crashed());
        }
        self.inner.sync()?;
        state.unsynced.clear();
        state.syncs += 1;
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        if self.state().crashed {
            return Err(crashed());
        }
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> (PathBuf, Arc<dyn Device>) {
        let dir = std::env::temp_dir().join(format!("tiercache-device-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        (path.clone(), Arc::new(FileDevice::new(file, &path)))
    }

    #[test]
    fn parts_gathered_by_the_file_land_end_to_end_as_written_whole() {
        let (path, device) = scratch("parts");
        // More parts than one pwritev takes, of odd lengths, from an odd offset.
        let parts: Vec<Vec<u8>> =
            (0..1500u32).map(|i| vec![i as u8; 1 + (i as usize % 7)]).collect();
        let refs: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        device.write_parts_at(&refs, 3, &mut []).unwrap();
        let whole: Vec<u8> = parts.concat();
        let file = std::fs::read(&path).unwrap();
        assert_eq!(file.len(), 3 + whole.len());
        assert_eq!(&file[3..], &whole[..]);
        // The default, for devices that cannot gather: copied into the scratch buffer.
        let memory = MemoryDevice::anonymous(MmapRaw::from(
            memmap2::MmapOptions::new().len(64).map_anon().unwrap(),
        ));
        let mut scratch = [0u8; 16];
        memory.write_parts_at(&[b"ab", b"cde"], 4, &mut scratch).unwrap();
        let mut back = [0u8; 5];
        memory.read_at(&mut back, 4).unwrap();
        assert_eq!(&back, b"abcde");
    }

    #[test]
    fn a_file_device_reads_what_it_wrote_and_stops_at_its_end() {
        let (_, device) = scratch("plain");
        device.write_at(b"hello", 3).unwrap();
        assert_eq!(device.len().unwrap(), 8);
        let mut buf = [9u8; 10];
        assert_eq!(device.read_at(&mut buf, 0).unwrap(), 8);
        assert_eq!(&buf[..8], b"\0\0\0hello");
        let e = read_exact_at(&*device, &mut buf, 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn faults_fail_every_nth_operation_and_tear_whole_sectors() {
        let (_, inner) = scratch("faulty");
        inner.write_at(&[0u8; 4096], 0).unwrap();
        let faults = Faults { write_every: Some(2), read_every: Some(3), tear_sector: Some(512) };
        let device = Faulty::new(inner.clone(), faults);
        device.write_at(&[1u8; 2048], 0).unwrap();
        assert!(device.write_at(&[2u8; 2048], 0).is_err(), "the second write fails");
        let mut buf = [0u8; 2048];
        inner.read_at(&mut buf, 0).unwrap();
        assert_eq!((buf[0], buf[1023], buf[1024]), (2, 2, 1), "torn after two sectors of four");
        let reads: Vec<bool> = (0..6).map(|_| device.read_at(&mut buf, 0).is_ok()).collect();
        assert_eq!(reads, [true, true, false, true, true, false]);
    }

    #[test]
    fn a_crash_keeps_what_was_synced_and_drops_the_rest() {
        let (path, inner) = scratch("crash");
        let image = CrashImage::new(inner);
        image.write_at(&[1u8; 1024], 0).unwrap();
        image.sync().unwrap();
        image.write_at(&[2u8; 1024], 0).unwrap();
        image.write_at(&[3u8; 1024], 1024).unwrap();
        assert_eq!(image.unsynced_writes(), 2);
        assert_eq!(image.crash(Tear::None).unwrap(), 2);
        assert!(image.read_at(&mut [0u8; 4], 0).is_err(), "a crashed device refuses I/O");
        assert_eq!(std::fs::read(&path).unwrap(), vec![1u8; 1024], "the extension is cut off");
    }

    #[test]
    fn a_torn_crash_keeps_a_prefix_of_the_last_write_only() {
        let (path, inner) = scratch("torn");
        inner.write_at(&[0u8; 2048], 0).unwrap();
        let image = CrashImage::new(inner);
        image.sync().unwrap();
        image.write_at(&[5u8; 2048], 0).unwrap();
        image.write_at(&[6u8; 2048], 0).unwrap();
        image.crash(Tear::Keep { sector: 512, sectors: 9 }).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        // The last write keeps three sectors of four (at most all but one); the first write,
        // under it, is lost whole.
        assert_eq!(&bytes[..1536], &[6u8; 1536][..]);
        assert_eq!(&bytes[1536..], &[0u8; 512][..]);
    }

    #[test]
    fn an_emulated_device_takes_its_profiles_time() {
        let (_, inner) = scratch("emulated");
        let profile = DeviceProfile {
            name: "slow".into(),
            read_latency_us: 2000.0,
            write_latency_us: 0.0,
            read_bandwidth_gb_s: 1.0,
            write_bandwidth_gb_s: 1.0,
            parallelism: 1,
            read_share_one_writer: 1.0,
            read_share_eight_writers: 1.0,
            cost_per_gb: 1.0,
            sequential_latency_us: None,
            contention: 0.0,
        };
        let device = Emulated::new(inner, profile);
        device.write_at(b"x", 0).unwrap();
        let start = std::time::Instant::now();
        device.read_at(&mut [0u8; 1], 0).unwrap();
        assert!(start.elapsed() >= std::time::Duration::from_millis(2));
    }
}
