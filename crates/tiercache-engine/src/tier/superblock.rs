//! Tier files have an identity: the first [`HEADER_BYTES`] of a mapped, file or flash tier hold
//! a superblock (magic, format version, geometry, the backing file the blocks belong to, open or
//! clean, a checksum), and the tier's slots start after it. A file is only ever written by the
//! cache that made it:
//!
//! - a path that does not exist is created, readable and writable by its owner only (0600);
//! - an existing file is taken only if it is empty or starts with our superblock; anything else
//!   (a database, a disk image, a device with data on it) is refused with an error naming the
//!   path, unless the builder is told to overwrite it on purpose;
//! - the file is locked (`flock`, exclusive) while the cache has it open, so a second process
//!   given the same tier file is refused with an "in use" error instead of both corrupting each
//!   other's blocks.
//!
//! A tier file of this format and geometry is recovered (`crate::recover`); one of another
//! geometry is refused unless the cache starts empty (`Recover::Wipe`); one of an older format,
//! whose blocks were never recoverable, is emptied with a note.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::EngineError;

/// Bytes before a tier file's first slot: one direct-I/O-aligned page.
pub const HEADER_BYTES: u64 = 4096;

/// The first bytes of every tier file.
pub const MAGIC: [u8; 16] = *b"tiercache tier\0\0";

/// The layout version this build writes and reads. Version 3: the superblock records the whole
/// geometry, the backing file and whether the cache stopped cleanly, and freed slots are marked
/// (`crate::tier::block::FREE`), so blocks are recovered. Version 4: flash tiers keep a record of
/// each slot (key, length, checksum, sequence, dirty) between the superblock and the blocks,
/// so they are recovered too; mapped and file tiers are laid out as in 3, which is read as 4.
/// Version 5: a mapped tier keeps its blocks' headers in an array of their own between the
/// superblock and the slots (as flash keeps its records), so that each value starts on a page
/// of its own; file and flash tiers are laid out as in 4, which is read as 5. Versions 1 and 2,
/// and flash tiers of version 3, were never recovered; such a file is emptied and taken, with
/// a note. A mapped tier of version 3 or 4 is emptied and taken only if it stopped cleanly
/// (the backing device then has every block); otherwise it is refused (it may hold dirty
/// blocks this build cannot read) unless overwritten on purpose.
pub const FORMAT_VERSION: u32 = 5;

/// Bytes of the superblock (the rest of the header page is zeros).
const SUPERBLOCK_BYTES: usize = 76;

/// How a cache opens tier files that hold blocks: see `docs/DURABILITY.md`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Recover {
    /// Start empty, whatever the files hold.
    Wipe,
    /// Keep every block that checks out; drop (and count) what does not.
    #[default]
    Quiet,
    /// Keep every block, or refuse to start on any damage.
    Strict,
}

impl std::str::FromStr for Recover {
    type Err = String;

    fn from_str(text: &str) -> Result<Recover, String> {
        match text {
            "wipe" => Ok(Recover::Wipe),
            "quiet" => Ok(Recover::Quiet),
            "strict" => Ok(Recover::Strict),
            _ => Err(format!("'{text}' is not a recover mode: wipe, quiet or strict")),
        }
    }
}

/// What a tier file's superblock records of its tier's layout; a tier is recovered only into a
/// cache of the same geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of a slot (a page, with size classes).
    pub slot_bytes: u32,
    /// Slots in the file, over all shards.
    pub slots: u64,
    pub block_size: u32,
    pub shards: u32,
    /// Chunks a page splits into (1 without size classes).
    pub chunks: u32,
    /// 1 mapped, 2 file, 3 flash.
    pub kind: u32,
}

impl Geometry {
    /// Bytes of a flash tier's slot records or a mapped tier's block headers, between the
    /// superblock and the blocks: each shard's on pages of their own (see `crate::tier::flash`),
    /// one per chunk of a page. None on file tiers, whose blocks carry their headers.
    pub fn record_bytes(&self) -> u64 {
        match self.kind {
            1 | 3 => self.shards as u64 * self.record_pages_per_shard() * HEADER_BYTES,
            _ => 0,
        }
    }

