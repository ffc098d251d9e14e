//! A tier's medium and the I/O done on it with the shard unlocked. The medium (DRAM, a mapped
//! file, a file, flash) is opened and sized once; each shard takes a disjoint run of pages on
//! it, its [`Region`] (`crate::tier::region`): each page one block, or with size classes split into
//! 2, 4, 8... blocks of one class. Each shard owns its run exclusively and writes it only
//! under its own lock; read handles read pinned slots, which nothing writes. The one exception
//! is the upper tier's hits served without the lock (`crate::tier::optimistic`): they copy a slot
//! while it may be written, and throw the copy away when the slot's sequence number says a
//! write overlapped it.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};

use crate::aligned::AlignedBuf;
use crate::device::{read_exact_at, Device, FileDevice, MemoryDevice};
use crate::error::EngineError;
use crate::tier::flash::open_direct;
use crate::tier::region::Region;
use crate::tier::superblock;
use crate::tier::TierKind;

/// A tier's medium, opened and sized; shards take disjoint regions of it.
pub struct Medium {
    kind: TierKind,
    device: Arc<dyn Device>,
    slot_bytes: usize,
    /// Chunks a page may be split into (1 without size classes).
    chunks: u32,
    /// What the user should know about how the medium runs (a fallback taken, an older
    /// format's file emptied).
    pub warnings: Vec<String>,
    /// The tier file, locked for this cache while the medium lives (`superblock`), and its
    /// superblock as last written.
    file: Option<(File, PathBuf, superblock::Superblock)>,
    /// What the tier file held when it was opened.
    pub previous: superblock::Previous,
    /// Where slots and headers lie in the tier file (`None` on DRAM, whose slots start its
    /// memory).
    geometry: Option<superblock::Geometry>,
}

/// How a cache lays its tiers out, as a tier file's superblock records it.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub slots: u64,
    pub slot_bytes: usize,
    pub chunks: u32,
    pub block_size: usize,
    pub shards: usize,
}

impl Medium {
    /// Opens the tier: DRAM is allocated; a mapped, file or flash tier's file is made or taken
    /// as `superblock` allows (a foreign file only when `overwrite`; its blocks kept for recovery
    /// as `recover` says), locked, and sized.
    pub fn open(
        kind: &TierKind,
        layout: Layout,
        overwrite: bool,
        recover: superblock::Recover,
    ) -> Result<Medium, EngineError> {
        let Layout { slots, slot_bytes, chunks, .. } = layout;
        let bytes = slots * slot_bytes as u64;
        let mut warnings = Vec::new();
        let geometry = superblock::Geometry {
            slot_bytes: slot_bytes as u32,
            slots,
            block_size: layout.block_size as u32,
            shards: layout.shards as u32,
            chunks,
            kind: match kind {
                TierKind::Dram => 0,
                TierKind::Mapped { .. } => 1,
                TierKind::File { .. } => 2,
                TierKind::Flash { .. } => 3,
            },
        };
        let mut previous = superblock::Previous::Nothing;
        let file = match kind {
            TierKind::Dram => None,
            TierKind::Mapped { path } | TierKind::File { path } | TierKind::Flash { path } => {
                let opened = superblock::open(path, geometry, overwrite, recover)?;
                warnings.extend(opened.note);
                previous = opened.previous;
                Some((opened.file, path.clone(), opened.superblock))
            }
        };
        let locked = file.as_ref().map(|(file, _, _)| file);
        let device: Arc<dyn Device> = match kind {
            TierKind::Dram => {
                // Anonymous memory, page-aligned, touched only through raw slot slices so a
                // read handle may keep pointing at its slot while the shard writes others.
                let mapping = MmapOptions::new().len((bytes as usize).max(1)).map_anon().map_err(
                    |source| EngineError::Io {
                        path: "<DRAM tier>".into(),
                        action: "cannot allocate the tier's memory",
                        source,
                    },
                )?;
                // Huge pages where the kernel has them: hits land on random slots, and with
                // 4 KiB pages nearly every one would also miss the TLB. A hint; refusals
                // (no transparent huge pages) change nothing else.
                #[cfg(target_os = "linux")]
                let _ = mapping.advise(memmap2::Advice::HugePage);
                Arc::new(MemoryDevice::anonymous(MmapRaw::from(mapping)))
            }
            TierKind::Flash { path } => open_flash(path, geometry.file_bytes(), &mut warnings)?,
            TierKind::Mapped { path } => {
                let file = locked.expect("a tier file");
                let length = geometry.file_bytes() as usize;
                let mapping = MmapOptions::new().len(length).map_raw(file).map_err(|source| {
                    EngineError::Io {
                        path: path.clone(),
                        action: "cannot map the tier file",
                        source,
                    }
                })?;
                Arc::new(MemoryDevice::mapped(mapping, path))
            }
            TierKind::File { path } => {
                let file =
                    locked.expect("a tier file").try_clone().map_err(|source| EngineError::Io {
                        path: path.clone(),
                        action: "cannot open the tier file",
                        source,
                    })?;
                Arc::new(FileDevice::new(file, path))
            }
        };
        let geometry = locked.is_some().then_some(geometry);
        Ok(Medium {
            kind: kind.clone(),
            device,
            slot_bytes,
            chunks,
            warnings,
            file,
            previous,
            geometry,
        })
    }

    pub fn kind(&self) -> &TierKind {
        &self.kind
    }

    /// Makes every block write and free mark so far durable (`msync` of a mapped tier,
    /// `fdatasync` of a file or flash tier).
    pub fn sync(&self) -> Result<(), EngineError> {
        self.device.sync().map_err(|source| EngineError::Io {
            path: self.device.path().to_path_buf(),
            action: "cannot sync the tier",
            source,
        })
    }

