//! The one place policies are registered: [`PolicyConfig`] names a policy and its parameters
//! (serde, with the papers' defaults), and [`AnyPolicy::from_config`] builds it. A policy's
//! config owns its keys ([`Params`]); adding a policy means its file, a variant here, and a
//! line in each match below.

use serde::{Deserialize, Serialize};
use tiercache_core::{Capacity, Decision, Request, TierId};

use crate::admission::{Admission, AdmissionConfig};
use crate::arc::Arc;
use crate::belady::Belady;
use crate::cas::{Cas, CasConfig};
use crate::clock::{Clock, ClockConfig};
use crate::error::PolicyError;
use crate::fifo::Fifo;
use crate::frame::{Eviction, SingleTier};
use crate::hibachi::{Hibachi, HibachiConfig};
use crate::hierarchy::{Hybrid, Placement};
use crate::hybrid_arc::HybridArc;
use crate::lfru::{Lfru, LfruConfig};
use crate::lfu::{Lfu, LfuConfig};
use crate::lru::Lru;
use crate::s3fifo::{S3Fifo, S3FifoConfig};
use crate::setassoc::{SetAssoc, SetAssocConfig};
use crate::{Params, Policy};

/// A policy and its parameters, as written in a configuration file or on the command line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase")]
pub enum PolicyConfig {
    Fifo,
    Lru,
    Clock(ClockConfig),
    Lfu(LfuConfig),
    Arc,
    S3fifo(S3FifoConfig),
    Lfru(LfruConfig),
    Belady,
    /// Set-associative (capacity in objects).
    Setassoc(SetAssocConfig),
    /// Two tiers (DRAM and NVRAM) only.
    Hibachi(HibachiConfig),
    /// Two tiers (DRAM and NVRAM) only: Hibachi's Hybrid-ARC baseline.
    HybridArc,
}

const KNOWN: &str =
    "fifo, lru, clock, lfu, arc, s3fifo, lfru, belady, setassoc (objects), hibachi, \
                     hybrid-lru and hybrid-arc (two tiers)";

