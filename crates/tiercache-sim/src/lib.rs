//! The simulator: runs a policy over a request stream and counts what its decisions cost. It
//! applies each decision's actions to counters (this crate's no-time mode; device models and
//! virtual time build on the same loop). Policies come from `tiercache-policy` unchanged, so
//! what is measured here is what the engine will run.

pub mod counters;
pub mod mrc;
pub mod run;
pub mod sweep;

pub use counters::Counters;
pub use run::{
    build, simulate, simulate_slice, simulate_slice_observed, RunError, RunOptions, SimReport,
};
pub use sweep::{sweep, SweepPoint};
pub mod model;
pub mod timed;
