//! Helpers shared by the workload tests: scratch files, the repository's test data, and reading
//! a whole trace or its error.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tiercache_core::Request;
use tiercache_workload::{TraceFormat, TraceOptions, TraceReader};

/// A trace of the repository's test data (`data/`, with its provenance in `data/README.md`).
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(name)
}

pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tiercache-readers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

pub fn read_all(path: &Path, format: Option<TraceFormat>) -> Result<Vec<Request>, String> {
    let options = TraceOptions { format, ..TraceOptions::default() };
    let reader = TraceReader::open(path, &options).map_err(|e| e.to_string())?;
    reader.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

pub fn write_text(name: &str, text: &str) -> PathBuf {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn error_of(name: &str, text: &[u8]) -> String {
    let path = scratch(name);
    std::fs::write(&path, text).unwrap();
    read_all(&path, None).unwrap_err()
}

/// vscsi version 1 records of `(cmd, lbn, len, ts)`.
pub fn vscsi_v1(records: &[(u16, u64, u32, u64)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, &(cmd, lbn, len, ts)) in records.iter().enumerate() {
        bytes.extend_from_slice(&(i as u32).to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&cmd.to_le_bytes());
        bytes.extend_from_slice(&0x0100u16.to_le_bytes());
        bytes.extend_from_slice(&lbn.to_le_bytes());
        bytes.extend_from_slice(&ts.to_le_bytes());
    }
    bytes
}

/// vscsi version 2 records of `(cmd, lbn, len, ts)`.
pub fn vscsi_v2(records: &[(u16, u64, u32, u64)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (i, &(cmd, lbn, len, ts)) in records.iter().enumerate() {
        bytes.extend_from_slice(&cmd.to_le_bytes());
        bytes.extend_from_slice(&0x0200u16.to_le_bytes());
        bytes.extend_from_slice(&(i as u32).to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&lbn.to_le_bytes());
        bytes.extend_from_slice(&ts.to_le_bytes());
        bytes.extend_from_slice(&42u64.to_le_bytes());
    }
    bytes
}
