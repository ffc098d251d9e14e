//! A region's objects spanning pages (the shard's `spans`): their pages read
//! and written in runs of adjacent slots, with the shard locked, or with it unlocked (a
//! [`PinnedRead`] of every page, a [`Staged`] write of adjacent ones as one job).

use super::{write_error, Format, IoBuf, PinnedRead, Region, Staged};
use crate::aligned::AlignedBuf;
use crate::device::read_exact_at;
use crate::error::EngineError;
use crate::tier::block::{BlockFault, Part, ReadFault, Stamp};

/// Bytes of buffers for objects' pages a region keeps for its next reads and writes. A shard
/// holds back a run of staged writes of up to `RUN_BYTES` (`crate::tier::behind::run_slots`),
/// each object in a buffer of its own, while the run before it is being written and objects are
/// read: about three runs' worth is in use at the busiest, and what is kept never exceeds what
/// was in use. Measured on the objects workload of `bench/foyer-compare` (2 threads, 3 s):
/// one run's worth kept, 429 buffers of 1 MiB were allocated afresh; three runs' worth, 60.
const SPARE_RUN_BYTES: usize = 3 * crate::cleaner::RUN_BYTES;

impl Region {
    /// Prepares the read of an object of `key` spanning the pages in `slots` of a flash tier,
    /// to run with the shard unlocked (see [`begin_read`](Self::begin_read)); `None` on other
    /// tiers, or if a page's record is not of `key`.
    pub fn begin_read_pages(&mut self, slots: &[u32], key: u64) -> Option<PinnedRead> {
        let Format::Aligned(direct) = &self.format else { return None };
        let pages = slots
            .iter()
            .map(|&slot| Some((slot, self.at(slot), direct.expect(slot, key)?)))
            .collect::<Option<Vec<_>>>()?;
        let (device, at) = (self.device.clone(), pages[0].1);
        // The longest run of adjacent pages is what one device read needs; all of them is
        // what it needs at most.
        let buf = match self.spare_run_for(pages.len() * self.slot_bytes) {
            Some(i) => IoBuf::Aligned(self.spare_runs.swap_remove(i)),
            None => IoBuf::Plain(Vec::new()),
        };
        let stride = self.slot_bytes;
        Some(PinnedRead { device, at, key, expect: None, buf, pages, stride })
    }

    /// Prepares the write of `data`, an object of `key` spanning the adjacent pages from
    /// `first` (one page a block of it), as one write to run with the shard unlocked (flash
    /// tiers; `None` elsewhere). Its pages read as empty until [`end_write`](Self::end_write);
    /// until then the object is read from the staged copy, whose bytes are the value.
    pub fn begin_write_pages(
        &mut self,
        first: u32,
        key: u64,
        data: &[u8],
        seq: u64,
    ) -> Option<Staged> {
        let block = self.slot_bytes;
        if !matches!(self.format, Format::Aligned(_)) {
            return None;
        }
        let count = data.len().div_ceil(block);
        let mut buf = self.run_buf(count * block);
        let Format::Aligned(direct) = &mut self.format else { unreachable!("flash") };
        let chunks: Vec<&[u8]> = data.chunks(block).collect();
        let pages = direct.stage_pages(first, &chunks, buf.as_mut_slice());
        let stamp = Stamp { seq, dirty: false, part: Part::First { count: count as u32 } };
        Some(Staged {
            device: self.device.clone(),
            at: self.at(first),
            key,
            buf: IoBuf::Aligned(buf),
            written: count * block,
            value_at: 0,
            len: data.len() as u32,
            crc: 0,
            stamp,
            pages,
        })
    }

    /// Keeps a buffer of an object's pages for the next, up to [`SPARE_RUN_BYTES`] in all,
    /// the largest first: reused rather than allocated again (a new allocation the kernel
    /// zeroes page by page).
    pub(super) fn keep_run_buf(&mut self, buf: AlignedBuf) {
        self.spare_runs.push(buf);
        let mut kept: usize = self.spare_runs.iter().map(|b| b.as_slice().len()).sum();
        while kept > SPARE_RUN_BYTES {
            let smallest = (0..self.spare_runs.len())
                .min_by_key(|&i| self.spare_runs[i].as_slice().len())
                .expect("kept buffers");
            kept -= self.spare_runs.swap_remove(smallest).as_slice().len();
        }
    }

    /// A buffer of at least `bytes` for an object's pages: the smallest kept one that is large
    /// enough, or a new one of the next power of two (so that it serves other sizes later).
    fn run_buf(&mut self, bytes: usize) -> AlignedBuf {
        match self.spare_run_for(bytes) {
            Some(i) => self.spare_runs.swap_remove(i),
            None => AlignedBuf::new(bytes.next_power_of_two().max(crate::aligned::DIRECT_ALIGN)),
        }
    }

    /// The smallest kept buffer of at least `bytes`.
    fn spare_run_for(&self, bytes: usize) -> Option<usize> {
        let sizes = self.spare_runs.iter().map(|b| b.as_slice().len()).enumerate();
        sizes.filter(|&(_, len)| len >= bytes).min_by_key(|&(_, len)| len).map(|(i, _)| i)
    }

