//! Write-behind: blocks bound for a file or flash tier are written by a few threads of their
//! own, with the shard unlocked, so a demotion (or an admitted miss) costs its caller a copy
//! into DRAM instead of a device write. Until the write lands the block is served from that
//! copy, and its slot stays pinned so nothing else is written there. Nothing is dropped: a
//! shard stages at most a few blocks per tier (what its slack slots allow) and writes in place
//! past that, so the queue is bounded and a busy device slows writers down rather than losing
//! their blocks. Shutting down writes everything queued before the threads exit.
//!
//! Everything of it is here: what a shard has staged ([`Staging`]), the queue between the
//! shards and the threads ([`WriteBehind`]), and the threads themselves ([`start_writers`]).
//! The blocks are [`Staged`] writes, which a shard's region prepares under its lock.
//!
//! A thread takes the oldest job together with the queued jobs whose bytes continue it on the
//! same device (a run of adjacent slots, up to [`RUN_BYTES`]) and writes them in one request.
//! Shards hand such runs over whole ([`Staging::stage`] holds a run back until it is full or
//! broken), so a flash tier whose slots are taken in order, as the `log` policy's are, is
//! written in large sequential writes instead of one 4 KiB write per block.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tiercache_core::{Key, KeyMap};

use crate::aligned::AlignedBuf;
use crate::error::EngineError;
use crate::tier::region::{write_error, Staged};
use crate::tier::Place;

/// The most bytes one write of a run of adjacent jobs carries.
pub const RUN_BYTES: usize = 256 << 10;

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

/// How a job's write ended: its result, and whether it made a device write of its own (the
/// first of a run written whole, or a block written alone).
pub type Written = (Result<(), EngineError>, bool);

/// The most adjacent slots of `slot_bytes` a shard holds back as one run ([`Staging::stage`]):
/// what [`RUN_BYTES`] carries, and at most half of the region's `slack` slots, which the run's
/// slots stay pinned out of until they land.
pub fn run_slots(slot_bytes: usize, slack: u64) -> usize {
    (RUN_BYTES / slot_bytes).clamp(1, (slack / 2).max(1) as usize)
}

/// What one shard has staged for the write-behind: the blocks whose writes are behind, by key
/// (reads of them are served from here until they land), and the run of them held back while
/// it grows. Everything here runs under the shard's lock.
#[derive(Default)]
pub struct Staging {
    /// The queue, and this shard's index there; `None` when no write is behind.
    queue: Option<(Arc<WriteBehind>, usize)>,
    blocks: KeyMap<Arc<Staged>>,
    /// Staged writes held back while they make a run of adjacent slots.
    run: Vec<Job>,
}

impl Staging {
    /// The staging of shard `index`, whose writes go to `queue` (none: written at once).
    pub fn new(queue: Option<Arc<WriteBehind>>, index: usize) -> Staging {
        Staging { queue: queue.map(|q| (q, index)), ..Staging::default() }
    }

    /// Whether writes to file and flash tiers are behind.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.queue.is_some()
    }

    /// `key`'s block whose write is behind, if it is.
    #[inline]
    pub fn get(&self, key: Key) -> Option<&Staged> {
        self.blocks.get(&key).map(|staged| &**staged)
    }

    /// Forgets `key`'s staged block (it landed, or left the slot it was written to; a write
    /// under way still lands there, unread).
    #[inline]
    pub fn remove(&mut self, key: Key) {
        if !self.blocks.is_empty() {
            self.blocks.remove(&key);
        }
    }

    /// Stages `staged`, `key`'s block bound for `place` (its slot pinned by the caller), for
    /// the write-behind threads, holding it back while it continues a run of adjacent slots
    /// on its tier, up to `run_slots` ([`run_slots`]), so that the run reaches the device as
    /// one write. A flash tier hands its slots out in log order (`crate::tier::store`), so the
    /// writes of a tier run by the `log` policy follow one another (LRU's, which free slots
    /// wherever its victims lie, seldom do). The run goes when the next write does not continue
    /// it, when it is full, at the next tick and at shutdown.
    pub fn stage(&mut self, key: Key, place: Place, staged: Staged, run_slots: usize) {
        let shard = self.queue.as_ref().expect("staged with the write-behind on").1;
        let staged = Arc::new(staged);
        self.blocks.insert(key, staged.clone());
        let continues = self.run.last().is_some_and(|last| {
            let end = last.staged.at + last.staged.written as u64;
            Arc::ptr_eq(&last.staged.device, &staged.device) && end == staged.at
        });
        if !continues {
            self.release_run();
        }
        self.run.push(Job { shard, key, place, staged });
        if self.run.len() >= run_slots {
            self.release_run();
        }
    }

    /// Hands the staged writes held back to the write-behind threads.
    pub fn release_run(&mut self) {
        if let Some((queue, _)) = &self.queue {
            queue.submit_all(self.run.drain(..));
        }
    }
}

