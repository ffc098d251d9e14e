//! VMware vscsi traces (as distributed with CloudPhysics' traces and read by libCacheSim),
//! little-endian binary records with no header:
//!
//! - version 1, 32 bytes: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`;
//! - version 2, 40 bytes: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`.
//!
//! `ver >> 8` is the version; `lbn` counts 512-byte sectors; `len` is bytes; `ts` is
//! microseconds; `cmd` is the SCSI opcode (READ and WRITE of every length are accepted).
//! The version is taken from the first record.

use std::io::Read;
use std::path::Path;

use tiercache_core::{scsi_op, Request};

use super::oracle::Records;
use crate::error::{Position, TraceError};
use crate::open::plain_file_bytes;

pub const SECTOR_BYTES: u32 = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

pub struct VscsiReader {
    records: Records,
    position: Position,
    version: Option<Version>,
}

impl VscsiReader {
    pub fn new(reader: Box<dyn Read + Send>, path: &Path) -> VscsiReader {
        VscsiReader {
            records: Records::new(reader),
            position: Position::new(path, "record"),
            version: None,
        }
    }

    fn detect(&mut self) -> Result<Version, TraceError> {
        let head = self.records.peek(16, &self.position)?;
        let (version, record_bytes) =
            if head.len() >= 16 && u16::from_le_bytes([head[14], head[15]]) >> 8 == 1 {
                (Version::V1, 32)
            } else if head.len() >= 4 && u16::from_le_bytes([head[2], head[3]]) >> 8 == 2 {
                (Version::V2, 40)
            } else {
                // Not a record to skip: without a version, no record of the file can be read.
                let reason = "the first record is neither vscsi version 1 nor 2".to_string();
                return Err(TraceError::WrongFormat { path: self.position.path.clone(), reason });
            };
        match plain_file_bytes(&self.position.path) {
            Some(bytes) if bytes % record_bytes != 0 => Err(TraceError::WrongFormat {
                path: self.position.path.clone(),
                reason: format!(
                    "{bytes} bytes is not a whole number of {record_bytes}-byte vscsi records \
                     ({} bytes over)",
                    bytes % record_bytes
                ),
            }),
            _ => Ok(version),
        }
    }

    fn decode(&self, r: &[u8]) -> Result<Request, TraceError> {
        let u16_at = |o: usize| u16::from_le_bytes([r[o], r[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes(r[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(r[o..o + 8].try_into().unwrap());
        let (cmd, len, lbn, ts) = match self.version {
            Some(Version::V1) => (u16_at(12), u32_at(4), u64_at(16), u64_at(24)),
            _ => (u16_at(0), u32_at(8), u64_at(16), u64_at(24)),
        };
        let op = scsi_op(cmd).ok_or_else(|| {
            self.position.malformed("cmd", format!("0x{cmd:02x} is not a SCSI read or write"))
        })?;
        Ok(Request::new(ts, lbn, len, op))
    }
}

impl Iterator for VscsiReader {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.position.index += 1;
        if self.version.is_none() {
            match self.records.peek(1, &self.position) {
                Ok([]) => return None,
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
            match self.detect() {
                Ok(v) => self.version = Some(v),
                Err(e) => return Some(Err(e)),
            }
        }
        let mut record = [0u8; 40];
        let read = match self.version {
            Some(Version::V1) => self
                .records
                .next::<32>(&self.position)
                .map(|r| r.map(|r| record[..32].copy_from_slice(r))),
            _ => self.records.next::<40>(&self.position).map(|r| r.map(|r| record = *r)),
        };
        match read {
            Ok(None) => None,
            Ok(Some(())) => Some(self.decode(&record)),
            Err(e) => Some(Err(e)),
        }
    }
}
