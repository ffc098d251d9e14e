//! The atomics and cells of the hit path without the lock (`optimistic`): std's, or loom's when
//! the crate is built with `--cfg loom`, so that the same code is model-checked over every
//! interleaving and every weak-memory outcome loom can produce (`scripts/test` runs it).

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A value written by one thread and read by another, at times the surrounding protocol makes
/// exclusive (loom checks that they are).
#[derive(Default)]
pub struct Cell<T>(
    #[cfg(loom)] loom::cell::UnsafeCell<T>,
    #[cfg(not(loom))] std::cell::UnsafeCell<T>,
);

impl<T: Copy> Cell<T> {
    /// # Safety
    /// No one writes the cell meanwhile.
    #[inline]
    pub unsafe fn get(&self) -> T {
        #[cfg(loom)]
        // SAFETY: the caller's contract (loom checks it).
        return self.0.with(|p| unsafe { *p });
        #[cfg(not(loom))]
        // SAFETY: the caller's contract.
        unsafe {
            *self.0.get()
        }
    }

    /// # Safety
    /// No one reads or writes the cell meanwhile.
    #[inline]
    pub unsafe fn set(&self, value: T) {
        #[cfg(loom)]
        // SAFETY: the caller's contract (loom checks it).
        self.0.with_mut(|p| unsafe { *p = value });
        #[cfg(not(loom))]
        // SAFETY: the caller's contract.
        unsafe {
            *self.0.get() = value
        }
    }
}