/// Starts `threads` write-behind threads on `queue`. Each writes runs of jobs as the queue
/// gathers them, whole or, if that fails, block by block, and hands every job with how its
/// write ended to `land`, which tells the job's shard. They exit once the queue is stopped and
/// empty.
pub fn start_writers(
    queue: &Arc<WriteBehind>,
    threads: usize,
    land: impl Fn(Job, Written) + Clone + Send + 'static,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|i| {
            let (queue, land) = (queue.clone(), land.clone());
            std::thread::Builder::new()
                .name(format!("tiercache-writer-{i}"))
                .spawn(move || {
                    let mut buf = AlignedBuf::new(RUN_BYTES);
                    while let Some(run) = queue.next_run(RUN_BYTES) {
                        // A run written whole, or, if that fails, block by block, so each
                        // block has its own outcome.
                        let joined = (run.len() > 1).then(|| {
                            let staged: Vec<&Staged> = run.iter().map(|job| &*job.staged).collect();
                            write_run(&staged, &mut buf).is_ok()
                        });
                        for (i, job) in run.into_iter().enumerate() {
                            let written = match joined {
                                Some(true) => (Ok(()), i == 0),
                                _ => (job.staged.run(), true),
                            };
                            land(job, written);
                            queue.done();
                        }
                    }
                })
                .expect("a write-behind thread starts")
        })
        .collect()
}

