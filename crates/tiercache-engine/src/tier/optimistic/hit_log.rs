//! The log of hits served without the lock and not yet told to their shard's policy: a ring
//! per shard and stripe, one writer each, committed in order by the lock holder.

use tiercache_core::Key;

use super::BATCH;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Cell, Ordering};

/// Hits served without the lock and not yet told to their shard's policy: per shard, a ring
/// per stripe. A stripe belongs to one thread at a time (see [`Stripe`]), so each ring has one
/// writer, and recording a hit takes no atomic read-modify-write: a hit is a plain store into
/// the ring and a release store of its tail. The shard's lock holder reads the rings and
/// advances their heads.
pub struct HitLog {
    stripes: usize,
    /// Shard-major: shard `s`, stripe `t` at `s * stripes + t`.
    rings: Box<[Ring]>,
    /// Per shard, a bit per stripe whose ring may hold hits.
    waiting: Box<[Waiting]>,
    /// Per stripe, the hits served without the lock that the policy need not be told of (the
    /// hit rule's; see `SlotTable::read`), counted here rather than logged.
    untold: Box<[Untold]>,
}

/// A stripe's count of hits not told (one writer: the stripe's thread).
#[repr(align(128))]
struct Untold {
    copied: AtomicU64,
    held: AtomicU64,
    bytes: AtomicU64,
}

/// Hits served without the lock and not told to the policy, over every stripe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UntoldHits {
    /// Copied out (`get`, `read_through`).
    pub copied: u64,
    /// Held in place by read handles.
    pub held: u64,
    /// Value bytes of both.
    pub bytes: u64,
}

#[repr(align(128))]
struct Ring {
    /// Hits recorded (written by the stripe's thread).
    tail: AtomicU32,
    /// Hits told to the policy (written by the shard's lock holder).
    head: AtomicU32,
    hits: [Cell<Hit>; BATCH],
}

// SAFETY: slot `i % BATCH` of `hits` is written only by the stripe's one thread, while
// `tail - head < BATCH` says no reader is at it, and read only by the shard's lock holder,
// for `head <= i < tail` (published by the release store of `tail`), before it releases the
// slot with a release store of `head`.
unsafe impl Sync for Ring {}

#[repr(align(128))]
struct Waiting(AtomicU64);

/// A hit served without the lock, to tell the policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hit {
    pub key: Key,
    /// The value's length, and [`Hit::HELD`] for a read handle's hit (held in place).
    pub len: u32,
    /// Nanoseconds it took (0 if latency is not recorded).
    pub ns: u32,
}

impl Hit {
    /// In `len`: the hit was a read handle's, its block held in place rather than copied.
    pub const HELD: u32 = 1 << 31;
    /// In `len`: the hit is only to be counted, not told to the policy (the hit rule spared
    /// it; logged rather than counted in the stripe when its latency is recorded).
    pub const UNTOLD: u32 = 1 << 30;
    /// Both flags: `len` without them is the value's length.
    pub const FLAGS: u32 = Hit::HELD | Hit::UNTOLD;
}

/// Stripes a cache may have: threads beyond it tell their hits under the lock.
const STRIPES_MAX: usize = 64;

/// A stripe number claimed by the calling thread for as long as it lives, the lowest free one,
/// shared by every cache: each ring then has a single writer. `None` when all
/// `STRIPES_MAX` are taken by live threads.
pub struct Stripe(Option<usize>);

#[cfg(not(loom))]
static CLAIMED: [AtomicBool; STRIPES_MAX] = [const { AtomicBool::new(false) }; STRIPES_MAX];

#[cfg(loom)]
loom::lazy_static! {
    static ref CLAIMED: [AtomicBool; STRIPES_MAX] = std::array::from_fn(|_| AtomicBool::new(false));
}

impl Stripe {
    fn claim() -> Stripe {
        Stripe(CLAIMED.iter().position(|c| {
            c.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        }))
    }

