//! Opening a trace: format detection, decompression, the optional block view, and skipping of
//! bad records when asked.

use std::path::{Path, PathBuf};

use tiercache_core::Request;

use crate::block::BlockView;
use crate::error::TraceError;
use crate::formats::csv::{CsvReader, CsvSpec};
use crate::formats::lis::{LisReader, LIS_BLOCK_BYTES};
use crate::formats::oracle::OracleReader;
use crate::formats::vscsi::{VscsiReader, SECTOR_BYTES};
use crate::formats::TraceFormat;
use crate::open::open;

/// How to read a trace.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// `None` detects the format from the file.
    pub format: Option<TraceFormat>,
    /// Split requests into aligned blocks of this many bytes.
    pub block_size: Option<u32>,
    /// Skip malformed records (counted) instead of stopping at the first.
    pub skip_bad: bool,
}

/// What is known of a trace before reading it.
#[derive(Clone, Debug)]
pub struct TraceInfo {
    pub path: PathBuf,
    pub format: &'static str,
    /// Whether requests carry timestamps.
    pub has_time: bool,
    /// Bytes per key unit when keys are addresses (before any block view).
    pub address_unit: Option<u32>,
    pub block_size: Option<u32>,
}

type Source = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;

/// A stream of requests from a trace file, in constant memory.
pub struct TraceReader {
    source: Source,
    info: TraceInfo,
    skip_bad: bool,
    skipped: u64,
    first_skipped: Option<String>,
    stopped: bool,
}

impl TraceReader {
    pub fn open(path: &Path, options: &TraceOptions) -> Result<TraceReader, TraceError> {
        let format = match &options.format {
            Some(f) => f.clone(),
            None => TraceFormat::detect(path)?,
        };
        let reader = open(path)?;
        let (source, has_time, address_unit): (Source, bool, Option<u32>) = match &format {
            TraceFormat::Msr => csv(reader, path, CsvSpec::msr()),
            TraceFormat::Systor => csv(reader, path, CsvSpec::systor()),
            TraceFormat::Txt => csv(reader, path, CsvSpec::txt()),
            TraceFormat::Csv(spec) => csv(reader, path, spec.clone()),
            TraceFormat::OracleGeneral => (Box::new(OracleReader::new(reader, path)), true, None),
            TraceFormat::Vscsi => {
                (Box::new(VscsiReader::new(reader, path)), true, Some(SECTOR_BYTES))
            }
            TraceFormat::ArcLis => {
                (Box::new(LisReader::new(reader, path)), false, Some(LIS_BLOCK_BYTES))
            }
        };
        let source = match options.block_size {
            None => source,
            Some(block) => {
                let unit = address_unit.ok_or(TraceError::NoAddresses {
                    path: path.to_path_buf(),
                    format: format.name(),
                })?;
                Box::new(BlockView::new(source, block, unit)?) as Source
            }
        };
        let info = TraceInfo {
            path: path.to_path_buf(),
            format: format.name(),
            has_time,
            address_unit,
            block_size: options.block_size,
        };
        Ok(TraceReader {
            source,
            info,
            skip_bad: options.skip_bad,
            skipped: 0,
            first_skipped: None,
            stopped: false,
        })
    }

    pub fn info(&self) -> &TraceInfo {
        &self.info
    }

    /// Malformed records skipped so far (only with `skip_bad`).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The first skipped record's error, to show the user what was skipped.
    pub fn first_skipped(&self) -> Option<&str> {
        self.first_skipped.as_deref()
    }
}

fn csv(
    reader: Box<dyn std::io::BufRead + Send>,
    path: &Path,
    spec: CsvSpec,
) -> (Source, bool, Option<u32>) {
    let (has_time, unit) = (spec.time.is_some(), spec.addr_unit);
    (Box::new(CsvReader::new(reader, path, spec)), has_time, unit)
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        loop {
            match self.source.next()? {
                Ok(req) => return Some(Ok(req)),
                Err(e) if self.skip_bad && e.is_skippable() => {
                    self.skipped += 1;
                    self.first_skipped.get_or_insert_with(|| e.to_string());
                }
                Err(e) => {
                    self.stopped = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
