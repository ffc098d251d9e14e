//! Entry points for the coverage-guided fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer), here
//! so that a regular test replays the committed corpus through the same code (`tests/
//! fuzz_corpus.rs`): what fuzzing found stays fixed. Each takes arbitrary bytes and must never
//! panic, abort or hang; errors are the expected outcome of most inputs.

use std::io::Read;
use std::path::Path;

use crate::formats::csv::CsvSpec;
use crate::{TraceFormat, TraceOptions, TraceReader};

/// Requests read at most, so that a block view of a huge request cannot make one input slow.
const REQUESTS_MAX: usize = 1 << 16;

/// The first byte picks the format (low four bits), `skip_bad` (bit 4), a 4 KiB block view
/// (bit 5) and zstd decompression of the rest (bit 6); the rest is the trace.
pub fn trace(data: &[u8]) {
    let Some((&selector, bytes)) = data.split_first() else { return };
    let spec = CsvSpec::parse("time=1,key=2,size=3,op=4,addr_unit=512,size_unit=512,volume=5")
        .expect("a valid spec");
    let formats = [
        TraceFormat::Msr,
        TraceFormat::Systor,
        TraceFormat::TencentCbs,
        TraceFormat::AlibabaBlock,
        TraceFormat::Twitter,
        TraceFormat::OracleGeneral,
        TraceFormat::Vscsi,
        TraceFormat::Csv(spec),
        TraceFormat::Txt,
        TraceFormat::ArcLis,
    ];
    let format = formats[(selector & 0x0f) as usize % formats.len()].clone();
    let options = TraceOptions {
        format: Some(format),
        skip_bad: selector & 0x10 != 0,
        block_size: (selector & 0x20 != 0).then_some(4096),
    };
    let bytes = std::io::Cursor::new(bytes.to_vec());
    let reader: Box<dyn std::io::BufRead + Send> = match selector & 0x40 != 0 {
        true => match zstd::stream::read::Decoder::new(bytes) {
            Ok(decoder) => Box::new(std::io::BufReader::new(decoder.take(1 << 24))),
            Err(_) => return,
        },
        false => Box::new(bytes),
    };
    if let Ok(reader) = TraceReader::over(Path::new("fuzz-input"), reader, &options) {
        for request in reader.take(REQUESTS_MAX) {
            if request.is_err() && !options.skip_bad {
                break;
            }
        }
    }
}

/// A `--csv-spec`, then (when it parses) the spec over one line made of the same bytes.
pub fn csv_spec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (spec, line) = text.split_once('\n').unwrap_or((text, "1,2,3,R,4,5,6"));
    let Ok(spec) = CsvSpec::parse(spec) else { return };
    let options = TraceOptions { format: Some(TraceFormat::Csv(spec)), ..Default::default() };
    let reader = Box::new(std::io::Cursor::new(line.as_bytes().to_vec()));
    if let Ok(reader) = TraceReader::over(Path::new("fuzz-input"), reader, &options) {
        reader.take(16).for_each(drop);
    }
}
