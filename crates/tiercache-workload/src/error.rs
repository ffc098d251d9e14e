//! Trace errors. Each names the file and, for a bad record, its position and field.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    #[error("{}: cannot open trace: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("{}: read failed near {unit} {position}: {source}", path.display())]
    Io { path: PathBuf, unit: &'static str, position: u64, source: std::io::Error },
    #[error("{}: {unit} {position}: field '{field}': {reason}", path.display())]
    Malformed { path: PathBuf, unit: &'static str, position: u64, field: String, reason: String },
    #[error("{}: cannot tell the trace format from the name or the first line; \
             pass --format (msr, systor, tencent-cbs, alibaba-block, twitter, oracle-general, vscsi, \
             csv, txt, arc-lis)", path.display())]
    UnknownFormat { path: PathBuf },
    #[error("{}: a block view needs keys that are addresses, but {format} keys are object ids", path.display())]
    NoAddresses { path: PathBuf, format: &'static str },
    #[error("bad CSV column spec '{spec}': {reason}")]
    BadSpec { spec: String, reason: String },
    #[error("bad option: {0}")]
    BadOption(String),
    #[error("{}: the trace holds no requests{}", path.display(), skipped_note(*skipped))]
    Empty { path: PathBuf, skipped: u64 },
    #[error("{}: {reason}; is this the right --format?", path.display())]
    WrongFormat { path: PathBuf, reason: String },
    #[error("{}: cannot write trace: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

fn skipped_note(skipped: u64) -> String {
    match skipped {
        0 => String::new(),
        n => format!(" ({n} malformed records were skipped)"),
    }
}

impl TraceError {
    /// Whether `--skip-bad` may skip past this error (a bad record, not a broken file).
    pub fn is_skippable(&self) -> bool {
        matches!(self, TraceError::Malformed { .. })
    }
}

/// Where a record is, for error messages: the file and the line or record number.
#[derive(Clone, Debug)]
pub struct Position {
    pub path: PathBuf,
    pub unit: &'static str,
    pub index: u64,
}

impl Position {
    pub fn new(path: &std::path::Path, unit: &'static str) -> Position {
        Position { path: path.to_path_buf(), unit, index: 0 }
    }

    pub fn malformed(&self, field: &str, reason: impl Into<String>) -> TraceError {
        TraceError::Malformed {
            path: self.path.clone(),
            unit: self.unit,
            position: self.index,
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    pub fn io(&self, source: std::io::Error) -> TraceError {
        TraceError::Io { path: self.path.clone(), unit: self.unit, position: self.index, source }
    }
}
