//! Write-behind: blocks bound for a file or flash tier are written by a few threads of their
//! own, with the shard unlocked, so a demotion (or an admitted miss) costs its caller a copy
//! into DRAM instead of a device write. Until the write lands the block is served from that
//! copy, and its slot stays pinned so nothing else is written there. Nothing is dropped: a
//! shard stages at most a few blocks per tier (what its slack slots allow) and writes in place
//! past that, so the queue is bounded and a busy device slows writers down rather than losing
//! their blocks. Shutting down writes everything queued before the threads exit.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tiercache_core::Key;

use crate::io::Staged;
use crate::tier::Place;

/// Threads writing behind by default, when a tier is flash: a flash device (and this VM's
/// disk) serves several writes at once, and the threads mostly wait on it.
pub const DEFAULT_THREADS: usize = 4;

/// A staged block to write: where it goes, and the shard to tell when it landed.
pub struct Job {
    pub shard: usize,
    pub key: Key,
    pub place: Place,
    pub staged: Arc<Staged>,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Jobs queued or being written.
    unfinished: usize,
    stopping: bool,
}

/// The queue between the shards and the writing threads.
#[derive(Default)]
pub struct WriteBehind {
    state: Mutex<State>,
    /// Signalled when a job arrives or the threads should stop.
    work: Condvar,
    /// Signalled when the last unfinished job ends.
    idle: Condvar,
}

impl WriteBehind {
    fn state(&self) -> MutexGuard<'_, State> {
        // Jobs are plain data; a panic elsewhere leaves the queue consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a job (called with its shard locked; the threads never lock a shard while
    /// holding the queue, so the order of locks is always shard, then queue).
    pub fn submit(&self, job: Job) {
        let mut state = self.state();
        state.jobs.push_back(job);
        state.unfinished += 1;
        drop(state);
        self.work.notify_one();
    }

    /// The next job to write; `None` once stopping and nothing is left.
    pub fn next(&self) -> Option<Job> {
        let mut state = self.state();
        loop {
            if let Some(job) = state.jobs.pop_front() {
                return Some(job);
            }
            if state.stopping {
                return None;
            }
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Marks a job returned by `next` finished.
    pub fn done(&self) {
        let mut state = self.state();
        state.unfinished -= 1;
        if state.unfinished == 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until every job submitted so far has landed (or failed and been counted).
    pub fn wait_idle(&self) {
        let mut state = self.state();
        while state.unfinished > 0 {
            state = self.idle.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Tells the threads to exit once the queue is empty.
    pub fn stop(&self) {
        self.state().stopping = true;
        self.work.notify_all();
    }
}