impl PolicyConfig {
    /// All policy names, for help texts and sweeps.
    pub const NAMES: [&'static str; 8] =
        ["fifo", "lru", "clock", "lfu", "arc", "s3fifo", "lfru", "belady"];

    /// Parses `name` or `name:key=value,key=value`, e.g. `clock:bits=2`, `lfu:aging_threshold=none`.
    pub fn parse(spec: &str) -> Result<PolicyConfig, PolicyError> {
        let (name, params) = match spec.split_once(':') {
            Some((n, p)) => (n.trim().to_ascii_lowercase(), p),
            None => (spec.trim().to_ascii_lowercase(), ""),
        };
        let mut config = match name.as_str() {
            "fifo" => PolicyConfig::Fifo,
            "lru" => PolicyConfig::Lru,
            "clock" => PolicyConfig::Clock(ClockConfig::default()),
            "lfu" => PolicyConfig::Lfu(LfuConfig::default()),
            "arc" => PolicyConfig::Arc,
            "s3fifo" | "s3-fifo" => PolicyConfig::S3fifo(S3FifoConfig::default()),
            "lfru" => PolicyConfig::Lfru(LfruConfig::default()),
            "belady" | "opt" | "min" => PolicyConfig::Belady,
            "setassoc" | "set-associative" => PolicyConfig::Setassoc(SetAssocConfig::default()),
            "hibachi" => PolicyConfig::Hibachi(HibachiConfig::default()),
            "hybrid-lru" => PolicyConfig::Hibachi(HibachiConfig {
                hybrid_lru: true,
                ..HibachiConfig::default()
            }),
            "hybrid-arc" => PolicyConfig::HybridArc,
            _ => return Err(PolicyError::UnknownPolicy { name, known: KNOWN.into() }),
        };
        for pair in params.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| PolicyError::bad(&name, pair, "needs the form key=value"))?;
            config.set(key.trim(), value.trim())?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Sets one parameter: the policy's config knows its keys ([`Params`]).
    fn set(&mut self, key: &str, value: &str) -> Result<(), PolicyError> {
        let name = self.name();
        match self {
            PolicyConfig::Clock(c) => c.set(name, key, value),
            PolicyConfig::Lfu(c) => c.set(name, key, value),
            PolicyConfig::S3fifo(c) => c.set(name, key, value),
            PolicyConfig::Lfru(c) => c.set(name, key, value),
            PolicyConfig::Hibachi(c) => c.set(name, key, value),
            PolicyConfig::Setassoc(c) => c.set(name, key, value),
            PolicyConfig::Fifo
            | PolicyConfig::Lru
            | PolicyConfig::Arc
            | PolicyConfig::Belady
            | PolicyConfig::HybridArc => Err(crate::unknown_key(name, key)),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Fifo => "fifo",
            PolicyConfig::Lru => "lru",
            PolicyConfig::Clock(_) => "clock",
            PolicyConfig::Lfu(_) => "lfu",
            PolicyConfig::Arc => "arc",
            PolicyConfig::S3fifo(_) => "s3fifo",
            PolicyConfig::Lfru(_) => "lfru",
            PolicyConfig::Belady => "belady",
            PolicyConfig::Setassoc(_) => "setassoc",
            PolicyConfig::Hibachi(_) => "hibachi",
            PolicyConfig::HybridArc => "hybrid-arc",
        }
    }

    pub fn validate(&self) -> Result<(), PolicyError> {
        match self {
            PolicyConfig::Clock(c) => c.validate(),
            PolicyConfig::Lfu(c) => c.validate(),
            PolicyConfig::S3fifo(c) => c.validate(),
            PolicyConfig::Lfru(c) => c.validate(),
            PolicyConfig::Setassoc(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// Whether the policy reads request times (periodic work), so callers must supply them.
    pub fn uses_time(&self) -> bool {
        matches!(self, PolicyConfig::Lfru(_))
    }

    /// Whether the policy reads `next_access` (the future), so the stream must be annotated.
    pub fn needs_future(&self) -> bool {
        matches!(self, PolicyConfig::Belady)
    }
}

impl PolicyConfig {
    /// The policy as the eviction half of a tier, for hierarchies that compose tiers.
    pub fn eviction(&self, capacity: Capacity) -> Result<Box<dyn Eviction + Send>, PolicyError> {
        self.validate()?;
        if self.needs_future() {
            return Err(PolicyError::bad(
                self.name(),
                "tier",
                "an offline policy cannot run one tier of a hierarchy",
            ));
        }
        Ok(match self {
            PolicyConfig::Fifo => Box::new(Fifo::new(capacity)),
            PolicyConfig::Lru => Box::new(Lru::new(capacity)),
            PolicyConfig::Clock(c) => Box::new(Clock::new(c, capacity)),
            PolicyConfig::Lfu(c) => Box::new(Lfu::new(c, capacity)),
            PolicyConfig::Arc => Box::new(Arc::new(capacity)),
            PolicyConfig::S3fifo(c) => Box::new(S3Fifo::new(c, capacity)),
            PolicyConfig::Lfru(c) => Box::new(Lfru::new(c, capacity)),
            PolicyConfig::Setassoc(c) => {
                c.check_capacity(capacity)?;
                Box::new(SetAssoc::new(c, capacity))
            }
            PolicyConfig::Belady => unreachable!("refused above"),
            PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => {
                return Err(PolicyError::bad(
                    self.name(),
                    "tier",
                    "is a two-tier policy, not one tier of a hierarchy",
                ))
            }
        })
    }
}

/// Any registered policy, built from its configuration. Dispatch is a `match`, so the
/// simulator's inner loop stays monomorphic per arm.
pub enum AnyPolicy {
    Fifo(SingleTier<Fifo>),
    Lru(SingleTier<Lru>),
    Clock(SingleTier<Clock>),
    Lfu(SingleTier<Lfu>),
    Arc(SingleTier<Arc>),
    S3fifo(SingleTier<S3Fifo>),
    Lfru(SingleTier<Lfru>),
    Belady(SingleTier<Belady>),
    Setassoc(SingleTier<SetAssoc>),
    /// Two tiers (Kassa et al.'s hybrid cache); tiers behind trait objects.
    Hybrid(Box<Hybrid>),
    /// Any of the above run in an Open CAS cache mode.
    Cas(Box<Cas<AnyPolicy>>),
    /// Hibachi over DRAM and NVRAM.
    Hibachi(Box<Hibachi>),
    /// Hibachi's Hybrid-ARC baseline over DRAM and NVRAM.
    HybridArc(Box<HybridArc>),
    /// A single-tier policy behind NVCache's admission (overhead bypass, small-bypass).
    Nvcache(Box<crate::nvcache::Nvcache<AnyPolicy>>),
    Nhc(Box<crate::nhc::Nhc<AnyPolicy>>),
    /// Independent stacks over the keys of each shard, as the engine runs them.
    Sharded(Box<crate::sharded::Sharded<AnyPolicy>>),
}

macro_rules! dispatch {
    ($self:expr, $p:ident => $body:expr) => {
        match $self {
            AnyPolicy::Fifo($p) => $body,
            AnyPolicy::Lru($p) => $body,
            AnyPolicy::Clock($p) => $body,
            AnyPolicy::Lfu($p) => $body,
            AnyPolicy::Arc($p) => $body,
            AnyPolicy::S3fifo($p) => $body,
            AnyPolicy::Lfru($p) => $body,
            AnyPolicy::Belady($p) => $body,
            AnyPolicy::Setassoc($p) => $body,
            AnyPolicy::Hybrid($p) => $body,
            AnyPolicy::Cas($p) => $body,
            AnyPolicy::Hibachi($p) => $body,
            AnyPolicy::HybridArc($p) => $body,
            AnyPolicy::Nvcache($p) => $body,
            AnyPolicy::Nhc($p) => $body,
            AnyPolicy::Sharded($p) => $body,
        }
    };
}

impl AnyPolicy {
    /// Builds a single-tier policy of `capacity` with an admission chain, seeded by `seed`.
    pub fn from_config(
        config: &PolicyConfig,
        capacity: Capacity,
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        config.validate()?;
        if capacity.amount == 0 {
            return Err(PolicyError::ZeroCapacity { unit: capacity.unit.as_str() });
        }
        let filters = Admission::new(admission, capacity, seed);
        Ok(match config {
            PolicyConfig::Hibachi(_) | PolicyConfig::HybridArc => {
                let reason =
                    "runs two tiers (DRAM and NVRAM): give a lower tier (--lower-capacity)";
                return Err(PolicyError::bad(config.name(), "tiers", reason));
            }
            PolicyConfig::Fifo => {
                AnyPolicy::Fifo(SingleTier::new(Fifo::new(capacity), capacity, filters))
            }
            PolicyConfig::Lru => {
                AnyPolicy::Lru(SingleTier::new(Lru::new(capacity), capacity, filters))
            }
            PolicyConfig::Clock(c) => {
                AnyPolicy::Clock(SingleTier::new(Clock::new(c, capacity), capacity, filters))
            }
            PolicyConfig::Lfu(c) => {
                AnyPolicy::Lfu(SingleTier::new(Lfu::new(c, capacity), capacity, filters))
            }
            PolicyConfig::Arc => {
                AnyPolicy::Arc(SingleTier::new(Arc::new(capacity), capacity, filters))
            }
            PolicyConfig::S3fifo(c) => {
                AnyPolicy::S3fifo(SingleTier::new(S3Fifo::new(c, capacity), capacity, filters))
            }
            PolicyConfig::Lfru(c) => {
                AnyPolicy::Lfru(SingleTier::new(Lfru::new(c, capacity), capacity, filters))
            }
            PolicyConfig::Belady => {
                AnyPolicy::Belady(SingleTier::new(Belady::new(capacity), capacity, filters))
            }
            PolicyConfig::Setassoc(c) => {
                c.check_capacity(capacity)?;
                AnyPolicy::Setassoc(SingleTier::new(SetAssoc::new(c, capacity), capacity, filters))
            }
        })
    }
}

impl AnyPolicy {
    /// The Open CAS mode the policy runs in, if it runs in one.
    pub fn cache_mode(&self) -> Option<crate::cas::CacheMode> {
        match self {
            AnyPolicy::Cas(cas) => Some(cas.mode()),
            _ => None,
        }
    }
}

impl AnyPolicy {
    /// Hibachi over DRAM (`capacities[0]`) and NVRAM (`capacities[1]`), both in pages.
    pub fn hibachi(
        config: &HibachiConfig,
        capacities: [Capacity; 2],
    ) -> Result<AnyPolicy, PolicyError> {
        check_pages("hibachi", &capacities)?;
        Ok(AnyPolicy::Hibachi(Box::new(Hibachi::new(config.clone(), capacities))))
    }

    /// Hibachi's Hybrid-ARC baseline over DRAM and NVRAM, both in pages.
    pub fn hybrid_arc(capacities: [Capacity; 2]) -> Result<AnyPolicy, PolicyError> {
        check_pages("hybrid-arc", &capacities)?;
        Ok(AnyPolicy::HybridArc(Box::new(HybridArc::new(capacities))))
    }

    /// This policy behind NVCache's admission.
    pub fn with_nvcache(self, config: crate::nvcache::NvcacheConfig) -> AnyPolicy {
        AnyPolicy::Nvcache(Box::new(crate::nvcache::Nvcache::new(self, config)))
    }

    /// This policy with non-hierarchical caching's decision points and scheduler on top.
    pub fn with_nhc(self, config: crate::nhc::NhcConfig, seed: u64) -> AnyPolicy {
        AnyPolicy::Nhc(Box::new(crate::nhc::Nhc::new(self, config, seed)))
    }

    /// This policy run in an Open CAS cache mode.
    pub fn in_mode(self, config: CasConfig) -> AnyPolicy {
        AnyPolicy::Cas(Box::new(Cas::new(self, config)))
    }

    /// Two tiers as an exclusive DRAM-first hierarchy: `upper` runs tier 0, `lower` tier 1.
    pub fn dram_first(
        upper: &PolicyConfig,
        lower: &PolicyConfig,
        capacities: [Capacity; 2],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        AnyPolicy::hybrid(Placement::DramFirst, upper, lower, capacities, admission, seed)
    }

    /// Two tiers as an exclusive hierarchy with one of Kassa et al.'s placements.
    pub fn hybrid(
        placement: Placement,
        upper: &PolicyConfig,
        lower: &PolicyConfig,
        capacities: [Capacity; 2],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        let tiers = [(upper.clone(), capacities[0]), (lower.clone(), capacities[1])];
        AnyPolicy::hierarchy(placement, &tiers, admission, seed)
    }

    /// Two or more tiers from the top (DRAM) down, each a single-tier policy with its
    /// capacity: each tier's victims move to the tier below; the last tier's are dropped.
    /// Placements that promote move a block hit often enough in any lower tier to the top.
    pub fn hierarchy(
        placement: Placement,
        tiers: &[(PolicyConfig, Capacity)],
        admission: &[AdmissionConfig],
        seed: u64,
    ) -> Result<AnyPolicy, PolicyError> {
        if tiers.len() < 2 || tiers.len() > MAX_TIERS {
            return Err(PolicyError::bad(
                "hierarchy",
                "tiers",
                format!("{} tiers: a hierarchy has 2 to {MAX_TIERS}", tiers.len()),
            ));
        }
        for (_, c) in tiers {
            if c.amount == 0 {
                return Err(PolicyError::ZeroCapacity { unit: c.unit.as_str() });
            }
        }
        let evictions = tiers
            .iter()
            .map(|(config, capacity)| config.eviction(*capacity))
            .collect::<Result<_, _>>()?;
        let capacities: Vec<Capacity> = tiers.iter().map(|(_, c)| *c).collect();
        let filters = Admission::new(admission, capacities[0], seed);
        Ok(AnyPolicy::Hybrid(Box::new(Hybrid::new(evictions, capacities, filters, placement))))
    }
}

/// The most tiers a hierarchy may have.
pub const MAX_TIERS: usize = 8;

fn check_pages(policy: &str, capacities: &[Capacity; 2]) -> Result<(), PolicyError> {
    for c in capacities {
        if c.unit != tiercache_core::Unit::Objects {
            return Err(PolicyError::bad(
                policy,
                "unit",
                "counts pages: use capacities in objects",
            ));
        }
        if c.amount == 0 {
            return Err(PolicyError::ZeroCapacity { unit: c.unit.as_str() });
        }
    }
    Ok(())
}

impl Policy for AnyPolicy {
    fn peek(&self, key: tiercache_core::Key) -> Option<(TierId, u32)> {
        dispatch!(self, p => p.peek(key))
    }

    fn tick(&mut self, now_us: u64, out: &mut Decision) {
        dispatch!(self, p => p.tick(now_us, out))
    }

    fn observe(&mut self, interval: &tiercache_core::Interval) {
        dispatch!(self, p => p.observe(interval))
    }

    #[inline]
    fn prefetch(&self, key: tiercache_core::Key) {
        dispatch!(self, p => p.prefetch(key))
    }

    #[inline]
    fn decide(&mut self, req: &Request, out: &mut Decision) {
        dispatch!(self, p => p.decide(req, out))
    }

    fn restore(
        &mut self,
        key: tiercache_core::Key,
        size: u32,
        tier: TierId,
        dirty: bool,
        out: &mut Decision,
    ) -> bool {
        dispatch!(self, p => p.restore(key, size, tier, dirty, out))
    }

    fn write_back(&mut self, tier: Option<TierId>, out: &mut Decision) {
        dispatch!(self, p => p.write_back(tier, out))
    }

    fn persist(&mut self, tier: TierId, below: Option<TierId>, now_us: u64, out: &mut Decision) {
        dispatch!(self, p => p.persist(tier, below, now_us, out))
    }

    fn move_down(
        &mut self,
        key: tiercache_core::Key,
        to: TierId,
        now_us: u64,
        out: &mut Decision,
    ) -> bool {
        dispatch!(self, p => p.move_down(key, to, now_us, out))
    }

    fn tier_count(&self) -> usize {
        dispatch!(self, p => p.tier_count())
    }

    fn capacity(&self, tier: TierId) -> Capacity {
        dispatch!(self, p => p.capacity(tier))
    }

    fn used(&self, tier: TierId) -> u64 {
        dispatch!(self, p => p.used(tier))
    }

    fn resident(&self, tier: TierId) -> u64 {
        dispatch!(self, p => p.resident(tier))
    }

    fn placement(&mut self, tier: TierId) -> Option<&mut crate::setassoc::SetAssoc> {
        dispatch!(self, p => p.placement(tier))
    }

    fn placement_ref(&self, tier: TierId) -> Option<&crate::setassoc::SetAssoc> {
        dispatch!(self, p => p.placement_ref(tier))
    }

    fn label(&self) -> String {
        dispatch!(self, p => p.label())
    }

    fn knobs(&self) -> Vec<(&'static str, f64)> {
        dispatch!(self, p => p.knobs())
    }

    fn quiet_hits(&self) -> bool {
        match self {
            AnyPolicy::Fifo(_)
            | AnyPolicy::Lru(_)
            | AnyPolicy::Clock(_)
            | AnyPolicy::Lfu(_)
            | AnyPolicy::Arc(_)
            | AnyPolicy::S3fifo(_)
            | AnyPolicy::Setassoc(_) => true,
            AnyPolicy::Cas(cas) => cas.quiet_hits(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_parameters() {
        assert_eq!(PolicyConfig::parse("LRU").unwrap(), PolicyConfig::Lru);
        let clock = PolicyConfig::parse("clock:bits=2").unwrap();
        assert_eq!(clock, PolicyConfig::Clock(ClockConfig { bits: 2 }));
        let lfu = PolicyConfig::parse("lfu:aging_threshold=none").unwrap();
        assert_eq!(lfu, PolicyConfig::Lfu(LfuConfig { aging_threshold: None }));
    }

    #[test]
    fn errors_name_the_policy_and_the_key() {
        let err = PolicyConfig::parse("lru2").unwrap_err().to_string();
        assert!(err.contains("lru2") && err.contains("s3fifo"), "{err}");
        let err = PolicyConfig::parse("clock:bits=9").unwrap_err().to_string();
        assert!(err.contains("clock") && err.contains("bits"), "{err}");
        let err = PolicyConfig::parse("arc:p=3").unwrap_err().to_string();
        assert!(err.contains("'p'"), "{err}");
        let err = PolicyConfig::parse("clock:bits=two").unwrap_err().to_string();
        assert!(err.contains("two"), "{err}");
    }

    #[test]
    fn zero_capacity_is_refused() {
        let err = AnyPolicy::from_config(&PolicyConfig::Lru, Capacity::objects(0), &[], 0);
        assert!(err.is_err());
    }
}
