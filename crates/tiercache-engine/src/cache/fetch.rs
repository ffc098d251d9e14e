//! [`CacheCore::fetch`]: a read through the cache whose misses of one key load it once, however
//! many threads miss it at the same time (what foyer's `fetch` and CacheLib's lookups of a key
//! being filled give): the first thread to miss runs its loader, the others wait for it and
//! get its value, or its error. A thundering herd on a cold key costs one backing read.
//!
//! A thread that waited then reads the key through the cache as a look-up, so the policy is
//! told of its access as of any other (a hit if the value was admitted); where the policy did
//! not admit it, the thread gets the value the loader read. A one-thread engine never waits,
//! and decides exactly as `read_through` does: a fetch tries only the lock-free hit first
//! (`read_through`'s own first step, which tells the policy nothing on a miss), and its first
//! thread then reads through once. The loads under way are kept in stripes by key, so fetches
//! of different keys rarely meet on a lock.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use tiercache_core::Key;

use super::CacheCore;
use crate::error::EngineError;
use crate::shard::ReadOutcome;

/// Stripes of the loads under way (a power of two).
const STRIPES_BITS: u32 = 6;

/// The loads under way, by key, in stripes.
pub(crate) struct Loads {
    under_way: Box<[Stripe]>,
}

/// One stripe's loads under way.
type Stripe = Mutex<HashMap<Key, Arc<Load>>>;

impl Default for Loads {
    fn default() -> Loads {
        Loads { under_way: (0..1 << STRIPES_BITS).map(|_| Mutex::default()).collect() }
    }
}

impl Loads {
    /// The loads under way in `key`'s stripe.
    fn stripe(&self, key: Key) -> std::sync::MutexGuard<'_, HashMap<Key, Arc<Load>>> {
        let stripe = &self.under_way[tiercache_core::shard_index(key, STRIPES_BITS)];
        stripe.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One load, and what the threads waiting for it get once it ends: the value (only if some
/// thread waits) or the error's words.
#[derive(Default)]
struct Load {
    ended: Mutex<Option<Result<Vec<u8>, String>>>,
    wake: Condvar,
}

impl CacheCore {
    /// Reads `key` through the cache as [`read_through`](Self::read_through) does, except that
    /// concurrent misses of one key run one `load`: the others wait for it and get its value
    /// (or [`EngineError::SharedLoad`] if it failed). A later miss, once that load has ended,
    /// loads again.
    pub fn fetch(
        &self,
        key: Key,
        buf: &mut [u8],
        load: impl FnOnce(&mut [u8]) -> io::Result<usize>,
    ) -> Result<ReadOutcome, EngineError> {
        if let Some(len) = self.get_in_memory(key, buf) {
            return Ok(ReadOutcome { hit: true, len });
        }
        let (flight, first) = self.join_load(key);
        if first {
            let result = self.read_through(key, buf, load);
            let shared = match &result {
                Ok(outcome) => Ok(&buf[..outcome.len]),
                Err(e) => Err(e.to_string()),
            };
            self.end_load(key, &flight, shared);
            return result;
        }
        let value = flight.wait(key)?;
        // Told to the policy as any access; the loader's value if it was not admitted.
        if let Some(len) = self.get(key, buf) {
            return Ok(ReadOutcome { hit: true, len });
        }
        let len = value.len().min(buf.len());
        buf[..len].copy_from_slice(&value[..len]);
        Ok(ReadOutcome { hit: false, len })
    }

    /// `key`'s whole value, however long (see [`get_object`](Self::get_object)): a hit, or
    /// on a miss the value `load` returns, read through the cache with
    /// [`admit`](Self::admit), and whether it was a hit. Concurrent misses of one key run one
    /// `load`, as [`fetch`](Self::fetch)'s do; the others wait and get its value or
    /// [`EngineError::SharedLoad`]. A one-thread engine decides as a read-through: a lookup's
    /// miss followed by the read that admits the value is the read (`Op::Lookup`).
    pub fn fetch_object(
        &self,
        key: Key,
        load: impl FnOnce() -> io::Result<Vec<u8>>,
    ) -> Result<(Vec<u8>, bool), EngineError> {
        let mut buf = vec![0u8; self.block_size()];
        if let Some(len) = self.get_in_memory(key, &mut buf) {
            buf.truncate(len);
            return Ok((buf, true));
        }
        let (flight, first) = self.join_load(key);
        if first {
            let result = match self.get_object(key) {
                Some(value) => Ok((value, true)),
                None => match load() {
                    Ok(value) => self.admit(key, &value).map(|_| (value, false)),
                    Err(source) => Err(EngineError::Io {
                        path: "<loader>".into(),
                        action: "loading a missed object failed",
                        source,
                    }),
                },
            };
            let shared = match &result {
                Ok((value, _)) => Ok(&value[..]),
                Err(e) => Err(e.to_string()),
            };
            self.end_load(key, &flight, shared);
            return result;
        }
        let value = flight.wait(key)?;
        match self.get_object(key) {
            Some(cached) => Ok((cached, true)),
            None => Ok((value, false)),
        }
    }

    /// Joins the load of `key` under way, or starts one: the load, and whether this thread
    /// runs it.
    fn join_load(&self, key: Key) -> (Arc<Load>, bool) {
        let mut under_way = self.loads.stripe(key);
        match under_way.get(&key) {
            Some(flight) => (flight.clone(), false),
            None => {
                let flight = Arc::new(Load::default());
                under_way.insert(key, flight.clone());
                (flight, true)
            }
        }
    }

    /// Ends the load of `key` this thread ran, with what it got, and wakes its waiters.
    fn end_load(&self, key: Key, flight: &Arc<Load>, shared: Result<&[u8], String>) {
        // Out of the map first: no thread joins a load that has ended. Whoever holds the
        // load now waits for it; the value is copied only for them.
        let waiting = {
            let mut under_way = self.loads.stripe(key);
            under_way.remove(&key);
            Arc::strong_count(flight) > 1
        };
        if waiting {
            let shared = shared.map(<[u8]>::to_vec);
            *flight.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(shared);
            flight.wake.notify_all();
        }
    }
}

impl Load {
    /// Waits for the load to end: its value, or the error of `key`'s load.
    fn wait(&self, key: Key) -> Result<Vec<u8>, EngineError> {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        while ended.is_none() {
            ended = self.wake.wait(ended).unwrap_or_else(|p| p.into_inner());
        }
        match ended.as_ref().expect("ended") {
            Ok(value) => Ok(value.clone()),
            Err(reason) => Err(EngineError::SharedLoad { key, reason: reason.clone() }),
        }
    }
}
