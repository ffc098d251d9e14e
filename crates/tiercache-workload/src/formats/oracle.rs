//! libCacheSim's oracleGeneral binary format: no header, packed little-endian 24-byte records
//! `u32 clock_time (s), u64 obj_id, u32 obj_size, i64 next_access_vtime`, where the last field is
//! the 1-based position of the next request for the same object, or -1 when there is none.

use std::io::BufRead;
use std::path::Path;

use tiercache_core::{Op, Request, NEVER};

use crate::error::{Position, TraceError};

pub const RECORD_BYTES: usize = 24;

/// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean end of file; a partial record is an
/// error naming how much of it there was.
pub fn read_record(
    reader: &mut dyn BufRead,
    buf: &mut [u8],
    at: &Position,
) -> Result<bool, TraceError> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => {
                let reason = format!("truncated: {filled} of {} bytes", buf.len());
                return Err(at.malformed("record", reason));
            }
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(at.io(e)),
        }
    }
    Ok(true)
}

pub struct OracleReader {
    reader: Box<dyn BufRead + Send>,
    position: Position,
}

impl OracleReader {
    pub fn new(reader: Box<dyn BufRead + Send>, path: &Path) -> OracleReader {
        OracleReader { reader, position: Position::new(path, "record") }
    }
}

impl Iterator for OracleReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let mut record = [0u8; RECORD_BYTES];
        self.position.index += 1;
        match read_record(&mut self.reader, &mut record, &self.position) {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => return Some(Err(e)),
        }
        let time_s = u32::from_le_bytes(record[0..4].try_into().unwrap());
        let key = u64::from_le_bytes(record[4..12].try_into().unwrap());
        let size = u32::from_le_bytes(record[12..16].try_into().unwrap());
        let next_vtime = i64::from_le_bytes(record[16..24].try_into().unwrap());
        let next_access = match next_vtime {
            -1 => NEVER,
            v if v >= 1 => v as u64 - 1,
            v => {
                let reason = format!("{v} is neither -1 nor a 1-based request position");
                return Some(Err(self.position.malformed("next_access_vtime", reason)));
            }
        };
        let mut request = Request::new(time_s as u64 * 1_000_000, key, size, Op::Read);
        request.next_access = next_access;
        Some(Ok(request))
    }
}