    /// The calling thread's stripe.
    #[inline]
    fn mine() -> Option<usize> {
        #[cfg(not(loom))]
        thread_local! {
            static STRIPE: Stripe = Stripe::claim();
        }
        #[cfg(loom)]
        loom::thread_local! {
            static STRIPE: Stripe = Stripe::claim();
        }
        // None as well while the thread's locals are being torn down (a cache read from
        // another thread-local's destructor).
        STRIPE.try_with(|s| s.0).ok().flatten()
    }
}

// (Not under loom, whose statics are gone when a model's last thread-locals drop; each model
// execution starts with every stripe free anyway.)
#[cfg(not(loom))]
impl Drop for Stripe {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            // The thread's last ring writes happen before the next owner's first (release,
            // then its acquire when claiming).
            CLAIMED[i].store(false, Ordering::Release);
        }
    }
}

/// `n` empty rings, in zeroed memory from the allocator: a large zeroed allocation comes
/// straight from the kernel, so only the pages of rings that are used get committed (with 16
/// shards a core and up to 64 stripes, a 64-core machine has 65,536 rings of 1.1 KiB).
#[cfg(not(loom))]
fn empty_rings(n: usize) -> Box<[Ring]> {
    let layout = std::alloc::Layout::array::<Ring>(n).expect("ring memory fits the address space");
    assert!(layout.size() > 0, "a hit log has rings");
    // SAFETY: the layout is not empty (asserted); a ring of zero bytes is an empty ring (its
    // indexes 0, its hits `Hit::default()`: atomics and cells of integers, valid as zeros), and
    // a pointer from the global allocator with the slice's layout is one `Box` may own.
    unsafe {
        let memory = std::alloc::alloc_zeroed(layout).cast::<Ring>();
        if memory.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(memory, n))
    }
}

/// `n` empty rings (under loom, whose atomics are objects of their own).
#[cfg(loom)]
fn empty_rings(n: usize) -> Box<[Ring]> {
    let ring = || Ring {
        tail: AtomicU32::new(0),
        head: AtomicU32::new(0),
        hits: std::array::from_fn(|_| Cell::default()),
    };
    (0..n).map(|_| ring()).collect()
}

/// What recording a hit came to.
pub enum Recorded {
    Yes,
    /// The thread's ring for the shard is full: commit it (lock the shard) and record again.
    Full,
    /// The thread has no stripe here: tell the policy under the lock.
    NoStripe,
}

impl HitLog {
    pub fn new(shards: usize) -> HitLog {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let stripes = (4 * cores).next_power_of_two().clamp(8, STRIPES_MAX);
        let untold = || Untold {
            copied: AtomicU64::new(0),
            held: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        };
        HitLog {
            stripes,
            rings: empty_rings(shards * stripes),
            waiting: (0..shards).map(|_| Waiting(AtomicU64::new(0))).collect(),
            untold: (0..stripes).map(|_| untold()).collect(),
        }
    }

    /// Counts a hit served without the lock that the policy need not be told of (`len` with
    /// [`Hit::HELD`] for a read handle's), in the calling thread's stripe: its own line, no
    /// atomic read-modify-write. False if the thread has no stripe (the caller counts it under
    /// the lock).
    #[inline]
    pub fn count_untold(&self, len: u32) -> bool {
        let Some(stripe) = Stripe::mine().filter(|&s| s < self.stripes) else {
            return false;
        };
        let counts = &self.untold[stripe];
        let add = |counter: &AtomicU64, n: u64| {
            counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        };
        match len & Hit::HELD {
            0 => add(&counts.copied, 1),
            _ => add(&counts.held, 1),
        }
        add(&counts.bytes, (len & !Hit::HELD) as u64);
        true
    }

