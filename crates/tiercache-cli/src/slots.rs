//! Slots for connections that have yet to prove themselves (an NBD handshake, an HTTP request
//! line): a pool of at most `max`, oldest first, each held with a way to close it. A new
//! connection that finds the pool full closes the one that has been in it longest, so clients
//! that take their time (a byte now and then) can hold a slot only until a newer client comes,
//! and never keep out one whose handshake takes the usual milliseconds. Each address has at
//! most a share of the pool: a new connection from an address that holds its share closes
//! that address's oldest instead, so one address cannot push out every other's. A connection
//! leaves the pool when its [`Ticket`] drops: once it has proved itself, or ended.

use std::net::IpAddr;
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

/// The connections in the pool, oldest first, by their ticket's number, with the address
/// each came from (none for a unix socket's).
pub struct Slots<S> {
    max: usize,
    per_address: usize,
    open: Mutex<(u64, Vec<Entry<S>>)>,
}

/// A connection in the pool: its ticket's number, its address, its handle.
type Entry<S> = (u64, Option<IpAddr>, S);

/// Which connection a new one closed to take its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    Nothing,
    /// The pool was full: the oldest in it.
    Oldest,
    /// Its address held its share: that address's oldest.
    SameAddress,
}

/// A connection's place in the pool, left when it drops.
pub struct Ticket<S: Close> {
    pool: Arc<Slots<S>>,
    id: u64,
}

impl<S: Close> Slots<S> {
    /// A pool of `max` slots (at least one), at most `per_address` of them (at least one)
    /// held by connections from one address.
    pub fn new(max: usize, per_address: usize) -> Arc<Slots<S>> {
        let (max, per_address) = (max.max(1), per_address.max(1));
        Arc::new(Slots { max, per_address, open: Mutex::new((0, Vec::new())) })
    }

    /// Takes a slot for the connection `handle` closes, which came `from` an address (or a
    /// unix socket): if that address holds its share, its oldest connection is closed first;
    /// else if the pool is full, the oldest of all.
    pub fn enter(pool: &Arc<Slots<S>>, from: Option<IpAddr>, handle: S) -> (Ticket<S>, Closed) {
        let mut open = pool.open.lock().unwrap_or_else(|p| p.into_inner());
        let same = |entry: &Entry<S>| from.is_some() && entry.1 == from;
        let closed = if open.1.iter().filter(|e| same(e)).count() >= pool.per_address {
            let oldest = open.1.iter().position(same).expect("a share held");
            open.1.remove(oldest).2.close();
            Closed::SameAddress
        } else if open.1.len() >= pool.max {
            open.1.remove(0).2.close();
            Closed::Oldest
        } else {
            Closed::Nothing
        };
        open.0 += 1;
        let id = open.0;
        open.1.push((id, from, handle));
        (Ticket { pool: pool.clone(), id }, closed)
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
        open.1.retain(|(id, _, _)| *id != self.id);
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
        let pool = Slots::new(2, 2);
        let (first, _) = Slots::enter(&pool, None, Counted(closed.clone(), 1));
        let (second, was) = Slots::enter(&pool, None, Counted(closed.clone(), 2));
        assert!(was == Closed::Nothing && pool.len() == 2);
        let (third, was) = Slots::enter(&pool, None, Counted(closed.clone(), 3));
        assert_eq!(was, Closed::Oldest, "the pool was full");
        assert_eq!(closed.load(Ordering::SeqCst), 1, "the oldest is closed");
        drop(first); // Already out of the pool: nothing changes.
        assert_eq!(pool.len(), 2);
        drop(second);
        let (_fourth, was) = Slots::enter(&pool, None, Counted(closed.clone(), 4));
        assert_eq!(was, Closed::Nothing, "the slot the second left is free");
        drop(third);
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn one_address_closes_its_own_oldest_not_anothers() {
        let closed = Arc::new(AtomicUsize::new(0));
        let pool = Slots::new(4, 2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let _other = Slots::enter(&pool, Some(b), Counted(closed.clone(), 1));
        let _tickets: Vec<_> = (10..15)
            .map(|n| {
                let (ticket, was) = Slots::enter(&pool, Some(a), Counted(closed.clone(), n));
                assert_eq!(was == Closed::SameAddress, n >= 12, "entry {n}");
                ticket
            })
            .collect();
        assert_eq!(closed.load(Ordering::SeqCst), 12, "a's own oldest went, the last at 14");
        assert_eq!(pool.len(), 3, "b's connection and a's share of 2");
        let (_, was) = Slots::enter(&pool, Some(b), Counted(closed.clone(), 2));
        assert_eq!(was, Closed::Nothing, "b still has room");
    }
}
