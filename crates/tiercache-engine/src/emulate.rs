//! Device emulation: makes any medium behave like a [`DeviceProfile`], so an Optane-like tier
//! can be studied on a machine without one. The real copy or I/O still happens; the emulator
//! then holds the operation until the profile's service time has passed, lets at most
//! `parallelism` operations run at once, and slows reads while writes are in flight as Writes
//! Hurt measured (Fedorova et al., SoCC'22, Figure 2). As the simulator's device model
//! (`tiercache_sim::timed`) does, an operation that starts where the one before it ended takes
//! the profile's sequential latency (a disk does not seek), and each other operation in service
//! slows it by the profile's `contention`. Emulation only adds time: a medium slower than its
//! profile stays as slow as it is.
//!
//! The delay is served where the operation runs; for the engine's tiers that is under the
//! shard's lock in this version, like the file tier's own I/O.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tiercache_core::{DeviceProfile, Direction};

/// Below this, waiting spins; above it, the thread sleeps first.
const SPIN_BELOW: Duration = Duration::from_micros(60);

pub struct Emulator {
    profile: DeviceProfile,
    queue: Mutex<Queue>,
    writers: AtomicU32,
    /// Operations in service (past `acquire`).
    busy: AtomicU32,
    /// Where the operation started last ends: the next one starting there is sequential.
    next_at: AtomicU64,
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
        Emulator {
            profile,
            queue: Mutex::new(Queue::default()),
            writers: AtomicU32::new(0),
            busy: AtomicU32::new(0),
            next_at: AtomicU64::new(u64::MAX),
        }
    }

    pub fn profile(&self) -> &DeviceProfile {
        &self.profile
    }

    /// Runs `transfer` (the real copy or I/O of `bytes` at byte `at` of the device) as the
    /// profiled device would serve it.
    pub fn serve<T>(
        &self,
        direction: Direction,
        (at, bytes): (u64, u64),
        transfer: impl FnOnce() -> T,
    ) -> T {
        self.acquire();
        let others = self.busy.fetch_add(1, Ordering::AcqRel);
        if direction == Direction::Write {
            self.writers.fetch_add(1, Ordering::AcqRel);
        }
        let start = Instant::now();
        let writers = match direction {
            Direction::Read => self.writers.load(Ordering::Acquire),
            Direction::Write => 0,
        };
        let sequential = self.next_at.swap(at.saturating_add(bytes), Ordering::AcqRel) == at;
        let result = transfer();
        let slowed = 1.0 + self.profile.contention * others as f64;
        let ns = self.profile.service_ns_at(direction, bytes, writers, sequential) * slowed;
        wait_until(start + Duration::from_nanos(ns as u64));
        if direction == Direction::Write {
            self.writers.fetch_sub(1, Ordering::AcqRel);
        }
        self.busy.fetch_sub(1, Ordering::AcqRel);
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
        let out = emulator.serve(Direction::Read, (0, 4096), || 7);
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
                    emulator.serve(Direction::Read, (0, 512), || order.lock().unwrap().push(i))
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
                s.spawn(|| emulator.serve(Direction::Write, (0, 512), || ()));
            }
        });
        assert!(start.elapsed() >= Duration::from_millis(8), "{:?}", start.elapsed());
    }

    /// A disk's sequential run: an operation starting where the last one ended takes the
    /// sequential latency, as the simulator's device model charges it.
    #[test]
    fn an_operation_continuing_the_last_one_skips_the_seek() {
        let disk = DeviceProfile { sequential_latency_us: Some(0.0), ..slow_disk(1) };
        let emulator = Emulator::new(disk);
        let timed = |at: u64| {
            let start = Instant::now();
            emulator.serve(Direction::Write, (at, 4096), || ());
            start.elapsed()
        };
        assert!(timed(1 << 20) >= Duration::from_millis(2), "the first seeks");
        for block in 1..4 {
            let sequential = timed((1 << 20) + block * 4096);
            assert!(sequential < Duration::from_millis(1), "block {block}: {sequential:?}");
        }
        assert!(timed(0) >= Duration::from_millis(2), "a jump back seeks again");
    }

    /// Operations served together slow each other by the profile's contention: four at once
    /// on four servers with contention 3 take at least 1 + 3 * 3 = 10 times the 2 ms of one,
    /// where without contention they finish in about 2 ms together.
    #[test]
    fn operations_in_service_together_slow_each_other() {
        let run = |contention: f64| {
            let emulator = Emulator::new(DeviceProfile { contention, ..slow_disk(4) });
            let barrier = std::sync::Barrier::new(4);
            let longest = Mutex::new(Duration::ZERO);
            std::thread::scope(|s| {
                for i in 0..4u64 {
                    let (emulator, barrier, longest) = (&emulator, &barrier, &longest);
                    s.spawn(move || {
                        barrier.wait();
                        let start = Instant::now();
                        // Far apart: no operation continues another.
                        emulator.serve(Direction::Read, (i << 30, 512), || ());
                        let took = start.elapsed();
                        let mut longest = longest.lock().unwrap();
                        *longest = (*longest).max(took);
                    });
                }
            });
            longest.into_inner().unwrap()
        };
        // The last of the four to start finds at least one other in service (each stays 2 ms
        // or more): it takes at least (1 + 3) * 2 ms.
        assert!(run(3.0) >= Duration::from_millis(8), "{:?}", run(3.0));
        assert!(run(0.0) < Duration::from_millis(8), "{:?}", run(0.0));
    }
}