/// Writes blocks that lie end to end on one device, in device order (a run the queue
/// gathered), in one request: gathered by the device where it can, or copied into `buf`
/// (which must hold them all) and written from there.
pub fn write_run(run: &[&Staged], buf: &mut AlignedBuf) -> Result<(), EngineError> {
    let first = run[0];
    let parts: Vec<&[u8]> =
        run.iter().map(|staged| &staged.buf.as_slice()[..staged.written]).collect();
    // The queue joins only jobs whose bytes continue one another (`WriteBehind::next_run`).
    let end_to_end = run.windows(2).all(|w| w[0].at + w[0].written as u64 == w[1].at);
    assert!(end_to_end, "the blocks of a run lie end to end");
    (first.device.write_parts_at(&parts, first.at, buf.as_mut_slice()))
        .map_err(|source| write_error(&*first.device, source))
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

    /// Queues jobs together (a run a shard held back: see [`Staging::stage`]), so that one
    /// thread finds them all queued and writes them as one run. Called with the shard locked;
    /// the threads never lock a shard while holding the queue, so the order of locks is always
    /// shard, then queue.
    pub fn submit_all(&self, jobs: impl IntoIterator<Item = Job>) {
        let mut state = self.state();
        let before = state.jobs.len();
        state.jobs.extend(jobs);
        let added = state.jobs.len() - before;
        if added == 0 {
            return;
        }
        state.unfinished += added;
        drop(state);
        self.work.notify_one();
    }

    /// The oldest job and the queued jobs whose bytes continue it on its device without a
    /// gap, on either side, in device order, carrying at most `max_bytes` together (the first
    /// job alone may carry more); `None` once stopping and nothing is left.
    pub fn next_run(&self, max_bytes: usize) -> Option<Vec<Job>> {
        let mut state = self.state();
        let first = loop {
            if let Some(job) = state.jobs.pop_front() {
                break job;
            }
            if state.stopping {
                return None;
            }
            state = self.work.wait(state).unwrap_or_else(|p| p.into_inner());
        };
        if state.jobs.is_empty() {
            return Some(vec![first]);
        }
        // The queued jobs on the first one's device, by where their bytes start and end.
        let span = |job: &Job| (job.staged.at, job.staged.at + job.staged.written as u64);
        let device = &first.staged.device;
        let same: Vec<(usize, (u64, u64))> = (state.jobs.iter().enumerate())
            .filter(|(_, job)| Arc::ptr_eq(&job.staged.device, device))
            .map(|(i, job)| (i, span(job)))
            .collect();
        let starting: HashMap<u64, (usize, u64)> =
            same.iter().map(|&(i, (start, end))| (start, (i, end))).collect();
        let ending: HashMap<u64, (usize, u64)> =
            same.iter().map(|&(i, (start, end))| (end, (i, start))).collect();
        // Grown a job at a time at either end (a job after it is never one before it).
        let (mut start, mut end) = span(&first);
        let mut taken = Vec::new();
        loop {
            let fits = |(a, b): (u64, u64)| (end - start + b - a) as usize <= max_bytes;
            if let Some(&(i, next_end)) = starting.get(&end).filter(|(_, e)| fits((end, *e))) {
                end = next_end;
                taken.push(i);
            } else if let Some(&(i, s)) = ending.get(&start).filter(|(_, s)| fits((*s, start))) {
                start = s;
                taken.push(i);
            } else {
                break;
            }
        }
        let mut run = vec![first];
        if !taken.is_empty() {
            taken.sort_unstable();
            for (i, job) in std::mem::take(&mut state.jobs).into_iter().enumerate() {
                match taken.binary_search(&i) {
                    Ok(_) => run.push(job),
                    Err(_) => state.jobs.push_back(job),
                }
            }
            run.sort_unstable_by_key(|job| job.staged.at);
        }
        Some(run)
    }

    /// Marks a job returned by `next_run` finished.
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

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::Path;

    use super::*;
    use crate::device::Device;
    use crate::tier::block::Stamp;
    use crate::tier::region::IoBuf;

    /// A device that keeps the writes it gets.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<(u64, Vec<u8>)>>);

    impl Device for Recorder {
        fn path(&self) -> &Path {
            Path::new("<recorder>")
        }
        fn read_at(&self, _: &mut [u8], _: u64) -> io::Result<usize> {
            Ok(0)
        }
        fn write_at(&self, data: &[u8], at: u64) -> io::Result<()> {
            self.0.lock().unwrap().push((at, data.to_vec()));
            Ok(())
        }
        fn sync(&self) -> io::Result<()> {
            Ok(())
        }
        fn len(&self) -> io::Result<u64> {
            Ok(u64::MAX)
        }
    }

    const BLOCK: usize = 4096;

    /// A job writing block `slot` of `device`, its bytes all `slot as u8`.
    fn job(device: &Arc<Recorder>, slot: u32) -> Job {
        let device: Arc<dyn Device> = device.clone();
        let staged = Staged {
            device,
            at: slot as u64 * BLOCK as u64,
            key: slot as u64,
            buf: IoBuf::Plain(vec![slot as u8; BLOCK]),
            written: BLOCK,
            value_at: 0,
            len: BLOCK as u32,
            crc: 0,
            stamp: Stamp::default(),
            pages: Vec::new(),
        };
        Job { shard: 0, key: slot as u64, place: Place::new(1, slot), staged: Arc::new(staged) }
    }

    fn slots(run: &[Job]) -> Vec<u32> {
        run.iter().map(|job| job.place.slot).collect()
    }

    #[test]
    fn a_run_gathers_the_queued_jobs_that_continue_the_first_on_its_device() {
        let (a, b) = (Arc::new(Recorder::default()), Arc::new(Recorder::default()));
        let queue = WriteBehind::default();
        queue.submit_all([job(&a, 4), job(&b, 5), job(&a, 3), job(&a, 5), job(&a, 8)]);
        // 4 first, then 5 after it and 3 before it; b's 5 is on another device, and a's 8
        // leaves a gap.
        let run = queue.next_run(RUN_BYTES).unwrap();
        assert_eq!(slots(&run), [3, 4, 5]);
        assert_eq!(slots(&queue.next_run(RUN_BYTES).unwrap()), [5]);
        assert_eq!(slots(&queue.next_run(RUN_BYTES).unwrap()), [8]);
        // One request carries the run, each block where it goes.
        let staged: Vec<&Staged> = run.iter().map(|job| &*job.staged).collect();
        let mut buf = AlignedBuf::new(RUN_BYTES);
        write_run(&staged, &mut buf).unwrap();
        let writes = a.0.lock().unwrap();
        assert_eq!(writes.len(), 1);
        let (at, bytes) = &writes[0];
        assert_eq!((*at, bytes.len()), (3 * BLOCK as u64, 3 * BLOCK));
        for (i, slot) in [3u8, 4, 5].into_iter().enumerate() {
            assert!(bytes[i * BLOCK..(i + 1) * BLOCK].iter().all(|&x| x == slot), "block {slot}");
        }
    }

    #[test]
    fn a_run_stops_at_its_byte_limit_and_jobs_are_counted_until_done() {
        let a = Arc::new(Recorder::default());
        let queue = WriteBehind::default();
        queue.submit_all((0..5).map(|slot| job(&a, slot)));
        assert_eq!(slots(&queue.next_run(2 * BLOCK).unwrap()), [0, 1]);
        assert_eq!(slots(&queue.next_run(2 * BLOCK).unwrap()), [2, 3]);
        assert_eq!(queue.state().unfinished, 5, "taken is not done");
        for _ in 0..4 {
            queue.done();
        }
        queue.stop();
        assert_eq!(slots(&queue.next_run(2 * BLOCK).unwrap()), [4], "stopping drains the queue");
        assert!(queue.next_run(2 * BLOCK).is_none());
    }
}