    /// Pages of records (flash) or headers (mapped) of one shard.
    pub fn record_pages_per_shard(&self) -> u64 {
        let slots = self.slots / self.shards.max(1) as u64 * self.chunks.max(1) as u64;
        record_pages(slots)
    }

    /// The tier file's length: superblock, records, blocks.
    pub fn file_bytes(&self) -> u64 {
        HEADER_BYTES + self.record_bytes() + self.slots * self.slot_bytes as u64
    }

    /// The file's bytes stored to through a mapping, allocated when it opens (a mapped tier's
    /// file, a flash tier's superblock and records; its blocks ahead measured no faster).
    pub fn mapped_bytes(&self) -> u64 {
        match self.kind {
            1 => self.file_bytes(),
            3 => HEADER_BYTES + self.record_bytes(),
            _ => 0,
        }
    }

    /// Pages (whole-block slots) of one shard.
    pub fn slots_per_shard(&self) -> u64 {
        self.slots / self.shards.max(1) as u64
    }

    /// Where page `page` of shard `shard` starts in the tier file: its value on mapped and
    /// flash tiers, its block's header and then the value on file tiers.
    pub fn slot_at(&self, shard: u32, page: u64) -> u64 {
        let index = shard as u64 * self.slots_per_shard() + page;
        HEADER_BYTES + self.record_bytes() + index * self.slot_bytes as u64
    }

    /// Where the header (mapped tiers) or record (flash tiers) of slot `slot` of shard
    /// `shard` lies in the tier file: each shard's on pages of their own, in slot order (with
    /// size classes, slot `s` is chunk `s % chunks` of page `s / chunks`). A file tier's
    /// block header starts its slot.
    pub fn header_at(&self, shard: u32, slot: u64) -> u64 {
        match self.kind {
            1 | 3 => {
                let pages = shard as u64 * self.record_pages_per_shard();
                HEADER_BYTES + pages * HEADER_BYTES + slot * crate::tier::block::HEADER_BYTES as u64
            }
            _ => self.slot_at(shard, slot),
        }
    }
}

impl std::fmt::Display for Geometry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            1 => "mapped",
            2 => "file",
            3 => "flash",
            _ => "unknown",
        };
        write!(
            f,
            "a {kind} tier of {} slots of {} bytes ({}-byte blocks, {} shards, {} chunks a page)",
            self.slots, self.slot_bytes, self.block_size, self.shards, self.chunks
        )
    }
}

/// The backing file a tier's blocks are copies of: its device and inode numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backing {
    pub device: u64,
    pub inode: u64,
}

impl Backing {
    /// The identity of an open file.
    pub fn of(file: &File) -> std::io::Result<Backing> {
        let meta = file.metadata()?;
        Ok(Backing { device: meta.dev(), inode: meta.ino() })
    }
}

impl std::fmt::Display for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "device {} inode {}", self.device, self.inode)
    }
}

/// Whether a cache has the tier open, or stopped cleanly (every write synced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Open = 1,
    /// Stopped cleanly with nothing dirty: every dirty block was written back and the backing
    /// device synced, so a block's dirty flag is history.
    Clean = 2,
    /// Stopped cleanly, every write synced, with blocks still dirty (a write-back failed, or a
    /// cache that stops without writing back).
    Synced = 3,
}

/// The fields of a tier file's superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub geometry: Geometry,
    pub backing: Option<Backing>,
    pub state: State,
    /// A mapped or flash tier stopped cleanly: CRC32C of its array of block headers (flash:
    /// slot records) as the stop left it (`Medium::close_clean` in `crate::tier::medium`), so
    /// that a restart finding the same headers can take them without reading every value
    /// (each value is still checked when it is first read).
    pub headers_crc: Option<u32>,
}

