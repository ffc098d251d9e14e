//! The block view: splits each byte-range request into the aligned fixed-size blocks it
//! touches, the unit block caches work in. A request at byte `a` of `n` bytes becomes requests
//! for blocks `a / B ..= (a + n - 1) / B`, each of `B` bytes, with the original time and op.
//! A zero-length request touches the one block that holds its offset. Keys of a trace with a
//! volume column are volume keys: the address is split within its volume, and each block keeps
//! its volume, so volumes never share a block.

use std::path::Path;
use tiercache_core::limits::{BLOCKS_PER_REQUEST_MAX, BLOCK_SIZE_MAX};

use tiercache_core::{split_volume_key, volume_key, Request};

use crate::error::{Position, TraceError};

pub struct BlockView<I> {
    inner: I,
    /// The file and the index of the inner request, for errors.
    position: Position,
    block_bytes: u64,
    address_unit: u64,
    /// Whether keys are volume keys.
    volumes: bool,
    /// The request being split, its volume, and its next and end blocks.
    pending: Option<(Request, u64, u64, u64)>,
}

impl<I: Iterator<Item = Result<Request, TraceError>>> BlockView<I> {
    /// `address_unit` is the bytes per key unit of the inner stream (1 for byte offsets, 512 for
    /// sector numbers); `volumes` says its keys are volume keys; `path` names the trace in
    /// errors.
    pub fn new(
        inner: I,
        block_bytes: u32,
        address_unit: u32,
        volumes: bool,
        path: &Path,
    ) -> Result<BlockView<I>, TraceError> {
        if block_bytes == 0 || block_bytes as u64 > BLOCK_SIZE_MAX {
            return Err(TraceError::BadOption(format!(
                "--block-size must be 1 B to {BLOCK_SIZE_MAX} B, got {block_bytes}"
            )));
        }
        Ok(BlockView {
            inner,
            position: Position::new(path, "request"),
            block_bytes: block_bytes as u64,
            address_unit: address_unit as u64,
            volumes,
            pending: None,
        })
    }

    fn split(&mut self, req: Request) -> Result<(), TraceError> {
        let (volume, address) = if self.volumes { split_volume_key(req.key) } else { (0, req.key) };
        let start = address.checked_mul(self.address_unit).ok_or_else(|| {
            let reason = format!("address {address} x {} B overflows 64 bits", self.address_unit);
            self.position.malformed("address", reason)
        })?;
        let end = start.saturating_add(req.size.max(1) as u64);
        let (first, last) = (start / self.block_bytes, (end - 1) / self.block_bytes);
        if last - first >= BLOCKS_PER_REQUEST_MAX {
            let reason = format!(
                "{} bytes span more than {BLOCKS_PER_REQUEST_MAX} blocks; use a larger --block-size",
                req.size
            );
            return Err(self.position.malformed("size", reason));
        }
        if self.volumes && volume_key(volume, last).is_none() {
            let reason = format!("block {last} of volume {volume} is past a volume's last block");
            return Err(self.position.malformed("address", reason));
        }
        self.pending = Some((req, volume, first, last + 1));
        Ok(())
    }
}

impl<I: Iterator<Item = Result<Request, TraceError>>> Iterator for BlockView<I> {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((template, volume, next, end)) = &mut self.pending {
                if *next < *end {
                    let block = *next;
                    *next += 1;
                    let key = match self.volumes {
                        true => volume_key(*volume, block).expect("checked by split"),
                        false => block,
                    };
                    let size = self.block_bytes as u32;
                    return Some(Ok(Request::new(template.time_us, key, size, template.op)));
                }
                self.pending = None;
            }
            match self.inner.next()? {
                Ok(req) => {
                    self.position.index += 1;
                    if let Err(e) = self.split(req) {
                        return Some(Err(e));
                    }
                }
                Err(e) => {
                    self.position.index += 1;
                    return Some(Err(e));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiercache_core::Op;

    fn blocks(reqs: Vec<Request>, block: u32, unit: u32) -> Vec<(u64, u32)> {
        let view =
            BlockView::new(reqs.into_iter().map(Ok), block, unit, false, Path::new("t")).unwrap();
        view.map(|r| r.unwrap()).map(|r| (r.key, r.size)).collect()
    }

    #[test]
    fn splits_ranges_into_aligned_blocks() {
        // Bytes 4000..8200 touch blocks 0, 1 and 2 of 4 KiB.
        let got = blocks(vec![Request::new(5, 4000, 4200, Op::Write)], 4096, 1);
        assert_eq!(got, vec![(0, 4096), (1, 4096), (2, 4096)]);
        // Aligned, exactly one block.
        assert_eq!(blocks(vec![Request::read(8192, 4096)], 4096, 1), vec![(2, 4096)]);
        // Sector addresses: sector 9 is byte 4608, in block 1.
        assert_eq!(blocks(vec![Request::read(9, 512)], 4096, 512), vec![(1, 4096)]);
        // Zero-length requests touch their block.
        assert_eq!(blocks(vec![Request::read(100, 0)], 4096, 1), vec![(0, 4096)]);
    }

    #[test]
    fn keeps_time_and_op() {
        let view = BlockView::new(
            vec![Ok(Request::new(77, 0, 8192, Op::Write))].into_iter(),
            4096,
            1,
            false,
            Path::new("t"),
        )
        .unwrap();
        assert!(view.map(|r| r.unwrap()).all(|r| r.time_us == 77 && r.op == Op::Write));
    }

    #[test]
    fn refuses_bad_block_sizes() {
        assert!(BlockView::new(std::iter::empty(), 0, 1, false, Path::new("t")).is_err());
    }

    #[test]
    fn volumes_keep_their_blocks_apart() {
        // Sectors 8..24 (bytes 4096..12288) on volumes 1 and 2: blocks 1 and 2 of each.
        let reqs = [1, 2].map(|v| Ok(Request::read(volume_key(v, 8).unwrap(), 8192)));
        let view = BlockView::new(reqs.into_iter(), 4096, 512, true, Path::new("t")).unwrap();
        let got: Vec<(u64, u64)> = view.map(|r| split_volume_key(r.unwrap().key)).collect();
        assert_eq!(got, vec![(1, 1), (1, 2), (2, 1), (2, 2)]);
    }
}