    /// Rewrites the superblock (synced) with `change` applied.
    fn rewrite(
        &mut self,
        change: impl FnOnce(&mut superblock::Superblock),
    ) -> Result<(), EngineError> {
        let Some((_, path, superblock)) = &mut self.file else { return Ok(()) };
        change(superblock);
        // Through the device, so that what wraps it (a crash image, a killed process) sees
        // the superblock's writes in their place among the blocks'. Flash takes whole aligned
        // pages (direct I/O): the header page, the superblock and zeros.
        let io = |action, source| EngineError::Io { path: path.clone(), action, source };
        let written = match self.kind {
            TierKind::Flash { .. } => {
                let mut page = AlignedBuf::new(superblock::HEADER_BYTES as usize);
                let encoded = superblock.encode();
                page.as_mut_slice()[..encoded.len()].copy_from_slice(&encoded);
                self.device.write_at(page.as_slice(), 0)
            }
            _ => self.device.write_at(&superblock.encode(), 0),
        };
        written.map_err(|e| io("cannot write the tier header", e))?;
        self.device.sync().map_err(|e| io("cannot sync the tier header", e))
    }

    /// Records the backing file whose blocks the tier holds.
    pub fn set_backing(&mut self, backing: Option<superblock::Backing>) -> Result<(), EngineError> {
        if self.file.as_ref().is_some_and(|(_, _, s)| s.backing == backing) {
            return Ok(());
        }
        self.rewrite(|superblock| superblock.backing = backing)
    }

    /// Marks the tier file open (synced), before the first block of this run is written: a
    /// crash from here on leaves it open.
    pub fn begin(&mut self) -> Result<(), EngineError> {
        self.rewrite(|superblock| {
            superblock.state = superblock::State::Open;
            superblock.headers_crc = None;
        })
    }

    /// Ends a clean stop: every block is synced, then the superblock says clean, with the
    /// digest of a mapped tier's headers (see [`headers_crc`](Self::headers_crc)).
    pub fn close_clean(&mut self, dirty_left: bool) -> Result<(), EngineError> {
        self.sync()?;
        let state = if dirty_left { superblock::State::Synced } else { superblock::State::Clean };
        let headers_crc = self.headers_crc()?;
        self.rewrite(|superblock| {
            superblock.state = state;
            superblock.headers_crc = headers_crc;
        })
    }

    /// CRC32C of a mapped tier's array of block headers or a flash tier's slot records, every
    /// shard's pages of them, as the medium holds them now (`None` on other tiers). Recorded
    /// at a clean stop; a restart that finds the same digest takes the blocks as the headers
    /// say, without reading every value.
    pub fn headers_crc(&self) -> Result<Option<u32>, EngineError> {
        let apart = matches!(self.kind, TierKind::Mapped { .. } | TierKind::Flash { .. });
        let Some(geometry) = self.geometry.filter(|_| apart) else {
            return Ok(None);
        };
        let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        // Aligned, for a flash tier's direct I/O; the record area is whole pages.
        let mut aligned = AlignedBuf::new(1 << 20);
        let buf = aligned.as_mut_slice();
        let (mut at, end) =
            (superblock::HEADER_BYTES, superblock::HEADER_BYTES + geometry.record_bytes());
        while at < end {
            let n = buf.len().min((end - at) as usize);
            read_exact_at(&*self.device, &mut buf[..n], at).map_err(|source| EngineError::Io {
                path: self.device.path().to_path_buf(),
                action: "cannot read the tier's block headers",
                source,
            })?;
            digest.update(&buf[..n]);
            at += n as u64;
        }
        Ok(Some(digest.finalize() as u32))
    }

    /// The tier file's path, if the tier has one.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.file.as_ref().map(|(_, path, _)| path.as_path())
    }

    /// Wraps the medium's device (emulation, faults, a crash image: see [`crate::device`]).
    pub fn wrap(&mut self, wrapper: impl FnOnce(Arc<dyn Device>) -> Arc<dyn Device>) {
        self.device = wrapper(self.device.clone());
    }

    /// The region of slots `first..first + count` for one shard (`compact`: see
    /// [`Region::new`]). Regions of one medium must be disjoint: the cache hands each slot
    /// range out once.
    pub fn region(&self, first: u64, count: u64, compact: bool) -> Result<Region, EngineError> {
        // Each shard's slots, and its records (flash) or headers (mapped) on pages of their
        // own, in shard order.
        let shard = (first / count.max(1)) as u32;
        let (offset, records_at) = match &self.geometry {
            Some(geometry) => {
                assert_eq!(count, geometry.slots_per_shard(), "a region is one shard's slots");
                (geometry.slot_at(shard, 0), geometry.header_at(shard, 0))
            }
            None => (first * self.slot_bytes as u64, 0),
        };
        let placed = (offset, records_at, count);
        let format = (self.slot_bytes, self.chunks);
        Ok(Region::new(&self.kind, self.device.clone(), placed, format, compact))
    }
}

/// A flash tier's device: the file read and written with direct I/O, and mapped for its slot
/// records (`Device::write_buffered_at`); where the file system refuses direct I/O, buffered,
/// its records written as everything else, and a warning.
fn open_flash(
    path: &std::path::Path,
    len: u64,
    warnings: &mut Vec<String>,
) -> Result<Arc<dyn Device>, EngineError> {
    let (file, note) = open_direct(path)?;
    if let Some(note) = note {
        warnings.push(note);
        return Ok(Arc::new(FileDevice::new(file, path)));
    }
    let device = FileDevice::direct(file, len, path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        action: "cannot map the tier file's slot records",
        source,
    })?;
    Ok(Arc::new(device))
}