impl Superblock {
    pub(crate) fn encode(&self) -> [u8; SUPERBLOCK_BYTES] {
        let g = &self.geometry;
        let mut b = [0u8; SUPERBLOCK_BYTES];
        b[..16].copy_from_slice(&MAGIC);
        b[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        b[20..24].copy_from_slice(&g.slot_bytes.to_le_bytes());
        b[24..32].copy_from_slice(&g.slots.to_le_bytes());
        b[32..36].copy_from_slice(&g.block_size.to_le_bytes());
        b[36..40].copy_from_slice(&g.shards.to_le_bytes());
        b[40..44].copy_from_slice(&g.chunks.to_le_bytes());
        b[44..48].copy_from_slice(&g.kind.to_le_bytes());
        let backing = self.backing.unwrap_or(Backing { device: 0, inode: 0 });
        b[48..56].copy_from_slice(&backing.device.to_le_bytes());
        b[56..64].copy_from_slice(&backing.inode.to_le_bytes());
        b[64..68].copy_from_slice(&(self.state as u32).to_le_bytes());
        // 0 stands for none (a digest that happens to be 0 is not recorded).
        b[68..72].copy_from_slice(&self.headers_crc.unwrap_or(0).to_le_bytes());
        let crc = crate::tier::block::crc32c(&b[..72]);
        b[72..76].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// The superblock in `b`, if its checksum holds.
    fn decode(b: &[u8; SUPERBLOCK_BYTES]) -> Option<Superblock> {
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        if u32_at(72) != crate::tier::block::crc32c(&b[..72]) {
            return None;
        }
        let geometry = Geometry {
            slot_bytes: u32_at(20),
            slots: u64_at(24),
            block_size: u32_at(32),
            shards: u32_at(36),
            chunks: u32_at(40),
            kind: u32_at(44),
        };
        let backing = Some(Backing { device: u64_at(48), inode: u64_at(56) })
            .filter(|b| (b.device, b.inode) != (0, 0));
        let state = match u32_at(64) {
            2 => State::Clean,
            3 => State::Synced,
            _ => State::Open,
        };
        let headers_crc = Some(u32_at(68)).filter(|&crc| crc != 0);
        Some(Superblock { geometry, backing, state, headers_crc })
    }
}

/// What the first bytes of an existing file say it is.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Empty,
    /// A tier file of an older format (its header checks out as that format's).
    Older {
        version: u32,
    },
    /// A mapped tier of an older layout, which this build cannot read; `clean` if it stopped
    /// cleanly (nothing dirty in it).
    Relaid {
        version: u32,
        clean: bool,
    },
    Tier(Superblock),
    /// Of a format newer than this build's.
    Newer {
        version: u32,
    },
    Foreign,
}

fn inspect(file: &mut File) -> std::io::Result<Found> {
    let mut head = [0u8; SUPERBLOCK_BYTES];
    let mut read = 0;
    while read < head.len() {
        match file.read(&mut head[read..])? {
            0 => break,
            n => read += n,
        }
    }
    if read == 0 {
        return Ok(Found::Empty);
    }
    if read < 40 || head[..16] != MAGIC {
        return Ok(Found::Foreign);
    }
    let version = u32::from_le_bytes(head[16..20].try_into().expect("4 bytes"));
    // Versions 1 and 2: a 40-byte header, its checksum at 32 over the bytes before it.
    let old_crc = u32::from_le_bytes(head[32..36].try_into().expect("4 bytes"));
    if version < FORMAT_VERSION && old_crc == crate::tier::block::crc32c(&head[..32]) {
        return Ok(Found::Older { version });
    }
    if read < SUPERBLOCK_BYTES {
        return Ok(Found::Foreign);
    }
    let new_crc = u32::from_le_bytes(head[72..76].try_into().expect("4 bytes"));
    if new_crc != crate::tier::block::crc32c(&head[..72]) {
        return Ok(Found::Foreign);
    }
    if version > FORMAT_VERSION {
        return Ok(Found::Newer { version });
    }
    match Superblock::decode(&head) {
        // Version 3 laid mapped and file tiers out as 4 does; its flash tiers had no slot
        // records, and were never recoverable. Versions 3 and 4 kept a mapped block's header
        // in its slot.
        Some(found) if version == 3 && found.geometry.kind == 3 => Ok(Found::Older { version }),
        Some(found) if version < 5 && found.geometry.kind == 1 => {
            Ok(Found::Relaid { version, clean: found.state == State::Clean })
        }
        Some(found) => Ok(Found::Tier(found)),
        None => Ok(Found::Foreign),
    }
}

/// The superblock of the tier file at `path`, if it is a tier file of this build's format
/// (for tools and tests that look at a tier file from outside).
pub fn read_superblock(path: &Path) -> std::io::Result<Option<Superblock>> {
    match inspect(&mut File::open(path)?)? {
        Found::Tier(superblock) => Ok(Some(superblock)),
        _ => Ok(None),
    }
}

/// Why a tier path with a symbolic link in it is refused.
pub(crate) const SYMLINK: &str = "is, or goes through, a symbolic link, and a tier file is not \
     opened through one (a link put there would turn any file it points to into a tier): give \
     the file's own path (`realpath` prints it)";

/// Opens the tier file at `path` with `flags` (an access mode, maybe `O_DIRECT`, maybe
/// `O_CREAT | O_EXCL` and then made 0600), following no symbolic link anywhere in the path:
/// openat2's `RESOLVE_NO_SYMLINKS` (Linux 5.6); where the kernel (or a sandbox) has no openat2,
/// `O_NOFOLLOW`, which checks the last component alone. A symbolic link to a block device is
/// followed ([`no_follow`]). A link in the way fails with `ELOOP`.
pub(crate) fn open_tier_path(path: &Path, flags: i32) -> std::io::Result<File> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let no_follow = no_follow(path);
    if no_follow != 0 {
        let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        // SAFETY: open_how is plain integers, for which all zeros is a valid value.
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.mode = if flags & libc::O_CREAT != 0 { 0o600 } else { 0 };
        how.resolve = libc::RESOLVE_NO_SYMLINKS;
        // SAFETY: the path is a NUL-terminated string and `how` an open_how of the size given,
        // both alive for the call; the descriptor returned is owned by the File made of it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                libc::AT_FDCWD,
                c_path.as_ptr(),
                &raw const how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd >= 0 {
            // SAFETY: a descriptor openat2 just opened, owned by no one else.
            return Ok(unsafe { File::from_raw_fd(fd as i32) });
        }
        let e = std::io::Error::last_os_error();
        // No openat2: an older kernel, or a sandbox that refuses system calls it does not know.
        if !matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
            return Err(e);
        }
    }
    let mut options = OpenOptions::new();
    options.read(true).write(flags & libc::O_ACCMODE == libc::O_RDWR);
    if flags & libc::O_CREAT != 0 {
        options.create_new(true).mode(0o600);
    }
    options.custom_flags((flags & !(libc::O_ACCMODE | libc::O_CREAT | libc::O_EXCL)) | no_follow);
    options.open(path)
}

