//! Cache policies as pure, deterministic state machines ([`Policy`], in the `policy` module).
//! For each request a policy returns a [`Decision`](tiercache_core::Decision): where the data
//! is served from and the actions (insert, evict, move, write back...) that carry the decision
//! out. A policy never does any of it: it has no clock, no I/O, no threads and no global
//! randomness. The simulator applies decisions to counters; the engine applies the very same
//! decisions to real media.
//!
//! Single-tier policies are written as [`Eviction`] state machines (find, insert, evict,
//! remove) and wrapped by [`SingleTier`], which owns the parts they all share: capacity checks,
//! admission filters, reads versus writes versus deletes, and the action list. Every policy is
//! registered in one place, [`PolicyConfig`] and [`AnyPolicy`].

pub mod admission;
pub mod conformance;
pub mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzz;
pub mod hibachi;
pub mod hierarchy;
pub mod hybrid_arc;
pub mod index;
pub mod list;
pub mod params;
pub mod placed;
pub mod policy;
pub mod queue;
pub mod rank;
pub mod registry;
pub mod sampled;
pub mod stack;
pub mod told;

pub mod arc;
pub mod belady;
pub mod belady_size;
pub mod cacheus;
pub mod cas;
pub mod clock;
pub mod clock2qplus;
pub mod clockpro;
pub mod fifo;
pub mod gdsf;
pub mod hyperbolic;
pub mod lecar;
pub mod lfru;
pub mod lfu;
pub mod lfuda;
pub mod lhd;
pub mod lirs;
pub mod log;
pub mod lru;
pub mod lruk;
pub mod lruprob;
pub mod mq;
pub mod nhc;
pub mod nvcache;
pub mod random;
pub mod s3fifo;
pub mod seqlist;
pub mod setassoc;
pub mod sharded;
pub mod sieve;
pub mod size;
pub mod slru;
pub mod twoq;
pub mod wtinylfu;

pub use admission::{Admission, AdmissionConfig};
pub use error::PolicyError;
pub use frame::{Eviction, SingleTier, Sink};
pub use hierarchy::Placement;
pub use policy::Policy;
pub use registry::{AnyPolicy, PolicyConfig, MAX_TIERS};
pub use stack::{StackConfig, StackSpec};
pub use told::HitRule;