    /// Writes `data`, an object of `key` spanning pages, into `slots` (a page each, in order),
    /// page `i` stamped `stamps(i)`. On flash, pages in adjacent slots go to the device in one
    /// write (a log-ordered tier hands an object adjacent slots: one write for it whole).
    pub fn write_pages(
        &mut self,
        slots: &[u32],
        key: u64,
        data: &[u8],
        stamps: impl Fn(usize) -> Stamp,
    ) -> Result<(), EngineError> {
        let block = self.value_bytes();
        let pages: Vec<&[u8]> = data.chunks(block).collect();
        assert_eq!(pages.len(), slots.len(), "a page for each slot");
        if !matches!(self.format, Format::Aligned(_)) {
            for (i, (&slot, page)) in slots.iter().zip(&pages).enumerate() {
                self.write(slot, key, page, stamps(i))?;
            }
            return Ok(());
        }
        let mut done = 0;
        for run in runs(slots, |&slot| slot) {
            let (at, bytes) = (self.at(slots[done]), run * block);
            let mut buf = self.run_buf(bytes);
            let Format::Aligned(direct) = &mut self.format else { unreachable!("flash") };
            let staged =
                direct.stage_pages(slots[done], &pages[done..done + run], buf.as_mut_slice());
            let written = self.device.write_at(&buf.as_slice()[..bytes], at);
            let Format::Aligned(direct) = &mut self.format else { unreachable!("flash") };
            for (i, (slot, len, crc)) in staged.into_iter().enumerate() {
                direct.landed(slot, (key, len, crc), stamps(done + i), written.is_ok());
            }
            self.keep_run_buf(buf);
            written.map_err(|source| write_error(&*self.device, source))?;
            done += run;
        }
        Ok(())
    }

    /// Reads the pages of an object of `key` from `slots`, in order, checking each, into `out`
    /// (a block for each slot at least); returns the object's length. On flash, pages in
    /// adjacent slots come in one read. Every page but the last is a whole block.
    pub fn read_pages(
        &mut self,
        slots: &[u32],
        key: u64,
        out: &mut [u8],
    ) -> Result<usize, ReadFault> {
        if matches!(self.format, Format::Aligned(_)) {
            // As a read with the shard unlocked runs, here with it locked.
            let mut read = self.begin_read_pages(slots, key);
            let read_pages = read.as_mut().map(|r| r.run_pages(out));
            if let Some(read) = read {
                self.end_read(read);
            }
            return read_pages.unwrap_or(Err(ReadFault::Corrupt(BlockFault::Key)));
        }
        let block = self.value_bytes();
        let mut len = 0;
        for (i, &slot) in slots.iter().enumerate() {
            if len != i * block {
                return Err(ReadFault::Corrupt(BlockFault::Length));
            }
            let got = self.read(slot, key, &mut out[len..len + block])?;
            if got > block {
                return Err(ReadFault::Corrupt(BlockFault::Length));
            }
            len += got;
        }
        Ok(len)
    }
}

impl PinnedRead {
    /// The length of the value an object spanning pages has (`None` for a block: at most a
    /// block).
    pub fn object_len(&self) -> Option<usize> {
        (!self.pages.is_empty()).then(|| self.pages.iter().map(|p| p.2 .0 as usize).sum())
    }

    /// The slots the read pins: an object's pages (`None` for a block, whose slot its caller
    /// knows).
    pub fn pinned_pages(&self) -> Option<impl Iterator<Item = u32> + '_> {
        (!self.pages.is_empty()).then(|| self.pages.iter().map(|p| p.0))
    }

    /// Reads an object's pages as [`run`](Self::run) does, into a vector of the value's
    /// length.
    pub fn run_to_vec(&mut self) -> Result<Vec<u8>, ReadFault> {
        let mut value = Vec::with_capacity(self.object_len().unwrap_or(0));
        self.each_page(|page| value.extend_from_slice(page))?;
        Ok(value)
    }

    /// Reads an object's pages, adjacent ones in one device read, checking each against its
    /// record; copies the value into `out` as far as it goes and returns the value's length.
    pub(super) fn run_pages(&mut self, out: &mut [u8]) -> Result<usize, ReadFault> {
        let mut len = 0;
        self.each_page(|value| {
            if len < out.len() {
                let n = value.len().min(out.len() - len);
                out[len..len + n].copy_from_slice(&value[..n]);
            }
            len += value.len();
        })?;
        Ok(len)
    }

    /// Reads an object's pages, adjacent ones in one device read, and hands each page's value
    /// to `page` in order once it checks out against its record (every page but the last a
    /// whole block).
    fn each_page(&mut self, mut page: impl FnMut(&[u8])) -> Result<(), ReadFault> {
        let block = self.stride;
        let last = self.pages.len() - 1;
        let mut at = 0;
        for run in runs(&self.pages, |p| p.0) {
            let bytes = run * block;
            if !matches!(&self.buf, IoBuf::Aligned(b) if b.as_slice().len() >= bytes) {
                self.buf = IoBuf::Aligned(AlignedBuf::new(bytes));
            }
            let buf = &mut self.buf.bytes()[..bytes];
            read_exact_at(&*self.device, buf, self.pages[at].1).map_err(ReadFault::Io)?;
            for (i, &(_, _, (page_len, crc))) in self.pages[at..at + run].iter().enumerate() {
                if page_len as usize != block && at + i != last {
                    return Err(ReadFault::Corrupt(BlockFault::Length));
                }
                let value = &buf[i * block..i * block + page_len as usize];
                if crate::tier::block::crc32c(value) != crc {
                    return Err(ReadFault::Corrupt(BlockFault::Checksum));
                }
                page(value);
            }
            at += run;
        }
        Ok(())
    }
}

/// The lengths of the runs of adjacent slots (`slot` of each item) in `items`, in order, each
/// at most 256 (a megabyte of 4 KiB blocks to a device request). A region's adjacent slots lie
/// end to end on its device.
fn runs<T>(items: &[T], slot: impl Fn(&T) -> u32) -> Vec<usize> {
    let mut runs = Vec::new();
    let mut at = 0;
    while let Some(first) = items.get(at).map(&slot) {
        let run = items[at..]
            .iter()
            .zip(first..)
            .take(256)
            .take_while(|(item, next)| slot(item) == *next)
            .count();
        runs.push(run);
        at += run;
    }
    runs
}
