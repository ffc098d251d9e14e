//! A cache described as a policy stack ([`StackConfig`]): what `sim`, experiment files and
//! `serve --config` describe, put on the engine's media.

use tiercache_policy::StackConfig;

use super::{CacheBuilder, TierSpec};
use crate::error::EngineError;
use crate::tier::TierKind;

impl CacheBuilder {
    /// A policy stack, as `sim`, experiment files and `serve --config` describe one
    /// ([`StackConfig`]), over `media`, one per tier top down: each tier's policy and capacity,
    /// the placement, admission, NVCache, cache mode, NHC, seed and shards. The engine counts
    /// capacity in bytes; a stack counted in objects is an error naming `unit`, and so is a stack with
    /// another number of tiers than `media` has.
    pub fn stack(mut self, stack: &StackConfig, media: Vec<TierKind>) -> Result<Self, EngineError> {
        if stack.tiers.len() != media.len() {
            let reason = format!(
                "the stack has {} tiers and the cache {} media to put them on",
                stack.tiers.len(),
                media.len()
            );
            return Err(EngineError::config("tiers", reason));
        }
        let mut tiers = Vec::new();
        for ((policy, capacity), kind) in stack.tiers.iter().zip(media) {
            if capacity.unit != tiercache_core::Unit::Bytes {
                let reason = "the engine sizes its tiers in bytes: use unit = \"bytes\"";
                return Err(EngineError::config("unit", reason));
            }
            let capacity_bytes = capacity.amount;
            tiers.push(TierSpec { kind, capacity_bytes, policy: policy.clone(), profile: None });
        }
        self.tiers = tiers;
        self.placement = stack.placement;
        self.large_values = stack.large_values;
        self.admission = stack.admission.clone();
        self.nvcache = stack.nvcache.clone();
        self.mode = stack.mode.clone();
        self.nhc = stack.nhc.clone();
        self.seed = stack.seed;
        if let Some(rule) = stack.hit_rule {
            self.hit_rule = rule;
        }
        if let Some(shards) = stack.shards {
            self.shards = shards;
        }
        if let Some(us) = stack.tick_us {
            self.tick_every = Some(std::time::Duration::from_micros(us));
        }
        Ok(self)
    }
}
