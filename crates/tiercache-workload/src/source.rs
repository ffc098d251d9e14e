//! The batch interface every trace reader implements, and its adapter for plain iterators.
//! Readers (the `formats` module) and the opener (the `reader` module) both depend on it; it
//! depends on neither.

use tiercache_core::Request;

use crate::error::TraceError;

/// Requests a reader can hand over in batches, so the per-request cost of reading is a decode
/// and not a call through a trait object returning a large `Result`.
pub trait RequestSource: Send {
    /// Appends up to `max` requests to `out` and returns how many; 0 only at the end. A bad
    /// record stops the batch: the requests before it are kept in `out` and its error returned.
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError>;
}

/// Any iterator of requests as a [`RequestSource`].
pub struct IterSource<I>(pub I);

impl<I: Iterator<Item = Result<Request, TraceError>> + Send> RequestSource for IterSource<I> {
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let mut added = 0;
        while added < max {
            match self.0.next() {
                Some(Ok(req)) => {
                    out.push(req);
                    added += 1;
                }
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        Ok(added)
    }
}
