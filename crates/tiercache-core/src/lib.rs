//! The vocabulary every tiercache crate speaks: what a request is, which tier holds what, the
//! actions a policy returns, how capacity is counted, and the seeded randomness and hashing that
//! keep runs reproducible.
//!
//! This crate does no I/O, reads no clock and holds no global state. Everything here is plain
//! data or a pure function, so the simulator and the engine can share it unchanged.

pub mod action;
pub mod capacity;
pub mod device;
pub mod error;
pub mod hash;
pub mod limits;
pub mod request;
pub mod rng;
pub mod signal;

pub use action::{Action, Decision, Location, RejectReason, TierId};
pub use capacity::{format_size, parse_size, Capacity, Unit};
pub use device::{DeviceProfile, Direction};
pub use error::CoreError;
pub use hash::{fnv1a_64, shard_index, shard_seed, KeyBuildHasher, KeyHasher, KeyMap, KeySet};
pub use request::{
    annotate_next_access, scsi_op, split_volume_key, volume_key, Key, Op, Request, NEVER,
};
pub use rng::SeededRng;
pub use signal::Interval;
