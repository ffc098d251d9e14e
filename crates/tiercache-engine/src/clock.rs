//! The engine's source of time, an injected seam: policies with periodic work (LFRU's sweep)
//! read the time of each request, and tests drive it by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub trait Clock: Send + Sync {
    /// Microseconds since an arbitrary, fixed origin; never decreasing.
    fn now_us(&self) -> u64;
}

/// Real time since the clock was made.
pub struct MonotonicClock {
    origin: Instant,
}

impl Default for MonotonicClock {
    fn default() -> MonotonicClock {
        MonotonicClock { origin: Instant::now() }
    }
}

impl Clock for MonotonicClock {
    fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }
}

/// Time set by the caller (tests, trace replays).
#[derive(Default)]
pub struct ManualClock {
    now_us: AtomicU64,
}

impl ManualClock {
    pub fn set(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::Relaxed)
    }
}
