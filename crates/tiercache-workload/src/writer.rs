//! Trace writers: libCacheSim's oracleGeneral (next access computed) and tiercache's CSV
//! (`time_us,key,size,op` with a header, which the readers recognise). Output is compressed
//! when the file name ends in `.zst` or `.gz`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tiercache_core::{annotate_next_access, Request, NEVER};

use crate::error::TraceError;
use crate::open::Compression;

/// Header line of tiercache's CSV traces.
pub const CSV_HEADER: &str = "time_us,key,size,op";

enum Encoder {
    Plain(BufWriter<File>),
    Zstd(zstd::stream::write::Encoder<'static, BufWriter<File>>),
    Gzip(flate2::write::GzEncoder<BufWriter<File>>),
}

/// A file being written, possibly compressed; `finish` must be called.
pub struct Output {
    encoder: Encoder,
    path: PathBuf,
}

impl Output {
    pub fn create(path: &Path) -> Result<Output, TraceError> {
        let err = |source| TraceError::Write { path: path.to_path_buf(), source };
        let file = BufWriter::with_capacity(1 << 20, File::create(path).map_err(err)?);
        let encoder = match Compression::of(path) {
            Compression::None => Encoder::Plain(file),
            Compression::Zstd => {
                Encoder::Zstd(zstd::stream::write::Encoder::new(file, 3).map_err(err)?)
            }
            Compression::Gzip => {
                Encoder::Gzip(flate2::write::GzEncoder::new(file, flate2::Compression::default()))
            }
            other => {
                let reason =
                    format!("writing {other:?} is not supported; use .zst, .gz or no compression");
                return Err(err(std::io::Error::new(std::io::ErrorKind::Unsupported, reason)));
            }
        };
        Ok(Output { encoder, path: path.to_path_buf() })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.encoder {
            Encoder::Plain(w) => w,
            Encoder::Zstd(w) => w,
            Encoder::Gzip(w) => w,
        }
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let path = self.path.clone();
        self.writer().write_all(bytes).map_err(|source| TraceError::Write { path, source })
    }

    pub fn finish(self) -> Result<(), TraceError> {
        let err = |source| TraceError::Write { path: self.path.clone(), source };
        let mut file = match self.encoder {
            Encoder::Plain(w) => w,
            Encoder::Zstd(w) => w.finish().map_err(err)?,
            Encoder::Gzip(w) => w.finish().map_err(err)?,
        };
        file.flush().map_err(err)?;
        file.get_ref().sync_all().map_err(err)
    }
}

/// Writes requests as oracleGeneral records. Computes each `next_access` first, so it holds the
/// requests in memory.
pub fn write_oracle_general(path: &Path, requests: &mut [Request]) -> Result<(), TraceError> {
    annotate_next_access(requests);
    let mut out = Output::create(path)?;
    for req in requests.iter() {
        let mut record = [0u8; 24];
        record[0..4].copy_from_slice(&((req.time_us / 1_000_000) as u32).to_le_bytes());
        record[4..12].copy_from_slice(&req.key.to_le_bytes());
        record[12..16].copy_from_slice(&req.size.to_le_bytes());
        let next: i64 = if req.next_access == NEVER { -1 } else { req.next_access as i64 + 1 };
        record[16..24].copy_from_slice(&next.to_le_bytes());
        out.write_all(&record)?;
    }
    out.finish()
}

/// Writes requests as tiercache CSV, streaming.
pub struct CsvWriter {
    out: Output,
    line: String,
}

impl CsvWriter {
    pub fn create(path: &Path) -> Result<CsvWriter, TraceError> {
        let mut out = Output::create(path)?;
        out.write_all(format!("{CSV_HEADER}\n").as_bytes())?;
        Ok(CsvWriter { out, line: String::with_capacity(64) })
    }

    pub fn write(&mut self, req: &Request) -> Result<(), TraceError> {
        use std::fmt::Write as _;
        self.line.clear();
        let _ = writeln!(self.line, "{},{},{},{}", req.time_us, req.key, req.size, req.op.as_str());
        self.out.write_all(self.line.as_bytes())
    }

    pub fn finish(self) -> Result<(), TraceError> {
        self.out.finish()
    }
}
