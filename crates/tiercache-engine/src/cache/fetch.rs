//! [`CacheCore::fetch`]: a read through the cache whose misses of one key load it once, however
//! many threads miss it at the same time (what foyer's `fetch` and CacheLib's lookups of a key
//! being filled give): the first thread to miss runs its loader, the others wait for it and
//! get its value, or its error. A thundering herd on a cold key costs one backing read.
//!
//! A thread that waited then reads the key through the cache as a look-up, so the policy is
//! told of its access as of any other (a hit if the value was admitted); where the policy did
//! not admit it, the thread gets the value the loader read. A one-thread engine never waits,
//! and decides exactly as `read_through` does.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Condvar, Mutex};

use tiercache_core::Key;

use super::CacheCore;
use crate::error::EngineError;
use crate::shard::ReadOutcome;

/// The loads under way, by key.
#[derive(Default)]
pub(crate) struct Loads {
    under_way: Mutex<HashMap<Key, Arc<Load>>>,
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
        if let Some(len) = self.get(key, buf) {
            return Ok(ReadOutcome { hit: true, len });
        }
        let (flight, first) = {
            let mut under_way = self.loads.under_way.lock().unwrap_or_else(|p| p.into_inner());
            match under_way.get(&key) {
                Some(flight) => (flight.clone(), false),
                None => {
                    let flight = Arc::new(Load::default());
                    under_way.insert(key, flight.clone());
                    (flight, true)
                }
            }
        };
        if first {
            let result = self.read_through(key, buf, load);
            // Out of the map first: no thread joins a load that has ended. Whoever holds the
            // load now waits for it; the value is copied only for them.
            let waiting = {
                let mut under_way = self.loads.under_way.lock().unwrap_or_else(|p| p.into_inner());
                under_way.remove(&key);
                Arc::strong_count(&flight) > 1
            };
            if waiting {
                let shared = match &result {
                    Ok(outcome) => Ok(buf[..outcome.len].to_vec()),
                    Err(e) => Err(e.to_string()),
                };
                *flight.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(shared);
                flight.wake.notify_all();
            }
            return result;
        }
        let mut ended = flight.ended.lock().unwrap_or_else(|p| p.into_inner());
        while ended.is_none() {
            ended = flight.wake.wait(ended).unwrap_or_else(|p| p.into_inner());
        }
        match ended.as_ref().expect("ended") {
            Ok(value) => {
                let value = value.clone();
                drop(ended);
                // Told to the policy as any access; the loader's value if it was not admitted.
                if let Some(len) = self.get(key, buf) {
                    return Ok(ReadOutcome { hit: true, len });
                }
                let len = value.len().min(buf.len());
                buf[..len].copy_from_slice(&value[..len]);
                Ok(ReadOutcome { hit: false, len })
            }
            Err(reason) => Err(EngineError::SharedLoad { key, reason: reason.clone() }),
        }
    }
}
