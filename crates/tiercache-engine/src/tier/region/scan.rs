//! A region's step of recovery: every slot read as a cache opening over the tier does, and
//! what each holds reported (a whole block, nothing, or damage), changing nothing.

use super::{Format, Region};
use crate::device::{read_exact_at, Device};
use crate::error::EngineError;
use crate::tier::block::{inspect_header, Check, Found, HEADER_BYTES};

impl Region {
    /// Reads every slot as recovery does (whole-block slots), calling `found` with each slot's
    /// number and what it holds; `check` says which values are read and checked now (see
    /// [`Check`]: mapped and flash tiers may read dirty blocks' values alone).
    pub fn scan(
        &mut self,
        check: Check,
        mut found: impl FnMut(u32, Found),
    ) -> Result<(), EngineError> {
        assert!(self.chunks == 1, "recovered regions hold whole blocks");
        let read_error = |device: &dyn Device, source| EngineError::Io {
            path: device.path().to_path_buf(),
            action: "cannot read the tier to recover it",
            source,
        };
        if let Format::Aligned(direct) = &mut self.format {
            let region = (self.offset, self.slot_bytes, self.count);
            let device = &*self.device;
            return direct.scan(device, region, check, found).map_err(|e| read_error(device, e));
        }
        if let Format::Apart { headers_at } = self.format {
            return self
                .scan_apart(headers_at, check, found)
                .map_err(|e| read_error(&*self.device, e));
        }
        assert!(matches!(self.format, Format::Headed), "a headed region");
        if let Some(mapping) = &self.memory {
            for slot in 0..self.count as u32 {
                let at = self.offset as usize + slot as usize * self.slot_bytes;
                // SAFETY: the slot lies in the region and the region in the mapping (asserted
                // when it was made); nothing else runs on the cache while it recovers.
                let bytes = unsafe {
                    std::slice::from_raw_parts(mapping.as_ptr().add(at), self.slot_bytes)
                };
                found(slot, crate::tier::block::inspect(bytes));
            }
            return Ok(());
        }
        // Many slots per read: recovery reads the whole tier.
        const BATCH: usize = 256;
        let mut buf = vec![0u8; BATCH * self.slot_bytes];
        let device = &*self.device;
        for first in (0..self.count as usize).step_by(BATCH) {
            let n = BATCH.min(self.count as usize - first);
            let bytes = &mut buf[..n * self.slot_bytes];
            let at = self.offset + (first * self.slot_bytes) as u64;
            read_exact_at(device, bytes, at).map_err(|e| read_error(device, e))?;
            for (i, slot) in bytes.chunks_exact(self.slot_bytes).enumerate() {
                found((first + i) as u32, crate::tier::block::inspect(slot));
            }
        }
        Ok(())
    }

    /// [`scan`](Self::scan) of a region whose headers lie apart from its values.
    fn scan_apart(
        &self,
        headers_at: u64,
        check: Check,
        mut found: impl FnMut(u32, Found),
    ) -> std::io::Result<()> {
        let (count, slot_bytes) = (self.count as usize, self.slot_bytes);
        let headers_only = check == Check::Headers;
        // A clean block's header alone under `Check::Dirty`; otherwise its value checked too.
        let inspect = |header: &[u8], area: &[u8]| match inspect_header(header, slot_bytes) {
            taken @ Found::Block { stamp, .. } if check == Check::Dirty && !stamp.dirty => taken,
            _ => crate::tier::block::inspect_apart(header, area),
        };
        if let Some(mapping) = self.memory.as_ref().filter(|_| !headers_only) {
            // SAFETY: the headers and slots lie in the mapping (asserted when the region was
            // made, and by `header_in_memory`); nothing else runs on the cache while it
            // recovers.
            let (headers, slots) = unsafe {
                assert!(headers_at as usize + count * HEADER_BYTES <= mapping.len());
                let headers = mapping.as_ptr().add(headers_at as usize);
                let slots = mapping.as_ptr().add(self.offset as usize);
                (
                    std::slice::from_raw_parts(headers, count * HEADER_BYTES),
                    std::slice::from_raw_parts(slots, count * slot_bytes),
                )
            };
            let pairs = headers.chunks_exact(HEADER_BYTES).zip(slots.chunks_exact(slot_bytes));
            for (slot, (header, area)) in pairs.enumerate() {
                found(slot as u32, inspect(header, area));
            }
            return Ok(());
        }
        // Every header at once; then, unless the headers are taken alone, the values through
        // the device (a wrapped tier) in batches.
        let mut headers = vec![0u8; count * HEADER_BYTES];
        read_exact_at(&*self.device, &mut headers, headers_at)?;
        if headers_only {
            for (slot, header) in headers.chunks_exact(HEADER_BYTES).enumerate() {
                found(slot as u32, inspect_header(header, slot_bytes));
            }
            return Ok(());
        }
        const BATCH: usize = 256;
        let mut buf = vec![0u8; BATCH * slot_bytes];
        for first in (0..count).step_by(BATCH) {
            let n = BATCH.min(count - first);
            let bytes = &mut buf[..n * slot_bytes];
            read_exact_at(&*self.device, bytes, self.offset + (first * slot_bytes) as u64)?;
            let heads = headers[first * HEADER_BYTES..].chunks_exact(HEADER_BYTES);
            for (i, (header, area)) in heads.zip(bytes.chunks_exact(slot_bytes)).enumerate() {
                found((first + i) as u32, inspect(header, area));
            }
        }
        Ok(())
    }
}
