//! A device that dies with its process: see [`Killed`].

use std::path::Path;
use std::sync::Arc;

use tiercache_engine::device::Device;

/// A process killed after its `budget`-th device write: every write before it reached the
/// file (a killed process's writes are in the page cache), the one at the budget only its
/// first sector if `tear`, and nothing after. Shared by the tier and the backing file, so the
/// kill lands at one point of the process's whole sequence of writes.
pub struct Killed {
    pub inner: Arc<dyn Device>,
    pub budget: Arc<std::sync::atomic::AtomicI64>,
    pub tear: bool,
}

impl Killed {
    pub fn dead(budget: &std::sync::atomic::AtomicI64) -> bool {
        budget.load(std::sync::atomic::Ordering::SeqCst) <= 0
    }
}

impl Device for Killed {
    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn read_at(&self, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, at)
    }

    fn write_at(&self, data: &[u8], at: u64) -> std::io::Result<()> {
        match self.budget.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) {
            left if left > 1 => self.inner.write_at(data, at),
            1 if self.tear => self.inner.write_at(&data[..data.len().min(512)], at),
            1 => self.inner.write_at(data, at),
            _ => Ok(()),
        }
    }

    fn sync(&self) -> std::io::Result<()> {
        match Killed::dead(&self.budget) {
            true => Ok(()),
            false => self.inner.sync(),
        }
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
}