    /// The hits counted by `count_untold`, over every stripe.
    pub fn untold(&self) -> UntoldHits {
        self.untold.iter().fold(UntoldHits::default(), |sum, counts| UntoldHits {
            copied: sum.copied + counts.copied.load(Ordering::Relaxed),
            held: sum.held + counts.held.load(Ordering::Relaxed),
            bytes: sum.bytes + counts.bytes.load(Ordering::Relaxed),
        })
    }

    /// Records a hit on `shard` in the calling thread's ring.
    #[inline]
    pub fn record(&self, shard: usize, hit: Hit) -> Recorded {
        let Some(stripe) = Stripe::mine().filter(|&s| s < self.stripes) else {
            return Recorded::NoStripe;
        };
        let ring = &self.rings[shard * self.stripes + stripe];
        let tail = ring.tail.load(Ordering::Relaxed);
        let head = ring.head.load(Ordering::Acquire);
        if tail.wrapping_sub(head) as usize == BATCH {
            return Recorded::Full;
        }
        // SAFETY: this thread is the ring's only writer (it holds the stripe), and the slot
        // is free: the reader released it (its head is past it) or never reached it.
        unsafe { ring.hits[tail as usize % BATCH].set(hit) };
        ring.tail.store(tail.wrapping_add(1), Ordering::Release);
        // A ring that was empty is flagged (once per batch, not per hit: the flags' line is
        // written by every lock holder). A ring the lock holder found grown while it took it
        // is flagged again by that holder. Between them a hit can still go unflagged for a
        // while when this thread and another lock holder race (each may read the other's old
        // index); it is then told when this thread next locks the shard (which takes its own
        // ring, flagged or not: when the ring fills, at the latest) or when counts are taken
        // (`take` of every ring): later, never lost, and always before this thread's next
        // locked request.
        if tail == head {
            self.waiting[shard].0.fetch_or(1 << stripe, Ordering::Relaxed);
        }
        Recorded::Yes
    }

    /// Takes the hits recorded for `shard` in flagged rings and the calling thread's own (or,
    /// with `every`, in all rings), ring by ring, in each ring's order. The caller holds the
    /// shard's lock, so nothing else takes them meanwhile. (Not every ring when a thread's
    /// ring fills: with the data a hit copies streaming through the CPU's caches, the other
    /// rings' lines are cold by then, and reading them cost more than the hits they hold.)
    pub fn take(&self, shard: usize, every: bool, mut each: impl FnMut(&[Hit])) {
        let waiting = &self.waiting[shard].0;
        // Read first: most lockings find nothing flagged, and a read keeps the line shared.
        let flagged = match waiting.load(Ordering::Relaxed) {
            0 => 0,
            _ => waiting.swap(0, Ordering::Relaxed),
        };
        let mine = Stripe::mine().filter(|&s| s < self.stripes).map_or(0, |s| 1 << s);
        let mut flagged = if every { u64::MAX >> (64 - self.stripes) } else { flagged | mine };
        let mut hits = [Hit::default(); BATCH];
        while flagged != 0 {
            let stripe = flagged.trailing_zeros() as usize;
            flagged &= flagged - 1;
            let ring = &self.rings[shard * self.stripes + stripe];
            let head = ring.head.load(Ordering::Relaxed);
            let tail = ring.tail.load(Ordering::Acquire);
            let n = tail.wrapping_sub(head) as usize;
            for (i, hit) in hits[..n].iter_mut().enumerate() {
                // SAFETY: slots from head to tail were published by the release store of tail
                // (acquired above), and the writer leaves them until head moves past.
                *hit = unsafe { ring.hits[head.wrapping_add(i as u32) as usize % BATCH].get() };
            }
            ring.head.store(tail, Ordering::Release);
            if ring.tail.load(Ordering::Relaxed) != tail {
                // Hits recorded meanwhile, maybe into what the writer saw as a nonempty ring.
                waiting.fetch_or(1 << stripe, Ordering::Relaxed);
            }
            if n > 0 {
                each(&hits[..n]);
            }
        }
    }
}
