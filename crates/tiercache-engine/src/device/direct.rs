//! A backing file or block device read and written with direct I/O (`O_DIRECT`): what
//! `CachedFile::open_direct` and `CacheBuilder::backing_file` put under a cache, so that the
//! page cache neither caches it beside the cache nor hides its speed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::aligned::{AlignedBuf, DIRECT_ALIGN};
use crate::device::{Device, FileDevice};
use crate::error::EngineError;

/// A backing file or block device read and written with direct I/O (`CachedFile::open_direct`),
/// so that the page cache neither caches it beside the cache nor hides its speed. A request
/// that is not 4 KiB-aligned in offset, length and buffer goes through an aligned buffer: a
/// read takes the whole pages and copies out its bytes; a write reads the pages at either end
/// first and writes them whole. Two writes into one 4 KiB page must not run at once (a
/// `CachedFile` over blocks of a multiple of 4 KiB never does that), and the file's length is a
/// multiple of 4 KiB, so a whole-page write never extends it.
pub struct DirectFile {
    /// The file opened with `O_DIRECT`: its aligned requests go straight through.
    inner: FileDevice,
}

impl DirectFile {
    /// Opens `path` for direct I/O; an error names the file if it cannot be, its file system
    /// refuses direct I/O, or its length is not a multiple of 4 KiB.
    pub fn open(path: &Path) -> Result<DirectFile, EngineError> {
        let io = |action, source| EngineError::Io { path: path.to_path_buf(), action, source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::EINVAL) => io("its file system refuses direct I/O (O_DIRECT)", e),
                _ => io("cannot open the backing file", e),
            })?;
        let len = device_len(&file).map_err(|e| io("cannot stat the backing file", e))?;
        if !len.is_multiple_of(DIRECT_ALIGN as u64) {
            return Err(EngineError::config(
                "direct",
                format!(
                    "{}: {len} bytes is not a whole number of 4 KiB pages, which direct I/O \
                     reads and writes",
                    path.display()
                ),
            ));
        }
        Ok(DirectFile { inner: FileDevice::new(file, path) })
    }

    /// The pages that hold `len` bytes from `at`: their first byte and their length.
    fn pages(at: u64, len: usize) -> (u64, usize) {
        let align = DIRECT_ALIGN as u64;
        let start = at / align * align;
        let end = (at + len as u64).div_ceil(align) * align;
        (start, (end - start) as usize)
    }

    fn aligned(at: u64, bytes: &[u8]) -> bool {
        at.is_multiple_of(DIRECT_ALIGN as u64)
            && bytes.len().is_multiple_of(DIRECT_ALIGN)
            && (bytes.as_ptr() as usize).is_multiple_of(DIRECT_ALIGN)
    }
}

/// The length of a file, or of a block device (whose metadata says 0).
fn device_len(file: &File) -> std::io::Result<u64> {
    use std::io::Seek;
    let len = file.metadata()?.len();
    if len > 0 {
        return Ok(len);
    }
    let mut handle = file;
    handle.seek(std::io::SeekFrom::End(0))
}

impl Device for DirectFile {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        if DirectFile::aligned(at, buf) {
            return self.inner.read_at(buf, at);
        }
        let (start, span) = DirectFile::pages(at, buf.len());
        let mut pages = AlignedBuf::new(span);
        let got = self.inner.read_at(pages.as_mut_slice(), start)?;
        let skip = (at - start) as usize;
        let n = got.saturating_sub(skip).min(buf.len());
        buf[..n].copy_from_slice(&pages.as_slice()[skip..skip + n]);
        Ok(n)
    }

    fn write_at(&self, data: &[u8], at: u64) -> std::io::Result<()> {
        if DirectFile::aligned(at, data) {
            return self.inner.write_at(data, at);
        }
        let (start, span) = DirectFile::pages(at, data.len());
        let mut pages = AlignedBuf::new(span);
        let skip = (at - start) as usize;
        let align = DIRECT_ALIGN;
        // The pages at either end keep their other bytes (past the end, zeros).
        if skip > 0 {
            self.inner.read_at(&mut pages.as_mut_slice()[..align], start)?;
        }
        if !(skip + data.len()).is_multiple_of(align) && (span > align || skip == 0) {
            let last = span - align;
            self.inner.read_at(&mut pages.as_mut_slice()[last..], start + last as u64)?;
        }
        pages.as_mut_slice()[skip..skip + data.len()].copy_from_slice(data);
        self.inner.write_at(pages.as_slice(), start)
    }

    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> std::io::Result<u64> {
        device_len(self.inner.file())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }

    fn next_data(&self, at: u64) -> std::io::Result<Option<std::ops::Range<u64>>> {
        crate::device::next_data(self.inner.file(), at)
    }

    fn discard(&self, at: u64, len: u64) -> std::io::Result<()> {
        crate::device::punch_hole(self.inner.file(), at, len).or_else(|e| match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::ENODEV) => {
                crate::device::write_zeros(self, at, len)
            }
            _ => Err(e),
        })
    }
}
