//! The I/O done on a file or flash tier with the shard unlocked: a read of a pinned slot
//! ([`PinnedRead`]) and a block on its way down ([`Staged`], written behind the caller), with
//! their buffers and errors. The shard prepares them under its lock, and nothing writes a slot
//! while one of them holds it.

use std::sync::Arc;

use crate::aligned::AlignedBuf;
use crate::block::{copy_value, decode, BlockFault, Stamp};
use crate::device::{read_exact_at, Device};
use crate::error::EngineError;

/// A read that found no usable block.
#[derive(Debug)]
pub enum ReadFault {
    Corrupt(BlockFault),
    Io(std::io::Error),
}

/// What a read of a file or flash tier needs once the shard is unlocked: the device, where the
/// slot is, what DRAM knows of the block, and a buffer. Slots are never rewritten while a read
/// holds them (the shard pins them and writes elsewhere), so the read sees one block, whole.
pub struct PinnedRead {
    pub(crate) device: Arc<dyn Device>,
    pub(crate) at: u64,
    pub(crate) key: u64,
    /// Length and CRC32C of the value, for headerless (flash) blocks.
    pub(crate) expect: Option<(u32, u32)>,
    pub(crate) buf: IoBuf,
}

pub enum IoBuf {
    Plain(Vec<u8>),
    Aligned(AlignedBuf),
}

impl IoBuf {
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        match self {
            IoBuf::Plain(v) => v,
            IoBuf::Aligned(a) => a.as_mut_slice(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            IoBuf::Plain(v) => v,
            IoBuf::Aligned(a) => a.as_slice(),
        }
    }
}

/// A block on its way to a file or flash tier, written with the shard unlocked (write-behind).
/// Until it lands, reads of the block are served from its bytes here, and its slot is pinned
/// so nothing else is written there meanwhile.
pub struct Staged {
    pub(crate) device: Arc<dyn Device>,
    pub(crate) at: u64,
    pub(crate) key: u64,
    /// The bytes to write: header and value on file tiers, the value padded to the block on
    /// flash.
    pub(crate) buf: IoBuf,
    pub(crate) written: usize,
    pub(crate) value_at: usize,
    pub(crate) len: u32,
    /// CRC32C of the value (flash blocks keep it in their slot's record).
    pub(crate) crc: u32,
    /// The block's sequence number and dirty flag (for a flash block's record).
    pub(crate) stamp: Stamp,
}

/// The error of a block write that failed on `device`.
pub(crate) fn write_error(device: &dyn Device, source: std::io::Error) -> EngineError {
    EngineError::Io { path: device.path().to_path_buf(), action: "cannot write a block", source }
}

impl Staged {
    /// The block's value.
    pub fn value(&self) -> &[u8] {
        &self.buf.as_slice()[self.value_at..self.value_at + self.len as usize]
    }

    /// Writes the block.
    pub fn run(&self) -> Result<(), EngineError> {
        self.device
            .write_at(&self.buf.as_slice()[..self.written], self.at)
            .map_err(|source| write_error(&*self.device, source))
    }

    /// Writes blocks that lie end to end on one device, in device order (a run the
    /// write-behind gathered), in one request, gathered in `buf` (which must hold them all).
    pub fn run_joined(run: &[&Staged], buf: &mut AlignedBuf) -> Result<(), EngineError> {
        let (first, last) = (run[0], run[run.len() - 1]);
        let bytes = (last.at + last.written as u64 - first.at) as usize;
        let joined = &mut buf.as_mut_slice()[..bytes];
        for staged in run {
            let from = (staged.at - first.at) as usize;
            joined[from..from + staged.written]
                .copy_from_slice(&staged.buf.as_slice()[..staged.written]);
        }
        first
            .device
            .write_at(joined, first.at)
            .map_err(|source| write_error(&*first.device, source))
    }
}

impl PinnedRead {
    /// Reads and checks the block, copying its value into `out`; returns the value's length.
    pub fn run(&mut self, out: &mut [u8]) -> Result<usize, ReadFault> {
        let (key, at, expect) = (self.key, self.at, self.expect);
        let buf = self.buf.bytes();
        read_exact_at(&*self.device, buf, at).map_err(ReadFault::Io)?;
        let value = match expect {
            None => decode(buf, key).map_err(ReadFault::Corrupt)?,
            Some((len, crc)) => {
                let value = &buf[..len as usize];
                if crate::block::crc32c(value) != crc {
                    return Err(ReadFault::Corrupt(BlockFault::Checksum));
                }
                value
            }
        };
        Ok(copy_value(value, out))
    }

    pub fn into_buf(self) -> IoBuf {
        self.buf
    }
}