/// The flag that keeps an open from following a symbolic link at `path`: tier files are
/// opened only by their own path. A link to a block device (`/dev/disk/by-id/...`, the usual
/// way to name a flash partition) is followed.
pub(crate) fn no_follow(path: &Path) -> i32 {
    use std::os::unix::fs::FileTypeExt;
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let device = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
    match link && device {
        true => 0,
        false => libc::O_NOFOLLOW,
    }
}

/// Locks `file` for this process alone, or says who has it.
///
/// A lock that is taken is retried for up to [`LOCK_PATIENCE`]: a lock belongs to the open file,
/// and a child this process (or the last holder) forks between closing and reopening a tier
/// keeps its copy of the descriptor, and the lock with it, until it executes its program. A
/// cache that really has the file keeps it longer than that, and is reported.
fn lock(file: &File, path: &Path) -> Result<(), EngineError> {
    let started = std::time::Instant::now();
    let source = loop {
        // SAFETY: flock on a descriptor this function's caller owns; no memory is involved.
        let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if status == 0 {
            return Ok(());
        }
        let source = std::io::Error::last_os_error();
        if source.raw_os_error() != Some(libc::EWOULDBLOCK) || started.elapsed() > LOCK_PATIENCE {
            break source;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let action = match source.raw_os_error() {
        Some(libc::EWOULDBLOCK) => "the tier file is in use by another cache (it is locked)",
        _ => "cannot lock the tier file",
    };
    Err(EngineError::Io { path: path.to_path_buf(), action, source })
}

/// How long a taken lock is waited for before the file is reported in use.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// What a tier file held when it was opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Previous {
    /// No blocks to recover: a new or empty file, or one emptied (another format, a foreign
    /// file overwritten on purpose, a tier wiped).
    Nothing,
    /// A tier of this format and geometry, as its superblock says; `short` if the file ended
    /// before its last slot (the missing slots read as empty); `headers_crc` the digest of a
    /// mapped tier's headers or a flash tier's records recorded at its clean stop.
    Tier { backing: Option<Backing>, state: State, short: bool, headers_crc: Option<u32> },
}

/// A tier file, opened and locked.
pub struct Opened {
    /// The locked handle; slot I/O may go through other handles of the same file.
    pub file: File,
    /// What the user should know (an older format's file emptied).
    pub note: Option<String>,
    pub previous: Previous,
    /// The superblock to write once the tier is recovered (state open).
    pub superblock: Superblock,
}

/// Opens (or creates) the tier file at `path` for a tier of `geometry`, locked, sized to hold
/// the header and every slot, its mapped part allocated; a file with nothing to recover gets
/// its superblock (state open, synced) at once. What it held is recovered or not as `recover`
/// says: a tier of another geometry is an error naming both unless wiped, and a short file is
/// an error under `Recover::Strict`.
pub fn open(
    path: &Path,
    geometry: Geometry,
    overwrite: bool,
    recover: Recover,
) -> Result<Opened, EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    let mut file = match open_tier_path(path, libc::O_RDWR) {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(io(SYMLINK, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match open_tier_path(path, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL) {
                Ok(file) => file,
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(io(SYMLINK, e)),
                Err(e) => return Err(io("cannot create the tier file", e)),
            }
        }
        Err(e) => return Err(io("cannot open the tier file", e)),
    };
    lock(&file, path)?;
    let found = inspect(&mut file).map_err(|e| io("cannot read the tier file's header", e))?;
    let (previous, note, empty_it) = keep(path, &file, found, geometry, (overwrite, recover))?;
    if empty_it {
        // Every old block goes: none may be found by a later recovery.
        file.set_len(0).map_err(|e| io("cannot empty the tier file", e))?;
    }
    file.set_len(geometry.file_bytes()).map_err(|e| io("cannot size the tier file", e))?;
    let space = crate::device::allocate(&file, geometry.mapped_bytes());
    space.map_err(|e| io("cannot allocate the tier file's mapped part on its file system", e))?;
    let backing = match previous {
        Previous::Tier { backing, .. } => backing,
        Previous::Nothing => None,
    };
    let superblock = Superblock { geometry, backing, state: State::Open, headers_crc: None };
    if previous == Previous::Nothing {
        // Nothing to keep: the file is ours from now on. A tier with blocks keeps its old
        // superblock until the cache has recovered it (`Medium::begin`), so a refused start
        // changes nothing.
        write_superblock(&file, path, &superblock)?;
    }
    Ok(Opened { file, note, previous, superblock })
}

/// What [`open`] does with what the tier file at `path` holds (`found`) for a tier of
/// `geometry`: the blocks it keeps for recovery (`Previous`), what the user should know, and
/// whether the file is emptied first; or why the file is refused.
fn keep(
    path: &Path,
    file: &File,
    found: Found,
    geometry: Geometry,
    (overwrite, recover): (bool, Recover),
) -> Result<(Previous, Option<String>, bool), EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    let bytes = geometry.file_bytes();
    let mut note = None;
    let mut previous = Previous::Nothing;
    let mut empty_it = false;
    match found {
        Found::Empty => {}
        Found::Tier(_) if recover == Recover::Wipe => empty_it = true,
        Found::Tier(found) if found.geometry != geometry => {
            return Err(EngineError::Mismatch {
                path: path.to_path_buf(),
                found: found.geometry.to_string(),
                wanted: geometry.to_string(),
            })
        }
        Found::Tier(found) => {
            let len = file.metadata().map_err(|e| io("cannot stat the tier file", e))?.len();
            let short = len < bytes;
            if short && recover == Recover::Strict {
                return Err(EngineError::Damaged {
                    path: path.to_path_buf(),
                    what: format!("the tier file is {len} bytes long, short of its {bytes}"),
                });
            }
            previous = Previous::Tier {
                backing: found.backing,
                state: found.state,
                short,
                headers_crc: found.headers_crc,
            };
        }
        Found::Older { version } => {
            note = Some(format!(
                "{}: a tier file of format version {version}, from an older build, whose blocks \
                 were never recoverable; it is emptied and rewritten in version {FORMAT_VERSION}",
                path.display()
            ));
            empty_it = true;
        }
        Found::Relaid { version, clean } if clean || overwrite => {
            note =
                Some(format!(
                "{}: a mapped tier file of format version {version}, whose layout this build does \
                 not read; {}, so it is emptied and rewritten in version {FORMAT_VERSION}",
                path.display(),
                if clean { "it stopped cleanly (the backing device has every block)" } else {
                    "overwritten on purpose"
                }
            ));
            empty_it = true;
        }
        Found::Relaid { version, .. } => {
            let reason = format!(
                "{} is a mapped tier file of format version {version} that did not stop \
                 cleanly: it may hold dirty blocks, in a layout this build does not read. Stop \
                 it cleanly with the build that wrote it, or discard its blocks on purpose \
                 (--force, CacheBuilder::overwrite_foreign_files)",
                path.display()
            );
            return Err(EngineError::config("tier path", reason));
        }
        Found::Newer { version } => {
            let reason = format!(
                "{} is a tier file of format version {version}, from a newer build; this \
                 build reads version {FORMAT_VERSION} and older only",
                path.display()
            );
            return Err(EngineError::config("tier path", reason));
        }
        Found::Foreign if overwrite => empty_it = true,
        Found::Foreign => {
            let reason = format!(
                "{} exists and is not a tiercache tier file (it has no tier header): refusing to \
                 overwrite it; name a new path, or overwrite it on purpose (--force, \
                 CacheBuilder::overwrite_foreign_files)",
                path.display()
            );
            return Err(EngineError::config("tier path", reason));
        }
    }
    Ok((previous, note, empty_it))
}

