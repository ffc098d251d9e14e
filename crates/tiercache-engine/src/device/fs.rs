//! What the engine asks of a file's file system beyond plain reads and writes: writes gathered
//! from several buffers, holes punched into it, its space allocated ahead, and where its data
//! lies.

use std::fs::File;
use std::io;
use std::ops::Range;

/// The most buffers one `pwritev` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Writes `parts` end to end from `at` in `file`, gathered by the kernel (`pwritev`) rather
/// than copied into one buffer first; a short write goes on from where it stopped.
pub fn write_parts_at(file: &File, parts: &[&[u8]], at: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (mut part, mut into, mut at) = (0, 0, at);
    while part < parts.len() {
        let iov: Vec<libc::iovec> = std::iter::once(&parts[part][into..])
            .chain(parts[part + 1..].iter().copied())
            .take(IOV_MAX)
            .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() })
            .collect();
        let Ok(offset) = i64::try_from(at) else { return Err(io::ErrorKind::InvalidInput.into()) };
        // SAFETY: every iovec points into a live slice of `parts` of its length, which the
        // kernel only reads; the descriptor is the caller's.
        let written =
            unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as i32, offset) };
        let mut written = match written {
            n if n > 0 => n as usize,
            0 => return Err(io::ErrorKind::WriteZero.into()),
            _ => match io::Error::last_os_error() {
                e if e.kind() == io::ErrorKind::Interrupted => continue,
                e => return Err(e),
            },
        };
        at += written as u64;
        while written > 0 {
            let left = parts[part].len() - into;
            if written < left {
                into += written;
                break;
            }
            written -= left;
            (part, into) = (part + 1, 0);
        }
    }
    Ok(())
}

/// Punches a hole of `len` bytes from `at` into `file`, its length unchanged (`fallocate`).
pub fn punch_hole(file: &File, at: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on a descriptor the caller owns; no memory is involved.
    match unsafe { libc::fallocate(file.as_raw_fd(), mode, at as i64, len as i64) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Allocates `file`'s first `len` bytes on its file system (`fallocate`), so that a store
/// through a mapping of them never finds the file system full: that is a SIGBUS, where a write
/// call would get an error to handle. A file system that cannot allocate ahead (`EOPNOTSUPP`)
/// is left as it is.
pub fn allocate(file: &File, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(len) = i64::try_from(len) else { return Err(io::ErrorKind::InvalidInput.into()) };
    if len == 0 {
        return Ok(());
    }
    // SAFETY: fallocate on a descriptor the caller owns; no memory is involved.
    match unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) } {
        0 => Ok(()),
        _ => match io::Error::last_os_error() {
            e if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            e => Err(e),
        },
    }
}

/// `file`'s first range of data at or after `at` (`lseek` with `SEEK_DATA`, then `SEEK_HOLE`):
/// see [`Device::next_data`]. A file system that cannot tell (`EINVAL`) holds data everywhere.
pub fn next_data(file: &File, at: u64) -> io::Result<Option<Range<u64>>> {
    use std::os::fd::AsRawFd;
    let seek = |from: u64, whence| {
        let Ok(from) = i64::try_from(from) else { return Ok(None) };
        // SAFETY: lseek on a descriptor the caller owns, no memory involved. It moves the
        // file's position, which nothing here reads or writes by (every I/O is positioned).
        match unsafe { libc::lseek(file.as_raw_fd(), from, whence) } {
            at if at >= 0 => Ok(Some(at as u64)),
            _ => match io::Error::last_os_error() {
                e if e.raw_os_error() == Some(libc::ENXIO) => Ok(None), // At or past the end.
                e => Err(e),
            },
        }
    };
    let start = match seek(at, libc::SEEK_DATA) {
        Ok(Some(start)) => start,
        Ok(None) => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let len = file.metadata()?.len();
            return Ok((at < len).then_some(at..len));
        }
        Err(e) => return Err(e),
    };
    // Every file ends in a hole (its end), so SEEK_HOLE from data finds one.
    let end = seek(start, libc::SEEK_HOLE)?.unwrap_or(start);
    Ok((end > start).then_some(start..end))
}
