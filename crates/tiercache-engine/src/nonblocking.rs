//! The cache for async programs ([`AsyncCache`]): every call returns a future, and none blocks
//! the calling thread on a device, so a program on tokio (or any other runtime) never stalls
//! its workers on a flash read or a miss's load. A hit in memory (a DRAM or mapped upper tier
//! served without the shard's lock) is answered at once, on the calling thread; anything that
//! may read a file or flash tier, wait for a shard's lock, or load a miss runs on the cache's
//! own I/O threads, and its future is woken when it is done. The futures need no runtime of
//! their own: the thread that finishes a call wakes the task that awaits it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tiercache_core::Key;

use crate::cache::Cache;
use crate::error::EngineError;
use crate::shard::PutOutcome;

type Job = Box<dyn FnOnce() + Send>;

/// The cache behind futures, with its I/O threads.
pub struct AsyncCache {
    cache: Arc<Cache>,
    jobs: Mutex<Option<Sender<Job>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl AsyncCache {
    /// `cache` with `threads` I/O threads (at least one): as many calls wait on devices at
    /// once as there are threads.
    pub fn new(cache: Cache, threads: usize) -> io::Result<AsyncCache> {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let threads = (0..threads.max(1))
            .map(|i| {
                let queue = queue.clone();
                std::thread::Builder::new().name(format!("tiercache-io-{i}")).spawn(move || loop {
                    let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return, // The cache was dropped.
                    }
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(AsyncCache { cache: Arc::new(cache), jobs: Mutex::new(Some(jobs)), threads })
    }

    /// The cache underneath (its statistics, its blocking calls).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// `key`'s value, or `None` on a miss (which admits nothing).
    pub fn get(&self, key: Key) -> Pending<Option<Vec<u8>>> {
        let mut buf = vec![0u8; self.cache.block_size()];
        if let Some(len) = self.cache.get_in_memory(key, &mut buf) {
            buf.truncate(len);
            return Pending::ready(Some(buf));
        }
        self.run(move |cache| cache.get(key, &mut buf).map(|len| buf[..len].to_vec()))
    }

    /// Writes `value` for `key` (write-allocate: a miss is cached if the policy admits it).
    pub fn put(&self, key: Key, value: Vec<u8>) -> Pending<Result<PutOutcome, EngineError>> {
        self.run(move |cache| cache.put(key, &value))
    }

    /// `key`'s value: a hit, or loaded by `load` into the buffer it is given (returning the
    /// length) and cached if the policy admits it; concurrent misses of one key load it once
    /// ([`Cache::fetch`]).
    pub fn fetch<F>(&self, key: Key, load: F) -> Pending<Result<Vec<u8>, EngineError>>
    where
        F: FnOnce(&mut [u8]) -> io::Result<usize> + Send + 'static,
    {
        let mut buf = vec![0u8; self.cache.block_size()];
        if let Some(len) = self.cache.get_in_memory(key, &mut buf) {
            buf.truncate(len);
            return Pending::ready(Ok(buf));
        }
        self.run(move |cache| {
            let outcome = cache.fetch(key, &mut buf, load)?;
            buf.truncate(outcome.len);
            Ok(buf)
        })
    }

    /// Runs `call` on an I/O thread; its future resolves to what it returns.
    fn run<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Cache) -> T + Send + 'static,
    ) -> Pending<T> {
        let shared = Arc::new(Mutex::new(Slot { value: None, waker: None }));
        let (cache, done) = (self.cache.clone(), shared.clone());
        let job: Job = Box::new(move || {
            let value = call(&cache);
            let waker = {
                let mut slot = done.lock().unwrap_or_else(|p| p.into_inner());
                slot.value = Some(value);
                slot.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sent = jobs.as_ref().map(|jobs| jobs.send(job));
        debug_assert!(matches!(sent, Some(Ok(()))), "the I/O threads live as long as the cache");
        Pending { shared }
    }
}

impl Drop for AsyncCache {
    /// Lets the I/O threads finish the calls queued, then joins them.
    fn drop(&mut self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// What a call's future waits for: its value, and the waker of the task awaiting it.
struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
}

/// The future of an [`AsyncCache`] call.
pub struct Pending<T> {
    shared: Arc<Mutex<Slot<T>>>,
}

impl<T> Pending<T> {
    fn ready(value: T) -> Pending<T> {
        Pending { shared: Arc::new(Mutex::new(Slot { value: Some(value), waker: None })) }
    }
}

impl<T> Future for Pending<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slot = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        match slot.value.take() {
            Some(value) => Poll::Ready(value),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
