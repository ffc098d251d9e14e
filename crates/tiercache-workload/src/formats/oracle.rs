//! libCacheSim's oracleGeneral binary format: no header, packed little-endian 24-byte records
//! `u32 clock_time (s), u64 obj_id, u32 obj_size, i64 next_access_vtime`, where the last field is
//! the 1-based position of the next request for the same object, or -1 when there is none.
//!
//! The format has no magic, so what a reader can check, it does, to refuse a file of another
//! format: a plain file is a whole number of records, and every `next_access_vtime` is -1 or
//! points past its own record and below [`NEXT_ACCESS_MAX`] (text read as records gives values
//! near 2^61). A prefix of a trace stays a trace: its last requests may point past its end.

use std::io::Read;
use std::path::Path;

use tiercache_core::{Op, Request, NEVER};

use crate::error::{Position, TraceError};
use crate::open::plain_file_bytes;
use crate::source::RequestSource;

pub const RECORD_BYTES: usize = 24;

/// The largest `next_access_vtime` believed: no trace has a trillion requests.
pub const NEXT_ACCESS_MAX: u64 = 1 << 40;

/// Fixed-size binary records read from a large buffer, so a record costs a copy and not a call
/// into the decompressor or the file. A partial record at the end of the file is an error that
/// says how much of it there was. Every record, good or bad, is consumed once read: a reader
/// that skips bad records always moves on.
pub struct Records {
    reader: Box<dyn Read + Send>,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
}

const CHUNK_BYTES: usize = 1 << 16;

impl Records {
    pub fn new(reader: Box<dyn Read + Send>) -> Records {
        Records { reader, buffer: vec![0; CHUNK_BYTES], start: 0, end: 0 }
    }

    /// The first `n` buffered bytes, reading more if fewer are buffered (empty at end of file).
    pub fn peek(&mut self, n: usize, at: &Position) -> Result<&[u8], TraceError> {
        if self.end - self.start < n {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            while self.end < n {
                match self.reader.read(&mut self.buffer[self.end..]) {
                    Ok(0) => break,
                    Ok(read) => self.end += read,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(at.io(e)),
                }
            }
        }
        Ok(&self.buffer[self.start..self.end.min(self.start + n)])
    }

    /// The next record of `N` bytes, borrowed from the buffer; `None` at a clean end of file.
    #[inline]
    pub fn next<const N: usize>(&mut self, at: &Position) -> Result<Option<&[u8; N]>, TraceError> {
        if self.end - self.start < N {
            let available = self.peek(N, at)?.len();
            if available == 0 {
                return Ok(None);
            }
            if available < N {
                // Consumed, so that a reader skipping bad records moves on to the end.
                self.start = self.end;
                return Err(at.malformed("record", format!("truncated: {available} of {N} bytes")));
            }
        }
        let record: &[u8; N] = self.buffer[self.start..self.start + N].try_into().expect("N bytes");
        self.start += N;
        Ok(Some(record))
    }
}

pub struct OracleReader {
    records: Records,
    position: Position,
}

impl OracleReader {
    pub fn new(reader: Box<dyn Read + Send>, path: &Path) -> Result<OracleReader, TraceError> {
        if let Some(bytes) = plain_file_bytes(path).filter(|b| b % RECORD_BYTES as u64 != 0) {
            return Err(TraceError::WrongFormat {
                path: path.to_path_buf(),
                reason: format!(
                    "{bytes} bytes is not a whole number of {RECORD_BYTES}-byte oracleGeneral \
                     records ({} bytes over)",
                    bytes % RECORD_BYTES as u64
                ),
            });
        }
        Ok(OracleReader { records: Records::new(reader), position: Position::new(path, "record") })
    }

    #[inline]
    fn decode(&self, record: &[u8; RECORD_BYTES]) -> Result<Request, TraceError> {
        let time_s = u32::from_le_bytes(record[0..4].try_into().unwrap());
        let key = u64::from_le_bytes(record[4..12].try_into().unwrap());
        let size = u32::from_le_bytes(record[12..16].try_into().unwrap());
        let next_vtime = i64::from_le_bytes(record[16..24].try_into().unwrap());
        let here = self.position.index;
        let next_access = match next_vtime {
            -1 => NEVER,
            v if v >= 1 && v as u64 > here && v as u64 <= NEXT_ACCESS_MAX => v as u64 - 1,
            v => {
                let reason = format!(
                    "{v} is neither -1 nor the 1-based position of a later request (this is \
                     record {here}, and no trace has 2^40 requests)"
                );
                return Err(self.position.malformed("next_access_vtime", reason));
            }
        };
        let mut request = Request::new(time_s as u64 * 1_000_000, key, size, Op::Read);
        request.next_access = next_access;
        Ok(request)
    }
}

impl RequestSource for OracleReader {
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let mut added = 0;
        while added < max {
            self.position.index += 1;
            let request = match self.records.next::<RECORD_BYTES>(&self.position)? {
                Some(record) => {
                    let record = *record;
                    self.decode(&record)?
                }
                None => break,
            };
            out.push(request);
            added += 1;
        }
        Ok(added)
    }
}

impl Iterator for OracleReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.position.index += 1;
        let record: &[u8; RECORD_BYTES] = match self.records.next(&self.position) {
            Ok(Some(record)) => record,
            Ok(None) => return None,
            Err(e) => return Some(Err(e)),
        };
        let record = *record;
        Some(self.decode(&record))
    }
}
