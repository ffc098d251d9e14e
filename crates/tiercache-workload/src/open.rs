//! Opens a trace file, decompressing by extension: `.zst`, `.gz`, `.xz`, `.bz2`.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::TraceError;

const BUFFER_BYTES: usize = 1 << 20;

/// Compression of a file, from its extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd,
    Gzip,
    Xz,
    Bzip2,
}

impl Compression {
    pub fn of(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("zst") | Some("zstd") => Compression::Zstd,
            Some("gz") | Some("gzip") => Compression::Gzip,
            Some("xz") => Compression::Xz,
            Some("bz2") => Compression::Bzip2,
            _ => Compression::None,
        }
    }
}

/// The file name without its compression extension (`a.lis.zst` gives `a.lis`).
pub fn inner_name(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
    match Compression::of(path) {
        Compression::None => name,
        _ => name.rsplit_once('.').map(|(stem, _)| stem.to_string()).unwrap_or(name),
    }
}

/// The length of an uncompressed regular file, which a binary reader checks against its record
/// size; `None` for a compressed file or anything else (a pipe, a device).
pub fn plain_file_bytes(path: &Path) -> Option<u64> {
    let metadata = std::fs::metadata(path).ok()?;
    (Compression::of(path) == Compression::None && metadata.is_file()).then_some(metadata.len())
}

/// Opens `path` for buffered reading of its decompressed bytes.
pub fn open(path: &Path) -> Result<Box<dyn BufRead + Send>, TraceError> {
    let open_err = |source| TraceError::Open { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(open_err)?;
    if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a directory");
        return Err(open_err(source));
    }
    let raw: Box<dyn Read + Send> = match Compression::of(path) {
        Compression::None => Box::new(file),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(file).map_err(open_err)?),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(file)),
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(file)),
    };
    Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, raw)))
}
