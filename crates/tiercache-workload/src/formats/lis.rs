//! The ARC paper's traces (Megiddo and Modha, FAST'03): text lines `start n_blocks ignore
//! request_no`; each line is `n_blocks` reads of consecutive 512-byte blocks from `start`, and
//! every block counts as one request (how the paper's Table III counts them).

use std::path::Path;

use tiercache_core::limits::BLOCKS_PER_REQUEST_MAX;
use tiercache_core::{Op, Request};

use super::lines::Lines;
use crate::error::TraceError;

pub const LIS_BLOCK_BYTES: u32 = 512;

pub struct LisReader {
    lines: Lines,
    next_block: u64,
    end_block: u64,
}

impl LisReader {
    pub fn new(reader: Box<dyn std::io::BufRead + Send>, path: &Path) -> LisReader {
        LisReader { lines: Lines::new(reader, path), next_block: 0, end_block: 0 }
    }

    fn parse(&mut self) -> Option<Result<(), TraceError>> {
        let (line, at) = match self.lines.next_line()? {
            Ok(found) => found,
            Err(e) => return Some(Err(e)),
        };
        let mut fields = line.split_whitespace();
        let mut number = |name: &str| -> Result<u64, TraceError> {
            let text = fields.next().ok_or_else(|| at.malformed(name, "missing"))?;
            text.parse().map_err(|_| at.malformed(name, format!("'{text}' is not a number")))
        };
        let parsed = (|| {
            let start = number("start")?;
            let count = number("n_blocks")?;
            if count > BLOCKS_PER_REQUEST_MAX {
                return Err(
                    at.malformed("n_blocks", format!("{count} is above {BLOCKS_PER_REQUEST_MAX}"))
                );
            }
            let end = start
                .checked_add(count)
                .ok_or_else(|| at.malformed("n_blocks", "runs past 2^64"))?;
            Ok((start, end))
        })();
        Some(parsed.map(|(start, end)| {
            self.next_block = start;
            self.end_block = end;
        }))
    }
}

impl Iterator for LisReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        while self.next_block == self.end_block {
            if let Err(e) = self.parse()? {
                return Some(Err(e));
            }
        }
        let block = self.next_block;
        self.next_block += 1;
        Some(Ok(Request::new(0, block, LIS_BLOCK_BYTES, Op::Read)))
    }
}
