//! Opening a trace: format detection, decompression, the optional block view, and skipping of
//! bad records when asked.

use std::path::{Path, PathBuf};

use tiercache_core::Request;

use crate::block::BlockView;
use crate::error::TraceError;
use crate::formats::csv::CsvReader;
use crate::formats::lis::{LisReader, LIS_BLOCK_BYTES};
use crate::formats::oracle::OracleReader;
use crate::formats::vscsi::{VscsiReader, SECTOR_BYTES};
use crate::formats::TraceFormat;
use crate::open::open;
pub use crate::source::{IterSource, RequestSource};

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
    /// Whether keys are volume keys (`tiercache_core::volume_key`): the trace has a volume
    /// column.
    pub volumes: bool,
}

type Source = Box<dyn RequestSource>;
type Stream = Box<dyn Iterator<Item = Result<Request, TraceError>> + Send>;

/// Requests per batch.
pub const BATCH_REQUESTS: usize = 4096;

/// A stream of requests from a trace file, in constant memory.
pub struct TraceReader {
    source: Source,
    info: TraceInfo,
    skip_bad: bool,
    skipped: u64,
    first_skipped: Option<String>,
    stopped: bool,
    /// Requests read ahead for the `Iterator` interface, consumed from `buffered_at`.
    buffered: Vec<Request>,
    buffered_at: usize,
    /// An error met after some good requests of a batch; reported after them.
    pending_error: Option<TraceError>,
    /// Requests handed out so far: a trace that ends before the first is an error.
    delivered: u64,
}

impl TraceReader {
    pub fn open(path: &Path, options: &TraceOptions) -> Result<TraceReader, TraceError> {
        let format = match &options.format {
            Some(f) => f.clone(),
            None => TraceFormat::detect(path)?,
        };
        let options = TraceOptions { format: Some(format), ..options.clone() };
        TraceReader::over(path, open(path)?, &options)
    }

    /// A reader of the (decompressed) bytes of `reader`, in `options.format`, which must be
    /// given; `path` names the trace in errors.
    pub fn over(
        path: &Path,
        reader: Box<dyn std::io::BufRead + Send>,
        options: &TraceOptions,
    ) -> Result<TraceReader, TraceError> {
        let format = options
            .format
            .clone()
            .ok_or_else(|| TraceError::UnknownFormat { path: path.to_path_buf() })?;
        let spec = format.csv_spec();
        let (has_time, address_unit, volumes) = match (&format, &spec) {
            (_, Some(spec)) => (spec.time.is_some(), spec.addr_unit, spec.volume.is_some()),
            (TraceFormat::Vscsi, None) => (true, Some(SECTOR_BYTES), false),
            (TraceFormat::ArcLis, None) => (false, Some(LIS_BLOCK_BYTES), false),
            // oracleGeneral: object ids, not addresses.
            (_, None) => (true, None, false),
        };
        let stream: Stream = match (&format, spec) {
            (_, Some(spec)) => Box::new(CsvReader::new(reader, path, spec)),
            // Decoded in batches, not one boxed iterator call a request: the format of large
            // converted and generated traces.
            (TraceFormat::OracleGeneral, None) if options.block_size.is_none() => {
                return Ok(TraceReader::new(
                    Box::new(OracleReader::new(reader, path)?),
                    path,
                    &format,
                    has_time,
                    options,
                ))
            }
            (TraceFormat::OracleGeneral, None) => Box::new(OracleReader::new(reader, path)?),
            (TraceFormat::Vscsi, None) => Box::new(VscsiReader::new(reader, path)),
            // Every other format has a column spec.
            (_, None) => Box::new(LisReader::new(reader, path)),
        };
        let source: Source = match options.block_size {
            None => Box::new(IterSource(stream)),
            Some(block) => {
                let unit = address_unit.ok_or(TraceError::NoAddresses {
                    path: path.to_path_buf(),
                    format: format.name(),
                })?;
                Box::new(IterSource(BlockView::new(stream, block, unit, volumes, path)?))
            }
        };
        let mut trace = TraceReader::new(source, path, &format, has_time, options);
        trace.info.address_unit = address_unit;
        trace.info.volumes = volumes;
        Ok(trace)
    }

    fn new(
        source: Source,
        path: &Path,
        format: &TraceFormat,
        has_time: bool,
        options: &TraceOptions,
    ) -> TraceReader {
        let info = TraceInfo {
            path: path.to_path_buf(),
            format: format.name(),
            has_time,
            address_unit: None,
            block_size: options.block_size,
            volumes: false,
        };
        TraceReader {
            source,
            info,
            skip_bad: options.skip_bad,
            skipped: 0,
            first_skipped: None,
            stopped: false,
            buffered: Vec::with_capacity(BATCH_REQUESTS),
            buffered_at: 0,
            pending_error: None,
            delivered: 0,
        }
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

    /// Replaces `out` with the next batch of requests; an empty batch means the end. With
    /// `skip_bad`, malformed records are counted and skipped; otherwise the first one is the
    /// error, reported after the good requests before it. A trace that ends without a single
    /// request is an error ([`TraceError::Empty`]).
    pub fn next_batch(&mut self, out: &mut Vec<Request>) -> Result<(), TraceError> {
        out.clear();
        if let Some(e) = self.pending_error.take() {
            return Err(e);
        }
        while !self.stopped && out.len() < BATCH_REQUESTS {
            let wanted = BATCH_REQUESTS - out.len();
            match self.source.fill(out, wanted) {
                Ok(0) => {
                    self.stopped = true;
                    if self.delivered == 0 && out.is_empty() {
                        let path = self.info.path.clone();
                        return Err(TraceError::Empty { path, skipped: self.skipped });
                    }
                }
                Ok(_) => {}
                Err(e) if self.skip_bad && e.is_skippable() => {
                    self.skipped += 1;
                    self.first_skipped.get_or_insert_with(|| e.to_string());
                }
                Err(e) => {
                    self.stopped = true;
                    if out.is_empty() {
                        return Err(e);
                    }
                    self.pending_error = Some(e);
                }
            }
        }
        self.delivered += out.len() as u64;
        Ok(())
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.buffered_at == self.buffered.len() {
            let mut batch = std::mem::take(&mut self.buffered);
            let result = self.next_batch(&mut batch);
            self.buffered = batch;
            self.buffered_at = 0;
            if let Err(e) = result {
                return Some(Err(e));
            }
            if self.buffered.is_empty() {
                return None;
            }
        }
        let req = self.buffered[self.buffered_at];
        self.buffered_at += 1;
        Some(Ok(req))
    }
}
