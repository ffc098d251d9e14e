//! Slots for connections that have yet to prove themselves (an NBD handshake, an HTTP request
//! line): a pool of at most `max`, oldest first, each held with a way to close it. A new
//! connection that finds the pool full closes the one that has been in it longest, so clients
//! that take their time (a byte now and then) can hold a slot only until a newer client comes,
//! and never keep out one whose handshake takes the usual milliseconds. A connection leaves
//! the pool when its [`Ticket`] drops: once it has proved itself, or ended.

use std::sync::{Arc, Mutex};

/// A connection the pool can close from outside: every thread blocked on it returns.
pub trait Close: Send {
    fn close(&self);
}

impl Close for std::net::TcpStream {
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
}

/// The connections in the pool, oldest first, by their ticket's number.
pub struct Slots<S> {
    max: usize,
    open: Mutex<(u64, Vec<(u64, S)>)>,
}

/// A connection's place in the pool, left when it drops.
pub struct Ticket<S: Close> {
    pool: Arc<Slots<S>>,
    id: u64,
}

impl<S: Close> Slots<S> {
    /// A pool of `max` slots (at least one).
    pub fn new(max: usize) -> Arc<Slots<S>> {
        Arc::new(Slots { max: max.max(1), open: Mutex::new((0, Vec::new())) })
    }

    /// Takes a slot for the connection `handle` closes, closing the oldest connection in the
    /// pool first if it is full; true in the second place if it did.
    pub fn enter(pool: &Arc<Slots<S>>, handle: S) -> (Ticket<S>, bool) {
        let mut open = pool.open.lock().unwrap_or_else(|p| p.into_inner());
        let full = open.1.len() >= pool.max;
        if full {
            let (_, oldest) = open.1.remove(0);
            oldest.close();
        }
        open.0 += 1;
        let id = open.0;
        open.1.push((id, handle));
        (Ticket { pool: pool.clone(), id }, full)
    }

    /// Connections in the pool now.
    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).1.len()
    }

    /// Whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<S: Close> Drop for Ticket<S> {
    fn drop(&mut self) {
        let mut open = self.pool.open.lock().unwrap_or_else(|p| p.into_inner());
        open.1.retain(|(id, _)| *id != self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Arc<AtomicUsize>, usize);

    impl Close for Counted {
        fn close(&self) {
            self.0.store(self.1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_full_pool_closes_its_oldest_and_a_dropped_ticket_frees_its_slot() {
        let closed = Arc::new(AtomicUsize::new(0));
        let pool = Slots::new(2);
        let (first, _) = Slots::enter(&pool, Counted(closed.clone(), 1));
        let (second, full) = Slots::enter(&pool, Counted(closed.clone(), 2));
        assert!(!full && pool.len() == 2);
        let (third, full) = Slots::enter(&pool, Counted(closed.clone(), 3));
        assert!(full, "the pool was full");
        assert_eq!(closed.load(Ordering::SeqCst), 1, "the oldest is closed");
        drop(first); // Already out of the pool: nothing changes.
        assert_eq!(pool.len(), 2);
        drop(second);
        let (_fourth, full) = Slots::enter(&pool, Counted(closed.clone(), 4));
        assert!(!full, "the slot the second left is free");
        drop(third);
        assert_eq!(pool.len(), 1);
    }
}