/// Writes `superblock` to the tier file and syncs it: a clean state only once everything it
/// vouches for is durable, an open one before the first block of a run is written.
pub fn write_superblock(
    file: &File,
    path: &Path,
    superblock: &Superblock,
) -> Result<(), EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    file.write_all_at(&superblock.encode(), 0)
        .map_err(|e| io("cannot write the tier header", e))?;
    file.sync_data().map_err(|e| io("cannot sync the tier header", e))
}

/// Bytes of one slot's record (see `DirectSlots` in `crate::tier::flash`).
pub const RECORD_BYTES: usize = 32;
/// Pages of records `slots` slots take: a shard's records lie on pages of their own.
pub fn record_pages(slots: u64) -> u64 {
    (slots * RECORD_BYTES as u64).div_ceil(crate::aligned::DIRECT_ALIGN as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tiercache-tierfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        path
    }

    const GEOMETRY: Geometry =
        Geometry { slot_bytes: 4096, slots: 4, block_size: 4096, shards: 1, chunks: 1, kind: 3 };

    fn open_quiet(path: &Path, geometry: Geometry) -> Result<Opened, EngineError> {
        open(path, geometry, false, Recover::Quiet)
    }

    #[test]
    fn a_new_file_is_private_headed_and_reopened_as_a_tier() {
        let path = scratch("new.tier");
        let opened = open_quiet(&path, GEOMETRY).unwrap();
        assert_eq!((opened.note, opened.previous), (None, Previous::Nothing));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A flash tier: a page of slot records between the superblock and the blocks.
        assert_eq!(opened.file.metadata().unwrap().len(), HEADER_BYTES + 4096 + 4 * 4096);
        drop(opened.file);
        let again = open_quiet(&path, GEOMETRY).unwrap();
        let expected =
            Previous::Tier { backing: None, state: State::Open, short: false, headers_crc: None };
        assert_eq!(again.previous, expected);
    }

    #[test]
    fn another_geometry_is_refused_naming_both_unless_wiped() {
        let path = scratch("geometry.tier");
        drop(open_quiet(&path, GEOMETRY).unwrap());
        let other = Geometry { block_size: 8192, slot_bytes: 8192, ..GEOMETRY };
        for recover in [Recover::Quiet, Recover::Strict] {
            let e = open(&path, other, false, recover).err().unwrap().to_string();
            assert!(
                e.contains("geometry.tier") && e.contains("4096-byte") && e.contains("8192-byte"),
                "{e}"
            );
        }
        let wiped = open(&path, other, false, Recover::Wipe).unwrap();
        assert_eq!(wiped.previous, Previous::Nothing);
    }

    #[test]
    fn a_short_file_is_recovered_quietly_and_refused_strictly() {
        let path = scratch("short.tier");
        drop(open_quiet(&path, GEOMETRY).unwrap());
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(HEADER_BYTES + 4096).unwrap();
        drop(file);
        let e = open(&path, GEOMETRY, false, Recover::Strict).err().unwrap().to_string();
        assert!(e.contains("short.tier") && e.contains("short of"), "{e}");
        let opened = open_quiet(&path, GEOMETRY).unwrap();
        assert!(matches!(opened.previous, Previous::Tier { short: true, .. }));
        assert_eq!(opened.file.metadata().unwrap().len(), GEOMETRY.file_bytes());
    }

    /// A mapped tier file of version 4 kept each block's header in its slot: one that stopped
    /// cleanly is emptied with a note (the backing device has every block); one that may
    /// hold dirty blocks is refused, and left as it was, unless overwritten on purpose.
    #[test]
    fn a_mapped_tier_of_the_old_layout_is_emptied_only_when_nothing_in_it_is_dirty() {
        let mapped = Geometry { slot_bytes: 4128, kind: 1, ..GEOMETRY };
        let old = |state: State| {
            let mut bytes =
                Superblock { geometry: mapped, backing: None, state, headers_crc: None }.encode();
            bytes[16..20].copy_from_slice(&4u32.to_le_bytes());
            let crc = crate::tier::block::crc32c(&bytes[..72]);
            bytes[72..76].copy_from_slice(&crc.to_le_bytes());
            let mut file = bytes.to_vec();
            file.resize(HEADER_BYTES as usize + 4 * 4128, 7);
            file
        };
        let now = Geometry { slot_bytes: 4096, kind: 1, ..GEOMETRY };
        let path = scratch("relaid.tier");
        for state in [State::Open, State::Synced] {
            std::fs::write(&path, old(state)).unwrap();
            let e = open_quiet(&path, now).err().unwrap().to_string();
            assert!(e.contains("relaid.tier") && e.contains("version 4"), "{e}");
            assert!(e.contains("dirty") && e.contains("--force"), "{e}");
            assert_eq!(std::fs::read(&path).unwrap(), old(state), "a refused file is untouched");
            let taken = open(&path, now, true, Recover::Quiet).unwrap();
            assert_eq!(taken.previous, Previous::Nothing);
            assert!(taken.note.unwrap().contains("on purpose"));
        }
        std::fs::write(&path, old(State::Clean)).unwrap();
        let taken = open_quiet(&path, now).unwrap();
        assert_eq!(taken.previous, Previous::Nothing);
        let note = taken.note.unwrap();
        assert!(note.contains("relaid.tier") && note.contains("stopped cleanly"), "{note}");
        drop(taken.file);
        // Emptied: no byte of the old slots is left.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, now.file_bytes());
        assert!(bytes[HEADER_BYTES as usize..].iter().all(|&b| b == 0));
    }

    #[test]
    fn the_superblock_round_trips_and_checks_its_checksum() {
        let superblock = Superblock {
            geometry: GEOMETRY,
            backing: Some(Backing { device: 7, inode: 99 }),
            state: State::Clean,
            headers_crc: Some(0xDEAD_BEEF),
        };
        let mut bytes = superblock.encode();
        assert_eq!(Superblock::decode(&bytes), Some(superblock));
        bytes[60] ^= 4;
        assert_eq!(Superblock::decode(&bytes), None);
    }

    #[test]
    fn a_foreign_file_is_never_written() {
        let path = scratch("precious.db");
        let precious: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &precious).unwrap();
        let e = open_quiet(&path, GEOMETRY).err().unwrap().to_string();
        assert!(e.contains("precious.db") && e.contains("not a tiercache tier file"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), precious);
        // A file that merely starts like ours, but whose header checksum fails, is foreign too.
        let superblock =
            Superblock { geometry: GEOMETRY, backing: None, state: State::Open, headers_crc: None };
        let mut forged = superblock.encode().to_vec();
        forged[20] ^= 1;
        std::fs::write(&path, &forged).unwrap();
        assert!(open_quiet(&path, GEOMETRY).is_err());
        // On purpose, it is taken.
        open(&path, GEOMETRY, true, Recover::Quiet).unwrap();
    }

    #[test]
    fn a_file_in_use_is_refused() {
        let path = scratch("busy.tier");
        let held = open_quiet(&path, GEOMETRY).unwrap();
        let e = open_quiet(&path, GEOMETRY).err().unwrap().to_string();
        assert!(e.contains("busy.tier") && e.contains("in use"), "{e}");
        drop(held);
        open_quiet(&path, GEOMETRY).unwrap();
    }

    /// A version-1 or -2 header: 40 bytes, checksummed at 32.
    fn header_of_version(version: u32) -> Vec<u8> {
        let mut header = vec![0u8; 4096 + 100];
        header[..16].copy_from_slice(&MAGIC);
        header[16..20].copy_from_slice(&version.to_le_bytes());
        header[4096..].fill(0xAB);
        let crc = crate::tier::block::crc32c(&header[..32]);
        header[32..36].copy_from_slice(&crc.to_le_bytes());
        header
    }

    #[test]
    fn an_older_format_is_emptied_and_a_newer_one_refused() {
        let path = scratch("versions.tier");
        std::fs::write(&path, header_of_version(2)).unwrap();
        let opened = open_quiet(&path, GEOMETRY).unwrap();
        let note = opened.note.expect("the user is told");
        assert!(note.contains("versions.tier") && note.contains("version 2"), "{note}");
        assert_eq!(opened.previous, Previous::Nothing);
        drop(opened.file);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes[4096..].iter().all(|b| *b == 0), "the old slots are gone");
        let newer =
            Superblock { geometry: GEOMETRY, backing: None, state: State::Open, headers_crc: None };
        let mut newer = newer.encode();
        newer[16..20].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let crc = crate::tier::block::crc32c(&newer[..72]);
        newer[72..76].copy_from_slice(&crc.to_le_bytes());
        std::fs::write(&path, newer).unwrap();
        let e = open_quiet(&path, GEOMETRY).err().unwrap().to_string();
        assert!(e.contains("newer build"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), newer);
    }
}
