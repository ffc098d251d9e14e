//! Tier files have an identity: the first [`HEADER_BYTES`] of a mapped, file or flash tier hold
//! a header (magic, format version, geometry, a checksum), and the tier's slots start after it.
//! A file is only ever written by the cache that made it:
//!
//! - a path that does not exist is created, readable and writable by its owner only (0600);
//! - an existing file is taken only if it is empty or starts with our header; anything else
//!   (a database, a disk image, a device with data on it) is refused with an error naming the
//!   path, unless the builder is told to overwrite it on purpose;
//! - the file is locked (`flock`, exclusive) while the cache has it open, so a second process
//!   given the same tier file is refused with an "in use" error instead of both corrupting each
//!   other's blocks.
//!
//! The durable-tiers work builds the on-media format (superblock, block headers, recovery) on
//! this header; today a reopened tier starts empty.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::error::EngineError;

/// Bytes before a tier file's first slot: one direct-I/O-aligned page.
pub const HEADER_BYTES: u64 = 4096;

/// The first bytes of every tier file.
pub const MAGIC: [u8; 16] = *b"tiercache tier\0\0";

/// The layout version this build writes and reads. Version 2 stamps each block with a
/// sequence number and a dirty flag (`crate::block`); version 1 files are taken and rewritten
/// (a tier of version 1 was never recovered, so nothing in one is lost).
pub const FORMAT_VERSION: u32 = 2;

/// What a tier file's header records of its tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub slot_bytes: u32,
    pub slots: u64,
}

impl Geometry {
    fn encode(&self) -> [u8; 40] {
        let mut header = [0u8; 40];
        header[..16].copy_from_slice(&MAGIC);
        header[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        header[20..24].copy_from_slice(&self.slot_bytes.to_le_bytes());
        header[24..32].copy_from_slice(&self.slots.to_le_bytes());
        let crc = crate::block::crc32c(&header[..32]);
        header[32..36].copy_from_slice(&crc.to_le_bytes());
        header
    }
}

/// What the first bytes of an existing file say it is.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Empty,
    Tier { version: u32 },
    Foreign,
}

fn inspect(file: &mut File) -> std::io::Result<Found> {
    let mut head = [0u8; 40];
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
    if read < head.len() || head[..16] != MAGIC {
        return Ok(Found::Foreign);
    }
    let crc = u32::from_le_bytes(head[32..36].try_into().unwrap());
    if crc != crate::block::crc32c(&head[..32]) {
        return Ok(Found::Foreign);
    }
    Ok(Found::Tier { version: u32::from_le_bytes(head[16..20].try_into().unwrap()) })
}

/// Locks `file` for this process alone, or says who has it.
fn lock(file: &File, path: &Path) -> Result<(), EngineError> {
    // SAFETY: flock on a descriptor this function's caller owns; no memory is involved.
    let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if status == 0 {
        return Ok(());
    }
    let source = std::io::Error::last_os_error();
    let action = match source.raw_os_error() {
        Some(libc::EWOULDBLOCK) => "the tier file is in use by another cache (it is locked)",
        _ => "cannot lock the tier file",
    };
    Err(EngineError::Io { path: path.to_path_buf(), action, source })
}

/// Opens (or creates) the tier file at `path` for a tier of `geometry`, sized to hold the
/// header and every slot, locked, with a fresh header written. The returned handle holds the
/// lock for as long as it lives; slot I/O may go through other handles of the same file. Also
/// returns what the user should know (an older format's file rewritten).
pub fn open(
    path: &Path,
    geometry: Geometry,
    overwrite: bool,
) -> Result<(File, Option<String>), EngineError> {
    let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| io("cannot create the tier file", e))?,
        Err(e) => return Err(io("cannot open the tier file", e)),
    };
    lock(&file, path)?;
    let mut note = None;
    match inspect(&mut file).map_err(|e| io("cannot read the tier file's header", e))? {
        Found::Empty | Found::Tier { version: FORMAT_VERSION } => {}
        Found::Tier { version } if version < FORMAT_VERSION => {
            note = Some(format!(
                "{}: a tier file of format version {version}, from an older build; it is \
                 rewritten in version {FORMAT_VERSION}",
                path.display()
            ));
        }
        Found::Tier { version } => {
            let reason = format!(
                "{} is a tier file of format version {version}, from a newer build; this \
                 build reads version {FORMAT_VERSION} and older only",
                path.display()
            );
            return Err(EngineError::config("tier path", reason));
        }
        Found::Foreign if overwrite => {}
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
    let bytes = HEADER_BYTES + geometry.slots * geometry.slot_bytes as u64;
    file.set_len(bytes).map_err(|e| io("cannot size the tier file", e))?;
    file.write_all_at(&geometry.encode(), 0).map_err(|e| io("cannot write the tier header", e))?;
    Ok((file, note))
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

    const GEOMETRY: Geometry = Geometry { slot_bytes: 4096, slots: 4 };

    #[test]
    fn a_new_file_is_private_headed_and_reopened() {
        let path = scratch("new.tier");
        let (file, note) = open(&path, GEOMETRY, false).unwrap();
        assert_eq!(note, None);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(file.metadata().unwrap().len(), HEADER_BYTES + 4 * 4096);
        drop(file);
        open(&path, Geometry { slot_bytes: 4096, slots: 8 }, false).unwrap();
    }

    #[test]
    fn a_foreign_file_is_never_written() {
        let path = scratch("precious.db");
        let precious: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &precious).unwrap();
        let e = open(&path, GEOMETRY, false).unwrap_err().to_string();
        assert!(e.contains("precious.db") && e.contains("not a tiercache tier file"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), precious);
        // A file that merely starts like ours, but whose header checksum fails, is foreign too.
        let mut forged = GEOMETRY.encode().to_vec();
        forged[20] ^= 1;
        std::fs::write(&path, &forged).unwrap();
        assert!(open(&path, GEOMETRY, false).is_err());
        // On purpose, it is taken.
        open(&path, GEOMETRY, true).unwrap();
    }

    #[test]
    fn a_file_in_use_is_refused() {
        let path = scratch("busy.tier");
        let (held, _) = open(&path, GEOMETRY, false).unwrap();
        let e = open(&path, GEOMETRY, false).unwrap_err().to_string();
        assert!(e.contains("busy.tier") && e.contains("in use"), "{e}");
        drop(held);
        open(&path, GEOMETRY, false).unwrap();
    }

    /// A header of format `version`, checksummed.
    fn header_of_version(version: u32) -> Vec<u8> {
        let mut header = GEOMETRY.encode().to_vec();
        header[16..20].copy_from_slice(&version.to_le_bytes());
        let crc = crate::block::crc32c(&header[..32]);
        header[32..36].copy_from_slice(&crc.to_le_bytes());
        header
    }

    #[test]
    fn an_older_format_is_rewritten_and_a_newer_one_refused() {
        let path = scratch("versions.tier");
        std::fs::write(&path, header_of_version(1)).unwrap();
        let (file, note) = open(&path, GEOMETRY, false).unwrap();
        let note = note.expect("the user is told");
        assert!(note.contains("versions.tier") && note.contains("version 1"), "{note}");
        drop(file);
        assert_eq!(&std::fs::read(&path).unwrap()[..40], &GEOMETRY.encode()[..]);
        std::fs::write(&path, header_of_version(FORMAT_VERSION + 1)).unwrap();
        let e = open(&path, GEOMETRY, false).unwrap_err().to_string();
        assert!(e.contains("newer build"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), header_of_version(FORMAT_VERSION + 1));
    }
}
