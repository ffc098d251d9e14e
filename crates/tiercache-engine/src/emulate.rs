//! Device emulation: makes any medium behave like a [`DeviceProfile`], so an Optane-like tier
//! can be studied on a machine without one. The real copy or I/O still happens; the emulator
//! then holds the operation until the profile's service time has passed, lets at most
//! `parallelism` operations run at once, and slows reads while writes are in flight as Writes
//! Hurt measured (Fedorova et al., SoCC'22, Figure 2). Emulation only adds time: a medium
//! slower than its profile stays as slow as it is.
//!
//! The delay is served where the operation runs; for the engine's tiers that is under the
//! shard's lock in this version, like the file tier's own I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tiercache_core::{DeviceProfile, Direction};

/// Below this, waiting spins; above it, the thread sleeps first.
const SPIN_BELOW: Duration = Duration::from_micros(60);

pub struct Emulator {
    profile: DeviceProfile,
    queue: Mutex<Queue>,
    writers: AtomicU32,
}

/// The device's servers: how many are busy, and the operations waiting for one, served in
/// arrival order (a device queue is FIFO; a condition variable would wake waiters in any order
/// and starve some for a long time under load).
#[derive(Default)]
struct Queue {
    in_flight: u32,
    waiting: VecDeque<Arc<Waiter>>,
}

/// An operation waiting for a server: the thread to wake, and whether a server was handed to
/// it.
struct Waiter {
    thread: std::thread::Thread,
    granted: AtomicBool,
}

impl Emulator {
    pub fn new(profile: DeviceProfile) -> Emulator {
        Emulator { profile, queue: Mutex::new(Queue::default()), writers: AtomicU32::new(0) }
    }

    pub fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    /// Runs `transfer` (the real copy or I/O of `bytes`) as the profiled device would serve it.
    pub fn serve<T>(&self, direction: Direction, bytes: u64, transfer: impl FnOnce() -> T) -> T {
        self.acquire();
        if direction == Direction::Write {
            self.writers.fetch_add(1, Ordering::AcqRel);
        }
        let start = Instant::now();
        let writers = match direction {
            Direction::Read => self.writers.load(Ordering::Acquire),
            Direction::Write => 0,
        };
        let result = transfer();
        let service =
            Duration::from_nanos(self.profile.service_ns(direction, bytes, writers) as u64);
        wait_until(start + service);
        if direction == Direction::Write {
            self.writers.fetch_sub(1, Ordering::AcqRel);
        }
        self.release();
        result
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn acquire(&self) {
        let waiter = {
            let mut queue = self.queue();
            if queue.in_flight < self.profile.parallelism.max(1) && queue.waiting.is_empty() {
                queue.in_flight += 1;
                return;
            }
            let waiter = Arc::new(Waiter {
                thread: std::thread::current(),
                granted: AtomicBool::new(false),
            });
            queue.waiting.push_back(waiter.clone());
            waiter
        };
        // Unparking before parking is remembered, and spurious wake-ups loop.
        while !waiter.granted.load(Ordering::Acquire) {
            std::thread::park();
        }
    }

    /// Frees a server: handed straight to the first operation waiting, if any.
    fn release(&self) {
        let mut queue = self.queue();
        match queue.waiting.pop_front() {
            Some(next) => {
                next.granted.store(true, Ordering::Release);
                next.thread.unpark();
            }
            None => queue.in_flight -= 1,
        }
    }
}

fn wait_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN_BELOW {
            std::thread::sleep(left - SPIN_BELOW / 2);
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow_disk(parallelism: u32) -> DeviceProfile {
        DeviceProfile {
            name: "test".into(),
            read_latency_us: 2000.0,
            write_latency_us: 2000.0,
            read_bandwidth_gb_s: 1.0,
            write_bandwidth_gb_s: 1.0,
            parallelism,
            read_share_one_writer: 0.1,
            read_share_eight_writers: 0.1,
            cost_per_gb: 1.0,
            sequential_latency_us: None,
            contention: 0.0,
        }
    }

    #[test]
    fn an_operation_takes_at_least_its_service_time() {
        let emulator = Emulator::new(slow_disk(4));
        let start = Instant::now();
        let out = emulator.serve(Direction::Read, 4096, || 7);
        assert_eq!(out, 7);
        assert!(start.elapsed() >= Duration::from_micros(2000), "{:?}", start.elapsed());
    }

    #[test]
    fn waiting_operations_are_served_in_arrival_order() {
        let emulator = Emulator::new(slow_disk(1));
        let order = Mutex::new(Vec::new());
        emulator.acquire(); // the one server is busy while the others queue up
        std::thread::scope(|s| {
            for i in 0..6usize {
                let (emulator, order) = (&emulator, &order);
                s.spawn(move || {
                    emulator.serve(Direction::Read, 512, || order.lock().unwrap().push(i))
                });
                while emulator.queue().waiting.len() <= i {
                    std::thread::yield_now();
                }
            }
            emulator.release();
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn parallelism_bounds_the_operations_in_flight() {
        // One at a time: four 2 ms operations from four threads take at least 8 ms together.
        let emulator = Emulator::new(slow_disk(1));
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| emulator.serve(Direction::Write, 512, || ()));
            }
        });
        assert!(start.elapsed() >= Duration::from_millis(8), "{:?}", start.elapsed());
    }
}
